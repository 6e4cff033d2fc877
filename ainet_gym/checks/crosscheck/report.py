"""The cross-check's tables: the calibration table (docs/fidelity.md: every small case under the static,
LP and PPO policies) and the learning table (docs/fidelity-learning.md: the scaled copies of the learning
scenarios over all their intervals), each case x policy in a process of its own, with the rankings of the
policies in both simulators; their markdown, and ``python -m ainet_gym.checks.crosscheck`` (:func:`main`)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.checks.crosscheck.compare import crosscheck_in_subprocess
from ainet_gym.checks.crosscheck.config import CrosscheckConfig, CrosscheckError, tcp_header_efficiency


# ---------------------------------------------------------------------------------------------- job cells
def iteration_gap(job: dict[str, Any]) -> str:
    """Which simulator completed more iterations of ``job`` in the span, and how many more: ``"fluid+1"``,
    ``"ns-3+2"``, ... or ``""`` when the counts are equal or not in the row (a result saved before
    issue-27zy). A non-empty gap marks a row whose ``rel_error`` averages over different iterations.

    Examples
    --------
    >>> iteration_gap({"fluid_iterations": 9, "ns3_iterations": 8}), iteration_gap({"fluid_iterations": 34,
    ...     "ns3_iterations": 35}), iteration_gap({"fluid_iterations": 6, "ns3_iterations": 6})
    ('fluid+1', 'ns-3+1', '')
    """
    nf, nn = job.get("fluid_iterations"), job.get("ns3_iterations")
    if nf is None or nn is None or nf == nn:
        return ""
    return f"fluid+{nf - nn}" if nf > nn else f"ns-3+{nn - nf}"


def iterations_cell(job: dict[str, Any]) -> str:
    """``"fluid/ns-3"`` iteration counts of ``job``, followed by :func:`iteration_gap` when they differ
    (``"9/8 fluid+1"``); ``"-"`` for a row without the counts."""
    if job.get("fluid_iterations") is None or job.get("ns3_iterations") is None:
        return "-"
    gap = iteration_gap(job)
    return f"{job['fluid_iterations']}/{job['ns3_iterations']}" + (f" {gap}" if gap else "")


def _pct(x: float | None) -> str:
    """A relative error as a signed percentage with two decimals, ``"-"`` for None."""
    return "-" if x is None else f"{100 * x:+.2f}%"


def _lag(job: dict[str, Any]) -> str:
    """``job``'s ``lag_ms`` signed with three decimals, ``"-"`` when it is None or not in the row."""
    lag = job.get("lag_ms")
    return "-" if lag is None else f"{lag:+.3f}"


def matched_step(job: dict[str, Any], side: str) -> float | None:
    """``job``'s mean step time (ms) over the matched iterations in simulator ``side`` (``"fluid"`` or
    ``"ns3"``): ``matched_step_ms[side]``, None when it is None or not in the row (a result saved before
    issue-27zzf)."""
    if side not in ("fluid", "ns3"):
        raise ValueError(f"matched_step: side = {side!r}; allowed: 'fluid' or 'ns3'")
    return (job.get("matched_step_ms") or {}).get(side)


def _ms_cell(x: float | None, fmt: str = ".2f", width: int = 0) -> str:
    """A time in ms formatted by ``fmt``, ``"-"`` for None; right-aligned in ``width`` characters."""
    return ("-" if x is None else format(x, fmt)).rjust(width)


def matched_progress(job: dict[str, Any]) -> str:
    """The matched-iteration part of a progress line: iterations, ``matched_rel_error`` and ``lag_ms``."""
    return (
        f"iterations {iterations_cell(job)} matched {_pct(job.get('matched_rel_error'))} lag {_lag(job)} ms"
    )


#: The text report's legend of a row marked by :func:`iteration_gap` (printed under the table when one is).
GAP_LEGEND: str = (
    "fluid+N / ns-3+N: that simulator completed N more iterations in the span, so 'error' averages over "
    "different iterations; the matched columns compare the first min(fluid, ns-3) of each, and lag is ns-3's "
    "end of the last of them less the fluid's (+: ns-3 behind)"
)


