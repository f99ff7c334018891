"""Child processes that never outlive their parent, and named points where the fault-injection
tests kill a command.

- `die_with_parent()`: a worker asks the kernel for SIGKILL when its parent dies (Linux
  PR_SET_PDEATHSIG), and a watcher thread checks the parent every second where that is missing.
  Without it, workers of a build killed by `kill -9` waited for work forever.
- `stop_on_term()`: SIGTERM (and SIGHUP) raise KeyboardInterrupt in the main thread, like Ctrl-C, so
  a command's cleanup (kill ckProfiler's process group, close the bundle) runs for all three.
- `fault_point(name)`: when $CKKB_FAULT names this point, the process kills itself with SIGKILL
  there, or pauses there (tests/faults drives both); otherwise one dictionary lookup.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have this process killed when its parent dies (see the module docstring)."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the watcher below does it
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="ckkb-parent-watch", daemon=True).start()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def stop_on_term(said: Callable[[], str] | None = None) -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP interrupt like Ctrl-C (main thread only). `said()`
    words the interruption (what was kept): the CLI prints it as the one line the user sees."""
    main = threading.current_thread() is threading.main_thread()
    sigs = (signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, _interrupt) for s in sigs} if main else {}
    try:
        yield
    except KeyboardInterrupt as e:
        if said is None:
            raise
        how = e.args[0] if e.args else "SIGINT"
        raise KeyboardInterrupt(f"stopped by {how}; {said()}") from None
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def fault_point(name: str) -> None:
    """Fault-injection tests only: SIGKILL this process here when $CKKB_FAULT == name; when
    $CKKB_FAULT_PAUSE is `name=SECONDS`, touch $CKKB_FAULT_DIR/name (the test waits for it) and
    sleep that long, so a test can start another command at exactly this point."""
    if os.environ.get("CKKB_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    pause = os.environ.get("CKKB_FAULT_PAUSE", "")
    if pause.startswith(name + "="):
        marker = os.path.join(os.environ.get("CKKB_FAULT_DIR", "."), name)
        with open(marker, "w"):
            pass
        time.sleep(float(pause.split("=", 1)[1]))
