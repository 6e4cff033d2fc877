"""The measured sections of the bench (allocator, batching, environments, construction, start-up,
scaling, switch, MoE), with the machine information, the calibration and the timing helpers they share."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.bench.config import BenchConfig
from ainet_gym.bench.instances import (
    Instance,
    cluster_scenario,
    env_scenario,
    fabric_instance,
    scenario_gpus,
    stack_instances,
    tiered_instance,
)


def _numba_version() -> str | None:
    try:
        import numba
    except ImportError:
        return None
    return str(numba.__version__)


def machine_info() -> dict[str, Any]:
    """CPU model, core count, memory, Python and library versions of this machine."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):  # not Linux: keep platform's answer
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gib = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
                break
    import scipy

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": _numba_version(),
        "load_avg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def _timeit(
    fn: Callable[[], Any], min_time: float, max_repeats: int, stat: str = "min"
) -> tuple[float, int, Any]:
    """Wall time of ``fn()`` over repeats (at least one, until ``min_time`` is spent), and its last result.

    ``stat="min"`` (the best repeat) for identical repeated work, as :mod:`timeit` does: other load on
    the machine only ever adds time. ``stat="median"`` where the repeats differ (successive intervals).
    """
    times = []
    total = 0.0
    out = None
    while True:
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        total += dt
        if total >= min_time or len(times) >= max_repeats:
            break
    return float(np.min(times) if stat == "min" else np.median(times)), len(times), out


