"""The MoE scenario family (ainet_gym.scenario.moe) and grouped collectives: AllToAll closed forms on a
non-blocking fabric, groups that tile a job, the shipped members loading, and per-seed variation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ainet_gym import ScenarioError, load_scenario
from ainet_gym.scenario.collectives import _alltoall_weights
from ainet_gym.scenario.moe import MOE_FAMILY, moe_scenario
from ainet_gym.sim.engine import collective_groups
from ainet_gym.sim.world import FabricWorld
from ainet_gym.units import GBPS_TO_BYTES_PER_S


def alltoall_comm_s(p: int, skew: float, groups: int = 1, backend: str = "numba") -> float:
    """Communication time of one AllToAll of 1e9 bytes per rank on a non-blocking switch (no latency)."""
    coll = {"op": "alltoall", "bytes": 1.0e9, "skew": skew}
    if groups > 1:
        coll.update(group_size=p, group_stride=1)
    sc = {
        "name": "a2a-closed-form",
        "fabric": {"topology": "single_switch", "hosts": p * groups, "gpus_per_host": 1, "nic_gbps": 400,
                   "hop_latency_us": 0.0},
        "workload": {"jobs": [{"name": "a", "gpus": p * groups, "compute_ms": 1.0, "collectives": [coll]}]},
        "dynamics": {"decision_interval_ms": 200.0},
    }  # fmt: skip
    w = FabricWorld(load_scenario(sc), 1, backend=backend)
    w.reset(seeds=[0])
    r = w.step(w.default_split())
    assert r.iterations[0, 0] >= 1
    return float(r.comm_time_s[0, 0])


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("p", [2, 5, 8, 16])
def test_alltoall_on_a_non_blocking_fabric_takes_the_bus_bandwidth_time(p: int, backend: str) -> None:
    # each NIC sends and receives (p - 1)/p S at B_nic: (p - 1)/p * S / B_nic
    b_nic = 400 * GBPS_TO_BYTES_PER_S
    np.testing.assert_allclose(alltoall_comm_s(p, 0.0, backend=backend), (p - 1) / p * 1e9 / b_nic, rtol=1e-9)


@pytest.mark.parametrize("skew", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("p", [4, 8, 16])
def test_skewed_alltoall_takes_its_hottest_receivers_bytes(p: int, skew: float) -> None:
    # every other rank sends S/p * w_hot to the hottest expert's rank: (p - 1) S w_hot / p through its NIC
    w = _alltoall_weights(p, skew, 0)
    hot_bytes = (p - 1) * 1e9 / p * w.max()
    np.testing.assert_allclose(alltoall_comm_s(p, skew), hot_bytes / (400 * GBPS_TO_BYTES_PER_S), rtol=1e-9)


def test_groups_run_at_once_and_each_as_alone() -> None:
    # four groups of 8 on a non-blocking switch: the same time as one group alone
    np.testing.assert_allclose(alltoall_comm_s(8, 1.0, groups=4), alltoall_comm_s(8, 1.0), rtol=1e-9)


def test_collective_groups_tile_the_ranks() -> None:
    spec = load_scenario(moe_scenario(256, "spine_leaf", 8)).jobs[0].collectives
    for c in spec:
        groups = collective_groups(c, 256)
        flat = sorted(r for g in groups for r in g)
        assert flat == list(range(256)) and all(len(g) == c.group_size for g in groups)
    ep = collective_groups(spec[0], 256)  # expert parallel: one local rank of 8 consecutive hosts
    assert ep[0] == [0, 8, 16, 24, 32, 40, 48, 56] and ep[1] == [1, 9, 17, 25, 33, 41, 49, 57]
    tp = collective_groups(spec[2], 256)  # tensor parallel: the 8 GPUs of a host
    assert tp[3] == list(range(24, 32))


def test_group_size_must_tile_the_job() -> None:
    sc = moe_scenario(256, "spine_leaf", 8)
    sc["workload"]["jobs"][0]["collectives"][0]["group_size"] = 7
    with pytest.raises(ScenarioError, match=r"collectives\[0\]\.group_size.*must tile job 'moe' of 256 GPUs"):
        load_scenario(sc)
    with pytest.raises(ValueError, match=r"ep = 65: allowed: 2\.\.64"):
        moe_scenario(1024, "spine_leaf", 65)


@pytest.mark.parametrize("name", list(MOE_FAMILY))
def test_shipped_members_load_as_generated(name: str) -> None:
    n, topo, ep = MOE_FAMILY[name]
    assert ep <= 64
    sc = load_scenario(name)
    fresh = load_scenario(moe_scenario(n, topo, ep, name=name))
    assert dataclasses.replace(sc, source=fresh.source) == fresh  # the file is the generator's output
    assert sc.jobs[0].gpus == n


def test_seeds_vary_the_episode() -> None:
    w = FabricWorld(load_scenario("moe-3d-256-spine-leaf"), 2)
    w.reset(seeds=[0, 1])
    out = [w.step(w.default_split()).link_bytes for _ in range(2)]
    assert not np.allclose(out[-1][0], out[-1][1])
