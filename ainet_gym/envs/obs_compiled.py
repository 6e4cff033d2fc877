"""The observation by the compiled env passes (:mod:`ainet_gym.sim.backends.numba.env_passes`), the same
floating-point operations as the numpy code (bit for bit): :class:`EarlyBlocks`, the blocks and the per-job info
written on the kernel threads right after each instance range's interval, and :class:`CompiledObservation`
(:meth:`~CompiledObservation._observe_numba`, the observation from them or from the passes after the step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.envs.info import INFO_JOB_KEYS
from ainet_gym.envs.obs_blocks import ObservationBlocks
from ainet_gym.sim.backends.numba import env_passes
from ainet_gym.sim.world import StepResult

if TYPE_CHECKING:
    from ainet_gym.envs.core import EnvCore

__all__ = [
    "CompiledObservation",
    "EarlyBlocks",
]


class EarlyBlocks:
    """The observation blocks and the per-job part of the info of a compiled step, computed
    on the kernel threads right after each instance range's interval and figures
    (:meth:`FabricWorld.step`'s ``after_figures``): the observation array, each range's largest newest
    utilisation and the info arrays.

    ``slot_features`` and ``rest_args`` are the core's own builders of the slot block and of
    ``observe_rest``'s arguments, handed over by the core that makes this object."""

    def __init__(
        self,
        core: EnvCore,
        active: np.ndarray,
        slot_features: Callable[[], np.ndarray],
        rest_args: Callable[..., tuple],
    ) -> None:
        self.core = core
        self.slot_features, self.rest_args = slot_features, rest_args
        self.push = np.ascontiguousarray(active, dtype=np.bool_)
        self.obs = np.empty((core.batch, core.obs_dim), dtype=np.float32)
        self.tops = np.empty(0)
        self.jobs: dict[str, np.ndarray] = {}  # the info's per-job arrays and rewards (info_jobs)
        self.slots: np.ndarray | None = None  # the slot block the early observe_rest wrote
        self.ran = False

    def kernel(self, fig: Any) -> tuple[Any, Any]:
        """(kernel, arguments of a range) for the interval whose figures ``fig`` will hold."""
        core = self.core
        sim = core.world.sim
        assert sim is not None
        ranges = sim.table.ranges
        self.tops = np.empty(len(ranges))
        self.ran = True
        start = core.obs_layout["link_utilization"].start
        where = {r: i for i, r in enumerate(ranges)}

        B, J = fig.step_t.shape
        jobs = {k: np.empty((B, J)) for k in INFO_JOB_KEYS}
        jobs.update(reward_gpu_utilization=np.empty(B), reward_step_time=np.empty(B))
        self.jobs = jobs
        info_args = (fig.step_t, fig.ideal, fig.util, fig.eff, fig.compute_s, fig.ngpu,
                     *(jobs[k] for k in INFO_JOB_KEYS), jobs["reward_gpu_utilization"], jobs["reward_step_time"])  # fmt: skip

        # the other blocks, as they will be if the dynamics change no capacity and restack nothing (the
        # common case; else they are written again after the dynamics): the capacities of this interval,
        # the jobs after it, the slots as they are, the progress after the step
        w = core.world
        self.slots = self.slot_features()
        rest_args = self.rest_args(fig.eff, fig.util, self.slots, w.state.step_count + self.push)

        def both(lo: int, hi: int) -> None:
            i = where[(lo, hi)]
            env_passes.observe_history(lo, hi, core.state.util_hist, self.push, fig.lu, core.net_links, start, self.obs,
                                        self.tops[i : i + 1])  # fmt: skip
            env_passes.info_jobs(lo, hi, *info_args, np.empty(J))
            env_passes.observe_rest(lo, hi, *rest_args, self.obs)

        return both, lambda lo, hi: (lo, hi)


class CompiledObservation(ObservationBlocks):
    """The compiled path of :class:`~ainet_gym.envs.observation.EnvObservation` (see the module doc)."""

    _net_capacity: np.ndarray
    _no_job: np.ndarray
    _no_lu: np.ndarray
    episode_steps: int
    n_net: int
    obs_dim: int
    observation_mode: str

    def _early_blocks(self, active: np.ndarray) -> EarlyBlocks:
        """The blocks of this step's observation and info that the kernel threads compute right after each
        range's interval (:class:`EarlyBlocks`)."""
        return EarlyBlocks(self, active, self._slot_features, self._rest_args)

    def _observe_numba(
        self, res: StepResult | None, push: np.ndarray | None, early: EarlyBlocks | None = None
    ) -> Any:
        """:meth:`observe` by compiled passes (:func:`ainet_gym.sim.backends.numba.env_passes.observe_history` and :func:`~ainet_gym.sim.backends.numba.env_passes.observe_rest`), the same
        floating-point operations as the numpy code (bit for bit). ``early``: the blocks written on the
        kernel threads (:meth:`_early_blocks`): the history, and the rest as it is when the
        dynamics changed nothing it shows (else the rest is written again here)."""
        w = self.world
        sim = w.sim
        assert sim is not None
        B = self.batch
        L = self.obs_layout
        slots = self._slot_features()
        eff = self._no_job if res is None else res.efficiency
        util = self._no_job if res is None else res.gpu_utilization
        if early is not None and early.ran:
            tops = early.tops  # NaN if any range saw one (one range: its value, without a reduction)
            obs, top = early.obs, tops[0] if tops.shape[0] == 1 else tops.max()
            if w.state.dynamics_changed or slots is not early.slots:  # the early rest blocks are out of date
                env_passes.observe_rest(0, B, *self._rest_args(eff, util, slots, w.state.step_count), obs)
        else:
            rest = self._rest_args(eff, util, slots, w.state.step_count, res is not None)
            obs = np.empty((B, self.obs_dim), dtype=np.float32)
            if res is None or push is None:
                push = np.zeros(B, dtype=np.bool_)
            lu = self._no_lu if res is None else res.link_utilization
            tops = np.empty(1)
            env_passes.observe_history(
                0, B, self.state.util_hist, np.ascontiguousarray(push, dtype=np.bool_),
                np.ascontiguousarray(lu, dtype=np.float64), self.net_links, L["link_utilization"].start, obs, tops,
            )  # fmt: skip
            env_passes.observe_rest(0, B, *rest, obs)
            top = tops[0]
        if self.n_net and top > 1.0 + 1e-6:
            raise AssertionError(f"link utilisation {top} > 1: capacity constraint violated")
        if self.n_bg:
            obs[:, L["background"]] = self._background_features(res)
        self._optional_blocks(obs)
        if self.observation_mode == "flat":
            return obs
        return self._graph_obs(obs)

    def _rest_args(
        self,
        eff: np.ndarray,
        util: np.ndarray,
        slots: np.ndarray,
        step_count: np.ndarray,
        has_res: bool = True,
    ) -> tuple:
        """The arguments of :func:`ainet_gym.sim.backends.numba.env_passes.observe_rest` but the instance range and ``obs``,
        with the engine's current capacities, units and clocks."""
        w = self.world
        sim = w.sim
        assert sim is not None
        L = self.obs_layout
        return (
            self.net_links, np.ascontiguousarray(sim.engine_state.capacity_bytes_per_s, dtype=np.float64), self._net_capacity,
            np.ascontiguousarray(w.job_unit, dtype=np.int64), has_res, eff, util, sim.state.phase_cur,
            sim.unit_nphases, sim.state.time_s, sim.state.iter_start, w.job_ideal_step_s, slots,
            np.ascontiguousarray(step_count), self.episode_steps, L["link_capacity"].start, L["jobs"].start,
            L["slots"].start, L["episode_progress"].start,
        )  # fmt: skip
