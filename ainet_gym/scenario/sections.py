"""The sections of a scenario, parsed and checked one by one: ``fabric`` (built-in topologies and graphs),
``workload.jobs`` with their collectives, ``workload.background``, ``dynamics`` (link failures, job churn),
``routing`` and ``reward``. Each parser takes the loader's context and the raw value and returns the frozen
specs of :mod:`ainet_gym.scenario.spec`; whether the whole scenario can run is
:mod:`ainet_gym.scenario.feasibility`'s question.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ainet_gym.scenario.graphs import graph_fabrics
from ainet_gym.scenario.rules import (
    COUNT,
    FRACTION,
    LIMITS,
    PROBABILITY,
    SPEED,
    STEPS,
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
    require_keys,
    spec_default,
    text_rule,
)
from ainet_gym.scenario.spec import (
    ALGORITHMS,
    BACKGROUND_KINDS,
    BACKGROUND_PATTERNS,
    CHUNKED_ALGORITHMS,
    OPS,
    PLACEMENTS,
    PROFILE_DEFAULTS,
    PROFILES,
    RANK_ORDERS,
    RATE_UPDATES,
    REROUTE_MODES,
    REWARD_KINDS,
    SPLIT_FLOWS_MODES,
    TOPOLOGIES,
    BackgroundSpec,
    CollectiveSpec,
    DynamicsSpec,
    FabricSpec,
    JobChurnSpec,
    JobSpec,
    LinkFailureSpec,
    ScheduledFailure,
    StorageSpec,
)

#: Link tiers that random link failures may hit (``dynamics.link_failures.tiers``): the network tiers
#: of :data:`ainet_gym.fabric.topology.TIERS` (NVLink excluded).
FAILURE_TIERS: tuple[str, ...] = (
    "nic",
    "leaf_spine",
    "edge_agg",
    "agg_core",
    "rail_spine",
    "storage",
    "pcie",
)

#: Names of links in ``dynamics.link_failures.scheduled[].link``, e.g. ``leaf0-spine1``, ``edge3-agg2``.
LINK_NAME_RE = re.compile(r"^(leaf|spine|edge|agg|core)\d+-(leaf|spine|edge|agg|core)\d+$")
_SHIFT_RE = re.compile(r"^\s*shift\s*:\s*([+-]?\d+)\s*$")

TOP_KEYS = ("name", "description", "seed", "fabric", "workload", "dynamics", "routing", "reward")
WORKLOAD_KEYS = ("jobs", "background")


# --------------------------------------------------------------------------- fabric


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


# --------------------------------------------------------------------------- jobs and collectives

#: the largest share weight of a job (``jobs[].share_weight``)
SHARE_WEIGHT_MAX = 1e6

JOB_RULES: dict[str, Rule | None] = {
    "name": text_rule("a job name", nonempty=True),
    "gpus": int_rule("a number of GPUs", ge=1, le=LIMITS["gpus"]),
    "placement": None,  # below
    "rank_order": enum_rule(RANK_ORDERS, "rank order"),
    "compute_ms": num_rule("a compute time in ms", ge=0, le=LIMITS["time_ms_max"]),
    "overlap": FRACTION,
    "start_ms": num_rule("a start time in ms", ge=0, le=LIMITS["time_ms_max"]),
    "start_jitter_ms": num_rule("a start-time jitter in ms", ge=0, le=LIMITS["time_ms_max"]),
    "collectives": None,  # below
    "share_weight": num_rule(
        "a share weight (the job's traffic-class ETS weight)", gt=0, le=SHARE_WEIGHT_MAX
    ),
}
_JOB_REQUIRED = {"name": "a non-empty string, unique among jobs", "gpus": "an integer >= 1"}

COLLECTIVE_RULES: dict[str, Rule | None] = {
    "op": enum_rule(OPS, "collective op"),
    "bytes": num_rule(
        "a number of bytes", gt=0, le=LIMITS["bytes_max"], note=" (buffer size in bytes, e.g. 1.0e9 for 1 GB)"
    ),
    "algorithm": enum_rule(ALGORITHMS, "algorithm"),
    "pattern": None,  # sendrecv only, below
    "skew": num_rule("a Zipf skew exponent", ge=0, le=LIMITS["skew_max"]),
    "skew_period_steps": int_rule("a number of decision steps", ge=1, le=LIMITS["steps_max"], null=True),
    "chunks": int_rule("a number of chunks", ge=1, le=LIMITS["chunks_max"]),
    "group_size": int_rule("a number of ranks per group", ge=2, le=LIMITS["gpus"], null=True),
    "group_stride": int_rule("a rank stride", ge=1, le=LIMITS["gpus"]),
}
_COLLECTIVE_REQUIRED = {"op": ", ".join(OPS), "bytes": "a number > 0 (buffer size in bytes, e.g. 1.0e9)"}


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _parse_collective(
    ctx: Context, v: Any, path: str, job: str, gpus: int, placement, gph: int
) -> CollectiveSpec:
    d = as_mapping(ctx, v, path, COLLECTIVE_RULES, "a collective")
    require_keys(ctx, d, path, ("op",), _COLLECTIVE_REQUIRED)
    op = COLLECTIVE_RULES["op"](ctx, d["op"], join_path(path, "op"))
    require_keys(ctx, d, path, ("bytes",), _COLLECTIVE_REQUIRED)
    kw = apply_rules(ctx, d, path, COLLECTIVE_RULES)
    gpus = _check_groups(ctx, d, kw, path, job, gpus)  # the checks below are per group
    if "algorithm" in d:
        _check_algorithm(ctx, kw["algorithm"], op, join_path(path, "algorithm"), job, gpus, placement, gph)
    _check_pattern(ctx, d, kw, op, join_path(path, "pattern"), job, gpus)
    if op != "alltoall":
        for key in ("skew", "skew_period_steps"):
            if key in kw and kw[key] != spec_default(CollectiveSpec, key):
                ctx.fail(
                    join_path(path, key),
                    f"{key} applies only to alltoall, not to {op}",
                    f"omit {key!r}",
                    kw[key],
                )
    if "chunks" in kw:
        _check_chunks(
            ctx, join_path(path, "chunks"), op, kw.get("algorithm", "ring"), kw["chunks"], job, gpus
        )
    return CollectiveSpec(**kw)


def _check_groups(ctx: Context, d: dict, kw: dict, path: str, job: str, gpus: int) -> int:
    """``group_size`` and ``group_stride`` tile the job's ranks; returns the ranks per group (the job's
    GPUs without groups)."""
    size, stride = kw.get("group_size"), kw.get("group_stride", 1)
    if size is None and stride != 1:
        ctx.fail(join_path(path, "group_stride"), "group_stride needs a group_size", "omit it, or give group_size",
                 stride)  # fmt: skip
    if size is None:
        return gpus
    if gpus % (size * stride):
        ctx.fail(
            join_path(path, "group_size"),
            f"groups of {size} ranks at stride {stride} must tile job {job!r} of {gpus} GPUs "
            f"({gpus} is not a multiple of {size} x {stride})",
            f"group_size x group_stride dividing {gpus}",
            size,
        )
    if d.get("algorithm") == "hierarchical":
        ctx.fail(join_path(path, "algorithm"), "hierarchical takes the job's hosts, not groups", "ring, tree or "
                 "halving_doubling with group_size; or omit group_size", "hierarchical")  # fmt: skip
    return size


def _check_algorithm(
    ctx: Context, alg: str, op: str, alg_path: str, job: str, gpus: int, placement, gph: int
) -> None:
    """The collective's ``algorithm`` fits its op and its number of ranks."""
    if op in ("alltoall", "sendrecv"):
        ctx.fail(alg_path, f"{op} takes no algorithm (got {alg!r})", "omit 'algorithm' for this op", alg)
    if op in ("reducescatter", "allgather") and alg != "ring":
        ctx.fail(alg_path, f"{op} supports only the ring algorithm, not {alg!r}", "ring", alg)
    if alg == "halving_doubling" and not _is_pow2(gpus):
        ctx.fail(
            alg_path,
            f"halving_doubling needs a power-of-two number of GPUs; job {job!r} has {gpus}",
            "gpus in 1, 2, 4, 8, 16, ...; or algorithm ring or tree",
            alg,
        )
    if alg == "hierarchical":
        _check_hierarchical(ctx, alg_path, job, gpus, placement, gph)


