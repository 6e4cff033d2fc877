"""The bench's output: the targets of the issue (PASS/MISS and the ratio), the terminal tables, the
scaling plot and the JSON-ready results."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.bench.config import EXACT_RTOL, TARGET_SCENARIOS


def _slow_mode(slow: dict | None) -> str:
    """How a slowest-interval run updated rates (``None``: the exact event mode)."""
    if slow is None or (slow["rate_updates"] == "event" and not slow.get("rate_quantum_us")):
        how = slow.get("allocation") if slow is not None else None
        return f"exact event mode, {how}" if how else "exact event mode"
    if slow["rate_updates"] == "phase":
        return "phase rate updates"
    return f"event mode, {slow['rate_quantum_us']:g} us rate quantum"


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
                               f"{_fmt(r.get('speedup_vs_gmin'), '.1f')}x" if r else "")))  # fmt: skip
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
        rows = named or rows  # the issue's scenario when it was run
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
            f"{_fmt(sc['exponent_vs_transfers_last_two'], '.2f')}") if sc else "not run"  # fmt: skip
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
        out.append(_target(label.format(_slow_mode(None)), None, 1, "<=", "s", "not run (full bench only)"))
    for slow in sc.get("slowest") or []:
        n = len(slow["intervals"])
        note = f"interval {slow['slowest_interval'] + 1} of the first {n} from reset, {slow['slowest_events']:,} events"
        if slow["capped"]:
            note += f"; stopped at {slow['max_events']:,} events: a lower bound"
        out.append(_target(label.format(_slow_mode(slow)), slow["slowest_s"], 1, "<=", "s", note))
    for slow in sc.get("slowest") or []:
        if _slow_mode(slow).startswith("exact event mode") and slow.get("refilled_share") is not None:
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


# ----------------------------------------------------------------------------------------------------------
# output
# ----------------------------------------------------------------------------------------------------------


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return str(x)
    if isinstance(x, int | np.integer):
        return f"{int(x):,}"
    return format(x, spec)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))
    out = [line, "-" * len(line)]
    for r in rows:
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out)


def _header_lines(m: dict[str, Any]) -> list[str]:
    """The run's machine, versions, load and calibration."""
    parts: list[str] = []
    mc = m["machine"]
    parts.append(
        f"ainet-gym bench{' --quick' if m['quick'] else ''}  ({m['date']})\n"
        f"machine: {mc['cpu']}, {mc['cores']} cores, {mc['memory_gib']} GiB; Python {mc['python']}, "
        f"numpy {mc['numpy']}, scipy {mc['scipy']}, numba {mc.get('numba') or 'not installed'}; load average "
        f"at start {_fmt(mc.get('load_avg_1min'), '.2f')}"
        + (f", at end {m['load_avg_1min_end']:.2f}" if m.get("load_avg_1min_end") is not None else "")
    )
    if m.get("clock", "wall") != "wall":
        parts.append(
            f"clock: {m['clock']} (every timed figure is CPU s of the process and its finished children, the field "
            f"names unchanged); numba threads {m.get('numba_threads')}"
        )
    cal = m.get("calibration")
    if cal:
        parts.append(
            f"calibration: pure-Python loop (1e6 multiply-adds) {cal['python_loop_ms']:.1f} ms, numpy kernel "
            f"(sort + bincount of 1e6) {cal['numpy_kernel_ms']:.1f} ms (best of 5; compare runs across "
            "machines by these)"
        )
    return parts


