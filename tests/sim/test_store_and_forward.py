"""``fabric.store_and_forward_bytes``: a phase's per-step latency adds one packet's serialisation on every link
of its path (a store-and-forward switch receives the whole packet before it forwards it), computed by hand
on a 2-hop path with two different link rates; 0 (the default) leaves every latency as it was, bit for bit;
a bad value is refused naming the field, the value and what is allowed."""

from __future__ import annotations

import math

import networkx as nx
import pytest

from ainet_gym.fabric.topology import build_fabric
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.world import FabricWorld

HOP_US = 0.5
PACKET = 1502.0  # ns-3's replay: MSS 1448 + 52 IP/TCP/timestamp + 2 PPP
S = 1.0e6  # bytes of the ring AllReduce


def bps(gbps: float) -> float:
    return gbps * 1e9 / 8.0


def two_hop_graph(a_gbps: float, b_gbps: float) -> nx.Graph:
    """Two one-GPU hosts on one switch, GPU a at a_gbps and GPU b at b_gbps: each path is 2 links of
    different rates (a -> switch at a_gbps, switch -> b at b_gbps)."""
    G = nx.Graph()
    G.add_node("sw", role="switch")
    G.add_node("a", role="gpu", host=0)
    G.add_node("b", role="gpu", host=1)
    G.add_edge("a", "sw", gbps=a_gbps)
    G.add_edge("b", "sw", gbps=b_gbps)
    return G


def scenario(packet: float | None, a_gbps: float = 100.0, b_gbps: float = 25.0) -> dict:
    fabric = {"topology": "graph", "graph": two_hop_graph(a_gbps, b_gbps), "hop_latency_us": HOP_US}
    if packet is not None:
        fabric["store_and_forward_bytes"] = packet
    job = {"name": "j", "gpus": 2, "compute_ms": 1.0, "overlap": 0.0,
           "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": S}]}  # fmt: skip
    return {
        "name": "sf",
        "fabric": fabric,
        "workload": {"jobs": [job]},
        "dynamics": {"decision_interval_ms": 5.0},
    }


def comm_time(d: dict) -> float:
    w = FabricWorld(load_scenario(d), batch=1)
    w.reset(seeds=[0])
    res = w.step(get_policy("ecmp")(w, None))
    assert int(res.iterations[0, 0]) >= 3
    return float(res.comm_time_s[0, 0])


def test_path_latency_adds_a_packet_per_link_at_its_rate():
    f = build_fabric(load_scenario(scenario(PACKET)).fabric)
    (path,) = f.paths(0, 1)
    # by hand: 2 links x 0.5 us of propagation + 1502 B at 100 Gb/s (0.12016 us) + at 25 Gb/s (0.48064 us)
    assert f.path_latency_s(path) == pytest.approx(1.0e-6 + 0.12016e-6 + 0.48064e-6, rel=1e-12)


def test_ring_step_pays_the_store_and_forward_of_its_path():
    # 2 ranks: 2 (p - 1) = 2 ring steps, each paying its path's latency; both directions' paths cross one
    # 100G and one 25G link, so the per-step alpha is the same; the beta term is the 25G link's
    # 2 (p - 1) / p S = S bytes (each direction's flow runs alone on its links)
    alpha = 2 * HOP_US * 1e-6 + PACKET / bps(100.0) + PACKET / bps(25.0)
    expected = 2 * alpha + S / bps(25.0)
    assert comm_time(scenario(PACKET)) == pytest.approx(expected, rel=1e-9)


def test_default_zero_is_the_propagation_only_latency_bit_for_bit():
    d0, dz = comm_time(scenario(None)), comm_time(scenario(0.0))
    assert d0 == dz  # bit for bit
    assert d0 == pytest.approx(2 * 2 * HOP_US * 1e-6 + S / bps(25.0), rel=1e-9)
    assert load_scenario(scenario(None)).fabric.store_and_forward_bytes == 0.0


@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        (-1.0, "-1"),
        (math.inf, "inf"),
        (math.nan, "nan"),
        (2e6, "2000000"),
        ("1500", "'1500'"),
        (True, "True"),
    ],
)
def test_bad_value_is_refused_naming_field_value_and_allowed(bad, shown):
    with pytest.raises(ScenarioError) as info:
        load_scenario(scenario(bad))
    msg = str(info.value)
    assert "fabric.store_and_forward_bytes" in msg and shown in msg
    assert "allowed: a number in [0, 1000000] (0: propagation only)" in msg
