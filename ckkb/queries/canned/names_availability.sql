-- title: Per-arch availability of one registration
-- description: For registration `registration_id`: on each arch, whether it adds its list, and if not the first layer that removes it (build, preprocessor, registration, capability) with file and line.
-- params: registration_id
SELECT arch, available, layer, file, line, condition
FROM availability
WHERE registration_id = :registration_id
ORDER BY arch
