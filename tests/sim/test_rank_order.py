"""Rank order (``rank_order`` of a job): the ranks each order gives an explicit placement, sorted ranks by
default, and the slowdown of a shuffled ring, recomputed here from a closed form: under packet spraying on a
2-tier Clos the ring runs at min(B_nic, U / c_max), where c_max is the largest number of ring hops leaving one
leaf and U the leaf's uplink capacity, so its slowdown over the non-blocking ring is max(1, c_max B_nic / U),
counted from the rank order.
"""

from __future__ import annotations

import numpy as np
import pytest
from _scenarios import S, bps, one_job, one_job_on_a_switch, step_world

from ainet_gym.scenario.loader import ScenarioError, load_scenario
from ainet_gym.sim.world import FabricWorld


def test_rank_orders_of_an_explicit_placement():
    fabric = {"topology": "single_switch", "hosts": 4, "gpus_per_host": 4}
    placement = [9, 1, 8, 0, 13]

    def ranks(order: str, seed: int = 0) -> list[int]:
        d = one_job(fabric, {"gpus": 5, "placement": placement, "rank_order": order}, 10.0)
        w = FabricWorld(load_scenario(d))
        w.reset(seeds=[seed])
        return w.state.gpus[0][0].tolist()

    assert ranks("placement") == placement
    assert ranks("sorted") == [0, 1, 8, 9, 13]
    assert ranks("by_host") == [8, 9, 0, 1, 13]  # host 2 first (GPU 9), then host 0, then host 3
    shuffled = [ranks("shuffled", s) for s in range(6)]
    assert all(sorted(r) == sorted(placement) for r in shuffled)
    assert len({tuple(r) for r in shuffled}) > 1  # seeded: different seeds, different permutations
    assert ranks("shuffled", 3) == ranks("shuffled", 3)


def test_random_placement_keeps_sorted_ranks_by_default():
    d = one_job(
        {"topology": "single_switch", "hosts": 8, "gpus_per_host": 2},
        {"gpus": 6, "placement": "random"},
        10.0,
    )
    w = FabricWorld(load_scenario(d))
    w.reset(seeds=[5])
    g = w.state.gpus[0][0]
    assert np.array_equal(g, np.sort(g))


LEAVES, HOSTS_PER_LEAF, SPINES, NIC = 4, 4, 2, 400.0


@pytest.mark.parametrize("seed", range(6))
def test_shuffled_ring_slowdown_is_its_maximum_uplink_load_under_spray(seed):
    """16 GPUs (1 per host) on 4 leaves of 4 hosts, 2 spines of 400G: 2:1. The ring runs at
    min(B, U / c_max) with c_max the most ring hops leaving one leaf; sorted ranks leave each leaf once."""
    p = LEAVES * HOSTS_PER_LEAF
    fabric = {
        "topology": "spine_leaf",
        "leaves": LEAVES,
        "hosts_per_leaf": HOSTS_PER_LEAF,
        "spines": SPINES,
        "gpus_per_host": 1,
        "nic_gbps": NIC,
        "uplink_gbps": NIC,
    }
    ideal = 2 * (p - 1) / p * S / bps(NIC)
    job = {"gpus": p, "rank_order": "shuffled", "collectives": [{"op": "allreduce", "bytes": S}]}
    w, res = step_world(one_job(fabric, job, 4.0 * (1.0 + 4 * ideal * 1e3)), policy="spray", seed=seed)
    ranks = w.state.gpus[0][0]
    leaf = ranks // HOSTS_PER_LEAF
    out_hops = np.bincount(leaf[leaf != np.roll(leaf, -1)], minlength=LEAVES)  # hops leaving each leaf
    in_hops = np.bincount(np.roll(leaf, -1)[leaf != np.roll(leaf, -1)], minlength=LEAVES)
    load = max(out_hops.max(), in_hops.max()) * NIC / (SPINES * NIC)
    assert res.iterations[0, 0] >= 2
    assert res.comm_time_s[0, 0] / ideal == pytest.approx(max(1.0, load), rel=1e-9)
    if seed == 0:
        assert load > 1.0  # the shuffle does slow this one down


def test_rank_order_is_validated():
    d = one_job_on_a_switch()
    d["workload"]["jobs"][0]["rank_order"] = "shufled"
    with pytest.raises(
        ScenarioError,
        match=r"workload\.jobs\[0\]\.rank_order: 'shufled' is not a known rank order; "
        r"allowed: placement, sorted, shuffled, by_host \(did you mean 'shuffled'\?\)",
    ):
        load_scenario(d)
