-- compare: exact
SELECT COUNT(*), SUM(ResolutionWidth % 7), MAX(ResolutionWidth / 3), AVG(ResolutionWidth - 1), SUM(ResolutionWidth * 2 - 1), MIN(Title), MAX(SearchPhrase) FROM hits WHERE ResolutionWidth * 2 + 1 > 2000 AND URL LIKE 'http://%.ru/%' AND TraficSourceID NOT IN (1, 2) AND NOT (IsRefresh BETWEEN 1 AND 5);
