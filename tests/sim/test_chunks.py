"""Pipelined collectives (issue 12, item 1): ``chunks: N`` on hierarchical and tree AllReduce.

Every expected number is recomputed here from a closed form, never taken from the engine. A pipeline of
stages with per-chunk durations d_i, where chunk c enters stage i once chunk c-1 has left it and chunk c
has left stage i-1, ends at ``sum_i d_i + (N - 1) max_i d_i`` (the longest path through the chunk x
stage grid). When the stages do not share links, chunk c of stage i moves t_i / N bytes-time at the
stage's full rate after paying the stage's alpha a_i, so d_i = a_i + t_i / N and the collective takes

    (sum_i t_i + (N - 1) max_i t_i) / N  +  sum_i a_i + (N - 1) max_i a_i   (when one stage is the max of both)

which tends to max_i t_i (plus the growing alpha term) as N grows.

The fabric where the stages share no link: a binomial-tree AllReduce on 4 ranks, two GPUs on each of two
hosts (ranks 0, 1 on host 0; 2, 3 on host 1). Its stages are: reduce 1->0 and 3->2 (NVLink, GPU-to-switch
links of ranks 1, 3 up and 0, 2 down), reduce 2->0 (NICs: 2 up, 0 down), broadcast 0->2 (NICs: 0 up,
2 down), broadcast 0->1 and 2->3 (NVLink: 0, 2 up and 1, 3 down). Links are directed, so the four link
sets are disjoint: t = (S/B_nvl, S/B_nic, S/B_nic, S/B_nvl), each with one step over two links.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest

from ainet_gym.checks.parity import PARITY_POLICIES, RTOL, compare_backends
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario.collectives import decompose, pipeline
from ainet_gym.scenario.loader import ScenarioError, load_scenario
from ainet_gym.scenario.spec import CollectiveSpec, JobSpec
from ainet_gym.sim.backends.numba import jit as _jit
from ainet_gym.sim.engine import compile_job
from ainet_gym.sim.world import FabricWorld

S = 1.0e9  # bytes
BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]


def bps(gbps: float) -> float:
    return gbps * 1e9 / 8.0


def pipeline_time(t: list[float], n: int) -> float:
    """Closed form of a pipeline of stage times ``t`` in ``n`` chunks, stages that do not interfere."""
    return (sum(t) + (n - 1) * max(t)) / n


def comm_time(
    fabric: dict, job: dict, interval_ms: float, backend: str = "numpy", lat_us: float = 0.0
) -> float:
    d = {
        "name": "chunks",
        "fabric": {"hop_latency_us": lat_us, **fabric},
        "workload": {"jobs": [{"name": "j", "compute_ms": 1.0, "overlap": 0.0, **job}]},
        "dynamics": {"decision_interval_ms": interval_ms},
    }
    w = FabricWorld(load_scenario(d), batch=1, backend=backend)
    w.reset(seeds=[0])
    res = w.step(get_policy("ecmp")(w, None))
    assert res.iterations[0, 0] >= 1
    return float(res.comm_time_s[0, 0])


# the tree of the module docstring: 2 hosts x 2 GPUs, NVLink 300 Gb/s, NIC 100 Gb/s
NVL, NIC = 300.0, 100.0
TREE_FABRIC = {
    "topology": "single_switch",
    "hosts": 2,
    "gpus_per_host": 2,
    "nic_gbps": NIC,
    "nvlink_gbps": NVL,
}
TREE_T = [S / bps(NVL), S / bps(NIC), S / bps(NIC), S / bps(NVL)]


def tree_job(n: int | None) -> dict:
    coll = {"op": "allreduce", "algorithm": "tree", "bytes": S}
    if n is not None:
        coll["chunks"] = n
    return {"gpus": 4, "collectives": [coll]}


def test_tree_stages_use_disjoint_links():
    """The premise of the closed form: no directed link is used by two stages of the 4-rank tree."""
    sc = load_scenario(
        {"name": "t", "fabric": TREE_FABRIC, "workload": {"jobs": [{"name": "j", **tree_job(1)}]}}
    )
    f = build_fabric(sc.fabric)
    phases = decompose(sc.jobs[0].collectives[0], 4, f.gpu_host[:4].tolist())
    assert [len(ph.flows) for ph in phases] == [2, 1, 1, 2]
    used = [{link for fl in ph.flows for s, d in fl.members for link in f.paths(s, d)[0]} for ph in phases]
    for i in range(4):
        for j in range(i + 1, 4):
            assert not used[i] & used[j], (i, j)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [1, 2, 3, 8, 64])
def test_pipeline_closed_form_with_disjoint_stages(n, backend):
    expected = pipeline_time(TREE_T, n)
    got = comm_time(TREE_FABRIC, tree_job(n), interval_ms=3 * (1 + sum(TREE_T) * 1e3), backend=backend)
    assert got == pytest.approx(expected, rel=1e-9)


def test_pipeline_tends_to_the_slowest_stage():
    """N -> large: the time falls monotonically towards max_i t_i, the gap being (sum - max) / N."""
    gaps = []
    for n in (1, 16, 256, 1024):
        got = comm_time(
            TREE_FABRIC, tree_job(n), interval_ms=3 * (1 + sum(TREE_T) * 1e3), backend=BACKENDS[-1]
        )
        gaps.append(got - max(TREE_T))
        assert gaps[-1] == pytest.approx((sum(TREE_T) - max(TREE_T)) / n, rel=1e-6)
    assert all(a > b > 0 for a, b in itertools.pairwise(gaps))
    assert gaps[-1] < 2e-3 * max(TREE_T)


def test_chunks_1_is_the_unchunked_collective():
    """chunks: 1 (explicit or default) is the sequential collective: same phases, sum of the stage times."""
    spec = CollectiveSpec("allreduce", S, "tree")
    assert decompose(CollectiveSpec("allreduce", S, "tree", chunks=1), 4, [0, 0, 1, 1]) == decompose(
        spec, 4, [0, 0, 1, 1]
    )
    assert all(ph.after is None for ph in decompose(spec, 4, [0, 0, 1, 1]))
    for n in (None, 1):
        got = comm_time(TREE_FABRIC, tree_job(n), interval_ms=3 * (1 + sum(TREE_T) * 1e3))
        assert got == pytest.approx(sum(TREE_T), rel=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [1, 4, 32])
def test_alpha_is_paid_by_every_chunk_of_every_stage(n, backend):
    """With latency: d_i = a_i + t_i / N (every stage here has one step over two links, a_i = 2 lat),
    so the alpha part of the time is sum_i a_i + (N - 1) max_i a_i = (N + 3) 2 lat."""
    lat_us = 5.0
    a = 2 * lat_us * 1e-6
    d = [a + t / n for t in TREE_T]
    expected = sum(d) + (n - 1) * max(d)
    got = comm_time(TREE_FABRIC, tree_job(n), 3 * (1 + sum(TREE_T) * 1e3), backend=backend, lat_us=lat_us)
    assert got == pytest.approx(expected, rel=1e-9)
    assert got - pipeline_time(TREE_T, n) == pytest.approx((n + 3) * a, rel=1e-6)


# 2 hosts x 8 GPUs, one 100 Gb/s NIC per host (the fabric of tests/fabric/test_shared_nics.py)
ONE_NIC = {
    "topology": "single_switch",
    "hosts": 2,
    "gpus_per_host": 8,
    "gpus_per_nic": 8,
    "nic_gbps": 100.0,
    "nvlink_gbps": 3600.0,
}


def hier_job(n: int, nbytes: float = S) -> dict:
    return {
        "gpus": 16,
        "collectives": [{"op": "allreduce", "algorithm": "hierarchical", "bytes": nbytes, "chunks": n}],
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [1, 4, 16, 64])
def test_hierarchical_on_one_nic_per_host_pipelines_to_the_nic_rate(n, backend):
    """Stages: NVLink reduce-scatter t1 = (g-1)/g S / B_nvl, the 8 rail rings sharing the NIC
    t2 = 2 (h-1)/h S / B_nic, NVLink all-gather t3 = t1. Reduce-scatter and all-gather share NVLink links,
    but the NIC stage is the bottleneck and runs back to back from t1 / N to t1 / N + t2, so the time is
    still t1 / N + t2 + t3 / N = the closed form; the flat ring takes 2 (p-1)/p S / B_nic = 150 ms."""
    g, h = 8, 2
    t1 = (g - 1) / g * S / bps(3600.0)
    t2 = 2 * (h - 1) / h * S / bps(100.0)
    expected = pipeline_time([t1, t2, t1], n)
    got = comm_time(ONE_NIC, hier_job(n), interval_ms=400.0, backend=backend)
    assert got == pytest.approx(expected, rel=1e-9)
    flat = 2 * 15 / 16 * S / bps(100.0)
    ratio = {1: 1.7881, 4: 1.8525, 16: 1.8693, 64: 1.8736}[n]  # 150 ms / the closed form, as in docs/model.md
    assert flat / got == pytest.approx(ratio, abs=5e-5)


@pytest.mark.parametrize("n", [1, 4, 16])
def test_hierarchical_alpha_grows_with_chunks(n):
    """A 1-byte buffer on 1 Pb/s links: only alpha is left. Steps x links x lat: reduce-scatter and
    all-gather (g-1) = 7 steps over 2 NVLink links, the rail ring 2 (h-1) = 2 steps over pcie, nic, nic,
    pcie = 4 links; the time is sum_i a_i + (N - 1) max_i a_i = (14 + 8 + 14 + 14 (N - 1)) lat."""
    lat_us = 1.0
    fast = {**ONE_NIC, "nic_gbps": 1e6, "nvlink_gbps": 1e6, "pcie_gbps": 1e6}
    a = [14 * lat_us * 1e-6, 8 * lat_us * 1e-6, 14 * lat_us * 1e-6]
    expected = sum(a) + (n - 1) * max(a)
    got = comm_time(fast, hier_job(n, nbytes=1.0), interval_ms=5.0, lat_us=lat_us)
    assert got == pytest.approx(expected, rel=1e-6)


def test_pipeline_grid_dependencies():
    stages = decompose(CollectiveSpec("allreduce", S, "hierarchical"), 4, [0, 0, 1, 1])
    assert len(stages) == 3
    grid = pipeline(stages, 3)
    assert [ph.after for ph in grid] == [(), (0,), (1,), (0,), (1, 3), (2, 4), (3,), (4, 6), (5, 7)]
    assert [ph.steps for ph in grid] == [st.steps for st in stages] * 3
    for c in range(3):
        for s, st in enumerate(stages):
            for f, f0 in zip(grid[3 * c + s].flows, st.flows):
                assert f.members == f0.members and f.bytes == f0.bytes / 3


def test_chunked_phase_graph_of_a_compiled_job_chains_collectives():
    """Two collectives: the second starts when the first's last chunk leaves its last stage."""
    sc = load_scenario(
        {"name": "t", "fabric": TREE_FABRIC, "workload": {"jobs": [{"name": "j", **tree_job(2)}]}}
    )
    f = build_fabric(sc.fabric)
    job = JobSpec(
        "j", 4, collectives=(CollectiveSpec("allreduce", S, "tree", chunks=2), CollectiveSpec("allreduce", S))
    )
    u = compile_job(f, job, np.arange(4))
    assert u.n_phases == 9
    assert u.phase_npred.tolist() == [0, 1, 1, 1, 1, 2, 2, 2, 1]
    succ = [sorted(u.phase_succ[u.phase_succ_off[k] : u.phase_succ_off[k + 1]].tolist()) for k in range(9)]
    assert succ == [[1, 4], [2, 5], [3, 6], [7], [5], [6], [7], [8], []]


