"""Fabric topologies: built and checked with networkx, then flattened into a dense link table.

Every link is directed, with a capacity per direction and a tier label. Endpoints are GPUs (ids
``0..gpus-1``, host-major: leaf by leaf, host by host, local rank last) followed by storage hosts
(ids ``gpus..gpus+storage-1``). Each GPU has a NIC link to its leaf (edge / rail leaf) and a pair of
NVLink links to its host's NVLink switch, so an intra-host transfer crosses two NVLink links.
With ``gpus_per_nic: k > 1`` the k GPUs of a NIC reach it over PCIe links (tier ``pcie``) and the NIC
has the link to the leaf (tier ``nic``), shared by the k GPUs.

Besides the four built-in topologies, a fabric can be any graph (:func:`fabric_from_graph`, or
``fabric: {topology: graph, file: ...}`` in a scenario): nodes with a ``role`` (``gpu``, ``switch``,
``storage``, and optionally ``nic`` and ``nvswitch``) and GPUs with a ``host``; edges with ``gbps`` and
optional ``tier`` and ``latency_us``. :func:`fabric_to_graph` gives the way back. Every fabric, built-in
or not, is flattened by the same code (:func:`_finish`), so paths, hop counts and the non-blocking
reference of ideal step times (:func:`nonblocking_fabric`) come from the links, not from the topology name.

networkx is touched at construction only: the hot path reads the numpy arrays of :class:`Fabric`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import weakref
import zlib
from collections import deque
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ainet_gym.errors import choice_message
from ainet_gym.scenario.spec import TOPOLOGIES, FabricSpec, StorageSpec, fabric_host_count
from ainet_gym.units import GBPS_TO_BYTES_PER_S

if TYPE_CHECKING:  # networkx is imported where a graph is read or written, not on the env's import path
    import networkx as nx

__all__ = [
    "ROLES",
    "TIERS",
    "Fabric",
    "build_fabric",
    "check_graph_size",
    "fabric_from_graph",
    "fabric_to_graph",
    "graph_size",
    "nonblocking_fabric",
    "nonblocking_spec",
    "read_fabric_graph",
    "write_fabric_graph",
]

#: Tier labels of links, indexed by ``Fabric.link_tier`` (new tiers are appended, so indices stay).
TIERS: tuple[str, ...] = (
    "nvlink", "nic", "leaf_spine", "edge_agg", "agg_core", "rail_spine", "storage", "pcie",
)  # fmt: skip
_TIER = {name: i for i, name in enumerate(TIERS)}
#: Node roles of a graph fabric. ``nic`` (a NIC shared by GPUs over PCIe) and ``nvswitch`` (a host's NVLink
#: switch, made with ``nvlink_gbps`` when the graph has none) are optional.
ROLES: tuple[str, ...] = ("gpu", "switch", "storage", "nic", "nvswitch")
#: Node kinds that are not switches of the network (never transit nodes between hosts).
_HOST_KINDS = ("gpu", "storage", "nvswitch", "nic")
#: Switch-to-switch hops between the furthest leaves of each built-in topology.
_LEAF_DIAMETER = {"single_switch": 0, "spine_leaf": 2, "rail_optimized": 2, "fat_tree": 4}


@dataclass
class Fabric:
    """A built fabric: the graph (construction time) and the link table (hot path).

    Attributes are arrays with the named axes in their comments.
    """

    spec: FabricSpec
    node_names: list[str]  # (nodes,)
    node_kind: list[str]  # (nodes,)
    link_src: np.ndarray  # (links,) int node id
    link_dst: np.ndarray  # (links,) int node id
    link_gbps: np.ndarray  # (links,) float nominal speed per direction
    capacity_bytes_per_s: np.ndarray  # (links,) float bytes/s (nominal * efficiency for network links)
    link_tier: np.ndarray  # (links,) int index into TIERS
    link_group: np.ndarray  # (links,) int ECMP next-hop group (-1: not an equal-cost choice)
    gpu_node: np.ndarray  # (gpus,) node id
    gpu_host: np.ndarray  # (gpus,) host id
    gpu_local_rank: np.ndarray  # (gpus,) rank within the host
    endpoint_leaf: np.ndarray  # (endpoints,) leaf index the NIC attaches to
    endpoint_up: np.ndarray  # (endpoints,) link id endpoint -> leaf
    endpoint_down: np.ndarray  # (endpoints,) link id leaf -> endpoint
    gpu_nvl_up: np.ndarray  # (gpus,) link id gpu -> nvswitch
    gpu_nvl_down: np.ndarray  # (gpus,) link id nvswitch -> gpu
    leaf_node: np.ndarray  # (leaves,) node id
    n_gpus: int
    n_storage: int
    hop_latency_s: float
    max_paths: int = 8
    max_hops: int = 4  # links on the longest candidate path (pads the path tables)
    link_latency_s: np.ndarray | None = None  # (links,) s; None: every link hop_latency_s
    endpoint_pcie_up: np.ndarray | None = None  # (endpoints,) link id GPU -> shared NIC, -1: none
    endpoint_pcie_down: np.ndarray | None = None  # (endpoints,) link id shared NIC -> GPU, -1: none
    # multi-homed endpoints (a NIC with a port on each plane): per endpoint its ports (up link, down link,
    # leaf index), the first being endpoint_up/down/leaf; None when every endpoint has one port
    endpoint_ports: list[tuple[tuple[int, int, int], ...]] | None = None
    _switch_paths: dict[tuple[int, int], list[list[int]]] = field(default_factory=dict, repr=False)
    _parallel: dict[tuple[int, int], list[int]] = field(default_factory=dict, repr=False)
    _switch_adj: dict[int, list[int]] | None = field(default=None, repr=False)  # switch -> next switches
    _capped_paths: dict[tuple[int, int], list[list[int]]] = field(default_factory=dict, repr=False)
    _graph: Any = field(default=None, repr=False, compare=False)

    @property
    def graph(self) -> nx.MultiDiGraph:
        """The fabric as a networkx multigraph (node ids, ``name`` and ``kind``; one edge per link with its
        ``gbps`` and ``tier``), built on first use so that importing and stepping never load networkx."""
        if self._graph is None:
            import networkx as nx

            g = nx.MultiDiGraph()
            for i, (n, k) in enumerate(zip(self.node_names, self.node_kind)):
                g.add_node(i, name=n, kind=k)
            for i in range(self.n_links):
                g.add_edge(int(self.link_src[i]), int(self.link_dst[i]), key=i,
                           gbps=self.link_gbps[i], tier=TIERS[int(self.link_tier[i])])  # fmt: skip
            self._graph = g
        return self._graph

    @property
    def n_links(self) -> int:
        return int(self.link_src.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_node.shape[0])

    @cached_property
    def network_links(self) -> np.ndarray:
        """Mask (links,) of links that are not NVLink (the fabric an agent routes over)."""
        return self.link_tier != _TIER["nvlink"]

    @cached_property
    def link_names(self) -> list[str]:
        return [f"{self.node_names[s]}->{self.node_names[d]}" for s, d in zip(self.link_src, self.link_dst)]

    def link_ids(self, name: str) -> np.ndarray:
        """Link ids named ``"leaf0-spine1"``: both directions of the first parallel link between them."""
        try:
            a, b = name.split("-")
            u, v = self.node_names.index(a), self.node_names.index(b)
        except ValueError:
            raise KeyError(f"link {name!r}: no such pair of nodes in this fabric") from None
        fwd = self._parallel.get((u, v))
        rev = self._parallel.get((v, u))
        if not fwd or not rev:
            raise KeyError(f"link {name!r}: {a} and {b} are not adjacent")
        return np.array([fwd[0], rev[0]], dtype=np.int64)

    # ------------------------------------------------------------------ paths
    def _leaf_paths(self, a: int, b: int) -> list[list[int]]:
        """Equal-cost shortest link-id paths from leaf index a to leaf index b (all of them)."""
        key = (a, b)
        if key in self._switch_paths:
            return self._switch_paths[key]
        if self._switch_adj is None:
            adj: dict[int, list[int]] = {}
            for (u, v), _ids in self._parallel.items():
                if self.node_kind[u] not in _HOST_KINDS and self.node_kind[v] not in _HOST_KINDS:
                    adj.setdefault(u, []).append(v)
                    adj.setdefault(v, [])
            self._switch_adj = adj
        src, dst = int(self.leaf_node[a]), int(self.leaf_node[b])
        out: list[list[int]] = []
        for nodes in _all_shortest_paths(self._switch_adj, src, dst):  # none: another plane
            hops = [self._parallel[(u, v)] for u, v in itertools.pairwise(nodes)]
            # expand parallel links: every combination is an equal-cost path
            combos: list[list[int]] = [[]]
            for choices in hops:
                combos = [[*c, link] for c in combos for link in choices]
            out.extend(combos)
        out.sort()
        self._switch_paths[key] = out
        return out

    def paths(self, src: int, dst: int) -> list[list[int]]:
        """Candidate paths (lists of link ids) from endpoint ``src`` to endpoint ``dst``.

        The ECMP set: all equal-cost shortest paths, capped at ``max_paths``. When the set is larger
        than the cap, an evenly spaced subset is taken from a rotation that depends on the leaf pair,
        so that capped sets of different pairs still cover every spine or core; where parallel links make
        that subset reuse some links and leave others out (4 spines x 2 links, cap 8: every path on the
        same one of each spine's two downlinks), a greedy subset over the least-used links replaces it
        (:func:`_capped`). A multi-homed endpoint
        (:attr:`endpoint_ports`) contributes every port: the set is the shortest paths over all pairs of
        source and destination ports (the rotation then depends on the endpoint pair).
        """
        if src == dst:
            raise ValueError(f"transfer from endpoint {src} to itself")
        if src < self.n_gpus and dst < self.n_gpus and self.gpu_host[src] == self.gpu_host[dst]:
            return [[int(self.gpu_nvl_up[src]), int(self.gpu_nvl_down[dst])]]
        head = [int(self.endpoint_pcie_up[src])] if self._pcie(self.endpoint_pcie_up, src) else []
        tail = [int(self.endpoint_pcie_down[dst])] if self._pcie(self.endpoint_pcie_down, dst) else []
        if self.endpoint_ports is None:
            a, b = int(self.endpoint_leaf[src]), int(self.endpoint_leaf[dst])
            first, last = [*head, int(self.endpoint_up[src])], [int(self.endpoint_down[dst]), *tail]
            if a == b:
                return [first + last]
            mids = self._capped_paths.get((a, b))
            if mids is None:
                mids = _capped(self._leaf_paths(a, b), self.max_paths, f"{a}-{b}")
                self._capped_paths[(a, b)] = mids
            return [first + m + last for m in mids]
        # multi-homed: every pair of ports (source up, destination down) whose switch path is shortest
        combos: list[list[int]] = []
        best = None
        for up, _, a in self.endpoint_ports[src]:
            for _, down, b in self.endpoint_ports[dst]:
                mids = [[]] if a == b else self._leaf_paths(a, b)
                if not mids:
                    continue
                if best is None or len(mids[0]) < best:
                    best, combos = len(mids[0]), []
                if len(mids[0]) == best:
                    combos.extend([*head, up, *m, down, *tail] for m in mids)
        combos.sort()
        return _capped(combos, self.max_paths, f"{src}-{dst}")

    @staticmethod
    def _pcie(arr: np.ndarray | None, e: int) -> bool:
        return arr is not None and arr[e] >= 0

    @cached_property
    def gpu_uplinks(self) -> np.ndarray:
        """Link ids (sorted, unique) from the GPUs' NICs into the network: every port of every GPU NIC."""
        if self.endpoint_ports is None:
            return np.unique(self.endpoint_up[: self.n_gpus])
        return np.unique([up for ports in self.endpoint_ports[: self.n_gpus] for up, _, _ in ports])

    def path_latency_s(self, path: list[int]) -> float:
        """Latency of a path (list of link ids): links x ``hop_latency_s``, or the sum of per-link latencies
        of a graph fabric that gives them; with ``fabric.store_and_forward_bytes`` = B > 0, plus B / the
        link's line rate (``link_gbps``, before ``link_efficiency``) for every link of the path, the time a
        store-and-forward switch takes to receive a whole packet before it forwards it."""
        if self.link_latency_s is None:
            lat = len(path) * self.hop_latency_s
        else:
            lat = float(self.link_latency_s[path].sum())
        sf = self.spec.store_and_forward_bytes
        if sf > 0:
            lat += float(np.sum(sf / (self.link_gbps[path] * GBPS_TO_BYTES_PER_S)))
        return lat

    @property
    def n_hosts(self) -> int:
        return int(self.gpu_host.max()) + 1 if self.n_gpus else 0

    def oversubscription(self) -> float:
        """Leaf down-capacity over up-capacity (1.0 = non-blocking), from the link table."""
        nic = self.link_gbps[(self.link_tier == _TIER["nic"]) & (self.link_dst == self.leaf_node[0])].sum()
        up_mask = (self.link_src == self.leaf_node[0]) & (self.link_group >= 0)
        up = self.link_gbps[up_mask].sum()
        return float(nic / up) if up > 0 else float("inf")


def nonblocking_spec(spec: FabricSpec) -> FabricSpec:
    """The same hosts on one non-blocking switch (a built-in spec; see :func:`nonblocking_fabric`)."""
    if spec.topology == "graph":
        raise ValueError("a graph fabric has no single_switch spec: use nonblocking_fabric(fabric)")
    nic = spec.link_gbps if spec.topology == "fat_tree" else spec.nic_gbps
    storage = replace(spec.storage, leaves=())
    return replace(
        spec, topology="single_switch", hosts=fabric_host_count(spec), nic_gbps=nic, storage=storage
    )


class _Builder:
    """Nodes and directed links of a fabric under construction (the input of :func:`_finish`)."""

    def __init__(self, spec: FabricSpec) -> None:
        self.spec = spec
        self.names: list[str] = []
        self.kinds: list[str] = []
        self.src: list[int] = []
        self.dst: list[int] = []
        self.gbps: list[float] = []
        self.tier: list[int] = []
        self.latency_s: list[float] = []
        self.parallel: dict[tuple[int, int], list[int]] = {}
        self.gpus: list[int] = []  # node id of each GPU, GPU id order (host-major)
        self.gpu_host: list[int] = []
        self.storage: list[int] = []  # node id of each storage host
        self.leaves: list[int] | None = None  # leaf switches in leaf-id order (None: derived)

    def node(self, name: str, kind: str) -> int:
        i = len(self.names)
        self.names.append(name)
        self.kinds.append(kind)
        return i

    def link(self, u: int, v: int, gbps: float, tier: str, latency_s: float | None = None) -> int:
        i = len(self.src)
        self.src.append(u)
        self.dst.append(v)
        self.gbps.append(float(gbps))
        self.tier.append(_TIER[tier])
        self.latency_s.append(self.spec.hop_latency_us * 1e-6 if latency_s is None else float(latency_s))
        self.parallel.setdefault((u, v), []).append(i)
        return i

    def duplex(self, u: int, v: int, gbps: float, tier: str) -> tuple[int, int]:
        return self.link(u, v, gbps, tier), self.link(v, u, gbps, tier)

    def host(self, h: int, gpus: int, attach: list[int], nic_gbps: float) -> None:
        """Host ``h``: an NVLink switch, ``gpus`` GPUs, and one NIC per ``gpus_per_nic`` GPUs, NIC i on
        leaf node ``attach[i]`` (with ``gpus_per_nic: 1`` the GPU is its NIC: one link to the leaf)."""
        spec = self.spec
        k = spec.gpus_per_nic
        nvs = self.node(f"nvswitch{h}", "nvswitch")
        nic = -1
        for r in range(gpus):
            g = len(self.gpus)
            gn = self.node(f"gpu{g}", "gpu")
            self.gpus.append(gn)
            self.gpu_host.append(h)
            self.duplex(gn, nvs, spec.nvlink_gbps, "nvlink")
            if k == 1:
                self.duplex(gn, attach[r], nic_gbps, "nic")
                continue
            if r % k == 0:
                nic = self.node(f"nic{h}.{r // k}", "nic")
                self.duplex(nic, attach[r // k], nic_gbps, "nic")
            self.duplex(gn, nic, spec.pcie_gbps, "pcie")


def _build_builtin(spec: FabricSpec) -> _Builder:
    b = _Builder(spec)
    gph, k = spec.gpus_per_host, spec.gpus_per_nic
    if gph % k:
        raise ValueError(f"gpus_per_nic={k} does not divide gpus_per_host={gph}")
    nics = gph // k  # NICs per host
    nic_gbps = spec.link_gbps if spec.topology == "fat_tree" else spec.nic_gbps
    attach: list[list[int]]  # per host: leaf node of each NIC
    if spec.topology == "single_switch":
        leaves = [b.node("leaf0", "leaf")]
        attach = [[leaves[0]] * nics for _ in range(spec.hosts)]
    elif spec.topology == "spine_leaf":
        leaves = [b.node(f"leaf{i}", "leaf") for i in range(spec.leaves)]
        spines = [b.node(f"spine{j}", "spine") for j in range(spec.spines)]
        for lf in leaves:
            for sp in spines:
                for _ in range(spec.links_per_spine):
                    b.duplex(lf, sp, spec.uplink_gbps, "leaf_spine")
        attach = [[lf] * nics for lf in leaves for _ in range(spec.hosts_per_leaf)]
    elif spec.topology == "fat_tree":
        kk = spec.k
        half = kk // 2
        leaves = [b.node(f"edge{p * half + e}", "edge") for p in range(kk) for e in range(half)]
        aggs = [b.node(f"agg{p * half + a}", "agg") for p in range(kk) for a in range(half)]
        cores = [b.node(f"core{c}", "core") for c in range(half * half)]
        for p in range(kk):
            for e in range(half):
                for a in range(half):
                    b.duplex(leaves[p * half + e], aggs[p * half + a], spec.link_gbps, "edge_agg")
            for a in range(half):
                for c in range(half):
                    b.duplex(aggs[p * half + a], cores[a * half + c], spec.link_gbps, "agg_core")
        n_ports = kk**3 // 4  # one NIC per edge-switch down port
        if n_ports % nics:
            raise ValueError(f"fat_tree k={kk}: {n_ports} edge ports not a multiple of {nics} NICs per host")
        attach = [
            [leaves[port // half] for port in range(h * nics, (h + 1) * nics)] for h in range(n_ports // nics)
        ]
    elif spec.topology == "rail_optimized":
        leaves = [b.node(f"leaf{r}", "leaf") for r in range(nics)]  # one rail per NIC of a host
        spines = [b.node(f"spine{j}", "spine") for j in range(spec.spines)]
        for lf in leaves:
            for sp in spines:
                for _ in range(spec.links_per_spine):
                    b.duplex(lf, sp, spec.uplink_gbps, "rail_spine")
        attach = [list(leaves) for _ in range(spec.hosts)]
    else:
        raise ValueError(choice_message("fabric.topology", spec.topology, TOPOLOGIES))
    if not attach or gph <= 0:
        raise ValueError("fabric has no GPUs")
    for h, nic_leaf in enumerate(attach):
        b.host(h, gph, nic_leaf, nic_gbps)
    st = spec.storage
    for s in range(st.hosts):
        leaf_idx = st.leaves[s % len(st.leaves)] if st.leaves else len(leaves) - 1
        node = b.node(f"storage{s}", "storage")
        b.storage.append(node)
        b.duplex(node, leaves[leaf_idx], st.gbps, "storage")
    b.leaves = leaves
    return b


def build_fabric(spec: FabricSpec, max_paths: int = 8) -> Fabric:
    """Build the fabric of ``spec``: graph, link table, endpoint attachments.

    Raises
    ------
    ValueError
        If the spec describes a fabric that cannot be built (e.g. zero GPUs, a graph with a GPU
        that reaches no other).
    """
    if spec.topology == "graph":
        if spec.graph is None:
            raise ValueError("fabric.topology graph needs a graph (fabric.file, or a networkx graph)")
        check_graph_size(spec.graph)
        return _finish(_builder_from_graph(spec.graph, spec), max_paths)
    b = _build_builtin(spec)
    diameter = _LEAF_DIAMETER[spec.topology]
    fabric = _finish(b, max_paths, leaf_diameter=diameter)
    _check(fabric)
    return fabric


def _fail(msg: str) -> None:
    raise ValueError(msg)


def _hops(adj: dict[int, list[int]], sources: list[int]) -> dict[int, int]:
    """Hop count from the nearest of ``sources`` (0) to every node that ``adj`` reaches from them (BFS)."""
    hops = dict.fromkeys(sources, 0)
    queue = deque(sources)
    while queue:
        u = queue.popleft()
        for v in adj.get(u, []):
            if v not in hops:
                hops[v] = hops[u] + 1
                queue.append(v)
    return hops


def _neighbour_classes(nodes: Any, out_adj: dict, in_adj: dict) -> dict[Any, Any]:
    """Signature -> first node of each class of ``nodes`` with the same out- and in-neighbours (as
    multisets: parallel links counted). Two nodes of a class have the same distance to, and the same
    number of shortest paths to, every node other than the two."""
    from collections import Counter

    classes: dict[Any, Any] = {}
    for n in nodes:
        sig = (frozenset(Counter(out_adj.get(n, ())).items()), frozenset(Counter(in_adj.get(n, ())).items()))
        classes.setdefault(sig, n)
    return classes


def _reverse_link(b: _Builder, link: int) -> int:
    """The link in the other direction of ``link`` (the k-th parallel link pairs with the k-th)."""
    back = b.parallel.get((b.dst[link], b.src[link]))
    if not back:
        _fail(f"link {b.names[b.src[link]]}->{b.names[b.dst[link]]} has no link in the other direction")
    k = b.parallel[(b.src[link], b.dst[link])].index(link)
    return back[min(k, len(back) - 1)]


def _endpoint_uplinks(
    b: _Builder, endpoints: list[int], n_gpus: int, is_switch: np.ndarray
) -> tuple[list[list[int]], np.ndarray]:
    """Per endpoint (GPUs, then storage hosts): its up links into switches (its NIC's ports, sorted), and
    its PCIe link to a NIC (-1 where the endpoint attaches to a switch directly)."""
    names, kinds = b.names, b.kinds
    out_links: dict[int, list[int]] = {}
    for i, (u, t) in enumerate(zip(b.src, b.tier)):
        if t != _TIER["nvlink"]:
            out_links.setdefault(u, []).append(i)
    ep_pcie = np.full(len(endpoints), -1, dtype=np.int64)
    ep_uplinks: list[list[int]] = []
    for e, node in enumerate(endpoints):
        ups = out_links.get(node, [])
        what = "GPU" if e < n_gpus else "storage host"
        if not ups:
            _fail(f"{what} {names[node]} has no network link; it needs one to a switch or to a NIC")
        to_nic = [i for i in ups if kinds[b.dst[i]] == "nic"]
        if to_nic:
            if len(ups) != 1 or e >= n_gpus:
                _fail(
                    f"{what} {names[node]} has links to {', '.join(names[b.dst[i]] for i in ups)}; a GPU behind "
                    "a NIC has exactly one link into the network, the PCIe link to that NIC"
                )
            nic = b.dst[ups[0]]
            ep_pcie[e] = ups[0]
            ups = [i for i in out_links.get(nic, []) if is_switch[b.dst[i]]]
            if not ups:
                _fail(f"NIC {names[nic]} has no link to a switch")
        for i in ups:
            if not is_switch[b.dst[i]]:
                _fail(f"{what} {names[node]} attaches to {names[b.dst[i]]}, which is not a switch")
        ep_uplinks.append(sorted(ups))
    return ep_uplinks, ep_pcie


def _graph_leaf_diameter(
    b: _Builder,
    sw_adj: dict[int, list[int]],
    leaves: list[int],
    endpoints: list[int],
    ep_uplinks: list[list[int]],
) -> int:
    """Switch hops between the furthest leaves of a graph fabric; a pair of endpoints with no path between
    them is an error naming both."""
    names = b.names
    in_adj: dict[int, list[int]] = {}
    for u, vs in sw_adj.items():
        for v in vs:
            in_adj.setdefault(v, []).append(u)
    # leaves with the same switch neighbours (both directions, parallel links counted) are at the same
    # distance from every other node: one BFS per class, not per leaf (a Clos has one class)
    reps = list(_neighbour_classes(leaves, sw_adj, in_adj).values())
    leaf_diameter = 0
    dist: dict[int, dict[int, int]] = {}
    for a in reps:
        da = dist[a] = _hops(sw_adj, [a])
        leaf_diameter = max(leaf_diameter, max(da.get(x, 0) for x in leaves))
    fwd, back = _hops(sw_adj, [leaves[0]]), _hops(in_adj, [leaves[0]])
    if not all(x in fwd and x in back for x in leaves):  # not one strongly connected set: find the pair
        for a in leaves:
            if a not in dist:
                dist[a] = _hops(sw_adj, [a])
        groups: dict[tuple[int, ...], int] = {}  # attachment switches -> first endpoint with them
        for e, ups in enumerate(ep_uplinks):
            groups.setdefault(tuple(b.dst[i] for i in ups), e)
        for ga, ea in groups.items():
            for gb, eb in groups.items():
                if not any(y in dist[x] for x in ga for y in gb):
                    _fail(
                        f"{names[endpoints[ea]]} has no path to {names[endpoints[eb]]}: switch "
                        f"{names[ga[0]]} does not reach switch {names[gb[0]]}"
                    )
    return leaf_diameter


def _ecmp_groups(
    level: np.ndarray, link_src: np.ndarray, link_dst: np.ndarray, is_switch: np.ndarray
) -> np.ndarray:
    """ECMP next-hop group of every link (dense ids; -1 for no choice): the up-links of a switch form one
    group, parallel down-links to one neighbour another; singleton groups are not a choice."""
    up = level[link_dst] > level[link_src]
    keys = np.where(up, -1, link_dst)  # up: group by source only
    group_key = np.stack([link_src, keys], axis=1)
    _, group = np.unique(group_key, axis=0, return_inverse=True)
    group = group.reshape(-1)
    sizes = np.bincount(group)
    link_group = np.where(is_switch[link_src] & (sizes[group] > 1), group, -1)
    valid = link_group >= 0
    if valid.any():
        _, dense = np.unique(link_group[valid], return_inverse=True)
        link_group[valid] = dense
    return link_group


def _nvlink_links(b: _Builder) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU: its NVLink link up to its host's NVLink switch, and the link back down."""
    n_gpus = len(b.gpus)
    nvl_up = np.empty(n_gpus, dtype=np.int64)
    nvl_down = np.empty(n_gpus, dtype=np.int64)
    nvl_out: dict[int, int] = {}
    for i, (u, t) in enumerate(zip(b.src, b.tier)):
        if t == _TIER["nvlink"] and b.kinds[u] == "gpu":
            nvl_out.setdefault(u, i)
    for g, node in enumerate(b.gpus):
        if node not in nvl_out:
            _fail(f"GPU {b.names[node]} has no NVLink link to its host's NVLink switch")
        nvl_up[g] = nvl_out[node]
        nvl_down[g] = _reverse_link(b, nvl_out[node])
    return nvl_up, nvl_down


def _switch_levels(
    b: _Builder, is_switch: np.ndarray, leaves: list[int]
) -> tuple[dict[int, list[int]], np.ndarray]:
    """The switch-to-switch adjacency and each node's level: leaves (and NVSwitches) 1, then hops away
    from the nearest leaf (up-links go to a higher level); hosts 0."""
    sw_adj: dict[int, list[int]] = {}
    for u, v in zip(b.src, b.dst):
        if is_switch[u] and is_switch[v]:
            sw_adj.setdefault(u, []).append(v)
    level = np.zeros(len(b.names), dtype=np.int64)
    for n, hops in _hops(sw_adj, leaves).items():
        level[n] = hops + 1
    level[np.asarray([k == "nvswitch" for k in b.kinds], dtype=bool)] = 1
    return sw_adj, level


def _local_ranks(gpu_host: np.ndarray) -> np.ndarray:
    """(GPUs,) each GPU's rank within its host, in GPU order (``[7, 7, 3, 7] -> [0, 1, 0, 2]``)."""
    order = np.argsort(gpu_host, kind="stable")
    first_of_host = np.searchsorted(gpu_host[order], gpu_host[order])
    local = np.empty(gpu_host.size, dtype=np.int64)
    local[order] = np.arange(gpu_host.size) - first_of_host
    return local


class _Endpoints(NamedTuple):
    """How the endpoints (GPUs, then storage hosts) attach to the fabric (:func:`_endpoint_attachments`)."""

    uplinks: list[list[int]]  # per endpoint, its up links into switches (its NIC's ports, sorted)
    pcie: np.ndarray  # (endpoints,) int64 its PCIe link to a NIC, -1: attached to a switch directly
    pcie_down: np.ndarray  # (endpoints,) int64 the reverse of ``pcie`` (-1: none)
    up: np.ndarray  # (endpoints,) int64 its first up link
    down: np.ndarray  # (endpoints,) int64 the reverse of ``up``
    leaves: list[int]  # the leaf switches (the builder's, else the switches endpoints attach to)
    leaf: np.ndarray  # (endpoints,) int64 index in ``leaves`` of the switch its first up link reaches
    ports: list[tuple[tuple[int, int, int], ...]] | None  # (up, down, leaf) per port; None: one port each


def _endpoint_attachments(
    b: _Builder, endpoints: list[int], n_gpus: int, is_switch: np.ndarray
) -> _Endpoints:
    """The :class:`_Endpoints` of the builder ``b``: up and down links, PCIe links, leaves and ports."""
    ep_uplinks, ep_pcie = _endpoint_uplinks(b, endpoints, n_gpus, is_switch)
    ep_up = np.asarray([u[0] for u in ep_uplinks], dtype=np.int64)
    ep_switch = np.asarray([b.dst[u] for u in ep_up], dtype=np.int64)
    ep_down = np.asarray([_reverse_link(b, int(x)) for x in ep_up], dtype=np.int64)
    ep_pcie_down = np.asarray([_reverse_link(b, int(x)) if x >= 0 else -1 for x in ep_pcie], dtype=np.int64)

    attach = sorted({b.dst[i] for ups in ep_uplinks for i in ups})
    leaves = b.leaves if b.leaves is not None else attach
    leaf_index = {n: i for i, n in enumerate(leaves)}
    endpoint_leaf = np.asarray([leaf_index[int(n)] for n in ep_switch], dtype=np.int64)
    multi = any(len(u) > 1 for u in ep_uplinks)
    ports = (
        [tuple((i, _reverse_link(b, i), leaf_index[b.dst[i]]) for i in ups) for ups in ep_uplinks]
        if multi
        else None
    )
    return _Endpoints(ep_uplinks, ep_pcie, ep_pcie_down, ep_up, ep_down, leaves, endpoint_leaf, ports)


def _finish(b: _Builder, max_paths: int, leaf_diameter: int | None = None) -> Fabric:
    """Flatten a builder into a :class:`Fabric`: endpoint attachments, ECMP groups, hop bounds.

    ``leaf_diameter`` (switch hops between the furthest leaves) is known for the built-in topologies;
    for a graph it is measured, and a pair of leaves with no path between them is an error.
    """
    spec = b.spec
    n_gpus = len(b.gpus)
    if n_gpus == 0:
        raise ValueError("fabric has no GPUs")
    names, kinds = b.names, b.kinds
    link_src = np.asarray(b.src, dtype=np.int64)
    link_dst = np.asarray(b.dst, dtype=np.int64)
    link_gbps = np.asarray(b.gbps, dtype=np.float64)
    link_tier = np.asarray(b.tier, dtype=np.int64)
    is_switch = np.array([k not in _HOST_KINDS for k in kinds], dtype=bool)

    endpoints = list(b.gpus) + list(b.storage)
    ep = _endpoint_attachments(b, endpoints, n_gpus, is_switch)
    ep_pcie, leaves = ep.pcie, ep.leaves

    sw_adj, level = _switch_levels(b, is_switch, leaves)

    if leaf_diameter is None:  # a graph: measure it, and check that every endpoint reaches every other
        leaf_diameter = _graph_leaf_diameter(b, sw_adj, leaves, endpoints, ep.uplinks)
    chain = 2 if (ep_pcie >= 0).any() else 1
    max_hops = max(2, 2 * chain + leaf_diameter)

    latency = np.asarray(b.latency_s, dtype=np.float64)
    uniform = bool(np.all(latency == spec.hop_latency_us * 1e-6))
    efficiency = np.where(link_tier == _TIER["nvlink"], 1.0, spec.link_efficiency)
    capacity = link_gbps * GBPS_TO_BYTES_PER_S * efficiency

    link_group = _ecmp_groups(level, link_src, link_dst, is_switch)

    gpu_host = np.asarray(b.gpu_host, dtype=np.int64)
    gpu_local = _local_ranks(gpu_host)
    nvl_up, nvl_down = _nvlink_links(b)

    return Fabric(
        spec=spec,
        node_names=names,
        node_kind=kinds,
        link_src=link_src,
        link_dst=link_dst,
        link_gbps=link_gbps,
        capacity_bytes_per_s=capacity,
        link_tier=link_tier,
        link_group=link_group,
        gpu_node=np.asarray(b.gpus, dtype=np.int64),
        gpu_host=gpu_host,
        gpu_local_rank=gpu_local,
        endpoint_leaf=ep.leaf,
        endpoint_up=ep.up,
        endpoint_down=ep.down,
        gpu_nvl_up=nvl_up,
        gpu_nvl_down=nvl_down,
        leaf_node=np.asarray(leaves, dtype=np.int64),
        n_gpus=n_gpus,
        n_storage=len(b.storage),
        hop_latency_s=spec.hop_latency_us * 1e-6,
        max_paths=max_paths,
        max_hops=max_hops,
        link_latency_s=None if uniform else latency,
        endpoint_pcie_up=ep_pcie if (ep_pcie >= 0).any() else None,
        endpoint_pcie_down=ep.pcie_down if (ep_pcie >= 0).any() else None,
        endpoint_ports=ep.ports,
        _parallel=b.parallel,
    )


def _check(f: Fabric) -> None:
    """Construction-time sanity check: the built graph is connected (links taken as undirected)."""
    n = len(f.node_names)
    adj: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(f.link_src.tolist(), f.link_dst.tolist()):
        adj[u].append(v)
        adj[v].append(u)
    seen = np.zeros(n, dtype=bool)
    if n:
        seen[0] = True
        stack = [0]
        while stack:
            for v in adj[stack.pop()]:
                if not seen[v]:
                    seen[v] = True
                    stack.append(v)
    if n == 0 or not seen.all():
        raise ValueError(f"fabric {f.spec.topology}: the built graph is not connected")


def _all_shortest_paths(adj: dict[int, list[int]], src: int, dst: int) -> list[list[int]]:
    """Every shortest node path from ``src`` to ``dst`` in the directed graph ``adj`` (BFS layers, then
    the predecessor DAG walked back from ``dst``); empty when ``dst`` is unreachable. The same set as
    ``networkx.all_shortest_paths`` (callers sort it), without importing networkx."""
    if src not in adj or dst not in adj:
        return []
    if src == dst:
        return [[src]]
    dist = {src: 0}
    preds: dict[int, list[int]] = {}
    frontier = [src]
    while frontier and dst not in dist:
        nxt: list[int] = []
        for u in frontier:
            for v in adj.get(u, ()):
                if v not in dist:
                    dist[v] = dist[u] + 1
                    nxt.append(v)
                if dist[v] == dist[u] + 1:
                    preds.setdefault(v, []).append(u)
        frontier = nxt
    if dst not in dist:
        return []
    out: list[list[int]] = []
    stack: list[tuple[int, list[int]]] = [(dst, [dst])]
    while stack:
        node, tail = stack.pop()
        if node == src:
            out.append(tail[::-1])
            continue
        for p in preds.get(node, ()):
            stack.append((p, [*tail, p]))
    return out


# --------------------------------------------------------------------------- the non-blocking reference


def nonblocking_fabric(fabric: Fabric) -> Fabric:
    """The same hosts, NVLink domains, NICs and PCIe links as ``fabric``, every NIC on one non-blocking
    switch, no storage: the reference fabric of ideal step times (for any fabric, built-in or graph)."""
    spec = replace(
        fabric.spec,
        topology="single_switch",
        graph=None,
        storage=replace(fabric.spec.storage, hosts=0, leaves=()),
    )
    b = _Builder(spec)
    leaf = b.node("leaf0", "leaf")
    lat = fabric.link_latency_s

    def copy(link: int, u: int, v: int) -> None:
        t = TIERS[int(fabric.link_tier[link])]
        la = None if lat is None else float(lat[link])
        b.link(u, v, float(fabric.link_gbps[link]), t, la)

    nic_node: dict[int, int] = {}
    nvs_node: dict[int, int] = {}
    for g in range(fabric.n_gpus):
        h = int(fabric.gpu_host[g])
        if h not in nvs_node:
            nvs_node[h] = b.node(fabric.node_names[int(fabric.link_dst[fabric.gpu_nvl_up[g]])], "nvswitch")
        gn = b.node(fabric.node_names[int(fabric.gpu_node[g])], "gpu")
        b.gpus.append(gn)
        b.gpu_host.append(h)
        copy(int(fabric.gpu_nvl_up[g]), gn, nvs_node[h])
        copy(int(fabric.gpu_nvl_down[g]), nvs_node[h], gn)
        ports = (
            [(int(fabric.endpoint_up[g]), int(fabric.endpoint_down[g]))]
            if fabric.endpoint_ports is None
            else [(up, down) for up, down, _ in fabric.endpoint_ports[g]]
        )
        pcie = -1 if fabric.endpoint_pcie_up is None else int(fabric.endpoint_pcie_up[g])
        if pcie < 0:
            for up, down in ports:
                copy(up, gn, leaf)
                copy(down, leaf, gn)
            continue
        nic = int(fabric.link_src[ports[0][0]])
        if nic not in nic_node:
            nic_node[nic] = b.node(fabric.node_names[nic], "nic")
            for up, down in ports:
                copy(up, nic_node[nic], leaf)
                copy(down, leaf, nic_node[nic])
        copy(pcie, gn, nic_node[nic])
        copy(int(fabric.endpoint_pcie_down[g]), nic_node[nic], gn)
    b.leaves = [leaf]
    return _finish(b, fabric.max_paths, leaf_diameter=0)


# --------------------------------------------------------------------------- graph fabrics

_DEFAULT_TIER = {
    frozenset(("gpu", "nvswitch")): "nvlink",
    frozenset(("gpu", "nic")): "pcie",
    frozenset(("gpu", "switch")): "nic",
    frozenset(("nic", "switch")): "nic",
    frozenset(("storage", "switch")): "storage",
    frozenset(("switch",)): "leaf_spine",
}


def _number(x: Any, what: str, lo: float | None = None, hi: float | None = None, unit: str = "") -> float:
    """``x`` as a finite float in ``[lo, hi]`` (a GraphML attribute may be declared as a string: ``"400"``
    is read as 400); a boolean, a non-number or a value out of range is an error naming ``what``."""
    if isinstance(x, bool) or (isinstance(x, str) and len(x) > 100):
        _fail(f"{what}: expected a number, got {str(x)[:40]!r}")
    try:
        v = float(x)
    except (TypeError, ValueError, OverflowError):
        _fail(f"{what}: expected a number, got {str(x)[:40]!r}")
    if not np.isfinite(v):
        _fail(f"{what}: expected a finite number, got {str(x)[:40]!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = (
            f"[{lo:g}, {hi:g}]"
            if lo is not None and hi is not None
            else (f">= {lo:g}" if lo is not None else f"<= {hi:g}")
        )
        _fail(f"{what} = {str(x)[:40]}; allowed: a number in {rng}{unit}")
    return v


def _graph_limits() -> dict[str, float]:
    from ainet_gym.scenario.loader import LIMITS

    return LIMITS


def _graph_roles(G: Any) -> dict[Any, str]:
    """Every node's role, checked (one line naming the node otherwise)."""
    role: dict[Any, str] = {}
    for n, d in G.nodes(data=True):
        r = d.get("role")
        if r is None:
            _fail(f"node {str(n)[:60]!r} has no role; allowed: {', '.join(ROLES)}")
        if not isinstance(r, str) or r not in ROLES:
            _fail(choice_message(f"node {str(n)[:60]!r}: role", r, ROLES))
        role[n] = r
    return role


def graph_size(G: Any) -> dict[str, int]:
    """Count a graph fabric before building it: ``gpus``, ``hosts``, ``links`` (directed, the NVLink
    links made for hosts without an ``nvswitch`` included), ``leaves`` (switches that endpoints attach
    to) and ``ecmp_set``: the most equal-cost shortest paths between two leaves, parallel links
    multiplied out, counted by dynamic programming over the DAG of shortest paths from each leaf (paths
    are never enumerated), times the port pairs of the most multi-homed endpoints.

    Time O(leaves x switch links), memory O(nodes + links). The counts are exact for what
    :func:`build_fabric` would enumerate per leaf pair.

    Raises
    ------
    ValueError
        If a node has no known role (the count needs them).
    """
    import networkx as nx

    if not isinstance(G, nx.Graph):
        _fail(f"a graph fabric must be a networkx graph, not {type(G).__name__}")
    role = _graph_roles(G)
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
    for s in _neighbour_classes(leaves, mult_out, mult_in).values():  # one DP per class of leaves
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
    lim = _graph_limits()
    n_edges = G.number_of_edges() * (1 if G.is_directed() else 2)
    stamp = (G.number_of_nodes(), n_edges, tuple(sorted(lim.items())))
    hit = _SIZE_CACHE.get(G)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    if n_edges > lim["links"]:
        _fail(
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
            _fail(
                f"{what} would have {size[key]:,} {noun} (counted before building); allowed: at most "
                f"{int(limit):,} (ainet_gym.scenario.loader.LIMITS[{lkey!r}]): {hint}"
            )
    with contextlib.suppress(TypeError):  # a graph that is not weak-referenceable is not cached
        _SIZE_CACHE[G] = (stamp, size)
    return size


#: graph -> ((nodes, links, limits), size) of graphs that passed :func:`check_graph_size` (a scenario
#: builds its graph fabric several times while it loads).
_SIZE_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _graph_hosts(G: Any, role: dict[Any, str]) -> tuple[list[Any], dict[Any, int], list[int]]:
    """The GPU nodes of ``G`` in host-major order, each GPU's host id and the sorted host ids, checked:
    every GPU has an integer host and every host the same number of GPUs."""
    host: dict[Any, int] = {}
    for n, d in G.nodes(data=True):
        if role[n] == "gpu":
            if "host" not in d:
                _fail(f"GPU node {str(n)[:60]!r} has no host; allowed: an integer host id >= 0")
            hv = _number(d["host"], f"GPU node {str(n)[:60]!r}: host", 0, 2**53)
            if not hv.is_integer():
                _fail(f"GPU node {str(n)[:60]!r}: host {str(d['host'])[:40]!r} is not an integer >= 0")
            host[n] = int(hv)
    gpus = [n for n in G.nodes if role[n] == "gpu"]
    if not gpus:
        _fail("the graph has no node with role gpu")
    gpus.sort(key=lambda n: host[n])  # host-major GPU ids; stable: the graph's order within a host
    sizes: dict[int, int] = {}
    for g in gpus:
        sizes[host[g]] = sizes.get(host[g], 0) + 1
    hosts = sorted(sizes)
    if len(set(sizes.values())) > 1:
        shown = dict(list(sorted(sizes.items()))[:8])
        _fail(
            f"hosts have different numbers of GPUs ({shown}{' ...' if len(sizes) > 8 else ''}); every host needs the same"
        )
    return gpus, host, hosts


def _graph_link(u: Any, v: Any, d: dict, role: dict[Any, str], lim: dict) -> tuple[float, str, float | None]:
    """One edge's capacity (Gbit/s), tier and latency (s, ``None``: the tier's default), checked against
    ``lim`` (:func:`_graph_limits`)."""
    gmin, gmax, lat_max = lim["gbps_min"], lim["gbps_max"], lim["latency_us_max"]
    name = f"link {str(u)[:40]}-{str(v)[:40]}"
    if u == v:
        _fail(f"{name} joins a node to itself")
    if "gbps" not in d:
        _fail(f"{name} has no capacity: the gbps attribute is missing; allowed: a number > 0 (Gbit/s)")
    gbps = _number(d["gbps"], f"{name}: gbps")
    if gbps <= 0:
        _fail(
            f"{name} has no capacity: gbps = {d['gbps']!r}; allowed: a number in [{gmin:g}, {gmax:g}] (Gbit/s)"
        )
    _number(gbps, f"{name}: gbps", gmin, gmax, " Gbit/s (LIMITS['gbps_min'], LIMITS['gbps_max'])")
    pair = frozenset((role[u], role[v]))
    tier = d.get("tier", _DEFAULT_TIER.get(pair))
    if tier is None:
        _fail(f"{name} joins a {role[u]} and a {role[v]}, which no link may join")
    if not isinstance(tier, str) or tier not in _TIER:
        _fail(choice_message(f"{name}: tier", tier, TIERS))
    lat = None
    if "latency_us" in d:
        lat = _number(d["latency_us"], f"{name}: latency_us", 0.0, lat_max, " us (LIMITS['latency_us_max'])")
        lat *= 1e-6
    return gbps, tier, lat


def _builder_from_graph(G: Any, spec: FabricSpec) -> _Builder:
    """Read nodes and links of a networkx graph (see :func:`fabric_from_graph` for the attributes).
    Time linear in nodes and links."""
    import networkx as nx

    if not isinstance(G, nx.Graph):
        _fail(f"a graph fabric must be a networkx graph, not {type(G).__name__}")
    lim = _graph_limits()
    b = _Builder(spec)
    role = _graph_roles(G)
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
        edges.sort(key=lambda e: _number(e[2]["link"], f"link {e[0]}-{e[1]}: link", 0, 2**53))
    for u, v, d in edges:
        gbps, tier, lat = _graph_link(u, v, d, role, lim)
        b.link(node_id[u], node_id[v], gbps, tier, lat)
        if not G.is_directed():
            b.link(node_id[v], node_id[u], gbps, tier, lat)

    # a host without an NVLink switch in the graph gets one (nvlink_gbps per GPU)
    has_nvl = {b.src[i] for i, t in enumerate(b.tier) if t == _TIER["nvlink"]}
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


def fabric_from_graph(G: Any, max_paths: int = 8, **fabric_keys: Any) -> Fabric:
    """Build a fabric from a networkx graph.

    Nodes: ``role`` in :data:`ROLES`; GPU nodes a ``host`` (integer id). GPU ids are host-major (hosts in
    ascending id, GPUs of a host in the graph's order); every host needs the same number of GPUs. A GPU
    (or a storage host) attaches to switches directly, or a GPU through one ``nic`` node shared with the
    other GPUs of that NIC; an endpoint or NIC linked to several switches is multi-homed (one port per
    link, e.g. one per plane of a dual-plane fabric), and its paths are the shortest over all port pairs. GPUs of one host share an NVLink domain: ``nvswitch`` nodes with
    ``nvlink`` links if the graph has them, else one made per host with ``nvlink_gbps``.

    Edges: ``gbps`` (Gbit/s per direction, > 0), optional ``tier`` (one of :data:`TIERS`; default from the
    roles it joins: gpu-switch and nic-switch ``nic``, gpu-nic ``pcie``, storage-switch ``storage``,
    switch-switch ``leaf_spine``), ``latency_us`` (default ``hop_latency_us``) and ``link`` (an integer: links
    are numbered in this order when every edge has one, else in the graph's edge order). An undirected graph's
    edge is a link in each direction; in a directed graph each edge is one direction and needs its reverse.

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
    return build_fabric(spec, max_paths=max_paths)


def graph_spec(G: Any, **fabric_keys: Any) -> FabricSpec:
    """The :class:`FabricSpec` of a graph fabric: ``hosts`` and ``gpus_per_host`` counted from ``G``."""
    import networkx as nx

    if not isinstance(G, nx.Graph):
        _fail(f"a graph fabric must be a networkx graph, not {type(G).__name__}")
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


def fabric_to_graph(fabric: Fabric) -> nx.MultiDiGraph:
    """The fabric as a directed multigraph that :func:`fabric_from_graph` reads back into the same fabric:
    one edge per directed link (``link`` id, ``gbps``, ``tier``, ``latency_us``), nodes in node-id
    order with their ``role`` (and ``host`` for GPUs, NICs and NVLink switches).

    Raises
    ------
    TypeError
        If ``fabric`` is not a :class:`Fabric` (e.g. a scenario: build its fabric first).
    """
    import networkx as nx

    if not isinstance(fabric, Fabric):
        raise TypeError(
            f"fabric_to_graph expects a Fabric (ainet_gym.fabric.topology.build_fabric of a scenario's fabric), "
            f"not {type(fabric).__name__}"
        )
    G = nx.MultiDiGraph()
    role = {"gpu": "gpu", "storage": "storage", "nic": "nic", "nvswitch": "nvswitch"}
    node_host: dict[int, int] = {}
    for g in range(fabric.n_gpus):
        h = int(fabric.gpu_host[g])
        node_host[int(fabric.gpu_node[g])] = h
        node_host[int(fabric.link_dst[fabric.gpu_nvl_up[g]])] = h
        if fabric.endpoint_pcie_up is not None and fabric.endpoint_pcie_up[g] >= 0:
            node_host[int(fabric.link_src[fabric.endpoint_up[g]])] = h
    for i, (name, kind) in enumerate(zip(fabric.node_names, fabric.node_kind)):
        attrs: dict[str, Any] = {"role": role.get(kind, "switch")}
        if i in node_host:
            attrs["host"] = node_host[i]
        G.add_node(name, **attrs)
    lat = fabric.link_latency_s
    for i in range(fabric.n_links):
        G.add_edge(
            fabric.node_names[int(fabric.link_src[i])],
            fabric.node_names[int(fabric.link_dst[i])],
            key=i,
            link=i,
            gbps=float(fabric.link_gbps[i]),
            tier=TIERS[int(fabric.link_tier[i])],
            latency_us=(fabric.hop_latency_s if lat is None else float(lat[i])) * 1e6,
        )
    return G


def read_fabric_graph(path: str | os.PathLike) -> nx.Graph:
    """Read a graph fabric file: GraphML (``.graphml``), or an edge list (any other suffix).

    Edge list: one item per line, ``#`` starts a comment, ``key=value`` attributes::

        node gpu0 role=gpu host=0        # a node (nodes not declared are switches)
        gpu0 leaf0 gbps=400 tier=nic     # a link in each direction (latency_us=... optional)
    """
    import networkx as nx

    from ainet_gym.scenario.files import read_text_capped

    path = Path(path)
    text = read_text_capped(path, str(path))  # refused unread above LIMITS["file_bytes"]
    if path.suffix.lower() == ".graphml":
        try:
            return nx.parse_graphml(text)
        except Exception as e:  # networkx raises several XML error types
            raise ValueError(
                f"{path}: not a readable GraphML file: {' '.join(str(e).split())[:200]}"
            ) from None
    G = nx.MultiGraph()
    # counted while reading, so that a file far above the limits is refused after reading what
    # already exceeds them, not after building the whole graph: every link line adds two directed
    # links, and a connected graph of n nodes has at least 2 (n - 1) of them
    max_links = int(_graph_limits()["links"])
    n_links = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        # shlex only where quoting can matter: it costs about 30 times str.split a line
        words = (
            shlex.split(line, comments=True)
            if ('"' in line or "'" in line or "\\" in line)
            else (line.split("#", 1)[0].split())
        )
        if not words:
            continue
        if words[0] != "node":
            n_links += 2
        if n_links > max_links or 2 * (G.number_of_nodes() - 1) > max_links:
            _fail(
                f"{path}:{lineno}: the graph has more than {max_links:,} directed links (a link line is two; "
                "a connected graph of n nodes has at least 2 (n - 1)); allowed: at most "
                f"{max_links:,} (ainet_gym.scenario.loader.LIMITS['links']): fewer links in the graph"
            )
        where = f"{path}:{lineno}"
        head, attrs = words[:2], words[2:]  # "node NAME ..." or "NAME NAME ..."
        kv: dict[str, Any] = {}
        for w in attrs:
            if "=" not in w:
                _fail(f"{where}: {w!r} is not key=value")
            k, v = w.split("=", 1)
            kv[k] = v if k in ("role", "tier") else _number(v, f"{where}: {k}")
        if words[0] == "node":
            if len(words) < 2:
                _fail(f"{where}: 'node' needs a name")
            G.add_node(words[1], **kv)
        else:
            if len(head) < 2:
                _fail(f"{where}: a link needs two node names")
            for n in head:
                if n not in G:
                    G.add_node(n, role="switch")
            G.add_edge(head[0], head[1], **kv)
    return G


def write_fabric_graph(fabric: Fabric, path: str | os.PathLike) -> None:
    """Write ``fabric`` as GraphML (:func:`fabric_to_graph`), to edit and load back with
    ``fabric: {topology: graph, file: ...}``."""
    import networkx as nx

    nx.write_graphml(fabric_to_graph(fabric), Path(path))


#: sets of more equal-cost paths than this keep the evenly spaced subset (the greedy one costs cap x n)
_GREEDY_MAX_CANDIDATES = 4096


def _capped(paths: list[list[int]], cap: int, key: str) -> list[list[int]]:
    """At most ``cap`` of the sorted equal-cost ``paths``: all of them if they fit; otherwise ``cap`` evenly
    spaced from a rotation that depends on ``key`` (so that capped sets of different pairs cover different
    spines), unless a greedy pick covers more distinct links: from the same rotation, each next path is
    the one whose links have been used least (ties: the first in the rotation). The subset keeps the
    sorted order."""
    n = len(paths)
    if n <= cap:
        return paths
    offset = zlib.crc32(key.encode()) % n
    even = sorted(((offset + (np.arange(cap) * n) // cap) % n).tolist())
    chosen = even
    if n <= _GREEDY_MAX_CANDIDATES:
        used: dict[int, int] = {}
        free = [(offset + i) % n for i in range(n)]  # the rotation
        greedy = []
        for _ in range(cap):
            k = min(range(len(free)), key=lambda j: (sum(used.get(link, 0) for link in paths[free[j]]), j))
            pick = free.pop(k)
            greedy.append(pick)
            for link in paths[pick]:
                used[link] = used.get(link, 0) + 1

        def distinct(idx: list[int]) -> int:
            return len({link for i in idx for link in paths[i]})

        if distinct(greedy) > distinct(even):
            chosen = sorted(greedy)
    return [paths[i] for i in chosen]
