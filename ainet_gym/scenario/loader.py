"""Load and validate scenarios (YAML files, shipped scenario names, or dicts) into :mod:`ainet_gym.scenario.spec`.

The schema is the one of docs/scenarios.md ("Schema")::

    name, description, seed,
    fabric:   the fields of FabricSpec, plus storage: {hosts, gbps, leaves}; or {topology: graph, file | graph}
    workload: {jobs: [JobSpec fields, collectives: [CollectiveSpec fields]], background: [BackgroundSpec fields]}
    dynamics: {episode_steps, decision_interval_ms,
               link_failures: {rate_per_step, repair_steps, tiers, scheduled: [{link, at_step, until_step, factor}]},
               job_churn: {arrival_rate, mean_steps, max_jobs, templates: [job, ...]}}
    routing:  {max_paths, qps_per_connection, reroute}
    reward:   {kind}

Every problem raises :class:`ScenarioError` with the message
``"<file>: <field.path>: <problem>; allowed: <what is allowed>"`` (plus ``(did you mean ...?)`` when a
close match exists). Validation stops at the first problem.

Decisions worth knowing:

- Defaults are the dataclass defaults of :mod:`ainet_gym.scenario.spec`; a key absent from the scenario is not
  passed to the dataclass. ``fabric.hop_latency_us`` and ``fabric.link_efficiency`` default to the values
  of the fabric ``profile`` (:data:`ainet_gym.scenario.spec.PROFILE_DEFAULTS`); explicit values win.
- Numbers: ``bool`` is not a number; an integral float (``8.0``) is accepted where an integer is
  required; NaN and infinities are rejected. YAML files are read with a loader that also parses
  ``1e9`` (no dot) as a float, which plain YAML 1.1 would read as a string. Duplicate keys in a YAML
  mapping are an error (plain PyYAML silently keeps the last one).
- GPU count of a fabric (:func:`fabric_gpu_count`): single_switch, rail_optimized and graph ``hosts *
  gpus_per_host`` (a graph's counted from it); spine_leaf ``leaves * hosts_per_leaf * gpus_per_host``;
  fat_tree ``k**3 / 4 * gpus_per_nic`` (one NIC per edge-switch port, as
  :func:`ainet_gym.fabric.topology.build_fabric` builds it), which must be a multiple of ``gpus_per_host``.
- Keys that the chosen topology does not use (e.g. ``k`` on a spine_leaf fabric, ``nic_gbps`` on a
  fat_tree, whose NICs run at ``link_gbps``) are an error naming the key and the topology
  (:data:`TOPOLOGY_KEYS`). A ``graph`` fabric takes only ``file`` or ``graph`` (exactly one),
  ``profile``, ``hop_latency_us``, ``link_efficiency`` and ``nvlink_gbps``; ``file`` is relative to the
  scenario file's folder (the working directory for a dict) and is stored resolved in ``Scenario.raw``.
  The graph is built once at load time, so a bad graph fails here (``fabric.file`` / ``fabric.graph``)
  with the problem :func:`ainet_gym.fabric_from_graph` names. ``fabric: <networkx graph>`` is short for
  ``{topology: graph, graph: <it>}``.
- ``gpus_per_nic`` must divide ``gpus_per_host``; ``pcie_gbps`` is only accepted with ``gpus_per_nic > 1``.
  On a fat_tree, ``k**3 / 4`` edge ports hold one NIC each: the fabric has ``k**3 / 4 * gpus_per_nic`` GPUs.
- Sizes are finite and below the documented ceilings of :data:`LIMITS`; a size estimate (GPUs, links,
  equal-cost paths, iterations per decision interval, memory) refuses a scenario that would hang or
  exhaust memory, with the estimate and the key to change.
- Cross-field: a scheduled failure names two adjacent switches of this fabric; random failures hit
  tiers the fabric has; every job's iteration takes time (``compute_ms > 0`` or bytes to move).
- ``alltoall`` and ``sendrecv`` take no ``algorithm``; ``reducescatter``/``allgather`` take only ``ring``;
  ``skew``/``skew_period_steps`` apply to ``alltoall`` only; ``pattern`` to ``sendrecv`` only (required
  there, ``shift:k``; stored normalised as ``"shift:<k>"``).
- ``chunks`` (pipelined stages) applies to ``allreduce`` with algorithm ``hierarchical`` or ``tree`` only
  (a ring is pipelined already); at most ``LIMITS["chunks_max"]``, and ``chunks x 2 x gpus`` (about the
  flows the engine tracks) at most ``LIMITS["chunk_flows"]``.
- ``hierarchical`` needs whole hosts: with contiguous placement ``gpus`` must be a multiple of
  ``gpus_per_host``; with an explicit placement every host used must hold the same number of the job's
  GPUs. spread/random placements are resolved by the engine.
- Initial jobs may not share GPUs: their GPU counts must sum to at most the fabric's GPUs and explicit
  placements may not overlap. Churn templates are checked one by one against the fabric.
- Per-seed variation: ``start_jitter_ms`` (initial jobs only; a churn template with it is an error) and
  ``offset_jitter_steps`` (``pattern: periodic`` only) are drawn from the episode seed at each reset;
  0, the default, keeps every episode of a seed identical to one without the field.
- ``dynamics.job_churn.max_jobs`` must be at least the number of initial jobs when churn is on
  (``arrival_rate > 0``) or when ``max_jobs`` is given explicitly.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import numbers
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

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
    TOPOLOGIES,
    BackgroundSpec,
    CollectiveSpec,
    DynamicsSpec,
    FabricSpec,
    JobChurnSpec,
    JobSpec,
    LinkFailureSpec,
    RewardSpec,
    RoutingSpec,
    Scenario,
    ScheduledFailure,
    StorageSpec,
    fabric_gpu_count,
)
from ainet_gym.units import GBPS_TO_BYTES_PER_S

__all__ = [
    "FABRIC_COMMON_KEYS",
    "FAILURE_TIERS",
    "LIMITS",
    "TOPOLOGY_KEYS",
    "TOPOLOGY_TIERS",
    "ScenarioError",
    "fabric_gpu_count",
    "fabric_leaf_count",
    "fabric_size",
    "fabric_tiers",
    "iteration_estimate",
    "list_scenarios",
    "load_scenario",
    "scenarios_dir",
]

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

_TOP_KEYS = ("name", "description", "seed", "fabric", "workload", "dynamics", "routing", "reward")
_WORKLOAD_KEYS = ("jobs", "background")


# --------------------------------------------------------------------------- errors


class ScenarioError(ValueError):
    """A scenario that does not validate.

    ``str(err)`` is ``"<file>: <field.path>: <problem>; allowed: <allowed>"``, with ``(did you mean
    ...?)`` appended when there is a close match. Attributes: ``source`` (file, or ``"<dict>"``),
    ``field`` (dotted path with list indices, e.g. ``workload.jobs[2].collectives[0].bytes``; ``""``
    for file-level problems), ``value`` (the offending value), ``problem``, ``allowed``, ``hint``.
    """

    def __init__(
        self,
        source: str,
        field: str,
        problem: str,
        allowed: str = "",
        value: Any = None,
        hint: str | None = None,
    ) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        self.allowed = allowed
        self.value = value
        self.hint = hint
        msg = ": ".join([p for p in (source, field) if p] + [problem])
        if allowed:
            msg += f"; allowed: {allowed}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)

    def __reduce__(self):  # picklable across processes (vector envs)
        return (type(self), (self.source, self.field, self.problem, self.allowed, self.value, self.hint))


def _did_you_mean(value: Any, choices: Iterable[Any]) -> str | None:
    if not isinstance(value, str):
        return None
    choices = [str(c) for c in choices]
    norm = value.strip().lower().replace("-", "_").replace(" ", "_")
    match = difflib.get_close_matches(norm, choices, n=1, cutoff=0.6)
    if not match and norm != value:
        match = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    if not match and len(norm) >= 3:  # a prefix of a longer name: 'rate' -> 'rate_per_step'
        match = [c for c in choices if c.startswith(norm) or norm.startswith(c)][:1]
    return f"did you mean {match[0]!r}?" if match else None


class _Ctx:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str, allowed: str = "", value: Any = None, choices=None):
        hint = _did_you_mean(value, choices) if choices is not None else None
        raise ScenarioError(self.source, path, problem, allowed, value, hint)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _desc(v: Any) -> str:
    """Human description of a value's type and value, for 'got ...' messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {v}"
    if isinstance(v, str):  # a long one (a whole file given as the scenario) is not echoed
        return f"string {v!r}" if len(v) <= 80 else f"string {v[:60]!r}... ({len(v):,} characters)"
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, list | tuple):
        return "a list"
    if isinstance(v, numbers.Integral) and abs(int(v)) >= 10**30:
        return _digits(v)
    if isinstance(v, _LongNumber):
        return repr(v)
    if isinstance(v, numbers.Number):
        return f"{v!r}"
    return f"{type(v).__name__} {v!r}"[:200]


def _digits(v: int) -> str:
    """``"an integer of N digits"`` (for integers too long to print; Python refuses above 4,300 digits)."""
    return f"an integer of about {max(1, int(abs(int(v)).bit_length() * 0.30103) + 1):,} digits"


