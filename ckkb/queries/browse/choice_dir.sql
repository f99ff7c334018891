-- Directories under gpu/ that hold instances (the dir dropdowns).
SELECT DISTINCT dir AS value FROM instances WHERE dir IS NOT NULL AND dir != '' ORDER BY dir
