"""The k-nearest-neighbour imitation fitted to labels: the observation block of every labelled decision,
its label, and for the value vote each plan's lookahead value with the vote's options
(:func:`fit_knn`, :func:`knn_values`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.agents.imitate.features import (
    DEFAULT_PREVIOUS_PLAN_SCALE,
    PREVIOUS_PLAN,
    knn_columns,
    plan_one_hot,
    previous_plans,
    split_previous_plan,
)
from ainet_gym.agents.imitate.knn_file import DEFAULT_FALLBACK, save_knn
from ainet_gym.agents.imitate.label_files import FABRIC_FIELD, check_fabric
from ainet_gym.errors import check_choice

#: neighbours of :class:`KnnAgent` (picked on validation seeds 100-109: docs/learning.md)
DEFAULT_K = 5
#: how :class:`KnnAgent` combines the ``k`` neighbours: ``"label"`` the plan most of them were labelled
#: with; ``"value"`` the plan of the best mean lookahead value over them (``q``), what a cost-sensitive
#: imitation uses: a neighbour where the plans score alike weighs little, one with much at stake much
KNN_VOTES = ("label", "value")


def fit_knn(
    labels: dict[str, Any],
    out: str | Path,
    k: int = DEFAULT_K,
    block: str = "job_phase",
    scenario: Any = None,
    metadata: dict[str, Any] | None = None,
    vote: str = "label",
    value_weight: float | None = None,
    margin: float | None = None,
    fallback: str = DEFAULT_FALLBACK,
    standardize: bool = False,
    vote_plans: list[str] | None = None,
    cooldown: int = 0,
    tail_cap: float | None = None,
    tail_penalty: float = 0.0,
    previous_plan_scale: float | None = None,
) -> Path:
    """Save the k-nearest-neighbour policy of ``labels`` (:func:`lookahead_labels`) to ``out`` (.npz): the
    observation block ``block`` of every labelled decision (a comma list of blocks: their columns joined,
    :func:`knn_columns`; recorded in the file as the field ``block``), its label and ``k``. :class:`KnnAgent` plays
    it: at each decision, the plan most of the ``k`` labelled decisions nearest in that block were given
    (Euclidean distance; ties: the lower plan index). A non-parametric imitation of the lookahead that
    reads only the observation. ``scenario``: the labels' scenario when it is not a shipped one;
    ``metadata``: a JSON object stored as the member :data:`KNN_META` (what ``pretrained`` lists).
    ``vote`` (:data:`KNN_VOTES`): ``"value"`` also stores ``q`` (N, K), each decision's ``scores - w *
    excess`` minus its row maximum, ``w`` = ``value_weight`` (default: the labels' tail weight under the
    ``"tail"`` objective, 0 under ``"util"``), and the agent plays the plan of the best mean ``q`` over the
    ``k`` neighbours (ties: the lower plan index) instead of the majority label. ``margin`` (value vote
    only; fields ``margin`` and ``fallback``): where that best mean value exceeds the mean value of the plan
    ``fallback`` by less than ``margin`` (in the units of ``q``: GPU-seconds of ideal work over the
    lookahead), the agent plays ``fallback``: a switch the neighbours do not clearly favour over it is not
    made. (Against the fallback, not the second-best plan: plans that act alike, e.g. ``spray+bg`` and
    ``wcmp+bg``, tie for first and second, and their difference, 0, says nothing of the switch.)
    ``vote_plans`` (value vote only; field ``vote_plans``): the plans the vote may pick, the best mean value
    among them; the other plans are never played (default: every plan). ``cooldown`` (field ``cooldown``,
    default 0: none): after a step that plays a plan other than the fallback (``fallback`` with a margin, else
    :data:`DEFAULT_FALLBACK`), the agent plays the fallback for ``cooldown`` steps (a stateful agent: two
    switches in a row are not made). ``tail_cap``, ``tail_penalty`` (value vote only; default off): the
    values' absolute tail guard (:func:`knn_values`).
    ``standardize``: divide each column of the blocks by its standard deviation over the labels (1 where it
    is 0), stored as the field ``scale`` (:data:`KNN_OPTIONAL`), so that a column of small spread weighs in
    the distance as much as one of large spread; default off (raw columns, as every file before it).
    ``block`` may name :data:`PREVIOUS_PLAN` beside the observation's blocks: ``x`` then ends with the one-hot of
    the plan played at each decision's previous decision (:func:`previous_plans`) times ``previous_plan_scale``
    (default :data:`DEFAULT_PREVIOUS_PLAN_SCALE`; field ``previous_plan``), never standardised, and the agent
    appends the one-hot of its own previous plan in each episode (zeros at the first decision).

    Raises
    ------
    ValueError
        If ``k < 1``, the labels' env has no observation block ``block`` (or one of its list), ``vote`` is
        not one of :data:`KNN_VOTES`, or the value weight is negative, nan or infinite (the labels' ``inf``
        included: give ``value_weight``), or ``margin`` is given with the label vote, is negative, nan or
        infinite, or ``fallback`` is not one of the labels' plans, or ``vote_plans`` is given with the label
        vote, is empty, repeats a plan or names one that is not a plan of the labels, or ``cooldown`` is not
        an integer >= 0, or ``tail_cap`` or ``tail_penalty`` is given with the label vote or refused by
        :func:`knn_values`, or ``previous_plan_scale`` is given without the block :data:`PREVIOUS_PLAN` or is not
        finite and > 0, or the block is given on labels without ``played``, ``seed`` and ``t``.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k = {k!r}: allowed: an integer >= 1 (neighbours)")
    obs_block, prev_scale = _previous_plan_option(block, previous_plan_scale)
    cols = _knn_block(labels, obs_block, scenario)
    extra = _knn_vote_fields(
        labels, vote, value_weight, margin, fallback, vote_plans, cooldown, tail_cap, tail_penalty
    )
    x = np.asarray(labels["obs"], dtype=np.float32)[:, cols]
    if standardize:
        x, extra["scale"] = _standardized(x)
    if prev_scale is not None:
        onehot = plan_one_hot(previous_plans(labels), len(labels["plans"]), prev_scale)
        x = np.concatenate([x, onehot.astype(np.float32)], axis=1)
        extra["previous_plan"] = np.float64(prev_scale)
        if standardize:  # the one-hot columns keep their scale (divided by 1)
            extra["scale"] = np.concatenate([extra["scale"], np.ones(onehot.shape[1])])
    return save_knn(out, x, labels, k, block, extra, metadata)


