"""numba set-up shared by every compiled kernel: a stable cache folder and a thread count (and
the cores a process may use, for kernels and worker processes alike).

numba reads ``NUMBA_CACHE_DIR`` when it is first imported, so :func:`setup_numba_cache` runs
before any module with ``@njit(cache=True)`` kernels is imported; compiled code is then reused
across processes (ranx's kernels and ours).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["compiled_threads", "interrupt_behind", "readonly_view", "setup_numba_cache",
           "usable_cores"]


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C behind ``exc`` (itself, or its cause or context, however deep), None when
    there is none. A Ctrl-C while numba loads a kernel from its cache reaches Python as
    ``SystemError: <function _numba_unpickle> returned a result with an exception set``, the
    ``KeyboardInterrupt`` as its cause: a sweep stopped that way said "internal error" (CI)."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return at
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return None


def readonly_view(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (``a`` itself is untouched). numba compiles a kernel once per
    argument type, and a read-only array is a type of its own: an index built in this process
    and one memory-mapped from disk (read-only) cost two compilations, 5-10 s each on a fresh
    install, unless both hand the kernels read-only arrays."""
    view = a.view()
    view.flags.writeable = False
    return view


def setup_numba_cache() -> str:
    """Point numba's cache at a stable folder (``$NUMBA_CACHE_DIR`` or ``~/.cache/aiblox/numba``)
    so compiled kernels are reused across processes."""
    path = os.environ.get("NUMBA_CACHE_DIR") or str(Path.home() / ".cache" / "aiblox" / "numba")
    os.environ["NUMBA_CACHE_DIR"] = path
    # numba's OpenMP threads otherwise spin between parallel regions: on a machine busy with
    # other work a spinning thread holds a core its partner needs at the next barrier, and a
    # sweep's many short kernels ran 5x slower on 2 threads than on one (benchmarks/README.md,
    # "Fusion sweep"). Sleeping workers cost microseconds on an idle machine. Read once, when
    # the OpenMP runtime loads (the first parallel kernel); a value already set is kept.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    Path(path).mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def compiled_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` numba threads (at most numba's pool size; None, 0 or less: all
    of it); the previous count is restored after."""
    setup_numba_cache()
    import numba

    previous = numba.get_num_threads()
    pool = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    numba.set_num_threads(pool if n is None or n <= 0 else min(int(n), pool))
    try:
        yield
    finally:
        numba.set_num_threads(previous)
