"""Fabrics from a graph (``topology: graph``: a networkx graph, a GraphML or an edge-list file): a built-in
fabric exported to GraphML and read back gives the built-in fabric's results (to 1e-12); a graph from Python
measures its hops and its own non-blocking reference; the clos3 example's claim; a scheduled failure on a
graph link; each malformed graph, key or file refused with the problem named.

Every expected number is recomputed here from a closed form, never taken from the engine.
"""

from __future__ import annotations

import copy

import networkx as nx
import numpy as np
import pytest
from _scenarios import S, as_graph_scenario, assert_close_nested, bps, step_world

from ainet_gym.cli import main as cli_main
from ainet_gym.fabric.topology import (
    TIERS,
    build_fabric,
    fabric_from_graph,
    fabric_to_graph,
    write_fabric_graph,
)
from ainet_gym.scenario.loader import ScenarioError, load_scenario
from ainet_gym.sim.simulate import simulate


@pytest.mark.parametrize(
    "name", ["spine-leaf-2to1", "fat-tree-k8-stride", "storage-checkpoint", "profile-roce"]
)
def test_exported_graphml_reproduces_the_builtin_fabric(name, tmp_path):
    sc = load_scenario(name)
    out = tmp_path / "fabric.graphml"
    assert cli_main(["export-fabric", name, "--graphml", str(out)]) == 0
    raw = as_graph_scenario(name, {"file": str(out)})
    for policy in ("ecmp", "spray"):
        a = simulate(name, policy=policy, steps=2, seed=1)
        b = simulate(raw, policy=policy, steps=2, seed=1)
        a.pop("scenario"), b.pop("scenario")
        assert_close_nested(a, b)
    f, g = build_fabric(sc.fabric), build_fabric(load_scenario(raw).fabric)
    for attr in (
        "link_src",
        "link_dst",
        "capacity_bytes_per_s",
        "link_tier",
        "link_group",
        "endpoint_up",
        "gpu_host",
    ):
        assert np.array_equal(getattr(f, attr), getattr(g, attr)), attr
    assert f.max_hops == g.max_hops


def test_scenario_fabric_can_be_a_networkx_graph():
    name = "periodic-interference"
    G = fabric_to_graph(build_fabric(load_scenario(name).fabric))
    raw = as_graph_scenario(name, {"graph": G})
    assert_close_nested(
        simulate(name, "spray", 2, 0) | {"scenario": 0}, simulate(raw, "spray", 2, 0) | {"scenario": 0}
    )
    d = copy.deepcopy(load_scenario(name).raw)
    d["fabric"] = G  # scenario["fabric"] = G, with the profile's defaults
    assert load_scenario(d).fabric.topology == "graph"


