-- One instance row (the explain page's heading and fields).
SELECT * FROM instances WHERE id = :id
