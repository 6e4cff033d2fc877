"""The arguments of the clairvoyant ``twin`` (:mod:`ainet_gym.agents.twin`): its candidates (the splits
tried at each decision, :data:`LOOKAHEAD_CANDIDATES`; the whole-episode ones, :data:`PURE_CANDIDATES`; the
lookahead bases, :data:`BASE_POLICY` and :data:`BASE_CHOICES`), its defaults (:data:`DEFAULT_K`,
:data:`DEFAULT_H`, :data:`DEFAULT_SIGMA`) and the grammar of ``twin:kK-hH[-sS][-gSIGMA][-best][-iso][-w[W]]...``
(:func:`parse_twin_arg`)."""

from __future__ import annotations

import re
from typing import Any

from ainet_gym.routing.plans import (
    FAVOUR_BASE,
    FAVOUR_BASES,
    weighted_plan,
)

__all__ = [
    "BASE_CHOICES",
    "BASE_POLICY",
    "DEFAULT_H",
    "DEFAULT_K",
    "DEFAULT_SIGMA",
    "LOOKAHEAD_CANDIDATES",
    "PURE_CANDIDATES",
    "parse_twin_arg",
]


#: candidate splits tried at each decision (then perturbations of the incumbent, up to K)
LOOKAHEAD_CANDIDATES: tuple[str, ...] = ("lp+bg", "lp", "greedy+bg", "spray+bg", "solo-lp+bg", "incumbent")
#: policies whose whole episodes the twin also plays (every baseline of the jobs+bg class, lp and ecmp)
PURE_CANDIDATES: tuple[str, ...] = (
    "lp+bg", "lp", "greedy+bg", "spray+bg", "wcmp+bg", "predictive-lp+bg", "predictive-greedy+bg", "ecmp",
    "solo-lp+bg", "burst-lp+bg",
)  # fmt: skip
#: the base policy of the lookahead's intervals after the first
BASE_POLICY = "solo-lp+bg"
#: the lookahead bases ``twin:best`` picks from, per instance (stateless: a predictive router's forecast
#: would not follow the restored copies)
BASE_CHOICES: tuple[str, ...] = (
    "lp+bg", "lp", "greedy+bg", "spray+bg", "wcmp+bg", "ecmp", "solo-lp+bg", "burst-lp+bg",
)  # fmt: skip
#: default candidates per decision and lookahead intervals (docs/learning.md, "The K x H sweep")
DEFAULT_K = 8
DEFAULT_H = 8
DEFAULT_SIGMA = 0.5


def parse_twin_arg(arg: str | None) -> dict[str, Any]:
    """``kK-hH[-sS][-gSIGMA][-best][-iso][-w[W]]...[-on{base}]...[-wbase]`` -> ``{"k", "h", "seed", "sigma",
    "best_base", "isolate", "weights", "weight_bases", "weighted_base"}`` (defaults for what is left out;
    ``weights``: the share weights of the weighted candidates, in the order given, ``w`` alone
    :data:`~ainet_gym.routing.plans.FAVOUR_WEIGHT`; ``weight_bases``: the splits they run,
    :data:`~ainet_gym.routing.plans.FAVOUR_BASE` first, then each ``on{base}``'s; ``weighted_base``: ``wbase``
    given).

    Raises
    ------
    ValueError
        Naming the part that is not ``k<int >= 7>``, ``h<int >= 1>``, ``s<int >= 0>``, ``g<float >= 0>``,
        ``best``, ``iso``, ``w[<number in [1, 1e6]>]``, ``on{base}`` or ``wbase``, or ``wbase`` without ``best``
        and a ``w`` part, or ``on{base}`` without a ``w`` part.
    """
    out: dict[str, Any] = {
        "k": DEFAULT_K,
        "h": DEFAULT_H,
        "seed": 0,
        "sigma": DEFAULT_SIGMA,
        "best_base": False,
        "isolate": False,
        "weights": [],
        "weight_bases": [FAVOUR_BASE],
        "weighted_base": False,
    }
    if not arg:
        return out
    on_names = {b.replace("-", ""): f"{b}+bg" for b in FAVOUR_BASES}
    for part in arg.split("-"):
        _twin_part(arg, part, out, on_names)
    _check_twin_arg(arg, out)
    return out


