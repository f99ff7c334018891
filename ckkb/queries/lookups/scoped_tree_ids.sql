-- The ids of the trees this connection reads: `sources` is scoped to them (ckkb.kb.trees.scope).
SELECT id FROM sources WHERE kind IN ('ck', 'aiter') ORDER BY id
