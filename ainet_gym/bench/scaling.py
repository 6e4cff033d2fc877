"""Section 6 of the bench: how an interval's cost grows with the GPUs, the transfers per job and the jobs
(:func:`bench_scaling`), with the fitted exponents and the slowest successive intervals of the
1024-GPU target scenario.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ainet_gym.bench.clock import now
from ainet_gym.bench.config import BenchConfig
from ainet_gym.bench.instances import (
    cluster_scenario,
)
from ainet_gym.bench.progress import Progress
from ainet_gym.bench.timing import last_metrics, timeit

__all__ = ["bench_scaling"]


def _fit_exponent(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Slope of log(y) against log(x) (least squares); None with fewer than 2 points."""
    if len(x) < 2:
        return None
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def _instance_size(world: Any, sc: Any) -> dict[str, Any]:
    """The size of a timed instance (one world, batch 1): GPUs, links, jobs, transfers, flows and entries."""
    sim = world.sim
    assert sim is not None
    return {
        "scenario": sc.name,
        "gpus": int(world.fabric.n_gpus),
        "links": int(world.fabric.n_links),
        "jobs": len(sc.jobs),
        "transfers": int(sim.member_flow.shape[0]),
        "flows": int(sim.n_flows),
        "entries": int(sim.e_flow.shape[0]),
    }


def _interval_cost(scenario: dict[str, Any], min_time: float, max_repeats: int) -> dict[str, Any]:
    """Median wall time of one decision interval (``FabricWorld.step`` with the static ECMP split)."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario(scenario)
    t0 = now()
    world = FabricWorld(sc, 1)
    world.reset(seeds=[0])
    build_s = now() - t0
    events: list[int] = []
    world.step(world.default_split())  # warm-up

    def one() -> None:
        res = world.step(world.default_split())
        events.append(int(res.events))

    t, reps, _ = timeit(one, min_time, max_repeats, stat="median")
    return {
        **_instance_size(world, sc),
        "events_per_interval": float(np.mean(events)),
        "interval_ms": t * 1e3,
        "repeats": reps,
        "build_s": build_s,
    }


def _successive_intervals(
    scenario: dict[str, Any],
    intervals: int,
    max_events: int,
    budget_s: float,
    rate_updates: str,
    quantum_us: float = 0.0,
    incremental_min_flows: int | None = None,
) -> dict[str, Any]:
    """Wall time of the successive intervals of one episode from reset (static ECMP), each on its own:
    an episode's intervals differ (the first ones are mostly compute; later ones overlap the jobs'
    communication), so the slowest is the figure, not a median. Stops after ``intervals``, after an
    interval with more than ``max_events`` events (timed up to there: a lower bound), or once
    ``budget_s`` is spent. ``quantum_us``: the scenario's ``dynamics.rate_quantum_us``;
    ``incremental_min_flows``: the compiled backend's lazy exact kernel from this many flows of an
    instance on (-1: never, the full re-solve per event), None: the default
    (:data:`ainet_gym.sim.backends.numba.settings.INCREMENTAL_MIN_FLOWS`)."""
    from ainet_gym.sim.backends.numba import settings

    saved = settings.INCREMENTAL_MIN_FLOWS
    if incremental_min_flows is not None:
        settings.INCREMENTAL_MIN_FLOWS = incremental_min_flows  # read by the simulations built meanwhile
    try:
        out = _successive_intervals_of(scenario, intervals, max_events, budget_s, rate_updates, quantum_us)
    finally:
        settings.INCREMENTAL_MIN_FLOWS = saved
    lazy = incremental_min_flows if incremental_min_flows is not None else saved
    exact = rate_updates == "event" and not quantum_us
    out["allocation"] = (None if not exact else "lazy incremental kernel" if lazy >= 0 else
                         "full re-solve per event")  # fmt: skip
    return out


def _successive_intervals_of(
    scenario: dict[str, Any],
    intervals: int,
    max_events: int,
    budget_s: float,
    rate_updates: str,
    quantum_us: float,
) -> dict[str, Any]:
    """:func:`_successive_intervals` with the kernel default set: the intervals timed
    (:func:`_timed_intervals`) and summed up (:func:`_interval_summary`)."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario(
        {
            **scenario,
            "dynamics": {
                **scenario.get("dynamics", {}),
                "rate_updates": rate_updates,
                "rate_quantum_us": quantum_us,
            },
        }
    )
    world = FabricWorld(sc, 1)
    world.reset(seeds=[0])
    rows = _timed_intervals(world, intervals, max_events, budget_s)
    worst = max(rows, key=lambda r: r["s"])
    return {
        **_interval_summary(rows),
        "scenario": sc.name,
        "rate_updates": rate_updates,
        "rate_quantum_us": quantum_us,
        "intervals": rows,
        "slowest_s": worst["s"],
        "slowest_interval": worst["interval"],
        "slowest_events": worst["events"],
        "capped": any(r["capped"] for r in rows),
        "max_events": max_events,
    }


