"""Tables for the profiler part of the knowledge base (declared with @table; see base.py)."""

from __future__ import annotations
