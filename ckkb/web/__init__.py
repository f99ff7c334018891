"""The web surface: Datasette metadata, the ckkb Datasette plugin (explain page, charts) and `ckkb serve`.

Everything here formats; the questions themselves are SQL files under ckkb/queries/ (kept once,
shared with the CLI).
"""
