"""The size of a graph fabric counted before it is built (:func:`graph_size`), and its refusal above the
scenario loader's limits (:func:`check_graph_size`, :data:`ainet_gym.scenario.loader.LIMITS`)."""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from ainet_gym.errors import choice_message
from ainet_gym.fabric.paths import neighbour_classes
from ainet_gym.fabric.record import ROLES

__all__ = ["check_graph_size", "graph_limits", "graph_roles", "graph_size"]


def graph_limits() -> dict[str, float]:
    from ainet_gym.scenario.loader import LIMITS

    return LIMITS


def graph_roles(G: Any) -> dict[Any, str]:
    """Every node's role, checked (one line naming the node otherwise)."""
    role: dict[Any, str] = {}
    for n, d in G.nodes(data=True):
        r = d.get("role")
        if r is None:
            raise ValueError(f"node {str(n)[:60]!r} has no role; allowed: {', '.join(ROLES)}")
        if not isinstance(r, str) or r not in ROLES:
            raise ValueError(choice_message(f"node {str(n)[:60]!r}: role", r, ROLES))
        role[n] = r
    return role


def graph_size(G: Any) -> dict[str, int]:
    """Count a graph fabric before building it: ``gpus``, ``hosts``, ``links`` (directed, the NVLink
    links made for hosts without an ``nvswitch`` included), ``leaves`` (switches that endpoints attach
    to) and ``ecmp_set``: the most equal-cost shortest paths between two leaves, parallel links
    multiplied out, counted by dynamic programming over the DAG of shortest paths from each leaf (paths
    are never enumerated), times the port pairs of the most multi-homed endpoints.

    Time O(leaves x switch links), memory O(nodes + links). The counts are exact for what
    :func:`~ainet_gym.fabric.build.build_fabric` would enumerate per leaf pair.

    Raises
    ------
    ValueError
        If a node has no known role (the count needs them).
    """
    import networkx as nx

    if not isinstance(G, nx.Graph):
        raise ValueError(f"a graph fabric must be a networkx graph, not {type(G).__name__}")
    role = graph_roles(G)
    gpus = [n for n, r in role.items() if r == "gpu"]
    hosts = {str(G.nodes[n].get("host")) for n in gpus}
    has_nvl = {u for u, v in G.edges() if {role[u], role[v]} == {"gpu", "nvswitch"}}
    has_nvl |= {v for u, v in G.edges() if {role[u], role[v]} == {"gpu", "nvswitch"}}
    per_edge = 1 if G.is_directed() else 2
    links = per_edge * G.number_of_edges() + 2 * sum(1 for g in gpus if g not in has_nvl)
    # switch adjacency with parallel-link multiplicity (directed, as the fabric's links)
    mult: dict[Any, dict[Any, int]] = {}
    attach: dict[Any, set] = {}  # endpoint or NIC -> switches it links to
    for u, v in G.edges():
        pairs = ((u, v),) if G.is_directed() else ((u, v), (v, u))
        for a, b in pairs:
            if role[a] == "switch" and role[b] == "switch":
                row = mult.setdefault(a, {})
                row[b] = row.get(b, 0) + 1
            elif role[b] == "switch" and role[a] in ("gpu", "storage", "nic"):
                attach.setdefault(a, set()).add(b)
            elif role[b] == "nic" and role[a] in ("gpu", "storage"):
                attach.setdefault(a, set()).add(("nic", b))
    ports = 1
    leaves: set = set()
    for n, targets in attach.items():
        if role[n] == "nic":
            continue
        sw = set()
        for t in targets:
            sw |= attach.get(t[1], set()) if isinstance(t, tuple) else {t}
        leaves |= sw
        ports = max(ports, len(sw))
    mult_in: dict[Any, list] = {}
    for u, row in mult.items():
        for v, m in row.items():
            mult_in.setdefault(v, []).extend([u] * m)
    mult_out = {u: [v for v, m in row.items() for _ in range(m)] for u, row in mult.items()}
    ecmp = 1
    for s in neighbour_classes(leaves, mult_out, mult_in).values():  # one DP per class of leaves
        count = {s: 1}
        frontier = [s]
        while frontier:
            nxt: dict[Any, int] = {}
            for u in frontier:
                cu = count[u]
                for v, m in mult.get(u, {}).items():
                    if v in count and v not in nxt:
                        continue  # reached at an earlier layer: not on a shortest path
                    nxt[v] = nxt.get(v, 0) + cu * m
            count.update(nxt)
            frontier = list(nxt)
        ecmp = max(ecmp, max((count[t] for t in leaves if t != s and t in count), default=1))
    return {
        "gpus": len(gpus),
        "hosts": len(hosts),
        "links": links,
        "leaves": len(leaves),
        "ecmp_set": ecmp * ports * ports,
    }


def check_graph_size(G: Any, what: str = "the graph") -> dict[str, int]:
    """:func:`graph_size` of ``G``, refused (``ValueError`` with the count and the key to change) above
    ``LIMITS["gpus"]``, ``LIMITS["count_max"]`` hosts, ``LIMITS["links"]`` or ``LIMITS["ecmp_set"]``
    (:data:`ainet_gym.scenario.loader.LIMITS`). Nodes and edges are counted first, so a graph far too
    large is refused in time linear in its size."""
    lim = graph_limits()
    n_edges = G.number_of_edges() * (1 if G.is_directed() else 2)
    stamp = (G.number_of_nodes(), n_edges, tuple(sorted(lim.items())))
    hit = _SIZE_CACHE.get(G)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    if n_edges > lim["links"]:
        raise ValueError(
            f"{what} has {n_edges:,} directed links; allowed: at most {int(lim['links']):,} "
            "(ainet_gym.scenario.loader.LIMITS['links']): fewer links in the graph"
        )
    size = graph_size(G)
    for key, noun, limit in (
        ("gpus", "GPUs", lim["gpus"]),
        ("hosts", "hosts", lim["count_max"]),
        ("links", "directed links", lim["links"]),
        ("ecmp_set", "equal-cost paths between two leaves", lim["ecmp_set"]),
    ):
        if size[key] > limit:
            lkey = "count_max" if key == "hosts" else key
            hint = (
                "fewer parallel links or fewer switches per tier"
                if key == "ecmp_set"
                else f"fewer {noun.split()[-1]} in the graph"
            )
            raise ValueError(
                f"{what} would have {size[key]:,} {noun} (counted before building); allowed: at most "
                f"{int(limit):,} (ainet_gym.scenario.loader.LIMITS[{lkey!r}]): {hint}"
            )
    with contextlib.suppress(TypeError):  # a graph that is not weak-referenceable is not cached
        _SIZE_CACHE[G] = (stamp, size)
    return size


#: graph -> ((nodes, links, limits), size) of graphs that passed :func:`check_graph_size` (a scenario
#: builds its graph fabric several times while it loads).
_SIZE_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
