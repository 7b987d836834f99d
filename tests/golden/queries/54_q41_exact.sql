-- compare: exact
SELECT URLHash, EventDate, COUNT(*) AS PageViews FROM hits WHERE TraficSourceID IN (-1, 6) AND RefererHash = 3594120000172545465 AND IsRefresh = 0 GROUP BY URLHash, EventDate ORDER BY PageViews DESC, URLHash, EventDate LIMIT 10 OFFSET 5;