def _allocator_lines(results: dict[str, Any]) -> list[str]:
    """Section 1: the allocator against the references, and the exactness checks."""
    parts: list[str] = []
    if results.get("allocator"):
        parts.append("\n1. Allocator: solve_coo vs pure-Python progressive filling (ref) and numpy global-min "
                     "filling (gmin)")  # fmt: skip
        rows = []
        for r in results["allocator"]:
            rows.append([
                r["instance"], _fmt(r["flows"]), _fmt(r["links"]), _fmt(r["entries"]),
                _fmt(r["solve_ms"]), _fmt(r["flows_per_s"], ".3g"), _fmt(r["iterations"]),
                _fmt(r["gmin_ms"]) if r["gmin_ms"] is not None else "skipped",
                _fmt(r["gmin_iterations"]),
                _fmt(r["reference_ms"]) if r["reference_ms"] is not None else "skipped",
                _fmt(r["reference_rounds"]),
                _fmt(r["speedup_vs_reference"], ".0f"), _fmt(r["speedup_vs_gmin"], ".1f"),
                _fmt(r["max_rel_err"], ".1e"),
            ])  # fmt: skip
        parts.append(_table(
            ["instance", "flows", "links", "entries", "ms/solve", "flows/s", "iters", "gmin ms", "gmin its",
             "ref ms", "ref rounds", "x ref", "x gmin", "rel err"], rows))  # fmt: skip
        notes = {r.get("workload") for r in results["allocator"] if r.get("workload")}
        for n in sorted(notes):
            parts.append(f"  workload: {n}")
        skipped = [r for r in results["allocator"] if r.get("reference_skipped") or r.get("gmin_skipped")]
        for r in skipped:
            why = "; ".join(
                f"{k.split('_')[0]} skipped: {r[k]}"
                for k in ("reference_skipped", "gmin_skipped")
                if r.get(k)
            )
            parts.append(f"  {r['instance']}: {why}")
    if results.get("exactness"):
        parts.append(f"\nExactness (target: max relative error <= {EXACT_RTOL:g})")
        by_mode: dict[str, dict] = {}
        for e in results["exactness"]:
            d = by_mode.setdefault(e["mode"], {"n": 0, "err": 0.0, "against": set()})
            d["n"] += 1
            d["err"] = max(d["err"], e["max_rel_err"])
            d["against"].add(e["against"])
        parts.append(_table(
            ["mode", "checks", "against", "max rel err", "status"],
            [[k, d["n"], ", ".join(sorted(d["against"])), f"{d['err']:.1e}",
              "PASS" if d["err"] <= EXACT_RTOL else "MISS"] for k, d in by_mode.items()]))  # fmt: skip
    return parts


def _batching_lines(results: dict[str, Any]) -> list[str]:
    """Section 2: batched instances against a loop."""
    parts: list[str] = []
    if results.get("batching"):
        b0 = results["batching"][0]
        parts.append(f"\n2. Batching: B independent instances in one call vs a Python loop "
                     f"({b0['instance']})")  # fmt: skip
        parts.append(_table(
            ["B", "loop ms/inst", "batched ms/inst", "speed-up", "public loop", "public batched", "speed-up"],
            [[r["batch"], _fmt(r["loop_ms_per_instance"]), _fmt(r["batched_ms_per_instance"]),
              _fmt(r["speedup"], ".2f"), _fmt(r["public_loop_ms_per_instance"]),
              _fmt(r["public_batched_ms_per_instance"]), _fmt(r["public_speedup"], ".2f")]
             for r in results["batching"]]))  # fmt: skip
        parts.append("  engine form: one solve_coo over stacked entries; public: max_min_fair_batched(list of "
                     "CSR) vs max_min_fair per instance")  # fmt: skip
    return parts


def _cpu_cells(row: dict[str, Any]) -> list[str]:
    """An env row's CPU figures, beside its wall-clock rate: env steps per CPU second of the process (every
    thread counted, numba's worker included) and the CPU seconds per wall second of its windows ("-" in a
    row written before they existed)."""
    return [_fmt(row.get("env_steps_per_cpu_s"), ".4g"), _fmt(row.get("cpu_s_per_wall_s"), ".2f")]


