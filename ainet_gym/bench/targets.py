"""The bench's targets (:mod:`ainet_gym.bench`): each target of the issue with its figure from the results,
PASS/MISS and the ratio to the goal (:func:`evaluate_targets`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ainet_gym.bench.config import EXACT_RTOL, TARGET_SCENARIOS
from ainet_gym.bench.tables import fmt, slow_mode

__all__ = [
    "evaluate_targets",
]


def _target(name: str, value: float | None, target: float, better: str, unit: str, note: str = "") -> dict:
    """A target row: ``better`` is ">=" or "<="; ratio = how far past (> 1) or short of (< 1) the target."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return {"target": name, "value": None, "goal": f"{better} {target:g}", "unit": unit,
                "status": "n/a", "ratio": None, "note": note}  # fmt: skip
    if better == ">=":
        ok, ratio = value >= target, (value / target if target else math.inf)
    else:
        ok, ratio = value <= target, (target / value if value else math.inf)
    return {"target": name, "value": value, "goal": f"{better} {target:g}", "unit": unit,
            "status": "PASS" if ok else "MISS", "ratio": ratio, "note": note}  # fmt: skip


def _allocator_targets(results: dict[str, Any]) -> list[dict]:
    """The allocator's targets: exactness and speed against the references."""
    out: list[dict] = []
    exact = results.get("exactness", [])
    if exact:
        worst = max(e["max_rel_err"] for e in exact)
        out.append(_target("exact: every max-min mode vs reference (max rel. err.)", worst, EXACT_RTOL,
                           "<=", "", f"{len(exact)} checks"))  # fmt: skip
    alloc = {(r.get("topology"), r.get("gpus")): r for r in results.get("allocator", [])}
    r = alloc.get(("spine_leaf", 1024))
    note = f"{r['instance']}, {r['flows']:,} flows" if r else "instance not run"
    out.append(_target("allocator vs pure-Python reference (1,024-GPU spine-leaf)",
                       r and r.get("speedup_vs_reference"), 100, ">=", "x", note))  # fmt: skip
    out.append(_target("allocator vs numpy global-min filling (1,024-GPU spine-leaf)",
                       r and r.get("fill_vs_gmin"), 50, ">=", "x",
                       note + ("; compiled fill (max_min_fair's numba backend); numpy solve_coo "
                               f"{fmt(r.get('speedup_vs_gmin'), '.1f')}x" if r else "")))  # fmt: skip
    return out


def _env_targets(results: dict[str, Any]) -> list[dict]:
    """The env-speed, start-up and construction targets."""
    out: list[dict] = []
    env = results.get("env", [])

    def env_rows(gpus: int) -> list[dict]:
        return [e for e in env if e["gpus"] == gpus]

    def pick(backend: str, env_kind: str, batch: int) -> dict | None:
        small = [e for e in env if 64 <= e["gpus"] <= 128 and e.get("backend", "numpy") == backend]
        return next((e for e in small if e["env"] == env_kind and e["batch"] == batch), None)

    head = env[0].get("backend", "numpy") if env else "numba"
    v64 = pick(head, "vector", 64)
    note = f"{v64['scenario']}, {head}" if v64 else "not run"
    out.append(_target("vector env B=64, 64-128 GPUs (env steps/s)", v64 and v64["env_steps_per_s"],
                       10_000, ">=", "steps/s", note))  # fmt: skip
    out.append(_target("vector env B=64 vs single env (same backend)", v64 and v64["speedup_vs_single"], 10,
                       ">=", "x", note))  # fmt: skip
    out.append(_target("compiled vs numpy backend, vector B=64 (one run)", v64 and v64.get("x_numpy"), 5,
                       ">=", "x", note if v64 and v64.get("x_numpy") else "numpy backend not run"))  # fmt: skip
    for gpus, goal in ((1024, 200), (16384, 30)):
        rows = [e for e in env_rows(gpus) if e.get("backend", "numpy") == head]
        named = [e for e in rows if e["scenario"] == TARGET_SCENARIOS.get(gpus)]
        rows = named or rows  # the scenario when it was run
        best = max(rows, key=lambda e: e["env_steps_per_s"]) if rows else None
        single = next((e for e in rows if e["env"] == "single"), None)
        note = (f"{best['scenario']}, {head}, best at {best['env']} B={best['batch']}; single env "
                f"{single['env_steps_per_s']:.1f}/s") if best and single else "not run"  # fmt: skip
        out.append(_target(f"env steps/s at {gpus:,} GPUs (best B)", best and best["env_steps_per_s"],
                           goal, ">=", "steps/s", note))  # fmt: skip
    st = results.get("startup") or []
    warm = next((r for r in st if r.get("run", "").startswith("cached (second") and "error" not in r), None)
    cold = next((r for r in st if r.get("run", "").startswith("cold") and "error" not in r), None)
    out.append(_target("second process start to first step, on-disk kernel cache", warm and
                       warm["process_wall_s"], 2, "<=", "s", (f"cold start {cold['process_wall_s']:.1f} s, of which "
                       f"compiling ~{cold.get('compile_s', 0):.1f} s") if cold else "not run"))  # fmt: skip
    con = next((c for c in results.get("construction", []) if c.get("gpus") == 16384 and "env_s" in c), None)
    out.append(_target("construction at 16,384 GPUs (time)", con and con["env_s"], 60, "<=", "s",
                       "env: topology, paths, jobs, ideal steps, first reset" if con else "not run"))  # fmt: skip
    out.append(_target("construction at 16,384 GPUs (peak RSS)", con and con["peak_rss_mib"] / 1024, 4,
                       "<=", "GiB", "whole process" if con else "not run"))  # fmt: skip
    return out


