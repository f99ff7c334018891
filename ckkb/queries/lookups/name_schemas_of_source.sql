-- The name schemas with tokens of one tree (its sources.id), for ckkb.names.load_schemas: from
-- main, so a connection scoped to another tree (ckkb.kb.trees.scope) still reads every tree's.
select * from main.name_schemas where status != 'unsupported' and source_id = :source_id order by id