def text_report(result: dict[str, Any]) -> str:
    """The text report of ``ainet-gym crosscheck`` (without ``--json``) of one :func:`~.compare.crosscheck`
    result: per job, the mean communication time per iteration in both simulators and ``rel_error``, beside
    them the iteration counts (marked ``fluid+N`` / ``ns-3+N`` where they differ, :func:`iteration_gap`) and
    the comparison over the matched iterations (``matched_comm_ms``, ``matched_rel_error``, ``lag_ms``);
    then per job the mean step time over all iterations and over the matched ones (``fluid_step_ms``,
    ``ns3_step_ms``, ``step_rel_error``, ``matched_step_ms``, ``matched_step_rel_error``); then the
    per-interval figures when there are several intervals, and the wall times. A figure that is None or
    not in the result (one saved before the field existed) prints as ``-``."""

    def ms(x: float | None, width: int) -> str:
        return _ms_cell(x, ".3f", width)

    lines = [
        f"scenario {result['scenario']}  policy {result['policy']}  seed {result['seed']}  "
        f"intervals {result['steps']}",
        f"  {'':<16}{'all iterations':^29}{'':<17}{'matched iterations':^38}".rstrip(),
        f"  {'job':<16}{'fluid ms':>10}{'ns-3 ms':>10}{'error':>9}  {'iterations':<15}"
        f"{'fluid ms':>10}{'ns-3 ms':>10}{'error':>9}{'lag ms':>9}",
    ]
    for j in result["jobs"]:
        mc = j.get("matched_comm_ms") or {}
        lines.append(
            f"  {j['name']:<16}{ms(j['fluid_comm_ms'], 10)}{ms(j['ns3_comm_ms'], 10)}{_pct(j['rel_error']):>9}"
            f"  {iterations_cell(j):<15}{ms(mc.get('fluid'), 10)}{ms(mc.get('ns3'), 10)}"
            f"{_pct(j.get('matched_rel_error')):>9}{_lag(j):>9}"
        )
    if any(iteration_gap(j) for j in result["jobs"]):
        lines += textwrap.wrap(GAP_LEGEND, width=110, initial_indent="  ", subsequent_indent="    ")
    lines += [
        f"  {'mean step time':<16}{'all iterations':^29}{'':<17}{'matched iterations':^29}".rstrip(),
        f"  {'job':<16}{'fluid ms':>10}{'ns-3 ms':>10}{'error':>9}  {'':<15}"
        f"{'fluid ms':>10}{'ns-3 ms':>10}{'error':>9}",
    ]
    for j in result["jobs"]:
        lines.append(
            f"  {j['name']:<16}{ms(j.get('fluid_step_ms'), 10)}{ms(j.get('ns3_step_ms'), 10)}"
            f"{_pct(j.get('step_rel_error')):>9}  {'':<15}{ms(matched_step(j, 'fluid'), 10)}"
            f"{ms(matched_step(j, 'ns3'), 10)}{_pct(j.get('matched_step_rel_error')):>9}"
        )
    if result["steps"] > 1:
        lines.append("  per interval (iterations fluid/ns-3, fluid ms, ns-3 ms, error):")
        for j in result["jobs"]:
            cells = []
            for iv in j["intervals"]:
                a, b, e = iv["fluid_comm_ms"], iv["ns3_comm_ms"], iv["rel_error"]
                cells.append(
                    f"{iv['fluid_iterations']}/{iv['ns3_iterations']} "
                    + (f"{a:.2f}" if a is not None else "-") + " " + (f"{b:.2f}" if b is not None else "-")
                    + (f" {100 * e:+.1f}%" if e is not None else "")
                )  # fmt: skip
            lines.append(f"  {j['name']:<16}" + " | ".join(cells))
    lines.append(f"  wall: fluid {result['fluid_wall_s'] * 1e3:.2f} ms, ns-3 {result['ns3_wall_s']:.2f} s")
    return "\n".join(lines)


def _md_iterations(job: dict[str, Any]) -> str:
    """:func:`iterations_cell` for a markdown table, in bold where the counts differ."""
    cell = iterations_cell(job)
    return f"**{cell}**" if iteration_gap(job) else cell


# ---------------------------------------------------------------------------------------------- calibration
#: The calibration table's cases: (cross-check scenario, intervals). See scenarios/crosscheck/.
CALIBRATION_CASES: tuple[tuple[str, int], ...] = (
    ("xc-switch-4", 1),
    ("xc-ring-8", 1),
    ("xc-hd-8", 1),
    ("xc-perm-8", 1),
    ("xc-perm-64", 1),
    ("xc-two-jobs", 2),
)
CALIBRATION_POLICIES: tuple[str, ...] = ("ecmp", "spray", "lp", "ppo")


