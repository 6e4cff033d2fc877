"""Routing plans: the engine-level baselines an agent picks from in the discrete ``choose`` modes.

Each plan is an engine-level policy of :data:`ainet_gym.routing.policies.POLICIES`; the plans of a mode
are the baselines of one ``controls`` class (:data:`~ainet_gym.routing.policies.CONTROLS`), with static
ECMP first (the routing every class can fall back to), in a fixed, documented order: action ``k`` of the
``Discrete(K)`` action space runs plan ``PLANS[class][k]`` for the whole interval.

- ``choose`` (class ``jobs``: the jobs' connections, background on static ECMP): ``ecmp``, ``spray``,
  ``wcmp``, ``greedy``, ``lp``;
- ``choose_bg`` (class ``jobs+bg``: every connection, background included): ``ecmp``, ``spray+bg``,
  ``wcmp+bg``, ``greedy+bg``, ``lp+bg``, ``solo-lp+bg``.

The predict-then-route baselines (:data:`ainet_gym.routing.policies.PREDICTIVE`) are not plans: their
forecast keeps lags of every interval, which a plan computed only in the intervals it is chosen in cannot
keep, and an instance's plan would then depend on what the other instances of its batch chose.

A plan computes its split from the same state and last interval as the baseline run alone does, so an
agent that always picks plan ``k`` reproduces that baseline's rollout exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.errors import check_choice
from ainet_gym.routing.policies import CONTROLS, get_policy

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = ["CHOOSE_MODES", "PLANS", "plan_split", "plans_of_mode"]

#: controls class -> the plans (engine-level baseline names) of the ``choose`` modes, in action order
PLANS: dict[str, tuple[str, ...]] = {
    "jobs": ("ecmp", "spray", "wcmp", "greedy", "lp"),
    "jobs+bg": ("ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"),
}

#: discrete action mode -> the controls class of its plans
CHOOSE_MODES: dict[str, str] = {"choose": "jobs", "choose_bg": "jobs+bg"}


def plans_of_mode(mode: str) -> tuple[str, tuple[str, ...]]:
    """(controls class, plans) of a ``choose`` action mode.

    Raises
    ------
    ValueError
        If ``mode`` is not a ``choose`` mode, or a plan is not a known policy of the mode's class (or
        ``ecmp``).
    """
    check_choice("action_mode", mode, CHOOSE_MODES, problem="not a choose mode")
    cls = CHOOSE_MODES[mode]
    plans = PLANS[cls]
    for name in plans:
        get_policy(name)  # raises naming the policy and the known ones
        if CONTROLS[name] not in ("none", cls):
            raise ValueError(
                f"plan {name!r} of action_mode {mode!r} controls {CONTROLS[name]!r}; "
                f"its plans must control {cls!r} (or nothing: ecmp)"
            )
    return cls, plans


def plan_split(
    world: RoutingContext, last: LastInterval | None, choice: np.ndarray, plans: tuple[str, ...]
) -> np.ndarray:
    """The split (connections, max_paths) in which each instance ``b`` of the batch follows plan
    ``plans[choice[b]]``: every distinct chosen plan is computed once over the batch, and each
    instance's connections take the rows of the plan it chose.

    ``choice`` (batch,) int, each in ``0..len(plans) - 1`` (checked by the env).
    """
    sim = world.sim
    assert sim is not None
    choice = np.asarray(choice, dtype=np.int64).reshape(-1)
    inst = sim.unit_inst[sim.conn_unit]  # (connections,) instance of each connection
    chosen = choice[inst]  # (connections,) the plan of each connection's instance
    kinds = np.unique(choice)
    if kinds.size == 1:
        return np.asarray(get_policy(plans[int(kinds[0])])(world, last), dtype=np.float64)
    split = np.empty((sim.n_conns, world.max_paths))
    for k in kinds:
        rows = chosen == k
        split[rows] = get_policy(plans[int(k)])(world, last)[rows]
    return split
