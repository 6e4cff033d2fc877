"""Flatten a :class:`~ainet_gym.fabric.builder.Builder` into a :class:`~ainet_gym.fabric.record.Fabric`:
the endpoints' up links, PCIe and NVLink links, the switch levels, a graph's leaf diameter (with the check
that every endpoint reaches every other), the ECMP groups and the hop bound. Every fabric, built-in or
not, goes through :func:`flatten`, so paths and hop counts come from the links, not from a topology name."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ainet_gym.fabric.builder import Builder
from ainet_gym.fabric.paths import ecmp_groups, hop_counts, neighbour_classes
from ainet_gym.fabric.record import HOST_KINDS, TIER_INDEX, Fabric
from ainet_gym.units import GBPS_TO_BYTES_PER_S

__all__ = ["check_connected", "flatten"]


def _reverse_link(b: Builder, link: int) -> int:
    """The link in the other direction of ``link`` (the k-th parallel link pairs with the k-th)."""
    back = b.parallel.get((b.dst[link], b.src[link]))
    if not back:
        raise ValueError(
            f"link {b.names[b.src[link]]}->{b.names[b.dst[link]]} has no link in the other direction"
        )
    k = b.parallel[(b.src[link], b.dst[link])].index(link)
    return back[min(k, len(back) - 1)]


def _endpoint_uplinks(
    b: Builder, endpoints: list[int], n_gpus: int, is_switch: np.ndarray
) -> tuple[list[list[int]], np.ndarray]:
    """Per endpoint (GPUs, then storage hosts): its up links into switches (its NIC's ports, sorted), and
    its PCIe link to a NIC (-1 where the endpoint attaches to a switch directly)."""
    names, kinds = b.names, b.kinds
    out_links: dict[int, list[int]] = {}
    nvlink = TIER_INDEX["nvlink"]
    for i, (u, t) in enumerate(zip(b.src, b.tier)):
        if t != nvlink:
            out_links.setdefault(u, []).append(i)
    ep_pcie = np.full(len(endpoints), -1, dtype=np.int64)
    ep_uplinks: list[list[int]] = []
    for e, node in enumerate(endpoints):
        ups = out_links.get(node, [])
        what = "GPU" if e < n_gpus else "storage host"
        if not ups:
            raise ValueError(
                f"{what} {names[node]} has no network link; it needs one to a switch or to a NIC"
            )
        to_nic = [i for i in ups if kinds[b.dst[i]] == "nic"]
        if to_nic:
            if len(ups) != 1 or e >= n_gpus:
                raise ValueError(
                    f"{what} {names[node]} has links to {', '.join(names[b.dst[i]] for i in ups)}; a GPU behind "
                    "a NIC has exactly one link into the network, the PCIe link to that NIC"
                )
            nic = b.dst[ups[0]]
            ep_pcie[e] = ups[0]
            ups = [i for i in out_links.get(nic, []) if is_switch[b.dst[i]]]
            if not ups:
                raise ValueError(f"NIC {names[nic]} has no link to a switch")
        for i in ups:
            if not is_switch[b.dst[i]]:
                raise ValueError(f"{what} {names[node]} attaches to {names[b.dst[i]]}, which is not a switch")
        ep_uplinks.append(sorted(ups))
    return ep_uplinks, ep_pcie


def _graph_leaf_diameter(
    b: Builder,
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
    reps = list(neighbour_classes(leaves, sw_adj, in_adj).values())
    leaf_diameter = 0
    dist: dict[int, dict[int, int]] = {}
    for a in reps:
        da = dist[a] = hop_counts(sw_adj, [a])
        leaf_diameter = max(leaf_diameter, max(da.get(x, 0) for x in leaves))
    fwd, back = hop_counts(sw_adj, [leaves[0]]), hop_counts(in_adj, [leaves[0]])
    if not all(x in fwd and x in back for x in leaves):  # not one strongly connected set: find the pair
        for a in leaves:
            if a not in dist:
                dist[a] = hop_counts(sw_adj, [a])
        groups: dict[tuple[int, ...], int] = {}  # attachment switches -> first endpoint with them
        for e, ups in enumerate(ep_uplinks):
            groups.setdefault(tuple(b.dst[i] for i in ups), e)
        for ga, ea in groups.items():
            for gb, eb in groups.items():
                if not any(y in dist[x] for x in ga for y in gb):
                    raise ValueError(
                        f"{names[endpoints[ea]]} has no path to {names[endpoints[eb]]}: switch "
                        f"{names[ga[0]]} does not reach switch {names[gb[0]]}"
                    )
    return leaf_diameter


def _nvlink_links(b: Builder) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU: its NVLink link up to its host's NVLink switch, and the link back down."""
    n_gpus = len(b.gpus)
    nvl_up = np.empty(n_gpus, dtype=np.int64)
    nvl_down = np.empty(n_gpus, dtype=np.int64)
    nvl_out: dict[int, int] = {}
    nvlink, kinds = TIER_INDEX["nvlink"], b.kinds
    for i, (u, t) in enumerate(zip(b.src, b.tier)):
        if t == nvlink and kinds[u] == "gpu":
            nvl_out.setdefault(u, i)
    for g, node in enumerate(b.gpus):
        if node not in nvl_out:
            raise ValueError(f"GPU {b.names[node]} has no NVLink link to its host's NVLink switch")
        nvl_up[g] = nvl_out[node]
        nvl_down[g] = _reverse_link(b, nvl_out[node])
    return nvl_up, nvl_down


def _switch_levels(
    b: Builder, is_switch: np.ndarray, leaves: list[int]
) -> tuple[dict[int, list[int]], np.ndarray]:
    """The switch-to-switch adjacency and each node's level: leaves (and NVSwitches) 1, then hops away
    from the nearest leaf (up-links go to a higher level); hosts 0."""
    sw_adj: dict[int, list[int]] = {}
    for u, v in zip(b.src, b.dst):
        if is_switch[u] and is_switch[v]:
            sw_adj.setdefault(u, []).append(v)
    level = np.zeros(len(b.names), dtype=np.int64)
    for n, hops in hop_counts(sw_adj, leaves).items():
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


def _endpoint_attachments(b: Builder, endpoints: list[int], n_gpus: int, is_switch: np.ndarray) -> _Endpoints:
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


def flatten(b: Builder, max_paths: int, leaf_diameter: int | None = None) -> Fabric:
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
    is_switch = np.array([k not in HOST_KINDS for k in kinds], dtype=bool)

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
    efficiency = np.where(link_tier == TIER_INDEX["nvlink"], 1.0, spec.link_efficiency)
    capacity = link_gbps * GBPS_TO_BYTES_PER_S * efficiency

    link_group = ecmp_groups(level, link_src, link_dst, is_switch)

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


def check_connected(f: Fabric) -> None:
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
