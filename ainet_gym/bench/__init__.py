"""The benchmark suite: allocator, batching, environments, scaling.

Run ``ainet-gym bench [--quick] [--out DIR]`` or ``python -m ainet_gym.bench [--quick] [--out DIR]``. It prints
tables on the terminal (a progress bar on stderr while it runs), and writes ``DIR/bench.json`` (every figure),
``DIR/scaling.png`` (cost of one decision interval against fabric size and transfers) and ``DIR/bench.md``
(the tables with the command and the machine, ready to quote in docs/performance-log.md). ``--quick`` runs the small sizes
only (under a minute on a 2-core CPU); the full run takes a few minutes.

What is measured
----------------
1. **Allocator.** :func:`ainet_gym.sim.allocator.solve_coo` (the engine's hot path) against two baselines run in
   the same process on the same instances: :func:`ainet_gym.sim.reference.max_min_fair_reference_coo`, a
   deliberately simple pure-Python progressive filling (all active flows rise together to the next
   saturation, the flows that hit it freeze; on adjacency lists, one pass over the entries per round), and
   :func:`ainet_gym.sim.reference.max_min_fair_global_min`, numpy progressive filling that freezes
   only the flows at the global minimum level each iteration. Instances:

   * *fabric-shaped* (:func:`fabric_instance`): the real incidence the engine builds (``compile_job`` ->
     ``BatchSim.set_split`` with static ECMP hashing) for a snapshot of 3D-parallel MoE training on every
     GPU of a 2:1 spine-leaf or a fat-tree: per host a tensor-parallel ring AllReduce over NVLink; per
     group of 8 hosts spread over the leaves and per local rank, a data-parallel ring AllReduce and an
     expert-parallel AllToAll over the 8 GPUs; and a pipeline-parallel ``sendrecv shift`` to the same local
     rank of the next host (on another leaf). All of them communicate at once. On 1,024 GPUs this is
     8,448 flows (ring AllReduce flows are coupled rings: one flow per ring).
   * *random tiered* (:func:`tiered_instance`): random flows over a 3-tier link set (access up / down,
     aggregation, core) with mixed link speeds, 5% of flows crossing a link twice, weights in {1, 2, 4}
     and 20% demand-capped flows, so weighted and capped max-min are exercised too.

   Reported: ms per solve (best of repeats), flows per second, iterations per solve, the speed-ups, and
   the largest relative difference to the reference.
2. **Exactness.** Every mode that claims max-min fairness (``solve_coo``, ``max_min_fair`` on a sparse
   matrix, ``max_min_fair_batched`` in list and stacked form, the engine's stacked ``solve_coo`` and the
   global-min baseline) is compared with the pure-Python reference (or, where that is skipped for size,
   with the global-min filling) to 1e-9 relative.
3. **Batching.** One ``solve_coo`` over B stacked independent instances (the engine's batched form) and the
   public ``max_min_fair_batched`` against a Python loop over the single call.
4. **Environments.** Env steps per second of :class:`~ainet_gym.envs.env.FabricRoutingEnv` and of the native
   :class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` (default ``split`` action mode, random actions;
   resets are timed, a copy's step that only resets it is not counted) on the default scenario and on
   1,024 / 4,096 / 16,384-GPU scenarios; construction
   time (topology; env with every candidate path, compiled job and ideal step time, and the first reset)
   and peak resident memory, each size in a fresh subprocess. Each env row gives its rate by the wall clock
   (``env_steps_per_s``, the figure of the targets) and, beside it, per CPU second of the process
   (``env_steps_per_cpu_s``, ``time.process_time``, each the best window) with ``cpu_s_per_wall_s`` over
   its windows: other processes on a shared machine slow the wall-clock rate while this one waits for a
   core, the CPU rate only through what they share (caches, memory bandwidth), so compare runs on a loaded
   machine by the CPU figure. Every thread of the process counts, the compiled backend's
   worker included (its spin between hand-offs too): a vector row whose batch is split over two threads may
   spend up to 2 CPU s per wall second, and its CPU rate is then below its wall rate; below 1 the process
   waited for a core.
5. **Scaling.** Wall time of one decision interval (``FabricWorld.step`` with the static ECMP split)
   against fabric size (128 to 16,384 GPUs, 8 data-parallel ring AllReduce jobs of N/8 GPUs), against the
   number of transfers on a fixed 1,024-GPU fabric (8 expert-parallel AllToAll jobs whose size grows, so
   transfers grow as p(p-1)), and against the number of independently clocked jobs sharing the same GPUs
   (events, and so allocator calls, grow with the jobs), with fitted log-log exponents.
6. **Switch.** Intervals 1-4 from reset of 8 AllToAll jobs x 128 GPUs in exact event mode on the lazy
   incremental kernel only, the full re-solve per event only and the switch between them
   (``BatchSim.lazy_switch``): CPU s per interval, the median of 5 runs that take the three in turn, the
   three compared to 1e-9, and the flows each incremental solve touches as a share of the active flows.
7. **MoE.** The rows of the MoE scenario family on their own (``--sections moe``, a few minutes): one
   48-interval episode of ``moe-3d-1024-spine-leaf`` from reset (static ECMP, exact event mode: the
   episode's wall time, its slowest interval and its events), and the env steps/s of
   ``moe-3d-256-spine-leaf`` (the scenario of ``ainet_gym/MoE-v0``), single env and vector env at B = 1
   and 16, timed in turns, each vector row also as a ratio to the single env of the same run.

Large scenarios: a shipped scenario with the wanted number of GPUs is used when one exists; otherwise
:func:`cluster_scenario` builds one (a 2:1 spine-leaf of 8-GPU hosts running 8 data-parallel ring
AllReduce jobs of N/8 GPUs spread over the leaves, 60-130 ms of compute, so the jobs drift).

Speed is never asserted in the tests; the targets of the issue are printed beside each figure with PASS or
MISS and the ratio to the target.

Clock
-----
Every row is timed by the wall clock unless ``--clock cpu`` (:attr:`BenchConfig.clock`) asks for the CPU
seconds of the process, every thread, and of its finished child processes (the probes):
:mod:`~ainet_gym.bench.clock`. The field names do not change; ``meta.clock`` and ``meta.numba_threads``
record the run's. On a machine shared with other processes, compare two trees by ``--clock cpu`` with
``NUMBA_NUM_THREADS=1`` on both sides (CPU time sums the threads, a worker's spin included).

Layout
------
:mod:`~ainet_gym.bench.config` (:class:`BenchConfig`, the section names), :mod:`~ainet_gym.bench.instances`
(allocator instances, cluster scenarios), the measured sections in modules of one concern (issue 31), which
:mod:`~ainet_gym.bench.sections` re-exports by name: :mod:`~ainet_gym.bench.machine` (machine information,
calibration), :mod:`~ainet_gym.bench.timing` (the shared measuring helpers), :mod:`~ainet_gym.bench.progress`
(the progress bar), :mod:`~ainet_gym.bench.allocator` (sections 1-2), :mod:`~ainet_gym.bench.env_rows`
(section 3), :mod:`~ainet_gym.bench.startup` (sections 4-5), :mod:`~ainet_gym.bench.scaling` (section 6),
:mod:`~ainet_gym.bench.moe` (section 7) and :mod:`~ainet_gym.bench.switch` (the switch section); then
:mod:`~ainet_gym.bench.targets` (the targets), :mod:`~ainet_gym.bench.tables` (the terminal tables),
:mod:`~ainet_gym.bench.report` (the plot, the JSON) and :mod:`~ainet_gym.bench.probe` (the fresh-process
construction and start-up probes); this module runs them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ainet_gym.bench.clock import CLOCK_HELP, CLOCKS, check_clock, use_clock
from ainet_gym.bench.config import EXACT_RTOL, SECTIONS, TARGET_1024_SCENARIO, TARGET_SCENARIOS, BenchConfig
from ainet_gym.bench.instances import (
    Instance,
    cluster_scenario,
    fabric_instance,
    spine_leaf_shape,
    tiered_instance,
)
from ainet_gym.bench.report import jsonable, plot_scaling
from ainet_gym.bench.sections import (
    Progress,
    bench_allocator,
    bench_batching,
    bench_construction,
    bench_env,
    bench_moe,
    bench_scaling,
    bench_startup,
    bench_switch,
    calibrate,
    machine_info,
    n_tasks,
    rel_err,
)
from ainet_gym.bench.tables import format_report
from ainet_gym.bench.targets import evaluate_targets
from ainet_gym.errors import names_message

__all__ = [
    "BENCH_FILES",
    "CLOCKS",
    "DEFAULT_OUT",
    "EXACT_RTOL",
    "SECTIONS",
    "TARGET_1024_SCENARIO",
    "TARGET_SCENARIOS",
    "BenchConfig",
    "Instance",
    "bench_allocator",
    "bench_batching",
    "bench_construction",
    "bench_env",
    "bench_main",
    "bench_moe",
    "bench_scaling",
    "bench_startup",
    "bench_switch",
    "calibrate",
    "check_bench_config",
    "cluster_scenario",
    "evaluate_targets",
    "fabric_instance",
    "format_report",
    "machine_info",
    "main",
    "plot_scaling",
    "rel_err",
    "run_bench",
    "spine_leaf_shape",
    "tiered_instance",
]


#: Parent of the default output folders (``bench-results/bench__YYYYmmdd-HHMMSS``).
DEFAULT_OUT = "bench-results"
#: Files ``bench`` writes into its output directory.
BENCH_FILES = ("bench.json", "scaling.png", "bench.md")


def check_bench_config(cfg: BenchConfig) -> None:
    """Refuse a configuration that would measure nothing or run without end: an empty or unknown section
    list, a time budget or repeat count that is not positive.

    Raises
    ------
    ValueError
        Naming the field, the value and what is allowed.
    """
    if not cfg.sections:
        raise ValueError(f"sections: empty; give at least one of {', '.join(SECTIONS)}")
    check_clock(cfg.clock)
    if any(s not in SECTIONS for s in cfg.sections):
        raise ValueError(names_message("sections", cfg.sections, SECTIONS))
    for name, lo, strict in (
        ("min_time_s", 0.0, False),
        ("slowest_budget_s", 0.0, False),
        ("max_repeats", 1, False),
        ("env_windows", 1, False),
    ):
        v = getattr(cfg, name)
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or (v <= lo if strict else v < lo):
            rel = ">" if strict else ">="
            raise ValueError(f"{name} = {v!r}: must be a finite number {rel} {lo}")
    for name in ("transfers_intervals", "transfers_repeats"):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} = {v!r}: must be an int >= 1")


def run_bench(
    cfg: BenchConfig, out: str | os.PathLike | None = None, progress: bool = True, command: str | None = None
) -> dict[str, Any]:
    """Run the sections of ``cfg``; write ``bench.json``, ``scaling.png`` and ``bench.md`` to ``out``.

    Returns the results dict (the content of ``bench.json``).

    Raises
    ------
    ValueError
        If ``cfg.sections`` names an unknown section.
    """
    check_bench_config(cfg)
    t_start = time.perf_counter()  # the run's own wall time, whatever the rows' clock
    with use_clock(cfg.clock):
        results = _run_sections(cfg, progress, command)
    results["meta"]["wall_s"] = time.perf_counter() - t_start
    if hasattr(os, "getloadavg"):
        results["meta"]["load_avg_1min_end"] = round(os.getloadavg()[0], 2)
    results = jsonable(results)
    if out is not None:
        _write(results, Path(out))
    return results


def _numba_threads() -> int:
    """The threads of the compiled backend (``NUMBA_NUM_THREADS``; 1 without numba)."""
    from ainet_gym.sim.backends.numba.threads import kernel_threads

    return kernel_threads()


def _run_sections(cfg: BenchConfig, progress: bool, command: str | None) -> dict[str, Any]:
    """The sections of ``cfg`` in the report's order, timed by the clock in force, and the targets."""
    results: dict[str, Any] = {
        "meta": {
            "command": command or ("ainet-gym bench --quick" if cfg.quick else "ainet-gym bench"),
            "quick": cfg.quick,
            "date": _dt.datetime.now().isoformat(timespec="seconds"),
            "clock": cfg.clock,
            "numba_threads": _numba_threads(),
            "machine": machine_info(),
            "calibration": calibrate(),
            "config": asdict(cfg),
        }
    }
    bar = Progress(n_tasks(cfg), progress)
    exact: list[dict] = []
    try:
        if "allocator" in cfg.sections:
            results["allocator"], ex = bench_allocator(cfg, bar)
            exact += ex
        if "batching" in cfg.sections:
            results["batching"], ex = bench_batching(cfg, bar)
            exact += ex
        if exact:
            results["exactness"] = exact
        sections = (
            ("env", bench_env),
            ("construction", bench_construction),
            ("startup", bench_startup),
            ("scaling", bench_scaling),
            ("switch", bench_switch),
            ("moe", bench_moe),
        )
        for name, run in sections:  # in this order: the report's
            if name in cfg.sections:
                results[name] = run(cfg, bar)
    finally:
        bar.close()
    results["targets"] = evaluate_targets(results)
    return results


