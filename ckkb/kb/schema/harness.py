"""Tables for the harness part of the knowledge base (declared with @table; see base.py)."""

from __future__ import annotations