def _env_lines(results: dict[str, Any]) -> list[str]:
    """Section 3: env steps/s, construction and start-up."""
    parts: list[str] = []
    if results.get("env"):
        parts.append(
            "\n3. Environments: env steps/s (split actions, random; resets timed, steps that only reset not counted;"
            " per wall s and per CPU s of the process, every thread counted)"
        )
        parts.append(_table(
            ["scenario", "GPUs", "backend", "env", "B", "env steps/s", "steps/CPU s", "CPU/wall", "x single",
             "x numpy", "events/step", "construct s"],
            [[r["scenario"], r["gpus"], r.get("backend", "-"), r["env"], r["batch"],
              _fmt(r["env_steps_per_s"], ".4g"), *_cpu_cells(r), _fmt(r["speedup_vs_single"], ".1f"),
              _fmt(r.get("x_numpy") if r.get("backend") != "numpy" else None, ".1f"),
              _fmt(r.get("events_per_step")), _fmt(r["construct_s"], ".2f")]
             for r in results["env"]]))  # fmt: skip
    if results.get("construction"):
        parts.append(
            "\n   Construction (fresh subprocess): topology; env = paths, jobs, ideal steps, first reset"
        )
        parts.append(_table(
            ["scenario", "GPUs", "links", "connections", "topology s", "env s", "peak RSS MiB"],
            [[r["scenario"], r["gpus"], _fmt(r.get("links")), _fmt(r.get("connections")),
              _fmt(r.get("topology_s"), ".2f"), _fmt(r.get("env_s"), ".2f"),
              _fmt(r.get("peak_rss_mib"), ".0f")] for r in results["construction"]]))  # fmt: skip
    if results.get("startup"):
        parts.append("\n   Start-up (fresh process to its first env step; kernels compiled into an empty cache, "
                     "then loaded from it)")  # fmt: skip
        parts.append(_table(
            ["scenario", "run", "backend", "process s", "start+imports s", "construct s", "first step s",
             "compile s"],
            [[r["scenario"], r["run"], r.get("backend", "-"), _fmt(r.get("process_wall_s"), ".2f"),
              _fmt(r.get("start_imports_s"), ".2f"), _fmt(r.get("construct_s"), ".2f"),
              _fmt(r.get("first_step_s"), ".3f"), _fmt(r.get("compile_s"), ".1f")]
             for r in results["startup"]]))  # fmt: skip
        for r in results["startup"]:
            if "error" in r:
                parts.append(f"  {r['run']}: ERROR {r['error']}")
    if results.get("construction"):
        for r in results["construction"]:
            if "error" in r:
                parts.append(f"  construction {r['scenario']}: ERROR {r['error']}")
    return parts


def _scaling_lines(results: dict[str, Any]) -> list[str]:
    """Section 4: one interval's cost against fabric size, transfers and jobs; the slowest intervals."""
    parts: list[str] = []
    sc = results.get("scaling")
    if sc:
        parts.append("\n4. Scaling: wall time of one decision interval (FabricWorld.step, static ECMP)")
        cols = ["scenario", "GPUs", "jobs", "transfers", "flows", "entries", "events", "ms/interval"]

        def srow(r: dict) -> list:
            return [r["scenario"], r["gpus"], r["jobs"], r["transfers"], r["flows"], r["entries"],
                    _fmt(r["events_per_interval"], ".1f"), _fmt(r["interval_ms"], ".3g")]  # fmt: skip

        parts.append(_table(cols, [srow(r) for r in sc["fabric_size"]]))
        parts.append(
            f"  fitted exponent: cost ~ GPUs^{_fmt(sc['exponent_vs_gpus'], '.2f')}, "
            f"~ transfers^{_fmt(sc['exponent_vs_transfers_fabric_sweep'], '.2f')}"
        )
        parts.append(_table(cols, [srow(r) for r in sc["transfers"]]))
        parts.append(
            "  (AllToAll rows: CPU time of the process, intervals 2 .. 1 + transfers_intervals from reset, the best"
            " of transfers_repeats runs)\n"
            f"  fitted exponent on the fixed {sc['transfers_fabric_gpus']:,}-GPU fabric (8 AllToAll jobs): cost ~ "
            f"transfers^{_fmt(sc['exponent_vs_transfers'], '.2f')} (last two points: "
            f"{_fmt(sc['exponent_vs_transfers_last_two'], '.2f')})"
        )
        if sc.get("jobs"):
            parts.append(_table(cols, [srow(r) for r in sc["jobs"]]))
            parts.append(
                f"  fitted exponent against independently clocked jobs (same GPUs and transfers): cost ~ "
                f"jobs^{_fmt(sc['exponent_vs_jobs'], '.2f')} (events grow with the jobs)"
            )
        for slow in sc.get("slowest") or []:
            parts.append(
                f"  {slow['scenario']}, successive intervals from reset ({_slow_mode(slow)}; "
                f"stopped at {slow['max_events']:,} events): "
                + ", ".join(f"{r['s']:.3g} s / {r['events']:,}{'+' if r['capped'] else ''} ev"
                            for r in slow["intervals"])
            )  # fmt: skip
    return parts


