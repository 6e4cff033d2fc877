"""Section 7 of the bench: the MoE scenario family's rows on their own (:func:`bench_moe`): whole
episodes from reset and the env rows of the ``ainet_gym/MoE-v0`` scenario.
"""

from __future__ import annotations

import gc
from dataclasses import replace
from typing import Any

from ainet_gym.bench.clock import now
from ainet_gym.bench.config import BenchConfig
from ainet_gym.bench.env_rows import bench_env
from ainet_gym.bench.progress import Progress

__all__ = ["bench_moe"]


def _episode(name: str, steps: int) -> dict[str, Any]:
    """Wall time of one episode of ``steps`` intervals of a shipped scenario from reset (static ECMP, exact
    event mode unless the scenario says otherwise), and its slowest interval."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    t0 = now()
    world = FabricWorld(load_scenario(name), 1)
    world.reset(seeds=[0])
    build_s = now() - t0
    times, events = [], 0
    for _ in range(steps):
        t1 = now()
        events += int(world.step(world.default_split()).events)
        times.append(now() - t1)
    return {"scenario": name, "steps": steps, "episode_s": float(sum(times)), "build_s": build_s,
            "slowest_interval_s": float(max(times)), "events": events}  # fmt: skip


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