def two_leaf_graph(nic: float = 400.0, up: float = 400.0) -> nx.Graph:
    """2 leaves x 2 hosts x 2 GPUs, 2 spines; no NVLink switches (made from nvlink_gbps)."""
    G = nx.Graph()
    for s in ("s0", "s1"):
        G.add_node(s, role="switch")
    for leaf in range(2):
        G.add_node(f"l{leaf}", role="switch")
        for s in ("s0", "s1"):
            G.add_edge(f"l{leaf}", s, gbps=up)
    for g in range(8):
        G.add_node(f"g{g}", role="gpu", host=g // 2)
        G.add_edge(f"g{g}", f"l{g // 4}", gbps=nic)
    return G


def test_graph_from_python_measures_hops_and_uses_its_own_nonblocking_reference():
    f = fabric_from_graph(two_leaf_graph())
    assert (f.n_gpus, f.n_hosts, f.max_hops) == (8, 4, 4)
    assert len(f.paths(0, 7)) == 2 and all(len(p) == 4 for p in f.paths(0, 7))
    assert TIERS[f.link_tier[f.paths(0, 7)[0][1]]] == "leaf_spine"
    # every host GPU 0 of each host sends to the other leaf: 4 flows over 2 x 100G uplinks of leaf 0
    G = two_leaf_graph(up=100.0)
    d = {
        "name": "g",
        "fabric": {"topology": "graph", "graph": G, "hop_latency_us": 0.0},
        "workload": {"jobs": [{"name": "j", "gpus": 8, "compute_ms": 1.0,
                               "collectives": [{"op": "sendrecv", "pattern": "shift:4", "bytes": S}]}]},
        "dynamics": {"decision_interval_ms": 400.0},
    }  # fmt: skip
    w, res = step_world(d, policy="spray")
    assert res.ideal_step_s[0, 0] == pytest.approx(1e-3 + S / bps(400.0), rel=1e-12)
    assert res.comm_time_s[0, 0] == pytest.approx(S / (2 * bps(100.0) / 4), rel=1e-9)


def test_edge_list_file_relative_to_the_scenario(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.edges").write_text(
        "# two hosts on one switch\nnode a role=gpu host=0\nnode b role=gpu host=1\n"
        "a sw gbps=100\nb sw gbps=100 latency_us=2\n"
    )
    (tmp_path / "sub" / "s.yaml").write_text(
        "name: e\nfabric: {topology: graph, file: f.edges, hop_latency_us: 0.5}\n"
        "workload: {jobs: [{name: j, gpus: 2, compute_ms: 1, collectives: [{op: sendrecv, pattern: 'shift:1', "
        "bytes: 1.0e9}]}]}\ndynamics: {decision_interval_ms: 300}\n"
    )
    w, res = step_world(str(tmp_path / "sub" / "s.yaml"))
    # per-link latency: a->sw 0.5 us, sw->b 2 us (the reverse of b->sw); b->a: 2 + 0.5; one step each
    assert res.comm_time_s[0, 0] == pytest.approx(2.5e-6 + S / bps(100.0), rel=1e-12)


def test_clos3_example_claim():
    """scenarios/clos3-2pods.yaml: under spray the cross-pod shift takes exactly 2 x S / B (plus 6 hops of
    alpha); static ECMP is never faster."""
    alpha = 6 * 0.25e-6
    expected = alpha + S / (bps(400.0) / 2)
    spray = simulate("clos3-2pods", policy="spray", steps=3, seed=0)["steps"]
    comm = [j["comm_time_ms"] for st in spray for j in st["jobs"] if j["comm_time_ms"] is not None]
    assert comm and all(c == pytest.approx(expected * 1e3, rel=1e-9) for c in comm)
    assert spray[-1]["jobs"][0]["ideal_step_time_ms"] == pytest.approx(
        20.0 + 2 * 0.25e-3 + S / bps(400.0) * 1e3
    )
    for seed in range(3):
        ecmp = simulate("clos3-2pods", policy="ecmp", steps=4, seed=seed)["steps"]
        c = [j["comm_time_ms"] for st in ecmp for j in st["jobs"] if j["comm_time_ms"] is not None]
        assert all(x >= expected * 1e3 * (1 - 1e-9) for x in c)


def _graph_scenario(G, **fabric) -> dict:
    return {
        "name": "g",
        "fabric": {"topology": "graph", "graph": G, **fabric},
        "workload": {"jobs": [{"name": "j", "gpus": 2}]},
    }


def _edit(fn):
    G = two_leaf_graph()
    fn(G)
    return G


@pytest.mark.parametrize(
    ("graph", "match"),
    [
        (_edit(lambda G: G.nodes["s0"].pop("role")), r"node 's0' has no role; allowed: gpu, switch, storage"),
        (_edit(lambda G: G.nodes["s0"].update(role="router")), r"node 's0': role = 'router': unknown; allowed: gpu, switch, storage"),
        (_edit(lambda G: G.nodes["g3"].pop("host")), r"GPU node 'g3' has no host"),
        (_edit(lambda G: G.edges["g1", "l0"].pop("gbps")), r"link (g1-l0|l0-g1) has no capacity: the gbps attribute is missing"),
        (_edit(lambda G: G.edges["l0", "s1"].update(gbps=0)), r"link (l0-s1|s1-l0) has no capacity: gbps = 0"),
        (_edit(lambda G: G.edges["l0", "s1"].update(tier="wan")), r"tier = 'wan': unknown; allowed: "),
        (_edit(lambda G: G.add_node("n0", role="nic") or G.add_edge("g0", "n0", gbps=400)),
         r"GPU g0 has links to .*a GPU behind a NIC has exactly one link into the network"),
        (_edit(lambda G: G.remove_edges_from([("l1", "s0"), ("l1", "s1")])), r"g0 has no path to g4"),
        (_edit(lambda G: G.add_node("g9", role="gpu", host=7) or G.add_edge("g9", "l1", gbps=1)),
         r"hosts have different numbers of GPUs"),
        (_edit(lambda G: [G.remove_node(f"g{i}") for i in range(8)]), r"the graph has no node with role gpu"),
    ],
)  # fmt: skip
def test_graph_errors_name_the_problem(graph, match):
    with pytest.raises(
        ScenarioError, match=r"<dict>: fabric\.graph: the graph is not a valid fabric: .*" + match
    ):
        load_scenario(_graph_scenario(graph))
    with pytest.raises(ValueError, match=match):
        fabric_from_graph(graph)


@pytest.mark.parametrize(
    ("fabric", "match"),
    [
        ({"k": 4}, r"fabric\.k: 'k' does not apply to a graph fabric .*; allowed: topology, graph, file"),
        ({"file": "a.graphml"}, r"fabric: a graph fabric needs exactly one of 'file' and 'graph'"),
    ],
)
def test_graph_fabric_keys(fabric, match):
    with pytest.raises(ScenarioError, match=match):
        load_scenario(_graph_scenario(two_leaf_graph(), **fabric))


def test_graph_file_errors(tmp_path):
    d = {"name": "g", "fabric": {"topology": "graph", "file": str(tmp_path / "nope.graphml")},
         "workload": {"jobs": [{"name": "j", "gpus": 1}]}}  # fmt: skip
    with pytest.raises(ScenarioError, match=r"fabric\.file: no such file: .*nope\.graphml"):
        load_scenario(d)
    bad = tmp_path / "bad.edges"
    bad.write_text("a b gbps\n")
    d["fabric"]["file"] = str(bad)
    with pytest.raises(
        ScenarioError, match=r"fabric\.file: cannot read the graph: .*bad\.edges:1: 'gbps' is not key=value"
    ):
        load_scenario(d)
    d["fabric"] = {"topology": "graph", "graph": "not a graph"}
    with pytest.raises(ScenarioError, match=r"fabric\.graph: expected a networkx graph, got string"):
        load_scenario(d)


def test_write_and_read_graphml_round_trip(tmp_path):
    f = fabric_from_graph(two_leaf_graph())
    write_fabric_graph(f, tmp_path / "g.graphml")
    g = fabric_from_graph(nx.read_graphml(tmp_path / "g.graphml"))
    assert np.array_equal(f.link_src, g.link_src) and np.array_equal(
        f.capacity_bytes_per_s, g.capacity_bytes_per_s
    )


def test_scheduled_failure_on_a_graph_link():
    d = copy.deepcopy(load_scenario("clos3-2pods").raw)
    d["dynamics"]["link_failures"] = {"scheduled": [{"link": "p0agg0-core1", "at_step": 0}]}
    w, res = step_world(d, policy="spray")
    ids = w.fabric.link_ids("p0agg0-core1")
    assert np.all(res.capacity_bytes_per_s[0, ids] == 0) and res.failed_links[0] == 2
    d["dynamics"]["link_failures"] = {"scheduled": [{"link": "p0agg0-p1agg0", "at_step": 0}]}
    with pytest.raises(ScenarioError, match=r"link: string 'p0agg0-p1agg0' is not a link of the graph"):
        load_scenario(d)
