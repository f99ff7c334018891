-- Each aiter kernel-list entry, per op whose tuned rows may index its list, with the number of tuned config rows that select it (as the audit resolves each row: ckkb.audit.kernel_choice.resolve); then each kernel reference the audit checked against a list it builds itself or that no entry of a stored list holds (opus, FlyDSL: file and list_name from aiter_row_kernels.reason, name as the row writes it, line NULL; a MoE name no getter builds: list_name names the getters, file NULL). tuned_rows adds up to every checked reference.
CREATE VIEW aiter_kernel_usage AS
SELECT
  k.op AS kernel_dir, k.file, k.line, k.list_name, k.kernel_id, k.name,
  k.tile_m, k.tile_n, k.tile_k, k.pipeline, k.scheduler,
  u.op AS op, k.list_id, l.arch_when AS list_arch_when, u.choice_case AS list_case,
  (SELECT count(*) FROM aiter_row_kernels r
     WHERE r.op = u.op AND r.list_id = k.list_id AND r.kernel_id = k.kernel_id
       AND r.status = 'checked' AND r.source_id = k.source_id) AS tuned_rows
FROM aiter_kernels k
JOIN aiter_op_kernel_lists u ON u.list_id = k.list_id AND u.source_id = k.source_id
JOIN aiter_kernel_lists l ON l.id = k.list_id AND l.source_id = k.source_id
WHERE k.shadowed = 0
UNION ALL
SELECT
  NULL AS kernel_dir,
  CASE WHEN instr(r.reason, ', ') = 0 THEN substr(r.reason, 1, instr(r.reason, ':') - 1) END
    AS file, NULL AS line,
  CASE WHEN instr(r.reason, ', ') = 0 THEN substr(r.reason, instr(r.reason, ':') + 1)
    ELSE r.reason END AS list_name, r.kernel_id, r.kernel_name AS name,
  NULL AS tile_m, NULL AS tile_n, NULL AS tile_k, NULL AS pipeline, NULL AS scheduler,
  r.op, r.list_id, NULL AS list_arch_when, NULL AS list_case, count(*) AS tuned_rows
FROM aiter_row_kernels r
WHERE r.status = 'checked'
  AND NOT EXISTS (
    SELECT 1 FROM aiter_kernels k
    JOIN aiter_op_kernel_lists u ON u.list_id = k.list_id AND u.source_id = k.source_id
    WHERE k.list_id = r.list_id AND k.kernel_id = r.kernel_id AND k.shadowed = 0
      AND u.op = r.op AND k.source_id = r.source_id)
GROUP BY r.source_id, r.op, r.reason, r.list_id, r.kernel_id, r.kernel_name;
