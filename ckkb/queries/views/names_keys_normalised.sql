-- Instance keys with the normalised cross-op columns (padding, layouts, block size, tile M/N/K, MFMA M/N, waves M/N, vector widths, scheduler, pipeline) and the instance's list and file:line, one row per (instance, registration binding): compare winners across device ops in one query.
CREATE VIEW names_keys_normalised AS
SELECT k.op, k.device_op, k.padding, k.a_layout, k.b_layout, k.c_layout, k.block_size,
       k.tile_m, k.tile_n, k.tile_k, k.mfma_m, k.mfma_n, k.waves_m, k.waves_n, k.xdl_m, k.xdl_n,
       k.a_vec, k.b_vec, k.scheduler, k.pipeline, k.printed_name, k.key,
       k.instance_id, k.registration_id, k.list_name, k.file, k.line
FROM instance_keys k;
