"""PPO with a Gaussian policy, CleanRL style (one file, plain torch), on a continuous ainet-gym id.

    python examples/cleanrl/ppo_continuous_action.py --env-id ainet_gym/PeriodicInterference-EcmpWeights-v0

The algorithm, network and hyperparameters are those of CleanRL's ``cleanrl/ppo_continuous_action.py``
(the defaults below keep its values except where said). What this file changes from that file, and why:

1. **gymnasium 1.x, not 0.29.** Upstream builds ``gym.vector.SyncVectorEnv`` over per-env wrappers and
   calls ``gym.wrappers.TransformObservation(env, func)``: in gymnasium 1.x that wrapper takes a third
   argument (the new observation space), so upstream fails at start-up. Here the vector env is the
   env's native one (``gym.make_vec(..., vectorization_mode="vector_entry_point")``: all copies in one
   batched engine call) with gymnasium 1.x's vector wrappers (``gym.wrappers.vector.*``), the same
   chain as upstream (episode statistics, action clipping, observation and reward normalisation and
   clipping to [-10, 10]).
2. **``final_info`` is gone.** Upstream reads episode returns from ``infos["final_info"]``; gymnasium
   1.x's ``RecordEpisodeStatistics`` puts them in ``infos["episode"]`` with the mask
   ``infos["_episode"]``.
3. **Next-step autoreset.** In gymnasium 1.x the step *after* an episode ends resets that copy: its
   action is ignored and its reward is 0. Upstream would train on those steps as real transitions.
   Here they are masked out of the loss, and the GAE chain is cut at episode ends; a truncated episode
   (every ainet-gym episode ends by truncation) bootstraps from the value of its final observation,
   which next-step autoreset returns as the ordinary next observation (upstream treats a truncation
   as a termination).
4. **Smaller defaults for these envs**: ``num_envs=8`` copies, ``num_steps=48`` (one 48-interval
   episode of periodic-interference per rollout), ``gamma=0.9`` (routing pays off within a few
   intervals, as the project's SB3 defaults), ``log_std_init=-1`` (with hundreds of action dimensions
   in [-1, 1], std 1 mostly samples clipped noise) and 128-unit hidden layers.
5. No Weights and Biases, video or Hugging Face upload; a CSV of episode returns beside TensorBoard
   (``runs/<run>/episodes.csv``: ``global_step,episodic_return,episodic_length``), which
   ``examples/learning_curves.py`` plots.
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
import tyro
from torch import nn, optim
from torch.distributions.normal import Normal

import ainet_gym  # noqa: F401  (registers the ainet_gym/ ids)


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__).removesuffix(".py")
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment (torch, numpy, and the episodes: copy i is seeded seed + i)"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=False`"""
    logdir: str = "runs"
    """directory of the run folders (TensorBoard events and episodes.csv)"""

    # Algorithm specific arguments
    env_id: str = "ainet_gym/PeriodicInterference-EcmpWeights-v0"
    """the id of the environment (any ainet_gym/ id with a Box action space)"""
    total_timesteps: int = 49152
    """total timesteps of the experiments"""
    learning_rate: float = 3e-4
    """the learning rate of the optimizer"""
    num_envs: int = 8
    """the number of copies in the native vector env"""
    num_steps: int = 48
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.9
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 10
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.0
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""
    hidden: int = 128
    """width of the two hidden layers of the actor and of the critic"""
    log_std_init: float = -1.0
    """initial log standard deviation of the Gaussian policy"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


def make_envs(env_id: str, num_envs: int, gamma: float) -> gym.vector.VectorEnv:
    """The native vector env of ``env_id`` with upstream's wrapper chain, as gymnasium 1.x vector
    wrappers (change 1)."""
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    envs = gym.wrappers.vector.ClipAction(envs)
    envs = gym.wrappers.vector.NormalizeObservation(envs)
    single = gym.spaces.Box(-10.0, 10.0, envs.single_observation_space.shape, np.float32)
    envs = gym.wrappers.vector.TransformObservation(
        envs,
        lambda obs: np.clip(obs, -10, 10),
        observation_space=gym.vector.utils.batch_space(single, num_envs),
        single_observation_space=single,
    )
    envs = gym.wrappers.vector.NormalizeReward(envs, gamma=gamma)
    return gym.wrappers.vector.TransformReward(envs, lambda reward: np.clip(reward, -10, 10))


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs: gym.vector.VectorEnv, hidden: int, log_std_init: float) -> None:
        super().__init__()
        n_obs = int(np.prod(envs.single_observation_space.shape))
        n_act = int(np.prod(envs.single_action_space.shape))
        self.critic = nn.Sequential(
            layer_init(nn.Linear(n_obs, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(n_obs, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, n_act), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.full((1, n_act), float(log_std_init)))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        action_mean = self.actor_mean(x)
        action_std = torch.exp(self.actor_logstd.expand_as(action_mean))
        probs = Normal(action_mean, action_std)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


def main(args: Args) -> Path:
    """Train; returns the run folder."""
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
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
    rng = np.random.default_rng(args.seed)  # minibatch shuffling (upstream: the global np.random)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cpu")

    envs = make_envs(args.env_id, args.num_envs, args.gamma)
    assert isinstance(envs.single_action_space, gym.spaces.Box), "only continuous action space is supported"
    agent = Agent(envs, args.hidden, args.log_std_init).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    T, N = args.num_steps, args.num_envs
    obs = torch.zeros((T, N, *envs.single_observation_space.shape)).to(device)
    actions = torch.zeros((T, N, *envs.single_action_space.shape)).to(device)
    logprobs = torch.zeros((T, N)).to(device)
    rewards = torch.zeros((T, N)).to(device)
    terms = torch.zeros((T, N)).to(device)  # the step ended the episode by termination
    ends = torch.zeros((T, N)).to(device)  # the step ended the episode (termination or truncation)
    valid = torch.zeros((T, N)).to(device)  # not an autoreset step (change 3)
    values = torch.zeros((T + 1, N)).to(device)  # values[t + 1]: of the observation after step t

    global_step = 0
    start_time = time.time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.Tensor(next_obs).to(device)
    autoreset = torch.zeros(N).to(device)  # the next step of this copy is its reset step

    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(T):
            global_step += N
            obs[step] = next_obs
            valid[step] = 1.0 - autoreset
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            rewards[step] = torch.tensor(reward, dtype=torch.float32).to(device).view(-1)
            terms[step] = torch.tensor(terminations, dtype=torch.float32).to(device)
            done = np.logical_or(terminations, truncations)
            ends[step] = torch.tensor(done, dtype=torch.float32).to(device)
            autoreset = torch.tensor(done, dtype=torch.float32).to(device)
            next_obs = torch.Tensor(next_obs).to(device)

            if "episode" in infos:  # change 2: gymnasium 1.x episode statistics
                for i in np.flatnonzero(infos["_episode"]):
                    ret, length = float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i])
                    print(f"global_step={global_step}, episodic_return={ret:.3f}")
                    writer.add_scalar("charts/episodic_return", ret, global_step)
                    writer.add_scalar("charts/episodic_length", length, global_step)
                    log.writerow([global_step, ret, length])
            with torch.no_grad():  # value of the observation after the step (a final one at episode ends)
                values[step + 1] = agent.get_value(next_obs).flatten()

        # GAE over the valid steps: an episode end cuts the chain; only a termination stops the bootstrap
        with torch.no_grad():
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = torch.zeros(N).to(device)
            for t in reversed(range(T)):
                delta = rewards[t] + args.gamma * values[t + 1] * (1.0 - terms[t]) - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * (1.0 - ends[t]) * lastgaelam
                lastgaelam = lastgaelam * valid[t]  # an autoreset step carries no advantage
                advantages[t] = lastgaelam
            returns = advantages + values[:T]

        keep = valid.reshape(-1) > 0  # change 3: autoreset steps are not transitions
        b_obs = obs.reshape((-1, *envs.single_observation_space.shape))[keep]
        b_logprobs = logprobs.reshape(-1)[keep]
        b_actions = actions.reshape((-1, *envs.single_action_space.shape))[keep]
        b_advantages = advantages.reshape(-1)[keep]
        b_returns = returns.reshape(-1)[keep]
        b_values = values[:T].reshape(-1)[keep]
        n = b_obs.shape[0]
        mb = max(1, n // args.num_minibatches)

        b_inds = np.arange(n)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            rng.shuffle(b_inds)
            for start in range(0, n, mb):
                mb_inds = b_inds[start : start + mb]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions[mb_inds]
                )
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]
                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv and len(mb_inds) > 1:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()
                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        sps = int(global_step / (time.time() - start_time))
        print("SPS:", sps)
        writer.add_scalar("charts/SPS", sps, global_step)
        episodes.flush()

    envs.close()
    writer.close()
    episodes.close()
    return run_dir


if __name__ == "__main__":
    main(tyro.cli(Args))
