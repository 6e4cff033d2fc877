"""Graph fabrics are counted before they are built: links, hosts and equal-cost paths (by dynamic
programming over the DAG of shortest paths, never enumerated) against LIMITS, and every numeric
attribute range-checked like the YAML fields."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ainet_gym.fabric.topology import fabric_from_graph, graph_size
from ainet_gym.scenario.loader import LIMITS, ScenarioError, load_scenario

JOB = "workload: {jobs: [{name: a, gpus: 2, compute_ms: 10, collectives: [{op: allreduce, bytes: 1.0e8}]}]}\n"


def _scenario(tmp_path: Path, edges: list[str], suffix: str = ".edges") -> Path:
    f = tmp_path / f"fabric{suffix}"
    f.write_text("\n".join(edges) + "\n")
    sc = tmp_path / "sc.yaml"
    sc.write_text(f"name: g\nfabric: {{topology: graph, file: {f.name}}}\n{JOB}")
    return sc


def _two_gpus(a: str, b: str) -> list[str]:
    return ["node g0 role=gpu host=0", "node g1 role=gpu host=1", f"g0 {a} gbps=400", f"g1 {b} gbps=400"]


def test_a_99_line_edge_list_with_2_to_the_24_paths_is_refused_with_the_count(tmp_path) -> None:
    """Fails on the old code: the size estimate assumed one equal-cost path, and enumerating 2^24 paths
    ended in MemoryError."""
    lines = _two_gpus("sw0", "sw24") + [f"sw{i} sw{i + 1} gbps=400" for i in range(24) for _ in range(2)]
    assert len(lines) < 100
    with pytest.raises(ScenarioError, match=r"16,777,216 equal-cost paths .*LIMITS\['ecmp_set'\]"):
        load_scenario(_scenario(tmp_path, lines))


def test_three_hops_of_300_parallel_links_are_refused(tmp_path) -> None:
    lines = _two_gpus("a", "d") + [f"{u} {v} gbps=400" for u, v in ("ab", "bc", "cd") for _ in range(300)]
    with pytest.raises(ScenarioError, match=r"27,000,000 equal-cost paths"):
        load_scenario(_scenario(tmp_path, lines))


def test_more_links_than_the_limit_are_refused_before_building(tmp_path, monkeypatch) -> None:
    """Fails on the old code: a graph's links were estimated as 4 per GPU, so 300 parallel links passed."""
    lines = _two_gpus("a", "b") + ["a b gbps=400"] * 300
    monkeypatch.setitem(LIMITS, "links", 500)
    with pytest.raises(ScenarioError, match=r"(more than 500|60\d) directed links.*LIMITS\['links'\]"):
        load_scenario(_scenario(tmp_path, lines))


@pytest.mark.parametrize("kind", ["links", "nodes"])
def test_an_edge_list_above_the_link_limit_is_refused_while_reading(tmp_path, monkeypatch, kind) -> None:
    """Fails on the old code: the links were counted after the whole file was read into a graph (a 600k-line
    edge list took 55 s to refuse on a loaded 2-core machine), so the broken last line, not the limit, was
    reported. A connected graph of n nodes has at least 2 (n - 1) directed links, so n above the limit / 2 + 1
    is refused too (disconnected node pairs, each line two new nodes)."""
    monkeypatch.setitem(LIMITS, "links", 100)
    body = ["a b gbps=400"] * 60 if kind == "links" else [f"node x{i} role=switch" for i in range(60)]
    lines = _two_gpus("a", "b") + body + ["a b this-line-is-broken"]
    with pytest.raises(ScenarioError, match=r"fabric\.edges:\d+: the graph has more than 100 directed links"):
        load_scenario(_scenario(tmp_path, lines))


