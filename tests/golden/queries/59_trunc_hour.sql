-- compare: exact
SELECT DATE_TRUNC('hour', EventTime) AS h, COUNT(DISTINCT UserID) AS u, MAX(URL) AS mu FROM hits WHERE EventTime < '2013-07-03 00:00:00' GROUP BY h HAVING COUNT(*) > 10 AND MAX(ResolutionWidth) > 100 ORDER BY u DESC, h LIMIT 20;
