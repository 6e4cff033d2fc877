"""DQN, CleanRL style (one file, plain torch), on a discrete ainet-gym id.

    python examples/cleanrl/dqn.py --env-id ainet_gym/PeriodicInterference-Choose-v0

The algorithm and network are those of CleanRL's ``cleanrl/dqn.py`` (a 120-84 MLP Q-network, a hard
target update, a linear epsilon schedule, a replay buffer); the defaults below keep its values except
where said. Upstream refuses a Box action space: the ``choose`` ids (``ainet_gym/<Name>-Choose-v0``:
``Discrete(K)``, one routing plan per interval) are what it runs on. What this file changes from
upstream, and why:

1. **gymnasium 1.x, not 0.29.** Upstream builds ``gym.vector.SyncVectorEnv`` (one env: "vectorized envs
   are not supported"); here the env's native vector env (``gym.make_vec(...,
   vectorization_mode="vector_entry_point")``) under gymnasium 1.x's vector ``RecordEpisodeStatistics``,
   with any number of copies (each copy's transition is a row of the replay buffer).
2. **``final_info`` and ``final_observation`` are gone.** Episode returns come from ``infos["episode"]``
   with the mask ``infos["_episode"]``; upstream's ``real_next_obs`` (``infos["final_observation"]`` at a
   truncation) is not needed: with next-step autoreset the observation returned by the step that ends
   an episode *is* the final observation.
3. **Next-step autoreset.** The step after an episode ends resets that copy (its action is ignored,
   reward 0): it is not a transition and is not added to the buffer (upstream would add it). As
   upstream, only terminations stop the bootstrap (a truncation, how every ainet-gym episode ends, is
   not a terminal state).
4. **Defaults for these envs**: ``total_timesteps=6144`` (128 episodes of 48 intervals),
   ``learning_starts=1024``, ``buffer_size=6144``, ``target_network_frequency=256``,
   ``train_frequency=4``, ``batch_size=64``, ``gamma=0.9``, ``exploration_fraction=0.3``: upstream's
   CartPole values (500k steps, learning from 10k) would not start learning within a run of the size a
   routing env steps in minutes.
5. The replay buffer is stable-baselines3's (upstream's ``cleanrl_utils.buffers`` is a copy of it). No
   Weights and Biases, video or Hugging Face upload; a CSV of episode returns beside TensorBoard
   (``runs/<run>/episodes.csv``), which ``examples/learning_curves.py`` plots.
"""

from __future__ import annotations

import csv
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
import tyro
from stable_baselines3.common.buffers import ReplayBuffer
from torch import nn, optim

import ainet_gym  # noqa: F401  (registers the ainet_gym/ ids)


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__).removesuffix(".py")
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment (torch, numpy, exploration and the episodes: copy i is seeded seed + i)"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=False`"""
    logdir: str = "runs"
    """directory of the run folders (TensorBoard events and episodes.csv)"""

    # Algorithm specific arguments
    env_id: str = "ainet_gym/PeriodicInterference-Choose-v0"
    """the id of the environment (an ainet_gym/ id with a Discrete action space: the Choose ids)"""
    total_timesteps: int = 6144
    """total timesteps of the experiments (summed over the copies)"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of copies in the native vector env"""
    buffer_size: int = 6144
    """the replay memory buffer size"""
    gamma: float = 0.9
    """the discount factor gamma"""
    tau: float = 1.0
    """the target network update rate"""
    target_network_frequency: int = 256
    """the timesteps it takes to update the target network"""
    batch_size: int = 64
    """the batch size of sample from the reply memory"""
    start_e: float = 1.0
    """the starting epsilon for exploration"""
    end_e: float = 0.05
    """the ending epsilon for exploration"""
    exploration_fraction: float = 0.3
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    learning_starts: int = 1024
    """timestep to start learning"""
    train_frequency: int = 4
    """the frequency of training"""


