-- title: Gate census
-- description: Guards around registrations, counted per directory under gpu/, kind, effect (exclude: the guarded adds do not happen on the arch; only: they happen only there) and arch. `kind` and `arch` filter (empty = all).
-- params: kind, arch
SELECT dir, kind, effect, arch, count(*) AS gates, sum(has_else) AS with_else
FROM gates
WHERE (:kind = '' OR kind = :kind) AND (:arch = '' OR arch = :arch)
GROUP BY dir, kind, effect, arch
ORDER BY dir, kind, effect, arch;
