"""The knn policy file (.npz): its fields (:data:`KNN_FIELDS`, :data:`KNN_OPTIONAL`, :data:`KNN_META`),
written by :func:`save_knn` and read back checked, without pickle (:func:`load_knn`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.agents.imitate.features import split_previous_plan
from ainet_gym.agents.imitate.labels import DEFAULT_BASE
from ainet_gym.errors import check_choice

#: the arrays of a knn policy file (:func:`fit_knn`): name -> (dimensions, dtype kinds allowed)
KNN_FIELDS: dict[str, tuple[int, str]] = {
    "x": (2, "f"),  # (N, D) the observation block of every labelled decision
    "y": (1, "iu"),  # (N,) its label (plan index)
    "k": (0, "iu"),  # neighbours
    "block": (0, "U"),  # the observation block x is taken from
    "meta": (1, "U"),  # scenario, action mode, obs features, history, steps, base, h (lookahead_labels)
    "plans": (1, "U"),  # the plans of the action mode, in index order
}
#: the optional arrays of a knn policy file: ``q`` (N, K), with ``vote="value"`` (:func:`fit_knn`), each labelled
#: decision's lookahead value of every plan minus that of its best plan (<= 0)
#: ``margin`` and ``fallback`` (:func:`fit_knn` ``margin=``): the value vote plays the plan ``fallback`` (a plan
#: of the file) when the best mean neighbour value exceeds the fallback's own by less than ``margin`` (>= 0)
#: ``vote_plans`` (:func:`fit_knn` ``vote_plans=``): the plans the value vote may pick (a subset of ``plans``, in
#: plan order); the others are never played (a plan whose switches make the slow steps can be left out)
#: ``cooldown`` (:func:`fit_knn` ``cooldown=``): after a step that plays a plan other than the fallback (the
#: ``fallback`` field, else :data:`DEFAULT_FALLBACK`), the agent plays the fallback for this many steps
#: ``scale`` (D,) (:func:`fit_knn` ``standardize=True``): each column's standard deviation over the labels (1
#: where it is 0); ``x`` holds the observations divided by it and the agent divides its own the same way, so the
#: distance weighs every column alike. A file without it (the default, every older file) reads raw columns
#: ``previous_plan`` (:func:`fit_knn` with the block :data:`PREVIOUS_PLAN`): the scale of the one-hot of the plan
#: played at the previous decision, the last ``len(plans)`` columns of ``x`` (its ``scale`` entries are 1); a file
#: without it (every older file) reads the observation only
#: ``fabric`` (issue-26zf2): the fingerprint of the fabric the labels were made on (the labels' own field,
#: :data:`~ainet_gym.agents.imitate.label_files.FABRIC_FIELD`); ``knn:PATH`` and DAgger's ``--policy`` refuse to
#: play it on a scenario of another fabric. A file without it (every older file, or one fitted on labels of
#: which one had none) is played on any fabric, unchecked
KNN_OPTIONAL: dict[str, tuple[int, str]] = {
    "q": (2, "f"),
    "margin": (0, "f"),
    "fallback": (0, "U"),
    "vote_plans": (1, "U"),
    "cooldown": (0, "iu"),
    "scale": (1, "f"),
    "previous_plan": (0, "f"),
    "fabric": (0, "U"),
}
#: the plan a value vote with a margin falls back to unless told otherwise: the lookahead's default base plan
#: (:data:`DEFAULT_BASE`)
DEFAULT_FALLBACK = DEFAULT_BASE
#: the optional member of a knn policy file with its metadata record (a JSON object, as the shipped zips'
#: ``ainet_gym.json``): algorithm, class, training seed, the commands that labelled and fitted it
KNN_META = "ainet_gym.json"


def save_knn(
    out: str | Path,
    x: np.ndarray,
    labels: dict[str, Any],
    k: int,
    block: str,
    extra: dict[str, np.ndarray],
    metadata: dict[str, Any] | None,
) -> Path:
    """Write :func:`fit_knn`'s file (:data:`KNN_FIELDS`, the labels' ``fabric`` if they have one, the optional
    ``extra`` and the :data:`KNN_META` member) to ``out``; returns its path (``.npz`` appended unless there,
    as ``np.savez`` does)."""
    p = Path(out)
    np.savez_compressed(
        p,
        x=x,
        y=np.asarray(labels["label"], dtype=np.int64),
        k=np.int64(k),
        block=np.array(block),
        meta=labels["meta"],
        plans=labels["plans"],
        seeds=np.unique(labels["seed"]),
        **({"fabric": np.array(str(labels["fabric"]))} if "fabric" in labels else {}),
        **extra,
        **({} if metadata is None else {KNN_META: np.array(json.dumps(metadata, indent=1))}),
    )
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")


def load_knn(path: str | Path) -> dict[str, Any]:
    """The arrays of a knn policy file (:func:`fit_knn`), checked, and its metadata record: ``x`` (N, D)
    float64, ``y`` (N,) int64, ``k``, ``block``, ``meta`` and ``plans`` (lists of str), ``metadata`` (the
    :data:`KNN_META` object, ``{}`` without one), ``fabric`` (the fabric fingerprint, None without one) and the
    other optional fields (None or their defaults without them).

    Nothing in the file runs: arrays are read with ``np.load(allow_pickle=False)`` (an object array is
    refused), sizes are bounded before anything is decompressed
    (:data:`~ainet_gym.agents.model_files.MODEL_LIMITS`), and every field is checked for its dimensions,
    dtype and range.

    Raises
    ------
    ModelNotFoundError
        If ``path`` does not exist.
    ModelFileError
        Naming the file, the field, what it holds and what is allowed: not an .npz archive, too large, an
        object (pickled) array, a missing field, a wrong shape or dtype, a label outside the plans, non-finite
        observations, ``k < 1``, a ``meta`` without its history and steps, or a metadata member that is not a
        JSON object.
    """
    from ainet_gym.agents.model_files import check_size, existing, json_member

    what = f"knn policy {str(path)!r}"
    p = existing(path, what)
    check_size(p, what)
    arrays, extra = _read_knn_members(p, what)
    x, y, k, plans, meta = _checked_knn_arrays(arrays, what)
    q = _checked_knn_values(arrays.get("q"), x.shape[0], len(plans), what)
    margin, fallback = _checked_knn_margin(arrays, q, plans, what)
    allowed = _checked_knn_vote_plans(arrays.get("vote_plans"), q, plans, what)
    cooldown = _checked_knn_cooldown(arrays.get("cooldown"), plans, fallback, what)
    scale = _checked_knn_scale(arrays.get("scale"), x.shape[1], what)
    prev = _checked_knn_previous_plan(arrays, x.shape[1], len(plans), what)
    fabric = _checked_knn_fabric(arrays.get("fabric"), what)
    return {
        "x": x.astype(np.float64),
        "y": y.astype(np.int64),
        "k": k,
        "block": str(arrays["block"]),
        "meta": meta,
        "plans": plans,
        "metadata": json_member(extra, KNN_META, what),
        "q": q,
        "margin": margin,
        "fallback": fallback,
        "vote_plans": allowed,
        "cooldown": cooldown,
        "scale": scale,
        "previous_plan": prev,
        "fabric": fabric,
    }


def _checked_knn_fabric(a: np.ndarray | None, what: str) -> str | None:
    """The optional field ``fabric`` of a knn file (:data:`KNN_OPTIONAL`), checked: a 0-d non-empty string;
    None without one (:func:`~ainet_gym.agents.model_files.checked_fabric`)."""
    from ainet_gym.agents.model_files import checked_fabric

    return checked_fabric(a, what)


def _checked_knn_previous_plan(
    arrays: dict[str, np.ndarray], width: int, plans: int, what: str
) -> float | None:
    """The optional field ``previous_plan`` of a knn file (:data:`KNN_OPTIONAL`), checked: present exactly when
    the field ``block`` names :data:`PREVIOUS_PLAN`, a finite float > 0, with more columns in ``x`` than the
    ``plans`` of its one-hot; None without it."""
    from ainet_gym.agents.model_files import ModelFileError

    v = arrays.get("previous_plan")
    try:
        named = split_previous_plan(str(arrays["block"]))[1]
    except ValueError as e:
        raise ModelFileError(f"{what}: field 'block': {e}") from None
    if v is None and not named:
        return None
    if v is None or not named:
        raise ModelFileError(
            f"{what}: field 'block' = {str(arrays['block'])!r} and field 'previous_plan' "
            f"{'absent' if v is None else 'present'}; allowed: both or neither"
        )
    if v.ndim != 0 or v.dtype.kind != "f" or not np.isfinite(v) or v <= 0:
        raise ModelFileError(
            f"{what}: field 'previous_plan' is a {v.ndim}-d {v.dtype} array; allowed: a finite float > 0"
        )
    if width <= plans:
        raise ModelFileError(
            f"{what}: field 'x' has {width} columns; allowed with 'previous_plan': more than the {plans} plans"
        )
    return float(v)


def _checked_knn_scale(scale: np.ndarray | None, width: int, what: str) -> np.ndarray | None:
    """The optional field ``scale`` of a knn file (:data:`KNN_OPTIONAL`) as float64, checked: (D,) for the D
    columns of ``x``, finite, > 0; None without one."""
    from ainet_gym.agents.model_files import ModelFileError

    if scale is None:
        return None
    if scale.ndim != 1 or scale.dtype.kind != "f" or scale.shape[0] != width:
        raise ModelFileError(
            f"{what}: field 'scale' is a {scale.ndim}-d {scale.dtype} array of shape {scale.shape}; allowed: "
            f"float of shape ({width},) (the columns of 'x')"
        )
    if not np.isfinite(scale).all() or (scale <= 0).any():
        raise ModelFileError(
            f"{what}: field 'scale' holds non-finite or non-positive values; allowed: finite, > 0"
        )
    return scale.astype(np.float64)


def _checked_knn_margin(
    arrays: dict[str, np.ndarray], q: np.ndarray | None, plans: list[str], what: str
) -> tuple[float | None, int | None]:
    """The optional fields ``margin`` and ``fallback`` of a knn file (:data:`KNN_OPTIONAL`), checked: both or
    neither, only beside ``q``, ``margin`` a finite float >= 0, ``fallback`` one of ``plans``; returned as
    (margin, the fallback's plan index), (None, None) without them."""
    from ainet_gym.agents.model_files import ModelFileError

    m, f = arrays.get("margin"), arrays.get("fallback")
    if m is None and f is None:
        return None, None
    if m is None or f is None:
        raise ModelFileError(
            f"{what}: field {'margin' if m is None else 'fallback'} missing beside "
            f"{'fallback' if m is None else 'margin'}; allowed: both or neither"
        )
    if q is None:
        raise ModelFileError(
            f"{what}: field 'margin' without 'q'; allowed: a margin only with the value vote"
        )
    for name, a, (ndim, kinds) in (
        ("margin", m, KNN_OPTIONAL["margin"]),
        ("fallback", f, KNN_OPTIONAL["fallback"]),
    ):
        if a.ndim != ndim or a.dtype.kind not in kinds:
            raise ModelFileError(
                f"{what}: field {name!r} is a {a.ndim}-d {a.dtype} array; allowed: {ndim}-d of dtype kind "
                f"{' or '.join(kinds)}"
            )
    margin = float(m)
    if not np.isfinite(margin) or margin < 0:
        raise ModelFileError(f"{what}: field 'margin' = {margin!r}; allowed: a finite number >= 0")
    check_choice(f"{what}: field 'fallback'", str(f), plans, "not a plan of the model", error=ModelFileError)
    return margin, plans.index(str(f))


def _checked_knn_cooldown(
    a: np.ndarray | None, plans: list[str], fallback: int | None, what: str
) -> tuple[int, int | None]:
    """The optional field ``cooldown`` of a knn file (:data:`KNN_OPTIONAL`), checked: a 0-d integer >= 1
    and a plan to cool down with (the ``fallback`` field's, else :data:`DEFAULT_FALLBACK`, a plan of the
    file); returned as (steps, that plan's index), (0, None) without one."""
    from ainet_gym.agents.model_files import ModelFileError

    if a is None:
        return 0, None
    ndim, kinds = KNN_OPTIONAL["cooldown"]
    if a.ndim != ndim or a.dtype.kind not in kinds or int(a) < 1:
        raise ModelFileError(
            f"{what}: field 'cooldown' is a {a.ndim}-d {a.dtype} array ({a!r}); allowed: a 0-d integer >= 1"
        )
    if fallback is None:
        check_choice(
            f"{what}: the cooldown plan",
            DEFAULT_FALLBACK,
            plans,
            "not a plan of the model",
            error=ModelFileError,
        )
        fallback = plans.index(DEFAULT_FALLBACK)
    return int(a), fallback


def _checked_knn_vote_plans(
    a: np.ndarray | None, q: np.ndarray | None, plans: list[str], what: str
) -> np.ndarray | None:
    """The optional field ``vote_plans`` of a knn file (:data:`KNN_OPTIONAL`), checked: only beside ``q``, a
    1-d string array of distinct plans of ``plans``, not empty; returned as a (K,) bool mask over ``plans``,
    None without one."""
    from ainet_gym.agents.model_files import ModelFileError

    if a is None:
        return None
    if q is None:
        raise ModelFileError(
            f"{what}: field 'vote_plans' without 'q'; allowed: vote plans only with the value vote"
        )
    ndim, kinds = KNN_OPTIONAL["vote_plans"]
    if a.ndim != ndim or a.dtype.kind not in kinds:
        raise ModelFileError(
            f"{what}: field 'vote_plans' is a {a.ndim}-d {a.dtype} array; allowed: {ndim}-d of dtype kind "
            f"{' or '.join(kinds)}"
        )
    names = [str(v) for v in a]
    if not names or len(set(names)) != len(names):
        raise ModelFileError(f"{what}: field 'vote_plans' = {names}; allowed: one or more distinct plans")
    for v in names:
        check_choice(f"{what}: field 'vote_plans'", v, plans, "not a plan of the model", error=ModelFileError)
    return np.array([p in names for p in plans])


def _checked_knn_values(q: np.ndarray | None, n: int, plans: int, what: str) -> np.ndarray | None:
    """The optional field ``q`` of a knn file (:data:`KNN_OPTIONAL`) as float64, checked: (N, K) for N
    decisions and K plans, finite, <= 0; None without one."""
    from ainet_gym.agents.model_files import ModelFileError

    if q is None:
        return None
    if q.ndim != 2 or q.dtype.kind != "f" or q.shape != (n, plans):
        raise ModelFileError(
            f"{what}: field 'q' is a {q.ndim}-d {q.dtype} array of shape {q.shape}; allowed: float of shape "
            f"({n}, {plans}) (decisions, plans)"
        )
    if not np.isfinite(q).all() or (q > 0).any():
        raise ModelFileError(f"{what}: field 'q' holds non-finite or positive values; allowed: finite, <= 0")
    return q.astype(np.float64)


def _read_knn_members(p: Path, what: str) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The :data:`KNN_FIELDS` arrays (and the optional ones) and the optional :data:`KNN_META` member of the
    archive ``p`` (:func:`~ainet_gym.agents.model_files.read_npz_members`)."""
    from ainet_gym.agents.model_files import read_npz_members

    holds = f"a knn policy holds {', '.join(KNN_FIELDS)} (python -m ainet_gym.agents.imitate knn)"
    arrays = read_npz_members(
        p, what, KNN_FIELDS, holds, lambda f: f in (*KNN_FIELDS, *KNN_OPTIONAL, KNN_META)
    )
    return arrays, arrays.pop(KNN_META, None)


def _checked_knn_arrays(
    arrays: dict[str, np.ndarray], what: str
) -> tuple[np.ndarray, np.ndarray, int, list[str], list[str]]:
    """``x``, ``y``, ``k``, ``plans`` and ``meta`` of a knn file, each checked for its dimensions, dtype and
    range (:class:`~ainet_gym.agents.model_files.ModelFileError` naming the field otherwise)."""
    from ainet_gym.agents.model_files import ModelFileError

    for f, (ndim, kinds) in KNN_FIELDS.items():
        a = arrays[f]
        if a.ndim != ndim or a.dtype.kind not in kinds:
            raise ModelFileError(
                f"{what}: field {f!r} is a {a.ndim}-d {a.dtype} array; allowed: {ndim}-d of dtype kind "
                f"{' or '.join(kinds)}"
            )
    x, y = arrays["x"], arrays["y"]
    plans, meta = [str(v) for v in arrays["plans"]], [str(v) for v in arrays["meta"]]
    if x.shape[0] < 1 or x.shape[0] != y.shape[0]:
        raise ModelFileError(
            f"{what}: field 'x' has {x.shape[0]} rows and 'y' {y.shape[0]}; allowed: the same number, >= 1"
        )
    if not np.isfinite(x).all():
        raise ModelFileError(f"{what}: field 'x' holds non-finite values; allowed: finite observations")
    if not plans:
        raise ModelFileError(f"{what}: field 'plans' is empty; allowed: the plans of a choose mode")
    if y.min() < 0 or y.max() >= len(plans):
        raise ModelFileError(
            f"{what}: field 'y' holds labels {int(y.min())}..{int(y.max())}; allowed: 0..{len(plans) - 1} "
            f"(the {len(plans)} plans)"
        )
    k = int(arrays["k"])
    if k < 1:
        raise ModelFileError(f"{what}: field 'k' = {k}; allowed: an integer >= 1 (neighbours)")
    if len(meta) < 5 or not meta[3].isdigit() or not meta[4].isdigit():
        raise ModelFileError(
            f"{what}: field 'meta' = {meta[:5]}; allowed: [scenario, action mode, obs features, history, "
            "steps, ...] with integer history and steps"
        )
    return x, y, k, plans, meta
