"""Simulation without RL: run a scenario under a routing policy and report what happened."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ainet_gym.policies import Policy, get_policy
from ainet_gym.scenario import load_scenario
from ainet_gym.spec import Scenario
from ainet_gym.topology import TIERS
from ainet_gym.world import FabricWorld, StepResult

__all__ = ["simulate", "step_record"]


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def step_record(world: FabricWorld, res: StepResult, b: int = 0) -> dict[str, Any]:
    """The JSON record of one interval of instance ``b`` (the `steps[i]` object of docs/model.md, contract 3)."""
    jobs = []
    for j, name in enumerate(res.job_names[b] if res.job_names else world.job_names(b)):
        if name is None:
            continue
        jobs.append(
            {
                "name": name,
                "gpus": int(res.job_gpus[b, j]),
                "iterations_completed": int(res.iterations[b, j]),
                "step_time_ms": _num(res.step_time_s[b, j] * 1e3),
                "comm_time_ms": _num(res.comm_time_s[b, j] * 1e3),
                "ideal_step_time_ms": _num(res.ideal_step_s[b, j] * 1e3),
                "gpu_utilization": _num(res.gpu_utilization[b, j]),
            }
        )
    f = world.fabric
    lu = res.link_utilization[b]
    net = world.network_links
    hot = net[np.argsort(-lu[net], kind="stable")[:5]]
    return {
        "jobs": jobs,
        "max_link_utilization": float(res.max_link_utilization[b]),
        "tier_bytes": {
            t: float(res.tier_bytes[b, i]) for i, t in enumerate(TIERS) if (f.link_tier == i).any()
        },
        "hottest_links": [{"link": f.link_names[i], "utilization": float(lu[i])} for i in hot],
        "stalled_transfers": int(res.stalled_transfers[b]),
        "failed_links": int(res.failed_links[b]),
    }


def simulate(
    scenario: str | os.PathLike | dict | Scenario,
    policy: str | Policy = "ecmp",
    steps: int = 1,
    seed: int = 0,
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
        If the policy is unknown or ``steps`` < 1.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps = {steps!r}: must be an integer >= 1")
    sc = load_scenario(scenario)
    pol = get_policy(policy) if isinstance(policy, str) else policy
    world = FabricWorld(sc, batch=1)
    world.reset(seeds=[seed])
    out = []
    last: StepResult | None = None
    for _ in range(steps):
        split = pol(world, last)
        last = world.step(split)
        out.append(step_record(world, last))
    return {
        "scenario": sc.name,
        "policy": policy if isinstance(policy, str) else getattr(policy, "__name__", "custom"),
        "seed": seed,
        "decision_interval_ms": world.decision_interval_s * 1e3,
        "steps": out,
    }
