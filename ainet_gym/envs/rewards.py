"""Reward functions: objects the environment takes as an argument, so users swap them freely.

A reward function maps the :class:`~ainet_gym.sim.world.StepResult` of an interval to one reward per
instance, shape ``(batch,)``. Both built-ins lie in [0, 1].
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ainet_gym.arrays import safe_divide
from ainet_gym.errors import check_choice
from ainet_gym.sim.world import StepResult

__all__ = ["REWARDS", "GpuUtilizationReward", "RewardFn", "StepTimeReward", "make_reward"]


@runtime_checkable
class RewardFn(Protocol):
    """Maps an interval's results to rewards ``(batch,)``."""

    name: str

    def __call__(self, result: StepResult) -> np.ndarray: ...


class GpuUtilizationReward:
    """GPU-weighted mean utilisation of the running jobs in the interval (compute time / elapsed time).

    1.0 means every GPU computed all the time; communication that is not hidden lowers it.
    An instance with no running job gets 0.
    """

    name = "gpu_utilization"

    def __call__(self, result: StepResult) -> np.ndarray:
        u = result.gpu_utilization
        ok = np.isfinite(u)
        w = np.where(ok, result.job_gpus, 0).astype(np.float64)
        tot = w.sum(axis=1)
        return safe_divide((np.where(ok, u, 0.0) * w).sum(axis=1), tot)


class StepTimeReward:
    """Mean over running jobs of ideal / actual step time (1.0 = every job at its non-blocking speed)."""

    name = "step_time"

    def __call__(self, result: StepResult) -> np.ndarray:
        e = result.efficiency
        ok = np.isfinite(e)
        n = ok.sum(axis=1)
        return np.where(n > 0, np.where(ok, e, 0.0).sum(axis=1) / np.maximum(n, 1), 0.0)


REWARDS: dict[str, type] = {"gpu_utilization": GpuUtilizationReward, "step_time": StepTimeReward}


def make_reward(spec: str | RewardFn) -> RewardFn:
    """A reward object from a name (``gpu_utilization`` | ``step_time``) or an object passed through.

    Raises
    ------
    ValueError
        If the name is unknown or the object is not callable.
    """
    if isinstance(spec, str):
        check_choice("reward", spec, REWARDS, more=" or a RewardFn object")
        return REWARDS[spec]()
    if not callable(spec):
        raise ValueError(f"reward = {spec!r}: not callable; pass a name or an object with __call__(result)")
    return spec