def _fmt(x: float) -> str:
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        if abs(x) < 10**30:
            return str(int(x))
        if abs(x) >= 10**300:
            return _digits(x)
    x = float(x)
    if abs(x) >= 1e16 or (x != 0 and abs(x) < 1e-4):
        return f"{x:.6g}"
    return str(int(x)) if x.is_integer() else repr(x)


# --------------------------------------------------------------------------- scalar rules

_Rule = Callable[[_Ctx, Any, str], Any]


def _range_text(noun: str, ge=None, gt=None, le=None, lt=None) -> str:
    lo, lo_open = (gt, True) if gt is not None else (ge, False)
    hi, hi_open = (lt, True) if lt is not None else (le, False)
    if lo is not None and hi is not None:
        return f"{noun} in {'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{noun} {'>' if lo_open else '>='} {_fmt(lo)}"
    if hi is not None:
        return f"{noun} {'<' if hi_open else '<='} {_fmt(hi)}"
    return noun


def _check_range(ctx: _Ctx, x: float, path: str, allowed: str, ge=None, gt=None, le=None, lt=None) -> None:
    if (
        (ge is not None and x < ge)
        or (gt is not None and x <= gt)
        or (le is not None and x > le)
        or (lt is not None and x >= lt)
    ):
        ctx.fail(path, f"{_fmt(x)} is out of range", allowed, value=x)


def _num(
    what: str = "a number", *, ge=None, gt=None, le=None, lt=None, null: bool = False, note: str = ""
) -> _Rule:
    allowed = _range_text("a number", ge=ge, gt=gt, le=le, lt=lt) + (" or null" if null else "") + note

    def rule(ctx: _Ctx, v: Any, path: str) -> float | None:
        if v is None and null:
            return None
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            ctx.fail(path, f"expected {what}, got {_desc(v)}", allowed, value=v)
        try:
            x = float(v)
        except OverflowError:  # an integer beyond the float range
            ctx.fail(path, f"expected a finite number, got {_desc(v)}", allowed, value=None)
        if not math.isfinite(x):
            ctx.fail(path, f"expected a finite number, got {v!r}", allowed, value=v)
        _check_range(ctx, x, path, allowed, ge=ge, gt=gt, le=le, lt=lt)
        return x

    return rule


def _int(what: str = "an integer", *, ge=None, gt=None, le=None, null: bool = False) -> _Rule:
    allowed = _range_text("an integer", ge=ge, gt=gt, le=le) + (" or null" if null else "")

    def rule(ctx: _Ctx, v: Any, path: str) -> int | None:
        if v is None and null:
            return None
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            ctx.fail(path, f"expected {what}, got {_desc(v)}", allowed, value=v)
        if isinstance(v, numbers.Integral):
            n = int(v)
        else:
            x = float(v)
            if not (math.isfinite(x) and x.is_integer()):
                ctx.fail(path, f"expected {what}, got non-integral {v!r}", allowed, value=v)
            n = int(x)
        _check_range(ctx, n, path, allowed, ge=ge, gt=gt, le=le)
        return n

    return rule


def _enum(choices: tuple[str, ...], what: str) -> _Rule:
    allowed = ", ".join(choices)

    def rule(ctx: _Ctx, v: Any, path: str) -> str:
        if not isinstance(v, str):
            ctx.fail(path, f"expected a {what} name, got {_desc(v)}", allowed, value=v)
        if v not in choices:
            ctx.fail(path, f"{v!r} is not a known {what}", allowed, value=v, choices=choices)
        return v

    return rule


def _text(what: str = "a string", *, nonempty: bool = False, null: bool = False) -> _Rule:
    allowed = ("a non-empty string" if nonempty else "a string") + (" or null" if null else "")

    def rule(ctx: _Ctx, v: Any, path: str) -> str | None:
        if v is None and null:
            return None
        if not isinstance(v, str):
            ctx.fail(path, f"expected {what}, got {_desc(v)}", allowed, value=v)
        if nonempty and not v.strip():
            ctx.fail(path, f"expected {what}, got an empty string", allowed, value=v)
        return v

    return rule


#: Ceilings of single values and of the size of a scenario, checked by :func:`load_scenario` so that a
#: scenario that would hang or exhaust memory is refused with the key to change instead of being built.
#: Documented and overridable (``ainet_gym.scenario.loader.LIMITS["memory_gib"] = 64``, before loading):
#:
#: - ``gbps_min``/``gbps_max``: any link speed or offered rate, Gbit/s (1 Mbit/s .. 1 Pbit/s);
#: - ``bytes_max``: a collective's buffer size (1 PB); ``time_ms_max``: compute, start and decision times
#:   (1e7 ms, about 2.8 hours); ``latency_us_max``: per-hop latency (1 s); ``efficiency_min``;
#: - ``count_max``: any count of switches, hosts, links per spine, GPUs per host, flows, QPs or job slots;
#: - ``steps_max``: episode length and step counts; ``arrival_rate_max``: mean job arrivals per step;
#: - ``skew_max``: Zipf exponent of a skewed AllToAll; ``max_paths_max``: ``routing.max_paths``;
#: - ``chunks_max``: ``chunks`` of a pipelined collective; ``chunk_flows``: its ``chunks x 2 x gpus``, about
#:   the flows the engine tracks for it (every chunk of every stage is a phase of its own flows);
#: - ``gpus``, ``links``: GPUs and directed links of the fabric (estimated from the spec);
#: - ``ecmp_set``: equal-cost paths between two leaves, enumerated before the ``max_paths`` cap;
#: - ``iterations_per_interval``: iterations of the fastest job in one decision interval: the interval
#:   over an upper bound of the job's ideal step (:mod:`ainet_gym.scenario.estimate`: alpha-beta at the
#:   bottleneck link, within [1, 2] x the ideal twin's step, so the estimate lies in [true / 2, true]);
#:   each iteration costs a few engine events;
#: - ``memory_gib``: the estimated memory of building and running one copy of the scenario, further
#:   capped at 80% of the machine's physical memory;
#: - ``file_bytes``: a scenario, GraphML or edge-list file (read only below it: 64 MiB);
#: - ``yaml_depth``: nesting of lists and mappings in a scenario file or dict;
#: - ``number_digits``: digits of any number written in a scenario or graph file (a seed included);
#: - ``history_max``: the env's ``history`` (intervals of link utilisation in the observation), also the
#:   most a model's metadata may ask for;
#: - ``link_windows_max``: ``simulate --link-windows``; ``records_max``: the per-link and per-connection
#:   records of ``simulate --links/--flows`` over all steps.
LIMITS: dict[str, float] = {
    "gbps_min": 1e-3,
    "gbps_max": 1e6,
    "bytes_max": 1e15,
    "time_ms_max": 1e7,
    "latency_us_max": 1e6,
    "efficiency_min": 1e-3,
    "count_max": 100_000,
    "steps_max": 10_000_000,
    "arrival_rate_max": 1_000,
    "skew_max": 16,
    "max_paths_max": 256,
    "chunks_max": 1024,
    "chunk_flows": 1_000_000,
    "gpus": 65_536,
    "links": 1_000_000,
    "ecmp_set": 65_536,
    "iterations_per_interval": 10_000,
    "memory_gib": 16,
    "file_bytes": 64 * 2**20,
    "yaml_depth": 64,
    "number_digits": 100,
    "link_windows_max": 1_000,
    "history_max": 1_000,
    "records_max": 50_000_000,
}
_L = LIMITS

_SPEED = _num("a link speed in Gbit/s", ge=_L["gbps_min"], le=_L["gbps_max"], note=" (Gbit/s per direction)")
_COUNT = _int("a count", ge=1, le=_L["count_max"])
_STEPS = _int("a number of decision steps", ge=1, le=_L["steps_max"])
_PROB = _num("a probability", ge=0, le=1)
_FRACTION = _num("a fraction", ge=0, le=1)


# --------------------------------------------------------------------------- structure helpers


def _default(cls, name: str) -> Any:
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise KeyError(name)


def _mapping(ctx: _Ctx, v: Any, path: str, keys: Iterable[str], what: str) -> Mapping:
    keys = tuple(keys)
    if not isinstance(v, Mapping):
        ctx.fail(
            path, f"expected a mapping ({what}), got {_desc(v)}", f"a mapping with keys {', '.join(keys)}"
        )
    for k in v:
        if k not in keys:
            ctx.fail(_join(path, k), f"unknown key {k!r}", ", ".join(keys), value=str(k), choices=keys)
    return v


def _optional_mapping(ctx: _Ctx, d: Mapping, key: str, path: str, keys: Iterable[str], what: str) -> Mapping:
    """A sub-mapping that may be absent or null (meaning: all defaults)."""
    v = d.get(key)
    if v is None:
        return {}
    return _mapping(ctx, v, _join(path, key), keys, what)


