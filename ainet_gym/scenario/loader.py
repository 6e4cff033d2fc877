"""Load and validate scenarios (YAML files, shipped scenario names, or dicts) into :mod:`ainet_gym.scenario.spec`.

The schema is the one of docs/scenarios.md ("Schema")::

    name, description, seed,
    fabric:   the fields of FabricSpec, plus storage: {hosts, gbps, leaves}; or {topology: graph, file | graph}
    workload: {jobs: [JobSpec fields, collectives: [CollectiveSpec fields]], background: [BackgroundSpec fields]}
    dynamics: {episode_steps, decision_interval_ms,
               link_failures: {rate_per_step, repair_steps, tiers, scheduled: [{link, at_step, until_step, factor}]},
               job_churn: {arrival_rate, mean_steps, max_jobs, templates: [job, ...]}}
    routing:  {max_paths, qps_per_connection, reroute, split_flows, ring_run_ahead_bytes, reroute_held_bytes,
               reroute_held_weight, part_share, reroute_held_parts, ring_window_bytes, ring_window_side,
               ring_window_chunk_bytes}
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
  ``profile``, ``hop_latency_us``, ``link_efficiency``, ``store_and_forward_bytes`` and ``nvlink_gbps``;
  ``file`` is relative to the
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
import os
from collections.abc import Mapping
from typing import Any

from ainet_gym.scenario.feasibility import (
    TOPOLOGY_TIERS,
    check_fabric_size,
    check_runnable,
    fabric_size,
    fabric_tiers,
    iteration_estimate,
)
from ainet_gym.scenario.files import (
    check_dict_depth,
    list_scenarios,
    read_yaml,
    resolve_scenario_path,
    scenarios_dir,
)
from ainet_gym.scenario.rules import (
    LIMITS,
    Context,
    ScenarioError,
    apply_rules,
    as_mapping,
    describe,
    int_rule,
    optional_mapping,
    text_rule,
)
from ainet_gym.scenario.sections import (
    FABRIC_COMMON_KEYS,
    FAILURE_TIERS,
    REWARD_RULES,
    ROUTING_RULES,
    TOP_KEYS,
    TOPOLOGY_KEYS,
    WORKLOAD_KEYS,
    fabric_leaf_count,
    parse_background,
    parse_dynamics,
    parse_fabric,
    parse_jobs,
)
from ainet_gym.scenario.spec import (
    DynamicsSpec,
    JobChurnSpec,
    JobSpec,
    RewardSpec,
    RoutingSpec,
    Scenario,
    fabric_gpu_count,
    ring_segments,
)

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

# --------------------------------------------------------------------------- scenario


def _build(ctx: Context, top: Any) -> Scenario:
    """The :class:`Scenario` of the mapping ``top``, section by section (name, fabric, workload, dynamics,
    routing, reward), each checked as it is read; then whether it can run (:func:`check_runnable`)."""
    if not isinstance(top, Mapping):
        what = "empty" if top is None else f"{describe(top)}, not a mapping"
        ctx.fail("", f"the scenario is {what}", f"a mapping with keys {', '.join(TOP_KEYS)}", top)
    as_mapping(ctx, top, "", TOP_KEYS, "a scenario")
    if "name" not in top:
        ctx.fail("name", "required field 'name' is missing", "a non-empty string")
    kw: dict[str, Any] = {"name": text_rule("a scenario name", nonempty=True)(ctx, top["name"], "name")}
    if "description" in top:
        kw["description"] = text_rule("a description")(ctx, top["description"], "description")
    if "seed" in top:
        kw["seed"] = int_rule("an integer seed", ge=0, le=2**63 - 1)(ctx, top["seed"], "seed")

    fabric = parse_fabric(ctx, top.get("fabric"))
    size = check_fabric_size(ctx, fabric)
    n_gpus = size["gpus"]
    kw["fabric"] = fabric

    wd = optional_mapping(ctx, top, "workload", "", WORKLOAD_KEYS, "jobs and background traffic")
    jobs = parse_jobs(ctx, wd.get("jobs"), "workload.jobs", fabric, n_gpus, initial=True)
    kw["jobs"] = jobs
    if "background" in wd:
        kw["background"] = parse_background(ctx, wd["background"], "workload.background", fabric, jobs)

    dynamics, churn_raw = parse_dynamics(ctx, top, fabric, n_gpus)
    kw["dynamics"] = dynamics
    churn = dynamics.job_churn
    _check_job_slots(ctx, jobs, churn, churn_raw, wd.get("jobs"))
    kw["routing"] = _parse_routing(ctx, top, [*jobs, *churn.templates])
    _check_ring_window(ctx, kw["routing"], dynamics, top)
    wd2 = optional_mapping(ctx, top, "reward", "", REWARD_RULES, "the reward")
    kw["reward"] = RewardSpec(**apply_rules(ctx, wd2, "reward", REWARD_RULES))
    sc = Scenario(**kw, source=ctx.source, raw=dict(top))
    check_runnable(ctx, sc, size)
    return sc


def _check_job_slots(
    ctx: Context, jobs: list[JobSpec], churn: JobChurnSpec, churn_raw: Mapping[str, Any], jobs_raw: Any
) -> None:
    """Jobs at the start, or churn that brings them (a rate and templates); and job slots for the initial
    jobs (``dynamics.job_churn.max_jobs``, ``churn_raw``: the section as written)."""
    if not jobs:
        if churn.arrival_rate <= 0:
            ctx.fail(
                "workload.jobs",
                "at least one job is required",
                "a list of jobs ({name, gpus, placement, compute_ms, collectives, ...}); "
                "or none with dynamics.job_churn.arrival_rate > 0 and templates",
                jobs_raw,
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


def _parse_routing(ctx: Context, top: Mapping[str, Any], jobs: list[JobSpec]) -> RoutingSpec:
    """The ``routing`` section, checked against the jobs (initial and templates): ``new_transfers`` without
    stage pipelines, and not with independent split parts; ring run-ahead (:func:`_check_ring_run_ahead`);
    held bytes at a reroute only with independent split parts."""
    rd = optional_mapping(ctx, top, "routing", "", ROUTING_RULES, "routing")
    routing = RoutingSpec(**apply_rules(ctx, rd, "routing", ROUTING_RULES))
    if routing.reroute == "new_transfers":
        # a stage pipeline runs phases at once that may share a connection, started in different intervals
        for job in jobs:
            for i, c in enumerate(job.collectives):
                if c.chunks > 1:
                    ctx.fail(
                        "routing.reroute",
                        f"new_transfers cannot pin the splits of a stage pipeline (workload.jobs[{job.name}]"
                        f".collectives[{i}].chunks = {c.chunks})",
                        "in_flight, or chunks: 1",
                        "new_transfers",
                    )
    if routing.split_flows == "independent" and routing.reroute == "new_transfers":
        # the carry flows of new_transfers pin a whole flow's split; independent parts have none to pin
        ctx.fail(
            "routing.split_flows",
            "independent split parts cannot be combined with routing.reroute: new_transfers",
            "coupled (with new_transfers), or routing.reroute: in_flight",
            "independent",
        )
    _check_ring_run_ahead(ctx, routing, jobs)
    if routing.reroute_held_bytes > 0 and routing.split_flows != "independent":
        # a coupled flow spans all its connections and paths: no one path's bytes can stay behind alone
        ctx.fail(
            "routing.reroute_held_bytes",
            f"{routing.reroute_held_bytes:g} bytes held on a path part's old path at a split change needs "
            f"path parts, but routing.split_flows is {routing.split_flows!r} (one flow over all its paths)",
            "0 (omit it), or routing.split_flows: independent",
            routing.reroute_held_bytes,
        )
    _check_part_share(ctx, routing)
    return routing


def _check_part_share(ctx: Context, routing: RoutingSpec) -> None:
    """``routing.part_share: per_part`` only with ``split_flows: independent`` (a coupled flow has no path parts)
    and with held parts at coefficient 1 (``reroute_held_weight: one``; ``part`` weighs a held part by its part's
    fraction, which per_part parts do not have on a link)."""
    if routing.part_share == "fraction":
        return
    if routing.split_flows != "independent":
        ctx.fail(
            "routing.part_share",
            f"{routing.part_share!r} shares a link per path part, but routing.split_flows is "
            f"{routing.split_flows!r} (one flow over all its paths, no parts)",
            "fraction (omit it), or routing.split_flows: independent",
            routing.part_share,
        )
    if routing.reroute_held_bytes > 0 and routing.reroute_held_weight != "one":
        ctx.fail(
            "routing.part_share",
            f"{routing.part_share!r} cannot be combined with routing.reroute_held_weight "
            f"{routing.reroute_held_weight!r}: under per_part every part, a held one too, weighs 1",
            "fraction, or routing.reroute_held_weight: one",
            routing.part_share,
        )


def _check_ring_window(
    ctx: Context, routing: RoutingSpec, dynamics: DynamicsSpec, top: Mapping[str, Any]
) -> None:
    """``routing.ring_window_bytes`` (the NCCL window of a ring's sub-flows, :mod:`ainet_gym.sim.ring_window`) only
    with ``split_flows: independent`` (under ``coupled`` a ring's hops move at one rate), ``part_share``
    ``fraction`` or ``per_part`` (issue-27zzy: a per_part part's progress is its bytes / its fraction), without
    ``ring_run_ahead_bytes`` (barrier segments instead of a window) or held bytes (not counted in a hop's
    progress), and with exact rates (``rate_updates: event``, no rate quantum: a bound is reached between
    completions); ``ring_window_side`` and ``ring_window_chunk_bytes`` only with it."""
    w = routing.ring_window_bytes
    rd = top.get("routing") or {}
    if w is None:
        if routing.ring_window_chunk_bytes is not None:
            ctx.fail(
                "routing.ring_window_chunk_bytes",
                f"{routing.ring_window_chunk_bytes:g} rounds a ring window's upstream bound, but "
                "routing.ring_window_bytes is not set",
                "null (omit it), or set routing.ring_window_bytes (bytes per ring hop)",
                routing.ring_window_chunk_bytes,
            )
        if "ring_window_side" in rd:
            ctx.fail(
                "routing.ring_window_side",
                f"{routing.ring_window_side!r} names the bounds of a ring window, but routing.ring_window_bytes is "
                "not set",
                "omit it, or set routing.ring_window_bytes (bytes per ring hop)",
                routing.ring_window_side,
            )
        return
    ra, held = routing.ring_run_ahead_bytes, routing.reroute_held_bytes
    bad = [
        (routing.split_flows != "independent", lambda: f"routing.split_flows is {routing.split_flows!r} (its hops "
         "move at one rate)", "routing.split_flows: independent"),
        (ra is not None, lambda: f"routing.ring_run_ahead_bytes is {ra:g} (barrier segments, another bound of the "
         "same run-ahead)", "routing.ring_run_ahead_bytes: null"),
        (held > 0, lambda: f"routing.reroute_held_bytes is {held:g} (held bytes are not counted in a hop's "
         "progress)", "routing.reroute_held_bytes: 0"),
        (dynamics.rate_updates != "event", lambda: f"dynamics.rate_updates is {dynamics.rate_updates!r} (a bound "
         "is reached between phase ends)", "dynamics.rate_updates: event"),
        (dynamics.rate_quantum_us > 0, lambda: f"dynamics.rate_quantum_us is {dynamics.rate_quantum_us:g} (a bound "
         "is an event of its own)", "dynamics.rate_quantum_us: 0"),
    ]  # fmt: skip
    for is_bad, why, need in bad:
        if is_bad:
            ctx.fail("routing.ring_window_bytes", f"{w:g} bounds a ring's sub-flows, but {why()}",
                     f"null (omit it), or {need}", w)  # fmt: skip


def _check_ring_run_ahead(ctx: Context, routing: RoutingSpec, jobs: list[JobSpec]) -> None:
    """``routing.ring_run_ahead_bytes`` only with ``split_flows: independent`` (under ``coupled`` a ring's
    hops move at one rate: segments would change nothing but the cost), and its segments x GPUs (about the
    flows the engine tracks for a ring) at most ``LIMITS['chunk_flows']`` for every job."""
    ra = routing.ring_run_ahead_bytes
    if ra is None:
        return
    if routing.split_flows != "independent":
        ctx.fail(
            "routing.ring_run_ahead_bytes",
            f"{ra:g} bounds how far a ring's independent hops run apart, but routing.split_flows is "
            f"{routing.split_flows!r} (its hops move at one rate)",
            "null (omit it), or routing.split_flows: independent",
            ra,
        )
    for job in jobs:
        for c in job.collectives:
            p = int(c.group_size or job.gpus)
            if c.op == "allreduce" and c.algorithm in ("ring", "hierarchical") and c.chunks == 1:
                hop = 2.0 * (p - 1) / p * c.bytes  # the most a hop of its rings moves
            elif c.op in ("reducescatter", "allgather"):
                hop = (p - 1) / p * c.bytes
            else:
                continue
            n = ring_segments(hop, ra)
            if n * job.gpus > LIMITS["chunk_flows"]:
                ctx.fail(
                    "routing.ring_run_ahead_bytes",
                    f"{ra:g} cuts the {c.op} of job {job.name!r} ({job.gpus} GPUs, {hop:.4g} bytes per ring "
                    f"hop) into {n:,} segments, about {n * job.gpus:,} flows (segments x gpus), above the "
                    f"limit of {int(LIMITS['chunk_flows']):,} (ainet_gym.scenario.loader.LIMITS['chunk_flows'])",
                    f"at least {hop * job.gpus / LIMITS['chunk_flows']:.4g} bytes, or null",
                    ra,
                )


def load_scenario(path_or_dict: str | os.PathLike | Mapping | Scenario) -> Scenario:
    """Load and validate a scenario.

    ``path_or_dict`` is a path to a YAML file, the name of a shipped scenario (``<scenarios_dir()>/<name>.yaml``),
    a mapping with the schema of the YAML files, or an already built :class:`Scenario` (returned as is).
    Raises :class:`ScenarioError` naming the file, the field path and the allowed values.
    """
    if isinstance(path_or_dict, Scenario):
        return path_or_dict
    if isinstance(path_or_dict, Mapping):
        check_dict_depth(path_or_dict)
        return _build(Context("<dict>"), copy.deepcopy(dict(path_or_dict)))
    if isinstance(path_or_dict, str | os.PathLike):
        path = resolve_scenario_path(path_or_dict)
        source = str(path)
        return _build(Context(source), read_yaml(path, source))
    raise TypeError(
        f"load_scenario expects a path, a scenario name, a dict or a Scenario, not {type(path_or_dict).__name__}"
    )
