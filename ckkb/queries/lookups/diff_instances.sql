-- Instance rows by id (a JSON array :ids) for `ckkb diff`'s items: fields and data types.
SELECT i.id, i.template, i.dir, i.list_name, i.status, i.fields, i.resolved,
       i.a_dtype, i.b_dtype, i.c_dtype, i.tile_m, i.tile_n, i.tile_k
FROM instances i
WHERE i.id IN (SELECT value FROM json_each(:ids))
