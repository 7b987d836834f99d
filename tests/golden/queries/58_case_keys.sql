-- compare: exact
SELECT CASE WHEN ResolutionWidth >= 1900 THEN 'wide' WHEN ResolutionWidth >= 1200 THEN 'mid' WHEN ResolutionWidth > 0 THEN 'narrow' END AS w, CASE WHEN TraficSourceID IN (0, 1, 2) THEN 1 ELSE 0 END AS t, COUNT(*) AS c, COUNT(DISTINCT SearchPhrase) AS p, SUM(CASE WHEN IsRefresh = 1 THEN 1 ELSE 0 END) AS r FROM hits GROUP BY w, t ORDER BY c DESC, w, t;
