-- title: aiter audit findings
-- description: Findings of the aiter config audit stored at build time, counted by rule, severity and file (empty parameter = all), with the first line and message of each group.
-- params: rule, severity, file
select
  rule,
  severity,
  file,
  op,
  count(*) as findings,
  min(line) as first_line,
  min(message) as example
from aiter_audit_findings
where (:rule is null or :rule = '' or rule = :rule)
  and (:severity is null or :severity = '' or severity = :severity)
  and (:file is null or :file = '' or file = :file)
group by rule, severity, file, op
order by case severity when 'error' then 0 when 'warning' then 1 else 2 end, rule, file
