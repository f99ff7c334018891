"""GPU architectures and parts ckkb knows about, kept in one place.

The arch list is what per-arch availability is computed for; the parts table maps an
aiter config row's (gfx, cu_num) to a product. CU counts are the device-visible counts
reported by `rocminfo` / `torch.cuda.get_device_properties().multi_processor_count`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Archs ckkb evaluates gates and build rules for (CK's SUPPORTED_GPU_TARGETS of interest).
ARCHS: tuple[str, ...] = (
    "gfx908",
    "gfx90a",
    "gfx942",
    "gfx950",
    "gfx1100",
    "gfx1101",
    "gfx1200",
    "gfx1201",
)

DEFAULT_ARCHS: tuple[str, ...] = ("gfx942", "gfx950")


@dataclass(frozen=True)
class Part:
    name: str
    gfx: str
    cu_num: int
    note: str = ""


# Sources: AMD Instinct data sheets and `rocminfo`
# on each part (CU counts as the runtime sees them).
PARTS: tuple[Part, ...] = (
    Part("MI100", "gfx908", 120),
    Part("MI210", "gfx90a", 104),
    Part("MI250X (one GCD)", "gfx90a", 110),
    Part("MI250 (one GCD)", "gfx90a", 104),
    Part("MI300X", "gfx942", 304),
    Part("MI325X", "gfx942", 304),
    Part("MI300A", "gfx942", 228),
    Part("MI308X", "gfx942", 80),
    Part("MI300X (DPX partition)", "gfx942", 152, "compute partitioning"),
    Part("MI300X (QPX partition)", "gfx942", 76, "compute partitioning"),
    Part("MI300X (CPX partition)", "gfx942", 38, "compute partitioning"),
    Part("MI355X", "gfx950", 256),
    Part("MI350X", "gfx950", 256),
)


def parts_for(gfx: str, cu_num: int | None) -> list[Part]:
    """Parts matching an arch and (when given) a CU count."""
    return [p for p in PARTS if p.gfx == gfx and (cu_num is None or p.cu_num == cu_num)]


def is_known_arch(arch: str) -> bool:
    return arch in ARCHS


_ARCH_COLUMN = re.compile(r"gfx[0-9]+[0-9a-z]*")


def is_arch_column(name: str) -> bool:
    """A result column named after an arch (`gfx90a`, `gfx1201`, a fork's `gfx960`): the
    per-arch columns of a query, whatever archs the tree has."""
    return _ARCH_COLUMN.fullmatch(name) is not None
