"""Model breadth (issue 12): NICs shared by GPUs, rank order, fabrics from a graph, what a flow sees.

Every expected number is recomputed here from a closed form, never taken from the engine:

- a ring over hosts that each have one NIC of bandwidth B: 2 (p-1)/p S / B (the p - 1 NVLink hops of a
  host are faster; the one hop that leaves a host crosses the NIC); hierarchical AllReduce on g GPUs x h
  hosts with one NIC per host: 2 (g-1)/g S / B_nvlink + 2 (h-1)/h S / B_nic (the g rail rings share it);
- k GPUs behind one NIC, each sending S off the host: S / min(B_pcie, B_nic / k); alpha counts 4 links;
- a ring under packet spraying on a 2-tier Clos runs at min(B_nic, U / c_max), where c_max is the largest
  number of ring hops leaving one leaf and U the leaf's uplink capacity: its slowdown over the
  non-blocking ring is max(1, c_max B_nic / U), counted from the rank order;
- a fabric exported to GraphML and read back gives the built-in fabric's results (to 1e-12);
- per-link and per-connection bytes add up to the bytes of each tier.
"""

from __future__ import annotations

import copy
import io
import json
import math
from contextlib import redirect_stdout

import networkx as nx
import numpy as np
import pytest

import ainet_gym
from ainet_gym.cli import main as cli_main
from ainet_gym.fabric.topology import (
    TIERS,
    build_fabric,
    fabric_from_graph,
    fabric_to_graph,
    write_fabric_graph,
)
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario.loader import ScenarioError, load_scenario
from ainet_gym.sim.simulate import simulate
from ainet_gym.sim.world import FabricWorld

S = 1.0e9  # bytes


def bps(gbps: float) -> float:
    return gbps * 1e9 / 8.0


def run(d: dict, policy: str = "ecmp", steps: int = 1, seed: int = 0):
    w = FabricWorld(load_scenario(d), batch=1)
    w.reset(seeds=[seed])
    res = None
    for _ in range(steps):
        res = w.step(get_policy(policy)(w, res))
    return w, res


def one_job(fabric: dict, job: dict, interval_ms: float, latency_us: float = 0.0, **extra) -> dict:
    return {
        "name": "breadth",
        "fabric": {"hop_latency_us": latency_us, **fabric},
        "workload": {"jobs": [{"name": "j", "compute_ms": 1.0, "overlap": 0.0, **job}]},
        "dynamics": {"decision_interval_ms": interval_ms},
        **extra,
    }


# --------------------------------------------------------------------------------------------------
# 2. NICs shared by several GPUs
# --------------------------------------------------------------------------------------------------

ONE_NIC = {"gpus_per_host": 8, "gpus_per_nic": 8, "nic_gbps": 100.0, "nvlink_gbps": 3600.0}
TWO_HOST_FABRICS = {
    "single_switch": {"topology": "single_switch", "hosts": 2},
    "spine_leaf": {"topology": "spine_leaf", "leaves": 2, "hosts_per_leaf": 1, "spines": 2},
    "rail_optimized": {"topology": "rail_optimized", "hosts": 2, "spines": 2},
}


@pytest.mark.parametrize("topology", sorted(TWO_HOST_FABRICS))
def test_one_nic_per_host_flat_ring_runs_at_the_nic_rate(topology):
    """2 hosts x 8 GPUs, one 100 Gb/s NIC per host: a flat 16-rank ring takes 2(p-1)/p S / B_nic = 150 ms."""
    p = 16
    expected = 2 * (p - 1) / p * S / bps(100.0)
    assert expected == pytest.approx(0.150)
    d = one_job(
        {**TWO_HOST_FABRICS[topology], **ONE_NIC},
        {"gpus": p, "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": S}]},
        interval_ms=3.5 * (1.0 + expected * 1e3),
    )
    _, res = run(d)
    assert res.iterations[0, 0] >= 3
    assert res.comm_time_s[0, 0] == pytest.approx(expected, rel=1e-9)


