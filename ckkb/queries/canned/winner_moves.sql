-- title: Winner moves
-- description: Same shape (op, dtype, layout, M, N, K), different arch, different winner: pairs of races whose fastest instance differs between GPU architectures.
-- params:
SELECT a.op, a.dtype, a.layout, a.M, a.N, a.K,
       a.arch AS arch_a, a.id AS race_a, a.winner AS winner_a, a.best AS best_a,
       b.arch AS arch_b, b.id AS race_b, b.winner AS winner_b, b.best AS best_b
FROM races_summary a
JOIN races_summary b
  ON a.op IS b.op AND a.dtype IS b.dtype AND a.layout IS b.layout
 AND a.M = b.M AND a.N = b.N AND a.K = b.K
 AND a.arch < b.arch
WHERE a.winner IS NOT NULL AND b.winner IS NOT NULL AND a.winner != b.winner
ORDER BY a.op, a.M, a.N, a.K, a.arch, b.arch;
