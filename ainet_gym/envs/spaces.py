"""The spaces of an env: :class:`EnvSpaces`, a base class of :class:`~ainet_gym.envs.core.EnvCore`, builds the
action space of the action mode and the observation space: the flat observation's layout over the blocks of
:mod:`ainet_gym.envs.obs_layout` (``obs_layout``, ``obs_dim``) and, for ``observation="graph"``, the graph view's
``Dict`` space. It holds no state of its own: it sets the core's attributes annotated on it.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from ainet_gym.envs.actions import SPLIT_MODES
from ainet_gym.envs.obs_layout import BG_FEATURES, JOB_FEATURES, OBS_FEATURE_BLOCKS, SLOT_FEATURES, obs_layout
from ainet_gym.sim.world import FabricWorld

__all__ = [
    "EnvSpaces",
]


class EnvSpaces:
    """The spaces of :class:`~ainet_gym.envs.env.EnvCore`: the action space and the observation space."""

    P: int
    action_mode: str
    action_space: spaces.Space
    history: int
    n_bg: int
    n_net: int
    n_slots: int
    obs_dim: int
    obs_features: tuple[str, ...]
    obs_layout: dict[str, slice]
    observation_mode: str
    observation_space: spaces.Space
    plans: tuple[str, ...]
    wcmp_links: np.ndarray
    world: FabricWorld

    def _build_spaces(self) -> None:
        w = self.world
        S, P = self.n_slots, self.P
        if self.action_mode == "path":
            self.action_space = spaces.MultiDiscrete(np.full(S, P, dtype=np.int64))
        elif self.action_mode in SPLIT_MODES:
            self.action_space = spaces.Box(-1.0, 1.0, shape=(S * P,), dtype=np.float32)
        elif self.plans:
            self.action_space = spaces.Discrete(len(self.plans))
        else:
            self.action_space = spaces.Box(-1.0, 1.0, shape=(self.wcmp_links.shape[0],), dtype=np.float32)
        sizes = {
            "link_utilization": self.history * self.n_net,
            "link_capacity": self.n_net,
            "jobs": w.n_job_slots * len(JOB_FEATURES),
            "slots": S * len(SLOT_FEATURES),
            "background": self.n_bg * len(BG_FEATURES),
            "episode_progress": 1,
        }
        for name in self.obs_features:  # optional blocks after every default one: their offsets stay
            sizes[f"job_{name}"] = w.n_job_slots * len(OBS_FEATURE_BLOCKS[name])
        self.obs_layout, o = obs_layout(sizes)
        self.obs_dim = o
        flat = spaces.Box(0.0, 1.0, shape=(o,), dtype=np.float32)
        if self.observation_mode == "flat":
            self.observation_space = flat
        else:
            f = w.fabric
            n_nodes = len(f.node_names)
            self.observation_space = spaces.Dict(
                {
                    "flat": flat,
                    "node_features": spaces.Box(0.0, 1.0, shape=(n_nodes, 4), dtype=np.float32),
                    # node ids as float32 (exact below 2**24 nodes): every block float32, so a flattened
                    # graph observation (FlattenObservation, spaces.flatten) stays float32
                    "edge_index": spaces.Box(0, n_nodes - 1, shape=(2, f.n_links), dtype=np.float32),
                    "edge_features": spaces.Box(
                        0.0, 1.0, shape=(f.n_links, self.history + 1), dtype=np.float32
                    ),
                }
            )
