"""The clock the bench times its rows by (``ainet-gym bench --clock wall|cpu``, :attr:`BenchConfig.clock`).

``wall`` (the default): ``time.perf_counter``, as the targets are stated. ``cpu``: the CPU seconds of the
process, every thread (``time.process_time``), plus those of its finished child processes
(``getrusage(RUSAGE_CHILDREN)``: the construction and start-up probes run in fresh processes), so that on a
machine shared with other processes a row counts the work done, not the time spent waiting for a core.
Under ``cpu`` every timed figure of the run (``*_s``, ``*_ms``, the rates, the calibration, the windows and
repeat budgets) is CPU time; the field names are unchanged and ``meta.clock`` says which clock ran. Figures
that are CPU time under either clock stay so (the env rows' ``env_steps_per_cpu_s``, the transfers sweep's
``interval_ms``, the switch section), and the run's own ``meta.wall_s`` and the env rows' ``cpu_s_per_wall_s``
stay wall-clock figures.

CPU time sums every thread: with the compiled backend's thread crew running (``NUMBA_NUM_THREADS`` > 1), a
row's CPU time includes the worker's spin between hand-offs; compare runs by CPU time with
``NUMBA_NUM_THREADS=1`` on both sides (``meta.numba_threads`` records it).

:func:`use_clock` selects the clock for a block (``run_bench`` wraps its sections in it); :func:`now` reads
it. Outside such a block the sections time by the wall clock.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from ainet_gym.errors import check_choice

try:
    import resource
except ImportError:  # pragma: no cover - not Unix: the children's CPU time is not counted
    resource = None  # type: ignore[assignment]

__all__ = ["CLOCKS", "CLOCK_HELP", "check_clock", "clock_name", "cpu_s", "now", "use_clock"]

#: the clocks of ``--clock``: the first is the default
CLOCKS = ("wall", "cpu")
#: the help of ``--clock`` (``ainet-gym bench`` and ``python -m ainet_gym.bench``)
CLOCK_HELP = (
    "the clock every row is timed by: wall (default) or cpu (CPU seconds of the process, every thread, and of "
    "its finished child processes; field names unchanged, meta.clock records it; compare with "
    "NUMBA_NUM_THREADS=1 on both sides)"
)
_current = CLOCKS[0]


def check_clock(clock: object, field: str = "clock") -> None:
    """Raise ``ValueError`` naming ``field`` unless ``clock`` is one of :data:`CLOCKS`."""
    check_choice(field, clock, CLOCKS)


def cpu_s() -> float:
    """CPU seconds of this process (every thread) and of its finished (waited-for) child processes."""
    t = time.process_time()
    if resource is not None:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        t += ru.ru_utime + ru.ru_stime
    return t


def clock_name() -> str:
    """The clock :func:`now` reads: ``wall`` or ``cpu``."""
    return _current


def now() -> float:
    """Seconds on the selected clock (only differences mean anything)."""
    return cpu_s() if _current == "cpu" else time.perf_counter()


@contextlib.contextmanager
def use_clock(clock: str) -> Iterator[None]:
    """Time by ``clock`` (one of :data:`CLOCKS`) inside the block, then by the clock before it."""
    global _current
    check_clock(clock)
    before, _current = _current, clock
    try:
        yield
    finally:
        _current = before
