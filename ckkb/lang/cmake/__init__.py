"""CMake: `syntax` (commands and statement tree), `conditions` (if() conditions: Lark grammar
`grammars/cmake_condition.lark`, their one evaluator) and `interpreter` (runs statements over
string variables)."""
