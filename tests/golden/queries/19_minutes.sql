-- compare: exact
SELECT extract(minute FROM EventTime) AS m, COUNT(*), SUM(IsRefresh) FROM hits WHERE EventTime >= '2013-07-15 00:00:00' GROUP BY m ORDER BY m;
