"""Instance-list expressions: the small picklable trees `instance_reader` makes of C++
template arguments, and their resolution against a file's aliases (`Resolver`), then the mapping
of resolved positional arguments to a device op's template parameter names (`map_fields`)."""

from __future__ import annotations

from typing import Any

from ckkb import fields as ckfields

# ("int", v) | ("bool", v) | ("name", s) | ("tmpl", name, (Expr, ...)) | ("pack", s)
# | ("bin", op, a, b) | ("neg", a) | ("text", s)
Expr = tuple

_NS_PREFIXES = (
    "ck::tensor_operation::device::instance::",
    "ck::tensor_operation::device::",
    "ck::tensor_operation::",
    "ck::",
)


def short(name: str) -> str:
    """Spell a qualified name the way CK's instance files do inside
    `ck::tensor_operation::device::instance`."""
    for p in _NS_PREFIXES:
        if name.startswith(p):
            return name[len(p) :]
    return name


_MISS = object()


class Resolver:
    """Resolve expression trees with an alias environment (a file's aliases over its includes')."""

    def __init__(
        self,
        env: dict[str, dict],
        tparams: set[str],
        bindings: dict[str, Any] | None = None,
        memo: dict | None = None,
    ):
        self.env = env
        self.tparams = tparams
        self.bindings = (
            bindings or {}
        )  # template parameter -> value, when a list alias instantiates a list
        # expression -> value: the same `S<1, 0, 2>` recurs thousands of times. Given, it is shared
        # by every list of one file with the same parameters; a resolver with bindings (a list
        # alias's) keeps its own. Values are shared, never mutated.
        self.memo: dict = memo if memo is not None and not self.bindings else {}

    def lookup(self, name: str) -> dict | None:
        if name in self.tparams:
            return None
        hit = self.env.get(name)
        if hit is None and "::" in name:
            hit = self.env.get(short(name))
        return hit

    def __call__(self, e: Expr, depth: int = 0) -> Any:
        memo = self.memo
        try:
            return memo[e]
        except KeyError:
            v = memo[e] = self._resolve(e, depth)
            return v
        except TypeError:  # an unhashable expression (a bound pack): no memo
            return self._resolve(e, depth)

    def all(self, exprs: tuple[Expr, ...]) -> list[Any]:
        """[self(e) for e in exprs], with the memo read inline: 475,000 arguments go through
        here."""
        get = self.memo.get
        out = []
        try:
            for e in exprs:
                v = get(e, _MISS)
                out.append(self(e) if v is _MISS else v)
        except TypeError:  # an unhashable expression (a bound pack)
            return [self(e) for e in exprs]
        return out

    def _resolve(self, e: Expr, depth: int) -> Any:
        if depth > 40:
            return fmt(e)
        kind = e[0]
        if kind in ("int", "bool"):
            return e[1]
        if kind == "name":
            if e[1] in self.bindings:
                return self.bindings[e[1]]
            hit = self.lookup(e[1])
            if hit is not None and "params" not in hit and hit["expr"] != e:
                return self(hit["expr"], depth + 1)
            return short(e[1])
        if kind == "tmpl":
            name, args = e[1], e[2]
            hit = self.lookup(name)
            if hit is not None and "params" in hit:
                return self(substitute(hit["expr"], hit["params"], args), depth + 1)
            if hit is not None and hit["expr"][0] == "name":
                name = self(hit["expr"], depth + 1)  # using Seq = ck::Sequence; (rare)
            vals = [self(a, depth + 1) for a in args]
            if short(str(name)).rsplit("::", 1)[-1] == "Sequence":
                return vals
            return f"{short(str(name))}<{', '.join(fmt_value(v) for v in vals)}>"
        if kind == "bin":
            a, b = self(e[2], depth + 1), self(e[3], depth + 1)
            return binop(e[1], a, b)
        if kind == "neg":
            a = self(e[1], depth + 1)
            return -a if isinstance(a, int) and not isinstance(a, bool) else f"-{fmt_value(a)}"
        if kind == "pack":
            return e[1] + "..."
        return e[1]


