"""Two trees side by side: what changed between CK or aiter versions (`ckkb diff`) and what a
config change does to tuned rows (`ckkb review`). Reads the knowledge base, one tree per scoped
connection (ckkb.kb.trees), and the audit."""
