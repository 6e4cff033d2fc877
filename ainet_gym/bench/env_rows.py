"""Section 3 of the bench: the environments' steps per second (:func:`bench_env`), single env and vector
envs per backend, timed in interleaved windows by :class:`_Timer`.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import numpy as np

from ainet_gym.bench.clock import clock_name, now
from ainet_gym.bench.config import BenchConfig
from ainet_gym.bench.instances import (
    env_scenario,
    scenario_gpus,
)
from ainet_gym.bench.progress import Progress

__all__ = ["INTERLEAVE_MAX_GPUS", "bench_env"]


class _Timer:
    """Env steps per second of one env with seeded random actions, as the best of its timing windows (on a
    shared machine the load comes and goes; the best window is the least disturbed one, as ``timeit``
    advises and as the calibration does).

    Each window is timed twice: by the bench's clock (``best``, the figure of the row and its targets: the wall
    clock, or under ``--clock cpu`` the process's CPU time, :mod:`ainet_gym.bench.clock`) and by
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
        """One timing window of at least ``min_time`` (and 3 steps) on the bench's clock (the wall clock, or
        the process's CPU time under ``--clock cpu``); keeps the best rates."""
        steps = 0
        env_steps = 0  # copies that ran their interval
        by_cpu = clock_name() == "cpu"
        c0 = time.process_time()
        t0 = time.perf_counter()
        while True:
            still = int(self.env.autoreset_pending.sum()) if self.vector else 0  # reset by this step
            out = self.env.step(self.actions[(self.steps + steps) % 4])
            steps += 1
            env_steps += self.batch - still
            if not self.vector and (out[2] or out[3]):
                self.env.reset()
            dt = time.process_time() - c0 if by_cpu else time.perf_counter() - t0
            if (dt >= min_time and steps >= 3) or dt >= 20 * min_time:
                break
        cpu = time.process_time() - c0
        wall = time.perf_counter() - t0 if by_cpu else dt
        self.best, self.steps = max(self.best, env_steps / dt), self.steps + steps
        if cpu > 0:
            self.best_cpu = max(self.best_cpu or 0.0, env_steps / cpu)
        self.cpu_s, self.wall_s = self.cpu_s + cpu, self.wall_s + wall

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
            t0 = now()
            env = FabricRoutingEnv(scenario, backend=backend)
            row = {"scenario": label, "gpus": gpus, "backend": backend, "env": "single", "batch": 1,
                   "action_dim": int(np.prod(env.action_space.shape))}  # fmt: skip
            rows.append(row)
            row["construct_s"] = now() - t0
            single_timer = _Timer(env, 1, False)
            if not interleave:  # one env in memory at a time: its windows now
                for _ in range(windows):
                    single_timer.window(cfg.min_time_s * 2)
                _finish(row, single_timer, single_timer.best)
            group.append((row, single_timer))
            progress.done()
            for b in batches:
                progress.start(f"env: {label} vector B={b} {backend}")
                t0 = now()
                venv = FabricRoutingVectorEnv(b, scenario, backend=backend)
                make_s = now() - t0
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