def _write(results: dict[str, Any], d: Path) -> None:
    """``bench.json``, ``scaling.png`` (when the scaling section ran) and ``bench.md`` into ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "bench.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if results.get("scaling"):
        plot_scaling(results["scaling"], d / "scaling.png")
    report = format_report(results)
    (d / "bench.md").write_text(
        f"Produced by `{results['meta']['command']}` on {results['meta']['machine']['cpu']} "
        f"({results['meta']['machine']['cores']} cores).\n\n```text\n{report}\n```\n",
        encoding="utf-8",
    )


def bench_main(args: argparse.Namespace) -> int:
    """Entry point of ``ainet-gym bench`` (``args.quick``, ``args.out``)."""
    from ainet_gym.agents.outputs import check_out_files, fresh_dir, run_stamp

    cfg = BenchConfig.quick_preset() if args.quick else BenchConfig.full()
    sections = getattr(args, "sections", None)
    if sections is not None:
        cfg = replace(cfg, sections=tuple(s.strip() for s in sections.split(",") if s.strip()))
        if not cfg.sections:
            raise ValueError(f"--sections {sections!r}: empty; give a comma list of {', '.join(SECTIONS)}")
    clock = getattr(args, "clock", None)
    if clock is not None:
        check_clock(clock, "--clock")
        cfg = replace(cfg, clock=clock)
    check_bench_config(cfg)
    if args.out is None:  # a fresh run folder: a second plain run never collides
        out = fresh_dir(DEFAULT_OUT, f"bench__{run_stamp()}", create=False)
    else:
        out = check_out_files(args.out, bool(getattr(args, "overwrite", False)), BENCH_FILES)
    command = (
        "ainet-gym bench"
        + (" --quick" if args.quick else "")
        + ("" if cfg.clock == "wall" else f" --clock {cfg.clock}")
    )
    results = run_bench(cfg, out=out, progress=not getattr(args, "no_progress", False), command=command)
    print(format_report(results))
    print(f"\nwrote {out / 'bench.json'}" + (f", {out / 'scaling.png'}"
          if results.get("scaling") else "") + f", {out / 'bench.md'}")  # fmt: skip
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ainet_gym.bench [--quick] [--out DIR] [--sections LIST] [--no-progress]``."""
    p = argparse.ArgumentParser(prog="python -m ainet_gym.bench", description="ainet-gym benchmark suite")
    p.add_argument("--quick", action="store_true", help="small sizes only (under a minute)")
    p.add_argument(
        "--out",
        default=None,
        help="directory for bench.json, scaling.png, bench.md (default: a fresh run folder)",
    )
    p.add_argument("--overwrite", action="store_true", help="allow --out to hold earlier results")
    p.add_argument("--sections", default=None, help=f"comma list of {', '.join(SECTIONS)} (default: all)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--clock", default="wall", help=CLOCK_HELP)
    return bench_main(p.parse_args(argv))