def rel_err(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest relative difference of finite rates; inf if the infinite rates differ or shapes do."""
    a, b = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if a.shape != b.shape or not np.array_equal(np.isinf(a), np.isinf(b)) or np.isnan(a).any():
        return math.inf
    fin = np.isfinite(b)
    if not fin.any():
        return 0.0
    scale = np.maximum(np.abs(b[fin]), 1e-300)
    return float(np.max(np.abs(a[fin] - b[fin]) / scale))


def _fit_exponent(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Slope of log(y) against log(x) (least squares); None with fewer than 2 points."""
    if len(x) < 2:
        return None
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


class Progress:
    """A tqdm bar on stderr (or nothing)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="bench", unit="task", file=sys.stderr, dynamic_ncols=True)

    def start(self, desc: str) -> None:
        if self.bar is not None:
            self.bar.set_description(desc[:48])

    def done(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _allocator_instances(cfg: BenchConfig) -> list[tuple[str, Callable[[], Instance]]]:
    out: list[tuple[str, Callable[[], Instance]]] = []
    for n in cfg.spine_leaf_gpus:
        out.append((f"spine-leaf {n} GPUs", lambda n=n: fabric_instance("spine_leaf", n)[0]))
    for k in cfg.fat_tree_k:
        out.append((f"fat-tree k={k}", lambda k=k: fabric_instance("fat_tree", k)[0]))
    for f in cfg.tiered_flows:
        out.append((f"tiered {f} flows", lambda f=f: tiered_instance(f)))
    return out


def _solve_fill(inst: Instance) -> tuple[np.ndarray, int]:
    """The compiled progressive filling (:func:`ainet_gym.sim.backends.numba.fill.solve_fill`) on an instance's entries."""
    from ainet_gym.sim.backends.numba.fill import solve_fill

    order = np.argsort(inst.entry_flow, kind="stable")
    w = np.ones(inst.n_flows) if inst.weights is None else inst.weights
    d = np.full(inst.n_flows, np.inf) if inst.demand is None else inst.demand
    return solve_fill(
        inst.entry_flow[order].astype(np.int64), inst.entry_link[order].astype(np.int64),
        inst.entry_coef[order].astype(np.float64), inst.capacity.astype(np.float64), inst.n_flows,
        np.asarray(w, dtype=np.float64), np.asarray(d, dtype=np.float64),
    )  # fmt: skip


def bench_allocator(cfg: BenchConfig, progress: Progress) -> tuple[list[dict], list[dict]]:
    """Section 1 (allocator against the baselines) and the exactness rows of its instances."""
    from ainet_gym.sim.allocator import max_min_fair, solve_coo
    from ainet_gym.sim.reference import max_min_fair_global_min, max_min_fair_reference_coo

    rows: list[dict] = []
    exact: list[dict] = []
    for label, make in _allocator_instances(cfg):
        progress.start(f"allocator: {label}")
        t0 = time.perf_counter()
        inst = make()
        build_s = time.perf_counter() - t0
        args = (inst.entry_flow, inst.entry_link, inst.entry_coef, inst.capacity, inst.n_flows)
        kw = {"weights": inst.weights, "demand": inst.demand}
        solve_s, reps, (rates, its) = _timeit(
            lambda args=args, kw=kw: solve_coo(*args, **kw, return_iterations=True),
            cfg.min_time_s,
            cfg.max_repeats,
        )
        row: dict[str, Any] = {
            "instance": inst.name,
            "family": inst.family,
            **inst.meta,
            "flows": inst.n_flows,
            "links": inst.n_links,
            "entries": inst.n_entries,
            "build_s": build_s,
            "solve_ms": solve_s * 1e3,
            "solve_repeats": reps,
            "flows_per_s": inst.n_flows / solve_s,
            "iterations": int(its),
        }
        fill_s, _, (fill_rates, _) = _timeit(
            lambda inst=inst: _solve_fill(inst), cfg.min_time_s, cfg.max_repeats
        )  # the compiled progressive filling (max_min_fair's numba backend, the engine's exact event mode)
        row.update(fill_ms=fill_s * 1e3, fill_vs_solve_coo=solve_s / fill_s)
        gmin = ref = None
        if inst.n_flows <= cfg.gmin_max_flows:
            g_s, g_reps, (gmin, g_its) = _timeit(
                lambda args=args, kw=kw: max_min_fair_global_min(*args, **kw, return_iterations=True),
                cfg.min_time_s,
                cfg.max_repeats,
            )
            row.update(gmin_ms=g_s * 1e3, gmin_iterations=int(g_its), speedup_vs_gmin=g_s / solve_s,
                       fill_vs_gmin=g_s / fill_s)  # fmt: skip
        else:
            row.update(gmin_ms=None, gmin_iterations=None, speedup_vs_gmin=None)
            row["gmin_skipped"] = f"more than {cfg.gmin_max_flows:,} flows (one iteration per level)"
        if inst.n_flows <= cfg.reference_max_flows:
            t0 = time.perf_counter()
            ref, rounds = max_min_fair_reference_coo(*args, **kw, return_iterations=True)
            r_s = time.perf_counter() - t0
            row.update(reference_ms=r_s * 1e3, reference_rounds=rounds, speedup_vs_reference=r_s / solve_s)
        else:
            row.update(reference_ms=None, reference_rounds=None, speedup_vs_reference=None)
            row["reference_skipped"] = f"more than {cfg.reference_max_flows:,} flows (pure Python, too slow)"
        truth, truth_name = (ref, "reference") if ref is not None else (gmin, "global-min")
        if truth is not None:
            errs = {"solve_coo": rel_err(rates, truth), "compiled fill": rel_err(fill_rates, truth)}
            public = max_min_fair(inst.csr(), inst.capacity, demand=inst.demand, weights=inst.weights)
            errs["max_min_fair (sparse)"] = rel_err(public, truth)
            if ref is not None and gmin is not None:
                errs["global-min (numpy)"] = rel_err(gmin, ref)
            row["max_rel_err"] = max(errs.values())
            row["checked_against"] = truth_name
            for mode, e in errs.items():
                exact.append({"mode": mode, "instance": inst.name, "against": truth_name, "max_rel_err": e})
        else:
            row["max_rel_err"] = None
            row["checked_against"] = None
        rows.append(row)
        del inst, rates, gmin, ref
        gc.collect()
        progress.done()
    return rows, exact


def _batching_exactness(pool: list, csrs: list, k: int) -> list[dict]:
    """The public allocator on the first ``k`` instances of the batching pool against the references: the
    sparse form against the pure-Python reference, the stacked dense form against global-min filling."""
    from ainet_gym.sim.allocator import max_min_fair, max_min_fair_batched
    from ainet_gym.sim.reference import max_min_fair_global_min, max_min_fair_reference_coo

    exact: list[dict] = []
    err_ref = max(
        rel_err(
            r,
            max_min_fair_reference_coo(i.entry_flow, i.entry_link, i.entry_coef, i.capacity, i.n_flows),
        )
        for i, r in zip(pool[:k], [max_min_fair(c, i.capacity) for c, i in zip(csrs[:k], pool[:k])])
    )
    exact.append(
        {"mode": "max_min_fair (sparse)", "instance": f"batching pool, {k} instances", "against": "reference",
         "max_rel_err": err_ref}
    )  # fmt: skip
    # the stacked dense form of max_min_fair_batched (batch, flows, links)
    dense = np.stack([c.toarray() for c in csrs[:k]])
    r_dense = max_min_fair_batched(dense, np.stack([i.capacity for i in pool[:k]]))
    err_dense = max(
        rel_err(r_dense[j], max_min_fair_global_min(i.entry_flow, i.entry_link, i.entry_coef, i.capacity,
                                                    i.n_flows))
        for j, i in enumerate(pool[:k])
    )  # fmt: skip
    exact.append(
        {"mode": "max_min_fair_batched (stacked dense)", "instance": f"batching pool, {k} instances",
         "against": "global-min", "max_rel_err": err_dense}
    )  # fmt: skip
    return exact


def bench_batching(cfg: BenchConfig, progress: Progress) -> tuple[list[dict], list[dict]]:
    """Section 2: B independent instances in one call against a loop of single calls."""
    from ainet_gym.sim.allocator import max_min_fair, max_min_fair_batched, solve_coo

    rows: list[dict] = []
    exact: list[dict] = []
    progress.start("batching: instances")
    b_max = max(cfg.batch_sizes)
    pool = [fabric_instance("spine_leaf", cfg.batch_instance_gpus, seed=s)[0] for s in range(b_max)]
    csrs = [i.csr() for i in pool]
    progress.done()
    name = f"{pool[0].name} ({pool[0].n_flows} flows), one ECMP seed per instance"
    for b in cfg.batch_sizes:
        progress.start(f"batching: B={b}")
        insts = pool[:b]

        def loop(insts: Sequence[Instance] = insts) -> list[np.ndarray]:
            return [solve_coo(i.entry_flow, i.entry_link, i.entry_coef, i.capacity, i.n_flows) for i in insts]

        stacked = stack_instances(insts)

        def batched(stacked: tuple = stacked) -> np.ndarray:
            return solve_coo(*stacked)

        def loop_public(b: int = b) -> list[np.ndarray]:
            return [max_min_fair(csrs[k], pool[k].capacity) for k in range(b)]

        def batched_public(b: int = b) -> list[np.ndarray]:
            return max_min_fair_batched(csrs[:b], [pool[k].capacity for k in range(b)])

        t_loop, _, r_loop = _timeit(loop, cfg.min_time_s, cfg.max_repeats)
        t_bat, _, r_bat = _timeit(batched, cfg.min_time_s, cfg.max_repeats)
        t_lp, _, _ = _timeit(loop_public, cfg.min_time_s, cfg.max_repeats)
        t_bp, _, r_bp = _timeit(batched_public, cfg.min_time_s, cfg.max_repeats)
        cut = np.cumsum([i.n_flows for i in insts])[:-1]
        parts = np.split(r_bat, cut)
        rows.append(
            {
                "batch": b,
                "instance": name,
                "loop_ms_per_instance": t_loop / b * 1e3,
                "batched_ms_per_instance": t_bat / b * 1e3,
                "speedup": t_loop / t_bat,
                "public_loop_ms_per_instance": t_lp / b * 1e3,
                "public_batched_ms_per_instance": t_bp / b * 1e3,
                "public_speedup": t_lp / t_bp,
            }
        )
        err_stack = max(rel_err(p, q) for p, q in zip(parts, r_loop))
        err_pub = max(rel_err(p, q) for p, q in zip(r_bp, r_loop))
        exact.append(
            {"mode": "solve_coo stacked (engine batch)", "instance": f"B={b}", "against": "loop of solve_coo",
             "max_rel_err": err_stack}
        )  # fmt: skip
        exact.append(
            {"mode": "max_min_fair_batched (list)", "instance": f"B={b}", "against": "loop of solve_coo",
             "max_rel_err": err_pub}
        )  # fmt: skip
        progress.done()
    progress.start("batching: exactness")
    exact += _batching_exactness(pool, csrs, min(8, b_max))
    progress.done()
    return rows, exact


class _Timer:
    """Env steps per second of one env with seeded random actions, as the best of its timing windows (on a
    shared machine the load comes and goes; the best window is the least disturbed one, as ``timeit``
    advises and as the calibration does).

    Each window is timed twice: by the wall clock (``best``, the figure of the row and its targets) and by
    the process's CPU time (``best_cpu``: env steps per CPU second, ``time.process_time``, the best window),
    which other processes on a shared machine do not inflate; every thread of the process counts, numba's
    worker included, so a row that runs two threads spends up to 2 CPU s per wall second. ``cpu_s`` and
    ``wall_s`` sum the timed windows.

    Resets are timed but not counted: the single env's ``reset()`` after an episode, and the vector env's
    copies that stand still in a step because it resets them (Gymnasium's next-step autoreset); a vector
    step counts one env step per copy that ran its interval, so both envs count the same steps."""

    def __init__(self, env: Any, batch: int, vector: bool) -> None:
        self.env, self.batch, self.vector = env, batch, vector
        space = env.single_action_space if vector else env.action_space
        rng = np.random.default_rng(0)
        shape = (batch, *space.shape) if vector else space.shape
        self.actions = [rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) for _ in range(4)]
        env.reset(seed=0)
        env.step(self.actions[0])  # warm-up
        self.best, self.steps = 0.0, 0
        self.best_cpu: float | None = None
        self.cpu_s = self.wall_s = 0.0

    def window(self, min_time: float) -> None:
        """One timing window of at least ``min_time`` (and 3 steps) of wall time; keeps the best rates."""
        steps = 0
        env_steps = 0  # copies that ran their interval
        c0 = time.process_time()
        t0 = time.perf_counter()
        while True:
            still = int(self.env.autoreset_pending.sum()) if self.vector else 0  # reset by this step
            out = self.env.step(self.actions[(self.steps + steps) % 4])
            steps += 1
            env_steps += self.batch - still
            if not self.vector and (out[2] or out[3]):
                self.env.reset()
            dt = time.perf_counter() - t0
            if (dt >= min_time and steps >= 3) or dt >= 20 * min_time:
                break
        cpu = time.process_time() - c0
        self.best, self.steps = max(self.best, env_steps / dt), self.steps + steps
        if cpu > 0:
            self.best_cpu = max(self.best_cpu or 0.0, env_steps / cpu)
        self.cpu_s, self.wall_s = self.cpu_s + cpu, self.wall_s + dt

    def events_per_step(self, steps: int = 8) -> float | None:
        """Mean events of an interval (the most any copy of the batch had) over ``steps`` more steps, untimed,
        leaving out a step in which every copy stood still (the vector env's autoreset step)."""
        core = getattr(self.env, "core", None) or self.env.unwrapped.core
        seen: list[int] = []
        for i in range(steps):
            out = self.env.step(self.actions[i % 4])
            res = core.last_result
            if res is not None and bool(np.any(res.duration_s > 0)):
                seen.append(int(res.events))
            if not self.vector and (out[2] or out[3]):
                self.env.reset()
        return float(np.mean(seen)) if seen else None


