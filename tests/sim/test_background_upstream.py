"""``workload.background[].upstream``: ``share`` (the default, today's max-min) or ``demand`` (a background flow
held below its demand is charged its demand on the links before its bottleneck; numpy backend; no ns-3).

References: a hand-computed ring hop that shares its uplink with a checkpoint flow squeezed at a half-rate storage
port (hop time and the uplink's bytes under both settings); the two-stage rule on a hand-built instance (a path
through the bottleneck and one that misses it); the field omitted equal to ``share`` bit for bit on both backends
and on a shipped scenario; ``demand`` refused on the numba backend and bad values refused by the loader, with the
field named."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

import ainet_gym
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.backends.numba import jit as _jit
from ainet_gym.sim.upstream import UpstreamPlan, upstream_rates

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
S = 6e6  # bytes of the ring's AllReduce buffer: each of its 2 hops moves 2 (p - 1) / p S = S bytes
GB = 1e9 / 8  # bytes/s of 1 Gb/s (link_efficiency 1)


def _scenario(upstream: str | None) -> dict:
    """Two leaves joined by one spine (10 Gb/s uplinks and NICs), no latency, one storage host on leaf 1 behind a
    5 Gb/s port. A 2-GPU ring (GPU 0 on leaf 0, GPU 2 on leaf 1) AllReduces S bytes after 1 ms of compute, so its
    hop 0 -> 2 crosses gpu0 -> leaf0 -> spine0 -> leaf1 -> gpu2 and its hop 2 -> 0 gpu2 -> leaf1 -> spine0 ->
    leaf0 -> gpu0. A constant checkpoint of 8 Gb/s writes from both GPUs (2 flows of 4 Gb/s): GPU 0's over
    gpu0 -> leaf0 -> spine0 -> leaf1 -> storage0, GPU 2's over gpu2 -> leaf1 -> storage0."""
    bg: dict = {"kind": "checkpoint", "gbps": 8, "flows_per_host": 2}
    if upstream is not None:
        bg["upstream"] = upstream
    return {
        "name": "upstream-hand",
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 1, "hosts_per_leaf": 2, "gpus_per_host": 1,
                   "nic_gbps": 10, "uplink_gbps": 10, "hop_latency_us": 0.0, "link_efficiency": 1.0,
                   "storage": {"hosts": 1, "gbps": 5, "leaves": [1]}},
        "workload": {"jobs": [{"name": "ring", "gpus": 2, "placement": [0, 2], "compute_ms": 1.0,
                               "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": S}]}],
                     "background": [bg]},
        "dynamics": {"episode_steps": 1, "decision_interval_ms": 50.0},
    }  # fmt: skip


def _run(upstream: str | None, backend: str = "numpy") -> dict:
    return ainet_gym.simulate(
        _scenario(upstream), policy="ecmp", steps=1, seed=0, backend=backend, links=True
    )


def _link_bytes(step: dict, src: str, dst: str) -> float:
    return next(lk["bytes"] for lk in step["links"] if lk["src"] == src and lk["dst"] == dst)


