"""The statistics of an evaluation (:mod:`ainet_gym.agents.evaluate`): means with Student-t 95% confidence
intervals over episodes (:func:`mean_ci95`), the paired difference against ECMP over the same episodes, the share
of the ECMP-to-twin gap (:func:`gap_share`), the LP each class is compared with (:data:`CLASS_LP`,
:func:`class_lp`), and the per-policy summary of the JSON (:func:`summarize`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ainet_gym.agents.eval_episodes import PolicyRun
from ainet_gym.arrays import safe_divide

__all__ = [
    "CLASS_LP",
    "MIN_TWIN_GAP",
    "class_lp",
    "episode_ratio",
    "gap_share",
    "mean_ci95",
    "ratio_samples",
    "summarize",
]


#: the LP of each class (the reference of ``gap_to_lp``)
CLASS_LP = {"none": "lp", "jobs": "lp", "jobs+bg": "lp+bg", "jobs+bg+weights": "lp+bg"}


def mean_ci95(x: np.ndarray) -> dict[str, Any]:
    """Mean and Student-t 95% confidence interval of the mean (``ci95`` None with one sample)."""
    from scipy.stats import t

    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"mean": None, "ci95": None}
    m = float(x.mean())
    if x.size < 2:
        return {"mean": m, "ci95": None}
    h = float(t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return {"mean": m, "ci95": [m - h, m + h]}


def episode_ratio(run: PolicyRun) -> np.ndarray:
    """(E,) iteration-weighted mean step-time ratio of each episode (nan without iterations)."""
    w = run.iterations.reshape(run.iterations.shape[0], -1).astype(np.float64)
    r = run.ratio.reshape(w.shape)
    n = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return safe_divide((r * w).sum(axis=1), n, np.nan)


def ratio_samples(run: PolicyRun) -> np.ndarray:
    """Every job-iteration's step-time ratio (its interval's mean), pooled over episodes."""
    w = run.iterations.reshape(-1)
    return np.repeat(run.ratio.reshape(-1), w)


def class_lp(controls: str, available: Any) -> str | None:
    """The LP that a policy of class ``controls`` is compared with (:data:`CLASS_LP`), if it is among
    ``available`` (names); a ``jobs+bg`` (``jobs+bg+weights``) policy falls back to ``lp`` when ``lp+bg`` was not
    run."""
    want = CLASS_LP.get(controls, "lp+bg" if "lp+bg" in available else "lp")
    if want in available:
        return want
    return "lp" if "lp" in available else None


def summarize(runs: dict[str, PolicyRun]) -> dict[str, dict[str, Any]]:
    """The per-policy summary of the JSON (see the module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    ecmp = runs["ecmp"].gpu.mean(axis=1) if "ecmp" in runs else None
    twin = next((r.gpu.mean(axis=1) for r in runs.values() if r.controls == "reference"), None)
    for name, run in runs.items():
        g = run.gpu.mean(axis=1)
        samples = ratio_samples(run)
        ref = class_lp(run.controls, runs)
        lp = runs[ref].gpu.mean(axis=1) if ref is not None else None
        d: dict[str, Any] = {
            "controls": run.controls,
            "learned": run.learned,
            "gpu_utilization": mean_ci95(g),
            "step_time_ratio": mean_ci95(episode_ratio(run)),
            "p99_step_time_ratio": float(np.percentile(samples, 99)) if samples.size else None,
            "max_link_utilization": mean_ci95(run.max_link.mean(axis=1)),
            "gap_to_lp": None,
            "lp_reference": ref,
            "gpu_utilization_vs_ecmp": None,
            "twin_gap_share": None,
            "collisions": float(run.collisions.mean()),
            "episodes": int(g.shape[0]),
            "seconds": run.seconds,
        }
        if lp is not None and lp.mean() > 0:
            d["gap_to_lp"] = float((lp.mean() - g.mean()) / lp.mean())
        if ecmp is not None:
            d["gpu_utilization_vs_ecmp"] = mean_ci95(g - ecmp)
            if twin is not None:
                d["twin_gap_share"] = gap_share(g, ecmp, twin)
        out[name] = d
    return out


#: below this ECMP-to-twin gap in GPU utilisation the share of the gap is not reported
MIN_TWIN_GAP = 0.005


def gap_share(g: np.ndarray, ecmp: np.ndarray, twin: np.ndarray) -> dict[str, Any]:
    """``(policy - ecmp) / (twin - ecmp)`` of the mean GPU utilisations over episodes, with the paired
    95% CI of ``policy - ecmp`` divided by the mean gap (its own uncertainty left out); means None when
    the gap is below :data:`MIN_TWIN_GAP`."""
    gap = float(twin.mean() - ecmp.mean())
    if gap < MIN_TWIN_GAP:
        return {"mean": None, "ci95": None}
    d = mean_ci95(g - ecmp)
    ci = d["ci95"]
    return {"mean": d["mean"] / gap, "ci95": None if ci is None else [ci[0] / gap, ci[1] / gap]}
