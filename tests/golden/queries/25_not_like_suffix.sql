-- compare: exact
SELECT COUNT(*), SUM(IsRefresh) FROM hits WHERE (URL NOT LIKE '%1' AND Referer LIKE '%google%' AND Title NOT LIKE '%а%') OR SearchPhrase LIKE 'ab%' OR Title LIKE '';
