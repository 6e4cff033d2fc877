"""Sections 4 and 5 of the bench: the construction of large worlds (:func:`bench_construction`) and the
start-up of a fresh process (:func:`bench_startup`), each measured in a fresh process
(:mod:`ainet_gym.bench.probe`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from ainet_gym.bench.clock import clock_name, now
from ainet_gym.bench.config import BenchConfig
from ainet_gym.bench.instances import (
    env_scenario,
    scenario_gpus,
)
from ainet_gym.bench.progress import Progress

__all__ = ["bench_construction", "bench_startup"]


def _probe(spec: dict[str, Any], env: dict[str, str] | None = None) -> tuple[dict[str, Any], float]:
    """Run :mod:`ainet_gym.bench.probe` in a fresh process; (its JSON result or an error row, seconds of the
    process on the bench's clock: wall, or under ``--clock cpu`` the child's CPU seconds; the probe times its
    own figures by the same clock).

    The probe runs as a script (``python -P .../probe.py``), not as ``-m ainet_gym.bench.probe``: ``-m``
    would import this package first (its instances import scipy.sparse), some 0.1 s of start-up that a
    user's process, which imports ``ainet_gym`` only, does not pay. ``-P``: the script's folder is not put
    on ``sys.path`` (its ``config.py`` would shadow any top-level module of that name)."""
    from ainet_gym.bench import probe

    t0 = now()
    proc = subprocess.run(
        [sys.executable, "-P", probe.__file__],
        input=json.dumps({**spec, "clock": clock_name()}),
        capture_output=True,
        text=True,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    wall = now() - t0
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]}, wall
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def bench_construction(cfg: BenchConfig, progress: Progress) -> list[dict]:
    """Section 3b: construction time and peak memory, each size in a fresh subprocess."""
    rows: list[dict] = []
    for size in cfg.construction_gpus:
        label, scenario = env_scenario(size)
        progress.start(f"construction: {label}")
        gpus = scenario_gpus(scenario)
        res, wall = _probe({"probe": "construction", "scenario": scenario})
        rows.append({"scenario": label, "gpus": gpus, **res, "subprocess_wall_s": wall})
        progress.done()
    return rows


def bench_startup(cfg: BenchConfig, progress: Progress) -> list[dict]:
    """Section 3c: a fresh process up to its first env step: cold (the compiled kernels are built into an
    empty cache directory) and again with that on-disk cache; the numpy backend for comparison."""
    import tempfile

    label, scenario = env_scenario(cfg.startup_gpus)
    gpus = scenario_gpus(scenario)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ainet-gym-numba-cache-") as cache:
        runs: list[tuple[str, str, dict[str, str] | None]] = [
            ("numba", "cold (empty kernel cache)", {"NUMBA_CACHE_DIR": cache}),
            ("numba", "cached (second process)", {"NUMBA_CACHE_DIR": cache}),
            ("numpy", "numpy backend", None),
        ]
        if not cfg.startup_cold:
            runs = [("numba", "cached (this machine's cache)", None), runs[2]]
        for backend, what, env in runs:
            progress.start(f"startup: {what}")
            res, wall = _probe({"probe": "startup", "scenario": scenario, "backend": backend}, env=env)
            row = {"scenario": label, "gpus": gpus, "run": what, **res, "process_wall_s": wall}
            if "error" not in row:  # interpreter start and imports: the rest of the process's wall time
                row["start_imports_s"] = wall - res["construct_s"] - res["first_step_s"]
            rows.append(row)
            progress.done()
    if cfg.startup_cold and "error" not in rows[0] and "error" not in rows[1]:
        rows[0]["compile_s"] = rows[0]["process_wall_s"] - rows[1]["process_wall_s"]
    return rows