#: scenarios up to this many GPUs time their single env and every vector env in interleaved windows
INTERLEAVE_MAX_GPUS = 1024


def bench_env(cfg: BenchConfig, progress: Progress) -> list[dict]:
    """Section 3: steps per second of the single env and of the native vector env, per backend.

    Rows of the same scenario, env and batch on the two backends are measured one after the other in
    this process; ``x_numpy`` is the ratio of the compiled backend to the numpy one. For a scenario of up
    to :data:`INTERLEAVE_MAX_GPUS` GPUs, the single env and the vector envs of a backend are built together
    and timed in turns, one window each per round (``cfg.env_windows`` rounds), so that the ratios
    ``x single`` compare rates measured over the same minutes of a shared machine, whose speed drifts by
    tens of percent from one minute to the next; every row is the best of its windows.
    """
    from ainet_gym.envs.env import FabricRoutingEnv
    from ainet_gym.envs.vector_env import FabricRoutingVectorEnv
    from ainet_gym.sim.backends import get_backend

    rows: list[dict] = []
    windows = cfg.env_windows
    for size, batches in cfg.env_sizes:
        label, scenario = env_scenario(size)
        gpus = scenario_gpus(scenario)
        interleave = gpus <= INTERLEAVE_MAX_GPUS
        for backend in cfg.env_backends:
            if get_backend(backend).reference and gpus > cfg.numpy_env_max_gpus:  # the slow numpy reference
                continue
            group: list[tuple[dict, _Timer]] = []

            progress.start(f"env: {label} single {backend}")
            t0 = time.perf_counter()
            env = FabricRoutingEnv(scenario, backend=backend)
            row = {"scenario": label, "gpus": gpus, "backend": backend, "env": "single", "batch": 1,
                   "action_dim": int(np.prod(env.action_space.shape))}  # fmt: skip
            rows.append(row)
            row["construct_s"] = time.perf_counter() - t0
            single_timer = _Timer(env, 1, False)
            if not interleave:  # one env in memory at a time: its windows now
                for _ in range(windows):
                    single_timer.window(cfg.min_time_s * 2)
                _finish(row, single_timer, single_timer.best)
            group.append((row, single_timer))
            progress.done()
            for b in batches:
                progress.start(f"env: {label} vector B={b} {backend}")
                t0 = time.perf_counter()
                venv = FabricRoutingVectorEnv(b, scenario, backend=backend)
                make_s = time.perf_counter() - t0
                row = {"scenario": label, "gpus": gpus, "backend": backend, "env": "vector", "batch": b}
                rows.append(row)
                vt = _Timer(venv, b, True)
                row["construct_s"] = make_s
                if interleave:
                    group.append((row, vt))
                else:
                    for _ in range(windows):
                        vt.window(cfg.min_time_s * 2)
                    _finish(row, vt, single_timer.best)
                    del venv, vt
                    gc.collect()
                progress.done()
            if interleave:  # every env of the group one window per round, in turns
                progress.start(f"env: {label} {backend}, {len(group)} envs in {windows} interleaved rounds")
                for _ in range(windows):
                    for _row, timer in group:
                        timer.window(cfg.min_time_s)
                for row, timer in group:
                    _finish(row, timer, single_timer.best)
                progress.done()
            group.clear()
            gc.collect()
    for r in rows:  # compiled vs numpy on the same scenario, env and batch
        ref = next((q for q in rows if q["backend"] == "numpy" and q["scenario"] == r["scenario"]
                    and q["env"] == r["env"] and q["batch"] == r["batch"]), None)  # fmt: skip
        r["x_numpy"] = r["env_steps_per_s"] / ref["env_steps_per_s"] if ref is not None else None
    return rows


