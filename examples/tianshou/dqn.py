"""Tianshou's DQN (its 2.x procedural API) on a discrete ainet-gym id.

    python examples/tianshou/dqn.py --env-id ainet_gym/PeriodicInterference-Choose-v0

The structure is Tianshou's own ``examples/discrete/discrete_dqn.py`` (a ``Net`` Q-network, a
``DiscreteQLearningPolicy`` with epsilon-greedy exploration, the ``DQN`` algorithm with n-step returns
and a target network, collectors over ``DummyVectorEnv`` and ``algorithm.run_training`` with
``OffPolicyTrainerParams``). What this file changes from that example, and why:

1. The env is an ``ainet_gym/`` id made by ``gymnasium.make`` (Tianshou's vector envs take single
   Gymnasium envs; its collectors reset finished envs themselves, so gymnasium 1.x's autoreset modes do
   not come into it).
2. Sizes for an env that steps in milliseconds, not microseconds: 4 training envs, 2 test episodes per
   epoch, ``epoch_num_steps=1536`` (32 episodes of 48 intervals), 4 epochs, ``gamma=0.9`` (routing pays
   off within a few intervals) and an epsilon that decays linearly from 1 to 0.05 over the first 40% of
   the steps (the example keeps 0.1 throughout).
3. The installed Tianshou (2.0.1) names the collector argument ``training_collector`` and the flag
   ``test_in_training`` (the example, on master, ``train_collector`` and ``test_in_train``).
4. No rendering; a CSV of the training episodes' returns (``<logdir>/<run>/episodes.csv``:
   ``global_step,episodic_return,episodic_length``, written by a small wrapper on each training env),
   which ``examples/learning_curves.py`` plots.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import ainet_gym  # noqa: F401  (registers the ainet_gym/ ids)


class EpisodeLog(gym.Wrapper):
    """Writes each finished episode's return and length, with the env steps taken so far by every
    training env together (``counter``, shared), as a CSV row."""

    def __init__(self, env: gym.Env, writer: Any, counter: list[int]) -> None:
        super().__init__(env)
        self.writer, self.counter = writer, counter
        self.ret, self.length = 0.0, 0

    def reset(self, **kwargs: Any) -> Any:
        self.ret, self.length = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, r, term, trunc, info = self.env.step(action)
        self.counter[0] += 1
        self.ret += float(r)
        self.length += 1
        if term or trunc:
            print(f"global_step={self.counter[0]}, episodic_return={self.ret:.3f}")
            self.writer.writerow([self.counter[0], self.ret, self.length])
        return obs, r, term, trunc, info


def main(argv: list[str] | None = None) -> Path:
    """Train; returns the run folder."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env-id", default="ainet_gym/PeriodicInterference-Choose-v0")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--epoch-num-steps", type=int, default=1536)
    ap.add_argument("--train-envs", type=int, default=4)
    ap.add_argument("--test-episodes", type=int, default=2)
    ap.add_argument("--episode-steps", type=int, default=None, help="override the scenario's episode length")
    ap.add_argument("--logdir", default="runs")
    args = ap.parse_args(argv)

    import tianshou as ts
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import CollectStats
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net
    from tianshou.utils.space_info import SpaceInfo

    lr, batch_size, gamma, n_step, target_freq = 1e-3, 64, 0.9, 3, 320
    buffer_size, eps_start, eps_end, eps_decay = 20000, 1.0, 0.05, 0.4
    collect_steps = 8
    total = args.epochs * args.epoch_num_steps

    run_dir = (
        Path(args.logdir) / f"{args.env_id.replace('/', '-')}__tianshou_dqn__{args.seed}__{int(time.time())}"
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    episodes = (run_dir / "episodes.csv").open("w", newline="")
    log = csv.writer(episodes)
    log.writerow(["global_step", "episodic_return", "episodic_length"])
    counter = [0]
    kw = {} if args.episode_steps is None else {"episode_steps": args.episode_steps}

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)  # noqa: NPY002 (Tianshou's exploration draws from the global generator)
    train_envs = ts.env.DummyVectorEnv(
        [lambda: EpisodeLog(gym.make(args.env_id, **kw), log, counter) for _ in range(args.train_envs)]
    )
    test_envs = ts.env.DummyVectorEnv(
        [lambda: gym.make(args.env_id, **kw) for _ in range(args.test_episodes)]
    )
    train_envs.seed(args.seed)
    test_envs.seed(args.seed + 1000)

    env = gym.make(args.env_id, **kw)
    assert isinstance(env.action_space, gym.spaces.Discrete)
    space_info = SpaceInfo.from_env(env)
    net = Net(
        state_shape=space_info.observation_info.obs_shape,
        action_shape=space_info.action_info.action_shape,
        hidden_sizes=[128, 128],
    )
    policy = DiscreteQLearningPolicy(
        model=net, action_space=env.action_space, eps_training=eps_start, eps_inference=0.0
    )
    algorithm = ts.algorithm.DQN(
        policy=policy,
        optim=AdamOptimizerFactory(lr=lr),
        gamma=gamma,
        n_step_return_horizon=n_step,
        target_update_freq=target_freq,
    )
    train_collector = ts.data.Collector[CollectStats](
        algorithm,
        train_envs,
        ts.data.VectorReplayBuffer(buffer_size, args.train_envs),
        exploration_noise=True,
    )
    test_collector = ts.data.Collector[CollectStats](algorithm, test_envs, exploration_noise=True)

    def training_fn(epoch: int, env_step: int) -> None:
        frac = min(env_step / (eps_decay * total), 1.0)
        policy.set_eps_training(eps_start + frac * (eps_end - eps_start))

    result = algorithm.run_training(
        OffPolicyTrainerParams(
            training_collector=train_collector,
            test_collector=test_collector,
            max_epochs=args.epochs,
            epoch_num_steps=args.epoch_num_steps,
            collection_step_num_env_steps=collect_steps,
            test_step_num_episodes=args.test_episodes,
            batch_size=batch_size,
            update_step_num_gradient_steps_per_sample=1 / collect_steps,
            training_fn=training_fn,
            show_progress=False,
        )
    )
    print(f"Finished training in {result.timing.total_time:.1f} seconds")
    episodes.close()
    return run_dir


if __name__ == "__main__":
    main()
