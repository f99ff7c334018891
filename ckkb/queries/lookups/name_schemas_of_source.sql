-- The name schemas with tokens of one tree (its sources.id), for ckkb.names.load_schemas.
select * from name_schemas where status != 'unsupported' and source_id = :source_id order by id