def _finish(row: dict, timer: _Timer, single: float) -> None:
    """Fill an env row from its timer (``single``: the best rate of the single env of its group):
    ``env_steps_per_s`` by the wall clock and ``env_steps_per_cpu_s`` by the process's CPU time (each the
    best window; CPU time counts every thread), ``cpu_s_per_wall_s`` over all its windows (below 1: the
    process waited for a core; above 1: threads ran at once)."""
    row.update(
        env_steps_per_s=timer.best,
        env_steps_per_cpu_s=timer.best_cpu,
        cpu_s_per_wall_s=timer.cpu_s / timer.wall_s if timer.wall_s > 0 else None,
        steps_timed=timer.steps,
        speedup_vs_single=timer.best / single,
        events_per_step=timer.events_per_step(),
    )


def _probe(spec: dict[str, Any], env: dict[str, str] | None = None) -> tuple[dict[str, Any], float]:
    """Run :mod:`ainet_gym.bench.probe` in a fresh process; (its JSON result or an error row, wall s).

    The probe runs as a script (``python -P .../probe.py``), not as ``-m ainet_gym.bench.probe``: ``-m``
    would import this package first (its instances import scipy.sparse), some 0.1 s of start-up that a
    user's process, which imports ``ainet_gym`` only, does not pay. ``-P``: the script's folder is not put
    on ``sys.path`` (its ``config.py`` would shadow any top-level module of that name)."""
    from ainet_gym.bench import probe

    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-P", probe.__file__],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]}, wall
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def bench_construction(cfg: BenchConfig, progress: Progress) -> list[dict]:
    """Section 3b: construction time and peak memory, each size in a fresh subprocess."""
    rows: list[dict] = []
    for size in cfg.construction_gpus:
        label, scenario = env_scenario(size)
        progress.start(f"construction: {label}")
        gpus = scenario_gpus(scenario)
        res, wall = _probe({"probe": "construction", "scenario": scenario})
        rows.append({"scenario": label, "gpus": gpus, **res, "subprocess_wall_s": wall})
        progress.done()
    return rows


def bench_startup(cfg: BenchConfig, progress: Progress) -> list[dict]:
    """Section 3c: a fresh process up to its first env step: cold (the compiled kernels are built into an
    empty cache directory) and again with that on-disk cache; the numpy backend for comparison."""
    import tempfile

    label, scenario = env_scenario(cfg.startup_gpus)
    gpus = scenario_gpus(scenario)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ainet-gym-numba-cache-") as cache:
        runs: list[tuple[str, str, dict[str, str] | None]] = [
            ("numba", "cold (empty kernel cache)", {"NUMBA_CACHE_DIR": cache}),
            ("numba", "cached (second process)", {"NUMBA_CACHE_DIR": cache}),
            ("numpy", "numpy backend", None),
        ]
        if not cfg.startup_cold:
            runs = [("numba", "cached (this machine's cache)", None), runs[2]]
        for backend, what, env in runs:
            progress.start(f"startup: {what}")
            res, wall = _probe({"probe": "startup", "scenario": scenario, "backend": backend}, env=env)
            row = {"scenario": label, "gpus": gpus, "run": what, **res, "process_wall_s": wall}
            if "error" not in row:  # interpreter start and imports: the rest of the process's wall time
                row["start_imports_s"] = wall - res["construct_s"] - res["first_step_s"]
            rows.append(row)
            progress.done()
    if cfg.startup_cold and "error" not in rows[0] and "error" not in rows[1]:
        rows[0]["compile_s"] = rows[0]["process_wall_s"] - rows[1]["process_wall_s"]
    return rows