def test_one_nic_per_host_hierarchical_allreduce_shares_the_nic_between_rails():
    g, h, nvl = 8, 2, 3600.0
    expected = 2 * (g - 1) / g * S / bps(nvl) + 2 * (h - 1) / h * S / bps(100.0)
    d = one_job(
        {**TWO_HOST_FABRICS["single_switch"], **ONE_NIC},
        {"gpus": g * h, "collectives": [{"op": "allreduce", "algorithm": "hierarchical", "bytes": S}]},
        interval_ms=3.5 * (1.0 + expected * 1e3),
    )
    _, res = run(d)
    assert res.comm_time_s[0, 0] == pytest.approx(expected, rel=1e-9)
    flat = 2 * 15 / 16 * S / bps(100.0)
    assert flat / expected == pytest.approx(0.150 / (0.080 + 2 * 7 / 8 / 450.0), rel=1e-9)  # 1.788


@pytest.mark.parametrize(("k", "nic", "pcie"), [(2, 400.0, 50.0), (4, 400.0, 400.0), (4, 100.0, 256.0)])
def test_shared_nic_rate_is_min_of_pcie_and_nic_share(k, nic, pcie):
    """Every GPU of host 0 sends S to its peer on host 1 (shift by gpus_per_host): the k GPUs of a NIC
    share it, each behind its own PCIe link; alpha counts pcie, nic, nic, pcie = 4 links."""
    gph, lat_us = 4, 1.0
    expected = 4 * lat_us * 1e-6 + S / min(bps(pcie), bps(nic) / k)
    fabric = {
        "topology": "single_switch",
        "hosts": 2,
        "gpus_per_host": gph,
        "gpus_per_nic": k,
        "nic_gbps": nic,
        "pcie_gbps": pcie,
    }
    job = {"gpus": 2 * gph, "collectives": [{"op": "sendrecv", "pattern": f"shift:{gph}", "bytes": S}]}
    _, res = run(one_job(fabric, job, 3.5 * (1.0 + expected * 1e3), latency_us=lat_us))
    assert res.comm_time_s[0, 0] == pytest.approx(expected, rel=1e-9)


