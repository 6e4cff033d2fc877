"""The built-in topologies (``single_switch``, ``spine_leaf``, ``fat_tree``, ``rail_optimized``) of a
:class:`~ainet_gym.scenario.spec.FabricSpec`: their switches, links and hosts, flattened into a
:class:`~ainet_gym.fabric.record.Fabric`."""

from __future__ import annotations

from ainet_gym.errors import choice_message
from ainet_gym.fabric.builder import Builder
from ainet_gym.fabric.flatten import check_connected, flatten
from ainet_gym.fabric.record import Fabric
from ainet_gym.scenario.spec import TOPOLOGIES, FabricSpec

__all__ = ["build_builtin_fabric"]

#: Switch-to-switch hops between the furthest leaves of each built-in topology.
_LEAF_DIAMETER = {"single_switch": 0, "spine_leaf": 2, "rail_optimized": 2, "fat_tree": 4}


def _single_switch(b: Builder, spec: FabricSpec, nics: int) -> tuple[list[int], list[list[int]]]:
    """One leaf; every NIC of every host on it."""
    leaves = [b.node("leaf0", "leaf")]
    attach = [[leaves[0]] * nics for _ in range(spec.hosts)]
    return leaves, attach


def _spine_leaf(b: Builder, spec: FabricSpec, nics: int) -> tuple[list[int], list[list[int]]]:
    """``leaves`` x ``spines``, ``links_per_spine`` links per pair; ``hosts_per_leaf`` hosts on each leaf."""
    leaves = [b.node(f"leaf{i}", "leaf") for i in range(spec.leaves)]
    spines = [b.node(f"spine{j}", "spine") for j in range(spec.spines)]
    for lf in leaves:
        for sp in spines:
            for _ in range(spec.links_per_spine):
                b.duplex(lf, sp, spec.uplink_gbps, "leaf_spine")
    attach = [[lf] * nics for lf in leaves for _ in range(spec.hosts_per_leaf)]
    return leaves, attach


def _fat_tree(b: Builder, spec: FabricSpec, nics: int) -> tuple[list[int], list[list[int]]]:
    """The ``k``-ary fat tree: ``k`` pods of ``k/2`` edge and ``k/2`` aggregation switches, ``(k/2)^2`` cores;
    one NIC per edge-switch down port, the hosts' NICs in port order."""
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
    return leaves, attach


def _rail_optimized(b: Builder, spec: FabricSpec, nics: int) -> tuple[list[int], list[list[int]]]:
    """One rail (leaf) per NIC of a host, each on every spine; NIC ``r`` of every host on rail ``r``."""
    leaves = [b.node(f"leaf{r}", "leaf") for r in range(nics)]  # one rail per NIC of a host
    spines = [b.node(f"spine{j}", "spine") for j in range(spec.spines)]
    for lf in leaves:
        for sp in spines:
            for _ in range(spec.links_per_spine):
                b.duplex(lf, sp, spec.uplink_gbps, "rail_spine")
    attach = [list(leaves) for _ in range(spec.hosts)]
    return leaves, attach


#: the switch layer of each built-in topology: ``(builder, spec, NICs per host) -> (leaves, the leaf of each NIC
#: of each host)``, its switches and switch links added to the builder
_SWITCH_LAYERS = {
    "single_switch": _single_switch,
    "spine_leaf": _spine_leaf,
    "fat_tree": _fat_tree,
    "rail_optimized": _rail_optimized,
}


def _build_builtin(spec: FabricSpec) -> Builder:
    """The builder of a built-in topology: its switch layer (:data:`_SWITCH_LAYERS`), then the hosts on their
    NICs' leaves, then the storage hosts."""
    b = Builder(spec)
    gph, k = spec.gpus_per_host, spec.gpus_per_nic
    if gph % k:
        raise ValueError(f"gpus_per_nic={k} does not divide gpus_per_host={gph}")
    nics = gph // k  # NICs per host
    nic_gbps = spec.link_gbps if spec.topology == "fat_tree" else spec.nic_gbps
    if spec.topology not in _SWITCH_LAYERS:
        raise ValueError(choice_message("fabric.topology", spec.topology, TOPOLOGIES))
    leaves, attach = _SWITCH_LAYERS[spec.topology](b, spec, nics)  # per host: leaf node of each NIC
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


def build_builtin_fabric(spec: FabricSpec, max_paths: int = 8) -> Fabric:
    """The fabric of a built-in ``spec`` (not ``graph``), its leaf diameter known from the topology,
    checked to be connected."""
    b = _build_builtin(spec)
    diameter = _LEAF_DIAMETER[spec.topology]
    fabric = flatten(b, max_paths, leaf_diameter=diameter)
    check_connected(fabric)
    return fabric
