"""What a model that picks plans (``knn:PATH``, ``qnet:PATH``) reads of the env: the columns of its
observation blocks (:func:`knn_columns`), the env it was made in (:func:`check_plan_model`,
:func:`extra_plans_of`), and the :data:`PREVIOUS_PLAN` pseudo-block, the one-hot of the plan played at
the previous decision (:func:`previous_plans`, :func:`plan_one_hot`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: the pseudo-block of :func:`fit_knn`'s ``block`` list that is not in the observation: the plan played at the
#: previous decision of the episode, one-hot over the plans (all zeros at the first decision) times a scale,
#: appended after the observation's columns whatever its place in the list; from the labels' ``played`` field
#: (the teacher's plan on its own episodes, the player's in DAgger rounds), tracked by :class:`KnnAgent` itself
#: when it plays (docs/learning.md, issue-26zp)
PREVIOUS_PLAN = "previous_plan"
#: the scale of the :data:`PREVIOUS_PLAN` one-hot by default: two different previous plans are sqrt(2) apart,
#: more than any two decisions over IB's job_phase, background and episode_progress blocks differ in their
#: other columns at the 15th neighbour (squared distance about 0.04), so the neighbours share the previous plan
#: where enough labels do
DEFAULT_PREVIOUS_PLAN_SCALE = 1.0


def knn_columns(layout: dict[str, slice], block: str) -> slice | np.ndarray:
    """The observation columns of ``block`` in ``layout`` (an env's ``obs_layout``): a block name, or a
    comma list of names whose columns are joined in that order (e.g. ``"job_phase,background"``); one
    name gives its slice, as before.

    Raises
    ------
    ValueError
        If a name is not a block of ``layout`` or the list is empty or repeats a name.
    """
    names = [b for b in str(block).split(",") if b]
    bad = [b for b in names if b not in layout]
    if not names or bad or len(set(names)) != len(names):
        raise ValueError(
            f"block = {block!r}: allowed: one or more distinct blocks of the observation, comma separated "
            f"({', '.join(layout)})"
        )
    if len(names) == 1:
        return layout[names[0]]
    return np.concatenate([np.arange(layout[b].start, layout[b].stop) for b in names])


def _width(cols: slice | np.ndarray) -> int:
    return cols.stop - cols.start if isinstance(cols, slice) else len(cols)


def check_plan_model(
    core: Any, label: str, made: str, scenario: str, plans: list[str], block: str, field: str, x: np.ndarray
) -> None:
    """What a model file that picks plans (``knn:PATH``, ``qnet:PATH``) checks of the env it plays: the
    ``scenario`` it was ``made`` on (``labelled``, ``fitted``), its ``plans``, and its observation ``block``
    with as many columns as the file's ``field`` (the array ``x``, one column a feature).

    Raises
    ------
    ValueError
        Starting with ``label`` and naming what differs.
    """
    if core.scenario.name != scenario:
        raise ValueError(f"{label}: {made} on scenario {scenario!r}, evaluated on {core.scenario.name!r}")
    if list(core.plans) != plans:
        raise ValueError(f"{label}: the env has other plans than {plans}")
    try:
        width = _width(knn_columns(core.obs_layout, block))
    except ValueError:
        raise ValueError(f"{label}: the env has no block {block!r}") from None
    if x.shape[-1] != width:
        raise ValueError(
            f"{label}: field {field!r} has {x.shape[-1]} columns; the env's block {block!r} has {width}"
        )


def split_previous_plan(block: str) -> tuple[str, bool]:
    """``block`` (a comma list, :func:`fit_knn`) without :data:`PREVIOUS_PLAN`, and whether it named it.

    Raises
    ------
    ValueError
        If it names :data:`PREVIOUS_PLAN` more than once, or nothing else (the distance needs an observation
        block).
    """
    names = [b for b in str(block).split(",") if b]
    rest = [b for b in names if b != PREVIOUS_PLAN]
    if len(names) - len(rest) > 1 or (len(rest) < len(names) and not rest):
        raise ValueError(
            f"block = {block!r}: allowed: {PREVIOUS_PLAN!r} once, beside one or more blocks of the observation"
        )
    return ",".join(rest), len(rest) < len(names)


def previous_plans(labels: dict[str, Any]) -> np.ndarray:
    """(N,) int64 the plan played at each labelled decision's previous decision of the same episode (the
    ``played`` field one row earlier, where ``seed`` is the same and ``t`` one less), -1 at an episode's first
    decision (the :data:`PREVIOUS_PLAN` block of :func:`fit_knn`).

    Raises
    ------
    ValueError
        If the labels carry no ``played``, ``seed`` or ``t`` (labels of :func:`lookahead_labels` do).
    """
    missing = [f for f in ("played", "seed", "t") if f not in labels]
    if missing:
        raise ValueError(
            f"labels: no {', '.join(missing)}; allowed with the block {PREVIOUS_PLAN!r}: labels of "
            "lookahead_labels (they record the plan played at each decision)"
        )
    played = np.asarray(labels["played"], dtype=np.int64)
    seed, t = np.asarray(labels["seed"]), np.asarray(labels["t"])
    prev = np.full(played.shape[0], -1, dtype=np.int64)
    same = (seed[1:] == seed[:-1]) & (t[1:] == t[:-1] + 1)
    prev[1:] = np.where(same, played[:-1], -1)
    return prev


def plan_one_hot(plan: np.ndarray, plans: int, scale: float) -> np.ndarray:
    """(N, plans) float64: ``scale`` in the column of each row's ``plan``, zeros elsewhere and on rows whose plan
    is -1 (no previous decision)."""
    plan = np.asarray(plan, dtype=np.int64)
    out = np.zeros((plan.shape[0], plans))
    rows = np.flatnonzero(plan >= 0)
    out[rows, plan[rows]] = scale
    return out


def extra_plans_of(action_mode: str, plans: list[str]) -> tuple[str, ...]:
    """The extra plans (:data:`ainet_gym.routing.plans.EXTRA_PLANS`, the weighted plans) a model file's ``plans`` add to those of
    ``action_mode``: ``plans`` past the mode's own when they begin with them and the rest are extra plans,
    else ``()`` (the env's plans are then checked against the file's, :func:`check_plan_model`)."""
    from ainet_gym.routing.plans import CHOOSE_MODES, PLANS, is_extra_plan

    if action_mode not in CHOOSE_MODES:
        return ()
    own = list(PLANS[CHOOSE_MODES[action_mode]])
    rest = [str(p) for p in plans[len(own) :]]

    def extra(p: str) -> bool:
        try:
            return is_extra_plan(p)
        except ValueError:  # a misspelt weighted plan: not an extra plan (check_plan_model names it)
            return False

    if list(plans[: len(own)]) != own or not all(extra(p) for p in rest):
        return ()
    return tuple(rest)
