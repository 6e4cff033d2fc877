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

**Weighted plans** (class ``jobs+bg+weights``, :data:`WEIGHTED_CLASS`): ``favour{j}+bg`` (``j`` in 0..7, a job
slot) runs the split of :data:`FAVOUR_BASE` (``burst-lp+bg``) *and* sets the share weights of the interval
(:meth:`ainet_gym.envs.env.EnvCore.set_share_weights`): the flows of job slot ``j`` and of the background at
weight ``w``, every other job's at 1, so the background is never below any job (it keeps its bytes) and the
weights are a share between jobs. ``w`` is :data:`FAVOUR_WEIGHT` (16) unless the name gives it:
``favour{j}-w{W}+bg`` (``W`` a number in [1, 1e6], e.g. ``favour0-w4+bg``; :func:`weighted_plan` parses the
names), and over another split than :data:`FAVOUR_BASE` if the name ends in one of :data:`FAVOUR_BASES`:
``favour{j}[-w{W}]-{base}+bg`` (``favour0-w1e6-lp+bg``: ``lp+bg``'s split with job 0 and the background at
1e6; docs/learning.md, "issue-26zm"). A ``choose_bg`` env with a weighted extra plan is of class ``jobs+bg+weights``
(:func:`plans_of_mode`); each step sets the weights of the plan each instance picked (a plain plan: the
scenario's weights, every job's ``share_weight`` and the background's 1). docs/learning.md, "issue-26zi".

The predict-then-route baselines (:data:`ainet_gym.routing.policies.PREDICTIVE`) are not plans: their
forecast keeps lags of every interval, which a plan computed only in the intervals it is chosen in cannot
keep, and an instance's plan would then depend on what the other instances of its batch chose.

A plan computes its split from the same state and last interval as the baseline run alone does, so an
agent that always picks plan ``k`` reproduces that baseline's rollout exactly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.errors import check_choice
from ainet_gym.routing.isolate import ISOLATE_PLANS
from ainet_gym.routing.lp import burst_lp_all
from ainet_gym.routing.policies import CONTROLS, Policy, get_policy

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = [
    "CHOOSE_MODES",
    "EXTRA_PLANS",
    "FAVOUR_BASE",
    "FAVOUR_BASES",
    "FAVOUR_WEIGHT",
    "PLANS",
    "WEIGHTED_CLASS",
    "WeightedPlan",
    "is_extra_plan",
    "plan_policy",
    "plan_share_weights",
    "plan_split",
    "plan_weight_table",
    "plans_class",
    "plans_of_mode",
    "share_weights_of",
    "weighted_plan",
    "weighted_plan_name",
]

#: controls class -> the plans (engine-level baseline names) of the ``choose`` modes, in action order
PLANS: dict[str, tuple[str, ...]] = {
    "jobs": ("ecmp", "spray", "wcmp", "greedy", "lp"),
    "jobs+bg": ("ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"),
}

#: discrete action mode -> the controls class of its plans
CHOOSE_MODES: dict[str, str] = {"choose": "jobs", "choose_bg": "jobs+bg"}


#: the class of a policy that sets share weights as well as paths (the weighted plans)
WEIGHTED_CLASS = "jobs+bg+weights"
#: the share weight of the favoured job and of the background in ``favour{j}+bg`` (issue-26zg: w = 16 gained
#: most of 2, 4, 16 on both named scenarios); ``favour{j}-w{W}+bg`` gives another
FAVOUR_WEIGHT = 16.0
#: the baseline whose split the weighted plans run (the best ``jobs+bg`` baseline on ``ingest-bursts``, equal
#: to ``solo-lp+bg`` on ``periodic-interference-jitter``; docs/learning.md, issue-26zg)
FAVOUR_BASE = "burst-lp+bg"
#: job slots a weighted plan may favour (as the isolating plans)
FAVOUR_SLOTS = 8
#: the largest weight of a weighted plan (the scenario's ``jobs[].share_weight`` bound)
FAVOUR_WEIGHT_MAX = 1e6
#: the splits a weighted plan may run (``favour{j}[-w{W}]-{base}+bg``; the default :data:`FAVOUR_BASE` unnamed)
FAVOUR_BASES: tuple[str, ...] = ("burst-lp", "lp", "solo-lp", "spray", "wcmp", "greedy")
_FAVOUR = re.compile(r"favour(\d+)(?:-w([^+\-]*))?(?:-(" + "|".join(FAVOUR_BASES) + r"))?\+bg")
_FAVOUR_FORMS = (
    "favour{j}+bg, favour{j}-w{W}+bg or favour{j}[-w{W}]-{base}+bg (j a job slot 0..7, W a number in [1, 1e6], "
    f"default 16, base one of {', '.join(FAVOUR_BASES)}, default burst-lp)"
)


@dataclass(frozen=True)
class WeightedPlan:
    """A weighted plan (``favour{j}[-w{W}][-{base}]+bg``): the split of ``base`` (:data:`FAVOUR_BASE` unless the
    name gives another of :data:`FAVOUR_BASES`), job slot ``slot`` and the background at ``weight``, every
    other job at 1."""

    slot: int
    weight: float
    base: str = FAVOUR_BASE


def weighted_plan(name: str) -> WeightedPlan | None:
    """The weighted plan ``name`` parses to, or None if ``name`` is not spelled ``favour...``.

    Raises
    ------
    ValueError
        If ``name`` begins with ``favour`` but is not ``favour{j}+bg`` / ``favour{j}-w{W}+bg`` with ``j`` in
        0..7 and ``W`` a finite number in [1, 1e6] (one line naming the field, the value and what is allowed).
    """
    if not isinstance(name, str) or not name.startswith("favour"):
        return None
    m = _FAVOUR.fullmatch(name)
    if m is None:
        raise ValueError(f"plan {name!r}: not a weighted plan; allowed: {_FAVOUR_FORMS}")
    slot = int(m.group(1))
    if slot >= FAVOUR_SLOTS:
        raise ValueError(
            f"plan {name!r}: job slot = {slot}: allowed: 0..{FAVOUR_SLOTS - 1} (forms: {_FAVOUR_FORMS})"
        )
    w = FAVOUR_WEIGHT
    if m.group(2) is not None:
        text = m.group(2)
        try:
            w = float(text) if re.fullmatch(r"\d+(?:\.\d*)?(?:e\d+)?", text) else math.nan
        except ValueError:
            w = math.nan
        if not (math.isfinite(w) and 1.0 <= w <= FAVOUR_WEIGHT_MAX):
            raise ValueError(
                f"plan {name!r}: weight = {text!r}: allowed: a number in [1, 1e6] (the share "
                "weight of the favoured job and of the background; other jobs 1), e.g. favour0-w4+bg"
            )
    base = FAVOUR_BASE if m.group(3) is None else f"{m.group(3)}+bg"
    return WeightedPlan(slot, w, base)


def weighted_plan_name(slot: int, weight: float, base: str = FAVOUR_BASE) -> str:
    """The name of the weighted plan of job slot ``slot`` at share weight ``weight`` over the split of ``base``
    (``lp+bg``, ...), spelled so that :func:`weighted_plan` parses it back to the same slot, weight and base:
    ``favour{j}+bg`` at the default weight and base, ``favour{j}-w{W}+bg`` at another weight (``W`` an integer
    when the weight is one, e.g. ``favour0-w1000000+bg`` for 1e6, else the float's shortest repr; a ``%g``
    spelling such as ``1e+06`` would not parse), ``...-{base}+bg`` over another base (``favour0-w4-lp+bg``).

    Raises
    ------
    ValueError
        If ``base`` is not ``{b}+bg`` for a ``b`` of :data:`FAVOUR_BASES`.
    """
    b = base.removesuffix("+bg")
    if not base.endswith("+bg") or b not in FAVOUR_BASES:
        raise ValueError(
            f"base = {base!r}: allowed: one of {', '.join(x + '+bg' for x in FAVOUR_BASES)} (a weighted plan's split)"
        )
    w = float(weight)
    text = "" if w == FAVOUR_WEIGHT else "-w" + (str(int(w)) if w.is_integer() else repr(w))
    on = "" if base == FAVOUR_BASE else f"-{b}"
    return f"favour{slot}{text}{on}+bg"


#: plans a ``choose`` mode may add to its own (``extra_plans``) that are not baselines: name -> (policy, class);
#: the weighted plans ``favour{j}+bg`` at the default weight are here, those with ``-w{W}`` are parsed
#: (:func:`is_extra_plan`)
EXTRA_PLANS: dict[str, tuple[Policy, str]] = {
    **{name: (pol, "jobs+bg") for name, pol in ISOLATE_PLANS.items()},
    **{f"favour{j}+bg": (burst_lp_all, WEIGHTED_CLASS) for j in range(FAVOUR_SLOTS)},
}


def is_extra_plan(name: str) -> bool:
    """Whether ``name`` is an extra plan (:data:`EXTRA_PLANS`, or a weighted plan with its own weight);
    a misspelt weighted plan raises (:func:`weighted_plan`)."""
    return name in EXTRA_PLANS or weighted_plan(name) is not None


def extra_plan_class(name: str) -> str:
    """The class of the extra plan ``name`` (``jobs+bg`` or ``jobs+bg+weights``)."""
    if weighted_plan(name) is not None:
        return WEIGHTED_CLASS
    return EXTRA_PLANS[name][1]


def plans_class(plans: tuple[str, ...] | list[str], cls: str) -> str:
    """The class of a policy that picks among ``plans`` in a mode of class ``cls``: ``jobs+bg+weights`` if
    one of them is a weighted plan, else ``cls``."""
    return WEIGHTED_CLASS if any(weighted_plan(str(p)) is not None for p in plans) else cls


def plan_policy(name: str) -> Policy:
    """The engine-level policy of plan ``name``: an entry of :data:`~ainet_gym.routing.policies.POLICIES` or of
    :data:`EXTRA_PLANS`, or the split of a weighted plan (its base's; the weights are
    :func:`plan_share_weights`').

    Raises
    ------
    ValueError
        If ``name`` is neither.
    """
    if name in EXTRA_PLANS:
        return EXTRA_PLANS[name][0]
    wp = weighted_plan(name)
    if wp is not None:
        return burst_lp_all if wp.base == FAVOUR_BASE else get_policy(wp.base)
    return get_policy(name)


def plan_weight_table(plans: list[str] | tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(slot (K,), weight (K,))`` of each plan name: a weighted plan's favoured job slot and weight, ``-1``
    and 1 for any other plan. Parsed once per list of plans (an env's, at construction), so a step indexes
    the table instead of parsing names.

    Raises
    ------
    ValueError
        If a weighted plan is misspelt (:func:`weighted_plan`).
    """
    slot = np.full(len(plans), -1, dtype=np.int64)
    weight = np.ones(len(plans), dtype=np.float64)
    for k, name in enumerate(plans):
        wp = weighted_plan(str(name))
        if wp is not None:
            slot[k], weight[k] = wp.slot, wp.weight
    return slot, weight


def share_weights_of(
    slot: np.ndarray, weight: np.ndarray, default_jobs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The share weights of the plans of each instance, given by their rows of :func:`plan_weight_table`
    (``slot``, ``weight``: (B,)): ``(jobs (B, slots), background (B,))``. A weighted plan: its slot and the
    background at its weight, the other slots 1; any other plan: ``default_jobs`` (B, slots), the scenario's
    weights, and the background 1."""
    jobs = np.array(default_jobs, dtype=np.float64, copy=True)
    favoured = slot >= 0
    bg = np.where(favoured, weight, 1.0)
    rows = np.flatnonzero(favoured)
    jobs[rows] = 1.0
    fit = rows[slot[rows] < jobs.shape[1]]
    jobs[fit, slot[fit]] = weight[fit]
    return jobs, bg


def plan_share_weights(
    plans: list[str] | tuple[str, ...], slots: int, default_jobs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The share weights of each instance's plan (``plans``: one name per instance, B): ``(jobs (B, slots),
    background (B,))``, as :func:`share_weights_of` (each distinct name parsed once)."""
    names = [str(p) for p in plans]
    distinct = list(dict.fromkeys(names))
    pos = {name: k for k, name in enumerate(distinct)}
    slot, weight = plan_weight_table(distinct)
    idx = np.fromiter((pos[name] for name in names), dtype=np.int64, count=len(names))
    default = np.asarray(default_jobs, dtype=np.float64).reshape(len(names), slots)
    return share_weights_of(slot[idx], weight[idx], default)


def plans_of_mode(mode: str, extra_plans: tuple[str, ...] | list[str] = ()) -> tuple[str, tuple[str, ...]]:
    """(controls class, plans) of a ``choose`` action mode, its own plans followed by ``extra_plans``
    (names of :data:`EXTRA_PLANS` of the mode's class, or weighted plans in ``choose_bg``, distinct); the class
    is ``jobs+bg+weights`` when a weighted plan is among them (:func:`plans_class`).

    Raises
    ------
    ValueError
        If ``mode`` is not a ``choose`` mode, a plan is not a known policy of the mode's class (or
        ``ecmp``), or an extra plan is not one of :data:`EXTRA_PLANS` of the mode's class, or repeated.
    """
    check_choice("action_mode", mode, CHOOSE_MODES, problem="not a choose mode")
    cls = CHOOSE_MODES[mode]
    extra = tuple(extra_plans)
    classes = (cls, WEIGHTED_CLASS) if cls == "jobs+bg" else (cls,)
    ok = [n for n, (_, c) in EXTRA_PLANS.items() if c in classes]
    for name in extra:
        if isinstance(name, str) and cls == "jobs+bg" and weighted_plan(name) is not None:
            continue  # a weighted plan of choose_bg (its weight checked by weighted_plan)
        check_choice(
            f"extra plan of action_mode {mode!r}",
            name,
            ok,
            problem="not an extra plan of its class",
            more=" (or favour{j}-w{W}+bg)" if cls == "jobs+bg" else "",
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
    return plans_class(extra, cls), plans + extra


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
