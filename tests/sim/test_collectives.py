"""Collective times through the whole engine (scenario -> fabric -> workload -> max-min -> fluid
simulation) against published closed forms.

References, all recomputed here from first principles (never from the engine's own numbers):

- ring AllReduce on links of bandwidth B: 2 (p-1)/p * S / B (Patarasuk & Yuan 2009; nccl-tests
  PERFORMANCE.md);
- nccl-tests bus bandwidth: busbw = algbw * factor with factor 2(p-1)/p (allreduce), (p-1)/p
  (reducescatter, allgather, alltoall), 1 (sendrecv), so busbw equals the link bandwidth of a
  non-blocking fabric for every op;
- alpha-beta costs of Thakur, Rabenseifner and Gropp (2005): ring 2(p-1) alpha + 2(p-1)/p n beta,
  recursive halving + doubling (Rabenseifner) 2 log2(p) alpha + 2(p-1)/p n beta, binomial-tree reduce
  + broadcast 2 ceil(log2 p) (alpha + n beta); alpha = hop_latency * 2 links on a single switch;
- hierarchical (NVLink reduce-scatter, per-rail inter-host ring, NVLink all-gather) on a
  rail-optimized fabric keeps rail-aligned traffic off the rail spines.

Times are read from the metrics of a FabricWorld interval: ``comm_time_s`` is the collective's time,
``step_time_s`` = compute + communication (overlap 0).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ainet_gym
from ainet_gym.fabric.topology import TIERS
from ainet_gym.scenario.collectives import bus_bandwidth_factor
from ainet_gym.sim.world import FabricWorld

RTOL = 1e-6
COMPUTE_MS = 1.0


def bps(gbps: float) -> float:
    """Gbit/s -> bytes/s."""
    return gbps * 1e9 / 8.0


def scenario(fabric: dict, jobs: list[dict], interval_ms: float, latency_us: float = 0.0) -> dict:
    return {
        "name": "validation",
        "fabric": {"hop_latency_us": latency_us, **fabric},
        "workload": {"jobs": jobs},
        "dynamics": {"decision_interval_ms": interval_ms},
    }


def job(p: int, coll: dict, compute_ms: float = COMPUTE_MS, **kw) -> dict:
    return {"name": "j", "gpus": p, "compute_ms": compute_ms, "overlap": 0.0, "collectives": [coll], **kw}


def run_one(d: dict, policy: str = "ecmp"):
    """One interval of a one-instance world; returns (world, StepResult)."""
    from ainet_gym.routing.policies import get_policy

    w = FabricWorld(ainet_gym.load_scenario(d), batch=1)
    w.reset(seeds=[0])
    res = w.step(get_policy(policy)(w, None))
    return w, res


def collective_time(fabric: dict, p: int, coll: dict, expected_s: float, latency_us: float = 0.0) -> tuple:
    """(comm time, step time, iterations) of job 0 over an interval that fits >= 3 iterations."""
    interval_ms = 3.5 * (COMPUTE_MS + expected_s * 1e3)
    _, res = run_one(scenario(fabric, [job(p, coll)], interval_ms, latency_us))
    return float(res.comm_time_s[0, 0]), float(res.step_time_s[0, 0]), int(res.iterations[0, 0])


def single_switch(p: int, gpus_per_host: int = 1, nic: float = 400.0, nvlink: float = 3600.0) -> dict:
    assert p % gpus_per_host == 0
    return {
        "topology": "single_switch",
        "hosts": p // gpus_per_host,
        "gpus_per_host": gpus_per_host,
        "nic_gbps": nic,
        "nvlink_gbps": nvlink,
    }


def assert_time(comm: float, step: float, iters: int, expected: float) -> None:
    assert iters >= 3, f"expected >= 3 completed iterations, got {iters}"
    assert comm == pytest.approx(expected, rel=RTOL)
    assert step == pytest.approx(COMPUTE_MS * 1e-3 + expected, rel=RTOL)


# --------------------------------------------------------------------------------------------------
# ring AllReduce: 2 (p-1)/p S / B
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_ring_allreduce_one_gpu_per_host_is_nic_bound(p):
    S, B = 1.0e9, 400.0
    expected = 2 * (p - 1) / p * S / bps(B)
    res = collective_time(single_switch(p), p, {"op": "allreduce", "algorithm": "ring", "bytes": S}, expected)
    assert_time(*res, expected)


@pytest.mark.parametrize("hosts", [2, 4])
def test_ring_allreduce_8_gpus_per_host_inter_host_hops_bound_the_ring(hosts):
    # NVLink hops (3600G) are 9x faster than the NIC; the ring is a pipeline that moves at the pace of its
    # slowest hop, the inter-host (NIC) hop: p = 8 * hosts ranks, time 2(p-1)/p S / B_nic.
    p, S, nic = 8 * hosts, 1.0e9, 400.0
    expected = 2 * (p - 1) / p * S / bps(nic)
    coll = {"op": "allreduce", "algorithm": "ring", "bytes": S}
    res = collective_time(single_switch(p, gpus_per_host=8, nic=nic), p, coll, expected)
    assert_time(*res, expected)


def test_ring_allreduce_bound_by_nvlink_when_nvlink_is_the_slow_hop():
    # the converse: make NVLink the slow hop (100G < 400G NIC): the ring runs at the NVLink rate
    p, S, nic, nvl = 16, 1.0e9, 400.0, 100.0
    expected = 2 * (p - 1) / p * S / bps(nvl)
    coll = {"op": "allreduce", "algorithm": "ring", "bytes": S}
    res = collective_time(single_switch(p, gpus_per_host=8, nic=nic, nvlink=nvl), p, coll, expected)
    assert_time(*res, expected)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    p=st.integers(2, 12),
    size=st.floats(1.0e6, 1.0e10),
    nic=st.sampled_from([100.0, 200.0, 400.0, 800.0]),
)
def test_ring_allreduce_formula_property(p, size, nic):
    expected = 2 * (p - 1) / p * size / bps(nic)
    coll = {"op": "allreduce", "algorithm": "ring", "bytes": size}
    res = collective_time(single_switch(p, nic=nic), p, coll, expected)
    assert_time(*res, expected)


# --------------------------------------------------------------------------------------------------
# nccl-tests busbw factors: busbw = algbw * factor == link bandwidth on a non-blocking fabric
# --------------------------------------------------------------------------------------------------

# PERFORMANCE.md of nccl-tests, written out here (not imported from the engine)
NCCL_FACTOR = {
    "allreduce": lambda p: 2 * (p - 1) / p,
    "reducescatter": lambda p: (p - 1) / p,
    "allgather": lambda p: (p - 1) / p,
    "alltoall": lambda p: (p - 1) / p,
    "sendrecv": lambda p: 1.0,
}
OP_SPEC = {
    "allreduce": {"op": "allreduce", "algorithm": "ring"},
    "reducescatter": {"op": "reducescatter"},
    "allgather": {"op": "allgather"},
    "alltoall": {"op": "alltoall"},
    "sendrecv": {"op": "sendrecv", "pattern": "shift:1"},
}


@pytest.mark.parametrize("op", list(NCCL_FACTOR))
@pytest.mark.parametrize("p", [4, 8])
def test_busbw_equals_link_bandwidth_on_nonblocking_fabric(op, p):
    S, B = 2.0e9, 400.0
    f = NCCL_FACTOR[op](p)
    expected = f * S / bps(B)  # the time at which busbw == B
    comm, step, iters = collective_time(single_switch(p), p, {**OP_SPEC[op], "bytes": S}, expected)
    assert iters >= 3
    algbw = S / comm
    busbw = algbw * f
    assert busbw == pytest.approx(bps(B), rel=RTOL)
    # the engine's own factor table agrees with nccl-tests
    assert bus_bandwidth_factor(op, p) == pytest.approx(f, rel=1e-15)


# --------------------------------------------------------------------------------------------------
# alpha-beta costs (Thakur, Rabenseifner, Gropp 2005)
# --------------------------------------------------------------------------------------------------

HOP_US = 1.5  # per link; a GPU -> switch -> GPU path is 2 links: alpha = 3 us


def alpha_beta(alg: str, p: int, n: float, alpha: float, beta: float) -> float:
    if alg == "ring":
        return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta
    if alg == "halving_doubling":
        return 2 * math.log2(p) * alpha + 2 * (p - 1) / p * n * beta
    if alg == "tree":
        return 2 * math.ceil(math.log2(p)) * (alpha + n * beta)
    raise AssertionError(alg)


CASES = (
    [("ring", p) for p in (2, 3, 4, 8)]
    + [("halving_doubling", p) for p in (2, 4, 8)]
    + [("tree", p) for p in (2, 3, 5, 8)]
)


@pytest.mark.parametrize(("alg", "p"), CASES)
@pytest.mark.parametrize("n", [4.0e6, 1.0e8])
def test_alpha_beta_cost_of_allreduce_algorithms(alg, p, n):
    # n = 4 MB: the alpha terms are ~5-25% of the time, so a wrong step count or hop count shows up
    B = 400.0
    alpha = 2 * HOP_US * 1e-6
    beta = 1.0 / bps(B)
    expected = alpha_beta(alg, p, n, alpha, beta)
    coll = {"op": "allreduce", "algorithm": alg, "bytes": n}
    res = collective_time(single_switch(p, nic=B), p, coll, expected, latency_us=HOP_US)
    assert_time(*res, expected)


def test_latency_only_cost_is_step_count_times_alpha():
    # a 1-byte buffer on a 1 Pb/s NIC: the beta term is ~1e-14 s, the cost is the number of algorithm
    # steps times alpha: ring 2(p-1), halving-doubling 2 log2 p, tree 2 ceil(log2 p)
    p, n = 8, 1.0
    alpha = 2 * HOP_US * 1e-6
    for alg, steps in (("ring", 2 * (p - 1)), ("halving_doubling", 2 * 3), ("tree", 2 * 3)):
        coll = {"op": "allreduce", "algorithm": alg, "bytes": n}
        comm, _, _ = collective_time(single_switch(p, nic=1.0e6), p, coll, steps * alpha, HOP_US)
        assert comm == pytest.approx(steps * alpha, rel=RTOL)


# --------------------------------------------------------------------------------------------------
# hierarchical AllReduce on a rail-optimized fabric
# --------------------------------------------------------------------------------------------------

RAIL = {
    "topology": "rail_optimized",
    "hosts": 4,
    "gpus_per_host": 4,
    "spines": 2,
    "links_per_spine": 1,
    "nic_gbps": 400.0,
    "uplink_gbps": 400.0,
    "nvlink_gbps": 3600.0,
}


def test_hierarchical_allreduce_rail_aligned_puts_no_bytes_on_rail_spines():
    h, g, S = RAIL["hosts"], RAIL["gpus_per_host"], 1.0e9
    # NVLink reduce-scatter + per-rail ring on S/g + NVLink all-gather
    expected = 2 * (g - 1) / g * S / bps(RAIL["nvlink_gbps"]) + 2 * (h - 1) / h * (S / g) / bps(
        RAIL["nic_gbps"]
    )
    coll = {"op": "allreduce", "algorithm": "hierarchical", "bytes": S}
    interval_ms = 3.5 * (COMPUTE_MS + expected * 1e3)
    _, res = run_one(scenario(RAIL, [job(h * g, coll)], interval_ms))
    assert res.iterations[0, 0] >= 3
    assert res.comm_time_s[0, 0] == pytest.approx(expected, rel=RTOL)
    tb = dict(zip(TIERS, res.tier_bytes[0]))
    assert tb["rail_spine"] == 0.0
    assert tb["nic"] > 0.0 and tb["nvlink"] > 0.0


def test_flat_ring_over_the_same_gpus_crosses_the_rail_spines():
    # ranks 0..15 host-major: the hop from local rank g-1 of host i to local rank 0 of host i+1 goes
    # rail leaf g-1 -> spine -> rail leaf 0. h such hops share the spines * uplink of one leaf; with spray
    # each runs at min(B_nic, spines * B_up / h), and the coupled ring moves at that rate.
    h, g, S = RAIL["hosts"], RAIL["gpus_per_host"], 1.0e9
    p = h * g
    rate = min(bps(RAIL["nic_gbps"]), RAIL["spines"] * bps(RAIL["uplink_gbps"]) / h)
    expected = 2 * (p - 1) / p * S / rate
    coll = {"op": "allreduce", "algorithm": "ring", "bytes": S}
    interval_ms = 3.5 * expected * 1e3
    w, res = run_one(scenario(RAIL, [job(p, coll, compute_ms=0.0)], interval_ms), policy="spray")
    assert res.iterations[0, 0] >= 3
    assert res.comm_time_s[0, 0] == pytest.approx(expected, rel=RTOL)
    tb = dict(zip(TIERS, res.tier_bytes[0]))
    # compute 0, latency 0: the ring streams the whole interval; each of the h cross-rail hops crosses
    # two rail_spine links (up and down)
    D = w.decision_interval_s
    assert tb["rail_spine"] == pytest.approx(h * 2 * rate * D, rel=RTOL)
    assert tb["rail_spine"] > 0.0
    # and the same GPUs under the hierarchical algorithm leave the spines idle (previous test)
    assert np.isfinite(res.link_utilization).all()
