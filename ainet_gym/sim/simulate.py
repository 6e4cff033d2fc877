"""Simulation without RL: run a scenario under a routing policy and report what happened."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ainet_gym.fabric.topology import TIERS
from ainet_gym.routing.policies import Policy, get_policy
from ainet_gym.scenario.loader import load_scenario
from ainet_gym.scenario.spec import Scenario
from ainet_gym.sim.world import FabricWorld, StepResult
from ainet_gym.units import BYTES_PER_S_TO_GBPS

__all__ = ["flow_records", "link_records", "simulate", "step_record"]


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def step_record(
    world: FabricWorld, res: StepResult, b: int = 0, links: bool = False, flows: bool = False
) -> dict[str, Any]:
    """The JSON record of one interval of instance ``b`` (the `steps[i]` object of docs/model.md, contract 3).

    ``links`` adds ``"links"`` (every directed link: id, src, dst node names, tier, capacity_gbps during
    the interval, bytes, mean_utilization, peak_utilization), ``flows`` adds ``"flows"`` (every job
    connection: job, src_gpu, dst_gpu, paths as lists of link ids, split, bytes, mean_rate_gbps).
    """
    jobs = []
    for j, name in enumerate(res.job_names[b] if res.job_names else world.job_names(b)):
        if name is None:
            continue
        step_ms = _num(res.step_time_s[b, j] * 1e3)
        jobs.append(
            {
                "name": name,
                "gpus": int(res.job_gpus[b, j]),
                "iterations_completed": int(res.iterations[b, j]),
                "step_time_ms": _num(res.step_time_s[b, j] * 1e3),
                "comm_time_ms": _num(res.comm_time_s[b, j] * 1e3),
                "ideal_step_time_ms": _num(res.ideal_step_s[b, j] * 1e3),
                "gpu_utilization": _num(res.gpu_utilization[b, j]),
                "iteration_gpu_utilization": (
                    None if step_ms is None else _num(res.compute_s[b, j] * 1e3 / step_ms)
                ),
            }
        )
    f = world.fabric
    lu = res.link_utilization[b]
    net = world.network_links
    hot = net[np.argsort(-lu[net], kind="stable")[:5]]
    out: dict[str, Any] = {
        "jobs": jobs,
        "throughput_gbps": None if res.throughput_gbps is None else float(res.throughput_gbps[b]),
        "max_link_utilization": float(res.max_link_utilization[b]),
        "tier_bytes": {
            t: float(res.tier_bytes[b, i]) for i, t in enumerate(TIERS) if (f.link_tier == i).any()
        },
        "hottest_links": [{"link": f.link_names[i], "utilization": float(lu[i])} for i in hot],
        "stalled_transfers": int(res.stalled_transfers[b]),
        "failed_links": int(res.failed_links[b]),
    }
    if links:
        out["links"] = link_records(world, res, b)
    if flows:
        out["flows"] = flow_records(world, res, b)
    return out


def link_records(world: FabricWorld, res: StepResult, b: int = 0) -> list[dict[str, Any]]:
    """Per-link figures of one interval of instance ``b`` (see :func:`step_record`)."""
    f = world.fabric
    cap = f.capacity_bytes_per_s if res.capacity_bytes_per_s is None else res.capacity_bytes_per_s[b]
    peak = res.link_utilization[b] if res.link_peak_utilization is None else res.link_peak_utilization[b]
    names, tier = f.node_names, np.asarray(TIERS)[f.link_tier]
    return [
        {
            "id": i,
            "src": names[s],
            "dst": names[d],
            "tier": str(t),
            "capacity_gbps": float(c) * BYTES_PER_S_TO_GBPS,
            "bytes": float(by),
            "mean_utilization": float(mu),
            "peak_utilization": float(pu),
        }
        for i, (s, d, t, c, by, mu, pu) in enumerate(
            zip(
                f.link_src.tolist(),
                f.link_dst.tolist(),
                tier,
                cap,
                res.link_bytes[b],
                res.link_utilization[b],
                peak,
            )
        )
    ]


def flow_records(world: FabricWorld, res: StepResult, b: int = 0) -> list[dict[str, Any]]:
    """Per-connection figures of the jobs of instance ``b`` in one interval (see :func:`step_record`).

    A connection is a (source GPU, destination GPU) pair of a job; ``bytes`` is what it moved in the
    interval (every collective of the job that uses the pair), ``split`` its share on each path.
    Background traffic is not listed (it shows in the links).
    """
    t = res.connections
    assert t is not None
    dur = float(res.duration_s[b])
    names = res.job_names[b] if res.job_names else world.job_names(b)
    out = []
    for j, name in enumerate(names):
        fu = int(t.job_unit[b, j])
        if name is None or fu < 0:
            continue
        c0 = int(t.conn_off[fu])
        for c in range(c0, c0 + int(t.n_conns[fu])):
            n = int(t.npaths[c])
            by = float(t.bytes[c])
            out.append(
                {
                    "job": name,
                    "src_gpu": int(t.src[c]),
                    "dst_gpu": int(t.dst[c]),
                    "paths": [[int(x) for x in p[p >= 0]] for p in t.paths[c, :n]],
                    "split": [float(x) for x in t.split[c, :n]],
                    "bytes": by,
                    "mean_rate_gbps": by * BYTES_PER_S_TO_GBPS / dur if dur > 0 else 0.0,
                }
            )
    return out


def simulate(
    scenario: str | os.PathLike | dict | Scenario,
    policy: str | Policy = "ecmp",
    steps: int = 1,
    seed: int = 0,
    links: bool = False,
    flows: bool = False,
    link_windows: int = 10,
    backend: str | None = None,
) -> dict[str, Any]:
    """Run ``scenario`` for ``steps`` decision intervals under a routing ``policy``.

    Parameters
    ----------
    scenario : str, path, dict or Scenario
        A shipped scenario name, a YAML path, a dict or a loaded scenario.
    policy : str or callable
        ``ecmp``, ``spray``, ``wcmp``, ``greedy``, ``lp``, or a callable ``(world, last) -> split``.
    steps : int
        Number of decision intervals.
    seed : int
        Seeds placement, failures, churn and the ECMP hash.
    links, flows : bool
        Add per-link and per-connection records to every step (see :func:`step_record`).
    link_windows : int
        With ``links``: the interval runs as this many equal windows, and ``peak_utilization`` is the
        largest window mean of a link (a counter polled ``link_windows`` times per interval).
    backend : {"numba", "numpy"} or None
        Simulation backend (None: ``$AINET_GYM_BACKEND``, else numba when it imports); the results agree
        to round-off.

    Returns
    -------
    dict
        ``{"scenario", "policy", "seed", "decision_interval_ms", "steps": [...]}``; each step as
        :func:`step_record`. Step and comm times are means over the iterations that completed in the
        interval (None where none did).

    Raises
    ------
    ScenarioError
        If the scenario is invalid.
    ValueError
        If the policy is unknown, ``steps`` < 1 or the backend is unknown.
    """
    _check_run_args(steps, link_windows)
    sc = load_scenario(scenario)
    pol = get_policy(policy) if isinstance(policy, str) else policy
    world = FabricWorld(sc, batch=1, backend=backend)
    world.reset(seeds=[seed])
    if links or flows:  # every step adds one record per link (per connection): bound the JSON before running
        _check_record_budget(world, steps, links, flows)
    out = []
    last: StepResult | None = None
    for _ in range(steps):
        split = pol(world, last)
        last = world.step(split, windows=link_windows if links else 1)
        out.append(step_record(world, last, links=links, flows=flows))
    return {
        "scenario": sc.name,
        "policy": policy if isinstance(policy, str) else getattr(policy, "__name__", "custom"),
        "seed": seed,
        "decision_interval_ms": world.decision_interval_s * 1e3,
        "steps": out,
    }


def _check_run_args(steps: int, link_windows: int) -> None:
    """:func:`simulate`'s ``steps`` and ``link_windows`` checked against the loader's limits (ValueError naming
    the argument)."""
    from ainet_gym.scenario.loader import LIMITS

    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= LIMITS["steps_max"]:
        raise ValueError(f"steps = {steps!r}: must be an integer in [1, {int(LIMITS['steps_max']):,}]")
    wmax = int(LIMITS["link_windows_max"])
    if isinstance(link_windows, bool) or not isinstance(link_windows, int) or not 1 <= link_windows <= wmax:
        raise ValueError(
            f"link_windows = {link_windows!r}: must be an integer in [1, {wmax:,}] "
            "(ainet_gym.scenario.loader.LIMITS['link_windows_max'])"
        )


def _check_record_budget(world: FabricWorld, steps: int, links: bool, flows: bool) -> None:
    """With ``links`` or ``flows`` every step adds one record per link (per connection): ValueError when
    ``steps`` of them would pass the loader's ``records_max``, before anything runs."""
    from ainet_gym.scenario.loader import LIMITS

    per_step = (world.fabric.n_links if links else 0) + (int(world.sim.n_conns) if flows else 0)
    rmax = int(LIMITS["records_max"])
    if steps * per_step > rmax:
        raise ValueError(
            f"steps = {steps}: with --links/--flows the output holds about {steps * per_step:,} records "
            f"({per_step:,} per step), above {rmax:,} (ainet_gym.scenario.loader.LIMITS['records_max']); "
            "fewer steps"
        )
