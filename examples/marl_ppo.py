"""Parameter-shared PPO over per-switch agents: SuperSuit vector wrappers + stable-baselines3.

Every leaf switch is an agent of :func:`ainet_gym.parallel_env`; it sees only its own links, the demand
entering it and the jobs it carries, and sets the WCMP weights of its up-links. One policy network is
shared by all switches (the agent-id one-hot in the observation lets it tell them apart). SuperSuit turns
the PettingZoo env into a vector env with one entry per (copy, switch), so SB3's PPO trains the shared
policy on every switch's experience at once:

    ParallelEnv --black_death_v3--> (constant agent set) --pettingzoo_env_to_vec_env_v1--> one vector
    entry per switch --concat_vec_envs_v1(copies)--> SB3 VecEnv --> PPO("MlpPolicy")

Install and run (the ``pettingzoo`` extra brings PettingZoo and SuperSuit; ``rl`` brings SB3)::

    pip install -e ".[rl,pettingzoo]"
    python examples/marl_ppo.py --scenario periodic-interference --timesteps 160000 --out out/marl.zip
    ainet-gym evaluate periodic-interference --policies ecmp,spray,greedy,lp,marl:out/marl.zip

``--timesteps`` counts agent steps (switch-intervals): with 4 leaf switches, 160k agent steps are 40k
simulated intervals, the budget of ``ainet-gym train --timesteps 40000`` for the centralised PPO. The
hyper-parameters are those of the centralised PPO (:func:`ainet_gym.agents.sb3_agents.default_hyperparameters`:
one episode per copy per update, gamma 0.9, a linearly decaying learning rate). Training episodes start
from seeds ``1_000_000 + seed + i`` (copy i) and draw later ones from a seeded generator, so the small
seeds of ``ainet-gym evaluate`` stay held out. The saved ``.zip`` carries the switches' view and the fingerprint
of the fabric trained on in its ``ainet_gym.json`` member, which ``marl:PATH`` reads (it refuses another fabric).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Args:
    scenario: str = "periodic-interference"
    """shipped scenario name or YAML path"""
    agents: str = "leaf"
    """which switches are agents: leaf | all"""
    reward: str = "shared"
    """shared (the GPU utilisation, the same for every switch) | local | a number in [0, 1] (local weight)"""
    timesteps: int = 160_000
    """agent steps (switch-intervals) to train, summed over copies and switches"""
    copies: int = 4
    """copies of the env in the vector env (each contributes one entry per switch)"""
    seed: int = 0
    """seed of the model and of the training episodes"""
    history: int = 4
    """intervals of link-utilisation history in each switch's observation"""
    out: str = "out/marl_ppo.zip"
    """where to save the model: X.zip, or a directory that receives model.zip (ainet_gym.agents.outputs' rule)"""
    overwrite: bool = False
    """allow --out to replace an existing model"""
    logdir: str = "runs"
    """TensorBoard directory (empty: no logging)"""
    threads: int = 1
    """torch CPU threads (1: the simulator and the small MLP do not gain from more on a shared machine)"""


def make_vec_env(args: Args) -> tuple[Any, Any]:
    """The SB3 vector env over ``args.copies`` copies of the per-switch env, and one bare copy."""
    import warnings

    import supersuit as ss
    from stable_baselines3.common.vec_env import VecMonitor

    # SuperSuit's SB3 wrapper does not forward render_mode; SB3 warns about it once (harmless)
    warnings.filterwarnings("ignore", message="The `render_mode` attribute is not defined")

    import ainet_gym
    from ainet_gym.envs.registration import TRAIN_SEED_OFFSET

    reward: str | float = args.reward if args.reward in ("shared", "local") else float(args.reward)
    env = ainet_gym.parallel_env(
        scenario=args.scenario, agents=args.agents, reward=reward, history=args.history
    )
    venv = ss.pettingzoo_env_to_vec_env_v1(ss.black_death_v3(env))
    venv = ss.concat_vec_envs_v1(venv, args.copies, num_cpus=0, base_class="stable_baselines3")
    # copy i starts from episode seed TRAIN_SEED_OFFSET + seed + i; later episodes continue its generator
    venv.venv.reset(seed=TRAIN_SEED_OFFSET + args.seed)
    return VecMonitor(venv), env


def main(args: Args) -> Path:
    import torch
    from stable_baselines3 import PPO

    from ainet_gym.agents.marl_agents import marl_metadata
    from ainet_gym.agents.outputs import check_model_out, model_path
    from ainet_gym.agents.sb3_agents import default_hyperparameters, save_model

    out = model_path(args.out)
    check_model_out(out, args.overwrite)  # refuse before training, not after
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    venv, env = make_vec_env(args)
    steps = env.core.episode_steps
    hp = default_hyperparameters("ppo", steps, venv.num_envs)
    run = f"{env.core.scenario.name}__marl_ppo__{args.seed}__{int(time.time())}"
    model = PPO(
        "MlpPolicy",
        venv,
        verbose=0,
        device="cpu",
        tensorboard_log=args.logdir or None,
        **hp,
    )
    t0 = time.time()
    model.learn(total_timesteps=args.timesteps, tb_log_name=run, progress_bar=False)
    wall = time.time() - t0
    meta = marl_metadata(
        env,
        env.core.scenario.name,
        reward=args.reward,
        timesteps=int(model.num_timesteps),
        intervals=int(model.num_timesteps) // max(len(env.possible_agents), 1),
        seed=args.seed,
        copies=args.copies,
        wall_s=round(wall, 1),
    )
    path = save_model(model, out, meta)
    print(
        f"trained {meta['timesteps']} agent steps ({meta['intervals']} intervals, {len(env.possible_agents)} "
        f"switches x {args.copies} copies) in {wall:.0f} s; saved {path}"
    )
    return path


def parse_args(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(f.default, bool):
            p.add_argument(flag, action="store_true", default=f.default)
        else:
            p.add_argument(flag, type=type(f.default), default=f.default)
    return Args(**vars(p.parse_args(argv)))


if __name__ == "__main__":
    main(parse_args())