def test_chunks_errors_name_field_value_and_allowed():
    def load(coll: dict, gpus: int = 16):
        return load_scenario(
            {
                "name": "t",
                "fabric": ONE_NIC,
                "workload": {"jobs": [{"name": "j", "gpus": gpus, "collectives": [coll]}]},
            }
        )

    with pytest.raises(
        ScenarioError,
        match=r"collectives\[0\]\.chunks: chunks = 4: chunks pipeline the stages of allreduce hierarchical or "
        r"tree, not allreduce with algorithm ring \(a ring is pipelined already\); allowed: omit 'chunks'",
    ):
        load({"op": "allreduce", "bytes": S, "chunks": 4})
    with pytest.raises(ScenarioError, match=r"chunks = 2: .*not alltoall; allowed"):
        load({"op": "alltoall", "bytes": S, "chunks": 2})
    with pytest.raises(ScenarioError, match=r"chunks = 2: .*not allreduce with algorithm halving_doubling"):
        load({"op": "allreduce", "algorithm": "halving_doubling", "bytes": S, "chunks": 2})
    with pytest.raises(ScenarioError, match=r"chunks = 1: .*not reducescatter with algorithm ring"):
        load({"op": "reducescatter", "bytes": S, "chunks": 1})
    for bad, msg in ((0, "0 is out of range"), (2.5, "non-integral 2.5"), ("4", "got string"), (True, "got")):
        with pytest.raises(
            ScenarioError, match=rf"collectives\[0\]\.chunks: .*{msg}.*allowed: an integer in \[1, 1024\]"
        ):
            load({"op": "allreduce", "algorithm": "tree", "bytes": S, "chunks": bad})
    with pytest.raises(
        ScenarioError, match=r"chunks: 1024 chunks on job 'j' of 1000 GPUs make about 2,048,000 flows"
    ):
        load_scenario(
            {
                "name": "t",
                "fabric": {"topology": "single_switch", "hosts": 125, "gpus_per_host": 8},
                "workload": {"jobs": [{"name": "j", "gpus": 1000, "collectives": [
                    {"op": "allreduce", "algorithm": "tree", "bytes": S, "chunks": 1024}]}]},
            }
        )  # fmt: skip
    assert (
        load({"op": "allreduce", "algorithm": "tree", "bytes": S, "chunks": 8}).jobs[0].collectives[0].chunks
        == 8
    )


