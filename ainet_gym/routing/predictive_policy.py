"""The predict-then-route policies (``predictive-greedy``, ``predictive-lp`` and their ``+bg`` versions,
:class:`PredictivePolicy`) and the hook through which they reach their router: the router fits its forecaster
on simulated episodes, so it lives with the agents (``ainet_gym.agents.predictive``), which registers it here
(:func:`register_predictive_router`); routing never imports up."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = [
    "PredictivePolicy",
    "PredictiveRouterFactory",
    "predictive_router_factory",
    "register_predictive_router",
]


#: A predict-then-route router's factory: ``factory(world, router, background)`` -> a callable ``last -> split``
#: for that world (``router`` ``greedy`` or ``lp``; ``background``: the ``+bg`` version).
PredictiveRouterFactory = Callable[
    ["RoutingContext", str, bool], Callable[["LastInterval | None"], np.ndarray]
]


_PREDICTIVE_ROUTER: list[PredictiveRouterFactory] = []


def register_predictive_router(factory: PredictiveRouterFactory) -> None:
    """Make ``factory`` the one the ``predictive-*`` entries of :data:`POLICIES` call.

    The predictive router fits its forecaster on simulated episodes of the scenario, so it lives with the
    agents (:class:`ainet_gym.agents.predictive_router.PredictiveRouter`), after routing in the pipeline; that
    module registers it here when imported (importing ``ainet_gym`` registers a stand-in that imports it on
    first use), so routing never imports up."""
    _PREDICTIVE_ROUTER[:] = [factory]


def predictive_router_factory() -> PredictiveRouterFactory:
    """The registered predict-then-route router factory.

    Raises
    ------
    RuntimeError
        If none is registered (neither ``ainet_gym`` nor ``ainet_gym.agents.predictive`` was imported;
        ``import ainet_gym`` registers a stand-in that imports the router on first use).
    """
    if not _PREDICTIVE_ROUTER:
        raise RuntimeError(
            "the predictive-* policies need the predictive router of ainet_gym.agents.predictive_router, which "
            "registers it when imported: import ainet_gym (or ainet_gym.agents.predictive) first"
        )
    return _PREDICTIVE_ROUTER[0]


class PredictivePolicy:
    """An engine-level predict-then-route policy (``predictive-greedy``, ``predictive-lp`` and their
    ``+bg`` versions): the registered router (:func:`register_predictive_router`,
    :class:`ainet_gym.agents.predictive_router.PredictiveRouter`) per world, made (and its forecaster fitted, once
    per process and scenario) on the first call with that world.

    Each call with a new ``last`` result pushes that interval's base load into the forecaster's lags,
    so call it once per interval (as :func:`ainet_gym.simulate` and the evaluator do); instances whose
    step count is 0 (just reset) start from empty lags.
    """

    def __init__(self, router: str, background: bool) -> None:
        self.router = router
        self.background = background
        self._routers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __call__(self, world: RoutingContext, last: LastInterval | None) -> np.ndarray:
        r = self._routers.get(world)
        if r is None:
            r = predictive_router_factory()(world, self.router, self.background)
            self._routers[world] = r
        return r(last)
