-- Per (instance, arch) of the instances a JSON array :ids names: whether some registering call
-- adds it (the ck_instance_availability view's answer), for `ckkb diff`'s added and removed items.
SELECT instance_id, arch, max(available) AS available
FROM ck_instance_availability
WHERE instance_id IN (SELECT value FROM json_each(:ids))
GROUP BY instance_id, arch
