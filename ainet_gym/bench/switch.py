"""The switch section of the bench (:func:`bench_switch`): the lazy kernel, the full re-solve per event and
the switch between them by its cost model, on the same instances (:data:`SWITCH_MODES`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from ainet_gym.bench.config import BenchConfig
from ainet_gym.bench.instances import (
    cluster_scenario,
)
from ainet_gym.bench.progress import Progress
from ainet_gym.bench.timing import last_metrics, rel_err

__all__ = ["SWITCH_MODES", "bench_switch"]


#: the three ways a lazy-kernel instance may allocate in exact event mode (:func:`bench_switch`): the lazy
#: kernel only (the switch off), the full re-solve per event only (``incremental_min_flows`` -1) and the
#: switch between them by its cost model (``BatchSim.lazy_switch``)
SWITCH_MODES = ("lazy only", "full only", "switch")


def _switch_world(scenario: dict[str, Any], mode: str) -> Any:
    """A world of ``scenario`` whose simulation allocates as ``mode`` says (one of :data:`SWITCH_MODES`)."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    world = FabricWorld(load_scenario(scenario), 1, backend="numba")
    world.reset(seeds=[0])
    sim = world.sim
    assert sim is not None
    sim.incremental_min_flows = -1 if mode == "full only" else 0
    sim.lazy_switch = mode == "switch"
    return world


def bench_switch(cfg: BenchConfig, progress: Progress) -> dict[str, Any]:
    """Section 6: intervals ``1..cfg.switch_intervals`` from reset of 8 AllToAll x 128 GPUs in exact event mode,
    on the lazy kernel only, the full re-solve per event only and the switch between them
    (:data:`ainet_gym.sim.backends.numba.settings.LAZY_SWITCH`): CPU s of each interval (``time.process_time``, this
    process), the median of ``cfg.switch_runs`` runs that take the modes in turn (the order rotating from
    run to run, each run from reset), and the flows each incremental solve re-filled as a share of the
    active flows (the lazy kernel only: the flows an event touches). Every interval's results of the three
    modes are compared (iterations, link bytes) to 1e-9 relative."""
    out: dict[str, Any] = {
        "runs": cfg.switch_runs,
        "intervals": cfg.switch_intervals,
        "modes": list(SWITCH_MODES),
    }
    if not cfg.switch_runs or not cfg.switch_intervals:
        return out
    job_gpus = min(128, cfg.transfers_fabric_gpus // 8)  # (a smaller fabric: 8 jobs that fill it)
    scenario = cluster_scenario(cfg.transfers_fabric_gpus, 8, job_gpus, op="alltoall")
    progress.start(
        f"switch: 8 AllToAll x {job_gpus} GPUs, intervals 1-{cfg.switch_intervals}, {cfg.switch_runs} runs"
    )
    worlds = {m: _switch_world(scenario, m) for m in SWITCH_MODES}
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    times: dict[str, list[list[float]]] = {m: [] for m in SWITCH_MODES}
    counters: dict[str, list[dict[str, int]]] = {m: [] for m in SWITCH_MODES}
    worst = 0.0
    for run in range(cfg.switch_runs):
        order = SWITCH_MODES[run % 3 :] + SWITCH_MODES[: run % 3]
        results: dict[str, list] = {}
        for mode in order:
            row, results[mode], cnt = _switch_mode_run(
                worlds[mode], cfg.switch_intervals, cfg.slowest_max_events
            )
            times[mode].append(row)
            if run == 0:
                counters[mode] = cnt
        ref = results["full only"]
        for mode in ("lazy only", "switch"):
            for (it_a, lb_a), (it_b, lb_b) in zip(results[mode], ref, strict=True):
                worst = max(worst, rel_err(it_a, it_b), rel_err(lb_a, lb_b))
    progress.done()
    out.update(
        scenario=scenario["name"],
        **_switch_figures(times, counters, cfg.switch_intervals),
        max_rel_diff=worst,
        load_avg_1min=(load0, os.getloadavg()[0] if hasattr(os, "getloadavg") else None),
    )
    return out


def _switch_mode_run(
    world: Any, intervals: int, max_events: int
) -> tuple[list[float], list[tuple[np.ndarray, np.ndarray]], list[dict[str, int]]]:
    """One run of :func:`bench_switch` in one mode, from reset: CPU s of each interval, its results
    (iterations, link bytes) and its counters (events, incremental solves, flows re-filled, ...)."""
    world.reset(seeds=[0])
    row, res, cnt = [], [], []
    with last_metrics(world.sim) as last:
        for _ in range(intervals):
            t0 = time.process_time()
            r = world.step(world.default_split(), max_events=max_events)
            row.append(time.process_time() - t0)
            res.append((np.asarray(r.iterations, dtype=float), np.asarray(r.link_bytes, dtype=float)))
            m = last[0]
            cnt.append({"events": int(m.events), "incremental_solves": int(m.incremental_solves),
                        "flows_refilled": int(m.flows_refilled), "flows_active": int(m.flows_active),
                        "flows_checked": int(m.flows_checked),
                        "full_path_events": int(m.full_path_events), "lazy_switches": int(m.lazy_switches)})  # fmt: skip
    return row, res, cnt


def _switch_figures(
    times: dict[str, list[list[float]]], counters: dict[str, list[dict[str, int]]], intervals: int
) -> dict[str, Any]:
    """:func:`bench_switch`'s figures: the median CPU s per interval and mode, the times and counters, and
    the shares of the active flows the lazy kernel touched (re-filled or read by the repair) and re-filled."""
    med = {m: [float(np.median([r[i] for r in times[m]])) for i in range(intervals)] for m in SWITCH_MODES}
    lazy = counters["lazy only"]
    refilled = sum(c["flows_refilled"] + c["flows_checked"] for c in lazy)  # re-filled or read by the repair
    active = sum(c["flows_active"] for c in lazy)
    return {
        "median_cpu_s": med,
        "cpu_s": times,
        "counters": counters,
        "touched_share": refilled / active if active else None,
        "touched_share_per_interval": [
            (c["flows_refilled"] + c["flows_checked"]) / c["flows_active"] if c["flows_active"] else None
            for c in lazy
        ],
        "refilled_share": sum(c["flows_refilled"] for c in lazy) / active if active else None,
    }
