"""A fabric from any networkx graph (:func:`fabric_from_graph`, ``fabric: {topology: graph, ...}`` in a
scenario): nodes with a ``role`` (``gpu``, ``switch``, ``storage``, and optionally ``nic`` and
``nvswitch``) and GPUs with a ``host``; edges with ``gbps`` and optional ``tier`` and ``latency_us``, each
checked, read into a :class:`~ainet_gym.fabric.builder.Builder` and flattened like a built-in topology."""

from __future__ import annotations

from typing import Any

import numpy as np

from ainet_gym.errors import choice_message
from ainet_gym.fabric.builder import Builder
from ainet_gym.fabric.flatten import flatten
from ainet_gym.fabric.graph_size import check_graph_size, graph_limits, graph_roles
from ainet_gym.fabric.record import TIER_INDEX, TIERS, Fabric
from ainet_gym.scenario.spec import FabricSpec, StorageSpec

__all__ = ["attribute_number", "build_graph_fabric", "builder_from_graph", "fabric_from_graph", "graph_spec"]

_DEFAULT_TIER = {
    frozenset(("gpu", "nvswitch")): "nvlink",
    frozenset(("gpu", "nic")): "pcie",
    frozenset(("gpu", "switch")): "nic",
    frozenset(("nic", "switch")): "nic",
    frozenset(("storage", "switch")): "storage",
    frozenset(("switch",)): "leaf_spine",
}


def attribute_number(
    x: Any, what: str, lo: float | None = None, hi: float | None = None, unit: str = ""
) -> float:
    """``x`` as a finite float in ``[lo, hi]`` (a GraphML attribute may be declared as a string: ``"400"``
    is read as 400); a boolean, a non-number or a value out of range is an error naming ``what``."""
    if isinstance(x, bool) or (isinstance(x, str) and len(x) > 100):
        raise ValueError(f"{what}: expected a number, got {str(x)[:40]!r}")
    try:
        v = float(x)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{what}: expected a number, got {str(x)[:40]!r}") from None
    if not np.isfinite(v):
        raise ValueError(f"{what}: expected a finite number, got {str(x)[:40]!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = (
            f"[{lo:g}, {hi:g}]"
            if lo is not None and hi is not None
            else (f">= {lo:g}" if lo is not None else f"<= {hi:g}")
        )
        raise ValueError(f"{what} = {str(x)[:40]}; allowed: a number in {rng}{unit}")
    return v


def _graph_hosts(G: Any, role: dict[Any, str]) -> tuple[list[Any], dict[Any, int], list[int]]:
    """The GPU nodes of ``G`` in host-major order, each GPU's host id and the sorted host ids, checked:
    every GPU has an integer host and every host the same number of GPUs."""
    host: dict[Any, int] = {}
    for n, d in G.nodes(data=True):
        if role[n] == "gpu":
            if "host" not in d:
                raise ValueError(f"GPU node {str(n)[:60]!r} has no host; allowed: an integer host id >= 0")
            hv = attribute_number(d["host"], f"GPU node {str(n)[:60]!r}: host", 0, 2**53)
            if not hv.is_integer():
                raise ValueError(
                    f"GPU node {str(n)[:60]!r}: host {str(d['host'])[:40]!r} is not an integer >= 0"
                )
            host[n] = int(hv)
    gpus = [n for n in G.nodes if role[n] == "gpu"]
    if not gpus:
        raise ValueError("the graph has no node with role gpu")
    gpus.sort(key=lambda n: host[n])  # host-major GPU ids; stable: the graph's order within a host
    sizes: dict[int, int] = {}
    for g in gpus:
        sizes[host[g]] = sizes.get(host[g], 0) + 1
    hosts = sorted(sizes)
    if len(set(sizes.values())) > 1:
        shown = dict(list(sorted(sizes.items()))[:8])
        raise ValueError(
            f"hosts have different numbers of GPUs ({shown}{' ...' if len(sizes) > 8 else ''}); every host needs the same"
        )
    return gpus, host, hosts


