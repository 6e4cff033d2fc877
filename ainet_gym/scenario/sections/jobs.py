"""The ``workload.jobs`` section (and the templates of ``dynamics.job_churn``): each job's GPUs, placement
and share weight, and its collectives, each checked against the job (groups, algorithm, sendrecv pattern,
chunks); the initial jobs on distinct GPUs."""

from __future__ import annotations

import re
from typing import Any

from ainet_gym.scenario.rules import (
    FRACTION,
    LIMITS,
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
    require_keys,
    spec_default,
    text_rule,
)
from ainet_gym.scenario.spec import (
    ALGORITHMS,
    CHUNKED_ALGORITHMS,
    OPS,
    PLACEMENTS,
    RANK_ORDERS,
    CollectiveSpec,
    FabricSpec,
    JobSpec,
)

__all__ = ["COLLECTIVE_RULES", "JOB_RULES", "SHARE_WEIGHT_MAX", "parse_jobs"]

_SHIFT_RE = re.compile(r"^\s*shift\s*:\s*([+-]?\d+)\s*$")

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
