-- compare: exact
SELECT RegionID, COUNT(*) AS c FROM hits GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10;
