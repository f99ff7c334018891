-- Each aiter kernel-list entry, per op whose tuned rows may index its list, with the number of tuned config rows that select it (as the audit resolves each row: ckkb.audit.kernel_choice.resolve).
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
WHERE k.shadowed = 0;