def _previous_plan_option(block: str, scale: float | None) -> tuple[str, float | None]:
    """The observation blocks of ``block`` and the scale of its :data:`PREVIOUS_PLAN` one-hot (None without
    the block), checked (:func:`fit_knn`)."""
    obs_block, prev = split_previous_plan(block)
    if not prev:
        if scale is not None:
            raise ValueError(
                f"previous_plan_scale = {scale!r} without the block {PREVIOUS_PLAN!r}: allowed: a scale with "
                f"{PREVIOUS_PLAN!r} in the blocks"
            )
        return obs_block, None
    scale = DEFAULT_PREVIOUS_PLAN_SCALE if scale is None else float(scale)
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"previous_plan_scale = {scale!r}: allowed: a finite number > 0")
    return obs_block, scale


def _knn_block(labels: dict[str, Any], block: str, scenario: Any) -> slice | np.ndarray:
    """The columns of the observation block(s) ``block`` (:func:`knn_columns`) in the env the labels were
    made in (their scenario, or ``scenario``; their action mode, history, steps and observation features).
    Labels with a fabric fingerprint (:data:`FABRIC_FIELD`) must have been made on that scenario's fabric
    (:func:`check_fabric`: a ValueError otherwise, at the fit rather than at the first play)."""
    from ainet_gym.envs.env import EnvCore

    name, mode, feats, history, steps = (str(x) for x in labels["meta"][:5])
    feats_t = tuple(f for f in feats.split(",") if f)
    core = EnvCore(
        name if scenario is None else scenario, action_mode=mode, history=int(history),
        episode_steps=int(steps), obs_features=feats_t,
    )  # fmt: skip
    recorded = str(labels[FABRIC_FIELD]) if FABRIC_FIELD in labels else None
    check_fabric(f"labels of scenario {name!r} fitted on {scenario or name!r}", recorded, core.fabric)
    return knn_columns(core.obs_layout, block)