def _list(ctx: _Ctx, v: Any, path: str, what: str, null_ok: bool = True) -> list:
    if v is None and null_ok:
        return []
    if isinstance(v, str | bytes) or not isinstance(v, list | tuple):
        ctx.fail(path, f"expected a list ({what}), got {_desc(v)}", f"a list of {what}")
    return list(v)


def _require(ctx: _Ctx, d: Mapping, path: str, keys: Iterable[str], allowed: dict[str, str]) -> None:
    for k in keys:
        if k not in d:
            ctx.fail(_join(path, k), f"required field {k!r} is missing", allowed[k])


def _apply(ctx: _Ctx, d: Mapping, path: str, rules: dict[str, _Rule | None]) -> dict[str, Any]:
    """Validate the keys of `d` that have a scalar rule; return the converted values (absent keys left out,
    so the dataclass default applies)."""
    return {k: rule(ctx, d[k], _join(path, k)) for k, rule in rules.items() if rule is not None and k in d}


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


_FABRIC_RULES: dict[str, _Rule | None] = {
    "topology": _enum(TOPOLOGIES, "topology"),
    "leaves": _COUNT,
    "spines": _COUNT,
    "hosts_per_leaf": _COUNT,
    "links_per_spine": _COUNT,
    "uplink_gbps": _SPEED,
    "hosts": _COUNT,
    "k": _int("an even integer", ge=2, le=_L["count_max"]),
    "link_gbps": _SPEED,
    "gpus_per_host": _COUNT,
    "nic_gbps": _SPEED,
    "nvlink_gbps": _SPEED,
    "profile": _enum(PROFILES, "fabric profile"),
    "hop_latency_us": _num("a latency in microseconds", ge=0, le=_L["latency_us_max"]),
    "link_efficiency": _num("an efficiency factor", ge=_L["efficiency_min"], le=1),
    "storage": None,  # nested, below
    "gpus_per_nic": _COUNT,
    "pcie_gbps": _SPEED,
    "graph": None,  # topology graph: a networkx graph (from Python), below
    "file": None,  # topology graph: GraphML or edge list, relative to the scenario's folder, below
}
#: Fabric keys of a graph fabric (the graph itself gives hosts, GPUs, NICs, switches and link speeds).
_GRAPH_KEYS = ("topology", "graph", "file", "profile", "hop_latency_us", "link_efficiency", "nvlink_gbps")

