-- compare: exact
SELECT SUM(UserID), SUM(WatchID), SUM(ResolutionWidth), COUNT(*) FROM hits WHERE CounterID = 62;
