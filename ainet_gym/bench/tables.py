"""The bench's terminal tables (:mod:`ainet_gym.bench`): the header (machine, versions, load, clock,
calibration), one block per section that ran and the targets (:func:`format_report`; the switch and MoE sections'
lines :func:`switch_lines`, :func:`moe_lines`; a cell :func:`fmt`, a run's rate updates :func:`slow_mode`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ainet_gym.bench.config import EXACT_RTOL

__all__ = [
    "fmt",
    "format_report",
    "moe_lines",
    "slow_mode",
    "switch_lines",
]


def slow_mode(slow: dict | None) -> str:
    """How a slowest-interval run updated rates (``None``: the exact event mode)."""
    if slow is None or (slow["rate_updates"] == "event" and not slow.get("rate_quantum_us")):
        how = slow.get("allocation") if slow is not None else None
        return f"exact event mode, {how}" if how else "exact event mode"
    if slow["rate_updates"] == "phase":
        return "phase rate updates"
    return f"event mode, {slow['rate_quantum_us']:g} us rate quantum"


def fmt(x: Any, spec: str = ".3g") -> str:
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
        f"at start {fmt(mc.get('load_avg_1min'), '.2f')}"
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
                r["instance"], fmt(r["flows"]), fmt(r["links"]), fmt(r["entries"]),
                fmt(r["solve_ms"]), fmt(r["flows_per_s"], ".3g"), fmt(r["iterations"]),
                fmt(r["gmin_ms"]) if r["gmin_ms"] is not None else "skipped",
                fmt(r["gmin_iterations"]),
                fmt(r["reference_ms"]) if r["reference_ms"] is not None else "skipped",
                fmt(r["reference_rounds"]),
                fmt(r["speedup_vs_reference"], ".0f"), fmt(r["speedup_vs_gmin"], ".1f"),
                fmt(r["max_rel_err"], ".1e"),
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
            [[r["batch"], fmt(r["loop_ms_per_instance"]), fmt(r["batched_ms_per_instance"]),
              fmt(r["speedup"], ".2f"), fmt(r["public_loop_ms_per_instance"]),
              fmt(r["public_batched_ms_per_instance"]), fmt(r["public_speedup"], ".2f")]
             for r in results["batching"]]))  # fmt: skip
        parts.append("  engine form: one solve_coo over stacked entries; public: max_min_fair_batched(list of "
                     "CSR) vs max_min_fair per instance")  # fmt: skip
    return parts


def _cpu_cells(row: dict[str, Any]) -> list[str]:
    """An env row's CPU figures, beside its wall-clock rate: env steps per CPU second of the process (every
    thread counted, numba's worker included) and the CPU seconds per wall second of its windows ("-" in a
    row written before they existed)."""
    return [fmt(row.get("env_steps_per_cpu_s"), ".4g"), fmt(row.get("cpu_s_per_wall_s"), ".2f")]


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
              fmt(r["env_steps_per_s"], ".4g"), *_cpu_cells(r), fmt(r["speedup_vs_single"], ".1f"),
              fmt(r.get("x_numpy") if r.get("backend") != "numpy" else None, ".1f"),
              fmt(r.get("events_per_step")), fmt(r["construct_s"], ".2f")]
             for r in results["env"]]))  # fmt: skip
    if results.get("construction"):
        parts.append(
            "\n   Construction (fresh subprocess): topology; env = paths, jobs, ideal steps, first reset"
        )
        parts.append(_table(
            ["scenario", "GPUs", "links", "connections", "topology s", "env s", "peak RSS MiB"],
            [[r["scenario"], r["gpus"], fmt(r.get("links")), fmt(r.get("connections")),
              fmt(r.get("topology_s"), ".2f"), fmt(r.get("env_s"), ".2f"),
              fmt(r.get("peak_rss_mib"), ".0f")] for r in results["construction"]]))  # fmt: skip
    if results.get("startup"):
        parts.append("\n   Start-up (fresh process to its first env step; kernels compiled into an empty cache, "
                     "then loaded from it)")  # fmt: skip
        parts.append(_table(
            ["scenario", "run", "backend", "process s", "start+imports s", "construct s", "first step s",
             "compile s"],
            [[r["scenario"], r["run"], r.get("backend", "-"), fmt(r.get("process_wall_s"), ".2f"),
              fmt(r.get("start_imports_s"), ".2f"), fmt(r.get("construct_s"), ".2f"),
              fmt(r.get("first_step_s"), ".3f"), fmt(r.get("compile_s"), ".1f")]
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
                    fmt(r["events_per_interval"], ".1f"), fmt(r["interval_ms"], ".3g")]  # fmt: skip

        parts.append(_table(cols, [srow(r) for r in sc["fabric_size"]]))
        parts.append(
            f"  fitted exponent: cost ~ GPUs^{fmt(sc['exponent_vs_gpus'], '.2f')}, "
            f"~ transfers^{fmt(sc['exponent_vs_transfers_fabric_sweep'], '.2f')}"
        )
        parts.append(_table(cols, [srow(r) for r in sc["transfers"]]))
        parts.append(
            "  (AllToAll rows: CPU time of the process, intervals 2 .. 1 + transfers_intervals from reset, the best"
            " of transfers_repeats runs)\n"
            f"  fitted exponent on the fixed {sc['transfers_fabric_gpus']:,}-GPU fabric (8 AllToAll jobs): cost ~ "
            f"transfers^{fmt(sc['exponent_vs_transfers'], '.2f')} (last two points: "
            f"{fmt(sc['exponent_vs_transfers_last_two'], '.2f')})"
        )
        if sc.get("jobs"):
            parts.append(_table(cols, [srow(r) for r in sc["jobs"]]))
            parts.append(
                f"  fitted exponent against independently clocked jobs (same GPUs and transfers): cost ~ "
                f"jobs^{fmt(sc['exponent_vs_jobs'], '.2f')} (events grow with the jobs)"
            )
        for slow in sc.get("slowest") or []:
            parts.append(
                f"  {slow['scenario']}, successive intervals from reset ({slow_mode(slow)}; "
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
            [[t["target"], fmt(t["value"], ".3g") + (f" {t['unit']}" if t["unit"] else ""), t["goal"],
              t["status"], fmt(t["ratio"], ".3g"), t["note"]] for t in results["targets"]]))  # fmt: skip
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
              fmt(r["env_steps_per_s"], ".4g"), *_cpu_cells(r), fmt(r["speedup_vs_single"], ".2f"),
              fmt(r.get("events_per_step")), fmt(r["construct_s"], ".2f")] for r in moe["env"]]))  # fmt: skip
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
           f"{sw['runs']} interleaved runs (load average {fmt(load[0], '.2f')} -> {fmt(load[1], '.2f')})"]  # fmt: skip
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
               f"share of the active flows: {fmt(sw.get('touched_share'), '.3f')} over intervals 1-{n} ("
               + ", ".join(fmt(x, ".3f") for x in per) + f"; re-filled alone {fmt(sw.get('refilled_share'), '.3f')}"
               "; goal <= 0.10)")  # fmt: skip
    out.append(f"  largest relative difference to the full re-solve (iterations, link bytes): "
               f"{fmt(sw.get('max_rel_diff'), '.2e')} (<= 1e-09)")  # fmt: skip
    return out
