"""How often the cyclic garbage collector runs in the build's parent process.

The combines keep ~200,000 rows (dicts, lists, dataclasses) with no reference cycles: reference
counting frees what they drop, and the collector's passes find nothing while walking the rows
promoted before them. Measured (gc.callbacks, default build, 2 workers): 1.03 s of the parent's
6.4 CPU-s in 1,252 passes at Python's default threshold, 0.23 s in 18 passes at THRESHOLD0; the
parent's combines are the build's critical path. Passes stay rare, not off: input that does make
cyclic garbage is still collected. (In a worker the collector costs ~2% of extraction: left as is.)
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

THRESHOLD0 = 200_000  # allocations between young-generation passes (Python's default: 700)


@contextlib.contextmanager
def relaxed() -> Iterator[None]:
    """For the build in this process; the previous thresholds afterwards."""
    old = gc.get_threshold()
    gc.set_threshold(THRESHOLD0, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