def _check_pattern(ctx: Context, d: dict, kw: dict, op: str, pat_path: str, job: str, gpus: int) -> None:
    """``pattern``: required by sendrecv (``shift:k`` with k not a multiple of the ranks, normalised in
    ``kw``), refused by every other op."""
    if op == "sendrecv":
        if d.get("pattern") is None:
            ctx.fail(pat_path, "sendrecv requires a pattern", "shift:k with an integer k, e.g. shift:1")
        pat = d["pattern"]
        m = _SHIFT_RE.match(pat) if isinstance(pat, str) else None
        if m is None:
            ctx.fail(
                pat_path,
                f"{describe(pat)} is not a sendrecv pattern",
                "shift:k with an integer k (rank i sends to rank (i+k) mod gpus), e.g. shift:1",
                pat,
            )
        shift = int(m.group(1))
        if shift % gpus == 0:
            ctx.fail(
                pat_path,
                f"shift:{shift} sends every rank to itself on job {job!r} of {gpus} GPU(s)",
                f"shift:k with k mod {gpus} != 0",
                pat,
            )
        kw["pattern"] = f"shift:{shift}"
    elif d.get("pattern") is not None:
        ctx.fail(
            pat_path,
            f"pattern applies only to sendrecv, not to {op}",
            "omit 'pattern' for this op",
            d["pattern"],
        )