class QNetwork(nn.Module):
    def __init__(self, envs: gym.vector.VectorEnv) -> None:
        super().__init__()
        self.network = nn.Sequential(
            nn.Linear(int(np.prod(envs.single_observation_space.shape)), 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, int(envs.single_action_space.n)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def linear_schedule(start_e: float, end_e: float, duration: float, t: int) -> float:
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def main(args: Args) -> Path:
    """Train; returns the run folder."""
    run_name = f"{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{int(time.time())}"
    run_dir = Path(args.logdir) / run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir))
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in vars(args).items()),
    )
    episodes = (run_dir / "episodes.csv").open("w", newline="")
    log = csv.writer(episodes)
    log.writerow(["global_step", "episodic_return", "episodic_length"])

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cpu")

    envs = gym.make_vec(args.env_id, num_envs=args.num_envs, vectorization_mode="vector_entry_point")
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), (
        "only discrete action space is supported"
    )
    envs.single_action_space.seed(args.seed)

    q_network = QNetwork(envs).to(device)
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate)
    target_network = QNetwork(envs).to(device)
    target_network.load_state_dict(q_network.state_dict())
    N = args.num_envs
    rb = ReplayBuffer(  # one transition a row: the copies' real transitions are added one by one
        args.buffer_size,
        envs.single_observation_space,
        envs.single_action_space,
        device,
        handle_timeout_termination=False,
    )
    start_time = time.time()

    obs, _ = envs.reset(seed=args.seed)
    autoreset = np.zeros(N, dtype=bool)  # the next step of this copy is its reset step (change 3)
    global_step = 0
    updates = 0
    while global_step < args.total_timesteps:
        epsilon = linear_schedule(
            args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step
        )
        if random.random() < epsilon:
            actions = np.array([envs.single_action_space.sample() for _ in range(N)])
        else:
            with torch.no_grad():
                q_values = q_network(torch.Tensor(obs).to(device))
            actions = torch.argmax(q_values, dim=1).cpu().numpy()

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        if "episode" in infos:  # change 2
            for i in np.flatnonzero(infos["_episode"]):
                ret, length = float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i])
                print(f"global_step={global_step}, episodic_return={ret:.3f}")
                writer.add_scalar("charts/episodic_return", ret, global_step)
                writer.add_scalar("charts/episodic_length", length, global_step)
                log.writerow([global_step, ret, length])

        # change 3: a copy's reset step is no transition; the others go into the buffer one by one
        for i in np.flatnonzero(~autoreset):
            rb.add(obs[i : i + 1], next_obs[i : i + 1], actions[i : i + 1], rewards[i : i + 1],
                   terminations[i : i + 1], [{}])  # fmt: skip
        autoreset = np.logical_or(terminations, truncations)
        obs = next_obs
        global_step += N

        if global_step > args.learning_starts and rb.size() > 0:
            while updates < (global_step - args.learning_starts) // args.train_frequency:
                updates += 1
                data = rb.sample(args.batch_size)
                with torch.no_grad():
                    target_max, _ = target_network(data.next_observations).max(dim=1)
                    td_target = data.rewards.flatten() + args.gamma * target_max * (1 - data.dones.flatten())
                old_val = q_network(data.observations).gather(1, data.actions).squeeze()
                loss = F.mse_loss(td_target, old_val)
                if updates % 25 == 0:
                    writer.add_scalar("losses/td_loss", loss, global_step)
                    writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
                    sps = int(global_step / (time.time() - start_time))
                    print("SPS:", sps)
                    writer.add_scalar("charts/SPS", sps, global_step)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if updates % max(1, args.target_network_frequency // args.train_frequency) == 0:
                    for target_param, param in zip(target_network.parameters(), q_network.parameters()):
                        target_param.data.copy_(args.tau * param.data + (1.0 - args.tau) * target_param.data)
        episodes.flush()

    envs.close()
    writer.close()
    episodes.close()
    return run_dir


if __name__ == "__main__":
    main(tyro.cli(Args))
