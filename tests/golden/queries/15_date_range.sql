-- compare: exact
SELECT EventDate, COUNT(*) FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' GROUP BY EventDate ORDER BY EventDate;