def _timed_intervals(world: Any, intervals: int, max_events: int, budget_s: float) -> list[dict[str, Any]]:
    """Step ``world`` (reset, static ECMP) interval after interval, each timed on its own with its events and
    re-fill counters, until ``intervals``, an interval capped at ``max_events`` (its counters up to the cap)
    or ``budget_s`` spent."""
    from ainet_gym.sim.engine import TooManyEvents

    sim = world.sim
    assert sim is not None
    rows: list[dict[str, Any]] = []
    spent = 0.0
    with last_metrics(sim) as last:
        for i in range(intervals):
            t0 = now()
            last.clear()
            try:
                res = world.step(world.default_split(), max_events=max_events)
                ev, capped = int(res.events), False
            except TooManyEvents as exc:
                ev, capped = max_events, True
                if exc.metrics is not None:  # the counters up to the cap
                    last[:] = [exc.metrics]
            dt = now() - t0
            spent += dt
            row = {"interval": i, "events": ev, "s": dt, "capped": capped}
            if last:
                m = last[0]
                row.update(incremental_solves=m.incremental_solves, flows_refilled=m.flows_refilled,
                           flows_active=m.flows_active, full_fills=m.full_fills,
                           parallel_solves=m.parallel_solves, repairs=m.repairs,
                           repairs_declined=m.repairs_declined, flows_checked=m.flows_checked)  # fmt: skip
            rows.append(row)
            if capped or spent >= budget_s:
                break
    return rows


def _interval_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The re-fill counters of :func:`_timed_intervals`' rows summed: the shares of the active flows the
    incremental solves re-filled and touched, and the counts of repairs and solves."""
    refilled = sum(r.get("flows_refilled", 0) for r in rows)
    checked = sum(r.get("flows_checked", 0) for r in rows)
    active = sum(r.get("flows_active", 0) for r in rows)
    return {
        "refilled_share": refilled / active if active else None,
        "touched_share": (refilled + checked) / active if active else None,
        "repairs": sum(r.get("repairs", 0) for r in rows),
        "repairs_declined": sum(r.get("repairs_declined", 0) for r in rows),
        "incremental_solves": sum(r.get("incremental_solves", 0) for r in rows),
        "parallel_solves": sum(r.get("parallel_solves", 0) for r in rows),
    }


def _fixed_intervals_cost(scenario: dict[str, Any], intervals: int, repeats: int) -> dict[str, Any]:
    """CPU time of the process per decision interval over a fixed set of intervals: intervals 2 .. ``1 +
    intervals`` of an episode from reset (``FabricWorld.step`` with the static ECMP split; interval 1, a
    warm-up, untimed), the best of ``repeats`` runs of that same set, each from a fresh reset (the same work:
    seed 0); ``interval_ms`` is that CPU time, ``interval_wall_ms`` the wall time of the same run.

    Unlike :func:`_interval_cost`, which times the intervals that fit a wall-clock window, the intervals timed
    (and so the events, ``events_per_interval``) do not depend on the machine's load: on an AllToAll the
    intervals of an episode differ by 100x in events, so a window that takes in one more interval under a
    lighter load moves the cost exponent of the sweep. CPU time rather than wall time: on a machine shared
    with other processes wall times moved the largest point by 1.5x between runs a minute apart
    (docs/engine-alltoall.md, item 11)."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    if isinstance(intervals, bool) or not isinstance(intervals, int) or intervals < 1:
        raise ValueError(f"transfers_intervals = {intervals!r}: must be an int >= 1")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"transfers_repeats = {repeats!r}: must be an int >= 1")
    sc = load_scenario(scenario)
    t0 = now()
    world = FabricWorld(sc, 1)
    build_s = now() - t0
    best, best_wall = math.inf, math.inf
    events: list[int] = []
    for _ in range(repeats):
        world.reset(seeds=[0])
        world.step(world.default_split())  # interval 1: warm-up, untimed
        events = []
        cpu = wall = 0.0
        for _ in range(intervals):
            c1, t1 = time.process_time(), time.perf_counter()
            res = world.step(world.default_split())
            cpu += time.process_time() - c1
            wall += time.perf_counter() - t1
            events.append(int(res.events))
        if cpu < best:
            best, best_wall = cpu, wall
    return {
        **_instance_size(world, sc),
        "events_per_interval": float(np.mean(events)),
        "interval_ms": best / intervals * 1e3,
        "interval_wall_ms": best_wall / intervals * 1e3,
        "clock": "process CPU",
        "repeats": repeats,
        "intervals_timed": intervals,
        "build_s": build_s,
    }


