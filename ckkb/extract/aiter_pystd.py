"""What aiter's kernel-list modules use of Python and its standard library beyond expressions,
modelled for a static run (never executed): `try`/`except` over exceptions the model raises,
`os.environ` (read as set by no one), `math`, `functools` caches and `torch.cuda` on a host with
no device.

aiter 2026's FlyDSL a8w8 bpreshuffle lists (aiter/ops/flydsl/gemm_tune/) are built by code that
asks `get_gfx()` (its own: `GPU_ARCHS` from the environment, else `chip_info.get_gfx` imported in
a `try`), sizes tiles with `math.ceil`, and reads the LDS size with `torch.cuda` inside
`try: ... except Exception:` (the module says it "must remain importable without flydsl: the
tuner reads it to name candidates on hosts that cannot compile"). The model is that host: the
arch is the row's gfx, the environment sets nothing, and each `torch.cuda` call raises, which
the module's own `except` handles with its fallback. A `try` whose body ckkb cannot follow stays
unknown (`Unsupported`); only an exception the model raises (`Raised`) reaches a handler.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ckkb.extract.aiter_pyeval import Unsupported, dotted
from ckkb.extract.lazy import lazy_module

cst = lazy_module("libcst")

IMPORTS = " imports"  # env key (no identifier has a space) of the module's import hook


class Raised(Unsupported):
    """An exception the modelled code raises (`kind` is the builtin exception's name): a
    matching `except` runs; uncaught, it leaves what it would bind unknown, as Unsupported."""

    def __init__(self, kind: str, what: str) -> None:
        super().__init__(cst.Name(kind), f"{kind}: {what}")
        self.kind = kind


def _catches(handler: Any, kind: str) -> bool:
    if handler.type is None:
        return True
    types = (
        [e.value for e in handler.type.elements]
        if isinstance(handler.type, cst.Tuple)
        else [handler.type]
    )
    raised = getattr(builtins, kind, None)
    for t in types:
        name = t.attr.value if isinstance(t, cst.Attribute) else getattr(t, "value", None)
        cls = getattr(builtins, name, None) if isinstance(name, str) else None
        if isinstance(cls, type) and isinstance(raised, type) and issubclass(raised, cls):
            return True
    return False


def exec_try(interp: Any, s: Any) -> None:
    """`try` run as Python runs it, over the exceptions the model raises (see Raised)."""
    if s.finalbody is not None:
        raise Unsupported(s, "try/finally is not modelled")
    try:
        interp.exec_block(s.body.body)
    except Raised as e:
        h = next((h for h in s.handlers if _catches(h, e.kind)), None)
        if h is None:
            raise
        if h.name is not None:
            raise Unsupported(h, "except ... as NAME is not modelled") from None
        interp.exec_block(h.body.body)
        return
    if s.orelse is not None:
        interp.exec_block(s.orelse.body.body)


@dataclass
class Native:
    """A function ckkb models instead of reading (aiter's `get_gfx`: the arch explored)."""

    f: Callable[..., Any]


def _native(f: Callable[..., Any]) -> Native:
    return Native(f)


class Environ:
    """`os.environ` on the modelled host: no variable is set."""

    def static_attr(self, name: str, node: Any) -> Any:
        if name == "get":
            return _native(lambda key, default=None: default)
        raise Unsupported(node, f"os.environ.{name} is not modelled")

    def __contains__(self, key: object) -> bool:
        return False


class Os:
    def static_attr(self, name: str, node: Any) -> Any:
        if name == "environ":
            return Environ()
        if name == "getenv":
            return _native(lambda key, default=None: default)
        raise Unsupported(node, f"os.{name} is not modelled")


_MATH = frozenset(("ceil", "floor", "sqrt", "isqrt", "log", "log2", "gcd", "lcm", "prod", "pow"))


class Math:
    def static_attr(self, name: str, node: Any) -> Any:
        if name in _MATH:
            return _native(getattr(math, name))
        if name in ("inf", "pi", "e"):
            return getattr(math, name)
        raise Unsupported(node, f"math.{name} is not modelled")


class NoDevice:
    """`torch.cuda` on a host with no device: `is_available()` is False, `device_count()` 0,
    any other call raises RuntimeError (what the modules' `except Exception` expects)."""

    def static_attr(self, name: str, node: Any) -> Any:
        if name == "is_available":
            return _native(lambda: False)
        if name == "device_count":
            return _native(lambda: 0)

        def fail(*args: Any, **kwargs: Any) -> Any:
            raise Raised("RuntimeError", f"torch.cuda.{name}(): no device in a static run")

        return _native(fail)


STD_MODULES: dict[str, Any] = {"os": Os, "math": Math}

# a cached function returns what the function returns: the decorator changes nothing read here
_CACHES = frozenset(("cache", "lru_cache", "functools.cache", "functools.lru_cache"))


def transparent(decorators: Any) -> bool:
    """Every decorator is a functools cache (`@cache`, `@lru_cache(maxsize=1)`)."""
    for d in decorators:
        node = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if dotted(node) not in _CACHES:
            return False
    return True