def _knn_vote_fields(
    labels: dict[str, Any],
    vote: str,
    value_weight: float | None,
    margin: float | None,
    fallback: str,
    vote_plans: list[str] | None,
    cooldown: int,
    tail_cap: float | None,
    tail_penalty: float,
) -> dict[str, np.ndarray]:
    """The optional fields of :func:`fit_knn`'s file for its ``vote`` (:data:`KNN_OPTIONAL`): ``q``
    (:func:`knn_values`) with the value vote, and those of :func:`_vote_options`; refuses a tail cap or
    penalty with the label vote."""
    check_choice("vote", vote, KNN_VOTES)
    if (tail_cap is not None or tail_penalty != 0) and vote != "value":
        raise ValueError(
            f"tail_cap = {tail_cap!r}, tail_penalty = {tail_penalty!r} with vote = {vote!r}: allowed: a tail cap "
            "and penalty with vote = 'value'"
        )
    extra = {} if vote == "label" else {"q": knn_values(labels, value_weight, tail_cap, tail_penalty)}
    extra.update(_vote_options(labels, vote, margin, fallback, vote_plans, cooldown))
    return extra


def _standardized(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` (N, D) divided by each column's standard deviation (1 where it is 0), as float32, and those
    (D,) float64 scales (:func:`fit_knn` ``standardize``)."""
    scale = x.astype(np.float64).std(axis=0)
    scale[~(scale > 0)] = 1.0  # a constant column: left as it is (0 spread, 0 distance)
    return (x / scale).astype(np.float32), scale


def knn_values(
    labels: dict[str, Any],
    weight: float | None = None,
    tail_cap: float | None = None,
    tail_penalty: float = 0.0,
) -> np.ndarray:
    """(N, K) float32 ``scores - weight * excess`` of the labels (:func:`lookahead_labels`), minus each row's
    maximum: every plan's lookahead value relative to the best plan of its decision (<= 0). ``weight``
    default: the labels' tail weight (``meta``) under the ``"tail"`` objective, 0 under ``"util"``.

    ``tail_cap`` (default None: off): also subtract ``tail_penalty`` times how far each plan's worst step
    time / ideal over its lookahead (``tail``) exceeds ``max(tail_cap, the base plan's tail)``: a plan that
    makes a step slower than the cap, and slower than the base plan (``meta``'s base, e.g. ``spray+bg``)
    would, loses value in proportion (an absolute tail guard: the labels' ``tail`` of a plan above the p99
    of the baselines predicts a job-iteration above it; docs/learning.md, issue-26zd).

    Raises
    ------
    ValueError
        If the weight is negative, nan or infinite, or the labels carry no ``scores`` / ``excess``; or
        ``tail_cap`` is not finite and positive, ``tail_penalty`` is negative or not finite, only one of them
        is given (a cap needs a penalty > 0 and a penalty a cap), or the labels carry no ``tail`` or their
        base plan is not one of their plans.
    """
    meta = [str(v) for v in labels["meta"]]
    if weight is None:
        weight = float(meta[9]) if len(meta) > 9 and meta[7] == "tail" else 0.0
    if not np.isfinite(weight) or weight < 0:
        raise ValueError(
            f"value weight = {weight!r}: allowed: a finite number >= 0 (GPU-seconds of ideal work per "
            "GPU-second of excess step time; labels of tail weight inf need an explicit one)"
        )
    if "scores" not in labels or "excess" not in labels:
        raise ValueError("labels: no 'scores' or 'excess' arrays; allowed: labels of lookahead_labels")
    v = np.asarray(labels["scores"], dtype=np.float64) - weight * np.asarray(
        labels["excess"], dtype=np.float64
    )
    if (tail_cap is None) != (tail_penalty == 0):  # one without the other would do nothing, silently
        raise ValueError(
            f"tail_cap = {tail_cap!r}, tail_penalty = {tail_penalty!r}: allowed: both (a cap and a penalty "
            "> 0) or neither"
        )
    if tail_cap is not None:
        v = v - tail_penalty * _tail_over_cap(labels, meta, tail_cap, tail_penalty)
    return (v - v.max(axis=1, keepdims=True)).astype(np.float32)


def _tail_over_cap(labels: dict[str, Any], meta: list[str], cap: float, penalty: float) -> np.ndarray:
    """(N, K) how far each plan's lookahead ``tail`` exceeds ``max(cap, the base plan's tail)`` (>= 0), for
    :func:`knn_values`' ``tail_cap``, after checking the cap, the penalty and the labels."""
    if not np.isfinite(cap) or cap <= 0:
        raise ValueError(f"tail_cap = {cap!r}: allowed: a finite number > 0 (a step time / ideal)")
    if not np.isfinite(penalty) or penalty < 0:
        raise ValueError(
            f"tail_penalty = {penalty!r}: allowed: a finite number >= 0 (value per unit of ratio)"
        )
    plans = [str(p) for p in labels["plans"]]
    if "tail" not in labels or meta[5] not in plans:
        raise ValueError(
            "labels: no 'tail' array or their base plan is not one of their plans; allowed with tail_cap: "
            "labels of lookahead_labels whose base is a plan of the mode"
        )
    tail = np.asarray(labels["tail"], dtype=np.float64)
    ref = np.maximum(cap, tail[:, plans.index(meta[5])])[:, None]
    return np.maximum(tail - ref, 0.0)


def _vote_options(
    labels: Any,
    vote: str,
    margin: float | None,
    fallback: str,
    vote_plans: list[str] | None,
    cooldown: int,
) -> dict[str, np.ndarray]:
    """The optional fields :func:`fit_knn` writes for its ``margin``, ``vote_plans`` and ``cooldown``
    (:data:`KNN_OPTIONAL`), each checked against the labels' plans and the vote."""
    plans = [str(v) for v in labels["plans"]]
    extra: dict[str, np.ndarray] = {}
    if margin is not None:
        if vote != "value":
            raise ValueError(
                f"margin = {margin!r} with vote = {vote!r}: allowed: a margin with vote = 'value'"
            )
        if not np.isfinite(margin) or margin < 0:
            raise ValueError(f"margin = {margin!r}: allowed: a finite number >= 0 (a difference of values q)")
        check_choice("fallback", fallback, plans, problem="not a plan of the labels")
        extra.update(margin=np.float64(margin), fallback=np.array(fallback))
    if vote_plans is not None:
        if vote != "value":
            raise ValueError(
                f"vote_plans = {vote_plans!r} with vote = {vote!r}: allowed: vote plans with vote = 'value'"
            )
        if not vote_plans or len(set(vote_plans)) != len(vote_plans):
            raise ValueError(f"vote_plans = {vote_plans!r}: allowed: one or more distinct plans of {plans}")
        for v in vote_plans:
            check_choice("vote_plans", v, plans, problem="not a plan of the labels")
        extra["vote_plans"] = np.array([v for v in plans if v in vote_plans])
    if not isinstance(cooldown, int) or isinstance(cooldown, bool) or cooldown < 0:
        raise ValueError(f"cooldown = {cooldown!r}: allowed: an integer >= 0 (steps)")
    if cooldown:
        cd_plan = fallback if margin is not None else DEFAULT_FALLBACK
        check_choice("cooldown plan", cd_plan, plans, problem="not a plan of the labels")
        extra["cooldown"] = np.int64(cooldown)
    return extra
