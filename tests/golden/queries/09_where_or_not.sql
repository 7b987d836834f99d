-- compare: exact
SELECT SearchEngineID, COUNT(*) AS c FROM hits WHERE (SearchEngineID = 2 OR SearchEngineID = 3) AND NOT (IsRefresh = 1) GROUP BY SearchEngineID ORDER BY SearchEngineID;
