-- The CK trees of the knowledge base in build order, for ckkb.queries.name_trees.
select id, version, path from sources where kind = 'ck' order by id