#: Fabric keys every topology uses.
FABRIC_COMMON_KEYS: tuple[str, ...] = (
    "topology",
    "gpus_per_host",
    "nvlink_gbps",
    "profile",
    "hop_latency_us",
    "link_efficiency",
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


def _check_topology_keys(ctx: _Ctx, d: Mapping, path: str, topology: str) -> None:
    used = FABRIC_COMMON_KEYS + TOPOLOGY_KEYS.get(topology, ())
    for k in d:
        if k not in used:
            users = [t for t, keys in TOPOLOGY_KEYS.items() if k in keys]
            ctx.fail(
                _join(path, k),
                f"key {k!r} is not used by the {topology} topology (it applies to {', '.join(users)})",
                f"for {topology}: {', '.join(used)}",
                value=str(k),
            )


_STORAGE_RULES: dict[str, _Rule | None] = {
    "hosts": _int("a number of storage hosts", ge=0, le=_L["count_max"]),
    "gbps": _SPEED,
    "leaves": None,  # list of leaf ids, checked against the fabric
}


def _parse_graph_fabric(ctx: _Ctx, d: Mapping, kw: dict[str, Any], path: str) -> FabricSpec:
    """A ``topology: graph`` fabric: read ``file`` (relative to the scenario's folder) or take ``graph``,
    and build it once so that a bad graph fails here, naming the field."""
    import networkx as nx

    from ainet_gym.fabric.topology import build_fabric, check_graph_size, graph_spec, read_fabric_graph

    for k in d:
        if k not in _GRAPH_KEYS:
            ctx.fail(
                _join(path, k),
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
        fpath = _join(path, "file")
        name = _text("a file name", nonempty=True)(ctx, d["file"], fpath)
        base = Path(ctx.source).parent if ctx.source != "<dict>" else Path.cwd()
        file = (base / Path(name).expanduser()).resolve()
        if not file.is_file():
            ctx.fail(fpath, f"no such file: {file}", "a GraphML (.graphml) or edge-list file", name)
        try:
            graph = read_fabric_graph(file)
        except (ValueError, OSError, UnicodeDecodeError) as e:
            ctx.fail(fpath, f"cannot read the graph: {e}", "a GraphML (.graphml) or edge-list file", name)
        kw["file"] = str(file)
        if isinstance(d, dict):  # the scenario's raw mapping loads again from anywhere
            d["file"] = str(file)
    else:
        fpath = _join(path, "graph")
        graph = d["graph"]
        if not isinstance(graph, nx.Graph):
            ctx.fail(fpath, f"expected a networkx graph, got {_desc(graph)}", "a networkx graph", graph)
    kw.pop("graph", None)
    try:
        spec = graph_spec(graph, **kw)
        check_graph_size(graph, "the graph")  # counted before anything is built
        build_fabric(spec)
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


def _parse_fabric(ctx: _Ctx, v: Any) -> FabricSpec:
    path = "fabric"
    if v is None:
        ctx.fail(
            path, "required section 'fabric' is missing", f"a mapping with keys {', '.join(_FABRIC_RULES)}"
        )
    if not isinstance(v, Mapping) and type(v).__module__.startswith("networkx"):
        v = {"topology": "graph", "graph": v}  # scenario["fabric"] = G
    d = _mapping(ctx, v, path, _FABRIC_RULES, "the fabric")
    kw = _apply(ctx, d, path, _FABRIC_RULES)
    topology = kw.get("topology", _default(FabricSpec, "topology"))
    if topology != "graph":  # a graph fabric checks its own, shorter list of keys (_GRAPH_KEYS)
        _check_topology_keys(ctx, d, path, topology)

    profile = kw.get("profile", _default(FabricSpec, "profile"))
    for key, value in PROFILE_DEFAULTS[profile].items():
        if key not in kw:
            kw[key] = value
    if kw.get("topology") == "graph":
        return _parse_graph_fabric(ctx, d, kw, path)

    sd = _optional_mapping(ctx, d, "storage", path, _STORAGE_RULES, "storage hosts")
    spath = _join(path, "storage")
    skw = _apply(ctx, sd, spath, _STORAGE_RULES)
    leaves_raw = None
    if "leaves" in sd:
        leaves_raw = _list(ctx, sd["leaves"], _join(spath, "leaves"), "leaf ids")
        lp = _join(spath, "leaves")
        skw["leaves"] = tuple(_int("a leaf id", ge=0)(ctx, x, f"{lp}[{i}]") for i, x in enumerate(leaves_raw))
    fabric = FabricSpec(**kw, storage=StorageSpec(**skw))

    # topology-specific structure
    if fabric.topology == "fat_tree" and fabric.k % 2:
        ctx.fail(
            _join(path, "k"),
            f"fat_tree needs an even k, got {fabric.k}",
            "an even integer >= 2",
            fabric.k,
        )
    if fabric.gpus_per_host % fabric.gpus_per_nic:
        ctx.fail(
            _join(path, "gpus_per_nic"),
            f"gpus_per_nic={fabric.gpus_per_nic} does not divide gpus_per_host={fabric.gpus_per_host} "
            "(the GPUs of a host share its NICs evenly)",
            f"a divisor of {fabric.gpus_per_host} (gpus_per_host: one NIC per host)",
            fabric.gpus_per_nic,
        )
    if "pcie_gbps" in d and fabric.gpus_per_nic == 1:
        ctx.fail(
            _join(path, "pcie_gbps"),
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
                _join(path, "gpus_per_host"),
                f"a fat_tree with k={fabric.k} has {ports} edge ports (one per NIC), "
                f"not a multiple of the {nics} NICs of a host (gpus_per_host={fabric.gpus_per_host} / "
                f"gpus_per_nic={fabric.gpus_per_nic})",
                f"a divisor of {ports}"
                + ("" if fabric.gpus_per_nic == 1 else " for gpus_per_host / gpus_per_nic"),
                fabric.gpus_per_host,
            )
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
    return fabric


# --------------------------------------------------------------------------- jobs and collectives

_JOB_RULES: dict[str, _Rule | None] = {
    "name": _text("a job name", nonempty=True),
    "gpus": _int("a number of GPUs", ge=1, le=_L["gpus"]),
    "placement": None,  # below
    "rank_order": _enum(RANK_ORDERS, "rank order"),
    "compute_ms": _num("a compute time in ms", ge=0, le=_L["time_ms_max"]),
    "overlap": _FRACTION,
    "start_ms": _num("a start time in ms", ge=0, le=_L["time_ms_max"]),
    "start_jitter_ms": _num("a start-time jitter in ms", ge=0, le=_L["time_ms_max"]),
    "collectives": None,  # below
}
_JOB_REQUIRED = {"name": "a non-empty string, unique among jobs", "gpus": "an integer >= 1"}

_COLLECTIVE_RULES: dict[str, _Rule | None] = {
    "op": _enum(OPS, "collective op"),
    "bytes": _num(
        "a number of bytes", gt=0, le=_L["bytes_max"], note=" (buffer size in bytes, e.g. 1.0e9 for 1 GB)"
    ),
    "algorithm": _enum(ALGORITHMS, "algorithm"),
    "pattern": None,  # sendrecv only, below
    "skew": _num("a Zipf skew exponent", ge=0, le=_L["skew_max"]),
    "skew_period_steps": _int("a number of decision steps", ge=1, le=_L["steps_max"], null=True),
    "chunks": _int("a number of chunks", ge=1, le=_L["chunks_max"]),
    "group_size": _int("a number of ranks per group", ge=2, le=_L["gpus"], null=True),
    "group_stride": _int("a rank stride", ge=1, le=_L["gpus"]),
}
_COLLECTIVE_REQUIRED = {"op": ", ".join(OPS), "bytes": "a number > 0 (buffer size in bytes, e.g. 1.0e9)"}


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _parse_collective(
    ctx: _Ctx, v: Any, path: str, job: str, gpus: int, placement, gph: int
) -> CollectiveSpec:
    d = _mapping(ctx, v, path, _COLLECTIVE_RULES, "a collective")
    _require(ctx, d, path, ("op",), _COLLECTIVE_REQUIRED)
    op = _COLLECTIVE_RULES["op"](ctx, d["op"], _join(path, "op"))
    _require(ctx, d, path, ("bytes",), _COLLECTIVE_REQUIRED)
    kw = _apply(ctx, d, path, _COLLECTIVE_RULES)
    alg_path = _join(path, "algorithm")
    size, stride = kw.get("group_size"), kw.get("group_stride", 1)
    if size is None and stride != 1:
        ctx.fail(_join(path, "group_stride"), "group_stride needs a group_size", "omit it, or give group_size",
                 stride)  # fmt: skip
    if size is not None:
        if gpus % (size * stride):
            ctx.fail(
                _join(path, "group_size"),
                f"groups of {size} ranks at stride {stride} must tile job {job!r} of {gpus} GPUs "
                f"({gpus} is not a multiple of {size} x {stride})",
                f"group_size x group_stride dividing {gpus}",
                size,
            )
        if d.get("algorithm") == "hierarchical":
            ctx.fail(alg_path, "hierarchical takes the job's hosts, not groups", "ring, tree or halving_doubling "
                     "with group_size; or omit group_size", "hierarchical")  # fmt: skip
        gpus = size  # the checks below are per group

    if "algorithm" in d:
        alg = kw["algorithm"]
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

    pat_path = _join(path, "pattern")
    if op == "sendrecv":
        if d.get("pattern") is None:
            ctx.fail(pat_path, "sendrecv requires a pattern", "shift:k with an integer k, e.g. shift:1")
        pat = d["pattern"]
        m = _SHIFT_RE.match(pat) if isinstance(pat, str) else None
        if m is None:
            ctx.fail(
                pat_path,
                f"{_desc(pat)} is not a sendrecv pattern",
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

    if op != "alltoall":
        for key in ("skew", "skew_period_steps"):
            if key in kw and kw[key] != _default(CollectiveSpec, key):
                ctx.fail(
                    _join(path, key), f"{key} applies only to alltoall, not to {op}", f"omit {key!r}", kw[key]
                )
    if "chunks" in kw:
        _check_chunks(ctx, _join(path, "chunks"), op, kw.get("algorithm", "ring"), kw["chunks"], job, gpus)
    return CollectiveSpec(**kw)


def _check_chunks(ctx: _Ctx, path: str, op: str, alg: str, chunks: int, job: str, gpus: int) -> None:
    if (op, alg) not in CHUNKED_ALGORITHMS:
        what = op if op in ("alltoall", "sendrecv") else f"{op} with algorithm {alg}"
        why = " (a ring is pipelined already)" if alg == "ring" and op not in ("alltoall", "sendrecv") else ""
        ctx.fail(
            path,
            f"chunks = {chunks}: chunks pipeline the stages of allreduce hierarchical or tree, not {what}{why}",
            "omit 'chunks' for this collective; or op allreduce with algorithm hierarchical or tree",
            chunks,
        )
    if chunks * 2 * gpus > _L["chunk_flows"]:
        ctx.fail(
            path,
            f"{chunks} chunks on job {job!r} of {gpus} GPUs make about {chunks * 2 * gpus:,} flows "
            f"(chunks x 2 x gpus), above the limit of {int(_L['chunk_flows']):,} "
            "(ainet_gym.scenario.loader.LIMITS['chunk_flows'])",
            f"chunks at most {max(1, int(_L['chunk_flows'] // (2 * gpus)))}",
            chunks,
        )


def _check_hierarchical(ctx: _Ctx, path: str, job: str, gpus: int, placement, gph: int) -> None:
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


def _parse_job(ctx: _Ctx, v: Any, path: str, fabric: FabricSpec, n_gpus: int) -> JobSpec:
    d = _mapping(ctx, v, path, _JOB_RULES, "a job")
    _require(ctx, d, path, ("name",), _JOB_REQUIRED)
    name = _JOB_RULES["name"](ctx, d["name"], _join(path, "name"))
    _require(ctx, d, path, ("gpus",), _JOB_REQUIRED)
    kw = _apply(ctx, d, path, _JOB_RULES)
    gpus = kw["gpus"]
    if gpus > n_gpus:
        ctx.fail(
            _join(path, "gpus"),
            f"job {name!r} asks for {gpus} GPUs but the {fabric.topology} fabric has {n_gpus}",
            f"1..{n_gpus}",
            gpus,
        )

    placement: str | tuple[int, ...] = _default(JobSpec, "placement")
    ppath = _join(path, "placement")
    if "placement" in d:
        p = d["placement"]
        allowed = f"{', '.join(PLACEMENTS)}, or a list of {gpus} distinct GPU ids in 0..{n_gpus - 1}"
        if isinstance(p, str):
            if p not in PLACEMENTS:
                ctx.fail(ppath, f"{p!r} is not a known placement", allowed, p, choices=PLACEMENTS)
            placement = p
        elif isinstance(p, list | tuple):
            ids = tuple(_int("a GPU id", ge=0)(ctx, x, f"{ppath}[{i}]") for i, x in enumerate(p))
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
            ctx.fail(ppath, f"expected a placement, got {_desc(p)}", allowed, p)
    kw["placement"] = placement

    cpath = _join(path, "collectives")
    items = _list(ctx, d.get("collectives"), cpath, "collectives ({op, bytes, ...})")
    kw["collectives"] = tuple(
        _parse_collective(ctx, c, f"{cpath}[{i}]", name, gpus, placement, fabric.gpus_per_host)
        for i, c in enumerate(items)
    )
    return JobSpec(**kw)


def _parse_jobs(ctx: _Ctx, v: Any, path: str, fabric: FabricSpec, n_gpus: int, initial: bool) -> tuple:
    items = _list(ctx, v, path, "jobs")
    jobs: list[JobSpec] = []
    names: dict[str, int] = {}
    used: dict[int, str] = {}
    total = 0
    for i, item in enumerate(items):
        jpath = f"{path}[{i}]"
        job = _parse_job(ctx, item, jpath, fabric, n_gpus)
        if job.name in names:
            ctx.fail(
                _join(jpath, "name"),
                f"job name {job.name!r} is used twice (also by {path}[{names[job.name]}])",
                "unique job names",
                job.name,
            )
        names[job.name] = i
        if not initial and job.start_jitter_ms > 0:
            ctx.fail(
                _join(jpath, "start_jitter_ms"),
                f"a churn template starts when it arrives; start_jitter_ms {job.start_jitter_ms:g} applies "
                "to initial jobs only",
                "0 or no start_jitter_ms in templates",
                job.start_jitter_ms,
            )
        if initial:
            total += job.gpus
            if total > n_gpus:
                ctx.fail(
                    _join(jpath, "gpus"),
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

_BACKGROUND_RULES: dict[str, _Rule | None] = {
    "kind": _enum(BACKGROUND_KINDS, "background kind"),
    "gbps": _SPEED,
    "pattern": _enum(BACKGROUND_PATTERNS, "background pattern"),
    "period_steps": _STEPS,
    "duration_steps": _STEPS,
    "offset_steps": _int("a number of decision steps", ge=0, le=_L["steps_max"]),
    "offset_jitter_steps": _int("a number of decision steps", ge=0, le=_L["steps_max"]),
    "job": _text("a job name", null=True),
    "flows_per_host": _COUNT,
}


def _parse_background(ctx: _Ctx, v: Any, path: str, fabric: FabricSpec, jobs: tuple[JobSpec, ...]) -> tuple:
    out = []
    for i, item in enumerate(_list(ctx, v, path, "background traffic entries")):
        bpath = f"{path}[{i}]"
        d = _mapping(ctx, item, bpath, _BACKGROUND_RULES, "a background traffic entry")
        if fabric.storage.hosts < 1:
            ctx.fail(
                bpath,
                "background traffic needs storage hosts, but fabric.storage.hosts is "
                f"{fabric.storage.hosts}; add fabric.storage.hosts",
                "fabric.storage.hosts >= 1, e.g. fabric: {storage: {hosts: 2, gbps: 400}}",
            )
        kw = _apply(ctx, d, bpath, _BACKGROUND_RULES)
        bg = BackgroundSpec(**kw)
        if bg.pattern == "periodic" and bg.duration_steps > bg.period_steps:
            ctx.fail(
                _join(bpath, "duration_steps"),
                f"duration_steps {bg.duration_steps} is longer than period_steps {bg.period_steps}",
                f"an integer in [1, {bg.period_steps}] (or pattern: constant)",
                bg.duration_steps,
            )
        if bg.offset_jitter_steps > 0 and bg.pattern != "periodic":
            ctx.fail(
                _join(bpath, "offset_jitter_steps"),
                f"offset_jitter_steps {bg.offset_jitter_steps} needs pattern: periodic (the pattern is "
                f"{bg.pattern!r})",
                "0, or pattern: periodic",
                bg.offset_jitter_steps,
            )
        names = [j.name for j in jobs]
        if bg.job is not None and bg.job not in names:
            ctx.fail(
                _join(bpath, "job"),
                f"no initial job named {bg.job!r}",
                f"null (all initial jobs) or one of {', '.join(names) or '(no jobs)'}",
                bg.job,
                choices=names,
            )
        out.append(bg)
    return tuple(out)


# --------------------------------------------------------------------------- dynamics, routing, reward

_DYNAMICS_RULES: dict[str, _Rule | None] = {
    "episode_steps": _STEPS,
    "decision_interval_ms": _num("a time in ms", gt=0, le=_L["time_ms_max"], null=True),
    "rate_updates": _enum(RATE_UPDATES, "rate update mode"),
    "rate_quantum_us": _num("a time in us", ge=0, le=_L["time_ms_max"] * 1e3),
    "link_failures": None,
    "job_churn": None,
}
_LINK_FAILURE_RULES: dict[str, _Rule | None] = {
    "rate_per_step": _PROB,
    "repair_steps": _STEPS,
    "tiers": None,
    "scheduled": None,
}
_SCHEDULED_RULES: dict[str, _Rule | None] = {
    "link": None,
    "at_step": _int("a decision step", ge=0, le=_L["steps_max"]),
    "until_step": _int("a decision step", ge=1, le=_L["steps_max"], null=True),
    "factor": _FRACTION,
}
_SCHEDULED_REQUIRED = {
    "link": "a link name such as leaf0-spine1 or edge0-agg1",
    "at_step": "an integer >= 0",
}
_JOB_CHURN_RULES: dict[str, _Rule | None] = {
    "arrival_rate": _num("a mean number of arrivals per step", ge=0, le=_L["arrival_rate_max"]),
    "mean_steps": _num("a mean lifetime in steps", ge=1, le=_L["steps_max"]),
    "max_jobs": _int("a number of job slots", ge=1, le=_L["count_max"]),
    "templates": None,
}
_ROUTING_RULES: dict[str, _Rule | None] = {
    "max_paths": _int("a number of paths", ge=1, le=_L["max_paths_max"]),
    "qps_per_connection": _int("a number of QPs", ge=1, le=_L["count_max"]),
    "reroute": _enum(REROUTE_MODES, "reroute mode"),
}
_REWARD_RULES: dict[str, _Rule | None] = {"kind": _enum(REWARD_KINDS, "reward kind")}


def _graph_link_ok(graph: Any, link: str) -> bool:
    """``A-B`` names two adjacent nodes of a graph fabric."""
    names = {str(n): n for n in graph.nodes}
    a, _, b = link.partition("-")
    return (
        a in names
        and b in names
        and (graph.has_edge(names[a], names[b]) or graph.has_edge(names[b], names[a]))
    )


def _parse_scheduled(ctx: _Ctx, v: Any, path: str, fabric: FabricSpec | None = None) -> tuple:
    out = []
    graph = fabric.graph if fabric is not None and fabric.topology == "graph" else None
    for i, item in enumerate(_list(ctx, v, path, "scheduled failures ({link, at_step, until_step, factor})")):
        spath = f"{path}[{i}]"
        d = _mapping(ctx, item, spath, _SCHEDULED_RULES, "a scheduled failure")
        _require(ctx, d, spath, ("link", "at_step"), _SCHEDULED_REQUIRED)
        link = d["link"]
        allowed = "<node>-<node> with nodes leafN, spineN, edgeN, aggN or coreN, e.g. leaf0-spine1"
        if graph is not None:
            allowed = "<node>-<node> naming two adjacent switches of the graph fabric"
            if not isinstance(link, str) or not _graph_link_ok(graph, link):
                ctx.fail(_join(spath, "link"), f"{_desc(link)} is not a link of the graph", allowed, link)
        elif not isinstance(link, str) or not LINK_NAME_RE.match(link):
            ctx.fail(_join(spath, "link"), f"{_desc(link)} is not a link name", allowed, link)
        a, _, b = link.partition("-")
        if a == b:
            ctx.fail(_join(spath, "link"), f"{link!r} joins a node to itself", allowed, link)
        kw = _apply(ctx, d, spath, _SCHEDULED_RULES)
        kw["link"] = link
        sf = ScheduledFailure(**kw)
        if sf.until_step is not None and sf.until_step <= sf.at_step:
            ctx.fail(
                _join(spath, "until_step"),
                f"until_step {sf.until_step} is not after at_step {sf.at_step}",
                f"an integer > {sf.at_step}, or null (never repaired)",
                sf.until_step,
            )
        out.append(sf)
    return tuple(out)


def _parse_dynamics(ctx: _Ctx, top: Mapping, fabric: FabricSpec, n_gpus: int) -> tuple[DynamicsSpec, Mapping]:
    path = "dynamics"
    d = _optional_mapping(ctx, top, "dynamics", "", _DYNAMICS_RULES, "episode dynamics")
    kw = _apply(ctx, d, path, _DYNAMICS_RULES)

    lpath = _join(path, "link_failures")
    ld = _optional_mapping(
        ctx, d, "link_failures", path, _LINK_FAILURE_RULES, "random and scheduled link failures"
    )
    lkw = _apply(ctx, ld, lpath, _LINK_FAILURE_RULES)
    if "tiers" in ld:
        tpath = _join(lpath, "tiers")
        tier_rule = _enum(FAILURE_TIERS, "link tier")
        tiers = tuple(
            tier_rule(ctx, t, f"{tpath}[{i}]") for i, t in enumerate(_list(ctx, ld["tiers"], tpath, "tiers"))
        )
        for i, t in enumerate(tiers):
            if t in tiers[:i]:
                ctx.fail(f"{tpath}[{i}]", f"tier {t!r} is listed twice", "distinct tier names", t)
        lkw["tiers"] = tiers
    if "scheduled" in ld:
        lkw["scheduled"] = _parse_scheduled(ctx, ld["scheduled"], _join(lpath, "scheduled"), fabric)
    kw["link_failures"] = LinkFailureSpec(**lkw)

    cpath = _join(path, "job_churn")
    cd = _optional_mapping(ctx, d, "job_churn", path, _JOB_CHURN_RULES, "job arrivals and departures")
    ckw = _apply(ctx, cd, cpath, _JOB_CHURN_RULES)
    if "templates" in cd:
        ckw["templates"] = _parse_jobs(
            ctx, cd["templates"], _join(cpath, "templates"), fabric, n_gpus, initial=False
        )
    kw["job_churn"] = JobChurnSpec(**ckw)
    return DynamicsSpec(**kw), cd


# --------------------------------------------------------------------------- cross-field checks and size

#: Link tiers each topology builds (storage links only with ``fabric.storage.hosts > 0``).
TOPOLOGY_TIERS: dict[str, tuple[str, ...]] = {
    "single_switch": ("nic",),
    "spine_leaf": ("nic", "leaf_spine"),
    "fat_tree": ("nic", "edge_agg", "agg_core"),
    "rail_optimized": ("nic", "rail_spine"),
}
#: Longest candidate path in links (NIC, up to four switch hops, NIC).
_MAX_HOPS = {"single_switch": 2, "spine_leaf": 4, "fat_tree": 6, "rail_optimized": 4}


def _max_hops(f: FabricSpec) -> int:
    """Links on the longest candidate path: a table for the builders (two PCIe hops more when GPUs share
    a NIC), the built fabric's own figure for a graph."""
    if f.topology == "graph":
        from ainet_gym.fabric.topology import build_fabric

        return build_fabric(f).max_hops
    return _MAX_HOPS[f.topology] + (2 if f.gpus_per_nic > 1 else 0)


# memory model of the size estimate (bytes), measured with tracemalloc on the shipped large scenarios
# (large-scale-4k, fat-tree-k16-data-parallel): about 1.1 kB per link of a built fabric (graph and
# tables), 5-25 kB per connection of a compiled job (paths, members, caches), 150 B per enumerated path
_BYTES_PER_LINK = 1_500
_BYTES_PER_CONN = 2_000
_BYTES_PER_PATH_HOP = 200
_BYTES_PER_ENUMERATED_PATH = 150


def fabric_tiers(f: FabricSpec) -> tuple[str, ...]:
    """Link tiers present in the fabric of ``f`` (those random failures can hit)."""
    return TOPOLOGY_TIERS.get(f.topology, ()) + (("storage",) if f.storage.hosts > 0 else ())


def fabric_size(f: FabricSpec) -> dict[str, int]:
    """Estimate of a fabric's size from its spec, without building it: ``gpus``, ``links`` (directed),
    ``switch_links``, ``leaves`` and ``ecmp_set`` (equal-cost paths between two leaves before the
    ``max_paths`` cap, parallel links expanded)."""
    g = fabric_gpu_count(f)
    if f.topology == "graph" and f.graph is not None:  # counted from the graph (paths by DP, not enumerated)
        from ainet_gym.fabric.topology import check_graph_size

        gs = check_graph_size(f.graph)
        return {
            "gpus": gs["gpus"],
            "links": gs["links"],
            "switch_links": gs["links"],
            "leaves": gs["leaves"],
            "ecmp_set": gs["ecmp_set"],
        }
    if f.topology == "spine_leaf":
        sw, ecmp = 2 * f.leaves * f.spines * f.links_per_spine, f.spines * f.links_per_spine**2
    elif f.topology == "fat_tree":
        sw, ecmp = f.k**3, (f.k // 2) ** 2
    elif f.topology == "rail_optimized":
        sw, ecmp = 2 * f.gpus_per_host * f.spines * f.links_per_spine, f.spines * f.links_per_spine**2
    else:
        sw, ecmp = 0, 1
    links = 4 * g + sw + 2 * f.storage.hosts  # NVLink and NIC pairs per GPU, switch links, storage
    return {"gpus": g, "links": links, "switch_links": sw, "leaves": fabric_leaf_count(f), "ecmp_set": ecmp}


def _fabric_keys(f: FabricSpec, what: str) -> str:
    """The keys to change to make a fabric smaller ("gpus", "links" or "ecmp")."""
    t = f.topology
    if t == "fat_tree":
        return "fabric.k"
    if what == "gpus" or (what == "links" and t == "single_switch"):
        return {
            "spine_leaf": "fabric.leaves, fabric.hosts_per_leaf or fabric.gpus_per_host",
        }.get(t, "fabric.hosts or fabric.gpus_per_host")
    if what == "links" and t == "spine_leaf":
        return "fabric.links_per_spine, fabric.spines or fabric.leaves"
    return "fabric.links_per_spine or fabric.spines"


def _check_fabric_size(ctx: _Ctx, f: FabricSpec) -> dict[str, int]:
    size = fabric_size(f)
    for key, noun in (("gpus", "GPUs"), ("links", "directed links"), ("ecmp_set", "equal-cost paths")):
        if size[key] > _L[key]:
            where = " between two leaves" if key == "ecmp_set" else ""
            ctx.fail(
                "fabric",
                f"the {f.topology} fabric would have {size[key]:,} {noun}{where}, above the limit of "
                f"{int(_L[key]):,} (ainet_gym.scenario.loader.LIMITS[{key!r}]); lower "
                f"{_fabric_keys(f, 'ecmp' if key == 'ecmp_set' else key)}",
                f"at most {int(_L[key]):,} {noun}{where}",
                size[key],
            )
    return size


def _switch_node(f: FabricSpec, name: str) -> tuple[str, int, int]:
    """(kind, index, count of that kind) of a switch name in the fabric of ``f``."""
    m = re.match(r"^([a-z]+)(\d+)$", name)
    assert m is not None  # the name matched LINK_NAME_RE
    kind, i = m.group(1), int(m.group(2))
    half = f.k // 2
    counts = {
        "single_switch": {"leaf": 1},
        "spine_leaf": {"leaf": f.leaves, "spine": f.spines},
        "fat_tree": {"edge": f.k * half, "agg": f.k * half, "core": half * half},
        "rail_optimized": {"leaf": f.gpus_per_host, "spine": f.spines},
    }[f.topology]
    return kind, i, counts.get(kind, 0)


def _check_link_exists(ctx: _Ctx, path: str, f: FabricSpec, link: str) -> None:
    """A scheduled failure's link must join two adjacent switches of this fabric."""
    if f.topology == "graph":  # names are the graph's own: ask the built fabric
        from ainet_gym.fabric.topology import build_fabric

        try:
            build_fabric(f).link_ids(link)
        except KeyError as e:
            ctx.fail(path, str(e).strip("\"'"), "two adjacent switches of the graph, e.g. leaf0-spine0", link)
        return
    nodes = [_switch_node(f, n) for n in link.split("-")]
    for (kind, i, n), name in zip(nodes, link.split("-")):
        if i >= n:
            have = f"{kind}0..{kind}{n - 1}" if n else f"no {kind} switches"
            ctx.fail(path, f"{link!r}: the {f.topology} fabric has no switch {name!r} ({have})", "", link)
    (ka, ia, _), (kb, ib, _) = sorted(nodes)
    half = max(f.k // 2, 1)
    adjacent = {
        ("leaf", "spine"): f.topology in ("spine_leaf", "rail_optimized"),
        ("agg", "edge"): f.topology == "fat_tree" and ia // half == ib // half,  # same pod
        ("agg", "core"): f.topology == "fat_tree"
        and ib // half == ia % half,  # agg a of a pod: cores a*half..
    }.get((ka, kb), False)
    if not adjacent:
        ex = {
            "spine_leaf": "leaf0-spine0",
            "rail_optimized": "leaf0-spine0",
            "fat_tree": f"edge0-agg0, agg0-core0 (edge i and agg j in one pod: i // {half} == j // {half}; "
            f"agg j and core c: c // {half} == j % {half})",
            "single_switch": "none: a single_switch fabric has no switch-to-switch links",
        }[f.topology]
        ctx.fail(path, f"{link!r}: these switches are not linked in the {f.topology} fabric", ex, link)


def _iteration_bounds(f: FabricSpec, job: JobSpec) -> tuple[float, float]:
    """Lower and upper bounds (s) of a job's ideal iteration time, from its compute time and the bytes
    each rank must move (lower: the least bytes any algorithm of the op sends, at NVLink + NIC speed;
    upper: twice the most, at the slower of the two, plus every alpha term over the longest path)."""
    p = job.gpus
    nic = (f.link_gbps if f.topology == "fat_tree" else f.nic_gbps) * f.link_efficiency
    fast = (f.nvlink_gbps + nic) * GBPS_TO_BYTES_PER_S
    slow = min(f.nvlink_gbps, nic) * GBPS_TO_BYTES_PER_S
    lo = hi = 0.0
    lat = _max_hops(f) * f.hop_latency_us * 1e-6
    for c in job.collectives:
        p = c.group_size or job.gpus  # ranks the collective spans (one group)
        if p < 2:
            continue
        share = {"allreduce": 2 * (p - 1) / p, "sendrecv": 1.0}.get(c.op, (p - 1) / p)
        most = {
            "allreduce": 2 * max(1, math.ceil(math.log2(p))) if c.algorithm == "tree" else 4.0,
            "alltoall": float(p) if c.skew > 0 else 1.0,
        }.get(c.op, 1.0)
        lo += c.bytes * share / fast
        hi += 2 * c.bytes * most / slow + 4 * p * lat * c.chunks  # every chunk of a stage pays its alpha
    compute = job.compute_ms * 1e-3
    return max(compute, lo), compute + hi


def _job_conns(job: JobSpec) -> int:
    """Upper estimate of a job's connections (distinct source-destination pairs of its collectives)."""
    n = 0
    for c in job.collectives:
        g = c.group_size or job.gpus  # ranks of one group; job.gpus / g groups
        p = job.gpus
        if c.op == "alltoall":
            n += p * (g - 1)
        elif c.algorithm == "halving_doubling":
            n += p * max(1, math.ceil(math.log2(p)))
        else:
            n += 3 * p
    return n


def _iteration_estimate(
    f: FabricSpec, interval_ms: float | None, groups: list[tuple[str, Iterable[JobSpec]]]
) -> dict[str, Any] | None:
    """The iterations of the fastest job in one decision interval: the interval over an upper bound of
    the job's ideal step (:func:`ainet_gym.scenario.estimate.ideal_step_upper_s`, 1% above it for the
    engine's rounding; the coarse bound of :func:`_iteration_bounds` where it gives none)."""
    from ainet_gym.scenario.estimate import ideal_step_upper_s

    bounds = []
    for path, jobs in groups:
        offset = 0  # contiguous initial jobs take the GPUs one after the other
        for i, job in enumerate(jobs):
            lo, hi = _iteration_bounds(f, job)
            step = ideal_step_upper_s(f, job, offset if path == "workload.jobs" else 0)
            step = hi if step is None or not step > 0 else step * 1.01
            if step > 0:
                bounds.append((step, f"{path}[{i}]", job))
            if isinstance(job.placement, str) and job.placement == "contiguous":
                offset += job.gpus
    if not bounds:
        return None
    step, jpath, job = min(bounds, key=lambda b: b[0])
    # the default interval is the slowest job's ideal step: at least half its upper bound
    interval = interval_ms * 1e-3 if interval_ms is not None else max(b[0] for b in bounds) / 2
    return {"iterations": interval / step, "step_s": step, "interval_s": interval, "path": jpath, "job": job}


def iteration_estimate(scenario: Scenario) -> dict[str, Any] | None:
    """The estimate the loader checks against ``LIMITS["iterations_per_interval"]``: ``{"iterations",
    "step_s", "interval_s", "path", "job"}`` of the fastest job (None without jobs). ``iterations`` lies
    within [true / 2, true], true = interval / the job's ideal step (the ideal twin's)."""
    groups: list[tuple[str, Iterable[JobSpec]]] = [("workload.jobs", scenario.jobs)]
    churn = scenario.dynamics.job_churn
    if churn.arrival_rate > 0:
        groups.append(("dynamics.job_churn.templates", churn.templates or scenario.jobs))
    return _iteration_estimate(scenario.fabric, scenario.dynamics.decision_interval_ms, groups)


def _check_runnable(ctx: _Ctx, sc: Scenario, size: dict[str, int]) -> None:
    """Cross-field checks that need the whole scenario: failures name real links and tiers, every job's
    iteration takes time, a decision interval holds a bounded number of iterations, and the memory
    estimate fits."""
    f, dyn = sc.fabric, sc.dynamics
    lf = dyn.link_failures
    lpath = "dynamics.link_failures"
    for i, sf in enumerate(lf.scheduled):
        _check_link_exists(ctx, f"{lpath}.scheduled[{i}].link", f, sf.link)
    if lf.rate_per_step > 0:
        have = fabric_tiers(f)
        tiers_given = (
            isinstance(sc.raw.get("dynamics"), Mapping)
            and isinstance(sc.raw["dynamics"].get("link_failures"), Mapping)
            and "tiers" in sc.raw["dynamics"]["link_failures"]
        )
        if tiers_given:
            for i, t in enumerate(lf.tiers):
                if t not in have:
                    ctx.fail(
                        f"{lpath}.tiers[{i}]",
                        f"the {f.topology} fabric has no {t!r} links, so no failure would ever hit this tier",
                        f"tiers of this fabric: {', '.join(have)}",
                        t,
                    )
        elif not set(lf.tiers) & set(have):
            ctx.fail(
                f"{lpath}.rate_per_step",
                f"random failures hit the tiers {', '.join(lf.tiers)} (the default), none of which the "
                f"{f.topology} fabric has, so nothing would ever fail",
                f"set {lpath}.tiers to some of: {', '.join(have)}; or rate_per_step: 0",
                lf.rate_per_step,
            )

    churn_on = dyn.job_churn.arrival_rate > 0
    groups = [("workload.jobs", sc.jobs)]
    if churn_on:
        groups.append(("dynamics.job_churn.templates", dyn.job_churn.templates or sc.jobs))
    for path, jobs in groups:
        for i, job in enumerate(jobs):
            lo, _ = _iteration_bounds(f, job)
            if lo <= 0:
                ctx.fail(
                    f"{path}[{i}].compute_ms",
                    f"an iteration of job {job.name!r} takes no time: compute_ms is 0 and "
                    + ("it has no collectives" if not job.collectives else "a 1-GPU job moves no bytes"),
                    "compute_ms > 0, or collectives on 2 or more GPUs",
                    job.compute_ms,
                )
    est = _iteration_estimate(f, dyn.decision_interval_ms, groups)
    if est is not None and est["iterations"] > _L["iterations_per_interval"]:
        n, step, interval, job = est["iterations"], est["step_s"], est["interval_s"], est["job"]
        explicit = dyn.decision_interval_ms is not None
        what = (
            "dynamics.decision_interval_ms"
            if explicit
            else "the default decision interval (the slowest job's ideal step)"
        )
        ctx.fail(
            "dynamics.decision_interval_ms" if explicit else est["path"],
            f"{what} of {interval * 1e3:.4g} ms holds about {n:.3g} iterations of job {job.name!r} "
            f"(its ideal step is about {step * 1e3:.4g} ms), above the limit of "
            f"{int(_L['iterations_per_interval']):,} (ainet_gym.scenario.loader.LIMITS['iterations_per_interval']); "
            "every iteration costs engine events",
            "a shorter dynamics.decision_interval_ms, or longer job iterations (compute_ms, bytes)",
            dyn.decision_interval_ms if explicit else job.compute_ms,
        )

    # memory: the fabric and its non-blocking twin, enumerated ECMP sets, compiled jobs
    hops = _max_hops(f)
    paths = min(sc.routing.max_paths, size["ecmp_set"])
    jobs = list(sc.jobs)
    if churn_on:
        widest = max(dyn.job_churn.templates or sc.jobs, key=_job_conns)
        jobs += [widest] * max(dyn.job_churn.max_jobs - len(sc.jobs), 0)
    conns = sum(_job_conns(j) for j in jobs)
    pairs = min(size["leaves"] ** 2, conns)
    parts = {
        "fabric": _BYTES_PER_LINK * (size["links"] + 4 * size["gpus"]),
        "paths": _BYTES_PER_ENUMERATED_PATH * pairs * size["ecmp_set"] * (1 if size["leaves"] > 1 else 0),
        "jobs": conns * (_BYTES_PER_CONN + paths * hops * _BYTES_PER_PATH_HOP),
    }
    need = sum(parts.values())
    limit = _L["memory_gib"] * 2**30
    machine = _physical_memory()
    cap, whose = (limit, "ainet_gym.scenario.loader.LIMITS['memory_gib']")
    if machine is not None and 0.8 * machine < cap:
        cap, whose = 0.8 * machine, "80% of this machine's memory"
    if need > cap:
        big = max(parts, key=parts.get)
        key = {
            "fabric": _fabric_keys(f, "links"),
            "paths": _fabric_keys(f, "ecmp") + " (fewer equal-cost paths per leaf pair)",
            "jobs": "workload.jobs[].gpus (alltoall is quadratic in GPUs), routing.max_paths"
            + (" or dynamics.job_churn.max_jobs" if churn_on else ""),
        }[big]
        ctx.fail(
            "routing.max_paths"
            if big == "jobs" and paths > 8
            else ("fabric" if big != "jobs" else "workload"),
            f"the scenario needs about {need / 2**30:.3g} GiB (fabric {parts['fabric'] / 2**30:.3g}, "
            f"path enumeration {parts['paths'] / 2**30:.3g}, {conns:,} connections x {paths} paths "
            f"{parts['jobs'] / 2**30:.3g}), above {cap / 2**30:.3g} GiB ({whose}); lower {key}",
            f"a scenario below {cap / 2**30:.3g} GiB",
            round(need / 2**30, 3),
        )


def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


# --------------------------------------------------------------------------- scenario


def _build(ctx: _Ctx, top: Any) -> Scenario:
    if not isinstance(top, Mapping):
        what = "empty" if top is None else f"{_desc(top)}, not a mapping"
        ctx.fail("", f"the scenario is {what}", f"a mapping with keys {', '.join(_TOP_KEYS)}", top)
    _mapping(ctx, top, "", _TOP_KEYS, "a scenario")
    if "name" not in top:
        ctx.fail("name", "required field 'name' is missing", "a non-empty string")
    kw: dict[str, Any] = {"name": _text("a scenario name", nonempty=True)(ctx, top["name"], "name")}
    if "description" in top:
        kw["description"] = _text("a description")(ctx, top["description"], "description")
    if "seed" in top:
        kw["seed"] = _int("an integer seed", ge=0, le=2**63 - 1)(ctx, top["seed"], "seed")

    fabric = _parse_fabric(ctx, top.get("fabric"))
    size = _check_fabric_size(ctx, fabric)
    n_gpus = size["gpus"]
    kw["fabric"] = fabric

    wd = _optional_mapping(ctx, top, "workload", "", _WORKLOAD_KEYS, "jobs and background traffic")
    jobs = _parse_jobs(ctx, wd.get("jobs"), "workload.jobs", fabric, n_gpus, initial=True)
    kw["jobs"] = jobs
    if "background" in wd:
        kw["background"] = _parse_background(ctx, wd["background"], "workload.background", fabric, jobs)

    dynamics, churn_raw = _parse_dynamics(ctx, top, fabric, n_gpus)
    kw["dynamics"] = dynamics
    churn = dynamics.job_churn
    if not jobs:
        if churn.arrival_rate <= 0:
            ctx.fail(
                "workload.jobs",
                "at least one job is required",
                "a list of jobs ({name, gpus, placement, compute_ms, collectives, ...}); "
                "or none with dynamics.job_churn.arrival_rate > 0 and templates",
                wd.get("jobs"),
            )
        if not churn.templates:
            ctx.fail(
                "dynamics.job_churn.templates",
                "there are no initial jobs, so templates must list the jobs that may arrive",
                "a non-empty list of jobs",
            )
    if (churn.arrival_rate > 0 or "max_jobs" in churn_raw) and churn.max_jobs < len(jobs):
        ctx.fail(
            "dynamics.job_churn.max_jobs",
            f"{churn.max_jobs} job slots{'' if 'max_jobs' in churn_raw else ' (the default)'} "
            f"cannot hold the {len(jobs)} initial jobs",
            f"an integer >= {len(jobs)}",
            churn.max_jobs,
        )

    rd = _optional_mapping(ctx, top, "routing", "", _ROUTING_RULES, "routing")
    kw["routing"] = RoutingSpec(**_apply(ctx, rd, "routing", _ROUTING_RULES))
    if kw["routing"].reroute == "new_transfers":
        # a stage pipeline runs phases at once that may share a connection, started in different intervals
        for job in [*jobs, *churn.templates]:
            for i, c in enumerate(job.collectives):
                if c.chunks > 1:
                    ctx.fail(
                        "routing.reroute",
                        f"new_transfers cannot pin the splits of a stage pipeline (workload.jobs[{job.name}]"
                        f".collectives[{i}].chunks = {c.chunks})",
                        "in_flight, or chunks: 1",
                        "new_transfers",
                    )
    wd2 = _optional_mapping(ctx, top, "reward", "", _REWARD_RULES, "the reward")
    kw["reward"] = RewardSpec(**_apply(ctx, wd2, "reward", _REWARD_RULES))
    sc = Scenario(**kw, source=ctx.source, raw=dict(top))
    _check_runnable(ctx, sc, size)
    return sc


# --------------------------------------------------------------------------- YAML and files


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads 1e9 as a float (YAML 1.2 style), rejects duplicate mapping keys (a key a
    merge ``<<: *anchor`` brings in may be overridden: that is what merging is for) and numbers of more
    than ``LIMITS["number_digits"]`` digits."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:  # the keys written in this mapping, before merging
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    dup = key in seen
                except TypeError:  # unhashable key: let SafeLoader report it
                    continue
                if dup:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def _too_long(self, node: yaml.ScalarNode) -> _LongNumber | None:
        n = sum(ch.isdigit() for ch in str(node.value))
        return _LongNumber(n) if n > _L["number_digits"] else None

    def construct_yaml_int(self, node):
        return self._too_long(node) or super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        return self._too_long(node) or super().construct_yaml_float(node)


class _LongNumber:
    """A number written with more than ``LIMITS["number_digits"]`` digits, left unparsed (Python refuses
    integers above 4,300 digits, and none fits a field): the field's rule refuses it by name."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return (
            f"a number of {self.digits:,} digits (above LIMITS['number_digits'] = {int(_L['number_digits'])})"
        )


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def _yaml_depth_ok(text: str, source: str, path: Path) -> None:
    """Refuse lists and mappings nested deeper than ``LIMITS["yaml_depth"]`` before PyYAML composes them
    (its composer recurses once per level): the event stream is read iteratively."""
    depth = 0
    limit = int(_L["yaml_depth"])
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                mark = ev.start_mark
                where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
                raise ScenarioError(
                    source,
                    "",
                    f"lists and mappings nested more than {limit} deep{where} "
                    "(ainet_gym.scenario.loader.LIMITS['yaml_depth'])",
                    "a scenario mapping (a few levels deep)",
                    str(path),
                )
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def read_text_capped(path: Path, what: str, limit: float | None = None) -> str:
    """The UTF-8 text of ``path``, refused unread above ``limit`` bytes (default
    ``LIMITS["file_bytes"]``).

    Raises
    ------
    OSError
        If the file cannot be read.
    UnicodeDecodeError
        If it is not UTF-8.
    ValueError
        If it is larger than the ceiling (the message names ``what``, the size and the key).
    """
    cap = int(_L["file_bytes"] if limit is None else limit)
    with open(path, "rb") as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise ValueError(
            f"{what}: larger than {cap:,} bytes (ainet_gym.scenario.loader.LIMITS['file_bytes']); not reading it"
        )
    return data.decode("utf-8")


def _read_yaml(path: Path, source: str) -> Any:
    try:
        text = read_text_capped(path, str(path))
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(
            source, "", f"cannot read the file: {e}", "a readable UTF-8 YAML file", str(path)
        ) from e
    except ValueError as e:
        raise ScenarioError(
            source, "", str(e).split(": ", 1)[-1], "a smaller scenario file", str(path)
        ) from None
    try:
        _yaml_depth_ok(text, source, path)
        return yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ScenarioError(
            source,
            "",
            f"YAML syntax error{where}: {problem}",
            f"a YAML mapping with keys {', '.join(_TOP_KEYS)}",
            str(path),
        ) from None
    except RecursionError:  # defensive: the depth check above should stop it first
        raise ScenarioError(
            source, "", "nested too deeply", "a scenario mapping (a few levels deep)", str(path)
        ) from None


def scenarios_dir() -> Path:
    """Directory of the shipped scenarios: ``$AINET_GYM_SCENARIOS`` if set, else ``<repo>/scenarios`` if it
    exists, else ``ainet_gym/scenarios`` (the installed package data)."""
    env = os.environ.get("AINET_GYM_SCENARIOS")
    if env:
        return Path(env).expanduser()
    package = Path(__file__).resolve().parents[1]  # ainet_gym/
    repo = package.parent / "scenarios"
    return repo if repo.is_dir() else package / "scenarios"


def _shipped() -> list[Path]:
    d = scenarios_dir()
    return sorted(d.glob("*.yaml"), key=lambda p: p.stem) if d.is_dir() else []


def list_scenarios() -> list[tuple[str, str]]:
    """``(name, one-line description)`` of every shipped scenario (``<scenarios_dir()>/<name>.yaml``),
    sorted by name. The description is the first non-empty line of the YAML ``description``."""
    out = []
    for p in _shipped():
        try:
            data = yaml.load(p.read_text(encoding="utf-8"), Loader=_Loader)
            desc = data.get("description", "") if isinstance(data, Mapping) else ""
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            desc = "(unreadable: YAML error)"
        lines = [ln.strip() for ln in str(desc or "").splitlines() if ln.strip()]
        out.append((p.stem, lines[0] if lines else ""))
    return out


def _resolve(arg: str | os.PathLike) -> Path:
    if not os.fspath(arg).strip():
        raise ScenarioError(
            "<empty>",
            "",
            "the scenario name is empty",
            "a path to a YAML file, or a shipped scenario name",
            arg,
        )
    path = Path(arg).expanduser()
    if path.is_file():
        return path
    text = os.fspath(arg)
    if "/" not in text and os.sep not in text:
        d = scenarios_dir()
        for cand in (d / f"{text}.yaml", d / text):
            if cand.is_file():
                return cand
    names = [p.stem for p in _shipped()]
    listing = ", ".join(names) if names else f"(none found in {scenarios_dir()})"
    stem = Path(text).name.removesuffix(".yaml").removesuffix(".yml")
    hint = _did_you_mean(stem, names)
    problem = (
        "is a directory, not a scenario file"
        if path.is_dir()
        else "no such scenario file or shipped scenario"
    )
    raise ScenarioError(
        text, "", problem, f"a path to a YAML file, or a shipped scenario name: {listing}", text, hint
    )


def _dict_depth_ok(top: Mapping) -> None:
    """Refuse a scenario dict whose lists and mappings nest deeper than ``LIMITS["yaml_depth"]`` (checked
    iteratively, before anything recurses into it)."""
    limit = int(_L["yaml_depth"])
    stack: list[tuple[Any, int]] = [(top, 1)]
    seen = 0
    while stack:
        v, d = stack.pop()
        seen += 1
        if d > limit:
            raise ScenarioError(
                "<dict>",
                "",
                f"lists and mappings nested more than {limit} deep "
                "(ainet_gym.scenario.loader.LIMITS['yaml_depth'])",
                "a scenario mapping (a few levels deep)",
            )
        if seen > 10_000_000:
            raise ScenarioError("<dict>", "", "more than 10,000,000 values", "a scenario of a sensible size")
        if isinstance(v, Mapping):
            stack.extend((x, d + 1) for x in v.values() if isinstance(x, Mapping | list | tuple))
        elif isinstance(v, list | tuple):
            stack.extend((x, d + 1) for x in v if isinstance(x, Mapping | list | tuple))


def load_scenario(path_or_dict: str | os.PathLike | Mapping | Scenario) -> Scenario:
    """Load and validate a scenario.

    ``path_or_dict`` is a path to a YAML file, the name of a shipped scenario (``<scenarios_dir()>/<name>.yaml``),
    a mapping with the schema of the YAML files, or an already built :class:`Scenario` (returned as is).
    Raises :class:`ScenarioError` naming the file, the field path and the allowed values.
    """
    if isinstance(path_or_dict, Scenario):
        return path_or_dict
    if isinstance(path_or_dict, Mapping):
        _dict_depth_ok(path_or_dict)
        return _build(_Ctx("<dict>"), copy.deepcopy(dict(path_or_dict)))
    if isinstance(path_or_dict, str | os.PathLike):
        path = _resolve(path_or_dict)
        source = str(path)
        return _build(_Ctx(source), _read_yaml(path, source))
    raise TypeError(
        f"load_scenario expects a path, a scenario name, a dict or a Scenario, not {type(path_or_dict).__name__}"
    )
