-- compare: exact
SELECT COUNT(DISTINCT SearchPhrase) FROM hits;
