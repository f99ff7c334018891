-- C++ element types of GEMMs whose A, B and C types are the same (pool_counts' dtype dropdown).
SELECT a_dtype AS value, count(*) AS n FROM instances
WHERE a_dtype = b_dtype AND a_dtype = c_dtype AND a_dtype GLOB '[a-z]*'
GROUP BY a_dtype ORDER BY n DESC