#: Where :func:`calibration` looks for the ``ppo`` rows' checkpoints, ``<dir>/<case>.zip`` (``make
#: crosscheck`` trains the missing ones there, see the Makefile).
PPO_DIR: str = "crosscheck-ppo"


def case_policy(case: str, policy: str, ppo_dir: str | os.PathLike = PPO_DIR) -> str:
    """The policy string of a calibration row: ``"ppo"`` names the case's own trained PPO model,
    ``<ppo_dir>/<case>.zip`` (``ainet-gym train scenarios/crosscheck/<case>.yaml --algo ppo --timesteps 8192
    --n-envs 8 --seed 0``, what ``make crosscheck`` runs); any other string is passed through."""
    if policy != "ppo":
        return policy
    path = Path(ppo_dir) / f"{case}.zip"
    if not path.is_file():
        raise CrosscheckError(
            f"policy 'ppo' of case {case!r}: no model {str(path)!r}; allowed: train it (make crosscheck) or "
            "give ppo:PATH"
        )
    return f"ppo:{path.resolve()}"


def _ranking(times: dict[str, float], tol: float) -> list[list[str]]:
    """Policies ordered by time, grouped into ties (within ``tol`` relative of the group's first)."""
    order = sorted(times, key=lambda p: times[p])
    groups: list[list[str]] = []
    for p in order:
        if groups and times[p] <= times[groups[-1][0]] * (1 + tol):
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups


def inversions(fluid: dict[str, float], ns3: dict[str, float], tol: float) -> list[str]:
    """Pairs that the fluid model orders strictly (beyond ``tol``) and ns-3 orders the other way."""
    out = []
    pols = list(fluid)
    for i, a in enumerate(pols):
        for b in pols[i + 1 :]:
            if fluid[a] < fluid[b] * (1 - tol) and ns3[a] > ns3[b]:
                out.append(f"{a}<{b}")
            elif fluid[b] < fluid[a] * (1 - tol) and ns3[b] > ns3[a]:
                out.append(f"{b}<{a}")
    return out


def _relation(a: float, b: float, tol: float) -> str:
    """``"<"``, ``">"`` or ``"="`` (within ``tol`` relative of the smaller time: a tie)."""
    if a * (1 + tol) < b:
        return "<"
    if b * (1 + tol) < a:
        return ">"
    return "="


def _pair_differences(fluid: dict[str, float], ns3: dict[str, float], tol: float) -> list[dict[str, Any]]:
    """Pairs of policies that the two simulators rank differently, two times within ``tol`` of each other
    counting as a tie in both: ``reversed`` (each orders them strictly, the other way), ``gain lost`` (the
    fluid model orders them strictly, ns-3 ties them) or ``gain found`` (the other way round), with the
    relative gain of the first over the second in each simulator."""
    out = []
    pols = [p for p in fluid if p in ns3]
    for i, a in enumerate(pols):
        for b in pols[i + 1 :]:
            rf, rn = _relation(fluid[a], fluid[b], tol), _relation(ns3[a], ns3[b], tol)
            if rf == rn:
                continue
            kind = "reversed" if "=" not in (rf, rn) else ("gain lost" if rn == "=" else "gain found")
            out.append(
                {
                    "pair": f"{a} vs {b}",
                    "kind": kind,
                    "fluid_gain": (fluid[b] - fluid[a]) / fluid[b],
                    "ns3_gain": (ns3[b] - ns3[a]) / ns3[b],
                }
            )
    return out


