-- Instances of one tile (MPerBlock x NPerBlock x KPerBlock), at most 51.
SELECT id, template, list_name, dir, tile_m, tile_n, tile_k, status
FROM instances
WHERE tile_m = :m AND tile_n = :n AND tile_k = :k
ORDER BY status != 'active', dir, list_name, line
LIMIT 51
