-- compare: exact
SELECT WatchID, EventTime, URL FROM hits WHERE URL LIKE '%google%' ORDER BY EventTime, WatchID LIMIT 10;
