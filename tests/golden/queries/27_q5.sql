-- compare: exact
SELECT COUNT(DISTINCT UserID) FROM hits;
