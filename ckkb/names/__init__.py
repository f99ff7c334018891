"""CK instance names: parse what GetTypeString() prints, map it to CK's template parameter names.

Two layers:

1. The shape of every name (op, template arguments, `Key: value` properties) is defined by ONE
   grammar, `grammars/instance_name.lark` (LALR, `grammar`). `reader` reads it: the grammar's own
   parse is the reference, one regular expression for the common shapes the fast path.
2. Each device op's name schema (`schemas`), extracted from its GetTypeString() by
   `ckkb.extract.typestrings` and stored in the knowledge base (`name_schemas`), maps the printed
   values to the parameter names the instance extractor uses (`BlockSize`, `MPerBlock`, ...).

`parse` (`parsed`) never raises on a bad name: the result has schema "error", a message and a
position. Results are memoised per (name, schema set). Questions over the knowledge base that use
names (`locate`, `coverage`) are in `ckkb.queries.names`.
"""

from ckkb.names.grammar import Token, grammar_text, lark_parser
from ckkb.names.parsed import MAX_NAME_CHARS, ParsedName, parse, parse_many
from ckkb.names.schemas import NameSchema, SchemaSet, load_schemas, schema_from_row

__all__ = [
    "MAX_NAME_CHARS",
    "NameSchema",
    "ParsedName",
    "SchemaSet",
    "Token",
    "grammar_text",
    "lark_parser",
    "load_schemas",
    "parse",
    "parse_many",
    "schema_from_row",
]
