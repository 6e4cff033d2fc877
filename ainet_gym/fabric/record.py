"""The fabric record: :class:`Fabric` (the dense link table of a built fabric, its endpoints' attachments and
their candidate paths) and its vocabulary, the link tiers (:data:`TIERS`) and node roles (:data:`ROLES`).

networkx is touched at construction only: the hot path reads the numpy arrays of :class:`Fabric`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.fabric.paths import all_shortest_paths, capped
from ainet_gym.scenario.spec import FabricSpec
from ainet_gym.units import GBPS_TO_BYTES_PER_S

if TYPE_CHECKING:  # networkx is imported where a graph is read or written, not on the env's import path
    import networkx as nx

__all__ = ["HOST_KINDS", "ROLES", "TIERS", "TIER_INDEX", "Fabric"]

#: Tier labels of links, indexed by ``Fabric.link_tier`` (new tiers are appended, so indices stay).
TIERS: tuple[str, ...] = (
    "nvlink", "nic", "leaf_spine", "edge_agg", "agg_core", "rail_spine", "storage", "pcie",
)  # fmt: skip
TIER_INDEX = {name: i for i, name in enumerate(TIERS)}
#: Node roles of a graph fabric. ``nic`` (a NIC shared by GPUs over PCIe) and ``nvswitch`` (a host's NVLink
#: switch, made with ``nvlink_gbps`` when the graph has none) are optional.
ROLES: tuple[str, ...] = ("gpu", "switch", "storage", "nic", "nvswitch")
#: Node kinds that are not switches of the network (never transit nodes between hosts).
HOST_KINDS = ("gpu", "storage", "nvswitch", "nic")


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
        return self.link_tier != TIER_INDEX["nvlink"]

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
                if self.node_kind[u] not in HOST_KINDS and self.node_kind[v] not in HOST_KINDS:
                    adj.setdefault(u, []).append(v)
                    adj.setdefault(v, [])
            self._switch_adj = adj
        src, dst = int(self.leaf_node[a]), int(self.leaf_node[b])
        out: list[list[int]] = []
        for nodes in all_shortest_paths(self._switch_adj, src, dst):  # none: another plane
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
        (:func:`~ainet_gym.fabric.paths.capped`). A multi-homed endpoint
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
                mids = capped(self._leaf_paths(a, b), self.max_paths, f"{a}-{b}")
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
        return capped(combos, self.max_paths, f"{src}-{dst}")

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
        nic = self.link_gbps[
            (self.link_tier == TIER_INDEX["nic"]) & (self.link_dst == self.leaf_node[0])
        ].sum()
        up_mask = (self.link_src == self.leaf_node[0]) & (self.link_group >= 0)
        up = self.link_gbps[up_mask].sum()
        return float(nic / up) if up > 0 else float("inf")
