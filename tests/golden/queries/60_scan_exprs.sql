-- compare: exact
SELECT URL, length(URL) + 1 AS l, CASE WHEN IsRefresh = 1 THEN 'r' ELSE 'n' END AS r, ResolutionWidth / 2 AS h, DATE_TRUNC('hour', EventTime) AS t FROM hits WHERE URL LIKE '%google%' AND ResolutionWidth * 2 > 2000 ORDER BY l DESC, URL, EventTime, IsRefresh, ResolutionWidth LIMIT 10;