def test_gpus_per_nic_1_is_todays_fabric_and_one_nic_per_host_adds_pcie():
    base = {"topology": "spine_leaf", "leaves": 2, "hosts_per_leaf": 2, "gpus_per_host": 4}
    a = build_fabric(load_scenario(one_job(base, {"gpus": 2}, 10.0)).fabric)
    b = build_fabric(load_scenario(one_job({**base, "gpus_per_nic": 1}, {"gpus": 2}, 10.0)).fabric)
    for name in ("link_src", "link_dst", "link_gbps", "link_tier", "link_group", "endpoint_up"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert b.endpoint_pcie_up is None and b.max_hops == 4
    c = build_fabric(load_scenario(one_job({**base, "gpus_per_nic": 4}, {"gpus": 2}, 10.0)).fabric)
    nic = TIERS.index("nic")
    assert (c.link_tier == nic).sum() == 2 * 4  # one duplex NIC link per host
    assert (c.link_tier == TIERS.index("pcie")).sum() == 2 * 16  # one duplex PCIe link per GPU
    assert c.max_hops == 6
    assert len(c.paths(0, 4)) == 1 and len(c.paths(0, 4)[0]) == 4  # same leaf, other host
    assert len(c.paths(0, 8)[0]) == 6  # other leaf: pcie, nic, up, down, nic, pcie
    assert c.paths(0, 1) == [[int(c.gpu_nvl_up[0]), int(c.gpu_nvl_down[1])]]  # NVLink inside a host


def test_fat_tree_with_shared_nics_puts_one_nic_per_edge_port():
    d = one_job({"topology": "fat_tree", "k": 4, "gpus_per_host": 4, "gpus_per_nic": 2}, {"gpus": 2}, 10.0)
    sc = load_scenario(d)
    f = build_fabric(sc.fabric)
    assert f.n_gpus == ainet_gym.scenario.loader.fabric_gpu_count(sc.fabric) == 16 * 2
    nic_up = f.endpoint_up[: f.n_gpus]
    assert np.unique(nic_up).size == 16  # k^3/4 edge ports, one NIC each
    assert np.all(np.bincount(f.endpoint_leaf[: f.n_gpus]) == 4)  # k/2 NICs x 2 GPUs per edge switch


# --------------------------------------------------------------------------------------------------
# 3. Rank order
# --------------------------------------------------------------------------------------------------


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
    w, res = run(one_job(fabric, job, 4.0 * (1.0 + 4 * ideal * 1e3)), policy="spray", seed=seed)
    ranks = w.state.gpus[0][0]
    leaf = ranks // HOSTS_PER_LEAF
    out_hops = np.bincount(leaf[leaf != np.roll(leaf, -1)], minlength=LEAVES)  # hops leaving each leaf
    in_hops = np.bincount(np.roll(leaf, -1)[leaf != np.roll(leaf, -1)], minlength=LEAVES)
    load = max(out_hops.max(), in_hops.max()) * NIC / (SPINES * NIC)
    assert res.iterations[0, 0] >= 2
    assert res.comm_time_s[0, 0] / ideal == pytest.approx(max(1.0, load), rel=1e-9)
    if seed == 0:
        assert load > 1.0  # the shuffle does slow this one down


# --------------------------------------------------------------------------------------------------
# 4. Fabrics from a graph
# --------------------------------------------------------------------------------------------------


def _close(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-300), path
    else:
        assert a == b, path


def _as_graph_scenario(name: str, fabric) -> dict:
    sc = load_scenario(name)
    raw = copy.deepcopy(sc.raw)
    keep = {
        k: raw["fabric"][k] for k in ("profile", "hop_latency_us", "link_efficiency") if k in raw["fabric"]
    }
    raw["fabric"] = {"topology": "graph", **fabric, **keep}
    return raw


@pytest.mark.parametrize(
    "name", ["spine-leaf-2to1", "fat-tree-k8-stride", "storage-checkpoint", "profile-roce"]
)
def test_exported_graphml_reproduces_the_builtin_fabric(name, tmp_path):
    sc = load_scenario(name)
    out = tmp_path / "fabric.graphml"
    assert cli_main(["export-fabric", name, "--graphml", str(out)]) == 0
    raw = _as_graph_scenario(name, {"file": str(out)})
    for policy in ("ecmp", "spray"):
        a = simulate(name, policy=policy, steps=2, seed=1)
        b = simulate(raw, policy=policy, steps=2, seed=1)
        a.pop("scenario"), b.pop("scenario")
        _close(a, b)
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
    raw = _as_graph_scenario(name, {"graph": G})
    _close(simulate(name, "spray", 2, 0) | {"scenario": 0}, simulate(raw, "spray", 2, 0) | {"scenario": 0})
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
    w, res = run(d, policy="spray")
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
    w, res = run(str(tmp_path / "sub" / "s.yaml"))
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


# --------------------------------------------------------------------------------------------------
# scenario errors for every new key
# --------------------------------------------------------------------------------------------------


def _base(**fabric) -> dict:
    return one_job({"topology": "single_switch", "hosts": 2, "gpus_per_host": 4, **fabric}, {"gpus": 2}, 10.0)


@pytest.mark.parametrize(
    ("fabric", "match"),
    [
        ({"gpus_per_nic": 0}, r"fabric\.gpus_per_nic: 0 is out of range; allowed: an integer in \[1, "),
        (
            {"gpus_per_nic": 3},
            r"fabric\.gpus_per_nic: gpus_per_nic=3 does not divide gpus_per_host=4.*a divisor of 4",
        ),
        (
            {"gpus_per_nic": 2, "pcie_gbps": 0},
            r"fabric\.pcie_gbps: 0 is out of range; allowed: a number in \[0\.001, ",
        ),
        ({"pcie_gbps": 100}, r"fabric\.pcie_gbps: pcie_gbps applies only to GPUs that share a NIC"),
        (
            {"file": "x.graphml"},
            r"fabric\.file: key 'file' is not used by the single_switch topology \(it applies to graph\)",
        ),
    ],
)
def test_new_fabric_keys_are_validated(fabric, match):
    with pytest.raises(ScenarioError, match=match):
        load_scenario(_base(**fabric))


def test_rank_order_is_validated():
    d = _base()
    d["workload"]["jobs"][0]["rank_order"] = "shufled"
    with pytest.raises(
        ScenarioError,
        match=r"workload\.jobs\[0\]\.rank_order: 'shufled' is not a known rank order; "
        r"allowed: placement, sorted, shuffled, by_host \(did you mean 'shuffled'\?\)",
    ):
        load_scenario(d)


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


# --------------------------------------------------------------------------------------------------
# 5. What a flow sees
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "policy"), [("spine-leaf-2to1", "ecmp"), ("clos3-2pods", "spray"),
                                              ("rail-optimized-hierarchical", "ecmp")])  # fmt: skip
