-- compare: exact
SELECT SearchPhrase, COUNT(*) AS c FROM hits WHERE URL LIKE 'http://yandex%' AND SearchPhrase <> '' GROUP BY SearchPhrase ORDER BY c DESC, SearchPhrase LIMIT 10;
