"""The compiled backend's incremental exact allocator (exact event mode): rates re-filled from the restart
level on, equal to a full re-solve at every event (to 1e-9 relative, the backends' contract), on random
scenarios, splits and event sequences; and to the numpy reference (a full re-solve per event)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ainet_gym import load_scenario
from ainet_gym.sim import kernels
from ainet_gym.sim.world import FabricWorld

RTOL = 1e-9
FIELDS = ("iterations", "step_time_s", "comm_time_s", "link_bytes", "stalled_transfers", "gpu_utilization")


def rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(a) & (a != b)
    if not ok.any():
        return 0.0
    return float((np.abs(a[ok] - b[ok]) / np.maximum(np.abs(a[ok]), np.abs(b[ok]))).max())


@st.composite
def scenarios(draw):
    """A small spine-leaf with a few jobs: AllToAll (skewed or not), ring AllReduce, sendrecv shifts."""
    leaves = draw(st.integers(2, 4))
    hosts = draw(st.integers(1, 2))
    gpus_per_host = draw(st.sampled_from([2, 4]))
    n = leaves * hosts * gpus_per_host
    jobs, used = [], 0
    for j in range(draw(st.integers(1, 3))):
        g = draw(st.integers(2, max(2, n // 2)))
        if used + g > n:
            break
        op = draw(st.sampled_from(["alltoall", "alltoall", "allreduce", "sendrecv"]))
        coll = {"op": op, "bytes": draw(st.sampled_from([1e7, 3.3e7, 1e8]))}
        if op == "alltoall":
            coll["skew"] = draw(st.sampled_from([0.0, 0.5, 1.0]))
        if op == "sendrecv":
            coll["pattern"] = f"shift:{draw(st.integers(1, g - 1))}"
        jobs.append({"name": f"j{j}", "gpus": g, "placement": list(range(used, used + g)),
                     "compute_ms": draw(st.sampled_from([1.0, 2.0, 3.5])), "collectives": [coll]})  # fmt: skip
        used += g
    return {
        "name": "random-incremental",
        "fabric": {
            "topology": "spine_leaf",
            "leaves": leaves,
            "spines": draw(st.integers(1, 3)),
            "hosts_per_leaf": hosts,
            "gpus_per_host": gpus_per_host,
            "nic_gbps": 400,
            "uplink_gbps": draw(st.sampled_from([100, 200, 400])),
        },
        "workload": {"jobs": jobs},
        "dynamics": {"decision_interval_ms": 5.0},
        "routing": {"max_paths": 4},
    }


def run(scenario: dict, backend: str, inc_min: int, seed: int, steps: int, splits: list) -> list:
    w = FabricWorld(load_scenario(scenario), 1, backend=backend)
    w.reset(seeds=[seed])
    w.sim.incremental_min_flows = inc_min
    out = []
    for k in range(steps):
        r = w.step(splits[k] if splits[k] is not None else w.default_split())
        out.append({f: np.asarray(getattr(r, f), dtype=float) for f in FIELDS})
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.integers(0, 3), st.integers(0, 2**31 - 1))
def test_incremental_equals_full_resolve_on_random_event_sequences(scenario, seed, split_seed):
    # every completion and every phase start is an event that changes the active flows; the incremental
    # fills (inc_min 0: from the first flow on) must give what a full parallel-rule re-solve per event gives
    probe = FabricWorld(load_scenario(scenario), 1)
    probe.reset(seeds=[seed])
    rng = np.random.default_rng(split_seed)
    splits = []
    for _ in range(4):
        s = probe.default_split()
        if rng.random() < 0.7:  # a random split over the live candidate paths
            x = rng.random(s.shape) * probe.live_paths()
            s = np.where(
                x.sum(axis=1, keepdims=True) > 0, x / np.maximum(x.sum(axis=1, keepdims=True), 1e-300), s
            )
        splits.append(s)
    inc = run(scenario, "numba", 0, seed, 4, splits)
    full = run(scenario, "numba", -1, seed, 4, splits)
    for a, b in zip(inc, full, strict=True):
        for f in FIELDS:
            assert rel_diff(a[f], b[f]) <= RTOL, f


@pytest.mark.parametrize("name", ["moe-alltoall-skewed", "multi-tenant-churn", "storage-checkpoint"])
def test_incremental_matches_the_numpy_reference(name):
    sc = load_scenario(name)
    worlds = []
    for backend, inc_min in (("numba", 0), ("numpy", -1)):
        w = FabricWorld(sc, 2, backend=backend)
        w.reset(seeds=[0, 1])
        w.sim.incremental_min_flows = inc_min
        worlds.append(w)
    for _ in range(6):
        a, b = (w.step(w.default_split()) for w in worlds)
        for f in FIELDS:
            assert rel_diff(getattr(a, f), getattr(b, f)) <= RTOL, f


def test_incremental_solves_refill_few_flows_on_an_alltoall():
    # 4 AllToAll jobs of 16 GPUs: most events are single completions, re-filling a part of the flows
    sc = {
        "name": "a2a",
        "fabric": {
            "topology": "spine_leaf",
            "leaves": 4,
            "spines": 2,
            "hosts_per_leaf": 2,
            "gpus_per_host": 8,
            "nic_gbps": 400,
            "uplink_gbps": 400,
        },
        "workload": {
            "jobs": [
                {
                    "name": f"j{j}",
                    "gpus": 16,
                    "placement": "spread",
                    "compute_ms": 5.0 + j,
                    "collectives": [{"op": "alltoall", "bytes": 1e8}],
                }
                for j in range(4)
            ]
        },
        "dynamics": {"decision_interval_ms": 20.0},
    }
    w = FabricWorld(load_scenario(sc), 1, backend="numba")
    w.reset(seeds=[0])
    w.sim.incremental_min_flows = 0
    solves = touched = active = 0
    for _ in range(3):
        w.sim.set_split(w.default_split())
        m = w.sim.run_interval(w.decision_interval_s)
        solves, touched, active = (
            solves + m.incremental_solves,
            touched + m.flows_refilled,
            active + m.flows_active,
        )
    assert solves > 100
    assert touched < active  # a restart never re-fills more than the active flows, and here far fewer
    assert m.full_fills >= 1


def test_restart_constants_are_documented_values():
    assert 0 < kernels.RESTART_MARGIN <= 1e-9
    assert kernels.FULL_FILL_EVERY >= 1


@pytest.mark.xfail(
    strict=True, reason="open defect: fills vs parallel rule under the greedy split (3% link bytes)"
)
def test_incremental_matches_full_resolve_under_the_greedy_split():
    from ainet_gym.routing.policies import get_policy

    sc = load_scenario("moe-alltoall-skewed")
    worlds = []
    for inc_min in (0, -1):
        w = FabricWorld(sc, 1, backend="numba")
        w.reset(seeds=[0])
        w.sim.incremental_min_flows = inc_min
        worlds.append(w)
    pol, last = get_policy("greedy"), [None, None]
    for _ in range(3):
        res = []
        for k, w in enumerate(worlds):
            last[k] = w.step(pol(w, last[k]))
            res.append(last[k])
        assert rel_diff(res[0].link_bytes, res[1].link_bytes) <= RTOL
