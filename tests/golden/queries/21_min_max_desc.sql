-- compare: exact
SELECT TraficSourceID, MAX(ResolutionWidth) AS mx, MIN(ClientIP) FROM hits GROUP BY TraficSourceID ORDER BY mx DESC, TraficSourceID;
