-- compare: exact
SELECT 1, COUNT(*) + 1, AVG(IsRefresh), MAX(EventTime), COUNT(DISTINCT RegionID) * 2 AS d2 FROM hits WHERE SearchPhrase <> '';
