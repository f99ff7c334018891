-- How many races timed this op and shape (dtype and layout when given).
SELECT count(*) AS n FROM races
WHERE op = :op AND M = :M AND N = :N AND K = :K
  AND (:dtype IS NULL OR dtype = :dtype)
  AND (:layout IS NULL OR layout = :layout);