def calibration(
    cases: tuple[tuple[str, int], ...] = CALIBRATION_CASES,
    policies: tuple[str, ...] = CALIBRATION_POLICIES,
    seed: int = 0,
    config: CrosscheckConfig | None = None,
    tie_tolerance: float = 0.02,
    progress: bool = True,
    ppo_dir: str | os.PathLike = PPO_DIR,
) -> dict[str, Any]:
    """Run every case under every policy, each in a process of its own; return the rows and the per-case
    ranking comparison.

    A case's policies are ranked by their mean job communication time. Two policies whose fluid times are
    within ``tie_tolerance`` of each other are a tie in the fluid model, and either order in ns-3 agrees.
    """
    rows: list[dict[str, Any]] = []
    max_steps = (config or CrosscheckConfig()).max_steps
    for name, steps0 in cases:
        for pol in policies:
            steps = steps0
            try:
                while True:  # a slow policy may need more intervals for one iteration: double them
                    try:
                        r, det = crosscheck_in_subprocess(
                            name, case_policy(name, pol, ppo_dir), seed, steps, config
                        )
                        break
                    except CrosscheckError as e:
                        if "completed no iteration" not in str(e) or 2 * steps > max_steps:
                            raise
                        steps *= 2
            except CrosscheckError as e:  # e.g. no iteration completed in ns-3 within the span
                rows.append({"case": name, "policy": pol, "error": str(e)})
                if progress:
                    print(f"{name:<12} {pol:<8} error: {e}", flush=True)
                continue
            for j in r["jobs"]:
                rows.append(
                    {
                        "case": name,
                        "policy": pol,
                        **j,
                        "fluid_wall_s": r["fluid_wall_s"],
                        "ns3_wall_s": r["ns3_wall_s"],
                        "fluid_cpu_s": det["fluid_cpu_s"],
                        "ns3_cpu_s": det["ns3_cpu_s"],
                        "iterations": det["ns3_iterations"],
                        "steps": steps,
                        "transfer_mb": det["transfer_mb"],
                    }
                )
                if progress:
                    print(
                        f"{name:<12} {pol:<8} {j['name']:<8} fluid {j['fluid_comm_ms']:8.3f} ms  ns-3 "
                        f"{j['ns3_comm_ms']:8.3f} ms  {100 * j['rel_error']:+6.2f}%  {matched_progress(j)}  "
                        f"ns-3 {r['ns3_wall_s']:.1f} s",
                        flush=True,
                    )
    return {"seed": seed, "rows": rows, "rankings": rankings(rows, tie_tolerance)}


def _case_means(
    rows: list[dict[str, Any]], case: str, fluid_key: str, ns3_key: str
) -> tuple[dict[str, float], dict[str, float]]:
    """Per policy of ``case``: the mean of ``fluid_key`` and of ``ns3_key`` over its rows (one per job),
    rows with an error left out."""
    fl: dict[str, list[float]] = {}
    pk: dict[str, list[float]] = {}
    for r in rows:
        if r["case"] == case and "error" not in r:
            fl.setdefault(r["policy"], []).append(r[fluid_key])
            pk.setdefault(r["policy"], []).append(r[ns3_key])
    return {p: float(np.mean(v)) for p, v in fl.items()}, {p: float(np.mean(v)) for p, v in pk.items()}


def rankings(rows: list[dict[str, Any]], tie_tolerance: float = 0.02) -> list[dict[str, Any]]:
    """Per case: the policies ranked by mean job communication time in each simulator (ties within
    ``tie_tolerance`` of the fluid time grouped) and the pairs that ns-3 orders against the fluid model."""
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        f, n = _case_means(rows, case, "fluid_comm_ms", "ns3_comm_ms")
        out.append(
            {
                "case": case,
                "fluid": _ranking(f, tie_tolerance),
                "ns3": _ranking(n, tie_tolerance),
                "inversions": inversions(f, n, tie_tolerance),
            }
        )
    return out


def _rank(groups: list[list[str]]) -> str:
    """A ranking as text: tied policies joined by ``=``, groups by ``<`` (fastest first)."""
    return " < ".join("=".join(g) for g in groups)


