"""A graph policy that transfers across fabric sizes: message passing over the ``graph`` observation.

The MLP policies of :mod:`ainet_gym.agents.sb3_agents` map a fixed-size vector to a fixed-size action, so a model
trained on a 64-GPU fabric cannot act on a 256-GPU one. :class:`GraphActorCritic` instead runs the same
small networks on every node and every link of the fabric (the env's ``observation="graph"``: node kinds,
the directed link list ``edge_index`` and per-link utilisation history and capacity fraction), and emits one
output per link: in the ``ecmp_weights`` action mode the action *is* one WCMP weight per switch next-hop
link, so the policy's output grows with the fabric and a trained model acts, zero-shot, on any fabric of any
size. Its parameters do not depend on the fabric (about 30k of them).

Model (plain torch, no torch-geometric: the graphs are a few thousand links and one ``index_add_`` per
aggregation is all the message passing needs):

- inputs: per node its kind (one-hot, 4); per link its utilisation over the last ``H`` intervals, its
  capacity fraction (0 = failed) and whether it is a WCMP knob; per env a few size-free globals from the
  flat observation (mean over job slots of the 5 job features, mean over background sources of *active
  last interval* and *scheduled next interval*, episode progress), broadcast to every node and link;
- ``rounds`` rounds of: link update ``e += MLP([e, h_src, h_dst])``, node update ``h += MLP([h, mean of
  incoming e, mean of outgoing e])`` (residual, so depth does not wash features out);
- actor: per link ``mu = tanh(MLP([e, h_src, h_dst]))``, a Gaussian with one learned log std shared by
  all links; the env's action is ``clip(a, -1, 1)`` at the knob links (``core.wcmp_links``);
- critic: ``MLP([mean e, max e, mean h, globals])`` (mean and max pools: size-free).

Every operation is per node, per link or a mean/max over them, so permuting the link (or node) order
permutes the outputs the same way (``tests/agents/test_graph_policy.py`` checks it) and nothing depends on
the number of links.

Training: PPO (clipped objective, GAE) written here over the batched :class:`~ainet_gym.envs.env.EnvCore`
(``n_envs`` copies stepped in one engine call), one whole episode per copy per update, seeds >=
1,000,000 (evaluation seeds are small integers)::

    python -m ainet_gym.agents.graph_policy train periodic-interference --timesteps 30720 --n-envs 8 --out graph.pt

It prints the mean episode GPU utilisation per update, the wall time and the peak resident memory of the
process (``resource.getrusage``), and stores them in the checkpoint. Evaluate on any fabric::

    ainet-gym evaluate periodic-interference-1024 --policies ecmp,spray+bg,wcmp+bg,graph:graph.pt --seeds 1-10

The checkpoint is a ``torch.save`` dict of tensors, numbers and strings (the weights and the
configuration, no optimiser state), read back with ``torch.load(weights_only=True)``: no pickled code.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.registry import register_agent
from ainet_gym.arrays import safe_divide

if TYPE_CHECKING:
    import torch

    from ainet_gym.envs.env import EnvCore

__all__ = [
    "FORMAT",
    "TRAIN_SEED_BASE",
    "GraphActorCritic",
    "GraphPolicyAgent",
    "GraphPolicyConfig",
    "TrainConfig",
    "gae_advantages",
    "global_features",
    "graph_inputs",
    "knob_positions",
    "load_graph_policy",
    "path_features",
    "save_graph_policy",
    "train",
]

FORMAT = "ainet-gym-graph-policy"
#: training episodes use seeds TRAIN_SEED_BASE + i (evaluation seeds are small integers).
TRAIN_SEED_BASE = 1_000_000
#: number of size-free global features (see :func:`global_features`).
N_GLOBAL = 8


@dataclass(frozen=True)
class GraphPolicyConfig:
    """Shape of the network (none of it depends on the fabric).

    Attributes
    ----------
    history
        Intervals of link utilisation per link (the env's ``history``).
    hidden
        Width of every node and link embedding.
    rounds
        Message-passing rounds (3 reach from a storage host to the spine downlinks of its leaf).
    log_std_init
        Initial log standard deviation of the Gaussian actions.
    """

    history: int = 4
    hidden: int = 16
    rounds: int = 3
    log_std_init: float = -1.0

    def check(self) -> None:
        """Raise ``ValueError`` naming a bad field (each integer within the ceilings of
        :data:`ainet_gym.agents.model_files.MODEL_LIMITS`, as any network rebuilt from a file)."""
        from ainet_gym.agents.model_files import MODEL_LIMITS
        from ainet_gym.scenario.loader import LIMITS

        for name, lo, hi in (
            ("history", 1, int(LIMITS["history_max"])),
            ("hidden", 1, MODEL_LIMITS["width_max"]),
            ("rounds", 0, MODEL_LIMITS["layers_max"]),
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                shown = repr(v)[:40]
                raise ValueError(f"graph policy {name} = {shown}: must be an integer in [{lo}, {hi:,}]")
        if not (isinstance(self.log_std_init, int | float) and -20 <= self.log_std_init <= 5):
            raise ValueError(
                f"graph policy log_std_init = {self.log_std_init!r}: must be a finite number in [-20, 5]"
            )


def _mlp(n_in: int, n_hidden: int, n_out: int) -> torch.nn.Module:
    import torch.nn as nn

    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out))


def _build_module(cfg: GraphPolicyConfig) -> torch.nn.Module:
    import torch
    import torch.nn as nn

    class GraphActorCritic(nn.Module):
        """Actor-critic over a fabric graph; see the module docstring."""

        def __init__(self) -> None:
            super().__init__()
            d, g = cfg.hidden, N_GLOBAL
            self.cfg = cfg
            self.enc_node = _mlp(4 + g, d, d)
            self.enc_edge = _mlp(cfg.history + 2 + N_PATH_FEATURES + g, d, d)
            self.edge_upd = nn.ModuleList([_mlp(3 * d, d, d) for _ in range(cfg.rounds)])
            self.node_upd = nn.ModuleList([_mlp(3 * d, d, d) for _ in range(cfg.rounds)])
            self.actor = _mlp(3 * d, d, 1)
            self.critic = _mlp(3 * d + g, d, 1)
            self.log_std = nn.Parameter(torch.tensor(float(cfg.log_std_init)))

        def forward(
            self,
            node_x: torch.Tensor,  # (B, N, 4)
            edge_index: torch.Tensor,  # (2, E) int64, shared by the batch
            edge_x: torch.Tensor,  # (B, E, history + 2 + N_PATH_FEATURES)
            glob: torch.Tensor,  # (B, N_GLOBAL)
        ) -> tuple[torch.Tensor, torch.Tensor]:
            """``(mu, value)``: per-link action means (B, E) in [-1, 1] and state values (B,)."""
            B, N, _ = node_x.shape
            E = edge_index.shape[1]
            src, dst = edge_index[0], edge_index[1]
            h = self.enc_node(torch.cat([node_x, glob[:, None, :].expand(B, N, -1)], dim=-1))
            e = self.enc_edge(torch.cat([edge_x, glob[:, None, :].expand(B, E, -1)], dim=-1))
            ones = torch.ones(E, dtype=h.dtype)
            deg_in = torch.zeros(N, dtype=h.dtype).index_add_(0, dst, ones).clamp(min=1.0)[None, :, None]
            deg_out = torch.zeros(N, dtype=h.dtype).index_add_(0, src, ones).clamp(min=1.0)[None, :, None]
            for eu, nu in zip(self.edge_upd, self.node_upd, strict=True):
                e = e + eu(torch.cat([e, h.index_select(1, src), h.index_select(1, dst)], dim=-1))
                agg_in = torch.zeros_like(h).index_add_(1, dst, e) / deg_in
                agg_out = torch.zeros_like(h).index_add_(1, src, e) / deg_out
                h = h + nu(torch.cat([h, agg_in, agg_out], dim=-1))
            ends = torch.cat([e, h.index_select(1, src), h.index_select(1, dst)], dim=-1)
            mu = torch.tanh(self.actor(ends).squeeze(-1))
            pooled = torch.cat([e.mean(dim=1), e.amax(dim=1), h.mean(dim=1), glob], dim=-1)
            return mu, self.critic(pooled).squeeze(-1)

    return GraphActorCritic()


def GraphActorCritic(cfg: GraphPolicyConfig | None = None) -> torch.nn.Module:
    """A fresh :class:`GraphActorCritic` module (torch is imported lazily, so the class is built here)."""
    cfg = cfg or GraphPolicyConfig()
    cfg.check()
    return _build_module(cfg)


# ---------------------------------------------------------------------- observation -> tensors
def global_features(core: EnvCore, flat: np.ndarray) -> np.ndarray:
    """(batch, N_GLOBAL) size-free globals from the flat observation: the mean over job slots of the 5 job
    features, the mean over background sources of *active last* and *scheduled next* (0 without
    background) and the episode progress."""
    from ainet_gym.envs.env import BG_FEATURES, JOB_FEATURES

    B = flat.shape[0]
    L = core.obs_layout
    jobs = flat[:, L["jobs"]].reshape(B, -1, len(JOB_FEATURES))
    out = np.zeros((B, N_GLOBAL), dtype=np.float32)
    if jobs.shape[1]:
        out[:, :5] = jobs.mean(axis=1)
    bg = flat[:, L["background"]].reshape(B, -1, len(BG_FEATURES))
    if bg.shape[1]:
        out[:, 5:7] = bg.mean(axis=1)
    out[:, 7] = flat[:, L["episode_progress"]][:, 0]
    return out


#: per-link features :func:`path_features` adds to the observation's edge features.
N_PATH_FEATURES = 3


def path_features(core: EnvCore) -> np.ndarray:
    """(batch, links, 3) features of every link from the connections whose candidate paths cross it: one
    fixed round of link -> connection -> link message passing (as RouteNet's path-link updates, without
    learned weights), all from quantities the flat observation also holds (demands, capacities).

    With every connection's offered bytes of the next interval ``d`` (jobs at their ideal rate, scheduled
    background) spread evenly over its ``n`` live candidate paths, for link ``l``:

    - ``offered``: ``x / (1 + x)`` of the offered utilisation ``x = sum d / n / (capacity x interval)``;
    - ``path_capacity``: the offered-weighted mean, over the (connection, path) pairs through ``l``, of the
      path's bottleneck capacity fraction (a knob link whose paths lead through a degraded or failed link
      further on sees it here; 1 where nothing crosses ``l``);
    - ``path_load``: the same mean of the path's largest ``offered`` (squashed like ``offered``).
    """
    sim = core.routing_context.sim
    assert sim is not None
    fabric = core.fabric
    B, L = core.batch, fabric.n_links
    paths = sim.conn_paths_global  # (conns, P, hops), global link ids, -1 padding
    valid_path = np.arange(paths.shape[1])[None, :] < sim.conn_npaths[:, None]
    cap_frac = (sim.engine_state.capacity_bytes_per_s / fabric.capacity_bytes_per_s).reshape(-1)
    share = core.connection_demand() / np.maximum(sim.conn_npaths, 1)  # bytes per path
    per_path = np.where(valid_path, share[:, None], 0.0)  # (conns, P)
    hop = (paths >= 0) & valid_path[:, :, None]
    ids = paths[hop]
    wts = np.broadcast_to(per_path[:, :, None], paths.shape)[hop]
    nominal = np.tile(fabric.capacity_bytes_per_s, B) * core.decision_interval_s
    x = np.bincount(ids, weights=wts, minlength=B * L) / nominal
    offered = x / (1.0 + x)
    pad_cap = np.concatenate([cap_frac, [np.inf]])  # index -1 (padding) -> neutral for min
    pad_load = np.concatenate([offered, [0.0]])  # -> neutral for max
    p_cap = np.where(valid_path, pad_cap[paths].min(axis=2), 1.0)  # (conns, P)
    p_load = np.where(valid_path, pad_load[paths].max(axis=2), 0.0)
    wsum = np.bincount(ids, weights=wts, minlength=B * L)
    cap_num = np.bincount(
        ids, weights=wts * np.broadcast_to(p_cap[:, :, None], paths.shape)[hop], minlength=B * L
    )
    load_num = np.bincount(
        ids, weights=wts * np.broadcast_to(p_load[:, :, None], paths.shape)[hop], minlength=B * L
    )
    path_cap = safe_divide(cap_num, wsum, 1.0)
    path_load = safe_divide(load_num, wsum)
    return np.stack([offered, path_cap, path_load], axis=-1).reshape(B, L, 3).astype(np.float32)


def graph_inputs(core: EnvCore, obs: dict[str, np.ndarray]) -> tuple[torch.Tensor, ...]:
    """``(node_x, edge_index, edge_x, glob)`` tensors of a batched graph observation of ``core``.

    The graph is the fabric's *network* links (``core.net_links``: NIC, switch and storage links, the
    links the flat observation shows) and every node; the NVLink links inside a host carry no routing
    choice and are left out (they are 40% of the links of a DGX-style fabric, and the cost of a
    message-passing round is linear in the links). ``edge_x`` is the observation's ``edge_features`` of
    those links (utilisation history, capacity fraction), the :func:`path_features` of the connections
    crossing them and a 0/1 column marking the WCMP knob links (``core.wcmp_links``).
    :func:`knob_positions` maps the outputs back to the action.
    """
    import torch

    net = core.net_links
    ef = np.asarray(obs["edge_features"], dtype=np.float32)[:, net]
    B, E, _ = ef.shape
    knob = np.zeros((B, E, 1), dtype=np.float32)
    knob[:, knob_positions(core), 0] = 1.0
    pf = path_features(core)[:, net]
    return (
        torch.as_tensor(np.asarray(obs["node_features"], dtype=np.float32)),
        torch.as_tensor(np.asarray(obs["edge_index"])[0][:, net], dtype=torch.int64),
        torch.as_tensor(np.concatenate([ef, pf, knob], axis=-1)),
        torch.as_tensor(global_features(core, np.asarray(obs["flat"]))),
    )


def knob_positions(core: EnvCore) -> np.ndarray:
    """Positions of the WCMP knob links (``core.wcmp_links``, the action's order) among ``core.net_links``
    (the graph's edges in :func:`graph_inputs`).

    Raises
    ------
    ValueError
        If a knob link is not a network link (no fabric built by ainet-gym has one).
    """
    net = core.net_links
    pos = np.searchsorted(net, core.wcmp_links)
    pos = np.minimum(pos, max(net.shape[0] - 1, 0))
    if core.wcmp_links.size and (net.size == 0 or not np.array_equal(net[pos], core.wcmp_links)):
        raise ValueError(f"scenario {core.scenario.name!r}: a WCMP knob link is not a network link")
    return pos


# ---------------------------------------------------------------------- checkpoints
def save_graph_policy(
    module: torch.nn.Module, path: str | os.PathLike, info: dict[str, Any] | None = None
) -> Path:
    """Save the weights, the configuration and ``info`` (JSON-able) to ``path`` (``torch.save``)."""
    import torch

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    blob = {
        "format": FORMAT,
        "config": asdict(module.cfg),
        "state_dict": {k: v.detach().cpu() for k, v in module.state_dict().items()},
        "info": json.dumps(info or {}),
    }
    torch.save(blob, p)
    return p


def load_graph_policy(path: str | os.PathLike) -> tuple[torch.nn.Module, dict[str, Any]]:
    """``(module, info)`` of a checkpoint written by :func:`save_graph_policy`.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If it is not a graph-policy checkpoint (any other file, or one with other keys or shapes).
    """
    from ainet_gym.agents.model_files import ModelFileError, existing, load_tensors

    what = f"graph:{path}"
    p = existing(path, what)
    try:
        blob = load_tensors(p, what)
    except ModelFileError as e:
        raise ModelFileError(
            f"{e} (not a graph-policy checkpoint: train one with python -m ainet_gym.agents.graph_policy train)"
        ) from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise ModelFileError(
            f"{what}: not a graph-policy checkpoint (format {FORMAT!r} expected; "
            "train one with python -m ainet_gym.agents.graph_policy train)"
        )
    missing = [k for k in ("config", "state_dict") if k not in blob]
    if missing or not isinstance(blob["config"], dict) or not isinstance(blob["state_dict"], dict):
        raise ModelFileError(f"{what}: malformed graph-policy checkpoint (config and state_dict expected)")
    try:
        cfg = GraphPolicyConfig(**blob["config"])
        cfg.check()
        module = GraphActorCritic(cfg)
        module.load_state_dict(blob["state_dict"])
        info = json.loads(blob.get("info", "{}"))
        if not isinstance(info, dict):
            raise TypeError("info is not a JSON object")
    except (TypeError, KeyError, RuntimeError, ValueError, RecursionError) as e:
        text = " ".join(str(e).split())[:200]
        raise ModelFileError(f"{what}: malformed graph-policy checkpoint: {text}") from None
    module.eval()
    return module, info


# ---------------------------------------------------------------------- agent
class GraphPolicyAgent:
    """A trained graph policy on any fabric (deterministic: the mean), registered as ``graph:PATH``.

    It sets one WCMP weight per switch next-hop link (the ``ecmp_weights`` action, so it controls all
    traffic, background included) and, like every baseline that sprays or weights traffic
    (:func:`ainet_gym.routing.policies.avoid_dead_paths`) and like a switch that drops a dead next hop from its
    group, gives no share to candidate paths through a failed link (capacity 0). That is why it acts at
    the engine level (:meth:`act` returns the split; :meth:`weights` the action): the ``ecmp_weights``
    action alone cannot express a zero share (a weight is 0 only at exactly -1), and a ring AllReduce with
    any share on a dead link stalls. Without failed links the split equals ``core.decode(weights)``.
    """

    level = "engine"
    controls = "jobs+bg"

    def __init__(self, path: str | os.PathLike, avoid_dead: bool = True) -> None:
        self.path = Path(path)
        self.module, self.info = load_graph_policy(path)
        self.avoid_dead = bool(avoid_dead)
        self.name = "graph"
        self.env_kwargs: dict[str, Any] = {
            "action_mode": "ecmp_weights",
            "history": self.module.cfg.history,
            "observation": "graph",
        }

    def check(self, core: EnvCore) -> None:
        want = (self.env_kwargs["action_mode"], self.env_kwargs["history"], self.env_kwargs["observation"])
        got = (core.action_mode, core.history, core.observation_mode)
        if want != got:
            raise ValueError(
                f"graph:{self.path}: needs action_mode, history, observation = {want}; the env has {got}"
            )
        if core.wcmp_links.size == 0:
            raise ValueError(
                f"graph:{self.path}: scenario {core.scenario.name!r} has no WCMP knob links (no switch "
                "with equal-cost next hops), so there is nothing to weight"
            )

    def reset(self, core: EnvCore) -> None:
        return None

    def weights(self, core: EnvCore, obs: Any) -> np.ndarray:
        """The ``ecmp_weights`` action (batch, knob links) in [-1, 1]: the policy's mean."""
        import torch

        with torch.no_grad():
            mu, _ = self.module(*graph_inputs(core, obs))
        return mu.numpy()[:, knob_positions(core)].astype(np.float32)

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        """The split (connections, max_paths) of the weights, without shares on dead paths."""
        from ainet_gym.routing.policies import avoid_dead_paths

        split = core.decode(core.validate(self.weights(core, obs)))
        return avoid_dead_paths(core.routing_context, split) if self.avoid_dead else split


register_agent(
    "graph",
    lambda path: GraphPolicyAgent(path),
    needs_arg=True,
    arg_help="PATH",
    description="a graph policy that acts on any fabric size (python -m ainet_gym.agents.graph_policy train)",
    overwrite=True,
)


# ---------------------------------------------------------------------- training
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


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.graph_policy train SCENARIO --timesteps N --out graph.pt``."""
    from ainet_gym.agents.outputs import (  # one-line errors, as ainet-gym's
        TRAIN_SEED_MAX,
        OneLineParser,
        add_out_file_args,
        cli_out_file_refused,
        int_arg,
    )

    p = OneLineParser(prog="python -m ainet_gym.agents.graph_policy", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train a graph policy with PPO")
    t.add_argument("scenario")
    # the ranges of ainet-gym train and of GraphPolicyConfig.check (rounds 0: no message passing)
    t.add_argument("--timesteps", type=int_arg(1), default=TrainConfig.timesteps)
    t.add_argument("--n-envs", type=int_arg(1, 100_000), default=TrainConfig.n_envs)
    t.add_argument("--seed", type=int_arg(0, TRAIN_SEED_MAX), default=0)
    t.add_argument("--hidden", type=int_arg(1), default=GraphPolicyConfig.hidden)
    t.add_argument("--rounds", type=int_arg(0), default=GraphPolicyConfig.rounds)
    t.add_argument("--history", type=int_arg(1), default=GraphPolicyConfig.history)
    t.add_argument("--episode-steps", type=int_arg(1), default=None)
    add_out_file_args(t, "checkpoint path (e.g. graph.pt)", required=True)
    args = p.parse_args(argv)
    if cli_out_file_refused(
        "python -m ainet_gym.agents.graph_policy train", args.out, args.overwrite, (), flag="--out"
    ):
        return 2
    import torch

    torch.set_num_threads(1)
    try:
        cfg = TrainConfig(
            args.scenario,
            timesteps=args.timesteps,
            n_envs=args.n_envs,
            seed=args.seed,
            episode_steps=args.episode_steps,
        )
        pol = GraphPolicyConfig(history=args.history, hidden=args.hidden, rounds=args.rounds)
        pol.check()
        net, info = train(cfg, pol)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = save_graph_policy(net, args.out, info)
    print(
        f"saved {out} ({out.stat().st_size / 1024:.0f} KiB, {info['parameters']} parameters); "
        f"{info['timesteps']} steps in {info['wall_s']} s, peak RSS {info['peak_rss_mib']} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