def calibrate(repeats: int = 5) -> dict[str, float]:
    """Machine calibration printed beside the figures, so runs on different machines can be compared:
    best-of-``repeats`` ms of a fixed pure-Python loop (1e6 integer multiply-adds) and of a fixed numpy
    kernel (sort of 1e6 seeded float64 plus a bincount of 1e6 entries into 1e4 bins)."""

    def py_loop() -> int:
        acc = 0
        for i in range(1_000_000):
            acc += i * i
        return acc

    x = np.random.default_rng(0).random(1_000_000)
    idx = (x * 10_000).astype(np.int64)

    def np_kernel() -> float:
        return float(np.sort(x)[500_000] + np.bincount(idx, weights=x, minlength=10_000).max())

    out = {}
    for name, fn in (("python_loop_ms", py_loop), ("numpy_kernel_ms", np_kernel)):
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        out[name] = best * 1e3
    return out


def _instance_size(world: Any, sc: Any) -> dict[str, Any]:
    """The size of a timed instance (one world, batch 1): GPUs, links, jobs, transfers, flows and entries."""
    sim = world.sim
    assert sim is not None
    return {
        "scenario": sc.name,
        "gpus": int(world.fabric.n_gpus),
        "links": int(world.fabric.n_links),
        "jobs": len(sc.jobs),
        "transfers": int(sim.member_flow.shape[0]),
        "flows": int(sim.n_flows),
        "entries": int(sim.e_flow.shape[0]),
    }


def _interval_cost(scenario: dict[str, Any], min_time: float, max_repeats: int) -> dict[str, Any]:
    """Median wall time of one decision interval (``FabricWorld.step`` with the static ECMP split)."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario(scenario)
    t0 = time.perf_counter()
    world = FabricWorld(sc, 1)
    world.reset(seeds=[0])
    build_s = time.perf_counter() - t0
    events: list[int] = []
    world.step(world.default_split())  # warm-up

    def one() -> None:
        res = world.step(world.default_split())
        events.append(int(res.events))

    t, reps, _ = _timeit(one, min_time, max_repeats, stat="median")
    return {
        **_instance_size(world, sc),
        "events_per_interval": float(np.mean(events)),
        "interval_ms": t * 1e3,
        "repeats": reps,
        "build_s": build_s,
    }


def _successive_intervals(
    scenario: dict[str, Any],
    intervals: int,
    max_events: int,
    budget_s: float,
    rate_updates: str,
    quantum_us: float = 0.0,
    incremental_min_flows: int | None = None,
) -> dict[str, Any]:
    """Wall time of the successive intervals of one episode from reset (static ECMP), each on its own:
    an episode's intervals differ (the first ones are mostly compute; later ones overlap the jobs'
    communication), so the slowest is the figure, not a median. Stops after ``intervals``, after an
    interval with more than ``max_events`` events (timed up to there: a lower bound), or once
    ``budget_s`` is spent. ``quantum_us``: the scenario's ``dynamics.rate_quantum_us``;
    ``incremental_min_flows``: the compiled backend's lazy exact kernel from this many flows of an
    instance on (-1: never, the full re-solve per event), None: the default
    (:data:`ainet_gym.sim.backends.numba.settings.INCREMENTAL_MIN_FLOWS`)."""
    from ainet_gym.sim.backends.numba import settings

    saved = settings.INCREMENTAL_MIN_FLOWS
    if incremental_min_flows is not None:
        settings.INCREMENTAL_MIN_FLOWS = incremental_min_flows  # read by the simulations built meanwhile
    try:
        out = _successive_intervals_of(scenario, intervals, max_events, budget_s, rate_updates, quantum_us)
    finally:
        settings.INCREMENTAL_MIN_FLOWS = saved
    lazy = incremental_min_flows if incremental_min_flows is not None else saved
    exact = rate_updates == "event" and not quantum_us
    out["allocation"] = (None if not exact else "lazy incremental kernel" if lazy >= 0 else
                         "full re-solve per event")  # fmt: skip
    return out


def _successive_intervals_of(
    scenario: dict[str, Any],
    intervals: int,
    max_events: int,
    budget_s: float,
    rate_updates: str,
    quantum_us: float,
) -> dict[str, Any]:
    """:func:`_successive_intervals` with the kernel default set: the intervals timed
    (:func:`_timed_intervals`) and summed up (:func:`_interval_summary`)."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario(
        {
            **scenario,
            "dynamics": {
                **scenario.get("dynamics", {}),
                "rate_updates": rate_updates,
                "rate_quantum_us": quantum_us,
            },
        }
    )
    world = FabricWorld(sc, 1)
    world.reset(seeds=[0])
    rows = _timed_intervals(world, intervals, max_events, budget_s)
    worst = max(rows, key=lambda r: r["s"])
    return {
        **_interval_summary(rows),
        "scenario": sc.name,
        "rate_updates": rate_updates,
        "rate_quantum_us": quantum_us,
        "intervals": rows,
        "slowest_s": worst["s"],
        "slowest_interval": worst["interval"],
        "slowest_events": worst["events"],
        "capped": any(r["capped"] for r in rows),
        "max_events": max_events,
    }