def format_report(results: dict[str, Any]) -> str:
    """The terminal tables of a results dict, one block per section that ran."""
    m = results["meta"]
    parts = _header_lines(m)
    parts += _allocator_lines(results)
    parts += _batching_lines(results)
    parts += _env_lines(results)
    parts += _scaling_lines(results)
    parts.extend(switch_lines(results.get("switch")))
    parts.extend(moe_lines(results.get("moe")))
    if results.get("targets"):
        parts.append("\nTargets (2-core CPU)")
        parts.append(_table(
            ["target", "value", "goal", "status", "ratio", "note"],
            [[t["target"], _fmt(t["value"], ".3g") + (f" {t['unit']}" if t["unit"] else ""), t["goal"],
              t["status"], _fmt(t["ratio"], ".3g"), t["note"]] for t in results["targets"]]))  # fmt: skip
    if "wall_s" in m:
        parts.append(f"\nwall time: {m['wall_s']:.1f} s")
    return "\n".join(parts)


def moe_lines(moe: dict[str, Any] | None) -> list[str]:
    """The MoE section's lines (:func:`ainet_gym.bench.moe.bench_moe`): each episode timed whole, then
    the env rows of the MoE scenario (steps/s, and the vector env against the single env of the run)."""
    if not moe:
        return []
    out = ["\n7. MoE: episodes from reset (static ECMP, exact event mode) and env steps/s"]
    for ep in moe.get("episodes") or []:
        out.append(f"  {ep['scenario']}: {ep['steps']} intervals in {ep['episode_s']:.1f} s (slowest interval "
                   f"{ep['slowest_interval_s']:.2f} s, {ep['events']:,} events; build {ep['build_s']:.1f} s)")  # fmt: skip
    if moe.get("env"):
        out.append(_table(
            ["scenario", "GPUs", "backend", "env", "B", "env steps/s", "steps/CPU s", "CPU/wall", "x single",
             "events/step", "construct s"],
            [[r["scenario"], r["gpus"], r.get("backend", "-"), r["env"], r["batch"],
              _fmt(r["env_steps_per_s"], ".4g"), *_cpu_cells(r), _fmt(r["speedup_vs_single"], ".2f"),
              _fmt(r.get("events_per_step")), _fmt(r["construct_s"], ".2f")] for r in moe["env"]]))  # fmt: skip
    return out


