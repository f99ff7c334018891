-- Every name schema with tokens, for ckkb.names.load_schemas.
select * from name_schemas where status != 'unsupported' order by id