def _graph_link(u: Any, v: Any, d: dict, role: dict[Any, str], lim: dict) -> tuple[float, str, float | None]:
    """One edge's capacity (Gbit/s), tier and latency (s, ``None``: the tier's default), checked against
    ``lim`` (:func:`~ainet_gym.fabric.graph_size.graph_limits`)."""
    gmin, gmax, lat_max = lim["gbps_min"], lim["gbps_max"], lim["latency_us_max"]
    name = f"link {str(u)[:40]}-{str(v)[:40]}"
    if u == v:
        raise ValueError(f"{name} joins a node to itself")
    if "gbps" not in d:
        raise ValueError(
            f"{name} has no capacity: the gbps attribute is missing; allowed: a number > 0 (Gbit/s)"
        )
    gbps = attribute_number(d["gbps"], f"{name}: gbps")
    if gbps <= 0:
        raise ValueError(
            f"{name} has no capacity: gbps = {d['gbps']!r}; allowed: a number in [{gmin:g}, {gmax:g}] (Gbit/s)"
        )
    attribute_number(gbps, f"{name}: gbps", gmin, gmax, " Gbit/s (LIMITS['gbps_min'], LIMITS['gbps_max'])")
    pair = frozenset((role[u], role[v]))
    tier = d.get("tier", _DEFAULT_TIER.get(pair))
    if tier is None:
        raise ValueError(f"{name} joins a {role[u]} and a {role[v]}, which no link may join")
    if not isinstance(tier, str) or tier not in TIER_INDEX:
        raise ValueError(choice_message(f"{name}: tier", tier, TIERS))
    lat = None
    if "latency_us" in d:
        lat = attribute_number(
            d["latency_us"], f"{name}: latency_us", 0.0, lat_max, " us (LIMITS['latency_us_max'])"
        )
        lat *= 1e-6
    return gbps, tier, lat


def builder_from_graph(G: Any, spec: FabricSpec) -> Builder:
    """Read nodes and links of a networkx graph (see :func:`fabric_from_graph` for the attributes).
    Time linear in nodes and links."""
    import networkx as nx

    if not isinstance(G, nx.Graph):
        raise ValueError(f"a graph fabric must be a networkx graph, not {type(G).__name__}")
    lim = graph_limits()
    b = Builder(spec)
    role = graph_roles(G)
    gpus, host, hosts = _graph_hosts(G, role)
    host_index = {h: i for i, h in enumerate(hosts)}

    node_id: dict[Any, int] = {}
    kind_of = {"gpu": "gpu", "switch": "switch", "storage": "storage", "nic": "nic", "nvswitch": "nvswitch"}
    for n in G.nodes:
        node_id[n] = b.node(str(n), kind_of[role[n]])
    b.gpus = [node_id[g] for g in gpus]
    b.gpu_host = [host_index[host[g]] for g in gpus]
    b.storage = [node_id[n] for n in G.nodes if role[n] == "storage"]

    edges = list(G.edges(data=True))
    if edges and all("link" in d for _, _, d in edges):  # the link ids of fabric_to_graph: keep them
        edges.sort(key=lambda e: attribute_number(e[2]["link"], f"link {e[0]}-{e[1]}: link", 0, 2**53))
    for u, v, d in edges:
        gbps, tier, lat = _graph_link(u, v, d, role, lim)
        b.link(node_id[u], node_id[v], gbps, tier, lat)
        if not G.is_directed():
            b.link(node_id[v], node_id[u], gbps, tier, lat)

    # a host without an NVLink switch in the graph gets one (nvlink_gbps per GPU)
    has_nvl = {b.src[i] for i, t in enumerate(b.tier) if t == TIER_INDEX["nvlink"]}
    members: dict[int, list[int]] = {}
    for g, hh in zip(b.gpus, b.gpu_host):
        members.setdefault(hh, []).append(g)
    for h in range(len(hosts)):
        if any(g in has_nvl for g in members[h]):
            continue
        nvs = b.node(f"nvswitch{h}", "nvswitch")
        for g in members[h]:
            b.duplex(g, nvs, spec.nvlink_gbps, "nvlink")
    return b