@pytest.mark.parametrize(
    ("upstream", "ring_gbps", "bg_up_gbps"),
    [
        # share: each checkpoint flow gets 5 / 2 = 2.5 Gb/s at the storage port and on every link of its path, so
        # the ring (one lockstep flow: both hops at one rate) gets 10 - 2.5 = 7.5 Gb/s on gpu0 -> leaf0 ->
        # spine0 -> leaf1 (GPU 0's flow) and on gpu2 -> leaf1 (GPU 2's flow)
        ("share", 7.5, 2.5),
        # demand: the storage port is both flows' bottleneck (saturated, their level the largest there); the
        # links before it carry their demand, 4 Gb/s, so the ring gets 10 - 4 = 6 Gb/s
        ("demand", 6.0, 4.0),
    ],
)
def test_ring_hop_beside_a_checkpoint_squeezed_at_a_half_rate_port(
    upstream: str, ring_gbps: float, bg_up_gbps: float
) -> None:
    step = _run(upstream)["steps"][0]
    (job,) = step["jobs"]
    # the hop time: S bytes at the ring's rate (6.4 ms under share, 8.0 ms under demand)
    assert job["comm_time_ms"] == pytest.approx(S / (ring_gbps * GB) * 1e3, rel=1e-9)
    # the uplink leaf0 -> spine0 carries hop 0 -> 2 and GPU 0's checkpoint flow; spine0 -> leaf0 carries hop 2 -> 0
    # only, the same ring bytes: the difference is the checkpoint's, at its upstream rate for the whole 50 ms
    up = _link_bytes(step, "leaf0", "spine0") - _link_bytes(step, "spine0", "leaf0")
    assert up == pytest.approx(bg_up_gbps * GB * 0.05, rel=1e-9)
    # the storage port delivers its capacity in both (the excess queues before it, it is not delivered)
    assert _link_bytes(step, "leaf1", "storage0") == pytest.approx(5.0 * GB * 0.05, rel=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_omitted_is_share_bit_for_bit(backend: str) -> None:
    assert _run(None, backend) == _run("share", backend)


def test_share_on_a_shipped_checkpoint_scenario_equals_the_field_omitted() -> None:
    """The cross-check copy whose checkpoint fires on seed 2 (intervals 5-6): ``share`` written out runs the
    engine of before bit for bit (the rule adds nothing without a ``demand`` source)."""
    path = (
        Path(__file__).resolve().parents[2]
        / "scenarios"
        / "crosscheck"
        / "xc-periodic-interference-jitter-64.yaml"
    )
    raw = load_scenario(path).raw
    written = copy.deepcopy(raw)
    written["workload"]["background"][0]["upstream"] = "share"
    a = ainet_gym.simulate(raw, policy="spray", steps=7, seed=2, backend="numpy")
    b = ainet_gym.simulate(written, policy="spray", steps=7, seed=2, backend="numpy")
    assert a["steps"] == b["steps"]


def test_two_stage_rule_by_hand() -> None:
    """Links 0 (A, 10), 1 (S, 1), 2 (B, 10), 3 (C, 10), 4 (D, 10). Flow 0, a job flow, crosses A and B. Flow 1, a
    background flow of demand 4, is split half over path 0 (A then S) and half over path 1 (C then D): merged
    coefficients 0.5 on A, S, C and D. Stage 1: S holds it at 0.5 r = 1, r = 2; the job gets 10 - 1 = 9. Its
    bottleneck is S; path 0's first bottleneck is S at hop 1, so A (hop 0) is upstream; path 1 crosses no
    bottleneck link and has no upstream link. Stage 2: its upstream piece (0.5 on A, demand 4) gets 4, the fixed
    0.5 x 2 stays on S, C and D; the job gets 10 - 2 = 8. The flow's rate stays 2 and A carries (4 - 2) x 0.5 = 1
    beyond it."""
    plan = UpstreamPlan(
        flows=np.array([1]),
        row_flow=np.array([1, 1, 1, 1]),
        row_group=np.array([0, 0, 1, 1]),
        row_hop=np.array([0, 1, 0, 1]),
        row_link=np.array([0, 1, 3, 4]),
        row_coef=np.array([0.5, 0.5, 0.5, 0.5]),
        n_groups=2,
    )
    ef = np.array([0, 0, 1, 1, 1, 1])
    el = np.array([0, 2, 0, 1, 3, 4])
    ec = np.array([1.0, 1.0, 0.5, 0.5, 0.5, 0.5])
    cap = np.array([10.0, 1.0, 10.0, 10.0, 10.0])
    demand = np.array([np.inf, 4.0])
    stage1 = np.array([9.0, 2.0])
    up = upstream_rates(plan, np.array([0, 1]), ef, el, ec, cap, stage1, demand, None)
    assert up is not None
    np.testing.assert_allclose(up.rates, [8.0, 2.0], rtol=1e-12)
    assert up.extra_link.tolist() == [0]
    np.testing.assert_allclose(up.extra_rate, [1.0], rtol=1e-12)
    # at its demand (not held) nothing is charged: stage 1 stands
    assert (
        upstream_rates(plan, np.array([0, 1]), ef, el, ec, cap * 10, np.array([8.0, 4.0]), demand, None)
        is None
    )


@pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")
def test_demand_is_refused_on_numba_naming_the_field() -> None:
    with pytest.raises(
        ValueError, match=r"workload\.background\[0\]\.upstream = 'demand'.*numba.*allowed on it: share"
    ):
        _run("demand", "numba")


@pytest.mark.parametrize("value", ["queue", 1, None])
def test_bad_upstream_is_refused_naming_the_field_value_and_choices(value: object) -> None:
    sc = _scenario(None)
    sc["workload"]["background"][0]["upstream"] = value
    with pytest.raises(ScenarioError, match=r"workload\.background\[0\]\.upstream") as err:
        load_scenario(sc)
    assert "share, demand" in str(err.value)


def test_demand_with_a_ring_window_is_refused_naming_both_fields() -> None:
    """``upstream: demand`` and ``routing.ring_window_bytes`` each re-solve the rates of an event their own way
    (numpy backend): together they are refused when the units are stacked, naming both fields."""
    sc = _scenario("demand")
    sc["routing"] = {"split_flows": "independent", "ring_window_bytes": 4e6}
    with pytest.raises(
        ValueError,
        match=r"routing\.ring_window_bytes = 4e\+06 with a background source with upstream 'demand'",
    ) as err:
        ainet_gym.simulate(sc, policy="ecmp", steps=1, seed=0, backend="numpy")
    assert "workload.background[].upstream 'share'" in str(err.value)