@contextlib.contextmanager
def _last_metrics(sim: Any) -> Iterator[list[Any]]:
    """While in the block, ``sim.run_interval`` keeps the metrics of its last interval in the list it yields
    (the counters a step's result does not carry: re-fills, repairs, ...); the bound method again after."""
    last: list[Any] = []
    run = sim.run_interval

    def counted(*args: Any, **kw: Any) -> Any:
        m = run(*args, **kw)
        last[:] = [m]
        return m

    sim.run_interval = counted
    try:
        yield last
    finally:
        del sim.run_interval  # the bound method again


def _timed_intervals(world: Any, intervals: int, max_events: int, budget_s: float) -> list[dict[str, Any]]:
    """Step ``world`` (reset, static ECMP) interval after interval, each timed on its own with its events and
    re-fill counters, until ``intervals``, an interval capped at ``max_events`` (its counters up to the cap)
    or ``budget_s`` spent."""
    from ainet_gym.sim.engine import TooManyEvents

    sim = world.sim
    assert sim is not None
    rows: list[dict[str, Any]] = []
    spent = 0.0
    with _last_metrics(sim) as last:
        for i in range(intervals):
            t0 = time.perf_counter()
            last.clear()
            try:
                res = world.step(world.default_split(), max_events=max_events)
                ev, capped = int(res.events), False
            except TooManyEvents as exc:
                ev, capped = max_events, True
                if exc.metrics is not None:  # the counters up to the cap
                    last[:] = [exc.metrics]
            dt = time.perf_counter() - t0
            spent += dt
            row = {"interval": i, "events": ev, "s": dt, "capped": capped}
            if last:
                m = last[0]
                row.update(incremental_solves=m.incremental_solves, flows_refilled=m.flows_refilled,
                           flows_active=m.flows_active, full_fills=m.full_fills,
                           parallel_solves=m.parallel_solves, repairs=m.repairs,
                           repairs_declined=m.repairs_declined, flows_checked=m.flows_checked)  # fmt: skip
            rows.append(row)
            if capped or spent >= budget_s:
                break
    return rows


def _interval_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The re-fill counters of :func:`_timed_intervals`' rows summed: the shares of the active flows the
    incremental solves re-filled and touched, and the counts of repairs and solves."""
    refilled = sum(r.get("flows_refilled", 0) for r in rows)
    checked = sum(r.get("flows_checked", 0) for r in rows)
    active = sum(r.get("flows_active", 0) for r in rows)
    return {
        "refilled_share": refilled / active if active else None,
        "touched_share": (refilled + checked) / active if active else None,
        "repairs": sum(r.get("repairs", 0) for r in rows),
        "repairs_declined": sum(r.get("repairs_declined", 0) for r in rows),
        "incremental_solves": sum(r.get("incremental_solves", 0) for r in rows),
        "parallel_solves": sum(r.get("parallel_solves", 0) for r in rows),
    }


def _episode(name: str, steps: int) -> dict[str, Any]:
    """Wall time of one episode of ``steps`` intervals of a shipped scenario from reset (static ECMP, exact
    event mode unless the scenario says otherwise), and its slowest interval."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    t0 = time.perf_counter()
    world = FabricWorld(load_scenario(name), 1)
    world.reset(seeds=[0])
    build_s = time.perf_counter() - t0
    times, events = [], 0
    for _ in range(steps):
        t1 = time.perf_counter()
        events += int(world.step(world.default_split()).events)
        times.append(time.perf_counter() - t1)
    return {"scenario": name, "steps": steps, "episode_s": float(sum(times)), "build_s": build_s,
            "slowest_interval_s": float(max(times)), "events": events}  # fmt: skip