def test_link_and_flow_records_add_up_to_the_tier_bytes(name, policy):
    out = simulate(name, policy=policy, steps=2, seed=2, links=True, flows=True)
    for st in out["steps"]:
        links, flows = st["links"], st["flows"]
        tier_of = {lk["id"]: lk["tier"] for lk in links}
        by_links: dict[str, float] = {}
        for lk in links:
            by_links[lk["tier"]] = by_links.get(lk["tier"], 0.0) + lk["bytes"]
            assert 0.0 <= lk["mean_utilization"] <= lk["peak_utilization"] + 1e-12
            assert lk["peak_utilization"] <= 1.0 + 1e-9
        by_flows: dict[str, float] = dict.fromkeys(st["tier_bytes"], 0.0)
        for fl in flows:
            assert math.isclose(sum(fl["split"]), 1.0, rel_tol=1e-12)
            for path, share in zip(fl["paths"], fl["split"]):
                for lk in path:
                    by_flows[tier_of[lk]] += fl["bytes"] * share
            assert fl["mean_rate_gbps"] == pytest.approx(
                fl["bytes"] * 8e-9 / (out["decision_interval_ms"] * 1e-3)
            )
        for tier, total in st["tier_bytes"].items():
            assert by_links[tier] == pytest.approx(total, rel=1e-12, abs=1.0)
            assert by_flows[tier] == pytest.approx(total, rel=1e-7, abs=1.0)
        assert st["throughput_gbps"] * out["decision_interval_ms"] * 1e-3 / 8e-9 == pytest.approx(
            st["tier_bytes"]["nic"] / 2, rel=1e-12
        )


def test_cli_simulate_links_and_flows():
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["simulate", "clos3-2pods", "--policy", "spray", "--steps", "2", "--json", "--links",
                         "--flows", "--link-windows", "4"]) == 0  # fmt: skip
    st = json.loads(buf.getvalue())["steps"][1]
    assert set(st["links"][0]) == {"id", "src", "dst", "tier", "capacity_gbps", "bytes", "mean_utilization",
                                   "peak_utilization"}  # fmt: skip
    assert set(st["flows"][0]) == {"job", "src_gpu", "dst_gpu", "paths", "split", "bytes", "mean_rate_gbps"}
    assert len(st["flows"]) == 64 and len(st["flows"][0]["paths"]) == 64
    # step 1 holds 40 ms of the cross-pod transfers (each at 200 Gb/s) in its 40 ms interval... or part
    core = [lk for lk in st["links"] if lk["tier"] == "agg_core"]
    assert max(lk["peak_utilization"] for lk in core) == pytest.approx(
        1.0, rel=1e-9
    )  # saturated while it runs
    assert st["jobs"][0]["iteration_gpu_utilization"] == pytest.approx(20.0 / st["jobs"][0]["step_time_ms"])


