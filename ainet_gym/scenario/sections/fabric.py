"""The ``fabric`` section: the keys of each built-in topology, the transport profile's defaults, the
topology's structure (a fat tree's even k, NICs shared evenly) and the storage leaves; a ``topology: graph``
fabric read from its file or taken as a networkx graph and built once, so that a bad graph fails here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ainet_gym.scenario.graphs import graph_fabrics
from ainet_gym.scenario.rules import (
    COUNT,
    LIMITS,
    SPEED,
    Context,
    Rule,
    apply_rules,
    as_list,
    as_mapping,
    describe,
    enum_rule,
    int_rule,
    join_path,
    num_rule,
    optional_mapping,
    spec_default,
    text_rule,
)
from ainet_gym.scenario.spec import PROFILE_DEFAULTS, PROFILES, TOPOLOGIES, FabricSpec, StorageSpec

__all__ = [
    "FABRIC_COMMON_KEYS",
    "FABRIC_RULES",
    "STORAGE_RULES",
    "TOPOLOGY_KEYS",
    "fabric_leaf_count",
    "parse_fabric",
]


def fabric_leaf_count(f: FabricSpec) -> int:
    """Number of leaf switches (ids for ``fabric.storage.leaves``): edge switches of a fat-tree, rail leaves
    of a rail-optimized fabric (one per local rank), the single switch of ``single_switch``."""
    if f.topology == "spine_leaf":
        return f.leaves
    if f.topology == "fat_tree":
        return f.k * f.k // 2
    if f.topology == "rail_optimized":
        return f.gpus_per_host // f.gpus_per_nic  # one rail per NIC of a host
    return 1


FABRIC_RULES: dict[str, Rule | None] = {
    "topology": enum_rule(TOPOLOGIES, "topology"),
    "leaves": COUNT,
    "spines": COUNT,
    "hosts_per_leaf": COUNT,
    "links_per_spine": COUNT,
    "uplink_gbps": SPEED,
    "hosts": COUNT,
    "k": int_rule("an even integer", ge=2, le=LIMITS["count_max"]),
    "link_gbps": SPEED,
    "gpus_per_host": COUNT,
    "nic_gbps": SPEED,
    "nvlink_gbps": SPEED,
    "profile": enum_rule(PROFILES, "fabric profile"),
    "hop_latency_us": num_rule("a latency in microseconds", ge=0, le=LIMITS["latency_us_max"]),
    "link_efficiency": num_rule("an efficiency factor", ge=LIMITS["efficiency_min"], le=1),
    "store_and_forward_bytes": num_rule(
        "a packet size in bytes", ge=0, le=LIMITS["packet_bytes_max"], note=" (0: propagation only)"
    ),
    "storage": None,  # nested, below
    "gpus_per_nic": COUNT,
    "pcie_gbps": SPEED,
    "graph": None,  # topology graph: a networkx graph (from Python), below
    "file": None,  # topology graph: GraphML or edge list, relative to the scenario's folder, below
}
#: Fabric keys of a graph fabric (the graph itself gives hosts, GPUs, NICs, switches and link speeds).
_GRAPH_KEYS = (
    "topology",
    "graph",
    "file",
    "profile",
    "hop_latency_us",
    "link_efficiency",
    "store_and_forward_bytes",
    "nvlink_gbps",
)

#: Fabric keys every topology uses.
FABRIC_COMMON_KEYS: tuple[str, ...] = (
    "topology",
    "gpus_per_host",
    "nvlink_gbps",
    "profile",
    "hop_latency_us",
    "link_efficiency",
    "store_and_forward_bytes",
    "storage",
)
#: The fabric keys each topology uses besides :data:`FABRIC_COMMON_KEYS` (one table: a new topology or a
#: new key is one entry here). Any other key of ``fabric`` is an error naming the key and the topology,
#: so that e.g. ``nic_gbps: 400`` on a fat-tree (whose NICs run at ``link_gbps``) is not silently ignored.
_NIC_SHARING = ("gpus_per_nic", "pcie_gbps")
TOPOLOGY_KEYS: dict[str, tuple[str, ...]] = {
    "single_switch": ("hosts", "nic_gbps", *_NIC_SHARING),
    "spine_leaf": (
        "leaves",
        "spines",
        "hosts_per_leaf",
        "links_per_spine",
        "uplink_gbps",
        "nic_gbps",
        *_NIC_SHARING,
    ),
    "fat_tree": ("k", "link_gbps", *_NIC_SHARING),
    "rail_optimized": ("hosts", "spines", "links_per_spine", "uplink_gbps", "nic_gbps", *_NIC_SHARING),
    "graph": ("file", "graph"),  # checked against _GRAPH_KEYS instead
}


def _check_topology_keys(ctx: Context, d: Mapping, path: str, topology: str) -> None:
    used = FABRIC_COMMON_KEYS + TOPOLOGY_KEYS.get(topology, ())
    for k in d:
        if k not in used:
            users = [t for t, keys in TOPOLOGY_KEYS.items() if k in keys]
            ctx.fail(
                join_path(path, k),
                f"key {k!r} is not used by the {topology} topology (it applies to {', '.join(users)})",
                f"for {topology}: {', '.join(used)}",
                value=str(k),
            )


STORAGE_RULES: dict[str, Rule | None] = {
    "hosts": int_rule("a number of storage hosts", ge=0, le=LIMITS["count_max"]),
    "gbps": SPEED,
    "leaves": None,  # list of leaf ids, checked against the fabric
}


def _parse_graph_fabric(ctx: Context, d: Mapping, kw: dict[str, Any], path: str) -> FabricSpec:
    """A ``topology: graph`` fabric: read ``file`` (relative to the scenario's folder) or take ``graph``,
    and build it once so that a bad graph fails here, naming the field."""
    import networkx as nx

    fabrics = graph_fabrics()  # the fabric room's readers (ainet_gym.scenario.graphs)
    for k in d:
        if k not in _GRAPH_KEYS:
            ctx.fail(
                join_path(path, k),
                f"{k!r} does not apply to a graph fabric (the graph gives hosts, GPUs, NICs and link speeds)",
                ", ".join(_GRAPH_KEYS),
                value=str(k),
            )
    if ("file" in d) == ("graph" in d):
        ctx.fail(
            path,
            "a graph fabric needs exactly one of 'file' and 'graph'",
            "file: a GraphML file or an edge list (relative to the scenario's folder), "
            "or graph: a networkx graph (from Python)",
        )
    if "file" in d:
        fpath = join_path(path, "file")
        name = text_rule("a file name", nonempty=True)(ctx, d["file"], fpath)
        base = Path(ctx.source).parent if ctx.source != "<dict>" else Path.cwd()
        file = (base / Path(name).expanduser()).resolve()
        if not file.is_file():
            ctx.fail(fpath, f"no such file: {file}", "a GraphML (.graphml) or edge-list file", name)
        try:
            graph = fabrics.read(file)
        except (ValueError, OSError, UnicodeDecodeError) as e:
            ctx.fail(fpath, f"cannot read the graph: {e}", "a GraphML (.graphml) or edge-list file", name)
        kw["file"] = str(file)
        if isinstance(d, dict):  # the scenario's raw mapping loads again from anywhere
            d["file"] = str(file)
    else:
        fpath = join_path(path, "graph")
        graph = d["graph"]
        if not isinstance(graph, nx.Graph):
            ctx.fail(fpath, f"expected a networkx graph, got {describe(graph)}", "a networkx graph", graph)
    kw.pop("graph", None)
    try:
        spec = fabrics.spec(graph, **kw)
        fabrics.check_size(graph, "the graph")  # counted before anything is built
        fabrics.build(spec)
    except ValueError as e:
        problem, _, allowed = str(e).partition("; allowed: ")
        ctx.fail(
            fpath,
            f"the graph is not a valid fabric: {problem}",
            allowed
            or "nodes with role gpu|switch|storage|nic|nvswitch (GPUs with a host), links with gbps > 0, "
            "every GPU reaching every other",
        )
    return spec


def parse_fabric(ctx: Context, v: Any) -> FabricSpec:
    """The ``fabric`` section (a mapping, or a networkx graph for ``topology: graph``) as a
    :class:`FabricSpec`: keys and values checked, the transport profile's defaults filled in, the
    topology's structure and the storage leaves checked."""
    path = "fabric"
    if v is None:
        ctx.fail(
            path, "required section 'fabric' is missing", f"a mapping with keys {', '.join(FABRIC_RULES)}"
        )
    if not isinstance(v, Mapping) and type(v).__module__.startswith("networkx"):
        v = {"topology": "graph", "graph": v}  # scenario["fabric"] = G
    d = as_mapping(ctx, v, path, FABRIC_RULES, "the fabric")
    kw = apply_rules(ctx, d, path, FABRIC_RULES)
    topology = kw.get("topology", spec_default(FabricSpec, "topology"))
    if topology != "graph":  # a graph fabric checks its own, shorter list of keys (_GRAPH_KEYS)
        _check_topology_keys(ctx, d, path, topology)

    profile = kw.get("profile", spec_default(FabricSpec, "profile"))
    for key, value in PROFILE_DEFAULTS[profile].items():
        if key not in kw:
            kw[key] = value
    if kw.get("topology") == "graph":
        return _parse_graph_fabric(ctx, d, kw, path)

    sd = optional_mapping(ctx, d, "storage", path, STORAGE_RULES, "storage hosts")
    spath = join_path(path, "storage")
    skw = apply_rules(ctx, sd, spath, STORAGE_RULES)
    leaves_raw = None
    if "leaves" in sd:
        leaves_raw = as_list(ctx, sd["leaves"], join_path(spath, "leaves"), "leaf ids")
        lp = join_path(spath, "leaves")
        skw["leaves"] = tuple(
            int_rule("a leaf id", ge=0)(ctx, x, f"{lp}[{i}]") for i, x in enumerate(leaves_raw)
        )
    fabric = FabricSpec(**kw, storage=StorageSpec(**skw))

    _check_fabric_structure(ctx, fabric, d, kw, path)
    _check_storage_leaves(ctx, fabric, spath)
    return fabric


def _check_fabric_structure(
    ctx: Context, fabric: FabricSpec, d: Mapping, kw: dict[str, Any], path: str
) -> None:
    """A fat tree's even k and whole edge ports per host, NICs shared evenly, PCIe only behind shared NICs."""
    if fabric.topology == "fat_tree" and fabric.k % 2:
        ctx.fail(
            join_path(path, "k"),
            f"fat_tree needs an even k, got {fabric.k}",
            "an even integer >= 2",
            fabric.k,
        )
    if fabric.gpus_per_host % fabric.gpus_per_nic:
        ctx.fail(
            join_path(path, "gpus_per_nic"),
            f"gpus_per_nic={fabric.gpus_per_nic} does not divide gpus_per_host={fabric.gpus_per_host} "
            "(the GPUs of a host share its NICs evenly)",
            f"a divisor of {fabric.gpus_per_host} (gpus_per_host: one NIC per host)",
            fabric.gpus_per_nic,
        )
    if "pcie_gbps" in d and fabric.gpus_per_nic == 1:
        ctx.fail(
            join_path(path, "pcie_gbps"),
            "pcie_gbps applies only to GPUs that share a NIC (gpus_per_nic > 1); with gpus_per_nic: 1 "
            "a GPU has no PCIe link in the model",
            "gpus_per_nic > 1 with pcie_gbps, or omit pcie_gbps",
            kw["pcie_gbps"],
        )
    if fabric.topology == "fat_tree":
        ports = fabric.k**3 // 4
        nics = fabric.gpus_per_host // fabric.gpus_per_nic
        if ports % nics:
            ctx.fail(
                join_path(path, "gpus_per_host"),
                f"a fat_tree with k={fabric.k} has {ports} edge ports (one per NIC), "
                f"not a multiple of the {nics} NICs of a host (gpus_per_host={fabric.gpus_per_host} / "
                f"gpus_per_nic={fabric.gpus_per_nic})",
                f"a divisor of {ports}"
                + ("" if fabric.gpus_per_nic == 1 else " for gpus_per_host / gpus_per_nic"),
                fabric.gpus_per_host,
            )


def _check_storage_leaves(ctx: Context, fabric: FabricSpec, spath: str) -> None:
    """``storage.leaves`` names existing leaves, each once."""
    n_leaves = fabric_leaf_count(fabric)
    seen: dict[int, int] = {}
    for i, leaf in enumerate(fabric.storage.leaves):
        lp = f"{spath}.leaves[{i}]"
        if leaf >= n_leaves:
            ctx.fail(
                lp,
                f"leaf {leaf} does not exist: the {fabric.topology} fabric has {n_leaves} "
                f"lea{'f' if n_leaves == 1 else 'ves'} (ids 0..{n_leaves - 1})",
                f"leaf ids 0..{n_leaves - 1}",
                leaf,
            )
        if leaf in seen:
            ctx.fail(
                lp, f"leaf {leaf} is listed twice (also at index {seen[leaf]})", "distinct leaf ids", leaf
            )
        seen[leaf] = i
