-- compare: exact
SELECT CounterID, AVG(length(URL)) AS l, COUNT(*) AS c FROM hits WHERE URL <> '' GROUP BY CounterID HAVING COUNT(*) > 1000 ORDER BY l DESC, CounterID LIMIT 25;
