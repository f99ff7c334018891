-- What the aiter kernel-list and tuner readers reported, in the order the build met it.
SELECT * FROM diagnostics
WHERE stage IN ('aiter.kernels', 'aiter.tuners')
ORDER BY rowid;
