"""ckkb.fleet: `ckkb race` and `ckkb harness` on every GPU of a host (`--gpus`) or of a Dask
cluster (`--scheduler`), through Dask distributed (the optional extra `ckkb[fleet]`).

Nothing here imports Dask at module level: `gpus` (discovery, pinning) is plain Python, `tasks`
runs on the workers, and `driver` imports Dask inside its functions, after `require_dask()` has
said in one line what to install when it is missing.
"""