def test_per_iteration_gpu_utilization_next_to_the_interval_one():
    """A 1,000 ms interval counts the partial iterations at its ends; the per-iteration figure is
    compute / step time."""
    expected_comm = 2 * 15 / 16 * S / bps(400.0)
    d = one_job({"topology": "single_switch", "hosts": 16, "gpus_per_host": 1},
                {"gpus": 16, "compute_ms": 100.0, "collectives": [{"op": "allreduce", "bytes": S}]}, 1000.0)  # fmt: skip
    st = simulate(d, steps=1)["steps"][0]["jobs"][0]
    step_ms = 100.0 + expected_comm * 1e3
    assert st["step_time_ms"] == pytest.approx(step_ms, rel=1e-9)
    assert st["iteration_gpu_utilization"] == pytest.approx(100.0 / step_ms, rel=1e-9)
    n = math.floor(1000.0 / step_ms)  # full iterations, then a partial one that computes first
    partial = 1000.0 - n * step_ms
    assert st["gpu_utilization"] == pytest.approx((n * 100.0 + min(partial, 100.0)) / 1000.0, rel=1e-9)


def test_write_and_read_graphml_round_trip(tmp_path):
    f = fabric_from_graph(two_leaf_graph())
    write_fabric_graph(f, tmp_path / "g.graphml")
    g = fabric_from_graph(nx.read_graphml(tmp_path / "g.graphml"))
    assert np.array_equal(f.link_src, g.link_src) and np.array_equal(
        f.capacity_bytes_per_s, g.capacity_bytes_per_s
    )


def test_env_info_links_and_flows():
    import gymnasium as gym

    env = gym.make("ainet_gym/SpineLeaf-v0", info_keys=["links", "flows"])
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.action_space.sample())
    core = env.unwrapped.core
    f = core.world.fabric
    assert info["link_bytes"].shape == (f.n_links,)
    nic_tier = f.link_tier == TIERS.index("nic")
    assert info["link_bytes"][nic_tier].sum() == pytest.approx(info["tier_bytes_nic"], rel=1e-12)
    dur = core.world.decision_interval_s
    assert info["throughput_gbps"] == pytest.approx(info["tier_bytes_nic"] / 2 / dur * 8e-9, rel=1e-12)
    assert info["flow_bytes"].shape == (core.n_slots,)
    assert info["flow_rate_gbps"] == pytest.approx(info["flow_bytes"] * 8e-9 / dur)
    for _ in range(3):
        _, _, _, _, info = env.step(env.action_space.sample())
    jobs = core.world.scenario.jobs
    done = info["iterations"][: len(jobs)] > 0
    assert done.any()
    expected = np.array([j.compute_ms for j in jobs]) / info["step_time_ms"][: len(jobs)]
    assert info["iteration_gpu_utilization"][: len(jobs)][done] == pytest.approx(expected[done], rel=1e-12)
    with pytest.raises(ValueError, match=r"info_keys = \['link'\]: unknown 'link'; allowed: links, flows"):
        gym.make("ainet_gym/SpineLeaf-v0", info_keys=["link"])


def test_scheduled_failure_on_a_graph_link():
    d = copy.deepcopy(load_scenario("clos3-2pods").raw)
    d["dynamics"]["link_failures"] = {"scheduled": [{"link": "p0agg0-core1", "at_step": 0}]}
    w, res = run(d, policy="spray")
    ids = w.fabric.link_ids("p0agg0-core1")
    assert np.all(res.capacity_bytes_per_s[0, ids] == 0) and res.failed_links[0] == 2
    d["dynamics"]["link_failures"] = {"scheduled": [{"link": "p0agg0-p1agg0", "at_step": 0}]}
    with pytest.raises(ScenarioError, match=r"link: string 'p0agg0-p1agg0' is not a link of the graph"):
        load_scenario(d)


