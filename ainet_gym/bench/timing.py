"""The measuring helpers the bench's sections share: :func:`timeit` (best or median of repeats),
:func:`rel_err` (the relative error of rates against a reference) and :func:`last_metrics` (a sim's
metrics of its last interval).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ainet_gym.bench.clock import now

__all__ = ["last_metrics", "rel_err", "timeit"]


def timeit(
    fn: Callable[[], Any], min_time: float, max_repeats: int, stat: str = "min"
) -> tuple[float, int, Any]:
    """Wall time of ``fn()`` over repeats (at least one, until ``min_time`` is spent), and its last result.

    ``stat="min"`` (the best repeat) for identical repeated work, as :mod:`timeit` does: other load on
    the machine only ever adds time. ``stat="median"`` where the repeats differ (successive intervals).
    """
    times = []
    total = 0.0
    out = None
    while True:
        t0 = now()
        out = fn()
        dt = now() - t0
        times.append(dt)
        total += dt
        if total >= min_time or len(times) >= max_repeats:
            break
    return float(np.min(times) if stat == "min" else np.median(times)), len(times), out


def rel_err(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest relative difference of finite rates; inf if the infinite rates differ or shapes do."""
    a, b = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if a.shape != b.shape or not np.array_equal(np.isinf(a), np.isinf(b)) or np.isnan(a).any():
        return math.inf
    fin = np.isfinite(b)
    if not fin.any():
        return 0.0
    scale = np.maximum(np.abs(b[fin]), 1e-300)
    return float(np.max(np.abs(a[fin] - b[fin]) / scale))


@contextlib.contextmanager
def last_metrics(sim: Any) -> Iterator[list[Any]]:
    """While in the block, ``sim.run_interval`` keeps the metrics of its last interval in the list it yields
    (the counters a step's result does not carry: re-fills, repairs, ...); the bound method again after."""
    last: list[Any] = []
    run = sim.run_interval

    def counted(*args: Any, **kw: Any) -> Any:
        m = run(*args, **kw)
        last[:] = [m]
        return m

    sim.run_interval = counted
    try:
        yield last
    finally:
        del sim.run_interval  # the bound method again
