"""The ``workload.background`` section: background traffic of the storage hosts, its pattern and the job
it serves."""

from __future__ import annotations

from typing import Any

from ainet_gym.scenario.rules import (
    COUNT,
    LIMITS,
    SPEED,
    STEPS,
    Context,
    Rule,
    apply_rules,
    as_list,
    as_mapping,
    enum_rule,
    int_rule,
    join_path,
    text_rule,
)
from ainet_gym.scenario.spec import (
    BACKGROUND_KINDS,
    BACKGROUND_PATTERNS,
    BACKGROUND_UPSTREAM,
    BackgroundSpec,
    FabricSpec,
    JobSpec,
)

__all__ = ["BACKGROUND_RULES", "parse_background"]

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
    "upstream": enum_rule(BACKGROUND_UPSTREAM, "background upstream charge"),
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
