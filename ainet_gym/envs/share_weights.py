"""The share weights of :class:`~ainet_gym.envs.env.EnvCore` (:class:`EnvShareWeights`, its base class): the
weight of each job slot's and background source's flows in the engine's max-min fairness, set by hand, by a
weighted plan or from the scenario, and the background's re-drawn phases of a planner's copies."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ainet_gym.routing.plans import plan_share_weights, share_weights_of
from ainet_gym.scenario.spec import Scenario
from ainet_gym.sim.world import FabricWorld

__all__ = ["EnvShareWeights"]


def _share_array(name: str, x: npt.ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` broadcast to ``shape`` as float64 share weights, or a ValueError naming ``name``, the first bad
    value and what is allowed (finite numbers > 0)."""
    try:
        a = np.broadcast_to(np.asarray(x, dtype=np.float64), shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} = {x!r}: allowed: finite numbers > 0 of shape {shape} (or one number)"
        ) from None
    bad = np.argwhere(~(np.isfinite(a) & (a > 0.0)))
    if bad.size:
        i = tuple(int(k) for k in bad[0])
        raise ValueError(f"{name}[{', '.join(map(str, i))}] = {float(a[i])!r}: allowed: a finite number > 0")
    return a


class EnvShareWeights:
    """The share weights of :class:`~ainet_gym.envs.env.EnvCore`: it holds no state of its own but a cache of
    the scenario's weights, and reads the core's, the attributes annotated here, which ``EnvCore.__init__``
    and :class:`~ainet_gym.envs.agent_api.EnvAgentAPI` set."""

    # set by EnvCore.__init__; _sim is EnvAgentAPI's
    _own_weights: tuple[list, np.ndarray] | None
    _plan_slot: np.ndarray
    _plan_weight: np.ndarray
    _sim: Callable[[], Any]
    batch: int
    scenario: Scenario
    world: FabricWorld

    # ------------------------------------------------------------------ share weights
    def set_share_weights(self, jobs: npt.ArrayLike | None, background: npt.ArrayLike = 1.0) -> None:
        """The share weight of the flows of each job slot (``jobs``: (B, J), finite > 0; None: each job's
        ``share_weight`` of the scenario, default 1) and of
        each background source (``background``: a number, or (B, sources)), from the next step on:
        the engine makes the level ``rate / weight`` max-min fair (:meth:`BatchSim.set_share_weights
        <ainet_gym.sim.engine.BatchSim.set_share_weights>`; docs/model.md, "Share weights"). An empty slot's
        weight is not used; a job keeps its weight while it runs, a job that arrives starts at its
        ``share_weight``. In
        :meth:`snapshot` / :meth:`restore`.

        Raises
        ------
        ValueError
            If a weight is not a finite number > 0 or a shape does not fit (nothing is changed then).
        """
        w = self.world
        sim = self._sim()
        J, bg_unit = w.job_unit.shape[1], w.bg_unit
        jw = None if jobs is None else _share_array("jobs", jobs, (self.batch, J))
        bw = _share_array("background", background, bg_unit.shape)
        uw = self._scenario_unit_weights().copy()
        if jw is not None:
            ok = w.job_unit >= 0
            uw[w.job_unit[ok]] = jw[ok]
        uw[bg_unit.reshape(-1)] = bw.reshape(-1)
        sim.set_share_weights(uw)

    def set_plan_weights(self, plans: Sequence[str]) -> None:
        """The share weights of the plan each instance runs in the next step (``plans``: one plan name per
        instance): a weighted plan's (``favour{j}[-w{W}]+bg``: job slot ``j`` and the background at its weight,
        the other jobs 1; :func:`ainet_gym.routing.plans.plan_share_weights`), the scenario's for any other
        plan. A ``choose_bg`` env with weighted plans calls it in every :meth:`step`; engine-level agents of
        the class (the ``favour{j}+bg`` baselines, ``twin:...-w``) before their ``step_split``.

        Raises
        ------
        ValueError
            If ``plans`` does not name one plan per instance, or a weighted plan is misspelt.
        """
        if len(plans) != self.batch:
            raise ValueError(f"plans: {len(plans)} names; allowed: one plan name per instance ({self.batch})")
        jobs, bg = plan_share_weights(list(plans), self.world.job_unit.shape[1], self._scenario_job_weights())
        self.set_share_weights(jobs, np.broadcast_to(bg[:, None], self.world.bg_unit.shape))

    def _set_plan_weights_at(self, picked: np.ndarray) -> None:
        """:meth:`set_plan_weights` for the plans of this env picked by index (``picked``: (B,)), as a step
        does: the table parsed at construction, no name parsed."""
        jobs, bg = share_weights_of(
            self._plan_slot[picked], self._plan_weight[picked], self._scenario_job_weights()
        )
        self.set_share_weights(jobs, np.broadcast_to(bg[:, None], self.world.bg_unit.shape))

    def _scenario_unit_weights(self) -> np.ndarray:
        """(units,) each unit's scenario share weight (``jobs[].share_weight``, the background's 1), cached
        until a restack gives the simulation other units."""
        units = self._sim().flat_units
        if self._own_weights is None or self._own_weights[0] is not units:
            self._own_weights = (units, np.array([u.share_weight for u in units], dtype=np.float64))
        return self._own_weights[1]

    def _scenario_job_weights(self) -> np.ndarray:
        """(B, J) each job slot's scenario share weight (1 for an empty slot)."""
        ju = self.world.job_unit
        return np.where(ju >= 0, self._scenario_unit_weights()[np.maximum(ju, 0)], 1.0)

    def redraw_background(self, redraw: Any, seeds: Sequence[int], plans: int) -> None:
        """Re-draw, in place, the phases of the periodic background sources that the observation has not shown
        (a planner's copies of ``len(seeds)`` episodes laid out as (episode, sample, plan); ``redraw`` a
        :class:`ainet_gym.sim.redraw.FutureRedraw`): the bursts change from the next interval on, nothing else
        of the state does (docs/learning.md, "issue-26zr"); with ``redraw.starts`` the hidden job starts are
        re-drawn too (:meth:`~ainet_gym.sim.redraw.FutureRedraw.apply_starts`, "issue-26zm2")."""
        redraw.apply(self.world.state, self.scenario.background, seeds, plans)
        if getattr(redraw, "starts", False):
            redraw.apply_starts(self.world, seeds, plans)
