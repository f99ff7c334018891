"""instance_keys: the printed-name key of every (instance, registration binding)."""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Sequence
from itertools import compress
from typing import Any

from ckkb.extract.typestrings.render import printed_value, render
from ckkb.extract.typestrings.schemas import flat
from ckkb.fields import SYNONYMS, as_int, normalise
from ckkb.kb.schema.names import InstanceKeyRow, NameSchemaRow

# The normalised columns an InstanceKeyRow stores, in two groups memoised apart: sizes (the same for
# all registrations of an instance) and kinds (layouts and padding, often bound by the
# registration). normalise computes a column from its SYNONYMS only (tile_k also from K0PerBlock*K1,
# waves from the tile and wave sizes), so each group is a function of its _INPUTS; a unit test
# checks this.
_SIZE_COLUMNS = (
    "block_size",
    "tile_m",
    "tile_n",
    "tile_k",
    "mfma_m",
    "mfma_n",
    "xdl_m",
    "xdl_n",
    "waves_m",
    "waves_n",
)
_KIND_COLUMNS = ("a_layout", "b_layout", "c_layout", "scheduler", "pipeline", "padding")
_VEC_FIELDS = (
    "ABlockTransferSrcScalarPerVector",
    "BBlockTransferSrcScalarPerVector",
)  # a_vec, b_vec
_SIZE_INPUTS = tuple(
    dict.fromkeys(
        [n for c in _SIZE_COLUMNS for n in SYNONYMS.get(c, ())]
        + ["K0PerBlock", "KPerBlock0", "K1", "AK1", *_VEC_FIELDS]
    )
)
_KIND_INPUTS = tuple(dict.fromkeys(n for c in _KIND_COLUMNS for n in SYNONYMS.get(c, ())))
_NAME = re.compile(r"\w+")


def _typed_key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """`values` as a memo key that tells 1 from True and 1.0 (equal in Python, printed differently)
    and a list from a tuple; lists are frozen to tuples. Hashing it raises TypeError if a value is
    unhashable."""
    types = tuple(map(type, values))
    if list in types:
        values = tuple(tuple(v) if type(v) is list else v for v in values)
    return values, types


def _fields_read(tokens: list[Any]) -> list[str]:
    """Every field name `render` may read for `tokens`: refs, and (a superset) every word of a
    condition or of an evaluated expression. render's result is a function of these fields' values
    only."""
    out: list[str] = []
    for t in tokens:
        if "lit" in t:
            continue
        if "alt" in t:
            out += _NAME.findall(t.get("cond", ""))
            for branch in t["alt"]:
                out += _fields_read(branch)
        elif "ref" in t:
            out.append(t["ref"])
        elif not t.get("delegate"):
            out += _NAME.findall((t.get("expr") or "").replace("::", "_"))
    return list(dict.fromkeys(out))


