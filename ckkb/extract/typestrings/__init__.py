"""Stage ck.typestrings: every device op's GetTypeString() as a name schema, and the printed-name
key of every (instance, registration binding).

`extract` reads one impl header with tree-sitter: for each GetTypeString() it follows the `<<`
chains into the op's string stream and turns each operand into a token:

    "DeviceGemmXdlUniversal"               {"lit": "DeviceGemmXdlUniversal"}
    getGemmSpecializationString(GemmSpec)  {"ref": "GemmSpec", "conv": "spec"}
    std::string(ALayout::name)[0]          {"ref": "ALayout", "conv": "layout_initial"}
    BlkGemmPipelineSchedulerToString[BlkGemmPipeSched]
                                           {"ref": "BlkGemmPipeSched", "conv": "enum", "map": {...}}
    BlockSize                              {"ref": "BlockSize", "conv": "value", "kind": "int"}
    PrefetchStages (a local or constant)   {"derived": "PrefetchStages", "expr": "..."}
    cond ? "A<" : "B<"                     {"alt": [[...], [...]], "cond": "..."}

`combine` stores one NameSchemaRow per implementation and, from the rows of the instances and
registrations stages, one InstanceKeyRow per (instance, registration binding).

Modules: `operands` (a GetTypeString() body into tokens), `schemas` (the schemas of one header;
delegation), `render` (a schema's printed name and key for one instance's fields), `keys`
(instance_keys over all instances and registrations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract.files import list_files
from ckkb.extract.typestrings.keys import instance_keys
from ckkb.extract.typestrings.schemas import (
    GRID_DIR,
    IMPL_DIR,
    STAGE_NAME,
    example,
    extract_schemas,
    splice_delegates,
)
from ckkb.kb.schema.names import NameSchemaRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult


class TypeStringsStage:
    name = STAGE_NAME
    extract_with = "ck.templates"  # both parse cpp.for_parsing() of a device-op header: one parse
    version = "5"
    tree = "ck"
    reads = ("instances", "registrations", "instance_lists")
    writes = ("instance_keys", "name_schemas")
    combine_cost = 0.44  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        return list_files(Path(root), IMPL_DIR, (".hpp", ".h")) + list_files(
            Path(root), GRID_DIR, (".hpp", ".h")
        )

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        if rel.startswith(GRID_DIR + "/"):
            if b"GetTypeString" not in data:
                return FileResult()
            schemas, diags = extract_schemas(rel, data, any_class=True)
            return FileResult(diagnostics=diags, facts={"gridwise": schemas})
        schemas, diags = extract_schemas(rel, data)
        return FileResult(diagnostics=diags, facts={"schemas": schemas})

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        rows: list[NameSchemaRow] = []
        diags: list[Diagnostic] = []
        device = [s for rel in sorted(results) for s in results[rel].facts.get("schemas", [])]
        targets: dict[str, dict[str, Any]] = {}
        for s in [
            *device,
            *(s for rel in sorted(results) for s in results[rel].facts.get("gridwise", [])),
        ]:
            targets.setdefault(s["device_op"], s)
        for s in device:
            s = splice_delegates(s, targets)
            rows.append(
                NameSchemaRow(
                    id=len(rows) + 1,
                    device_op=s["device_op"],
                    op=s["ops"][0] if s["ops"] else None,
                    ops=s["ops"],
                    file=s["file"],
                    line=s["line"],
                    tokens=s["tokens"],
                    params=s["params"],
                    status=s["status"],
                    reasons=s["reasons"],
                    example=example(s["tokens"]) if s["status"] != "unsupported" else None,
                )
            )
        counts = {
            k: sum(1 for r in rows if r.status == k) for k in ("matched", "partial", "unsupported")
        }
        for r in rows:
            if r.status == "unsupported":
                diags.append(
                    Diagnostic(
                        r.file,
                        r.line,
                        f"{r.device_op}::GetTypeString(): no name schema: "
                        + "; ".join(r.reasons[:2]),
                        "warning",
                        STAGE_NAME,
                    )
                )
        diags.append(
            Diagnostic(
                IMPL_DIR,
                0,
                f"GetTypeString() name schemas: {counts['matched'] + counts['partial']} of"
                f" {len(rows)} implementations ({counts['matched']} matched,"
                f" {counts['partial']} partial with derived or conditional values, "
                f"{counts['unsupported']} unsupported)",
                "info",
                STAGE_NAME,
            )
        )
        keys = instance_keys(
            rows,
            ctx.table_rows("instances"),
            ctx.table_rows("registrations"),
            ctx.table_rows("instance_lists"),
        )
        return StageResult(rows=[*rows, *keys], diagnostics=diags)


STAGE = TypeStringsStage()