def _check_chunks(ctx: Context, path: str, op: str, alg: str, chunks: int, job: str, gpus: int) -> None:
    if (op, alg) not in CHUNKED_ALGORITHMS:
        what = op if op in ("alltoall", "sendrecv") else f"{op} with algorithm {alg}"
        why = " (a ring is pipelined already)" if alg == "ring" and op not in ("alltoall", "sendrecv") else ""
        ctx.fail(
            path,
            f"chunks = {chunks}: chunks pipeline the stages of allreduce hierarchical or tree, not {what}{why}",
            "omit 'chunks' for this collective; or op allreduce with algorithm hierarchical or tree",
            chunks,
        )
    if chunks * 2 * gpus > LIMITS["chunk_flows"]:
        ctx.fail(
            path,
            f"{chunks} chunks on job {job!r} of {gpus} GPUs make about {chunks * 2 * gpus:,} flows "
            f"(chunks x 2 x gpus), above the limit of {int(LIMITS['chunk_flows']):,} "
            "(ainet_gym.scenario.loader.LIMITS['chunk_flows'])",
            f"chunks at most {max(1, int(LIMITS['chunk_flows'] // (2 * gpus)))}",
            chunks,
        )


def _check_hierarchical(ctx: Context, path: str, job: str, gpus: int, placement, gph: int) -> None:
    others = "or algorithm ring, tree or halving_doubling"
    if isinstance(placement, tuple):
        per_host: dict[int, int] = {}
        for g in placement:
            per_host[g // gph] = per_host.get(g // gph, 0) + 1
        if len(set(per_host.values())) > 1:
            ctx.fail(
                path,
                f"hierarchical needs the same number of GPUs on every host, but job {job!r} places "
                f"{dict(sorted(per_host.items()))} GPUs per host (host: count)",
                f"an explicit placement with equal GPUs per host, {others}",
                "hierarchical",
            )
    elif placement == "contiguous" and gpus % gph:
        ctx.fail(
            path,
            f"hierarchical needs whole hosts: job {job!r} has {gpus} GPUs, "
            f"not a multiple of gpus_per_host={gph}",
            f"gpus a multiple of {gph}, {others}",
            "hierarchical",
        )


def _parse_job(ctx: Context, v: Any, path: str, fabric: FabricSpec, n_gpus: int) -> JobSpec:
    d = as_mapping(ctx, v, path, JOB_RULES, "a job")
    require_keys(ctx, d, path, ("name",), _JOB_REQUIRED)
    name = JOB_RULES["name"](ctx, d["name"], join_path(path, "name"))
    require_keys(ctx, d, path, ("gpus",), _JOB_REQUIRED)
    kw = apply_rules(ctx, d, path, JOB_RULES)
    gpus = kw["gpus"]
    if gpus > n_gpus:
        ctx.fail(
            join_path(path, "gpus"),
            f"job {name!r} asks for {gpus} GPUs but the {fabric.topology} fabric has {n_gpus}",
            f"1..{n_gpus}",
            gpus,
        )

    placement: str | tuple[int, ...] = spec_default(JobSpec, "placement")
    ppath = join_path(path, "placement")
    if "placement" in d:
        p = d["placement"]
        allowed = f"{', '.join(PLACEMENTS)}, or a list of {gpus} distinct GPU ids in 0..{n_gpus - 1}"
        if isinstance(p, str):
            if p not in PLACEMENTS:
                ctx.fail(ppath, f"{p!r} is not a known placement", allowed, p, choices=PLACEMENTS)
            placement = p
        elif isinstance(p, list | tuple):
            ids = tuple(int_rule("a GPU id", ge=0)(ctx, x, f"{ppath}[{i}]") for i, x in enumerate(p))
            first: dict[int, int] = {}
            for i, g in enumerate(ids):
                if g >= n_gpus:
                    ctx.fail(
                        f"{ppath}[{i}]",
                        f"GPU id {g} of job {name!r} is out of range: the fabric has {n_gpus} GPUs",
                        f"GPU ids 0..{n_gpus - 1}",
                        g,
                    )
                if g in first:
                    ctx.fail(
                        f"{ppath}[{i}]",
                        f"GPU id {g} appears twice in the placement of job {name!r} (also at index {first[g]})",
                        "distinct GPU ids",
                        g,
                    )
                first[g] = i
            if len(ids) != gpus:
                ctx.fail(
                    ppath,
                    f"job {name!r} lists {len(ids)} GPU ids but has gpus: {gpus}",
                    f"exactly {gpus} GPU ids",
                    list(ids),
                )
            placement = ids
        else:
            ctx.fail(ppath, f"expected a placement, got {describe(p)}", allowed, p)
    kw["placement"] = placement

    cpath = join_path(path, "collectives")
    items = as_list(ctx, d.get("collectives"), cpath, "collectives ({op, bytes, ...})")
    kw["collectives"] = tuple(
        _parse_collective(ctx, c, f"{cpath}[{i}]", name, gpus, placement, fabric.gpus_per_host)
        for i, c in enumerate(items)
    )
    return JobSpec(**kw)


def parse_jobs(ctx: Context, v: Any, path: str, fabric: FabricSpec, n_gpus: int, initial: bool) -> tuple:
    items = as_list(ctx, v, path, "jobs")
    jobs: list[JobSpec] = []
    names: dict[str, int] = {}
    used: dict[int, str] = {}
    total = 0
    for i, item in enumerate(items):
        jpath = f"{path}[{i}]"
        job = _parse_job(ctx, item, jpath, fabric, n_gpus)
        if job.name in names:
            ctx.fail(
                join_path(jpath, "name"),
                f"job name {job.name!r} is used twice (also by {path}[{names[job.name]}])",
                "unique job names",
                job.name,
            )
        names[job.name] = i
        if not initial and job.start_jitter_ms > 0:
            ctx.fail(
                join_path(jpath, "start_jitter_ms"),
                f"a churn template starts when it arrives; start_jitter_ms {job.start_jitter_ms:g} applies "
                "to initial jobs only",
                "0 or no start_jitter_ms in templates",
                job.start_jitter_ms,
            )
        if initial:
            total += job.gpus
            if total > n_gpus:
                ctx.fail(
                    join_path(jpath, "gpus"),
                    f"job {job.name!r} brings the initial jobs to {total} GPUs but the fabric has {n_gpus} "
                    "(jobs may not share GPUs)",
                    f"at most {n_gpus} GPUs over all initial jobs",
                    job.gpus,
                )
            if isinstance(job.placement, tuple):
                for j, g in enumerate(job.placement):
                    if g in used:
                        ctx.fail(
                            f"{jpath}.placement[{j}]",
                            f"GPU {g} of job {job.name!r} is already used by job {used[g]!r} "
                            "(jobs may not share GPUs)",
                            "GPU ids not used by another job",
                            g,
                        )
                    used[g] = job.name
        jobs.append(job)
    return tuple(jobs)


# --------------------------------------------------------------------------- background

BACKGROUND_RULES: dict[str, Rule | None] = {
    "kind": enum_rule(BACKGROUND_KINDS, "background kind"),
    "gbps": SPEED,
    "pattern": enum_rule(BACKGROUND_PATTERNS, "background pattern"),
    "period_steps": STEPS,
    "duration_steps": STEPS,
    "offset_steps": int_rule("a number of decision steps", ge=0, le=LIMITS["steps_max"]),
    "offset_jitter_steps": int_rule("a number of decision steps", ge=0, le=LIMITS["steps_max"]),
    "job": text_rule("a job name", null=True),
    "flows_per_host": COUNT,
}


def parse_background(ctx: Context, v: Any, path: str, fabric: FabricSpec, jobs: tuple[JobSpec, ...]) -> tuple:
    out = []
    for i, item in enumerate(as_list(ctx, v, path, "background traffic entries")):
        bpath = f"{path}[{i}]"
        d = as_mapping(ctx, item, bpath, BACKGROUND_RULES, "a background traffic entry")
        if fabric.storage.hosts < 1:
            ctx.fail(
                bpath,
                "background traffic needs storage hosts, but fabric.storage.hosts is "
                f"{fabric.storage.hosts}; add fabric.storage.hosts",
                "fabric.storage.hosts >= 1, e.g. fabric: {storage: {hosts: 2, gbps: 400}}",
            )
        kw = apply_rules(ctx, d, bpath, BACKGROUND_RULES)
        bg = BackgroundSpec(**kw)
        if bg.pattern == "periodic" and bg.duration_steps > bg.period_steps:
            ctx.fail(
                join_path(bpath, "duration_steps"),
                f"duration_steps {bg.duration_steps} is longer than period_steps {bg.period_steps}",
                f"an integer in [1, {bg.period_steps}] (or pattern: constant)",
                bg.duration_steps,
            )
        if bg.offset_jitter_steps > 0 and bg.pattern != "periodic":
            ctx.fail(
                join_path(bpath, "offset_jitter_steps"),
                f"offset_jitter_steps {bg.offset_jitter_steps} needs pattern: periodic (the pattern is "
                f"{bg.pattern!r})",
                "0, or pattern: periodic",
                bg.offset_jitter_steps,
            )
        names = [j.name for j in jobs]
        if bg.job is not None and bg.job not in names:
            ctx.fail(
                join_path(bpath, "job"),
                f"no initial job named {bg.job!r}",
                f"null (all initial jobs) or one of {', '.join(names) or '(no jobs)'}",
                bg.job,
                choices=names,
            )
        out.append(bg)
    return tuple(out)


# --------------------------------------------------------------------------- dynamics, routing, reward

DYNAMICS_RULES: dict[str, Rule | None] = {
    "episode_steps": STEPS,
    "decision_interval_ms": num_rule("a time in ms", gt=0, le=LIMITS["time_ms_max"], null=True),
    "rate_updates": enum_rule(RATE_UPDATES, "rate update mode"),
    "rate_quantum_us": num_rule("a time in us", ge=0, le=LIMITS["time_ms_max"] * 1e3),
    "link_failures": None,
    "job_churn": None,
}
LINK_FAILURE_RULES: dict[str, Rule | None] = {
    "rate_per_step": PROBABILITY,
    "repair_steps": STEPS,
    "tiers": None,
    "scheduled": None,
}
SCHEDULED_RULES: dict[str, Rule | None] = {
    "link": None,
    "at_step": int_rule("a decision step", ge=0, le=LIMITS["steps_max"]),
    "until_step": int_rule("a decision step", ge=1, le=LIMITS["steps_max"], null=True),
    "factor": FRACTION,
}
_SCHEDULED_REQUIRED = {
    "link": "a link name such as leaf0-spine1 or edge0-agg1",
    "at_step": "an integer >= 0",
}
JOB_CHURN_RULES: dict[str, Rule | None] = {
    "arrival_rate": num_rule("a mean number of arrivals per step", ge=0, le=LIMITS["arrival_rate_max"]),
    "mean_steps": num_rule("a mean lifetime in steps", ge=1, le=LIMITS["steps_max"]),
    "max_jobs": int_rule("a number of job slots", ge=1, le=LIMITS["count_max"]),
    "templates": None,
}
ROUTING_RULES: dict[str, Rule | None] = {
    "max_paths": int_rule("a number of paths", ge=1, le=LIMITS["max_paths_max"]),
    "qps_per_connection": int_rule("a number of QPs", ge=1, le=LIMITS["count_max"]),
    "reroute": enum_rule(REROUTE_MODES, "reroute mode"),
    "split_flows": enum_rule(SPLIT_FLOWS_MODES, "split flows mode"),
    "ring_run_ahead_bytes": num_rule(
        "a number of bytes per ring hop", ge=1, le=LIMITS["bytes_max"], null=True
    ),
}
REWARD_RULES: dict[str, Rule | None] = {"kind": enum_rule(REWARD_KINDS, "reward kind")}


def _graph_link_ok(graph: Any, link: str) -> bool:
    """``A-B`` names two adjacent nodes of a graph fabric."""
    names = {str(n): n for n in graph.nodes}
    a, _, b = link.partition("-")
    return (
        a in names
        and b in names
        and (graph.has_edge(names[a], names[b]) or graph.has_edge(names[b], names[a]))
    )


def _parse_scheduled(ctx: Context, v: Any, path: str, fabric: FabricSpec | None = None) -> tuple:
    out = []
    graph = fabric.graph if fabric is not None and fabric.topology == "graph" else None
    for i, item in enumerate(
        as_list(ctx, v, path, "scheduled failures ({link, at_step, until_step, factor})")
    ):
        spath = f"{path}[{i}]"
        d = as_mapping(ctx, item, spath, SCHEDULED_RULES, "a scheduled failure")
        require_keys(ctx, d, spath, ("link", "at_step"), _SCHEDULED_REQUIRED)
        link = d["link"]
        allowed = "<node>-<node> with nodes leafN, spineN, edgeN, aggN or coreN, e.g. leaf0-spine1"
        if graph is not None:
            allowed = "<node>-<node> naming two adjacent switches of the graph fabric"
            if not isinstance(link, str) or not _graph_link_ok(graph, link):
                ctx.fail(
                    join_path(spath, "link"), f"{describe(link)} is not a link of the graph", allowed, link
                )
        elif not isinstance(link, str) or not LINK_NAME_RE.match(link):
            ctx.fail(join_path(spath, "link"), f"{describe(link)} is not a link name", allowed, link)
        a, _, b = link.partition("-")
        if a == b:
            ctx.fail(join_path(spath, "link"), f"{link!r} joins a node to itself", allowed, link)
        kw = apply_rules(ctx, d, spath, SCHEDULED_RULES)
        kw["link"] = link
        sf = ScheduledFailure(**kw)
        if sf.until_step is not None and sf.until_step <= sf.at_step:
            ctx.fail(
                join_path(spath, "until_step"),
                f"until_step {sf.until_step} is not after at_step {sf.at_step}",
                f"an integer > {sf.at_step}, or null (never repaired)",
                sf.until_step,
            )
        out.append(sf)
    return tuple(out)


def parse_dynamics(
    ctx: Context, top: Mapping, fabric: FabricSpec, n_gpus: int
) -> tuple[DynamicsSpec, Mapping]:
    path = "dynamics"
    d = optional_mapping(ctx, top, "dynamics", "", DYNAMICS_RULES, "episode dynamics")
    kw = apply_rules(ctx, d, path, DYNAMICS_RULES)

    lpath = join_path(path, "link_failures")
    ld = optional_mapping(
        ctx, d, "link_failures", path, LINK_FAILURE_RULES, "random and scheduled link failures"
    )
    lkw = apply_rules(ctx, ld, lpath, LINK_FAILURE_RULES)
    if "tiers" in ld:
        tpath = join_path(lpath, "tiers")
        tier_rule = enum_rule(FAILURE_TIERS, "link tier")
        tiers = tuple(
            tier_rule(ctx, t, f"{tpath}[{i}]")
            for i, t in enumerate(as_list(ctx, ld["tiers"], tpath, "tiers"))
        )
        for i, t in enumerate(tiers):
            if t in tiers[:i]:
                ctx.fail(f"{tpath}[{i}]", f"tier {t!r} is listed twice", "distinct tier names", t)
        lkw["tiers"] = tiers
    if "scheduled" in ld:
        lkw["scheduled"] = _parse_scheduled(ctx, ld["scheduled"], join_path(lpath, "scheduled"), fabric)
    kw["link_failures"] = LinkFailureSpec(**lkw)

    cpath = join_path(path, "job_churn")
    cd = optional_mapping(ctx, d, "job_churn", path, JOB_CHURN_RULES, "job arrivals and departures")
    ckw = apply_rules(ctx, cd, cpath, JOB_CHURN_RULES)
    if "templates" in cd:
        ckw["templates"] = parse_jobs(
            ctx, cd["templates"], join_path(cpath, "templates"), fabric, n_gpus, initial=False
        )
    kw["job_churn"] = JobChurnSpec(**ckw)
    return DynamicsSpec(**kw), cd