def test_python_api_refuses_chunks_where_they_do_not_apply():
    with pytest.raises(ValueError, match=r"chunks = 4 on allreduce ring: chunks > 1 applies only to"):
        decompose(CollectiveSpec("allreduce", S, "ring", chunks=4), 4)
    with pytest.raises(ValueError, match=r"chunks = 0: allowed: an integer >= 1"):
        decompose(CollectiveSpec("allreduce", S, "tree", chunks=0), 4)


CHUNKED_SCENARIO = {
    "name": "chunked-parity",
    "fabric": {"topology": "spine_leaf", "leaves": 4, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 4,
               "nic_gbps": 200.0, "uplink_gbps": 200.0, "gpus_per_nic": 2, "storage": {"hosts": 1}},
    "workload": {
        "jobs": [
            {"name": "hier", "gpus": 16, "placement": "spread", "compute_ms": 8.0, "overlap": 0.5, "collectives": [
                {"op": "allreduce", "algorithm": "hierarchical", "bytes": 2.0e8, "chunks": 8},
                {"op": "allreduce", "algorithm": "tree", "bytes": 5.0e7, "chunks": 3}]},
            {"name": "ring", "gpus": 8, "compute_ms": 5.0, "collectives": [
                {"op": "allreduce", "algorithm": "ring", "bytes": 1.0e8}]},
        ],
        "background": [{"kind": "storage", "gbps": 100, "pattern": "periodic", "period_steps": 3}],
    },
    "dynamics": {"episode_steps": 50, "decision_interval_ms": 20.0,
                 "job_churn": {"arrival_rate": 0.5, "mean_steps": 2, "max_jobs": 4, "templates": [
                     {"name": "t", "gpus": 8, "compute_ms": 4.0, "collectives": [
                         {"op": "allreduce", "algorithm": "tree", "bytes": 3.0e7, "chunks": 5}]}]}},
}  # fmt: skip


@pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("mode", ["event", "phase"])
def test_backends_agree_on_chunked_collectives(mode):
    """Both backends, chunked hierarchical and tree AllReduce next to a ring, background bursts and job
    churn (units carried across restacks with their phase graphs' state), every output to 1e-9."""
    for policy in PARITY_POLICIES:
        worst = compare_backends(copy.deepcopy(CHUNKED_SCENARIO), policy, seed=1, intervals=8, batch=2,
                                 rate_updates=mode)  # fmt: skip
        bad = {k: v for k, v in worst.items() if v > RTOL}
        assert not bad, f"{policy} / {mode}: {bad}"
        assert any(k.startswith("step7.obs") for k in worst)