class _KeyPlan:
    """What instance_keys needs of one schema, worked out once rather than per instance.

    A row's computed columns (key, printed name, derived names, normalised columns) are a function
    of the values of `inputs` only: the fields render reads, and the inputs of both column groups.
    So they are memoised in `results` by the instance's typed input values and the positions among
    them that name a list template parameter (which a registration may bind): for an instance with
    none, the entry is its columns, the same for every registration; else a dict by the bound
    values.

    `present`: every field name the schema's instances have (None: not known). An input that none
    has and that has no default is None in every instance, so it is left out of `inputs` (two thirds
    of them: the synonyms of other ops), and out of the memo keys of the groups."""

    def __init__(self, schema: NameSchemaRow, present: set[str] | None = None) -> None:
        self.schema = schema
        self.defaults = [
            (p["name"], p["default"]) for p in schema.params if p.get("default") is not None
        ]
        self.spec = next((t for t in flat(schema.tokens) if t.get("conv") == "spec"), None)
        self.render: Callable[[dict[str, Any]], tuple[str, str | None, list[str]]] = (
            functools.partial(render, schema.tokens, printed={})
        )
        self.kind_inputs = _KIND_INPUTS + ((self.spec["ref"],) if self.spec else ())
        self.render_inputs = tuple(_fields_read(schema.tokens))
        defaults = dict(self.defaults)
        every = dict.fromkeys((*self.render_inputs, *self.kind_inputs, *_SIZE_INPUTS))
        self.inputs = tuple(n for n in every if present is None or n in present or n in defaults)
        self.positions = range(len(self.inputs))
        where = {n: i for i, n in enumerate(self.inputs)}
        width = len(self.inputs)

        def group(names: tuple[str, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
            """The values, then the types, of those `names` that are inputs, from input values +
            types."""
            at = [where[name] for name in names if name in where]
            return _getter(at + [width + i for i in at])

        self.render_of = group(
            self.render_inputs
        )  # memo keys of the groups' inputs (the others are None)
        self.kinds_of = group(self.kind_inputs)
        self.sizes_of = group(_SIZE_INPUTS)
        # sizes are memoised across plans: their keys say which _SIZE_INPUTS the values are of
        self.size_names = tuple(name for name in _SIZE_INPUTS if name in where)
        self.input_defaults = [(i, defaults[n]) for i, n in enumerate(self.inputs) if n in defaults]
        self.schema_part = (schema.op, schema.device_op, schema.id)
        self.results: dict[tuple[Any, ...], Any] = {}
        self.kinds: dict[
            tuple[Any, ...], tuple[Any, ...]
        ] = {}  # _kinds by typed kind_inputs values
        self.renders: dict[
            tuple[Any, ...], tuple[str, str | None, list[str]]
        ] = {}  # render by typed render_inputs values

    def base_fields(self, inst: Any) -> dict[str, Any]:
        """The instance's fields; a parameter it leaves out (or None) gets the schema's default."""
        fields = dict(inst.fields or {})
        for name, default in self.defaults:
            if fields.get(name) is None:
                fields[name] = default
        return fields

    def input_values(self, inst: Any) -> tuple[Any, ...]:
        """The values of `inputs` in base_fields(inst), without building it."""
        vals = tuple(map((inst.fields or {}).get, self.inputs))
        if self.input_defaults and None in vals:
            filled = list(vals)
            for i, default in self.input_defaults:
                if filled[i] is None:
                    filled[i] = default
            vals = tuple(filled)
        return vals

    def _kinds(self, fields: dict[str, Any], norm: dict[str, Any]) -> tuple[Any, ...]:
        """_KIND_COLUMNS of an InstanceKeyRow; padding as the schema's spec token prints it, else
        normalised."""
        spec = self.spec
        padding = printed_value(spec, fields.get(spec["ref"])) if spec else norm["padding"]
        return (*(norm[c] for c in _KIND_COLUMNS[:-1]), padding)

    def columns(
        self,
        typed: tuple[Any, ...] | None,
        fields_of: Callable[[], dict[str, Any]],
        sizes_memo: dict[tuple[Any, ...], tuple[Any, ...]],
    ) -> tuple[list[str], tuple[Any, ...]]:
        """(derived, the computed columns of _row) of an instance's (bound) fields, `fields_of()`,
        whose `inputs` have the values, then the types, in `typed` (None: a value cannot be hashed,
        nothing is memoised). Render and the two column groups are memoised apart by their own
        inputs' values (many instances share a tile; sizes do not depend on the schema); fields_of
        is called only on a miss."""
        fields: dict[str, Any] | None = None
        if typed is None:
            rk = kk = sk = None
            rendered = kinds = sizes = None
        else:
            rk, kk, sk = (
                self.render_of(typed),
                self.kinds_of(typed),
                (self.size_names, self.sizes_of(typed)),
            )
            rendered = self.renders.get(rk)
            kinds = self.kinds.get(kk)
            sizes = sizes_memo.get(sk)
        if rendered is None:
            fields = fields_of()
            rendered = self.render(fields)
            if rk is not None:
                self.renders[rk] = rendered
        if kinds is None or sizes is None:
            if fields is None:
                fields = fields_of()
            norm = normalise(fields)
            if kinds is None:
                kinds = self._kinds(fields, norm)
                if kk is not None:
                    self.kinds[kk] = kinds
            if sizes is None:
                sizes = _sizes(fields, norm)
                if sk is not None:
                    sizes_memo[sk] = sizes
        key, printed_name, derived = rendered
        return derived, (key, printed_name, printed_name is not None, *kinds, *sizes)


def _getter(positions: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A function picking `positions` of a tuple, as a tuple (itemgetter returns a bare item for
    one)."""
    if len(positions) > 1:
        return operator.itemgetter(*positions)
    if positions:
        i = positions[0]
        return lambda values: (values[i],)
    return lambda values: ()


def _sizes(fields: dict[str, Any], norm: dict[str, Any]) -> tuple[Any, ...]:
    """_SIZE_COLUMNS and the vector widths (a_vec, b_vec) of an InstanceKeyRow."""
    return (*(norm[c] for c in _SIZE_COLUMNS), *(as_int(fields.get(n)) for n in _VEC_FIELDS))


def _bindable(fields: dict[str, Any], params: set[str]) -> list[str]:
    """Fields whose value names a list template parameter (`GemmSpec: GemmSpec`) a registration may
    bind."""
    return [k for k, v in fields.items() if isinstance(v, str) and v in params] if params else []


def _bind(
    base: dict[str, Any], bindable: Sequence[str], bindings: dict[str, Any], unbound: set[str]
) -> dict[str, Any]:
    """Substitute the list's template parameters (GemmSpec -> Default) by a registration's bindings;
    a parameter nothing binds becomes None (unknown), not its own name."""
    if not bindable:
        return base
    out = dict(base)
    for k in bindable:
        v = base[k]
        if v in bindings or v in unbound:
            out[k] = bindings.get(v)
    return out


def _row(
    row_id: int,
    registration_id: int | None,
    bindings: dict[str, Any],
    derived: list[str],
    head: tuple[Any, ...],
    cols: tuple[Any, ...],
) -> InstanceKeyRow:
    """An InstanceKeyRow from what instance_keys keeps as tuples: `head`, the instance's values
    (status, list_name, file, line, instance_id, op, device_op, schema_id), and `cols`, the
    computed columns (_KeyPlan.columns: key, printed_name, complete, _KIND_COLUMNS, _SIZE_COLUMNS,
    a_vec, b_vec)."""
    status, list_name, file, line, instance_id, op, device_op, schema_id = head
    (key, printed_name, complete, a_layout, b_layout, c_layout, scheduler, pipeline, padding) = (
        cols[:9]
    )
    block_size, tile_m, tile_n, tile_k, mfma_m, mfma_n, xdl_m, xdl_n, waves_m, waves_n = cols[9:19]
    a_vec, b_vec = cols[19:]
    return InstanceKeyRow(
        id=row_id,
        registration_id=registration_id,
        bindings=bindings,
        derived=derived,
        status=status,
        list_name=list_name,
        file=file,
        line=line,
        instance_id=instance_id,
        op=op,
        device_op=device_op,
        schema_id=schema_id,
        key=key,
        printed_name=printed_name,
        complete=complete,
        a_layout=a_layout,
        b_layout=b_layout,
        c_layout=c_layout,
        scheduler=scheduler,
        pipeline=pipeline,
        padding=padding,
        block_size=block_size,
        tile_m=tile_m,
        tile_n=tile_n,
        tile_k=tile_k,
        mfma_m=mfma_m,
        mfma_n=mfma_n,
        xdl_m=xdl_m,
        xdl_n=xdl_n,
        waves_m=waves_m,
        waves_n=waves_n,
        a_vec=a_vec,
        b_vec=b_vec,
    )


def instance_keys(
    schemas: list[NameSchemaRow],
    instances: list[Any],
    registrations: list[Any],
    lists: Sequence[Any] = (),
) -> list[InstanceKeyRow]:
    present: dict[str, set[str]] = {}  # per template: every field name of its instances
    for inst in instances:
        have = present.get(inst.template)
        if have is None:
            have = present[inst.template] = set()
        have.update(inst.fields or ())
    plans: dict[str, _KeyPlan] = {}
    for s in schemas:
        if s.status != "unsupported" and s.device_op not in plans:
            plans[s.device_op] = _KeyPlan(s, present.get(s.device_op, set()))
    regs_by_list: dict[Any, list[Any]] = {}
    for r in registrations:
        if getattr(r, "list_id", None) is not None:
            regs_by_list.setdefault(r.list_id, []).append(r)
    list_params = {
        lr.id: {p.get("name") for p in (lr.template_params or []) if p.get("name")} for lr in lists
    }
    # the names _bind replaces: the list's parameters, and whatever a registration of the list binds
    bind_names = {lid: set(params) for lid, params in list_params.items()}
    for lid, regs in regs_by_list.items():
        bind_names.setdefault(lid, set()).update(
            k for r in regs for k in (getattr(r, "bindings", None) or {})
        )
    # per list: (registration id, its bindings) of each registration, or one (None, {}) if none.
    # Rows share these dicts and the memoised `derived` lists (never mutated): the writer encodes
    # each shared object once
    list_regs = {
        lid: [(r.id, getattr(r, "bindings", None) or {}) for r in regs]
        for lid, regs in regs_by_list.items()
    }
    no_regs: list[tuple[Any, dict[str, Any]]] = [(None, {})]
    signatures: dict[
        tuple[Any, tuple[str, ...]], list[Any]
    ] = {}  # (list, bound parameter names) -> per registration
    sizes_memo: dict[
        tuple[Any, ...], tuple[Any, ...]
    ] = {}  # shared: sizes do not depend on the schema
    rows: list[InstanceKeyRow] = []
    append = rows.append
    for inst in instances:
        plan = plans.get(inst.template)
        if plan is None:
            continue
        lid = inst.list_id
        regs = list_regs.get(lid) or no_regs
        names = bind_names.get(lid)
        vals = plan.input_values(inst)
        types = tuple(map(type, vals))
        if list in types:
            vals = tuple(tuple(v) if type(v) is list else v for v in vals)
        try:  # hashing raises TypeError for a value that cannot be hashed: nothing is memoised then
            # (a value in `names` is a str: no other hashable value equals one)
            bound: tuple[Any, ...] = (
                tuple(compress(plan.positions, map(names.__contains__, vals)))
                if names and not names.isdisjoint(vals)
                else ()
            )
            memo_key = (vals, types, bound)
            entry = plan.results.get(memo_key)
            ikey: tuple[Any, ...] | None = memo_key
        except TypeError:
            ikey, entry = None, None
            base = plan.base_fields(inst)
            bound = tuple(_bindable(base, names)) if names else ()
        head = (
            getattr(inst, "status", "active") or "active",
            inst.list_name,
            inst.file,
            inst.line,
            inst.id,
            *plan.schema_part,
        )
        if not bound:  # no registration changes an input: the same columns for all of them
            if entry is None:
                entry = plan.columns(
                    vals + types if ikey is not None else None,
                    functools.partial(plan.base_fields, inst),
                    sizes_memo,
                )
                if ikey is not None:
                    plan.results[ikey] = entry
            derived, cols = entry
            for rid, bindings in regs:
                append(_row(len(rows) + 1, rid, bindings, derived, head, cols))
            continue
        if entry is None:
            entry = {}
            if ikey is not None:
                plan.results[ikey] = entry
        unbound = list_params.get(lid, set())
        binder = _Binder(
            plan, inst, [plan.inputs[i] for i in bound] if ikey is not None else bound, unbound
        )
        width = len(vals)  # the types of the inputs follow their values in `typed`
        if ikey is not None:
            pnames = tuple(vals[i] for i in bound)
            sigs = signatures.get((lid, pnames))
            if sigs is None:
                sigs = signatures[lid, pnames] = [
                    _signature(pnames, bindings, unbound) for _rid, bindings in regs
                ]
        else:
            sigs = [None] * len(regs)
        for (rid, bindings), sig in zip(regs, sigs, strict=True):
            got = entry.get(sig) if sig is not None else None
            if got is None:
                typed = None
                if sig is not None:  # the inputs as this registration binds them
                    bound_typed = [*vals, *types]
                    for i, v, t in zip(bound, *sig, strict=True):
                        bound_typed[i], bound_typed[width + i] = v, t
                    typed = tuple(bound_typed)
                got = plan.columns(typed, functools.partial(binder, bindings), sizes_memo)
                if sig is not None:
                    entry[sig] = got
            derived, cols = got
            append(_row(len(rows) + 1, rid, bindings, derived, head, cols))
    return rows


class _Binder:
    """An instance's fields as each of its registrations binds them. The base fields are made once
    (on the first call), then copied with the fields `bindable` substituted. With a memo key
    (instance_keys' ikey) these are only the bound inputs: the computed columns read no other field,
    so whatever the other bindable fields become cannot change them."""

    def __init__(
        self, plan: _KeyPlan, inst: Any, bindable: Sequence[str], unbound: set[str]
    ) -> None:
        self.plan, self.inst, self.bindable, self.unbound = plan, inst, bindable, unbound
        self.base: dict[str, Any] | None = None

    def __call__(self, bindings: dict[str, Any]) -> dict[str, Any]:
        if self.base is None:
            self.base = self.plan.base_fields(self.inst)
        return _bind(self.base, self.bindable, bindings, self.unbound)


def _signature(
    pnames: tuple[str, ...], bindings: dict[str, Any], unbound: set[str]
) -> tuple[Any, ...] | None:
    """The typed values a registration gives the list parameters `pnames` (as _bind does), a memo
    key; None when one cannot be hashed."""
    vals = tuple(bindings.get(p) if p in bindings or p in unbound else p for p in pnames)
    try:
        key = _typed_key(vals)
        hash(key)
    except TypeError:
        return None
    return key
