-- compare: exact
SELECT 1, RegionID, RegionID + 1 AS r1, COUNT(*) AS c, SUM(ResolutionWidth) / COUNT(*) AS avg_w, MAX(ResolutionWidth) - MIN(ResolutionWidth) AS spread FROM hits GROUP BY RegionID ORDER BY spread DESC, c DESC, RegionID LIMIT 10;
