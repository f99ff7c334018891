"""Preloaded into every worker of a `--gpus` cluster (Dask's `preload`): the worker ignores
SIGINT. A Ctrl-C in the terminal reaches the whole process group, local workers included; the
driver alone handles it (cancel, kill every worker's ckProfiler process groups, close the
cluster), so a worker must not die first and leave its children behind."""

from __future__ import annotations

import signal
from typing import Any


def dask_setup(worker: Any) -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread of the worker process: nothing to do here
        pass