def test_dual_plane_example_claim():
    """scenarios/dual-plane.yaml: spraying uses both 200G ports of every NIC (the ideal 400 Gb/s); static
    ECMP puts a connection on one port, so at most 200 Gb/s."""
    alpha = 4 * 0.25e-6  # one step over gpu -> tor -> spine -> tor -> gpu
    spray = simulate("dual-plane", policy="spray", steps=3, seed=0)["steps"]
    comm = [j["comm_time_ms"] for st in spray for j in st["jobs"] if j["comm_time_ms"] is not None]
    assert comm and all(c == pytest.approx((alpha + S / bps(400.0)) * 1e3, rel=1e-9) for c in comm)
    assert spray[0]["jobs"][0]["ideal_step_time_ms"] == pytest.approx(
        20.0 + (2 * 0.25e-6 + S / bps(400.0)) * 1e3
    )
    for seed in range(3):
        ecmp = simulate("dual-plane", policy="ecmp", steps=6, seed=seed)["steps"]
        c = [j["comm_time_ms"] for st in ecmp for j in st["jobs"] if j["comm_time_ms"] is not None]
        assert c and all(x >= S / bps(200.0) * 1e3 for x in c)
    f = build_fabric(load_scenario("dual-plane").fabric, max_paths=16)
    assert f.endpoint_ports is not None and len(f.paths(0, 16)) == 16
    planes = {f.node_names[int(f.link_dst[p[0]])][:4] for p in f.paths(0, 16)}
    assert planes == {"tora", "torb"}  # both planes, never across


def test_losing_a_plane_halves_the_rate_and_stalls_nothing(tmp_path):
    sc = load_scenario("dual-plane")
    d = copy.deepcopy(sc.raw)
    d["dynamics"] = {"decision_interval_ms": 200.0, "link_failures": {"scheduled": [{"link": f"tora{s}-spinea{k}", "at_step": 0}
                                                    for s in range(2) for k in range(8)]}}  # fmt: skip
    for policy in ("spray", "ecmp"):
        w, res = run(d, policy=policy, steps=3)
        assert res.stalled_transfers[0] == 0 and res.failed_links[0] == 32
        if policy == "spray":  # every live path is in plane b: one 200G port per GPU, evenly spread
            assert res.comm_time_s[0, 0] == pytest.approx(4 * 0.25e-6 + S / bps(200.0), rel=1e-9)


def test_dual_plane_export_round_trip(tmp_path):
    out = tmp_path / "dp.graphml"
    assert cli_main(["export-fabric", "dual-plane", "--graphml", str(out)]) == 0
    raw = _as_graph_scenario("dual-plane", {"file": str(out)})
    for policy in ("ecmp", "spray"):
        a = simulate("dual-plane", policy=policy, steps=2, seed=1)
        b = simulate(raw, policy=policy, steps=2, seed=1)
        a.pop("scenario"), b.pop("scenario")
        _close(a, b)


def test_flow_records_under_churn_describe_the_jobs_that_ran():
    # jobs arrive and leave at interval ends; the flow records of an interval must be those of the jobs
    # that ran in it (they add up to the tier bytes and name only that interval's jobs), not of the
    # jobs restacked after it (a regression: IndexError at step 4 of this rollout)
    # (11 steps: jobs arrive or leave at 6 of them on seed 0; every step's flow records are checked in Python)
    out = simulate("multi-tenant-churn", policy="ecmp", steps=11, seed=0, links=True, flows=True)
    changed = 0
    prev: set[str] = set()
    for st in out["steps"]:
        names = {j["name"] for j in st["jobs"]}
        changed += names != prev
        prev = names
        tier_of = {lk["id"]: lk["tier"] for lk in st["links"]}
        by_flows: dict[str, float] = dict.fromkeys(st["tier_bytes"], 0.0)
        for fl in st["flows"]:
            assert fl["job"] in names
            for path, share in zip(fl["paths"], fl["split"]):
                for lk in path:
                    by_flows[tier_of[lk]] += fl["bytes"] * share
        for tier, total in st["tier_bytes"].items():
            assert by_flows[tier] == pytest.approx(total, rel=1e-7, abs=1.0)
    assert changed > 3  # the rollout really had arrivals and departures
