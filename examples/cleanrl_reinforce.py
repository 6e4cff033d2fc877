"""REINFORCE with a learned baseline, CleanRL style: one file, plain torch, no stable-baselines3.

Trains a Gaussian policy over the ``split`` action space of the native vector env
(``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")``: all copies in one batched engine
call). Every iteration plays one whole episode in each copy, computes discounted returns-to-go, and
takes one gradient step on ``-log pi(a|s) * advantage`` plus a value-regression loss.

    python examples/cleanrl_reinforce.py --scenario periodic-interference --iterations 200
    tensorboard --logdir runs

Swap in your own algorithm here: everything environment-specific is in ``make_env`` and the rollout
loop; the info keys (``reward_gpu_utilization``, ``max_link_utilization``, ...) are documented in
``ainet_gym.envs.env.FabricRoutingEnv``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import ainet_gym  # noqa: F401  (registers the ainet_gym/ environments)


@dataclass
class Args:
    scenario: str = "periodic-interference"
    """shipped scenario name or YAML path"""
    env_id: str = "ainet_gym/SpineLeaf-v0"
    """registered env id (the scenario overrides its default)"""
    seed: int = 1
    """seed of torch, numpy and the episodes"""
    num_envs: int = 8
    """copies in the native vector env"""
    iterations: int = 200
    """policy updates (one episode per copy each)"""
    learning_rate: float = 1e-3
    """Adam learning rate"""
    gamma: float = 0.9
    """discount of the returns-to-go"""
    hidden: int = 128
    """width of the two hidden layers"""
    log_std_init: float = -1.0
    """initial log standard deviation of the Gaussian policy"""
    vf_coef: float = 0.5
    """weight of the value loss"""
    logdir: str = "runs"
    """TensorBoard directory (empty: no logging)"""


def make_env(args: Args) -> gym.vector.VectorEnv:
    return gym.make_vec(
        args.env_id, num_envs=args.num_envs, vectorization_mode="vector_entry_point", scenario=args.scenario
    )


def layer(i: int, o: int, std: float = np.sqrt(2)) -> nn.Linear:
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int, log_std_init: float) -> None:
        super().__init__()
        self.actor = nn.Sequential(
            layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, act_dim, 0.01)
        )
        self.critic = nn.Sequential(
            layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, 1, 1.0)
        )
        self.log_std = nn.Parameter(torch.full((act_dim,), log_std_init))

    def dist(self, obs: torch.Tensor) -> torch.distributions.Normal:
        return torch.distributions.Normal(self.actor(obs), self.log_std.exp())


def main(args: Args) -> dict[str, float]:
    exp_name = os.path.basename(__file__)[: -len(".py")]
    run_name = f"{Path(args.scenario).stem}__{exp_name}__{args.seed}__{int(time.time())}"
    writer = None
    if args.logdir:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(f"{args.logdir}/{run_name}")
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    envs = make_env(args)
    obs_dim = envs.single_observation_space.shape[0]
    act_dim = envs.single_action_space.shape[0]
    agent = Agent(obs_dim, act_dim, args.hidden, args.log_std_init)
    opt = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    steps = envs.unwrapped.core.episode_steps  # intervals per episode
    stats: dict[str, float] = {}

    for it in range(args.iterations):
        # one full episode per copy: explicit reset, so the vector env's autoreset never triggers
        obs, _ = envs.reset(seed=args.seed + it * args.num_envs)
        obs_buf, act_buf, rew_buf, gpu, mlu = [], [], [], [], []
        for _ in range(steps):
            o = torch.as_tensor(obs)
            with torch.no_grad():
                a = agent.dist(o).sample()
            obs, r, _, _, info = envs.step(a.clamp(-1, 1).numpy())
            obs_buf.append(o)
            act_buf.append(a)
            rew_buf.append(torch.as_tensor(r, dtype=torch.float32))
            gpu.append(info["reward_gpu_utilization"].mean())
            mlu.append(info["max_link_utilization"].mean())
        # returns-to-go, (T, N)
        rew = torch.stack(rew_buf)
        ret = torch.zeros_like(rew)
        run = torch.zeros(args.num_envs)
        for t in reversed(range(steps)):
            run = rew[t] + args.gamma * run
            ret[t] = run
        o, a = torch.stack(obs_buf), torch.stack(act_buf)
        value = agent.critic(o).squeeze(-1)
        adv = ret - value.detach()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        logp = agent.dist(o).log_prob(a).sum(-1)
        pg_loss = -(logp * adv).mean()
        v_loss = ((value - ret) ** 2).mean()
        loss = pg_loss + args.vf_coef * v_loss
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
        opt.step()

        stats = {
            "episodic_return": float(rew.sum(0).mean()),
            "gpu_utilization": float(np.mean(gpu)),
            "max_link_utilization": float(np.mean(mlu)),
        }
        if writer is not None:
            gstep = (it + 1) * steps * args.num_envs
            writer.add_scalar("charts/episodic_return", stats["episodic_return"], gstep)
            writer.add_scalar("fabric/gpu_utilization", stats["gpu_utilization"], gstep)
            writer.add_scalar("fabric/max_link_utilization", stats["max_link_utilization"], gstep)
            writer.add_scalar("losses/policy_loss", pg_loss.item(), gstep)
            writer.add_scalar("losses/value_loss", v_loss.item(), gstep)
        if it % 10 == 0 or it == args.iterations - 1:
            print(
                f"iteration {it:4d}  GPU utilisation {stats['gpu_utilization']:.3f}  return {stats['episodic_return']:.2f}"
            )
    envs.close()
    if writer is not None:
        writer.close()
    return stats


def parse_args(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        p.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    return Args(**vars(p.parse_args(argv)))


if __name__ == "__main__":
    main(parse_args())
