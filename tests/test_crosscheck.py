"""The ns-3 cross-check: refusals and routing decisions (always), the smallest case against ns-3 (with the
optional extra ``ns3``; skipped without it). ``make check-ns3`` runs this file in a venv with the extra."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from ainet_gym.checks.crosscheck import (
    TCP_HEADER_EFFICIENCY,
    CrosscheckConfig,
    CrosscheckError,
    Ns3NotInstalledError,
    _Conn,
    _ecmp_set_size,
    _inversions,
    _routing_of,
    crosscheck,
)
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario.loader import load_scenario

HAS_NS3 = importlib.util.find_spec("ns") is not None
needs_ns3 = pytest.mark.skipif(
    not HAS_NS3, reason="ns-3 bindings not installed (optional extra: pip install 'ainet-gym[ns3]')"
)


def _switch(gpus: int = 4, nbytes: float = 2e6, **fabric: object) -> dict:
    return {
        "name": "xc-test",
        "fabric": {
            "topology": "single_switch",
            "hosts": gpus,
            "gpus_per_host": 1,
            "nic_gbps": 10,
            "profile": "roce",
            "hop_latency_us": 0.8,
            **fabric,
        },
        "workload": {
            "jobs": [
                {
                    "name": "ring",
                    "gpus": gpus,
                    "compute_ms": 1.0,
                    "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": nbytes}],
                }
            ]
        },
        "dynamics": {"episode_steps": 1, "decision_interval_ms": 8.0},
    }


# ------------------------------------------------------------------------------------------- refusals
def test_refuses_background_naming_the_field() -> None:
    sc = _switch()
    sc["fabric"]["storage"] = {"hosts": 1, "gbps": 10}
    sc["workload"]["background"] = [{"kind": "storage", "gbps": 5}]
    with pytest.raises(CrosscheckError, match=r"workload\.background"):
        crosscheck(sc)


def test_refuses_fabrics_over_64_gpus() -> None:
    with pytest.raises(CrosscheckError, match=r"65 GPUs.*at most 64"):
        crosscheck(_switch(gpus=65))


def test_refuses_link_failures_and_bad_steps() -> None:
    sc = _switch()
    sc["dynamics"]["link_failures"] = {"rate_per_step": 0.1, "tiers": ["nic"]}
    with pytest.raises(CrosscheckError, match=r"dynamics\.link_failures"):
        crosscheck(sc)
    with pytest.raises(CrosscheckError, match=r"steps = 9: must be an integer in \[1, 8\]"):
        crosscheck(_switch(), steps=9)


def test_refuses_chunked_pipelines_and_bad_ring_chunk() -> None:
    sc = _switch()
    sc["workload"]["jobs"][0]["collectives"] = [
        {"op": "allreduce", "algorithm": "tree", "bytes": 2e6, "chunks": 4}
    ]
    with pytest.raises(CrosscheckError, match=r"collectives\[0\]\.chunks = 4.*allowed: 1"):
        crosscheck(sc)
    for bad in (-1, "1M", True):
        with pytest.raises(CrosscheckError, match=r"ring_chunk_bytes = .*allowed"):
            crosscheck(_switch(), config=CrosscheckConfig(ring_chunk_bytes=bad))  # type: ignore[arg-type]


def test_ring_plan_couples_each_hop_to_the_previous_one_step_ahead() -> None:
    """A p-GPU ring AllReduce of S bytes (Patarasuk & Yuan 2009; NCCL): p hops, each moving 2 (p-1)/p S
    in 2 (p-1) steps of S/p; hop r -> r+1 forwards what hop r-1 -> r delivered, S/p (one step) ahead."""
    from ainet_gym.checks.crosscheck import _run_fluid

    p, S = 4, 2e6
    run = _run_fluid(load_scenario(_switch(gpus=p, nbytes=S)), "ecmp", 0, 1, CrosscheckConfig())
    ((flow,),) = run.jobs[0].phases  # one phase, one flow: the ring
    assert len(flow) == p
    for c, nbytes, pred, lag in flow:
        assert nbytes == pytest.approx(2 * (p - 1) / p * S)
        assert lag == pytest.approx(S / p)
        assert run.conns[flow[pred][0]].dst == run.conns[c].src  # fed by the hop into its source


def test_refuses_bad_experiment_constants_naming_them() -> None:
    for field, bad in (("fluid_repeats", -1), ("device_queue_packets", 0), ("device_queue_packets", 2.5)):
        with pytest.raises(CrosscheckError, match=rf"{field} = {bad!r}: allowed: an integer >= "):
            crosscheck(_switch(), config=CrosscheckConfig(**{field: bad}))


def test_ppo_rows_name_the_missing_checkpoint() -> None:
    from ainet_gym.checks.crosscheck import case_policy

    assert case_policy("xc-ring-8", "lp") == "lp"
    with pytest.raises(CrosscheckError, match=r"policy 'ppo' of case 'no-such-case': no model"):
        case_policy("no-such-case", "ppo")


def test_refuses_rail_topology() -> None:
    sc = _switch()
    sc["fabric"] = {"topology": "rail_optimized", "hosts": 2, "gpus_per_host": 2, "spines": 1}
    with pytest.raises(CrosscheckError, match=r"fabric\.topology = 'rail_optimized'.*allowed"):
        crosscheck(sc)


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    xc = sys.modules["ainet_gym.checks.crosscheck"]  # the package attribute of that name is the function
    monkeypatch.setattr(xc, "_NS", None)
    monkeypatch.setitem(sys.modules, "ns", None)  # `from ns import ns` raises ImportError
    with pytest.raises(Ns3NotInstalledError, match=r"ainet-gym\[ns3\]"):
        crosscheck(_switch())


# ------------------------------------------------------------------------------------------- routing
def test_ecmp_set_size_counts_parallel_links_and_fat_tree_paths() -> None:
    sl = load_scenario(
        {
            "name": "t",
            "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 3, "links_per_spine": 2,
                       "hosts_per_leaf": 1, "gpus_per_host": 1},
            "workload": {"jobs": [{"name": "j", "gpus": 2, "collectives": []}]},
        }
    )  # fmt: skip
    f = build_fabric(sl.fabric, max_paths=4)
    assert _ecmp_set_size(f, 0, 1) == 12  # 3 spines x 2 parallel links up x 2 down, over the 4 candidates
    assert len(f.paths(0, 1)) == 4
    ft = load_scenario(
        {
            "name": "t",
            "fabric": {"topology": "fat_tree", "k": 4, "gpus_per_host": 1},
            "workload": {"jobs": [{"name": "j", "gpus": 2, "collectives": []}]},
        }
    )
    f = build_fabric(ft.fabric, max_paths=8)
    # k=4 fat-tree (Al-Fares 2008): (k/2)^2 = 4 core paths across pods, k/2 = 2 within a pod, 1 on an edge
    assert _ecmp_set_size(f, 0, 15) == 4
    assert _ecmp_set_size(f, 0, 2) == 2
    assert _ecmp_set_size(f, 0, 1) == 1


def test_routing_of_pins_sprays_and_splits() -> None:
    conn = _Conn(0, 1, [[0], [1], [2], [3]], full_ecmp=4)
    assert _routing_of(np.array([0, 0, 1, 0, 0]), conn, "packet") == ("paths", [(2, 1.0)])
    assert _routing_of(np.full(4, 0.25), conn, "packet") == ("spray", [])
    kind, parts = _routing_of(np.full(4, 0.25), conn, "subflows")
    assert kind == "paths" and [p for p, _ in parts] == [0, 1, 2, 3]
    kind, parts = _routing_of(np.array([0.5, 0.5, 0, 0]), conn, "packet")
    assert kind == "paths" and parts == [(0, 0.5), (1, 0.5)]
    capped = _Conn(0, 1, [[0], [1]], full_ecmp=4)  # an even split over a capped set is not a spray
    assert _routing_of(np.array([0.5, 0.5]), capped, "packet")[0] == "paths"


def test_inversions_ignore_fluid_ties() -> None:
    assert _inversions({"a": 1.0, "b": 2.0}, {"a": 2.1, "b": 2.0}, 0.02) == ["a<b"]
    assert _inversions({"a": 1.0, "b": 1.01}, {"a": 2.0, "b": 1.0}, 0.02) == []


# ------------------------------------------------------------------------------------------- ns-3
@needs_ns3
def test_smallest_case_matches_closed_form_and_contract(capsys: pytest.CaptureFixture[str]) -> None:
    """4 GPUs on one 10 Gb/s switch, ring AllReduce of 2 MB: every hop moves 2 (p-1)/p S = 3 MB.

    Reference (independent of both simulators): 3 MB at 10 Gb/s times the TCP payload fraction 1448/1529.
    """
    from ainet_gym.cli import main

    assert main(["crosscheck", "xc-switch-4", "--policy", "ecmp", "--seed", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"scenario", "policy", "seed", "jobs", "fluid_wall_s", "ns3_wall_s"}
    assert out["scenario"] == "xc-switch-4" and out["policy"] == "ecmp" and out["seed"] == 0
    (job,) = out["jobs"]
    assert set(job) == {"name", "fluid_comm_ms", "ns3_comm_ms", "rel_error"}
    closed = 3e6 * 8 / (10e9 * 1448 / 1529) * 1e3
    assert job["ns3_comm_ms"] == pytest.approx(closed, rel=0.015)
    assert job["fluid_comm_ms"] == pytest.approx(closed, rel=0.01)
    assert job["rel_error"] == pytest.approx((job["fluid_comm_ms"] - job["ns3_comm_ms"]) / job["ns3_comm_ms"])
    assert abs(job["rel_error"]) < 0.015
    assert out["ns3_wall_s"] > 0 and out["fluid_wall_s"] > 0


@needs_ns3
def test_nvlink_transfers_are_refused() -> None:
    sc = _switch(gpus=2, gpus_per_host=2)
    with pytest.raises(CrosscheckError, match=r"same host \(NVLink\)"):
        crosscheck(sc)


def test_header_factor_is_the_documented_fraction() -> None:
    assert abs(TCP_HEADER_EFFICIENCY - 1448 / 1529) < 1e-15
    assert CrosscheckConfig().header_efficiency == TCP_HEADER_EFFICIENCY


@needs_ns3
def test_acks_sharing_links_with_data_do_not_slow_the_data() -> None:
    """Two GPUs on two leaves joined by one spine exchange 2 MB: every link carries one direction's data
    and the other direction's ACKs. Reference (closed form, independent of both simulators): 2 MB at
    10 Gb/s times the TCP payload fraction 1448/1529 (1.690 ms). With ns-3's default 100-packet device FIFO
    under the queue disc the ACKs waited behind 150 KB of data on every link and the exchange took 1.914 ms
    (+13%, docs/fidelity.md); the cross-check's 4-packet FIFO lets FqCoDel interleave them (1.711 ms)."""
    from ainet_gym.checks.crosscheck import _crosscheck_in_subprocess

    sc = {
        "name": "xc-ack-share",
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 1, "hosts_per_leaf": 1,
                   "gpus_per_host": 1, "nic_gbps": 10, "uplink_gbps": 10, "profile": "roce"},
        "workload": {"jobs": [{"name": "x", "gpus": 2, "compute_ms": 1.0,
                               "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": 2e6}]}]},
        "dynamics": {"episode_steps": 1, "decision_interval_ms": 6.0},
    }  # fmt: skip
    closed = 2e6 * 8 / (10e9 * 1448 / 1529) * 1e3
    r, det = _crosscheck_in_subprocess(sc, "ecmp", 0, 1, None)
    (job,) = r["jobs"]
    assert job["ns3_comm_ms"] == pytest.approx(closed, rel=0.02)
    assert abs(job["rel_error"]) < 0.02
    # every transfer of the log completed and took the same time (no flow starved of ACKs)
    done = [t[3] - t[2] for t in det["transfer_log"] if t[3] > 0]
    assert len(done) >= 4 and max(done) - min(done) < 0.01 * closed * 1e-3
    # ns-3's default FIFO: the effect the short one removes
    r100, _ = _crosscheck_in_subprocess(sc, "ecmp", 0, 1, CrosscheckConfig(device_queue_packets=100))
    assert r100["jobs"][0]["ns3_comm_ms"] > 1.08 * closed
