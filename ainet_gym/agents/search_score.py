"""The policy of a direct policy search (:mod:`ainet_gym.agents.search`) and its score: the search's
configuration (:class:`SearchConfig`), the linear plan scorer (:func:`plan_scores`; a gate's reserved first plan
:data:`BASE_PLAN`), the pooled tail (:func:`pooled_tail`) and the closed-loop scores (:func:`candidate_score`,
:func:`floor_score` under :func:`mean_floor`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "BASE_PLAN",
    "SearchConfig",
    "candidate_score",
    "floor_score",
    "mean_floor",
    "plan_scores",
    "pooled_tail",
]


#: the reserved first plan of a gated policy: the base policy's pick
BASE_PLAN = "base"


@dataclass
class SearchConfig:
    """What :func:`cem_search` runs (defaults: issue-26zs's setting on ``ingest-bursts``)."""

    scenario: str = "ingest-bursts"
    action_mode: str = "choose_bg"
    extra_plans: tuple[str, ...] = ("favour0+bg", "favour1+bg", "favour2+bg")
    obs_features: tuple[str, ...] = ("phase",)
    plans: tuple[str, ...] = ("favour2+bg", "favour0+bg", "lp+bg", "solo-lp+bg")
    """the plans the policy picks among; the first is the reference (score 0)"""
    block: str = "job_phase,background,episode_progress"
    tail_plan: str = "favour0+bg"
    """the static plan whose pooled p99 on the generation's episodes is the tail threshold"""
    mean_plan: str = "favour2+bg"
    """the static plan logged beside (the bar of the mean)"""
    tail_weight: float = 2.0
    tail_target: float = 0.008
    first_seed: int = 2_000_000
    episodes: int = 16
    population: int = 24
    elite: int = 6
    generations: int = 20
    init_std: float = 0.5
    min_std: float = 0.05
    init_bias: float = -0.3
    seed: int = 0
    episode_steps: int | None = None
    checkpoints: tuple[int, ...] = field(default_factory=tuple)
    base: str = ""
    """a policy string (``dps:PATH``, ``knn:PATH``) the first plan, :data:`BASE_PLAN`, stands for: a gate"""
    antithetic: bool = False
    """draw the population in mirrored pairs (needs an even population)"""
    score: str = "penalty"
    """``penalty`` (:func:`candidate_score`) or ``floor`` (:func:`floor_score`: the tail under a mean floor)"""
    floor_z: float = 1.96
    """``floor``: the floor is ``mean_plan``'s mean + ``floor_z`` standard errors over the episodes"""


def plan_scores(theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(N, K) each plan's score: 0 for the reference plan, ``theta[..., :D] . x + theta[..., D]`` for the
    others. ``theta`` (K - 1, D + 1) for one policy, or (N, K - 1, D + 1) one per row; ``x`` (N, D)."""
    x = np.asarray(x, dtype=np.float64)
    if theta.ndim == 2:
        s = x @ theta[:, :-1].T + theta[:, -1]
    else:
        s = np.einsum("nkd,nd->nk", theta[..., :-1], x) + theta[..., -1]
    return np.concatenate([np.zeros((x.shape[0], 1)), s], axis=1)


def pooled_tail(ratio: np.ndarray, iters: np.ndarray, threshold: float | None = None) -> tuple[float, float]:
    """(p99, fraction above ``threshold``) of the step time / ideal of every job-iteration pooled over the
    episodes (each interval's ratio repeated by its iterations: ``evaluate``'s p99); ``ratio`` and ``iters``
    (E, T, J). The fraction is 0 without a threshold; both are nan without iterations."""
    w = np.asarray(iters).reshape(-1)
    samples = np.repeat(np.asarray(ratio, dtype=np.float64).reshape(-1), w)
    if samples.size == 0:
        return float("nan"), float("nan")
    frac = 0.0 if threshold is None else float((samples > threshold).mean())
    return float(np.percentile(samples, 99)), frac


def candidate_score(util: float, frac_above: float, cfg: SearchConfig) -> float:
    """The closed-loop score: mean GPU utilisation minus ``tail_weight`` times the fraction of job-iterations
    above the tail threshold in excess of ``tail_target``."""
    return float(util - cfg.tail_weight * max(0.0, frac_above - cfg.tail_target))


def floor_score(util: float, frac_above: float, floor: float) -> float:
    """The tail-first score (issue-26zu): ``-frac_above`` for a mean GPU utilisation at or above ``floor``,
    else ``-1 - (floor - util)`` (below every candidate that reaches the floor; ranked by the mean)."""
    return float(-frac_above) if util >= floor else float(-1.0 - (floor - util))


def mean_floor(util: np.ndarray, z: float) -> float:
    """The upper confidence bound ``mean + z * sd / sqrt(n)`` of per-episode utilisations ``util`` (n,)."""
    u = np.asarray(util, dtype=np.float64)
    sd = float(u.std(ddof=1)) if u.size > 1 else 0.0
    return float(u.mean() + z * sd / np.sqrt(u.size))
