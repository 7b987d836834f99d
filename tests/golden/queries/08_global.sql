-- compare: exact
SELECT COUNT(*), SUM(AdvEngineID), AVG(ResolutionWidth), MIN(EventDate), MAX(EventDate), AVG(UserID) FROM hits;
