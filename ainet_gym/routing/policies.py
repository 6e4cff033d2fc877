"""Routing policies at the engine level: each maps the world's state to a split of every connection.

A policy is a callable ``policy(world, last) -> split`` where ``world`` is a
:class:`~ainet_gym.routing.context.RoutingContext` (what routing reads of a
:class:`~ainet_gym.sim.world.FabricWorld`; an env's is ``core.routing_context``), ``last`` the previous
interval's result as a :class:`~ainet_gym.routing.context.LastInterval` (None on the first) and ``split`` a
``(connections, max_paths)`` array. They serve
:func:`ainet_gym.simulate` and, through the env's action space, the baseline agents.

- ``ecmp``: static hashing of each connection (per QP) onto one candidate path.
- ``spray``: even split of every *job* connection over its live candidate paths (packet spraying;
  paths through a failed link are dropped, as a switch drops a dead next hop); background stays on
  static ECMP, like every other policy that routes the jobs' connections.
- ``wcmp``: weights at each switch's equal-cost next hops proportional to the link's current capacity
  (a half-rate link gets half the traffic), applied to the jobs' connections; background on ECMP.
- ``spray+bg``, ``wcmp+bg``: the same applied to *all* traffic, background included (what a switch
  that sprays or weights every packet does). They control more traffic than ``greedy``, ``lp`` or an
  agent in the ``split``/``path`` modes can, so compare them with agents in the ``ecmp_weights`` mode.
- ``greedy``: reactive: connections placed one by one (largest first) on the candidate path with the
  lowest peak utilisation, given the load measured in the *last* interval that they did not cause.
- ``lp``: minimise the maximum offered link utilisation of the interval's known demand over the
  candidate paths (a linear program solved by HiGHS through :func:`scipy.optimize.linprog`).
- ``greedy+bg``, ``lp+bg``: the same algorithms over *every* multi-path connection, background
  included (class ``jobs+bg``: the traffic an agent in the ``ecmp_weights`` or ``split_bg`` mode
  routes). ``lp+bg`` is never worse than ``lp`` in the LP's own objective (its feasible set contains
  ``lp``'s routing).
- ``solo-lp+bg``: the background sprayed, each job routed by the min-max LP as if it communicated
  alone (:func:`solo_lp_all`); class ``jobs+bg``.
- ``burst-lp+bg`` (:func:`burst_lp_all`, a baseline of ``ainet_gym.agents.baselines`` that switches
  between two entries of :data:`POLICIES`, not an entry itself): ``solo-lp+bg`` in an interval for which a
  background source is scheduled on (:func:`background_active`), ``lp+bg`` otherwise.
- ``isolate0+bg`` ... ``isolate7+bg`` (:func:`isolate_slot_all`, :data:`ISOLATE_PLANS`; plans a ``choose`` mode may
  add with ``extra_plans``, not entries of :data:`POLICIES` nor baselines): the job of one job slot confined
  to one path, everything else sprayed over the other paths, for one interval at a time.
- ``predictive-greedy``, ``predictive-lp`` and their ``+bg`` versions: the greedy placement and the LP
  on a least-squares forecast of the next interval's load of the traffic they do not route (see
  ``ainet_gym.agents.predictive``; the model is fitted once per scenario on training seeds, when first
  called). They keep the forecast's lags per world, so call them once per interval.

:data:`CONTROLS` gives the class of each; :func:`controlled_connections` the connections a class routes.

The registry (:data:`POLICIES`, :data:`CONTROLS`, :func:`get_policy`) is this module; the policies live in
modules of one concern, whose public names it re-exports (the same objects): :mod:`ainet_gym.routing.loads`
(demands and offered loads), :mod:`ainet_gym.routing.oblivious` (``ecmp``, ``spray``, ``wcmp``),
:mod:`ainet_gym.routing.greedy`, :mod:`ainet_gym.routing.lp` (``lp``, ``solo-lp+bg``, ``burst-lp+bg``),
:mod:`ainet_gym.routing.isolate` and :mod:`ainet_gym.routing.predictive_policy`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.errors import choice_message
from ainet_gym.routing.greedy import PLACE_TIE_RTOL, greedy, greedy_all, place_least_loaded
from ainet_gym.routing.isolate import ISOLATE_PLANS, isolate_slot_all
from ainet_gym.routing.loads import (
    base_load,
    connection_demand,
    controlled_connections,
    offered_load,
    offered_utilization,
)
from ainet_gym.routing.loads import (
    connection_peak_rate as connection_peak_rate,
)
from ainet_gym.routing.lp import (
    background_active,
    burst_lp_all,
    lp,
    lp_all,
    min_max_split,
    solo_lp_all,
)
from ainet_gym.routing.oblivious import avoid_dead_paths, ecmp, spray, spray_all, wcmp, wcmp_all
from ainet_gym.routing.predictive_policy import (
    PredictivePolicy,
    predictive_router_factory,
    register_predictive_router,
)
from ainet_gym.routing.predictive_policy import (
    PredictiveRouterFactory as PredictiveRouterFactory,
)

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = [
    "CONTROLS",
    "ISOLATE_PLANS",
    "PLACE_TIE_RTOL",
    "POLICIES",
    "PREDICTIVE",
    "avoid_dead_paths",
    "background_active",
    "base_load",
    "burst_lp_all",
    "connection_demand",
    "controlled_connections",
    "get_policy",
    "isolate_slot_all",
    "min_max_split",
    "offered_load",
    "offered_utilization",
    "place_least_loaded",
    "predictive_router_factory",
    "register_predictive_router",
    "solo_lp_all",
]

Policy = Callable[["RoutingContext", "LastInterval | None"], np.ndarray]


POLICIES: dict[str, Policy] = {
    "ecmp": ecmp,
    "spray": spray,
    "wcmp": wcmp,
    "greedy": greedy,
    "lp": lp,
    "spray+bg": spray_all,
    "wcmp+bg": wcmp_all,
    "greedy+bg": greedy_all,
    "lp+bg": lp_all,
    "solo-lp+bg": solo_lp_all,
    "predictive-greedy": PredictivePolicy("greedy", False),
    "predictive-lp": PredictivePolicy("lp", False),
    "predictive-greedy+bg": PredictivePolicy("greedy", True),
    "predictive-lp+bg": PredictivePolicy("lp", True),
}


#: The predict-then-route entries of :data:`POLICIES` (stateful: see :class:`PredictivePolicy`).
PREDICTIVE: tuple[str, ...] = tuple(k for k, v in POLICIES.items() if isinstance(v, PredictivePolicy))


#: The traffic each policy routes: ``"none"`` (static hashing of everything), ``"jobs"`` (the jobs'
#: connections, background on static ECMP: what ``greedy``, ``lp`` and agents in the ``split`` and
#: ``path`` action modes can control) or ``"jobs+bg"`` (background too: the ``ecmp_weights`` and
#: ``split_bg`` modes). A ``+bg`` suffix names the ``jobs+bg`` version of a router.
CONTROLS: dict[str, str] = {
    name: ("none" if name == "ecmp" else "jobs+bg" if name.endswith("+bg") else "jobs") for name in POLICIES
}


def get_policy(name: str) -> Policy:
    """The engine-level policy ``name``.

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`POLICIES`.
    """
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(choice_message("policy", name, POLICIES)) from None
