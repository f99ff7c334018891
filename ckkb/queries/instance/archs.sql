-- The archs the tree names, in the tree's order (length, then name: gfx908 < gfx90a < gfx942 <
-- gfx1100), for the explain page's per-arch table.
SELECT arch FROM tree_archs ORDER BY length(arch), arch