def build_graph_fabric(spec: FabricSpec, max_paths: int = 8) -> Fabric:
    """The fabric of a ``graph`` spec (:func:`graph_spec`): its graph refused above the limits
    (:func:`~ainet_gym.fabric.graph_size.check_graph_size`), read and flattened."""
    if spec.graph is None:
        raise ValueError("fabric.topology graph needs a graph (fabric.file, or a networkx graph)")
    check_graph_size(spec.graph)
    return flatten(builder_from_graph(spec.graph, spec), max_paths)


def fabric_from_graph(G: Any, max_paths: int = 8, **fabric_keys: Any) -> Fabric:
    """Build a fabric from a networkx graph.

    Nodes: ``role`` in :data:`~ainet_gym.fabric.record.ROLES`; GPU nodes a ``host`` (integer id). GPU ids
    are host-major (hosts in ascending id, GPUs of a host in the graph's order); every host needs the same
    number of GPUs. A GPU (or a storage host) attaches to switches directly, or a GPU through one ``nic``
    node shared with the other GPUs of that NIC; an endpoint or NIC linked to several switches is
    multi-homed (one port per link, e.g. one per plane of a dual-plane fabric), and its paths are the
    shortest over all port pairs. GPUs of one host share an NVLink domain: ``nvswitch`` nodes with
    ``nvlink`` links if the graph has them, else one made per host with ``nvlink_gbps``.

    Edges: ``gbps`` (Gbit/s per direction, > 0), optional ``tier`` (one of
    :data:`~ainet_gym.fabric.record.TIERS`; default from the roles it joins: gpu-switch and nic-switch
    ``nic``, gpu-nic ``pcie``, storage-switch ``storage``, switch-switch ``leaf_spine``), ``latency_us``
    (default ``hop_latency_us``) and ``link`` (an integer: links are numbered in this order when every
    edge has one, else in the graph's edge order). An undirected graph's edge is a link in each direction;
    in a directed graph each edge is one direction and needs its reverse.

    ``fabric_keys`` are the scenario's fabric keys that apply to a graph (``profile``, ``hop_latency_us``,
    ``link_efficiency``, ``nvlink_gbps``).

    Raises
    ------
    ValueError
        A node without a role, a GPU without a host, a link without capacity, a GPU behind a NIC with
        other network links, or a GPU with no path to another.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.Graph()
    >>> G.add_node("sw", role="switch")
    >>> for g in range(4):
    ...     G.add_node(f"g{g}", role="gpu", host=g // 2)
    ...     G.add_edge(f"g{g}", "sw", gbps=400)
    >>> fabric_from_graph(G).n_gpus
    4
    """
    from ainet_gym.scenario.spec import PROFILE_DEFAULTS

    kw = dict(fabric_keys)
    for key, value in PROFILE_DEFAULTS[kw.get("profile", "infiniband")].items():
        kw.setdefault(key, value)
    spec = graph_spec(G, **kw)
    return build_graph_fabric(spec, max_paths=max_paths)


def graph_spec(G: Any, **fabric_keys: Any) -> FabricSpec:
    """The :class:`FabricSpec` of a graph fabric: ``hosts`` and ``gpus_per_host`` counted from ``G``."""
    import networkx as nx

    if not isinstance(G, nx.Graph):
        raise ValueError(f"a graph fabric must be a networkx graph, not {type(G).__name__}")
    fabric_keys = {k: v for k, v in fabric_keys.items() if k != "topology"}
    hosts = {d.get("host") for _, d in G.nodes(data=True) if d.get("role") == "gpu"}
    n_gpus = sum(1 for _, d in G.nodes(data=True) if d.get("role") == "gpu")
    n_hosts = max(len(hosts), 1)
    n_storage = sum(1 for _, d in G.nodes(data=True) if d.get("role") == "storage")
    return FabricSpec(
        topology="graph",
        graph=G,
        hosts=n_hosts,
        gpus_per_host=max(n_gpus // n_hosts, 1),
        storage=StorageSpec(hosts=n_storage),
        **fabric_keys,
    )
