"""The instance ranges of a batch and their hand-off to the kernel threads (:mod:`.crew`)."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence

import numpy as np

from ainet_gym.sim.backends.numba.crew import Crew
from ainet_gym.sim.backends.numba.jit import HAVE_NUMBA

# (imported here, not in kernel_threads: an import statement there cost ~1 us a call, 3 calls a step)
if HAVE_NUMBA:
    from numba import config as _numba_config

__all__ = [
    "MIN_SEGMENTS_PER_RANGE",
    "RANGES_PER_THREAD",
    "batch_ranges",
    "go_flags",
    "kernel_threads",
    "run_ranges",
]

#: ranges per thread a batch is cut into (threads take them in turn, so a thread that is late or slow
#: leaves its range to another). One: each range costs a Python dispatch of six kernels holding the GIL,
#: and two threads that want the GIL at once make one of them sleep (tens of us to wake); with the crew's
#: hand-off, one range per thread gave 5-8% more env steps/s than two at B = 64 and B = 256 on 2 cores.
RANGES_PER_THREAD = 1

#: a batch is spread over threads only when each range gets at least this many incidence segments
#: (candidate (flow, link) pairs of the split, a proxy for the work of an interval): below it, handing
#: a range to another thread (tens of microseconds) costs more than it saves.
MIN_SEGMENTS_PER_RANGE = 2048

_crew: Crew | None = None

_crew_key: tuple[int, int] | None = None  # (process id, workers) the crew was made for

_crew_lock = threading.Lock()


def kernel_threads() -> int:
    """Threads the compiled backend spreads the instances of a batch over: numba's own setting,
    ``$NUMBA_NUM_THREADS`` (default: the CPUs this process may run on), read when numba is imported.

    The kernels release the GIL (``nogil``), so the threads run in parallel; each instance is walked by
    one thread, with the same floating-point operations in the same order, so results do not depend on
    the thread count. ``NUMBA_NUM_THREADS=1`` keeps everything on the calling thread.
    """
    if not HAVE_NUMBA:  # pragma: no cover
        return 1
    return max(1, int(_numba_config.NUMBA_NUM_THREADS))


def batch_ranges(cost: np.ndarray, n_threads: int, min_cost: float | None = None) -> list[tuple[int, int]]:
    """Contiguous instance ranges ``(lo, hi)`` covering ``0:len(cost)``, :data:`RANGES_PER_THREAD` per
    thread, of about equal summed ``cost`` (per instance); fewer ranges when a range would cost less than ``min_cost`` (default
    :data:`MIN_SEGMENTS_PER_RANGE`)."""
    min_cost = MIN_SEGMENTS_PER_RANGE if min_cost is None else min_cost
    n = cost.shape[0]
    total = float(cost.sum())
    per_thread = RANGES_PER_THREAD if n_threads > 1 else 1
    k = int(min(n_threads * per_thread, n, max(1, total // max(min_cost, 1e-300))))
    if k <= 1:
        return [(0, n)]
    cum = np.cumsum(cost)
    cuts = np.searchsorted(cum, total * np.arange(1, k) / k, side="left") + 1
    bounds = np.unique(np.concatenate(([0], np.clip(cuts, 1, n - 1), [n])))
    return [(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds)]


def _get_crew(workers: int) -> Crew:
    """The process's worker threads (made again after a fork: a child inherits no threads)."""
    global _crew, _crew_key
    key = (os.getpid(), workers)
    with _crew_lock:
        if _crew is None or _crew_key != key:
            _crew = Crew(workers)  # an earlier crew of this process sleeps on, unused
            _crew_key = key
        return _crew


_NO_CREW_FLAGS = np.zeros(3, dtype=np.int64)


def go_flags() -> np.ndarray:
    """The flags a range kernel announces its start in (:func:`ainet_gym.sim.backends.numba.crew.announce`, first thing
    without the GIL): the worker threads' (made if need be) when :func:`kernel_threads` is above one, else
    flags no one reads."""
    threads = kernel_threads()
    return _get_crew(threads - 1).flags if threads > 1 else _NO_CREW_FLAGS


def run_ranges(fn: Callable[..., object], ranges: Sequence[tuple[int, int]],
               args_of: Callable[[int, int], tuple]) -> None:  # fmt: skip
    """Call the compiled ``fn(*args_of(lo, hi))`` once for every range, shared out between this thread and
    the worker threads (``fn`` must release the GIL and touch only its range's data).

    The ranges are taken in turn by whichever thread is free, this one included: on a machine whose
    cores are busy with other work, a worker that is not scheduled in time simply takes none, and the
    call costs about what one thread would. The workers wait for the next call spinning for a short
    while before they sleep (:mod:`ainet_gym.sim.backends.numba.crew`); the first exception a range raised is raised
    here once every range is done."""
    threads = kernel_threads()
    if threads <= 1 or len(ranges) <= 1:
        for lo, hi in ranges:
            fn(*args_of(lo, hi))
        return
    _get_crew(threads - 1).run(fn, ranges, args_of)
