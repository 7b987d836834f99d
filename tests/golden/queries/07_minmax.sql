-- compare: exact
SELECT CounterID, COUNT(*), MIN(EventDate), MAX(EventTime), MIN(ResolutionWidth), MAX(UserID) FROM hits WHERE CounterID < 100 GROUP BY CounterID ORDER BY CounterID LIMIT 20;
