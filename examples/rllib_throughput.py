"""Env steps per second sampled by RLlib (1 and 2 env runners x B copies) beside the SB3 adapter.

Both sample with a freshly initialised policy of the same size (two hidden layers of 128) acting
stochastically, as during training, on the same scenario and number of copies per process:

- ``sb3``: :class:`~ainet_gym.envs.sb3_vec_env.SB3VecEnv` (B copies, one batched engine call per step) and
  SB3 PPO's ``predict`` in one process (what ``ainet-gym train`` does between updates);
- ``rllib N x B``: N ``SingleAgentEnvRunner`` actors, each with one native vector env of B copies
  (``gym_env_vectorize_mode="vector_entry_point"``), sampling in parallel; the episodes are returned
  to the driver as in training. Steps/s is the total over runners.

No learning update is timed. Usage (needs the ``rllib`` extra)::

    python examples/rllib_throughput.py --scenario periodic-interference --envs 16 --rounds 3

Prints one line per configuration and the ratios; ``--json`` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np


def sb3_steps_per_second(scenario: str, envs: int, steps: int, rounds: int) -> float:
    """Median env steps/s of SB3 PPO rollouts (predict + step) on the SB3 adapter."""
    import torch
    from stable_baselines3 import PPO

    from ainet_gym.agents.sb3_agents import default_hyperparameters
    from ainet_gym.envs.sb3_vec_env import SB3VecEnv

    torch.set_num_threads(1)
    venv = SB3VecEnv(num_envs=envs, scenario=scenario)
    hp = default_hyperparameters("ppo", venv.core.episode_steps, envs)
    model = PPO("MlpPolicy", venv, seed=0, device="cpu", **hp)
    venv.seed(1_000_000)
    obs = venv.reset()
    rates = []
    per_round = max(1, steps // envs)
    for _ in range(rounds + 1):  # the first round warms up
        t0 = time.perf_counter()
        for _ in range(per_round):
            a, _ = model.predict(obs, deterministic=False)
            obs, _, _, _ = venv.step(a)
        rates.append(per_round * envs / (time.perf_counter() - t0))
    venv.close()
    return statistics.median(rates[1:])


def _peak_rss_mib(_: object = None) -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def rllib_steps_per_second(
    scenario: str, runners: int, envs: int, steps: int, rounds: int
) -> tuple[float, float]:
    """Median env steps/s sampled by ``runners`` remote env runners of ``envs`` copies each, and the
    largest peak RSS (MiB) of one env runner process."""
    from ainet_gym.envs.rllib import ppo_config

    algo = ppo_config(scenario, num_env_runners=runners, envs_per_runner=envs, seed=0).build_algo()
    group = algo.env_runner_group
    rates = []
    for _ in range(rounds + 1):  # the first round warms up
        t0 = time.perf_counter()
        out = group.foreach_env_runner(lambda r: r.sample(num_timesteps=steps), local_env_runner=False)
        dt = time.perf_counter() - t0
        n = sum(len(e) for eps in out for e in eps)
        rates.append(n / dt)
    rss = max(group.foreach_env_runner(_peak_rss_mib, local_env_runner=False))
    algo.stop()
    return statistics.median(rates[1:]), rss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="periodic-interference")
    p.add_argument("--envs", type=int, default=16, help="copies per process (B)")
    p.add_argument("--runners", default="1,2", help="comma list of env runner counts")
    p.add_argument("--steps", type=int, default=1536, help="env steps per runner per round")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds (median), after one warm-up")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    import ray

    from ainet_gym.envs.rllib import init_ray

    counts = [int(x) for x in args.runners.split(",")]
    res: dict[str, float] = {"sb3": sb3_steps_per_second(args.scenario, args.envs, args.steps, args.rounds)}
    init_ray(None, max(counts))
    rss: dict[str, float] = {}
    for n in counts:
        key = f"rllib {n}x{args.envs}"
        res[key], rss[key] = rllib_steps_per_second(args.scenario, n, args.envs, args.steps, args.rounds)
    ray.shutdown()
    out = {
        "scenario": args.scenario,
        "envs_per_process": args.envs,
        "steps_per_second": res,
        "ratio_to_sb3": {k: v / res["sb3"] for k, v in res.items()},
        "env_runner_peak_rss_mib": rss,
        "cores": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
        "python": platform.python_version(),
        "ray": ray.__version__,
        "numpy": np.__version__,
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(
        f"{args.scenario}, B = {args.envs} copies per process, {os.cpu_count()} cores, load {out['load_average_1min']:.1f}"
    )
    for k, v in res.items():
        mem = f", env runner peak RSS {rss[k]:.0f} MiB" if k in rss else ""
        print(f"  {k:>12}: {v:8.0f} env steps/s  ({out['ratio_to_sb3'][k]:.2f}x sb3{mem})")


if __name__ == "__main__":
    main()
