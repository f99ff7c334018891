"""Deferred imports for heavy parsers (libcst costs ~0.6 s to import).

A warm `ckkb build` only lists files and compares hashes; it must not pay for importing the
parsers that only a cache miss needs.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands in for a module; imports it on the first attribute access."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        value = getattr(self._module, attr)
        # kept on the stand-in: the next look-up is a plain attribute (the static evaluator
        # asks for libcst's node classes about a million times on aiter 2026)
        setattr(self, attr, value)
        return value


def lazy_module(name: str) -> Any:
    return LazyModule(name)
