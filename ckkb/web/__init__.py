"""The web surface: Datasette metadata, the ckkb Datasette plugin (landing page, shaped canned-query
pages, explain page, charts, search) and `ckkb serve`.

Everything here formats; the questions themselves are SQL files under ckkb/queries/ (kept once,
shared with the CLI).
"""
