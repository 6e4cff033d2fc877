"""The machine the bench ran on (:func:`machine_info`: CPU, Python, library versions, the numba threads)
and the calibration of its speed (:func:`calibrate`), printed in the report's header.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.bench.clock import now

__all__ = ["calibrate", "machine_info"]


def _numba_version() -> str | None:
    try:
        import numba
    except ImportError:
        return None
    return str(numba.__version__)


def machine_info() -> dict[str, Any]:
    """CPU model, core count, memory, Python and library versions of this machine."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):  # not Linux: keep platform's answer
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gib = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
                break
    import scipy

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": _numba_version(),
        "load_avg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def calibrate(repeats: int = 5) -> dict[str, float]:
    """Machine calibration printed beside the figures, so runs on different machines can be compared:
    best-of-``repeats`` ms of a fixed pure-Python loop (1e6 integer multiply-adds) and of a fixed numpy
    kernel (sort of 1e6 seeded float64 plus a bincount of 1e6 entries into 1e4 bins)."""

    def py_loop() -> int:
        acc = 0
        for i in range(1_000_000):
            acc += i * i
        return acc

    x = np.random.default_rng(0).random(1_000_000)
    idx = (x * 10_000).astype(np.int64)

    def np_kernel() -> float:
        return float(np.sort(x)[500_000] + np.bincount(idx, weights=x, minlength=10_000).max())

    out = {}
    for name, fn in (("python_loop_ms", py_loop), ("numpy_kernel_ms", np_kernel)):
        best = math.inf
        for _ in range(repeats):
            t0 = now()
            fn()
            best = min(best, now() - t0)
        out[name] = best * 1e3
    return out
