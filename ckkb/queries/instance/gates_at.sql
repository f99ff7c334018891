-- Gates at one source line (a registration condition names its file and line).
SELECT * FROM gates WHERE file = :file AND line = :line
