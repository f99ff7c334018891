-- Tiles (MPerBlock x NPerBlock x KPerBlock) of active instances, most common first.
SELECT tile_m || 'x' || tile_n || 'x' || tile_k AS value, count(*) AS n FROM instances
WHERE status = 'active' AND tile_m > 0 AND tile_n > 0 AND tile_k > 0
GROUP BY tile_m, tile_n, tile_k ORDER BY n DESC
