"""The graph policy's network (:mod:`ainet_gym.agents.graph_policy`): :class:`GraphPolicyConfig` (its shape,
none of it depending on the fabric) and :func:`GraphActorCritic`, the message-passing actor-critic (plain
torch, imported lazily)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

from ainet_gym.agents.graph_inputs import N_GLOBAL, N_PATH_FEATURES

__all__ = [
    "GraphActorCritic",
    "GraphPolicyConfig",
]


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
