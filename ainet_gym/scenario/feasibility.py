"""Whether a valid scenario can run: the tiers and size of a fabric from its spec (GPUs, links, equal-cost
paths, memory), scheduled failures on links that exist, and the iterations per decision interval of the
fastest job. A scenario that would hang or exhaust memory is refused with the estimate and the key of
:data:`ainet_gym.scenario.rules.LIMITS` to change.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ainet_gym.scenario.estimate import ideal_step_upper_s
from ainet_gym.scenario.graphs import graph_fabrics
from ainet_gym.scenario.rules import LIMITS, Context
from ainet_gym.scenario.sections.fabric import fabric_leaf_count
from ainet_gym.scenario.spec import (
    FabricSpec,
    JobSpec,
    Scenario,
    fabric_gpu_count,
)
from ainet_gym.units import GBPS_TO_BYTES_PER_S

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
        return graph_fabrics().build(f).max_hops
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
        gs = graph_fabrics().check_size(f.graph, "the graph")
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


def check_fabric_size(ctx: Context, f: FabricSpec) -> dict[str, int]:
    size = fabric_size(f)
    for key, noun in (("gpus", "GPUs"), ("links", "directed links"), ("ecmp_set", "equal-cost paths")):
        if size[key] > LIMITS[key]:
            where = " between two leaves" if key == "ecmp_set" else ""
            ctx.fail(
                "fabric",
                f"the {f.topology} fabric would have {size[key]:,} {noun}{where}, above the limit of "
                f"{int(LIMITS[key]):,} (ainet_gym.scenario.loader.LIMITS[{key!r}]); lower "
                f"{_fabric_keys(f, 'ecmp' if key == 'ecmp_set' else key)}",
                f"at most {int(LIMITS[key]):,} {noun}{where}",
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


def _check_link_exists(ctx: Context, path: str, f: FabricSpec, link: str) -> None:
    """A scheduled failure's link must join two adjacent switches of this fabric."""
    if f.topology == "graph":  # names are the graph's own: ask the built fabric
        try:
            graph_fabrics().build(f).link_ids(link)
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
    return _iteration_estimate(scenario.fabric, scenario.dynamics.decision_interval_ms, _job_groups(scenario))


def check_runnable(ctx: Context, sc: Scenario, size: dict[str, int]) -> None:
    """Cross-field checks that need the whole scenario: failures name real links and tiers, every job's
    iteration takes time, a decision interval holds a bounded number of iterations, and the memory
    estimate fits."""
    _check_failures(ctx, sc)
    groups = _job_groups(sc)
    _check_iterations(ctx, sc, groups)
    _check_memory(ctx, sc, size)


def _job_groups(sc: Scenario) -> list[tuple[str, Iterable[JobSpec]]]:
    """(field path, jobs) of the jobs that can run: the workload's and, with churn on, the arriving templates."""
    groups: list[tuple[str, Iterable[JobSpec]]] = [("workload.jobs", sc.jobs)]
    if sc.dynamics.job_churn.arrival_rate > 0:
        groups.append(("dynamics.job_churn.templates", sc.dynamics.job_churn.templates or sc.jobs))
    return groups


def _check_failures(ctx: Context, sc: Scenario) -> None:
    """Scheduled failures name real links; random failures hit tiers the fabric has."""
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


def _check_iterations(ctx: Context, sc: Scenario, groups: list[tuple[str, Iterable[JobSpec]]]) -> None:
    """Every job's iteration takes time, and a decision interval holds a bounded number of iterations."""
    f, dyn = sc.fabric, sc.dynamics
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
    if est is not None and est["iterations"] > LIMITS["iterations_per_interval"]:
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
            f"{int(LIMITS['iterations_per_interval']):,} (ainet_gym.scenario.loader.LIMITS['iterations_per_interval']); "
            "every iteration costs engine events",
            "a shorter dynamics.decision_interval_ms, or longer job iterations (compute_ms, bytes)",
            dyn.decision_interval_ms if explicit else job.compute_ms,
        )


def _check_memory(ctx: Context, sc: Scenario, size: dict[str, int]) -> None:
    """The memory estimate (the fabric and its non-blocking twin, enumerated ECMP sets, compiled jobs) fits
    under ``LIMITS['memory_gib']`` and 80% of this machine's memory."""
    f, dyn = sc.fabric, sc.dynamics
    churn_on = dyn.job_churn.arrival_rate > 0
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
    limit = LIMITS["memory_gib"] * 2**30
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