def test_quoted_edge_list_words_still_parse(tmp_path) -> None:
    """The fast split is used only for lines without quotes or backslashes; a quoted node name with a space
    still reads as one name (shlex)."""
    from ainet_gym.fabric.topology import read_fabric_graph

    f = tmp_path / "q.edges"
    f.write_text(
        'node "gpu 0" role=gpu host=0  # quoted\nnode g1 role=gpu host=1\n"gpu 0" s gbps=400\ng1 s gbps=400\n'
    )
    G = read_fabric_graph(f)
    assert set(G.nodes) == {"gpu 0", "g1", "s"} and G.number_of_edges() == 2


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("gbps=4.9e-324", r"gbps = 5e-324; allowed: a number in \[0\.001, 1e\+06\]"),
        ("gbps=1e308", r"gbps = 1e\+308; allowed"),
        ("gbps=400 latency_us=1e300", r"latency_us = 1e\+300; allowed: a number in \[0, 1e\+06\]"),
        ("gbps=400 latency_us=-1", r"latency_us = -1\.0; allowed"),
        ("gbps=nan", r"gbps: expected a finite number"),
        ("gbps=400 tier=warp", r"tier = 'warp': unknown; allowed: "),
    ],
)
def test_graph_link_attributes_are_range_checked(tmp_path, attr, message) -> None:
    """Fails on the old code: a denormal speed or a 1e300 latency ended in a traceback, 1e308 Gbit/s ran."""
    lines = ["node g0 role=gpu host=0", "node g1 role=gpu host=1", f"g0 s {attr}", "g1 s gbps=400"]
    with pytest.raises(ScenarioError, match=message):
        load_scenario(_scenario(tmp_path, lines))


def _graphml(host_type: str, host: str, gbps_type: str = "string", gbps: str = "400") -> str:
    return f"""<?xml version='1.0' encoding='utf-8'?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
<key id="r" for="node" attr.name="role" attr.type="string"/>
<key id="h" for="node" attr.name="host" attr.type="{host_type}"/>
<key id="b" for="edge" attr.name="gbps" attr.type="{gbps_type}"/>
<graph edgedefault="undirected">
<node id="g0"><data key="r">gpu</data><data key="h">{host}</data></node>
<node id="g1"><data key="r">gpu</data><data key="h">1</data></node>
<node id="s"><data key="r">switch</data></node>
<edge source="g0" target="s"><data key="b">{gbps}</data></edge>
<edge source="g1" target="s"><data key="b">{gbps}</data></edge>
</graph></graphml>"""


def test_graphml_attributes_declared_as_strings(tmp_path) -> None:
    """Fails on the old code: a host declared as a string raised TypeError ('<' between str and int)."""
    f = tmp_path / "f.graphml"
    sc = tmp_path / "sc.yaml"
    sc.write_text(f"name: g\nfabric: {{topology: graph, file: f.graphml}}\n{JOB}")
    f.write_text(_graphml("string", "0"))
    assert load_scenario(sc).fabric.hosts == 2  # "0" is read as the number it spells
    for host, message in (("x", r"host: expected a number, got 'x'"), ("-1", r"host = -1; allowed")):
        f.write_text(_graphml("string", host))
        with pytest.raises(ScenarioError, match=message):
            load_scenario(sc)
    f.write_text(_graphml("string", "0", "boolean", "true"))
    with pytest.raises(ScenarioError, match=r"gbps: expected a number, got 'True'"):
        load_scenario(sc)


def test_graph_files_above_the_ceiling_are_refused_unread(tmp_path, monkeypatch) -> None:
    sc = _scenario(tmp_path, _two_gpus("s", "s"))
    monkeypatch.setitem(LIMITS, "file_bytes", 50)
    with pytest.raises(ScenarioError, match=r"larger than 50 bytes .*LIMITS\['file_bytes'\]"):
        load_scenario(sc)


