"""Training the graph policy (:mod:`ainet_gym.agents.graph_policy`): PPO (clipped objective, GAE) over the
batched :class:`~ainet_gym.envs.env.EnvCore`, one whole episode per copy per update, on seeds from
:data:`TRAIN_SEED_BASE` (:func:`train`, :class:`TrainConfig`)."""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

from ainet_gym.agents.graph_inputs import graph_inputs, knob_positions
from ainet_gym.agents.graph_net import GraphActorCritic, GraphPolicyConfig

__all__ = [
    "TRAIN_SEED_BASE",
    "TrainConfig",
    "gae_advantages",
    "peak_rss_mib",
    "train",
]


#: training episodes use seeds TRAIN_SEED_BASE + i (evaluation seeds are small integers).
TRAIN_SEED_BASE = 1_000_000


@dataclass(frozen=True)
class TrainConfig:
    """PPO settings of :func:`train` (defaults as :func:`ainet_gym.agents.sb3_agents.default_hyperparameters`).

    Attributes
    ----------
    scenario
        Scenario name or path to train on.
    timesteps
        Env steps in all (rounded up to whole updates of ``n_envs`` episodes).
    n_envs
        Copies stepped together; one update per episode of all copies.
    seed
        Torch seed; training episodes use seeds ``TRAIN_SEED_BASE + seed * 100_000 + i``.
    learning_rate, gamma, gae_lambda, clip_range, n_epochs, batch_size, value_coef, max_grad_norm
        PPO hyperparameters.
    episode_steps
        Overrides the scenario's episode length (None: the scenario's).
    """

    scenario: str
    timesteps: int = 30_720
    n_envs: int = 8
    seed: int = 0
    learning_rate: float = 3e-4
    gamma: float = 0.9
    gae_lambda: float = 0.9
    clip_range: float = 0.2
    n_epochs: int = 5
    batch_size: int = 128
    value_coef: float = 0.5
    max_grad_norm: float = 0.5
    episode_steps: int | None = None

    def check(self) -> None:
        """Raise ``ValueError`` naming a bad field, its value and what is allowed."""
        for name in ("timesteps", "n_envs", "n_epochs", "batch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} = {v!r}: must be an integer >= 1")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed = {self.seed!r}: must be an integer >= 0")
        for name in ("learning_rate", "clip_range", "value_coef", "max_grad_norm"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and np.isfinite(v) and v > 0):
                raise ValueError(f"{name} = {v!r}: must be a finite number > 0")
        for name in ("gamma", "gae_lambda"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and 0 <= v <= 1):
                raise ValueError(f"{name} = {v!r}: must be in [0, 1]")


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, MiB (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 2**20 if sys.platform == "darwin" else r / 1024


def gae_advantages(
    rewards: torch.Tensor, values: torch.Tensor, last_value: torch.Tensor, gamma: float, lam: float
) -> torch.Tensor:
    """Generalised advantage estimates (Schulman et al. 2016, eq. 16) of a (T, B) rollout truncated after T
    steps: delta_t = r_t + gamma V_{t+1} - V_t, with V_T = ``last_value`` (bootstrap), and
    A_t = sum_k (gamma lam)^k delta_{t+k}."""
    import torch

    T = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    gae = torch.zeros_like(last_value)
    for t in reversed(range(T)):
        nxt = last_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * nxt - values[t]
        gae = delta + gamma * lam * gae
        adv[t] = gae
    return adv


def _ppo_epochs(
    net: Any, opt: Any, cfg: TrainConfig, knobs: Any, edge_index: Any, node_x: Any, samples: tuple
) -> None:
    """``cfg.n_epochs`` passes of clipped-PPO minibatch updates over the rollout's ``samples`` (edge
    features, global features, actions, their log-probabilities, advantages, returns; one row per step)."""
    import torch

    EX, GL, A, LP, ADV, RET = samples
    n = EX.shape[0]
    net.train()
    for _epoch in range(cfg.n_epochs):
        perm = torch.randperm(n)
        for s in range(0, n, cfg.batch_size):
            idx = perm[s : s + cfg.batch_size]
            mu, v = net(node_x.expand(idx.shape[0], -1, -1), edge_index, EX[idx], GL[idx])
            dist = torch.distributions.Normal(mu[:, knobs], net.log_std.exp())
            lp = dist.log_prob(A[idx]).sum(-1)
            adv_b = ADV[idx]
            adv_b = (adv_b - adv_b.mean()) / (adv_b.std() + 1e-8) if idx.shape[0] > 1 else adv_b
            ratio = torch.exp(lp - LP[idx])
            pg = -torch.min(ratio * adv_b, ratio.clamp(1 - cfg.clip_range, 1 + cfg.clip_range) * adv_b).mean()
            vl = ((v - RET[idx]) ** 2).mean()
            loss = pg + cfg.value_coef * vl
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
            opt.step()


def _rollout(
    net: torch.nn.Module,
    core: Any,
    obs: Any,
    knobs: torch.Tensor,
    node_x: torch.Tensor,
    edge_index: torch.Tensor,
    T: int,
) -> tuple[list, list, list, list, list, list, torch.Tensor]:
    """One batch of episodes from ``obs`` (``T`` steps of ``core``, actions sampled from ``net``): per step
    the edge features, global features, actions, their log-probabilities, values and rewards, and the
    value of the last observation (the bootstrap of the truncated episodes)."""
    import torch

    ex, gl, acts, logps, vals, rews = [], [], [], [], [], []
    net.eval()
    for _t in range(T):
        _, _, edge_x, glob = graph_inputs(core, obs)
        with torch.no_grad():
            mu, v = net(node_x, edge_index, edge_x, glob)
            dist = torch.distributions.Normal(mu[:, knobs], net.log_std.exp())
            a = dist.sample()
        obs, r, _, _, _ = core.step(a.clamp(-1.0, 1.0).numpy())
        ex.append(edge_x)
        gl.append(glob)
        acts.append(a)
        logps.append(dist.log_prob(a).sum(-1))
        vals.append(v)
        rews.append(torch.as_tensor(r, dtype=torch.float32))
    with torch.no_grad():
        _, _, edge_x, glob = graph_inputs(core, obs)
        _, last_v = net(node_x, edge_index, edge_x, glob)
    return ex, gl, acts, logps, vals, rews, last_v


def train(
    cfg: TrainConfig,
    policy: GraphPolicyConfig | None = None,
    log: Any = print,
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Train a graph policy with PPO on ``cfg.scenario``; returns ``(module, info)`` (info: the curve,
    wall time, peak RSS, settings)."""
    import torch

    from ainet_gym.envs.env import EnvCore

    cfg.check()
    policy = policy or GraphPolicyConfig()
    torch.manual_seed(cfg.seed)
    net = GraphActorCritic(policy)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.learning_rate)
    core = EnvCore(
        cfg.scenario,
        batch=cfg.n_envs,
        action_mode="ecmp_weights",
        history=policy.history,
        observation="graph",
        episode_steps=cfg.episode_steps,
    )
    T, B = core.episode_steps, cfg.n_envs
    knobs = torch.as_tensor(knob_positions(core), dtype=torch.int64)
    updates = -(-cfg.timesteps // (T * B))
    t0 = time.time()
    curve: list[float] = []
    episode = 0
    interrupted = False
    try:
        for u in range(updates):
            seeds = [TRAIN_SEED_BASE + cfg.seed * 100_000 + episode + i for i in range(B)]
            episode += B
            obs, _ = core.reset(seeds)
            node_x, edge_index, _, _ = graph_inputs(core, obs)
            ex, gl, acts, logps, vals, rews, last_v = _rollout(net, core, obs, knobs, node_x, edge_index, T)
            V = torch.stack(vals)  # (T, B)
            R = torch.stack(rews)
            adv = gae_advantages(R, V, last_v, cfg.gamma, cfg.gae_lambda)
            ret = adv + V
            curve.append(float(R.mean()))
            # flatten (T, B) -> samples
            EX, GL = torch.cat(ex), torch.cat(gl)
            A, LP = torch.cat(acts), torch.cat(logps)
            ADV, RET = adv.reshape(-1), ret.reshape(-1)
            _ppo_epochs(net, opt, cfg, knobs, edge_index, node_x[:1], (EX, GL, A, LP, ADV, RET))
            # linear learning-rate decay to a tenth, as the SB3 PPO defaults
            for g in opt.param_groups:
                g["lr"] = cfg.learning_rate * (1.0 - 0.9 * (u + 1) / updates)
            log(
                f"update {u + 1}/{updates}: steps {(u + 1) * T * B}, mean GPU utilisation {curve[-1]:.3f}, "
                f"log std {net.log_std.item():.2f}, {time.time() - t0:.0f} s, peak RSS {peak_rss_mib():.0f} MiB"
            )
    except KeyboardInterrupt:  # timeout -s INT / Ctrl-C: keep the updates done so far
        interrupted = True
    net.eval()
    info = {
        "scenario": core.scenario.name,
        "timesteps": len(curve) * T * B,
        "interrupted": interrupted,
        "wall_s": round(time.time() - t0, 1),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "parameters": int(sum(p.numel() for p in net.parameters())),
        "curve": [round(x, 4) for x in curve],
        "train": {k: v for k, v in asdict(cfg).items()},
        "command": " ".join(["python -m ainet_gym.agents.graph_policy", *sys.argv[1:]]),
    }
    return net, info
