-- Per shape (op, dtype, layout, M, N, K) raced on more than one arch: each arch's winner and whether the winner moved between archs.
CREATE VIEW races_winner_moves AS
WITH per_arch AS (
    SELECT op, dtype, layout, M, N, K, arch, winner, best, id,
           row_number() OVER (PARTITION BY op, dtype, layout, M, N, K, arch ORDER BY best DESC, id DESC) AS rn
    FROM races_summary
    WHERE arch IS NOT NULL AND winner IS NOT NULL AND M IS NOT NULL
)
SELECT op, dtype, layout, M, N, K,
       count(*) AS archs,
       group_concat(arch || ': ' || winner, ' | ') AS winners,
       CASE WHEN count(DISTINCT winner) > 1 THEN 1 ELSE 0 END AS winner_moved
FROM per_arch
WHERE rn = 1
GROUP BY op, dtype, layout, M, N, K
HAVING count(*) > 1;