def _reference_ecmp(G: nx.Graph) -> int:
    """The most equal-cost leaf-to-leaf paths, by enumeration with networkx (the independent reference):
    every shortest switch path, times the parallel links of each hop."""
    role = nx.get_node_attributes(G, "role")
    sw = nx.DiGraph()
    mult: dict[tuple, int] = {}
    for u, v in G.edges():
        if role[u] == role[v] == "switch":
            for a, b in ((u, v), (v, u)):
                sw.add_edge(a, b)
                mult[(a, b)] = mult.get((a, b), 0) + 1
    leaves = {
        n for u, v in G.edges() for n, m in ((u, v), (v, u)) if role[n] == "switch" and role[m] == "gpu"
    }
    best = 1
    for a, b in itertools.permutations(sorted(leaves), 2):
        if a in sw and b in sw and nx.has_path(sw, a, b):
            n = sum(
                math.prod(mult[(x, y)] for x, y in itertools.pairwise(p))
                for p in nx.all_shortest_paths(sw, a, b)
            )
            best = max(best, n)
    return best


@st.composite
def _fabrics(draw) -> nx.MultiGraph:
    """Random layered switch fabrics: leaves, one or two upper tiers, random parallel links."""
    G = nx.MultiGraph()
    tiers = [draw(st.integers(2, 5)), draw(st.integers(1, 4)), draw(st.integers(0, 3))]
    names = [[f"t{t}s{i}" for i in range(n)] for t, n in enumerate(tiers)]
    for layer in names:
        for n in layer:
            G.add_node(n, role="switch")
    for lower, upper in itertools.pairwise([x for x in names if x]):
        for u in lower:
            ups = draw(st.lists(st.sampled_from(upper), min_size=1, max_size=len(upper), unique=True))
            for v in ups:
                for _ in range(draw(st.integers(1, 3))):
                    G.add_edge(u, v, gbps=100)
    for i, leaf in enumerate(names[0]):
        G.add_node(f"g{i}", role="gpu", host=i)
        G.add_edge(f"g{i}", leaf, gbps=100)
    return G


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fabrics())
def test_the_path_count_equals_enumeration(G) -> None:
    """graph_size's dynamic programme equals networkx's enumeration, and the built fabric enumerates
    exactly that many paths for the worst leaf pair (when every GPU reaches every other)."""
    want = _reference_ecmp(G)
    assert graph_size(G)["ecmp_set"] == want
    try:
        f = fabric_from_graph(G, max_paths=256)
    except ValueError:  # disconnected leaves: refused by the builder, counted anyway
        return
    got = max(len(f._leaf_paths(a, b)) for a in range(f.n_leaves) for b in range(f.n_leaves) if a != b)
    assert got == want
    assert graph_size(G)["links"] == f.n_links


def test_graph_counts_of_a_built_fabric_round_trip() -> None:
    """An exported fat-tree read back: the counts equal the built-in fabric's (k=4: (k/2)^2 = 4 paths
    between edge switches of different pods)."""
    from ainet_gym.fabric.topology import build_fabric, fabric_to_graph

    sc = load_scenario(
        {
            "name": "ft",
            "fabric": {"topology": "fat_tree", "k": 4, "gpus_per_host": 1},
            "workload": {"jobs": [{"name": "a", "gpus": 2, "compute_ms": 1}]},
        }
    )
    f = build_fabric(sc.fabric)
    size = graph_size(fabric_to_graph(f))
    assert size["ecmp_set"] == 4 and size["gpus"] == 16 and size["links"] == f.n_links


@pytest.mark.parametrize("bad", [5, None, "spine-leaf-2to1", nx.MultiGraph()])
def test_fabric_to_graph_refuses_what_is_not_a_fabric_with_a_type_error(bad) -> None:
    """Errors of the Python API are ValueError, TypeError, RuntimeError or gymnasium errors (fails on the old
    code: ``fabric_to_graph(5)`` raised AttributeError)."""
    from ainet_gym import fabric_to_graph

    with pytest.raises(TypeError, match=r"fabric_to_graph expects a Fabric .*not "):
        fabric_to_graph(bad)
