"""Adapter from the native vector env to stable-baselines3's ``VecEnv``.

SB3's contract differs from Gymnasium's vector API: an env that finishes is reset *in the same
step*, the returned observation is the reset one, and the last observation of the episode goes to
``infos[i]["terminal_observation"]``; ``infos`` is a list of dicts; ``dones = terminated | truncated``
with ``infos[i]["TimeLimit.truncated"]``. This adapter drives :class:`EnvCore` directly so that the
batched engine serves SB3 without a Python loop over envs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ainet_gym.envs.vector_env import FabricRoutingVectorEnv

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv
except ImportError as e:  # pragma: no cover - exercised only without the rl extra
    raise ImportError(
        "ainet_gym.envs.sb3_vec_env needs stable-baselines3: pip install 'ainet-gym[rl]'"
    ) from e

__all__ = ["SB3VecEnv"]

_INFO_KEYS = (
    "gpu_utilization",
    "efficiency",
    "step_time_ms",
    "max_link_utilization",
    "stalled_transfers",
    "collisions",
    "reward_gpu_utilization",
    "reward_step_time",
    "failed_links",
    "iterations",
    "ideal_step_time_ms",
)


class SB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` over :class:`FabricRoutingVectorEnv` (same arguments)."""

    def __init__(self, num_envs: int = 8, seed: int | None = None, **kwargs: Any) -> None:
        self.venv = FabricRoutingVectorEnv(num_envs=num_envs, **kwargs)
        self.core = self.venv.core
        super().__init__(num_envs, self.venv.single_observation_space, self.venv.single_action_space)
        self._rng = np.random.default_rng(seed)
        self._seeds: list[int | None] = [None if seed is None else seed + i for i in range(num_envs)]
        self._actions: np.ndarray | None = None
        self.render_mode = None

    # -- VecEnv API
    def reset(self) -> np.ndarray:
        seeds = [int(self._rng.integers(2**31)) if s is None else s for s in self._seeds]
        self._seeds = [None] * self.num_envs
        obs, _ = self.core.reset(seeds)
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        assert self._actions is not None
        obs, rew, term, trunc, info = self.core.step(self._actions)
        dones = term | trunc
        infos: list[dict[str, Any]] = []
        for i in range(self.num_envs):
            d = {k: info[k][i] for k in _INFO_KEYS if k in info}
            d["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
            infos.append(d)
        if dones.any():
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = obs[i].copy()
            seeds = [int(self._rng.integers(2**31)) for _ in range(self.num_envs)]
            fresh, _ = self.core.reset(seeds, mask=dones)
            obs = np.where(dones[:, None], fresh, obs)
        return obs, rew.astype(np.float32), dones, infos

    def close(self) -> None:
        return None

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        self._rng = np.random.default_rng(seed)
        self._seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        return self._seeds

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        if attr_name == "render_mode":
            return [None for _ in self._indices(indices)]
        return [getattr(self.venv, attr_name) for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        if method_name == "action_masks":
            m = self.core.action_masks()
            return [m[i] for i in self._indices(indices)]
        return [getattr(self.venv, method_name)(*args, **kwargs) for _ in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False for _ in self._indices(indices)]

    def action_masks(self) -> np.ndarray:
        return self.core.action_masks()

    def _indices(self, indices: Any) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices)
