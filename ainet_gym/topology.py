"""Fabric topologies: built and checked with networkx, then flattened into a dense link table.

Every link is directed, with a capacity per direction and a tier label. Endpoints are GPUs (ids
``0..gpus-1``, host-major: leaf by leaf, host by host, local rank last) followed by storage hosts
(ids ``gpus..gpus+storage-1``). Each GPU has a NIC link to its leaf (edge / rail leaf) and a pair of
NVLink links to its host's NVLink switch, so an intra-host transfer crosses two NVLink links.

networkx is touched at construction only: the hot path reads the numpy arrays of :class:`Fabric`.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass, field
from functools import cached_property

import networkx as nx
import numpy as np

from ainet_gym.spec import FabricSpec

__all__ = ["TIERS", "Fabric", "build_fabric", "nonblocking_spec"]

#: Tier labels of links, indexed by ``Fabric.link_tier``.
TIERS: tuple[str, ...] = ("nvlink", "nic", "leaf_spine", "edge_agg", "agg_core", "rail_spine", "storage")
_TIER = {name: i for i, name in enumerate(TIERS)}
#: Level of a node kind in the Clos hierarchy (up-links go to a higher level).
_LEVEL = {"gpu": 0, "storage": 0, "nvswitch": 1, "leaf": 1, "edge": 1, "agg": 2, "spine": 2, "core": 3}
GBPS_TO_BYTES_PER_S = 1e9 / 8.0


@dataclass
class Fabric:
    """A built fabric: the graph (construction time) and the link table (hot path).

    Attributes are arrays with the named axes in their comments.
    """

    spec: FabricSpec
    graph: nx.MultiDiGraph
    node_names: list[str]  # (nodes,)
    node_kind: list[str]  # (nodes,)
    link_src: np.ndarray  # (links,) int node id
    link_dst: np.ndarray  # (links,) int node id
    link_gbps: np.ndarray  # (links,) float nominal speed per direction
    capacity_bps: np.ndarray  # (links,) float bytes/s (nominal * efficiency for network links)
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
    _switch_paths: dict[tuple[int, int], list[list[int]]] = field(default_factory=dict, repr=False)
    _parallel: dict[tuple[int, int], list[int]] = field(default_factory=dict, repr=False)
    _switch_graph: nx.DiGraph | None = field(default=None, repr=False)

    @property
    def n_links(self) -> int:
        return int(self.link_src.shape[0])

    @property
    def n_endpoints(self) -> int:
        return self.n_gpus + self.n_storage

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
        if self._switch_graph is None:
            sw = nx.DiGraph()
            for (u, v), _ids in self._parallel.items():
                if self.node_kind[u] in ("gpu", "storage", "nvswitch") or self.node_kind[v] in (
                    "gpu",
                    "storage",
                    "nvswitch",
                ):
                    continue
                sw.add_edge(u, v)
            self._switch_graph = sw
        src, dst = int(self.leaf_node[a]), int(self.leaf_node[b])
        out: list[list[int]] = []
        for nodes in nx.all_shortest_paths(self._switch_graph, src, dst):
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
        so that capped sets of different pairs still cover every spine or core.
        """
        if src == dst:
            raise ValueError(f"transfer from endpoint {src} to itself")
        if src < self.n_gpus and dst < self.n_gpus and self.gpu_host[src] == self.gpu_host[dst]:
            return [[int(self.gpu_nvl_up[src]), int(self.gpu_nvl_down[dst])]]
        a, b = int(self.endpoint_leaf[src]), int(self.endpoint_leaf[dst])
        first, last = int(self.endpoint_up[src]), int(self.endpoint_down[dst])
        if a == b:
            return [[first, last]]
        mids = self._leaf_paths(a, b)
        n = len(mids)
        if n > self.max_paths:
            offset = zlib.crc32(f"{a}-{b}".encode()) % n
            idx = (offset + (np.arange(self.max_paths) * n) // self.max_paths) % n
            mids = [mids[i] for i in sorted(idx.tolist())]
        return [[first, *m, last] for m in mids]

    def oversubscription(self) -> float:
        """Leaf down-capacity over up-capacity (1.0 = non-blocking), from the link table."""
        nic = self.link_gbps[(self.link_tier == _TIER["nic"]) & (self.link_dst == self.leaf_node[0])].sum()
        up_mask = (self.link_src == self.leaf_node[0]) & (self.link_group >= 0)
        up = self.link_gbps[up_mask].sum()
        return float(nic / up) if up > 0 else float("inf")


def nonblocking_spec(spec: FabricSpec) -> FabricSpec:
    """The same hosts on one non-blocking switch: the reference fabric of ideal step times."""
    from dataclasses import replace

    nic = spec.link_gbps if spec.topology == "fat_tree" else spec.nic_gbps
    storage = replace(spec.storage, leaves=())
    return replace(spec, topology="single_switch", hosts=n_hosts(spec), nic_gbps=nic, storage=storage)


def n_hosts(spec: FabricSpec) -> int:
    """Number of GPU hosts of a fabric spec."""
    if spec.topology == "spine_leaf":
        return spec.leaves * spec.hosts_per_leaf
    if spec.topology == "fat_tree":
        return spec.k**3 // 4 // spec.gpus_per_host
    return spec.hosts


class _Builder:
    def __init__(self, spec: FabricSpec) -> None:
        self.spec = spec
        self.g = nx.MultiDiGraph()
        self.names: list[str] = []
        self.kinds: list[str] = []
        self.src: list[int] = []
        self.dst: list[int] = []
        self.gbps: list[float] = []
        self.tier: list[int] = []
        self.parallel: dict[tuple[int, int], list[int]] = {}

    def node(self, name: str, kind: str) -> int:
        i = len(self.names)
        self.names.append(name)
        self.kinds.append(kind)
        self.g.add_node(i, name=name, kind=kind)
        return i

    def link(self, u: int, v: int, gbps: float, tier: str) -> int:
        i = len(self.src)
        self.src.append(u)
        self.dst.append(v)
        self.gbps.append(float(gbps))
        self.tier.append(_TIER[tier])
        self.parallel.setdefault((u, v), []).append(i)
        self.g.add_edge(u, v, key=i, gbps=gbps, tier=tier)
        return i

    def duplex(self, u: int, v: int, gbps: float, tier: str) -> tuple[int, int]:
        return self.link(u, v, gbps, tier), self.link(v, u, gbps, tier)


def build_fabric(spec: FabricSpec, max_paths: int = 8) -> Fabric:
    """Build the fabric of ``spec``: graph, link table, endpoint attachments.

    Raises
    ------
    ValueError
        If the spec describes a fabric that cannot be built (e.g. zero GPUs).
    """
    b = _Builder(spec)
    gph = spec.gpus_per_host
    leaves: list[int] = []
    gpu_attach: list[int] = []  # leaf index per GPU, host-major order

    if spec.topology == "single_switch":
        leaves.append(b.node("leaf0", "leaf"))
        n_hosts = spec.hosts
        gpu_attach = [0] * (n_hosts * gph)
    elif spec.topology == "spine_leaf":
        leaves = [b.node(f"leaf{i}", "leaf") for i in range(spec.leaves)]
        spines = [b.node(f"spine{j}", "spine") for j in range(spec.spines)]
        for lf in leaves:
            for sp in spines:
                for _ in range(spec.links_per_spine):
                    b.duplex(lf, sp, spec.uplink_gbps, "leaf_spine")
        n_hosts = spec.leaves * spec.hosts_per_leaf
        gpu_attach = [i for i in range(spec.leaves) for _ in range(spec.hosts_per_leaf * gph)]
    elif spec.topology == "fat_tree":
        k = spec.k
        half = k // 2
        edges = [b.node(f"edge{p * half + e}", "edge") for p in range(k) for e in range(half)]
        aggs = [b.node(f"agg{p * half + a}", "agg") for p in range(k) for a in range(half)]
        cores = [b.node(f"core{c}", "core") for c in range(half * half)]
        for p in range(k):
            for e in range(half):
                for a in range(half):
                    b.duplex(edges[p * half + e], aggs[p * half + a], spec.link_gbps, "edge_agg")
            for a in range(half):
                for c in range(half):
                    b.duplex(aggs[p * half + a], cores[a * half + c], spec.link_gbps, "agg_core")
        leaves = edges
        n_ports = k**3 // 4
        if n_ports % gph:
            raise ValueError(f"fat_tree k={k}: {n_ports} edge ports not a multiple of gpus_per_host={gph}")
        n_hosts = n_ports // gph
        gpu_attach = [port // half for port in range(n_ports)]
    elif spec.topology == "rail_optimized":
        leaves = [b.node(f"leaf{r}", "leaf") for r in range(gph)]
        spines = [b.node(f"spine{j}", "spine") for j in range(spec.spines)]
        for lf in leaves:
            for sp in spines:
                for _ in range(spec.links_per_spine):
                    b.duplex(lf, sp, spec.uplink_gbps, "rail_spine")
        n_hosts = spec.hosts
        gpu_attach = [r for _ in range(n_hosts) for r in range(gph)]
    else:
        raise ValueError(f"fabric.topology: {spec.topology!r} is not a known topology")

    n_gpus = n_hosts * gph
    if n_gpus <= 0:
        raise ValueError("fabric has no GPUs")
    gpu_node = np.empty(n_gpus, dtype=np.int64)
    nvl_up = np.empty(n_gpus, dtype=np.int64)
    nvl_down = np.empty(n_gpus, dtype=np.int64)
    ep_up: list[int] = []
    ep_down: list[int] = []
    nic_gbps = spec.link_gbps if spec.topology == "fat_tree" else spec.nic_gbps
    for h in range(n_hosts):
        nvs = b.node(f"nvswitch{h}", "nvswitch")
        for r in range(gph):
            g = h * gph + r
            gpu_node[g] = b.node(f"gpu{g}", "gpu")
            nvl_up[g], nvl_down[g] = b.duplex(int(gpu_node[g]), nvs, spec.nvlink_gbps, "nvlink")
            up, down = b.duplex(int(gpu_node[g]), leaves[gpu_attach[g]], nic_gbps, "nic")
            ep_up.append(up)
            ep_down.append(down)
    storage_leaf: list[int] = []
    st = spec.storage
    for s in range(st.hosts):
        leaf_idx = st.leaves[s % len(st.leaves)] if st.leaves else len(leaves) - 1
        node = b.node(f"storage{s}", "storage")
        up, down = b.duplex(node, leaves[leaf_idx], st.gbps, "storage")
        ep_up.append(up)
        ep_down.append(down)
        storage_leaf.append(leaf_idx)

    link_src = np.asarray(b.src, dtype=np.int64)
    link_dst = np.asarray(b.dst, dtype=np.int64)
    link_gbps = np.asarray(b.gbps, dtype=np.float64)
    link_tier = np.asarray(b.tier, dtype=np.int64)
    efficiency = np.where(link_tier == _TIER["nvlink"], 1.0, spec.link_efficiency)
    capacity = link_gbps * GBPS_TO_BYTES_PER_S * efficiency

    # ECMP next-hop groups: up-links of a switch form one group; parallel down-links to one
    # neighbour form another. Singleton groups are not a choice (-1).
    level = np.array([_LEVEL[b.kinds[n]] for n in range(len(b.names))])
    up = level[link_dst] > level[link_src]
    is_switch_src = np.array([b.kinds[n] not in ("gpu", "storage", "nvswitch") for n in b.src])
    keys = np.where(up, link_src * 0 - 1, link_dst)  # up: group by source only
    group_key = np.stack([link_src, keys], axis=1)
    _, group = np.unique(group_key, axis=0, return_inverse=True)
    group = group.reshape(-1)
    sizes = np.bincount(group)
    link_group = np.where(is_switch_src & (sizes[group] > 1), group, -1)
    # renumber groups densely
    valid = link_group >= 0
    if valid.any():
        _, dense = np.unique(link_group[valid], return_inverse=True)
        link_group[valid] = dense

    gpu_host = np.repeat(np.arange(n_hosts), gph)
    gpu_local = np.tile(np.arange(gph), n_hosts)
    endpoint_leaf = np.asarray(gpu_attach + storage_leaf, dtype=np.int64)
    fabric = Fabric(
        spec=spec,
        graph=b.g,
        node_names=b.names,
        node_kind=b.kinds,
        link_src=link_src,
        link_dst=link_dst,
        link_gbps=link_gbps,
        capacity_bps=capacity,
        link_tier=link_tier,
        link_group=link_group,
        gpu_node=gpu_node,
        gpu_host=gpu_host,
        gpu_local_rank=gpu_local,
        endpoint_leaf=endpoint_leaf,
        endpoint_up=np.asarray(ep_up, dtype=np.int64),
        endpoint_down=np.asarray(ep_down, dtype=np.int64),
        gpu_nvl_up=nvl_up,
        gpu_nvl_down=nvl_down,
        leaf_node=np.asarray(leaves, dtype=np.int64),
        n_gpus=n_gpus,
        n_storage=st.hosts,
        hop_latency_s=spec.hop_latency_us * 1e-6,
        max_paths=max_paths,
        _parallel=b.parallel,
    )
    _check(fabric)
    return fabric


def _check(f: Fabric) -> None:
    """Construction-time sanity checks with networkx (connectivity of the switch fabric)."""
    und = nx.Graph()
    und.add_edges_from(zip(f.link_src.tolist(), f.link_dst.tolist()))
    if not nx.is_connected(und):
        raise ValueError(f"fabric {f.spec.topology}: the built graph is not connected")