def bench_scaling(cfg: BenchConfig, progress: Progress) -> dict[str, Any]:
    """Section 4: cost of one interval against fabric size and against transfers, with fitted exponents."""
    size_rows = []
    for n in cfg.scaling_gpus:
        progress.start(f"scaling: {n} GPUs")
        size_rows.append(_interval_cost(cluster_scenario(n), cfg.min_time_s, cfg.max_repeats))
        gc.collect()
        progress.done()
    tr_rows = []
    nf = cfg.transfers_fabric_gpus
    for jg in cfg.transfers_job_gpus:
        progress.start(f"scaling: {nf} GPUs, 8 AllToAll x {jg}")
        tr_rows.append(
            {**_fixed_intervals_cost(cluster_scenario(nf, 8, jg, op="alltoall"), cfg.transfers_intervals,
                                     cfg.transfers_repeats),
             "job_gpus": jg}
        )  # fmt: skip
        gc.collect()
        progress.done()
    job_rows = []
    for nj in cfg.scaling_jobs:
        progress.start(f"scaling: {nf} GPUs, {nj} jobs")
        job_rows.append(_interval_cost(cluster_scenario(nf, nj), cfg.min_time_s, cfg.max_repeats))
        gc.collect()
        progress.done()
    slowest = []
    if cfg.slowest_intervals:
        # exact event mode twice in the same run: the lazy incremental kernel and the full re-solve per event
        runs = (("event", 0.0, cfg.slowest_incremental_min_flows), ("event", 0.0, -1),
                ("event", cfg.slowest_quantum_us, None), ("phase", 0.0, None))  # fmt: skip
        for mode, q, inc in runs:
            progress.start(f"scaling: {nf} GPUs, 8 AllToAll x 128, successive intervals ({mode}, {q:g} us)")
            slowest.append(
                _successive_intervals(cluster_scenario(nf, 8, 128, op="alltoall"), cfg.slowest_intervals,
                                      cfg.slowest_max_events, cfg.slowest_budget_s, mode, q, inc)
            )  # fmt: skip
            gc.collect()
            progress.done()
    ms = [r["interval_ms"] for r in size_rows]
    tr_x = [r["transfers"] for r in tr_rows]
    tr_y = [r["interval_ms"] for r in tr_rows]
    return {
        "fabric_size": size_rows,
        "exponent_vs_gpus": _fit_exponent([r["gpus"] for r in size_rows], ms),
        "exponent_vs_transfers_fabric_sweep": _fit_exponent([r["transfers"] for r in size_rows], ms),
        "transfers": tr_rows,
        "transfers_fabric_gpus": nf,
        "exponent_vs_transfers": _fit_exponent(tr_x, tr_y),
        "exponent_vs_transfers_last_two": _fit_exponent(tr_x[-2:], tr_y[-2:]),
        "jobs": job_rows,
        "slowest": slowest,
        "exponent_vs_jobs": _fit_exponent(
            [r["jobs"] for r in job_rows], [r["interval_ms"] for r in job_rows]
        ),
    }
