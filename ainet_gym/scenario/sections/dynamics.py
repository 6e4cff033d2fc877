"""The ``dynamics`` section: the episode's length and decision interval, rate updates, random and scheduled
link failures (their tiers, link names, on a graph fabric two adjacent nodes) and job churn (its templates are
jobs, :mod:`ainet_gym.scenario.sections.jobs`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ainet_gym.scenario.rules import (
    FRACTION,
    LIMITS,
    PROBABILITY,
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
)
from ainet_gym.scenario.sections.jobs import parse_jobs
from ainet_gym.scenario.spec import (
    RATE_UPDATES,
    DynamicsSpec,
    FabricSpec,
    JobChurnSpec,
    LinkFailureSpec,
    ScheduledFailure,
)

__all__ = [
    "DYNAMICS_RULES",
    "FAILURE_TIERS",
    "JOB_CHURN_RULES",
    "LINK_FAILURE_RULES",
    "LINK_NAME_RE",
    "SCHEDULED_RULES",
    "parse_dynamics",
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
