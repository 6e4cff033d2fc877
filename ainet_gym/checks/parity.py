"""Backend parity: the compiled (numba) and reference (numpy) backends step the same env in lockstep.

Every observation, reward, done flag and info value of the two must agree to ``RTOL`` (1e-9) relative;
float32 observations to one float32 rounding step of the float64 value they were cast from (the two
backends sum link bytes in a different order, so a float64 value may differ in its last bits and round
to the neighbouring float32). The CI test (``tests/sim/test_backends.py``) runs one scenario of every family;
the full sweep is a command::

    python -m ainet_gym.checks.parity                     # every shipped scenario, seeds 0-2, 20 intervals
    python -m ainet_gym.checks.parity --seeds 1 --intervals 5 --modes event,phase spine-leaf-2to1
    python -m ainet_gym.checks.parity --incremental-min-flows 0   # the fills on every instance

It prints one line per (scenario, policy, rate update mode) with the largest relative difference, and
exits with status 1 if any exceeds the tolerance. ``compare_backends(..., incremental_min_flows=0)`` runs the
compiled backend's lazy exact kernel (incremental allocation) from the first flow on (by default from 256
flows of an instance, :data:`ainet_gym.sim.backends.numba.settings.INCREMENTAL_MIN_FLOWS`). Shipped scenarios of more than
:data:`MAX_SWEEP_GPUS` GPUs are replaced by their family at a reduced size (the MoE family at 128 GPUs); one
weighted scenario (:func:`weighted_scenario`: moe-alltoall-skewed with job share weights 3 and 1, the lazy
kernel's size) checks the weighted levels of both backends;
large instances are compared incremental kernel against compiled full re-solve
(``tests/sim/test_incremental.py``, ``docs/engine-alltoall.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "MAX_SWEEP_GPUS",
    "PARITY_POLICIES",
    "RTOL",
    "compare_backends",
    "max_rel_diff",
    "parity_main",
    "weighted_scenario",
]

RTOL = 1e-9
#: policies of the parity check: engine-level baselines (through ``step_split``) and seeded random
#: actions in ``split`` mode (through ``step``)
PARITY_POLICIES = ("ecmp", "spray", "greedy", "random")
_F32_RTOL = float(np.finfo(np.float32).eps)
#: the default sweep takes shipped scenarios up to this many GPUs (the numpy backend is the slow reference)
MAX_SWEEP_GPUS = 256


def max_rel_diff(a: Any, b: Any) -> float:
    """Largest ``|a - b| / max(|a|, |b|)`` over two arrays (0 where both are equal, inf on a shape,
    dtype-kind or NaN-pattern mismatch)."""
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape or x.dtype.kind != y.dtype.kind:
        return float("inf")
    if x.dtype.kind not in "fc":
        return 0.0 if np.array_equal(x, y) else float("inf")
    x, y = x.astype(np.float64), y.astype(np.float64)
    if not np.array_equal(np.isnan(x), np.isnan(y)):
        return float("inf")
    ok = ~np.isnan(x) & (x != y)
    if not ok.any():
        return 0.0
    with np.errstate(invalid="ignore"):
        d = np.abs(x[ok] - y[ok]) / np.maximum(np.abs(x[ok]), np.abs(y[ok]))
    return float(np.nan_to_num(d, nan=np.inf).max())


def _compare(tag: str, a: Any, b: Any, worst: dict[str, float]) -> None:
    if isinstance(a, dict):
        if set(a) != set(b):
            worst[f"{tag} keys"] = float("inf")
            return
        for k in a:
            _compare(f"{tag}[{k}]", a[k], b[k], worst)
        return
    if isinstance(a, tuple | list):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _compare(f"{tag}[{i}]", x, y, worst)
        return
    d = max_rel_diff(a, b)
    tol = _F32_RTOL if np.asarray(a).dtype == np.float32 else RTOL
    worst[tag] = max(worst.get(tag, 0.0), d / tol * RTOL)  # scaled so that RTOL is the bar for every key


def compare_backends(
    scenario: Any,
    policy: str,
    seed: int = 0,
    intervals: int = 5,
    batch: int = 1,
    rate_updates: str | None = None,
    rate_quantum_us: float | None = None,
    incremental_min_flows: int | None = None,
) -> dict[str, float]:
    """Step ``batch`` copies of ``scenario`` on both backends in lockstep; the largest relative
    difference of every output (float32 observations scaled so that ``RTOL`` is the bar throughout).

    ``policy`` is one of :data:`PARITY_POLICIES`; ``rate_updates`` and ``rate_quantum_us`` override the
    scenario's; ``incremental_min_flows``: the compiled backend's incremental allocation applies from this
    many active flows on (0: always, in exact event mode; -1: never, a full re-solve per event; None: the
    kernel's default, :data:`ainet_gym.sim.backends.numba.settings.INCREMENTAL_MIN_FLOWS`).
    """
    from ainet_gym.sim.backends.numba import settings

    saved = settings.INCREMENTAL_MIN_FLOWS
    if incremental_min_flows is not None:
        settings.INCREMENTAL_MIN_FLOWS = incremental_min_flows  # read by every simulation built meanwhile
    try:
        return _compare_backends(scenario, policy, seed, intervals, batch, rate_updates, rate_quantum_us)
    finally:
        settings.INCREMENTAL_MIN_FLOWS = saved


def _compare_backends(
    scenario: Any,
    policy: str,
    seed: int,
    intervals: int,
    batch: int,
    rate_updates: str | None,
    rate_quantum_us: float | None,
) -> dict[str, float]:
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.routing.policies import get_policy
    from ainet_gym.scenario.loader import load_scenario

    sc = load_scenario(scenario)
    given = {"rate_updates": rate_updates, "rate_quantum_us": rate_quantum_us}
    if over := {k: v for k, v in given.items() if v is not None}:
        sc = dataclasses.replace(sc, dynamics=dataclasses.replace(sc.dynamics, **over))
    cores = [EnvCore(sc, batch, action_mode="split", backend=be) for be in ("numpy", "numba")]
    seeds = [seed + i for i in range(batch)]
    worst: dict[str, float] = {}
    outs = [c.reset(list(seeds)) for c in cores]
    _compare("reset", outs[0], outs[1], worst)
    rng = np.random.default_rng(seed)
    pol = None if policy == "random" else get_policy(policy)
    for t in range(intervals):
        if pol is None:
            a = rng.uniform(-1.0, 1.0, size=(batch, *cores[0].action_space.shape)).astype(np.float32)
            outs = [c.step(a) for c in cores]
        else:
            outs = [c.step_split(pol(c.world, c.last_result)) for c in cores]
        for name, x, y in zip(("obs", "reward", "terminated", "truncated", "info"), outs[0], outs[1]):
            _compare(f"step{t}.{name}", x, y, worst)
    return worst


def weighted_scenario() -> dict[str, Any]:
    """The sweep's weighted scenario: ``moe-alltoall-skewed`` (492 flows: the numba backend runs it in the
    lazy incremental kernel) with ``share_weight`` 3 for its MoE job and 1 for the dense one (docs/model.md,
    "Share weights"), named ``moe-alltoall-skewed-weighted``."""
    from ainet_gym.scenario.files import read_yaml, resolve_scenario_path

    path = resolve_scenario_path("moe-alltoall-skewed")
    d = dict(read_yaml(path, str(path)))
    d["name"] = "moe-alltoall-skewed-weighted"
    jobs = [dict(j) for j in d["workload"]["jobs"]]
    for j, w in zip(jobs, (3.0, 1.0), strict=True):
        j["share_weight"] = w
    d["workload"] = {**d["workload"], "jobs": jobs}
    return d


def _shipped() -> list[Any]:
    """The shipped scenarios of at most :data:`MAX_SWEEP_GPUS` GPUs, the MoE family at 128 GPUs and
    :func:`weighted_scenario`."""
    from ainet_gym.scenario.loader import fabric_gpu_count, list_scenarios, load_scenario
    from ainet_gym.scenario.moe import moe_scenario

    out: list[Any] = []
    for name, _ in list_scenarios():
        if fabric_gpu_count(load_scenario(name).fabric) <= MAX_SWEEP_GPUS:
            out.append(name)
    out += [
        moe_scenario(128, topo, 8, name=f"moe-3d-128-{topo}") for topo in ("spine_leaf", "rail_optimized")
    ]
    out.append(weighted_scenario())
    return out


def parity_main(argv: Sequence[str] | None = None) -> int:
    """Command line of the full parity sweep (see the module docstring)."""
    from ainet_gym.agents.arg_types import int_arg
    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's

    ap = OneLineParser(prog="python -m ainet_gym.checks.parity", description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", help="scenario names or paths (default: every shipped one)")
    ap.add_argument("--seeds", type=int_arg(1), default=3, help="seeds 0..N-1 (default 3)")
    ap.add_argument(
        "--intervals", type=int_arg(1), default=20, help="decision intervals per run (default 20)"
    )
    ap.add_argument("--policies", default=",".join(PARITY_POLICIES), help="comma-separated")
    ap.add_argument(
        "--modes",
        default="scenario",
        help="comma-separated rate update modes: scenario (its own), event, phase",
    )
    ap.add_argument(
        "--incremental-min-flows",
        type=int_arg(-1),
        default=None,
        help="the compiled backend's fills (incremental exact allocation) from this many active flows on: 0 "
        "always, -1 never (default: the kernel's, ainet_gym.sim.backends.numba.settings.INCREMENTAL_MIN_FLOWS)",
    )
    args = ap.parse_args(argv)
    from ainet_gym.agents.module_cli import run_module_cli

    return run_module_cli("python -m ainet_gym.checks.parity", lambda: _parity_run(args))


def _parity_run(args: argparse.Namespace) -> int:
    """The parsed sweep of :func:`parity_main`: every scenario x rate mode x policy x seed."""
    names = args.scenarios or _shipped()
    modes = [None if m == "scenario" else m for m in args.modes.split(",")]
    bad = 0
    t_all = time.perf_counter()
    for name in names:
        for mode in dict.fromkeys(modes):
            for policy in args.policies.split(","):
                t0 = time.perf_counter()
                worst = 0.0
                where = ""
                for seed in range(args.seeds):
                    w = compare_backends(name, policy, seed, args.intervals, rate_updates=mode,
                                         incremental_min_flows=args.incremental_min_flows)  # fmt: skip
                    k, v = max(w.items(), key=lambda kv: kv[1])
                    if v > worst:
                        worst, where = v, f"seed {seed} {k}"
                status = "ok" if worst <= RTOL else "FAIL"
                bad += status != "ok"
                print(
                    f"{name['name'] if isinstance(name, dict) else Path(str(name)).stem:32s} "
                    f"{mode or 'scenario':8s} {policy:7s} max rel diff "
                    f"{worst:.3g} {status} {where if worst else ''} ({time.perf_counter() - t0:.1f} s)",
                    flush=True,
                )
    print(f"{'all equal' if not bad else f'{bad} FAILED'} to {RTOL:g} relative "
          f"({time.perf_counter() - t_all:.0f} s)")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(parity_main())
