"""The file of a direct policy search (:mod:`ainet_gym.agents.search`): a plain .npz of
:data:`SEARCH_FIELDS` (and a gate's :data:`SEARCH_BASE`, the JSON :data:`SEARCH_META`), written by
:func:`save_search_policy` and read, checked, by :func:`load_search_policy` (``allow_pickle=False``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.agents.search_score import BASE_PLAN, SearchConfig

__all__ = [
    "SEARCH_BASE",
    "SEARCH_FABRIC",
    "SEARCH_FIELDS",
    "SEARCH_META",
    "load_search_policy",
    "save_search_policy",
]


#: the arrays of a search policy file (:func:`save_search_policy`)
SEARCH_FIELDS = ("theta", "plans", "block", "meta")
#: the optional field of a gated policy file: the base policy's string
SEARCH_BASE = "base"
#: the optional field with the fingerprint of the fabric the search played on (issue-26zh2; ``dps:PATH`` refuses
#: another fabric); a file without it (every older file) is played on any fabric, unchecked
SEARCH_FABRIC = "fabric"


#: the JSON member of a search policy file (the search's configuration and command)
SEARCH_META = "metadata"


def save_search_policy(
    path: str | Path,
    theta: np.ndarray,
    cfg: SearchConfig,
    extra: dict | None = None,
    fabric: str | None = None,
) -> Path:
    """Write ``theta`` (K - 1, D + 1) and what plays it: the plans, the block, the env (scenario, mode,
    observation blocks, extra plans), the configuration as JSON and (``fabric``, :data:`SEARCH_FABRIC`) the
    fingerprint of the fabric searched on."""
    meta = np.array([cfg.scenario, cfg.action_mode, ",".join(cfg.obs_features), ",".join(cfg.extra_plans)])
    info = {"algorithm": "dps-cem-linear", "config": asdict(cfg), **(extra or {})}
    p = Path(path)
    arrays = {"base": np.array(cfg.base)} if cfg.base else {}
    if fabric is not None:
        arrays[SEARCH_FABRIC] = np.array(fabric)
    np.savez(
        p,
        theta=np.asarray(theta, dtype=np.float64),
        plans=np.array(cfg.plans),
        block=np.array(cfg.block),
        meta=meta,
        metadata=np.array(json.dumps(info)),
        **arrays,
    )
    return p


def _bad(what: str, msg: str) -> Exception:
    from ainet_gym.agents.model_files import ModelFileError

    return ModelFileError(f"{what}: {msg}")


def load_search_policy(path: str | Path) -> dict[str, Any]:
    """The checked arrays of a search policy file: ``theta`` (float64), ``plans`` (list), ``block``,
    ``scenario``, ``action_mode``, ``obs_features`` and ``extra_plans`` (tuples), ``metadata`` (dict), ``base``
    (a gate's base policy string, or None), ``fabric`` (:data:`SEARCH_FABRIC`, or None).

    Raises
    ------
    ModelFileError
        One line naming the file and what is wrong (not an .npz, a missing or ill-shaped field, an object array).
    ModelNotFoundError
        If the file does not exist.
    """
    from ainet_gym.agents.model_files import (
        check_size,
        checked_fabric,
        existing,
        json_member,
        read_npz_members,
    )

    what = f"dps policy {str(path)!r}"
    p = existing(path, "dps policy")
    check_size(p, what)
    holds = f"a dps policy holds {', '.join(SEARCH_FIELDS)}"
    arrays = read_npz_members(
        p,
        what,
        SEARCH_FIELDS,
        holds,
        lambda f: f in (*SEARCH_FIELDS, SEARCH_META, SEARCH_BASE, SEARCH_FABRIC),
    )
    extra, base = arrays.pop(SEARCH_META, None), arrays.pop(SEARCH_BASE, None)
    theta, plans, meta = arrays["theta"], arrays["plans"], arrays["meta"]
    if plans.ndim != 1 or plans.dtype.kind != "U" or plans.shape[0] < 2:
        raise _bad(what, f"field 'plans' is a {plans.ndim}-d {plans.dtype} array; allowed: >= 2 plan names")
    if (
        theta.ndim != 2
        or theta.dtype.kind != "f"
        or theta.shape[0] != plans.shape[0] - 1
        or theta.shape[1] < 2
    ):
        raise _bad(
            what, f"field 'theta' has shape {theta.shape}; allowed: float ({plans.shape[0] - 1}, D + 1)"
        )
    if not np.isfinite(theta).all():
        raise _bad(what, "field 'theta' holds non-finite values; allowed: finite")
    if meta.shape != (4,) or meta.dtype.kind != "U" or arrays["block"].dtype.kind != "U":
        raise _bad(
            what, "field 'meta' or 'block': allowed: 4 strings (scenario, mode, features, extra plans)"
        )
    if (base is not None and (base.ndim != 0 or base.dtype.kind != "U")) or (
        (str(plans[0]) == BASE_PLAN) != (base is not None)
    ):
        raise _bad(what, f"field 'base': allowed: one string, exactly when the first plan is {BASE_PLAN!r}")
    return {
        "base": None if base is None else str(base),
        "theta": theta.astype(np.float64),
        "plans": [str(x) for x in plans],
        "block": str(arrays["block"]),
        "scenario": str(meta[0]),
        "action_mode": str(meta[1]),
        "obs_features": tuple(f for f in str(meta[2]).split(",") if f),
        "extra_plans": tuple(f for f in str(meta[3]).split(",") if f),
        "metadata": json_member(extra, SEARCH_META, what),
        "fabric": checked_fabric(arrays.get(SEARCH_FABRIC), what),
    }
