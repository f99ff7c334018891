-- Archs the knowledge base evaluated (the arch dropdowns): the targets the tree's CMake builds
-- (tree_archs.evaluated), in the tree's order (length, then name: gfx908 < gfx90a < gfx1100).
SELECT arch AS value FROM tree_archs WHERE evaluated = 1 ORDER BY length(arch), arch
