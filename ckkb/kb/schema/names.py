"""Tables for the names part of the knowledge base (declared with @table; see base.py)."""

from __future__ import annotations
