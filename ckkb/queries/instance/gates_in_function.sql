-- Every gate in one add function of one file (when a registration's conditions name no line).
SELECT * FROM gates WHERE file = :file AND function = :function ORDER BY line