def markdown(result: dict[str, Any]) -> str:
    """The calibration table (docs/fidelity.md) of :func:`calibration`'s result: per job, beside ``rel_error``,
    the iteration counts of both simulators (bold, with ``fluid+N`` / ``ns-3+N``, where they differ), the
    ``matched_rel_error`` and ``lag_ms`` (``-`` for rows saved without them)."""

    lines = [
        "| case | MB per transfer | policy | job | fluid ms | ns-3 ms | error | iterations fluid/ns-3 |"
        " matched error | lag ms | ns-3 wall s | fluid wall ms | speed ratio (wall) | speed ratio (CPU) |",
        "|---|---:|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['case']} | | {r['policy']} | - | | | {r['error']} | | | | | | | |")
            continue
        pol = (
            r["policy"]
            if r.get("steps", 1) == dict(CALIBRATION_CASES).get(r["case"], 1)
            else (f"{r['policy']} ({r['steps']} intervals)")
        )
        lines.append(
            f"| {r['case']} | {r['transfer_mb']:.3g} | {pol} | {r['name']} | {r['fluid_comm_ms']:.3f} | "
            f"{r['ns3_comm_ms']:.3f} | "
            f"{_pct(r['rel_error'])} | {_md_iterations(r)} | {_pct(r.get('matched_rel_error'))} | {_lag(r)} | "
            f"{r['ns3_wall_s']:.2f} | {1e3 * r['fluid_wall_s']:.2f} | "
            f"{r['ns3_wall_s'] / max(r['fluid_wall_s'], 1e-9):.2g} | "
            f"{r['ns3_cpu_s'] / max(r['fluid_cpu_s'], 1e-9):.2g} |"
        )
    lines += ["", "| case | fluid ranking | ns-3 ranking | inversions |", "|---|---|---|---|"]
    for k in result["rankings"]:
        inv = ", ".join(k["inversions"]) or "none"
        lines.append(f"| {k['case']} | {_rank(k['fluid'])} | {_rank(k['ns3'])} | {inv} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- learning
#: The learning cross-check's cases (docs/fidelity-learning.md): scaled copies of the scenarios where the
#: project's learning results live, each replayed over all its intervals (``dynamics.episode_steps``).
LEARNING_CASES: tuple[str, ...] = (
    "xc-periodic-interference",
    "xc-periodic-interference-jitter",
    "xc-ingest-bursts",
)
#: Its policies: the static baselines, the LP over the jobs and over jobs and background, and a PPO policy
#: trained on the case (``ppo``: ``<ppo_dir>/<case>.zip``).
LEARNING_POLICIES: tuple[str, ...] = ("ecmp", "spray", "lp", "lp+bg", "ppo")


def learning(
    cases: tuple[str, ...] = LEARNING_CASES,
    policies: tuple[str, ...] = LEARNING_POLICIES,
    seed: int = 0,
    config: CrosscheckConfig | None = None,
    tie_tolerance: float = 0.02,
    progress: bool = True,
    ppo_dir: str | os.PathLike = PPO_DIR,
    steps: int | None = None,
) -> dict[str, Any]:
    """Every case under every policy over all its intervals (or ``steps``), each run in a process of its
    own: per job its mean communication and step time in both simulators, the per-interval figures, and
    per case the ranking of the policies by mean step time (the mean over the jobs of each job's mean step
    time) in both, two policies within ``tie_tolerance`` of each other counting as tied in both."""
    rows: list[dict[str, Any]] = []
    for name in cases:
        for pol in policies:
            try:
                r, det = crosscheck_in_subprocess(name, case_policy(name, pol, ppo_dir), seed, steps, config)
            except CrosscheckError as e:
                rows.append({"case": name, "policy": pol, "error": str(e)})
                if progress:
                    print(f"{name:<32} {pol:<8} error: {e}", flush=True)
                continue
            for j in r["jobs"]:
                errs = [abs(iv["rel_error"]) for iv in j["intervals"] if iv["rel_error"] is not None]
                rows.append(
                    {
                        "case": name,
                        "policy": pol,
                        **j,
                        "worst_interval_error": max(errs) if errs else None,
                        "steps": r["steps"],
                        "fluid_wall_s": r["fluid_wall_s"],
                        "ns3_wall_s": r["ns3_wall_s"],
                        "fluid_cpu_s": det["fluid_cpu_s"],
                        "ns3_cpu_s": det["ns3_cpu_s"],
                        "transfer_mb": det["transfer_mb"],
                        "ns3_bytes": det["ns3_bytes"],
                        "ns3_connections": det["ns3_transfers"],
                        "resplits": det["resplits"],
                    }
                )
                if progress:
                    w = rows[-1]["worst_interval_error"]
                    print(
                        f"{name:<32} {pol:<8} {j['name']:<6} comm fluid {j['fluid_comm_ms']:7.2f} ns-3 "
                        f"{j['ns3_comm_ms']:7.2f} ms {100 * j['rel_error']:+6.2f}%  step {j['fluid_step_ms']:7.2f} "
                        f"{j['ns3_step_ms']:7.2f} ms  worst interval "
                        + (f"{100 * w:.2f}%" if w is not None else "-")
                        + f"  {matched_progress(j)}  matched step {_ms_cell(matched_step(j, 'fluid'))} "
                        f"{_ms_cell(matched_step(j, 'ns3'))} ms  ns-3 {r['ns3_wall_s']:.0f} s",
                        flush=True,
                    )
    return {"seed": seed, "rows": rows, "rankings": step_rankings(rows, tie_tolerance)}


def _case_matched_step_means(
    rows: list[dict[str, Any]], case: str
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Per policy of ``case``: the mean over its jobs of each job's :func:`matched_step` in the fluid model
    and in ns-3, None for a policy one of whose jobs lacks it; rows with an error left out."""
    per: dict[str, list[tuple[float | None, float | None]]] = {}
    for r in rows:
        if r["case"] == case and "error" not in r:
            per.setdefault(r["policy"], []).append((matched_step(r, "fluid"), matched_step(r, "ns3")))

    def mean(v: list[float | None]) -> float | None:
        return None if any(x is None for x in v) else float(np.mean(v))

    return (
        {p: mean([a for a, _ in v]) for p, v in per.items()},
        {p: mean([b for _, b in v]) for p, v in per.items()},
    )


def _matched_ranking(
    f_all: dict[str, float],
    n_all: dict[str, float],
    f: dict[str, float | None],
    n: dict[str, float | None],
    tol: float,
) -> dict[str, Any]:
    """The ranking by matched step time of one case (:func:`step_rankings`' ``matched``) over the policies
    that have it in both simulators, and whether each simulator's differs from its ranking by the mean
    over all iterations of the same policies."""
    fm: dict[str, float] = {}
    nm: dict[str, float] = {}
    for p, a in f.items():
        b = n.get(p)
        if a is not None and b is not None:
            fm[p], nm[p] = float(a), float(b)
    have = list(fm)
    rf, rn = _ranking(fm, tol), _ranking(nm, tol)
    same = {
        "fluid": rf == _ranking({p: f_all[p] for p in have}, tol),
        "ns3": rn == _ranking({p: n_all[p] for p in have}, tol),
    }
    return {
        "fluid_step_ms": dict(f),
        "ns3_step_ms": dict(n),
        "missing": [p for p in f if p not in have],
        "fluid": rf,
        "ns3": rn,
        "differences": _pair_differences(fm, nm, tol),
        "same_as_all_iterations": same,
    }


def step_rankings(rows: list[dict[str, Any]], tie_tolerance: float = 0.02) -> list[dict[str, Any]]:
    """Per case: the policies ranked by mean step time (mean over the jobs) in each simulator, ties
    within ``tie_tolerance`` grouped in both, and the pairs ranked differently (:func:`_pair_differences`).

    Beside it, ``matched``: the same ranking by the mean over the jobs of each job's mean step time over
    its matched iterations (the first min(fluid, ns-3) of each, :func:`matched_step`), so that a policy
    whose fluid run counts one more iteration than its ns-3 run is ranked on the same iterations in both
    simulators: ``fluid_step_ms`` / ``ns3_step_ms`` (None for a policy one of whose jobs lacks the figure,
    e.g. a row saved before issue-27zzf), ``missing`` (those policies, left out of the rest), ``fluid``,
    ``ns3``, ``differences`` and ``same_as_all_iterations`` (per simulator: whether its matched ranking is
    its ranking over all iterations, over the same policies)."""
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        f, n = _case_means(rows, case, "fluid_step_ms", "ns3_step_ms")
        mf, mn = _case_matched_step_means(rows, case)
        out.append(
            {
                "case": case,
                "fluid_step_ms": f,
                "ns3_step_ms": n,
                "fluid": _ranking(f, tie_tolerance),
                "ns3": _ranking(n, tie_tolerance),
                "differences": _pair_differences(f, n, tie_tolerance),
                "matched": _matched_ranking(f, n, mf, mn, tie_tolerance),
            }
        )
    return out


def _differences_cell(diffs: list[dict[str, Any]]) -> str:
    """The ``ranked differently`` cell: each pair, its kind and both gains; ``none`` without one."""
    return (
        "; ".join(
            f"{d['pair']}: {d['kind']} (fluid {100 * d['fluid_gain']:+.1f}%, ns-3 {100 * d['ns3_gain']:+.1f}%)"
            for d in diffs
        )
        or "none"
    )


def matched_ranking_lines(rankings_: list[dict[str, Any]]) -> list[str]:
    """The table of the rankings by matched step time (:func:`step_rankings`' ``matched``) in markdown: per
    case the matched means (``-`` where missing), both rankings over the policies that have them, the pairs
    ranked differently and, per simulator, whether the ranking is the one over all iterations (``same`` /
    ``changed``). A ranking without ``matched`` (a result saved before issue-27zzf) prints ``-``."""
    lines = [
        "| case | matched step ms, fluid | matched step ms, ns-3 | fluid ranking (matched) |"
        " ns-3 ranking (matched) | ranked differently (matched) | vs all iterations |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in rankings_:
        m = k.get("matched")
        if m is None:
            lines.append(f"| {k['case']} | - | - | - | - | - | - |")
            continue
        f = ", ".join(f"{p} {_ms_cell(v)}" for p, v in m["fluid_step_ms"].items())
        n = ", ".join(f"{p} {_ms_cell(v)}" for p, v in m["ns3_step_ms"].items())
        have = bool(m["fluid"])
        vs = (
            ", ".join(
                f"{lab} {'same' if m['same_as_all_iterations'][side] else 'changed'}"
                for lab, side in (("fluid", "fluid"), ("ns-3", "ns3"))
            )
            if have
            else "-"
        )
        if m["missing"] and have:
            vs += f" (without {', '.join(m['missing'])})"
        lines.append(
            f"| {k['case']} | {f} | {n} | {_rank(m['fluid']) if have else '-'} | "
            f"{_rank(m['ns3']) if have else '-'} | {_differences_cell(m['differences']) if have else '-'} | {vs} |"
        )
    return lines


def markdown_learning(result: dict[str, Any]) -> str:
    """The tables of docs/fidelity-learning.md from :func:`learning`'s result; the job table has the matched
    columns of :func:`markdown` beside ``rel_error`` and the matched step times beside the step times
    (``-`` for rows saved without them); under the ranking by mean step time over all iterations, the
    ranking by matched step time (:func:`matched_ranking_lines`)."""

    lines = [
        "| case | policy | job | fluid comm ms | ns-3 comm ms | error | iterations fluid/ns-3 | matched error |"
        " lag ms | worst interval | fluid step ms | ns-3 step ms | matched fluid step ms | matched ns-3 step ms |"
        " ns-3 wall s | fluid wall ms | speed ratio |",
        "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['policy']} | - | | | {r['error']} | | | | | | | | | | | |")
            continue
        w = r["worst_interval_error"]
        lines.append(
            f"| {r['case']} | {r['policy']} | {r['name']} | {r['fluid_comm_ms']:.2f} | {r['ns3_comm_ms']:.2f} | "
            f"{_pct(r['rel_error'])} | {_md_iterations(r)} | {_pct(r.get('matched_rel_error'))} | {_lag(r)} | "
            f"{'-' if w is None else f'{100 * w:.2f}%'} | {r['fluid_step_ms']:.2f} | "
            f"{r['ns3_step_ms']:.2f} | {_ms_cell(matched_step(r, 'fluid'))} | {_ms_cell(matched_step(r, 'ns3'))} | "
            f"{r['ns3_wall_s']:.0f} | {1e3 * r['fluid_wall_s']:.1f} | "
            f"{r['ns3_wall_s'] / max(r['fluid_wall_s'], 1e-9):.2g} |"
        )
    lines += [
        "",
        "| case | mean step ms, fluid | mean step ms, ns-3 | fluid ranking | ns-3 ranking | ranked differently |",
        "|---|---|---|---|---|---|",
    ]
    for k in result["rankings"]:
        f = ", ".join(f"{p} {v:.2f}" for p, v in k["fluid_step_ms"].items())
        n = ", ".join(f"{p} {v:.2f}" for p, v in k["ns3_step_ms"].items())
        lines.append(
            f"| {k['case']} | {f} | {n} | {_rank(k['fluid'])} | {_rank(k['ns3'])} | "
            f"{_differences_cell(k['differences'])} |"
        )
    lines += ["", *matched_ranking_lines(result["rankings"])]
    return "\n".join(lines)


def _parser() -> Any:
    """The command line of :func:`main`."""

    from ainet_gym.agents.arg_types import add_seed_steps_args, float_arg, int_arg
    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's
    from ainet_gym.agents.outputs import add_out_file_args

    ap = OneLineParser(prog="python -m ainet_gym.checks.crosscheck", description=main.__doc__)
    ap.add_argument(
        "--learning",
        action="store_true",
        help="the learning cross-check: cases and policies default to LEARNING_CASES and LEARNING_POLICIES, "
        "all intervals of each case, ranking by mean step time",
    )
    ap.add_argument("--policies", default=None, help="comma list (ppo:PATH too)")
    ap.add_argument("--cases", default=None, help="comma list")
    # the ranges of ainet-gym crosscheck (the config refuses the rest, e.g. --split-qps above 64)
    add_seed_steps_args(ap, "--learning: intervals (default: the case's)")
    ap.add_argument("--spray-mode", default="subflows", help="subflows | packet")
    ap.add_argument("--reorder-threshold", type=int_arg(1), default=CrosscheckConfig.reorder_threshold)
    ap.add_argument("--no-spray-sack", action="store_true", help="SACK off on sprayed connections")
    ap.add_argument("--mss", type=int_arg(1), default=CrosscheckConfig.mss, help="TCP segment size (bytes)")
    ap.add_argument(
        "--del-ack-count", type=int_arg(1), default=CrosscheckConfig.del_ack_count, help="segments per ACK"
    )
    ap.add_argument(
        "--max-gpus", type=int_arg(1), default=CrosscheckConfig.max_gpus, help="largest fabric accepted"
    )
    ap.add_argument(
        "--split-qps", type=int_arg(1), default=None, help="QPs per connection (CrosscheckConfig.split_qps)"
    )
    ap.add_argument(
        "--fq-flows",
        type=int_arg(1),
        default=CrosscheckConfig.fq_flows,
        help="FqCoDel hash buckets per link (CrosscheckConfig.fq_flows)",
    )
    ap.add_argument(
        "--wall-limit-s",
        type=float_arg("a wall-clock limit in seconds"),
        default=CrosscheckConfig.wall_limit_s,
        help="ns-3 wall-clock limit per run (s; raise it on a loaded machine)",
    )
    add_out_file_args(ap, "write the JSON result here")
    ap.add_argument("--ppo-dir", default=PPO_DIR, help="the ppo rows' models, <dir>/<case>.zip")
    ap.add_argument(
        "--from-json",
        default=None,
        help="comma list of --out files: print their rows together (rankings over all of them), run nothing",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.checks.crosscheck``: the calibration table (what ``make crosscheck`` runs), or
    with ``--learning`` the learning cross-check (docs/fidelity-learning.md)."""
    import json

    a = _parser().parse_args(argv)
    from ainet_gym.agents.outputs import cli_out_file_refused

    inputs = [x for x in (a.from_json or "").split(",") if x]
    if cli_out_file_refused("python -m ainet_gym.checks.crosscheck", a.out, a.overwrite, inputs):
        return 2
    case_list = CALIBRATION_CASES if not a.learning else tuple((c, None) for c in LEARNING_CASES)
    pol_list = LEARNING_POLICIES if a.learning else CALIBRATION_POLICIES
    if a.from_json:
        rows = [
            r for f in a.from_json.split(",") for r in json.loads(Path(f).read_text(encoding="utf-8"))["rows"]
        ]
        order = {n: i for i, (n, _) in enumerate(case_list)}
        pols = {p: i for i, p in enumerate(pol_list)}
        rows.sort(key=lambda r: (order.get(r["case"], len(order)), pols.get(r["policy"], len(pols))))
        if a.learning:
            print(markdown_learning({"rows": rows, "rankings": step_rankings(rows)}))
        else:
            print(markdown({"rows": rows, "rankings": rankings(rows)}))
        return 0
    cfg = CrosscheckConfig(
        spray_mode=a.spray_mode,
        reorder_threshold=a.reorder_threshold,
        spray_sack=not a.no_spray_sack,
        mss=a.mss,
        del_ack_count=a.del_ack_count,
        header_efficiency=tcp_header_efficiency(a.mss, a.del_ack_count),
        max_gpus=a.max_gpus,
        wall_limit_s=a.wall_limit_s,
        split_qps=a.split_qps,
        fq_flows=a.fq_flows,
    )
    pols = tuple(p for p in (a.policies or ",".join(pol_list)).split(",") if p)
    names = tuple(c for c in (a.cases or ",".join(n for n, _ in case_list)).split(",") if c)
    if a.learning:
        res = learning(names, pols, a.seed, cfg, ppo_dir=a.ppo_dir, steps=a.steps)
    else:
        steps = dict(CALIBRATION_CASES)
        res = calibration(tuple((c, steps.get(c, 1)) for c in names), pols, a.seed, cfg, ppo_dir=a.ppo_dir)
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(markdown_learning(res) if a.learning else markdown(res))
    return 0
