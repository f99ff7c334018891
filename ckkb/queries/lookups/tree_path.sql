-- The path of the tree of a kind that this connection reads (its scoped tree; see ckkb.kb.trees).
SELECT path FROM sources WHERE kind = :kind ORDER BY id LIMIT 1
