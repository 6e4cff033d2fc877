"""SB3 callbacks: the fabric's own training curves in TensorBoard.

:class:`FabricMetricsCallback` reads the ``infos`` of :class:`~ainet_gym.envs.sb3_vec_env.SB3VecEnv` every
step and, when an episode ends, records its means under ``fabric/``:

===============================  ======================================================================
scalar                           meaning (episode mean)
===============================  ======================================================================
``fabric/gpu_utilization``       GPU-weighted compute time / elapsed time (= ``reward_gpu_utilization``)
``fabric/step_time_ratio``       actual / ideal step time, over job-intervals that completed an
                                 iteration (``1 / efficiency``)
``fabric/max_link_utilization``  the interval's most utilised network link
``fabric/collisions``            hot links (>= 95%) shared by two or more routed connections
``fabric/efficiency``            mean over jobs of ideal / actual step time (= ``reward_step_time``)
``fabric/episodes``              episodes finished so far
===============================  ======================================================================

SB3 writes them with its own curves (``rollout/ep_rew_mean``, ``train/...``) at each dump.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from ainet_gym.arrays import safe_divide

__all__ = ["FABRIC_SCALARS", "FabricMetricsCallback", "step_metrics"]

FABRIC_SCALARS = (
    "gpu_utilization",
    "step_time_ratio",
    "max_link_utilization",
    "collisions",
    "efficiency",
)


def step_metrics(infos: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per-env values (envs,) of one step; ``step_time_ratio`` as (sum, count) of job-intervals."""
    eff = np.stack([np.asarray(i.get("efficiency", [0.0]), dtype=np.float64) for i in infos])  # (envs, J)
    st = np.stack([np.asarray(i.get("step_time_ms", [0.0]), dtype=np.float64) for i in infos])  # (envs, J)
    done_iter = (st > 0) & (eff > 0)
    ratio = np.where(done_iter, safe_divide(1.0, eff), 0.0)
    return {
        "gpu_utilization": np.array([float(i.get("reward_gpu_utilization", 0.0)) for i in infos]),
        "step_time_ratio_sum": ratio.sum(axis=1),
        "step_time_ratio_n": done_iter.sum(axis=1).astype(np.float64),
        "max_link_utilization": np.array([float(i.get("max_link_utilization", 0.0)) for i in infos]),
        "collisions": np.array([float(i.get("collisions", 0.0)) for i in infos]),
        "efficiency": np.array([float(i.get("reward_step_time", 0.0)) for i in infos]),
    }


class FabricMetricsCallback(BaseCallback):
    """Log episode means of the fabric metrics under ``fabric/`` (see the module docstring).

    ``last`` holds the means of the most recent finished episodes (a dict, for printing a summary).
    """

    def __init__(self, prefix: str = "fabric", verbose: int = 0) -> None:
        super().__init__(verbose)
        self.prefix = prefix
        self.last: dict[str, float] = {}
        self.history: list[tuple[int, dict[str, float]]] = []  # (num_timesteps, episode means)
        self.episodes = 0

    def _on_training_start(self) -> None:
        n = self.training_env.num_envs
        # the collision count is an on-demand diagnostic of the env: ask for it (through VecEnv wrappers)
        env: Any = self.training_env
        while env is not None and not hasattr(env, "core"):
            env = getattr(env, "venv", None)
        if env is not None:
            env.core.request_info("collisions")
        self._sum: dict[str, np.ndarray] = {}
        self._steps = np.zeros(n)
        self._n = n

    def _on_step(self) -> bool:
        infos = self.locals.get("infos")
        dones = self.locals.get("dones")
        if infos is None or dones is None:
            return True
        m = step_metrics(infos)
        for k, v in m.items():
            self._sum[k] = self._sum.get(k, np.zeros(self._n)) + v
        self._steps += 1
        done = np.asarray(dones, dtype=bool)
        if done.any():
            means: dict[str, list[float]] = {k: [] for k in FABRIC_SCALARS}
            for i in np.flatnonzero(done):
                n = max(self._steps[i], 1.0)
                ep = {
                    "gpu_utilization": self._sum["gpu_utilization"][i] / n,
                    "max_link_utilization": self._sum["max_link_utilization"][i] / n,
                    "collisions": self._sum["collisions"][i] / n,
                    "efficiency": self._sum["efficiency"][i] / n,
                    "step_time_ratio": self._sum["step_time_ratio_sum"][i]
                    / max(self._sum["step_time_ratio_n"][i], 1.0),
                }
                for k in FABRIC_SCALARS:
                    means[k].append(float(ep[k]))
                    self.logger.record_mean(f"{self.prefix}/{k}", float(ep[k]))
                for v in self._sum.values():
                    v[i] = 0.0
                self._steps[i] = 0.0
            self.episodes += int(done.sum())
            self.logger.record(f"{self.prefix}/episodes", self.episodes)
            self.last = {k: float(np.mean(v)) for k, v in means.items()}
            self.history.append((int(self.num_timesteps), dict(self.last)))
        return True