def switch_lines(sw: dict[str, Any] | None) -> list[str]:
    """The switch section's lines (:func:`ainet_gym.bench.switch.bench_switch`): CPU s per interval of
    each mode (median of the interleaved runs), the switch against the better of the other two, and the
    flows touched per event."""
    if not sw or not sw.get("median_cpu_s"):
        return []
    med = sw["median_cpu_s"]
    n = sw["intervals"]
    load = sw.get("load_avg_1min") or (None, None)
    out = [f"\n6. Exact event mode, {sw['scenario']}: CPU s of intervals 1-{n} from reset, median of "
           f"{sw['runs']} interleaved runs (load average {_fmt(load[0], '.2f')} -> {_fmt(load[1], '.2f')})"]  # fmt: skip
    for mode, row in med.items():
        c = sw["counters"].get(mode) or []
        extra = ""
        if mode == "switch" and c:
            extra = "  (full-path events " + ", ".join(str(x["full_path_events"]) for x in c) + "; hand-offs " + \
                ", ".join(str(x["lazy_switches"]) for x in c) + ")"  # fmt: skip
        out.append(f"  {mode:<10} " + "  ".join(f"{i + 1}: {x:.3f}" for i, x in enumerate(row)) + extra)
    best = [min(a, b) for a, b in zip(med["lazy only"], med["full only"], strict=True)]
    out.append("  switch / better of lazy-only and full-only: "
               + "  ".join(f"{i + 1}: {s / b:.2f}" for i, (s, b) in enumerate(zip(med["switch"], best, strict=True))))  # fmt: skip
    per = sw.get("touched_share_per_interval") or []
    out.append(f"  flows touched per incremental solve (lazy only: re-filled, or read by the departure repair), "
               f"share of the active flows: {_fmt(sw.get('touched_share'), '.3f')} over intervals 1-{n} ("
               + ", ".join(_fmt(x, ".3f") for x in per) + f"; re-filled alone {_fmt(sw.get('refilled_share'), '.3f')}"
               "; goal <= 0.10)")  # fmt: skip
    out.append(f"  largest relative difference to the full re-solve (iterations, link bytes): "
               f"{_fmt(sw.get('max_rel_diff'), '.2e')} (<= 1e-09)")  # fmt: skip
    return out


def plot_scaling(scaling: dict[str, Any], path: Path) -> None:
    """The scaling curves (log-log, with fits): ms per interval against GPUs, transfers and jobs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("gpus", "GPUs (2:1 spine-leaf)", "cost vs fabric size",
         [(scaling["fabric_size"], "8 ring AllReduce jobs of N/8 GPUs", "exponent_vs_gpus")]),
        ("transfers", "transfers per iteration (src, dst pairs)", "cost vs transfers",
         [(scaling["fabric_size"], "fabric sweep (ring jobs)", "exponent_vs_transfers_fabric_sweep"),
          (scaling["transfers"], f"fixed {scaling['transfers_fabric_gpus']:,} GPUs, 8 AllToAll jobs",
           "exponent_vs_transfers")]),
    ]  # fmt: skip
    if scaling.get("jobs"):
        panels.append(("jobs", "jobs (independent clocks)", "cost vs jobs",
                       [(scaling["jobs"], f"fixed {scaling['transfers_fabric_gpus']:,} GPUs, ring AllReduce",
                         "exponent_vs_jobs")]))  # fmt: skip
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2))
    for ax, (key, xlabel, title, series) in zip(np.atleast_1d(axes), panels):
        for rows, label, exp_key in series:
            x = np.array([r[key] for r in rows], float)
            y = np.array([r["interval_ms"] for r in rows], float)
            k = scaling.get(exp_key)
            (line,) = ax.loglog(x, y, "o-", label=f"{label}: ~{key}^{k:.2f}" if k is not None else label)
            if k is not None and x.size >= 2:
                c = np.polyfit(np.log(x), np.log(y), 1)
                ax.loglog(x, np.exp(np.polyval(c, np.log(x))), "--", color=line.get_color(), alpha=0.5)
        x0 = np.array([r[key] for r in series[-1][0]], float)
        if x0.size >= 2:
            y0 = series[-1][0][0]["interval_ms"]
            ax.loglog(x0, y0 * x0 / x0[0], ":", color="gray", label="linear (from the first point)")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("ms per decision interval")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("ainet-gym: wall time of one decision interval (FabricWorld.step, static ECMP)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        x = float(x)
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return None
    return x
