"""Routing plans: the engine-level baselines an agent picks from in the discrete ``choose`` modes.

Each plan is an engine-level policy of :data:`ainet_gym.routing.policies.POLICIES`; the plans of a mode
are the baselines of one ``controls`` class (:data:`~ainet_gym.routing.policies.CONTROLS`), with static
ECMP first (the routing every class can fall back to), in a fixed, documented order: action ``k`` of the
``Discrete(K)`` action space runs plan ``PLANS[class][k]`` for the whole interval.

- ``choose`` (class ``jobs``: the jobs' connections, background on static ECMP): ``ecmp``, ``spray``,
  ``wcmp``, ``greedy``, ``lp``;
- ``choose_bg`` (class ``jobs+bg``: every connection, background included): ``ecmp``, ``spray+bg``,
  ``wcmp+bg``, ``greedy+bg``, ``lp+bg``, ``solo-lp+bg``.

A mode's plans can be extended (``EnvCore(..., extra_plans=...)``, ``imitate label --extra-plans``) by
plans of its class that are not baselines (:data:`EXTRA_PLANS`): the isolating plans ``isolate0+bg`` ...
``isolate7+bg`` of ``choose_bg`` (:func:`ainet_gym.routing.policies.isolate_slot_all`), appended after the
mode's own plans, in the order given.

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
from ainet_gym.routing.policies import CONTROLS, ISOLATE_PLANS, Policy, get_policy

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = ["CHOOSE_MODES", "EXTRA_PLANS", "PLANS", "plan_policy", "plan_split", "plans_of_mode"]

#: controls class -> the plans (engine-level baseline names) of the ``choose`` modes, in action order
PLANS: dict[str, tuple[str, ...]] = {
    "jobs": ("ecmp", "spray", "wcmp", "greedy", "lp"),
    "jobs+bg": ("ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"),
}

#: discrete action mode -> the controls class of its plans
CHOOSE_MODES: dict[str, str] = {"choose": "jobs", "choose_bg": "jobs+bg"}


#: plans a ``choose`` mode may add to its own (``extra_plans``) that are not baselines: name -> (policy, class)
EXTRA_PLANS: dict[str, tuple[Policy, str]] = {name: (pol, "jobs+bg") for name, pol in ISOLATE_PLANS.items()}


def plan_policy(name: str) -> Policy:
    """The engine-level policy of plan ``name``: an entry of :data:`~ainet_gym.routing.policies.POLICIES` or of
    :data:`EXTRA_PLANS`.

    Raises
    ------
    ValueError
        If ``name`` is neither.
    """
    if name in EXTRA_PLANS:
        return EXTRA_PLANS[name][0]
    return get_policy(name)


def plans_of_mode(mode: str, extra_plans: tuple[str, ...] | list[str] = ()) -> tuple[str, tuple[str, ...]]:
    """(controls class, plans) of a ``choose`` action mode, its own plans followed by ``extra_plans``
    (names of :data:`EXTRA_PLANS` of the mode's class, distinct).

    Raises
    ------
    ValueError
        If ``mode`` is not a ``choose`` mode, a plan is not a known policy of the mode's class (or
        ``ecmp``), or an extra plan is not one of :data:`EXTRA_PLANS` of the mode's class, or repeated.
    """
    check_choice("action_mode", mode, CHOOSE_MODES, problem="not a choose mode")
    cls = CHOOSE_MODES[mode]
    extra = tuple(extra_plans)
    ok = [n for n, (_, c) in EXTRA_PLANS.items() if c == cls]
    for name in extra:
        check_choice(
            f"extra plan of action_mode {mode!r}", name, ok, problem="not an extra plan of its class"
        )
    if len(set(extra)) != len(extra):
        raise ValueError(f"extra_plans = {list(extra)!r}: allowed: distinct plans")
    plans = PLANS[cls]
    for name in plans:
        get_policy(name)  # raises naming the policy and the known ones
        if CONTROLS[name] not in ("none", cls):
            raise ValueError(
                f"plan {name!r} of action_mode {mode!r} controls {CONTROLS[name]!r}; "
                f"its plans must control {cls!r} (or nothing: ecmp)"
            )
    return cls, plans + extra


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
        return np.asarray(plan_policy(plans[int(kinds[0])])(world, last), dtype=np.float64)
    split = np.empty((sim.n_conns, world.max_paths))
    for k in kinds:
        rows = chosen == k
        split[rows] = plan_policy(plans[int(k)])(world, last)[rows]
    return split
