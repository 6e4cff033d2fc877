"""The predictive router of one world (engine level): greedy placement or the min-max LP on the forecast base
load (:class:`PredictiveRouter`), read through the world's routing context only. Registered on import as the
router behind routing's ``predictive-*`` policies (:func:`~ainet_gym.routing.predictive_policy.register_predictive_router`):
routing sits below the agents."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.predictive_model import FitConfig, background_offered, fitted_model, nominal_bytes
from ainet_gym.errors import check_choice
from ainet_gym.routing.greedy import greedy
from ainet_gym.routing.loads import base_load
from ainet_gym.routing.lp import lp
from ainet_gym.routing.predictive_policy import register_predictive_router

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = [
    "PredictiveRouter",
]


class PredictiveRouter:
    """Greedy placement or the min-max LP on the forecast base load of one world (engine level), read
    through its :class:`~ainet_gym.routing.context.RoutingContext` only (the scenario, the step counts and
    the nominal capacities included).

    ``router``: ``greedy`` or ``lp``; ``background``: the router places the background connections too
    (``+bg``, class ``jobs+bg``). Keeps the forecast's lags (batch, H, links): each call with a new
    ``last`` result pushes that interval's base load; instances whose step count is 0 (just reset) start
    from empty lags. The forecaster is fitted on first use (:func:`fitted_model`), on training episodes
    of ``steps`` intervals (default: the scenario's episode length).
    """

    def __init__(
        self,
        world: RoutingContext,
        router: str,
        background: bool = False,
        cfg: FitConfig | None = None,
        steps: int | None = None,
    ) -> None:
        check_choice("router", router, ("greedy", "lp"))
        self.world = world
        self.router = router
        self.background = background
        self.model = fitted_model(
            world.scenario, steps or world.scenario.dynamics.episode_steps, cfg, background
        )
        if self.model.tiers.shape[0] != world.fabric.n_links:
            raise ValueError(f"predictive-{router}: the forecaster was fitted on another fabric")
        L = world.fabric.n_links
        self.hist = np.zeros((world.batch, self.model.history, L))
        self.bg_prev = np.zeros((world.batch, L))  # scheduled background of the last interval
        self._bg_now = np.zeros((world.batch, L))  # ... of the interval being decided
        self._seen: Any = None  # the last result pushed into the lags

    @classmethod
    def of_core(
        cls, core: EnvCore, router: str, background: bool = False, cfg: FitConfig | None = None
    ) -> PredictiveRouter:
        """The router on the routing context of ``core``, fitted on episodes as long as ``core``'s."""
        return cls(core.routing_context, router, background, cfg, core.episode_steps)

    def serves(self, core: EnvCore) -> bool:
        """Whether this router runs on the routing context of ``core`` (else it must be made again)."""
        return self.world is core.routing_context

    def forecast(self, last: LastInterval | None) -> np.ndarray:
        """(batch, links) forecast base utilisation of the next interval; a new ``last`` result moves the
        lags on by one interval (calling again in the same interval gives the same forecast)."""
        w = self.world
        if last is not None and last is not self._seen:
            self.hist = np.roll(self.hist, 1, axis=1)
            self.hist[:, 0] = base_load(w, last, self.background) / nominal_bytes(w)
            self.bg_prev = self._bg_now
            self._seen = last
        fresh = w.state.step_count == 0  # just reset: no interval of this episode yet
        self.hist[fresh] = 0.0
        self.bg_prev[fresh] = 0.0
        self._bg_now = background_offered(w, self.background)
        return self.model.predict(self.hist, self._bg_now, self.bg_prev)

    def __call__(self, last: LastInterval | None) -> np.ndarray:
        """The split (connections, max_paths) of the next interval."""
        w = self.world
        u = self.forecast(last)
        nominal = nominal_bytes(w)
        if self.router == "greedy":
            return greedy(w, last, base=u * nominal, background=self.background)
        return lp(w, last, fixed_rate=u * nominal / w.decision_interval_s, background=self.background)


register_predictive_router(PredictiveRouter)  # the predictive-* entries of routing's POLICIES