def substitute(e: Expr, params: list[str], args: list[Expr]) -> Expr:
    """Replace a template alias's parameters by the arguments it is used with (a pack takes the
    rest)."""
    binding: dict[str, Any] = {}
    for i, p in enumerate(params):
        if _is_pack_use(e, p):
            binding[p] = list(args[i:])
            break
        if i < len(args):
            binding[p] = args[i]

    def sub(x: Expr) -> Expr:
        k = x[0]
        if k == "name" and x[1] in binding and not isinstance(binding[x[1]], list):
            return binding[x[1]]
        if k == "tmpl":
            new: list[Expr] = []
            for a in x[2]:
                if a[0] == "pack" and a[1] in binding:
                    b = binding[a[1]]
                    new.extend(b if isinstance(b, list) else [b])
                else:
                    new.append(sub(a))
            return ("tmpl", x[1], tuple(new))
        if k == "bin":
            return ("bin", x[1], sub(x[2]), sub(x[3]))
        if k == "neg":
            return ("neg", sub(x[1]))
        return x

    return sub(e)


def _is_pack_use(e: Expr, p: str) -> bool:
    if e[0] == "pack":
        return e[1] == p
    if e[0] == "tmpl":
        return any(_is_pack_use(a, p) for a in e[2])
    return False


def binop(op: str, a: Any, b: Any) -> Any:
    if (
        isinstance(a, int)
        and isinstance(b, int)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        try:
            return {
                "+": a + b,
                "-": a - b,
                "*": a * b,
                "/": int(a / b) if b else None,
                "%": a % b if b else None,
                "<<": a << b,
                ">>": a >> b,
                "&": a & b,
                "|": a | b,
                "<": a < b,
                ">": a > b,
                "<=": a <= b,
                ">=": a >= b,
                "==": a == b,
                "!=": a != b,
            }.get(op, f"{a} {op} {b}")
        except (ValueError, OverflowError):
            pass
    return f"{fmt_value(a)} {op} {fmt_value(b)}"


def fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "Sequence<" + ", ".join(fmt_value(x) for x in v) + ">"
    return str(v)


def fmt(e: Expr) -> str:
    k = e[0]
    if k in ("int",):
        return str(e[1])
    if k == "bool":
        return "true" if e[1] else "false"
    if k == "tmpl":
        return f"{e[1]}<{', '.join(fmt(a) for a in e[2])}>"
    if k == "bin":
        return f"{fmt(e[2])} {e[1]} {fmt(e[3])}"
    if k == "neg":
        return "-" + fmt(e[1])
    if k == "pack":
        return e[1] + "..."
    return str(e[1])


def _default_value(default: str | None, fields: dict[str, Any]) -> Any:
    if default is None:
        return None
    d = default.strip()
    if d in fields:
        return fields[d]
    if d in ("true", "false"):
        return d == "true"
    v = ckfields.as_int(d)
    if v is not None:
        return v
    return short(d)


def arity(params: list[dict]) -> tuple[int, bool]:
    """(required argument count, has a pack) of a template parameter list."""
    return sum(1 for p in params if p["kind"] != "pack" and p.get("default") is None), any(
        p["kind"] == "pack" for p in params
    )


# required args, has a pack, (name, is pack, default) per param, the names before the first pack
Plan = tuple[int, bool, tuple[tuple[str, bool, Any], ...], tuple[str, ...]]


def plan_of(params: list[dict]) -> Plan:
    """What map_fields needs of a parameter list, read once per device op instead of once per
    entry."""
    required, has_pack = arity(params)
    slots = tuple(
        (p["name"] or f"_{k}", p["kind"] == "pack", p.get("default")) for k, p in enumerate(params)
    )
    packs = [k for k, (_name, is_pack, _default) in enumerate(slots) if is_pack]
    positional = tuple(name for name, _p, _d in slots[: packs[0] if packs else len(slots)])
    return required, has_pack, slots, positional


def map_fields(
    params: list[dict], values: list[Any], plan: Plan | None = None
) -> tuple[dict[str, Any], list[str], bool]:
    """Positional values -> {param name: value}; defaults fill the rest. Returns (fields,
    defaulted, arity_ok)."""
    required, has_pack, slots, positional = plan or plan_of(params)
    n = len(values)
    ok = required <= n and (has_pack or n <= len(slots))
    # the parameters before a pack take the values in order (zip stops at the shorter); of the
    # rest, a pack takes what is left, the others their defaults
    fields: dict[str, Any] = dict(zip(positional, values, strict=False))
    defaulted: list[str] = []
    taken = len(positional)
    for name, is_pack, default in slots[min(n, taken) :]:
        if is_pack:
            fields[name] = values[taken:]
            taken = n
        elif default is not None:
            fields[name] = _default_value(default, fields)
            defaulted.append(name)
    return fields, defaulted, ok
