-- One instance by id (a number typed in the search box).
SELECT id, template, list_name, dir, tile_m, tile_n, tile_k, status FROM instances WHERE id = :id