def _fixed_intervals_cost(scenario: dict[str, Any], intervals: int, repeats: int) -> dict[str, Any]:
    """CPU time of the process per decision interval over a fixed set of intervals: intervals 2 .. ``1 +
    intervals`` of an episode from reset (``FabricWorld.step`` with the static ECMP split; interval 1, a
    warm-up, untimed), the best of ``repeats`` runs of that same set, each from a fresh reset (the same work:
    seed 0); ``interval_ms`` is that CPU time, ``interval_wall_ms`` the wall time of the same run.

    Unlike :func:`_interval_cost`, which times the intervals that fit a wall-clock window, the intervals timed
    (and so the events, ``events_per_interval``) do not depend on the machine's load: on an AllToAll the
    intervals of an episode differ by 100x in events, so a window that takes in one more interval under a
    lighter load moves the cost exponent of the sweep. CPU time rather than wall time: on a machine shared
    with other processes wall times moved the largest point by 1.5x between runs a minute apart
    (docs/engine-alltoall.md, item 11)."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    if isinstance(intervals, bool) or not isinstance(intervals, int) or intervals < 1:
        raise ValueError(f"transfers_intervals = {intervals!r}: must be an int >= 1")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"transfers_repeats = {repeats!r}: must be an int >= 1")
    sc = load_scenario(scenario)
    t0 = time.perf_counter()
    world = FabricWorld(sc, 1)
    build_s = time.perf_counter() - t0
    best, best_wall = math.inf, math.inf
    events: list[int] = []
    for _ in range(repeats):
        world.reset(seeds=[0])
        world.step(world.default_split())  # interval 1: warm-up, untimed
        events = []
        cpu = wall = 0.0
        for _ in range(intervals):
            c1, t1 = time.process_time(), time.perf_counter()
            res = world.step(world.default_split())
            cpu += time.process_time() - c1
            wall += time.perf_counter() - t1
            events.append(int(res.events))
        if cpu < best:
            best, best_wall = cpu, wall
    return {
        **_instance_size(world, sc),
        "events_per_interval": float(np.mean(events)),
        "interval_ms": best / intervals * 1e3,
        "interval_wall_ms": best_wall / intervals * 1e3,
        "clock": "process CPU",
        "repeats": repeats,
        "intervals_timed": intervals,
        "build_s": build_s,
    }


def bench_scaling(cfg: BenchConfig, progress: Progress) -> dict[str, Any]:
    """Section 4: cost of one interval against fabric size and against transfers, with fitted exponents."""
    size_rows = []
    for n in cfg.scaling_gpus:
        progress.start(f"scaling: {n} GPUs")
        size_rows.append(_interval_cost(cluster_scenario(n), cfg.min_time_s, cfg.max_repeats))
        gc.collect()
        progress.done()
    tr_rows = []
    nf = cfg.transfers_fabric_gpus
    for jg in cfg.transfers_job_gpus:
        progress.start(f"scaling: {nf} GPUs, 8 AllToAll x {jg}")
        tr_rows.append(
            {**_fixed_intervals_cost(cluster_scenario(nf, 8, jg, op="alltoall"), cfg.transfers_intervals,
                                     cfg.transfers_repeats),
             "job_gpus": jg}
        )  # fmt: skip
        gc.collect()
        progress.done()
    job_rows = []
    for nj in cfg.scaling_jobs:
        progress.start(f"scaling: {nf} GPUs, {nj} jobs")
        job_rows.append(_interval_cost(cluster_scenario(nf, nj), cfg.min_time_s, cfg.max_repeats))
        gc.collect()
        progress.done()
    slowest = []
    if cfg.slowest_intervals:
        # exact event mode twice in the same run: the lazy incremental kernel and the full re-solve per event
        runs = (("event", 0.0, cfg.slowest_incremental_min_flows), ("event", 0.0, -1),
                ("event", cfg.slowest_quantum_us, None), ("phase", 0.0, None))  # fmt: skip
        for mode, q, inc in runs:
            progress.start(f"scaling: {nf} GPUs, 8 AllToAll x 128, successive intervals ({mode}, {q:g} us)")
            slowest.append(
                _successive_intervals(cluster_scenario(nf, 8, 128, op="alltoall"), cfg.slowest_intervals,
                                      cfg.slowest_max_events, cfg.slowest_budget_s, mode, q, inc)
            )  # fmt: skip
            gc.collect()
            progress.done()
    ms = [r["interval_ms"] for r in size_rows]
    tr_x = [r["transfers"] for r in tr_rows]
    tr_y = [r["interval_ms"] for r in tr_rows]
    return {
        "fabric_size": size_rows,
        "exponent_vs_gpus": _fit_exponent([r["gpus"] for r in size_rows], ms),
        "exponent_vs_transfers_fabric_sweep": _fit_exponent([r["transfers"] for r in size_rows], ms),
        "transfers": tr_rows,
        "transfers_fabric_gpus": nf,
        "exponent_vs_transfers": _fit_exponent(tr_x, tr_y),
        "exponent_vs_transfers_last_two": _fit_exponent(tr_x[-2:], tr_y[-2:]),
        "jobs": job_rows,
        "slowest": slowest,
        "exponent_vs_jobs": _fit_exponent(
            [r["jobs"] for r in job_rows], [r["interval_ms"] for r in job_rows]
        ),
    }


def n_tasks(cfg: BenchConfig) -> int:
    n = 0
    s = set(cfg.sections)
    if "allocator" in s:
        n += len(_allocator_instances(cfg))
    if "batching" in s:
        n += len(cfg.batch_sizes) + 2
    if "env" in s:
        n += sum(1 + len(b) for _, b in cfg.env_sizes) * len(cfg.env_backends)
    if "construction" in s:
        n += len(cfg.construction_gpus)
    if "startup" in s:
        n += 3 if cfg.startup_cold else 2
    if "scaling" in s:
        n += len(cfg.scaling_gpus) + len(cfg.transfers_job_gpus) + len(cfg.scaling_jobs)
        n += 4 if cfg.slowest_intervals else 0
    if "switch" in s and cfg.switch_runs and cfg.switch_intervals:
        n += 1
    if "moe" in s:
        n += len(cfg.moe_episodes) + (1 + len(cfg.moe_env[1])) * len(cfg.env_backends)
    return n


def bench_moe(cfg: BenchConfig, progress: Progress) -> dict[str, Any]:
    """Section 7: the MoE family's rows on their own, without the long environment and scaling sections.

    ``episodes``: each of ``cfg.moe_episodes`` timed whole from reset (:func:`_episode`: static ECMP, exact
    event mode, ``cfg.moe_episode_steps`` intervals, the slowest of them and the events); ``env``: the rows
    of :func:`bench_env` for the scenario of ``cfg.moe_env`` alone (its single env and its vector envs,
    timed in turns, each vector row with ``x single``, its rate against that single env's in the same run).
    """
    episodes = []
    for name in cfg.moe_episodes:
        progress.start(f"moe: {name}, {cfg.moe_episode_steps} intervals")
        episodes.append(_episode(name, cfg.moe_episode_steps))
        gc.collect()
        progress.done()
    env = bench_env(replace(cfg, env_sizes=(cfg.moe_env,)), progress)
    return {"episodes": episodes, "env": env}


#: the three ways a lazy-kernel instance may allocate in exact event mode (:func:`bench_switch`): the lazy
#: kernel only (the switch off), the full re-solve per event only (``incremental_min_flows`` -1) and the
#: switch between them by its cost model (``BatchSim.lazy_switch``)
SWITCH_MODES = ("lazy only", "full only", "switch")


def _switch_world(scenario: dict[str, Any], mode: str) -> Any:
    """A world of ``scenario`` whose simulation allocates as ``mode`` says (one of :data:`SWITCH_MODES`)."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    world = FabricWorld(load_scenario(scenario), 1, backend="numba")
    world.reset(seeds=[0])
    sim = world.sim
    assert sim is not None
    sim.incremental_min_flows = -1 if mode == "full only" else 0
    sim.lazy_switch = mode == "switch"
    return world


def bench_switch(cfg: BenchConfig, progress: Progress) -> dict[str, Any]:
    """Section 6: intervals ``1..cfg.switch_intervals`` from reset of 8 AllToAll x 128 GPUs in exact event mode,
    on the lazy kernel only, the full re-solve per event only and the switch between them
    (:data:`ainet_gym.sim.backends.numba.settings.LAZY_SWITCH`): CPU s of each interval (``time.process_time``, this
    process), the median of ``cfg.switch_runs`` runs that take the modes in turn (the order rotating from
    run to run, each run from reset), and the flows each incremental solve re-filled as a share of the
    active flows (the lazy kernel only: the flows an event touches). Every interval's results of the three
    modes are compared (iterations, link bytes) to 1e-9 relative."""
    out: dict[str, Any] = {
        "runs": cfg.switch_runs,
        "intervals": cfg.switch_intervals,
        "modes": list(SWITCH_MODES),
    }
    if not cfg.switch_runs or not cfg.switch_intervals:
        return out
    job_gpus = min(128, cfg.transfers_fabric_gpus // 8)  # (a smaller fabric: 8 jobs that fill it)
    scenario = cluster_scenario(cfg.transfers_fabric_gpus, 8, job_gpus, op="alltoall")
    progress.start(
        f"switch: 8 AllToAll x {job_gpus} GPUs, intervals 1-{cfg.switch_intervals}, {cfg.switch_runs} runs"
    )
    worlds = {m: _switch_world(scenario, m) for m in SWITCH_MODES}
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    times: dict[str, list[list[float]]] = {m: [] for m in SWITCH_MODES}
    counters: dict[str, list[dict[str, int]]] = {m: [] for m in SWITCH_MODES}
    worst = 0.0
    for run in range(cfg.switch_runs):
        order = SWITCH_MODES[run % 3 :] + SWITCH_MODES[: run % 3]
        results: dict[str, list] = {}
        for mode in order:
            row, results[mode], cnt = _switch_mode_run(
                worlds[mode], cfg.switch_intervals, cfg.slowest_max_events
            )
            times[mode].append(row)
            if run == 0:
                counters[mode] = cnt
        ref = results["full only"]
        for mode in ("lazy only", "switch"):
            for (it_a, lb_a), (it_b, lb_b) in zip(results[mode], ref, strict=True):
                worst = max(worst, rel_err(it_a, it_b), rel_err(lb_a, lb_b))
    progress.done()
    out.update(
        scenario=scenario["name"],
        **_switch_figures(times, counters, cfg.switch_intervals),
        max_rel_diff=worst,
        load_avg_1min=(load0, os.getloadavg()[0] if hasattr(os, "getloadavg") else None),
    )
    return out


def _switch_mode_run(
    world: Any, intervals: int, max_events: int
) -> tuple[list[float], list[tuple[np.ndarray, np.ndarray]], list[dict[str, int]]]:
    """One run of :func:`bench_switch` in one mode, from reset: CPU s of each interval, its results
    (iterations, link bytes) and its counters (events, incremental solves, flows re-filled, ...)."""
    world.reset(seeds=[0])
    row, res, cnt = [], [], []
    with _last_metrics(world.sim) as last:
        for _ in range(intervals):
            t0 = time.process_time()
            r = world.step(world.default_split(), max_events=max_events)
            row.append(time.process_time() - t0)
            res.append((np.asarray(r.iterations, dtype=float), np.asarray(r.link_bytes, dtype=float)))
            m = last[0]
            cnt.append({"events": int(m.events), "incremental_solves": int(m.incremental_solves),
                        "flows_refilled": int(m.flows_refilled), "flows_active": int(m.flows_active),
                        "flows_checked": int(m.flows_checked),
                        "full_path_events": int(m.full_path_events), "lazy_switches": int(m.lazy_switches)})  # fmt: skip
    return row, res, cnt


def _switch_figures(
    times: dict[str, list[list[float]]], counters: dict[str, list[dict[str, int]]], intervals: int
) -> dict[str, Any]:
    """:func:`bench_switch`'s figures: the median CPU s per interval and mode, the times and counters, and
    the shares of the active flows the lazy kernel touched (re-filled or read by the repair) and re-filled."""
    med = {m: [float(np.median([r[i] for r in times[m]])) for i in range(intervals)] for m in SWITCH_MODES}
    lazy = counters["lazy only"]
    refilled = sum(c["flows_refilled"] + c["flows_checked"] for c in lazy)  # re-filled or read by the repair
    active = sum(c["flows_active"] for c in lazy)
    return {
        "median_cpu_s": med,
        "cpu_s": times,
        "counters": counters,
        "touched_share": refilled / active if active else None,
        "touched_share_per_interval": [
            (c["flows_refilled"] + c["flows_checked"]) / c["flows_active"] if c["flows_active"] else None
            for c in lazy
        ],
        "refilled_share": sum(c["flows_refilled"] for c in lazy) / active if active else None,
    }
