"""The observation of an env: :class:`EnvObservation` is the observation side of
:class:`~ainet_gym.envs.env.EnvCore` (its base class): the observation of an interval's result and the
link-utilisation history it shows. It holds no state of its own and reads the core's, the attributes
annotated on it and its bases, which ``EnvCore.__init__`` sets.

Modules of one concern: the block layout, part of the env's contract, is :mod:`ainet_gym.envs.obs_layout`; the
spaces :mod:`ainet_gym.envs.spaces`; the blocks both paths compute in Python :mod:`ainet_gym.envs.obs_blocks`;
the compiled path :mod:`ainet_gym.envs.obs_compiled` (the bases of :class:`EnvObservation`). This module is the
numpy path and the choice between the two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.arrays import nan_to_zero
from ainet_gym.envs.obs_compiled import CompiledObservation
from ainet_gym.envs.obs_layout import JOB_FEATURES, squash
from ainet_gym.sim.world import StepResult

if TYPE_CHECKING:
    from ainet_gym.envs.passes import EnvPasses

__all__ = [
    "EnvObservation",
]


class EnvObservation(CompiledObservation):
    """The observation side of :class:`~ainet_gym.envs.env.EnvCore`: the observation of an interval's
    result, float32 in [0, 1] (the action and observation spaces are :class:`~ainet_gym.envs.spaces.EnvSpaces`')."""

    _passes: EnvPasses

    def _push_history(self, res: StepResult, active: np.ndarray) -> None:
        """Newest first: shift the link-utilisation history of the ``active`` copies by one interval."""
        hist = self.state.util_hist
        if active.all():  # slices, no gather
            hist[:, 1:] = hist[:, :-1]
            hist[:, 0] = res.link_utilization[:, self.net_links]
        else:
            act = np.flatnonzero(active)
            hist[act, 1:] = hist[act, :-1]
            hist[act, 0] = res.link_utilization[np.ix_(act, self.net_links)]

    def observe(self, res: StepResult | None) -> Any:
        """The observation (batch, ...) after the interval ``res`` (None: right after a reset)."""
        return self._observe(res, None)

    def _observe(self, res: StepResult | None, push: np.ndarray | None) -> Any:
        """:meth:`observe`, after pushing ``res``'s link utilisation into the history of the ``push``
        copies (compiled backend only; the numpy path pushes in :meth:`_push_history`)."""
        w = self.world
        sim = w.sim
        assert sim is not None
        B = self.batch
        if self._passes.compiled_observation:
            return self._observe_numba(res, push)
        # float32 blocks written in place: each float64 value is rounded to float32 once, as the cast of a
        # float64 vector would
        obs = np.empty((B, self.obs_dim), dtype=np.float32)
        L = self.obs_layout
        u = self.state.util_hist
        # each row was checked when it was the newest one: checking that one suffices
        if u.size and u[:, 0].max() > 1.0 + 1e-6:
            raise AssertionError(f"link utilisation {u[:, 0].max()} > 1: capacity constraint violated")
        np.minimum(u.reshape(B, -1), 1.0, out=obs[:, L["link_utilization"]])
        obs[:, L["link_capacity"]] = (
            sim.engine_state.capacity_bytes_per_s[:, self.net_links] / self._net_capacity
        )
        # jobs
        J = w.n_job_slots
        ju = w.job_unit
        alive = ju >= 0
        idx = np.maximum(ju, 0)
        jf = np.zeros((B, J, len(JOB_FEATURES)))
        jf[..., 0] = alive
        if res is not None:
            jf[..., 1] = nan_to_zero(res.efficiency)  # (np.nan_to_num(nan=0.0), in fewer passes)
            jf[..., 2] = nan_to_zero(res.gpu_utilization)
        pc = sim.state.phase_cur[idx]
        jf[..., 3] = alive & (pc >= 0) & (pc < sim.unit_nphases[idx])
        since = np.maximum(sim.state.time_s[:, None] - sim.state.iter_start[idx], 0.0)
        ideal = np.where(alive, w.job_ideal_step_s, 1.0)
        jf[..., 4] = np.where(alive, squash(since / ideal), 0.0)
        jf[~alive] = 0.0
        obs[:, L["jobs"]] = jf.reshape(B, -1)
        obs[:, L["slots"]] = self._slot_features()
        # background
        if self.n_bg:
            obs[:, L["background"]] = self._background_features(res)
        obs[:, L["episode_progress"]] = np.minimum(w.state.step_count / self.episode_steps, 1.0)[:, None]
        self._optional_blocks(obs)
        if self.observation_mode == "flat":
            return obs
        return self._graph_obs(obs)