def _twin_part(arg: str, part: str, out: dict[str, Any], on_names: dict[str, str]) -> None:
    """Read one ``-``-joined part of ``twin:ARG`` into ``out`` (:func:`parse_twin_arg`)."""
    names = {"k": "k", "h": "h", "s": "seed", "g": "sigma"}
    flags = {"best": "best_base", "iso": "isolate", "wbase": "weighted_base"}
    if part.strip() in flags:
        out[flags[part.strip()]] = True
        return
    mo = re.fullmatch(r"on(.*)", part.strip())
    if mo is not None:
        if mo.group(1) not in on_names or on_names[mo.group(1)] in out["weight_bases"]:
            raise ValueError(
                f"policy 'twin:{arg}': {part!r}: allowed: on{{base}} once per base, base one of "
                f"{', '.join(on_names)} (the split of weighted candidates beside {FAVOUR_BASE}'s)"
            )
        out["weight_bases"].append(on_names[mo.group(1)])
        return
    mw = re.fullmatch(r"w(.*)", part.strip())
    if mw is not None:
        val = mw.group(1)
        wp = weighted_plan(f"favour0-w{val}+bg" if val else "favour0+bg")  # the plans' weight check
        assert wp is not None
        if wp.weight in out["weights"]:
            raise ValueError(
                f"policy 'twin:{arg}': {part!r}: weight {wp.weight:g} given twice; allowed: distinct"
            )
        out["weights"].append(wp.weight)
        return
    m = re.fullmatch(r"([khsg])(\d+(?:\.\d+)?)", part.strip())
    if m is None:
        raise ValueError(
            f"policy 'twin:{arg}': {part!r} is not one of kK (candidates per decision, >= 7), hH "
            "(lookahead intervals, >= 1), sS (seed), gSIGMA (perturbation scale), best (the best pure "
            "candidate as the lookahead base), iso (the isolating plans as candidates too) or w / wW (the "
            "weighted plans favour{j}+bg at share weight 16 / W as candidates too), joined by '-', e.g. "
            "twin:k8-h4"
        )
    key, val = names[m.group(1)], m.group(2)
    if key == "sigma":
        out[key] = float(val)
    else:
        if "." in val:
            raise ValueError(f"policy 'twin:{arg}': {part!r}: {key} must be an integer")
        out[key] = int(val)


def _check_twin_arg(arg: str, out: dict[str, Any]) -> None:
    """The checks of ``twin:ARG`` across its parts (:func:`parse_twin_arg`), after they are read."""
    if out["k"] < len(LOOKAHEAD_CANDIDATES) + 1:
        raise ValueError(
            f"policy 'twin:{arg}': k = {out['k']}: needs >= {len(LOOKAHEAD_CANDIDATES) + 1} (the candidates "
            f"{', '.join(LOOKAHEAD_CANDIDATES)} and at least one perturbation)"
        )
    if out["h"] < 1:
        raise ValueError(f"policy 'twin:{arg}': h = {out['h']}: needs >= 1 lookahead interval")
    if len(out["weight_bases"]) > 1 and not out["weights"]:
        raise ValueError(
            f"policy 'twin:{arg}': on{{base}} gives the split of the weighted candidates; allowed: with a w part, "
            "e.g. twin:best-w-onlp"
        )
    if out["weighted_base"] and not (out["best_base"] and out["weights"]):
        raise ValueError(
            f"policy 'twin:{arg}': wbase picks the lookahead base among the weighted plans too; allowed: with "
            "best and a w part, e.g. twin:best-w-wbase"
        )
