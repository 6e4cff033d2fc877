"""A saved model's metadata (``ainet_gym.json``, :mod:`ainet_gym.agents.sb3_agents`) read as the env keywords it
asks for, each checked and naming the file when bad: ``history`` (:func:`meta_history`), ``residual`` and
``residual_scale`` (:func:`meta_residual`), ``obs_features`` (:func:`meta_obs_features`) and ``extra_plans``
(:func:`meta_extra_plans`). The SB3, multi-agent,
RLlib and pretrained agents share them."""

from __future__ import annotations

from typing import Any

from ainet_gym.agents.model_files import meta_int
from ainet_gym.errors import names_message

__all__ = [
    "meta_extra_plans",
    "meta_history",
    "meta_obs_features",
    "meta_residual",
]


def meta_residual(meta: dict[str, Any], what: str) -> dict[str, Any]:
    """The env keywords of a residual policy's metadata (``residual``, ``residual_scale``; empty for
    others), checked: the base must be a known routing and the scale a number in (0, 10].

    Raises
    ------
    ValueError
        Naming the file and the bad value.
    """
    from ainet_gym.routing.policies import POLICIES

    base = meta.get("residual")
    if base is None:
        return {}
    if not isinstance(base, str) or base not in POLICIES:
        raise ValueError(f"{what}: metadata residual = {base!r}: not a routing policy of this version")
    scale = meta.get("residual_scale")
    out: dict[str, Any] = {"residual": base}
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not 0 < scale <= 10:
            raise ValueError(f"{what}: metadata residual_scale = {scale!r}: allowed: a number in (0, 10]")
        out["residual_scale"] = float(scale)
    return out


def meta_extra_plans(meta: dict[str, Any], what: str) -> dict[str, Any]:
    """The env keyword ``extra_plans`` of a model's metadata (a ``choose`` mode's plans past its own, e.g. the
    isolating plans; empty without them), checked: a list of plans of
    :data:`ainet_gym.routing.plans.EXTRA_PLANS` or weighted plans.

    Raises
    ------
    ValueError
        Naming the file and the bad value.
    """
    from ainet_gym.routing.plans import is_extra_plan

    extra = meta.get("extra_plans")
    if not extra:
        return {}
    try:
        ok = isinstance(extra, list | tuple) and all(isinstance(p, str) and is_extra_plan(p) for p in extra)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{what}: metadata extra_plans = {extra!r}: allowed: a list of extra plans")
    return {"extra_plans": tuple(extra)}


def meta_obs_features(meta: dict[str, Any], what: str) -> dict[str, Any]:
    """The env keyword ``obs_features`` of a model's metadata (empty for a model trained without optional
    observation blocks), checked against :data:`ainet_gym.envs.env.OBS_FEATURE_BLOCKS`.

    Raises
    ------
    ValueError
        Naming the file and the bad value.
    """
    from ainet_gym.envs.env import OBS_FEATURE_BLOCKS

    feats = meta.get("obs_features")
    if not feats:
        return {}
    if not isinstance(feats, list | tuple):
        raise ValueError(
            f"{what}: metadata obs_features = {feats!r}: allowed: a list of {', '.join(OBS_FEATURE_BLOCKS)}"
        )
    if any(f not in OBS_FEATURE_BLOCKS for f in feats):
        raise ValueError(names_message(f"{what}: metadata obs_features", feats, OBS_FEATURE_BLOCKS))
    return {"obs_features": tuple(feats)}


def meta_history(meta: dict[str, Any], what: str) -> int:
    """The ``history`` a model's metadata asks the env for (default 4), range-checked against
    ``LIMITS["history_max"]`` (:data:`ainet_gym.scenario.loader.LIMITS`, the env's own ceiling).

    Raises
    ------
    ModelFileError
        If it is not an integer in ``[1, LIMITS["history_max"]]``.
    """
    from ainet_gym.scenario.loader import LIMITS

    return meta_int(meta, "history", what, 1, int(LIMITS["history_max"]), default=4)
