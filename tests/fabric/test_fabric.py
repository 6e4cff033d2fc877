"""Fabric structure and fabric-level throughput against published counts and closed forms.

- k-ary fat-tree (Al-Fares, Loukissas, Vahdat 2008): k^3/4 hosts (here: GPU NICs, one per edge port),
  5k^2/4 switches (k^2/2 edge, k^2/2 aggregation, k^2/4 core); (k/2)^2 equal-cost paths between hosts
  in different pods (one per core switch), k/2 between edge switches of one pod (one per aggregation
  switch), 1 under one edge switch.
- Oversubscription r:1: a cross-leaf permutation whose paths are balanced (spray) runs at 1/r of line
  rate; a ring with ranks contiguous by leaf crosses each leaf's uplinks once and is not slowed.
- Hedera stride(i) traffic on a fat-tree (Al-Fares et al., NSDI 2010): every host sends to the host i
  positions away (i = hosts per pod: every flow leaves its pod). Balanced over all core paths it
  achieves full bisection bandwidth; static ECMP hashing collides and falls short of it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ainet_gym
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.routing.policies import get_policy
from ainet_gym.routing.split import ecmp_split, spray_split
from ainet_gym.sim.engine import BatchSim, compile_job
from ainet_gym.sim.world import FabricWorld

RTOL = 1e-6


def bps(gbps: float) -> float:
    return gbps * 1e9 / 8.0


def fat_tree_spec(k: int, gpus_per_host: int = 1):
    d = {
        "name": "ft",
        "fabric": {"topology": "fat_tree", "k": k, "gpus_per_host": gpus_per_host, "link_gbps": 400.0},
        "workload": {"jobs": [{"name": "j", "gpus": 2}]},
    }
    return ainet_gym.load_scenario(d).fabric


# --------------------------------------------------------------------------------------------------
# fat-tree counts
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "gph"), [(4, 1), (4, 2), (6, 1), (8, 1), (8, 8)])
def test_fat_tree_node_and_nic_counts(k, gph):
    f = build_fabric(fat_tree_spec(k, gph), max_paths=(k // 2) ** 2)
    assert f.n_gpus // gph == len(set(f.gpu_host.tolist()))
    kinds = np.asarray(f.node_kind)
    assert f.n_gpus == k**3 // 4
    assert (kinds == "edge").sum() == k * k // 2
    assert (kinds == "agg").sum() == k * k // 2
    assert (kinds == "core").sum() == k * k // 4
    assert np.isin(kinds, ["edge", "agg", "core"]).sum() == 5 * k * k // 4
    # one NIC link per GPU in each direction, each on an edge switch; k/2 GPUs per edge switch
    gpu_to_edge = (kinds[f.link_src] == "gpu") & (kinds[f.link_dst] == "edge")
    assert gpu_to_edge.sum() == k**3 // 4
    assert np.all(np.bincount(f.link_dst[gpu_to_edge])[f.leaf_node] == k // 2)
    # every switch has k ports (edge: k/2 down to GPUs, k/2 up; agg: k/2 + k/2; core: k, one per pod)
    for node in np.flatnonzero(np.isin(kinds, ["edge", "agg", "core"])):
        assert (f.link_src == node).sum() == k


def _check_path(f, path: list[int], src: int, dst: int, kinds: list[str]) -> None:
    assert f.link_src[path[0]] == f.gpu_node[src]
    assert f.link_dst[path[-1]] == f.gpu_node[dst]
    for a, b in itertools.pairwise(path):
        assert f.link_dst[a] == f.link_src[b], "path is not a chain of links"
    nodes = [int(f.link_src[path[0]])] + [int(f.link_dst[x]) for x in path]
    assert [f.node_kind[n] for n in nodes] == kinds


@pytest.mark.parametrize("k", [4, 6, 8])
def test_fat_tree_equal_cost_path_counts(k):
    half = k // 2
    f = build_fabric(fat_tree_spec(k), max_paths=half * half)
    per_edge, per_pod = half, half * half  # GPUs (one per edge port) per edge switch and per pod
    # different pods: (k/2)^2 paths, one through each core switch
    src, dst = 0, per_pod + per_edge + 1
    ps = f.paths(src, dst)
    assert len(ps) == half * half
    for p in ps:
        _check_path(f, p, src, dst, ["gpu", "edge", "agg", "core", "agg", "edge", "gpu"])
    cores = {int(f.link_dst[p[2]]) for p in ps}
    assert len(cores) == half * half
    assert len({tuple(p) for p in ps}) == len(ps)
    # same pod, different edge switch: k/2 paths, one through each aggregation switch of the pod
    dst = per_edge
    ps = f.paths(src, dst)
    assert len(ps) == half
    for p in ps:
        _check_path(f, p, src, dst, ["gpu", "edge", "agg", "edge", "gpu"])
    assert len({int(f.link_dst[p[1]]) for p in ps}) == half
    # same edge switch: one path
    ps = f.paths(0, 1)
    assert len(ps) == 1
    _check_path(f, ps[0], 0, 1, ["gpu", "edge", "gpu"])


@pytest.mark.parametrize(("spines", "links_per_spine"), [(4, 1), (4, 2), (3, 2)])
def test_spine_leaf_ecmp_set_is_every_spine_and_parallel_link(spines, links_per_spine):
    d = {
        "name": "sl",
        "fabric": {
            "topology": "spine_leaf",
            "leaves": 3,
            "spines": spines,
            "links_per_spine": links_per_spine,
        },
        "workload": {"jobs": [{"name": "j", "gpus": 2}]},
    }
    n = spines * links_per_spine
    f = build_fabric(ainet_gym.load_scenario(d).fabric, max_paths=n)
    per_leaf = 2 * 8  # default hosts_per_leaf x gpus_per_host
    ps = f.paths(0, per_leaf)
    assert len(ps) == n
    for p in ps:
        _check_path(f, p, 0, per_leaf, ["gpu", "leaf", "spine", "leaf", "gpu"])
    assert len({p[1] for p in ps}) == n  # distinct uplinks (parallel links count separately)
    assert f.oversubscription() == pytest.approx(per_leaf * 400.0 / (n * 400.0))


def test_fat_tree_path_cap_keeps_max_paths_distinct_paths():
    # with max_paths below (k/2)^2 the ECMP set is capped, never padded with duplicates
    f = build_fabric(fat_tree_spec(8), max_paths=8)
    ps = f.paths(0, 40)
    assert len(ps) == 8
    assert len({tuple(p) for p in ps}) == 8


# --------------------------------------------------------------------------------------------------
# oversubscription
# --------------------------------------------------------------------------------------------------

LEAF = {"leaves": 2, "spines": 2, "hosts_per_leaf": 8, "gpus_per_host": 1, "nic_gbps": 400.0}


def spine_leaf(ratio: float) -> dict:
    # leaf down = 8 x 400G; up = 2 spines x uplink: r = 3200 / (2 * uplink)
    return {"topology": "spine_leaf", **LEAF, "uplink_gbps": 3200.0 / (2 * ratio), "hop_latency_us": 0.0}


def run_world(fabric: dict, jobs: list[dict], interval_ms: float, policy: str):
    d = {
        "name": "os",
        "fabric": fabric,
        "workload": {"jobs": jobs},
        "dynamics": {"decision_interval_ms": interval_ms},
    }
    w = FabricWorld(ainet_gym.load_scenario(d), batch=1)
    w.reset(seeds=[0])
    return w, w.step(get_policy(policy)(w, None))


@pytest.mark.parametrize("ratio", [1.0, 2.0, 4.0])
def test_cross_leaf_permutation_runs_at_one_over_r_of_line_rate(ratio):
    S = 1.0e9
    p = 16  # shift:8: every rank on leaf 0 sends to leaf 1 and back: 8 flows each way over 2 uplinks
    expected = S / (bps(LEAF["nic_gbps"]) / ratio)
    jobs = [
        {
            "name": "perm",
            "gpus": p,
            "compute_ms": 0.0,
            "collectives": [{"op": "sendrecv", "pattern": "shift:8", "bytes": S}],
        }
    ]
    w, res = run_world(spine_leaf(ratio), jobs, 3.5 * expected * 1e3, "spray")
    assert w.fabric.oversubscription() == pytest.approx(ratio)
    assert res.iterations[0, 0] >= 3
    assert res.step_time_s[0, 0] == pytest.approx(expected, rel=RTOL)
    # the uplinks are saturated, the NICs run at 1/r
    assert res.max_link_utilization[0] == pytest.approx(1.0, rel=RTOL)


@pytest.mark.parametrize("policy", ["ecmp", "spray"])
def test_ring_contiguous_by_leaf_is_not_slowed_by_oversubscription(policy):
    S, p = 1.0e9, 16
    expected = 2 * (p - 1) / p * S / bps(LEAF["nic_gbps"])
    jobs = [
        {
            "name": "ring",
            "gpus": p,
            "compute_ms": 0.0,
            "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": S}],
        }
    ]
    times = []
    for ratio in (1.0, 4.0):
        _, res = run_world(spine_leaf(ratio), jobs, 3.5 * expected * 1e3, policy)
        assert res.iterations[0, 0] >= 3
        times.append(res.step_time_s[0, 0])
    assert times[0] == pytest.approx(expected, rel=RTOL)
    assert times[1] == pytest.approx(times[0], rel=RTOL)


# --------------------------------------------------------------------------------------------------
# Hedera stride traffic on a fat-tree
# --------------------------------------------------------------------------------------------------

K = 4
N_GPUS = K**3 // 4
PER_POD = (K // 2) ** 2
C = bps(400.0)
S_STRIDE = 1.0e9


def stride_unit():
    d = {
        "name": "stride",
        "fabric": {
            "topology": "fat_tree",
            "k": K,
            "gpus_per_host": 1,
            "link_gbps": 400.0,
            "hop_latency_us": 0,
        },
        "workload": {
            "jobs": [
                {
                    "name": "stride",
                    "gpus": N_GPUS,
                    "compute_ms": 0.0,
                    "collectives": [{"op": "sendrecv", "pattern": f"shift:{PER_POD}", "bytes": S_STRIDE}],
                }
            ]
        },
    }
    sc = ainet_gym.load_scenario(d)
    f = build_fabric(sc.fabric, max_paths=PER_POD)
    return f, compile_job(f, sc.jobs[0], np.arange(N_GPUS))


def stride_throughput(split_of_seed, seeds) -> np.ndarray:
    """Aggregate sending rate / (flows * line rate) of every instance, measured over 1 ms (no flow
    finishes before S / C = 20 ms, so this is the initial max-min allocation)."""
    f, u = stride_unit()
    sim = BatchSim(f, [[u] for _ in seeds])
    sim.set_split(np.vstack([split_of_seed(u, s) for s in seeds]))
    dt = 1.0e-3
    m = sim.run_interval(dt)
    assert (m.stalled_flows == 0).all()
    return m.link_bytes[:, f.endpoint_up[:N_GPUS]].sum(axis=1) / dt / (N_GPUS * C)


def test_stride_every_flow_leaves_its_pod_with_k2_over_4_paths():
    _, u = stride_unit()
    assert u.conn_src.shape[0] == N_GPUS
    assert np.all(u.conn_dst // PER_POD == (u.conn_src // PER_POD + 1) % K)
    assert np.all(u.conn_npaths == PER_POD)


def test_stride_under_spray_reaches_full_bisection():
    thr = stride_throughput(lambda u, s: spray_split(u.conn_npaths, PER_POD), [0])
    assert thr[0] == pytest.approx(1.0, rel=RTOL)
    # and through the world: the stride completes in S / C, every flow at line rate
    f, u = stride_unit()
    sim = BatchSim(f, [[u]])
    sim.set_split(spray_split(u.conn_npaths, PER_POD))
    m = sim.run_interval(3.5 * S_STRIDE / C)
    assert m.iterations[0] == 3
    assert m.step_time_sum_s[0] / 3 == pytest.approx(S_STRIDE / C, rel=RTOL)


def test_stride_under_static_ecmp_falls_short_of_line_rate():
    # Balls into bins at the edge layer alone: the 2 flows leaving an edge switch each hash onto one of
    # its k/2 = 2 uplinks; they collide with probability 1/2 and then share one link. The expected
    # number of busy uplinks is 2 (1 - 1/4) = 1.5 of 2, so E[aggregate] <= 0.75 of line rate, before
    # counting core and downlink collisions (which only lower it). Every flow gets at least C/4 (at most
    # 4 flows share a link), so the per-seed throughput lies in [1/4, 1], its std is <= 3/8 and the
    # mean of 400 seeds has std <= 0.019: the sample mean stays below 0.75 unless the hash is biased
    # towards collision-free assignments.
    seeds = range(400)
    thr = stride_throughput(lambda u, s: ecmp_split(u.conn_npaths, u.conn_key, PER_POD, 1, s), seeds)
    assert (thr <= 1.0 + 1e-12).all()
    assert thr.mean() < 0.75
    assert thr.mean() < 1.0 - 0.2
    # and collisions are the rule: almost no seed gets full bisection
    assert (thr >= 1.0 - 1e-9).mean() < 0.05


@pytest.mark.parametrize(("spines", "links_per_spine"), [(8, 1), (4, 2), (2, 4)])
def test_capped_ecmp_set_covers_every_parallel_link(spines, links_per_spine):
    """8 uplinks per leaf as 8 spines x 1 link, 4 x 2 or 2 x 4, with 8 candidate paths of 64 / 16 / 8 x 4
    (up x down link choices): the capped set crosses all 8 uplinks of the source leaf and all 8 downlinks
    of the destination leaf, so a sprayed cross-leaf permutation runs at the same rate on all three, the
    uplinks' total (8 x 100G for 8 flows: 100 Gbit/s each), whatever the spines are made of."""
    S = 1.0e9
    fabric = {"topology": "spine_leaf", "leaves": 2, "spines": spines, "links_per_spine": links_per_spine,
              "hosts_per_leaf": 1, "gpus_per_host": 8, "nic_gbps": 400.0, "uplink_gbps": 100.0,
              "hop_latency_us": 0.0}  # fmt: skip
    jobs = [{"name": "perm", "gpus": 16, "compute_ms": 0.0,
             "collectives": [{"op": "sendrecv", "pattern": "shift:8", "bytes": S}]}]  # fmt: skip
    expected = S / bps(100.0)
    d = {"name": "cap", "fabric": fabric, "workload": {"jobs": jobs}, "routing": {"max_paths": 8},
         "dynamics": {"decision_interval_ms": 3.5 * expected * 1e3}}  # fmt: skip
    w = FabricWorld(ainet_gym.load_scenario(d), batch=1)
    ps = w.fabric.paths(0, 8)
    assert len(ps) == 8
    assert len({p[1] for p in ps}) == 8  # every uplink of leaf 0
    assert len({p[-2] for p in ps}) == 8  # every downlink into leaf 1
    w.reset(seeds=[0])
    res = w.step(get_policy("spray")(w, None))
    assert res.iterations[0, 0] >= 3
    assert res.step_time_s[0, 0] == pytest.approx(expected, rel=RTOL)