def _scaling_targets(results: dict[str, Any]) -> list[dict]:
    """The cost of one interval against fabric size and transfers, and the slowest intervals."""
    out: list[dict] = []
    sc = results.get("scaling") or {}
    rows = sc.get("fabric_size") or []
    big = max(rows, key=lambda r: r["gpus"]) if rows else None
    out.append(_target(f"one interval, every job communicating ({big['gpus']:,} GPUs)" if big else
                       "one interval, every job communicating", big and big["interval_ms"] / 1e3, 1, "<=", "s",
                       f"{big['jobs']} jobs, {big['transfers']:,} transfers" if big else "not run"))  # fmt: skip
    note = (f"fixed {sc['transfers_fabric_gpus']:,}-GPU fabric, 8 AllToAll jobs; last two points "
            f"{fmt(sc['exponent_vs_transfers_last_two'], '.2f')}") if sc else "not run"  # fmt: skip
    out.append(_target("cost per interval vs transfers (fitted exponent)", sc.get("exponent_vs_transfers"),
                       1.1, "<=", "", note))  # fmt: skip
    every = [r for k in ("fabric_size", "transfers", "jobs") for r in sc.get(k) or []]
    # wall time (the AllToAll rows time CPU for their exponent, and give the wall time beside it)
    every_wall = [r.get("interval_wall_ms", r["interval_ms"]) for r in every]
    worst = every[int(np.argmax(every_wall))] if every else None
    out.append(_target("median interval, worst scaling scenario (first 2+ intervals)",
                       worst and max(every_wall) / 1e3, 1, "<=", "s",
                       f"{worst['scenario']}: {worst['transfers']:,} transfers, "
                       f"{worst['events_per_interval']:.0f} events" if worst else "not run"))  # fmt: skip
    label = "slowest interval: 8 AllToAll x 128 GPUs ({})"
    if not sc.get("slowest"):
        out.append(_target(label.format(slow_mode(None)), None, 1, "<=", "s", "not run (full bench only)"))
    for slow in sc.get("slowest") or []:
        n = len(slow["intervals"])
        note = f"interval {slow['slowest_interval'] + 1} of the first {n} from reset, {slow['slowest_events']:,} events"
        if slow["capped"]:
            note += f"; stopped at {slow['max_events']:,} events: a lower bound"
        out.append(_target(label.format(slow_mode(slow)), slow["slowest_s"], 1, "<=", "s", note))
    for slow in sc.get("slowest") or []:
        if slow_mode(slow).startswith("exact event mode") and slow.get("refilled_share") is not None:
            out.append(_target("flows re-filled per incremental solve, 8 AllToAll x 128 (share of active)",
                               slow["refilled_share"], 0.10, "<=", "",
                               f"{slow['incremental_solves']:,} solves over the intervals timed, "
                               f"{slow.get('parallel_solves', 0):,} by the parallel rule"))  # fmt: skip
            if slow.get("touched_share") is not None:
                out.append(_target("flows touched per event, 8 AllToAll x 128: re-filled + read by the repair",
                                   slow["touched_share"], 0.10, "<=", "",
                                   f"share of active; {slow.get('repairs', 0):,} departure repairs made, "
                                   f"{slow.get('repairs_declined', 0):,} declined"))  # fmt: skip
    return out


def _switch_moe_targets(results: dict[str, Any]) -> list[dict]:
    """The lazy/full switch and the MoE rows."""
    out: list[dict] = []
    sw = results.get("switch") or {}
    if sw.get("median_cpu_s"):
        med = sw["median_cpu_s"]
        ratio = max(
            s / min(a, b) for s, a, b in zip(med["switch"], med["lazy only"], med["full only"], strict=True)
        )
        out.append(_target("switch vs the better of lazy-only and full-only, worst of intervals 1-4 (median)",
                           ratio, 1.0, "<=", "x", f"{sw['runs']} interleaved runs, CPU s"))  # fmt: skip
        out.append(_target("flows touched per event, 8 AllToAll x 128, intervals 1-4 (share of active)",
                           sw.get("touched_share"), 0.10, "<=", "", "lazy kernel only"))  # fmt: skip
    moe = results.get("moe") or {}
    for ep in moe.get("episodes") or []:
        out.append(_target(f"MoE episode, {ep['scenario']} ({ep['steps']} intervals, exact)", ep["episode_s"],
                           60, "<=", "s", f"{ep['events']:,} events; slowest interval "
                           f"{ep['slowest_interval_s']:.2f} s; build {ep['build_s']:.1f} s"))  # fmt: skip
    moe_env = moe.get("env") or []
    for e in moe_env:  # the headline backend's row (the first measured)
        if e["env"] == "vector" and e["batch"] == 16 and e.get("backend") == moe_env[0].get("backend"):
            out.append(_target(f"env steps/s, {e['scenario']} vector B=16 (reported)", e["env_steps_per_s"], 0,
                               ">=", "steps/s", f"{e.get('backend', '')}; {e['speedup_vs_single']:.2f}x the "
                               "single env of the same run"))  # fmt: skip
    return out


def evaluate_targets(results: dict[str, Any]) -> list[dict]:
    """The targets of the issue, each with its figure, PASS/MISS and the ratio to the target."""
    out = _allocator_targets(results) + _env_targets(results) + _scaling_targets(results)
    out += _switch_moe_targets(results)
    sc = results.get("scaling") or {}
    out.append(_target("cost vs transfers, marginal exponent (last two points)",
                       sc.get("exponent_vs_transfers_last_two"), 1.3, "<=", "",
                       "same sweep; shows whether the curve bends up" if sc else "not run"))  # fmt: skip
    return out
