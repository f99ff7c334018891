"""`ckkb audit`: rules over aiter config CSVs and kernel lists, one module per rule family.

model (findings, rule catalogue), context (what an audit reads), rules_* (the families), engine
(runs them), writers (text, JSON, SARIF 2.1.0).
"""
