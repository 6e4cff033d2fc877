"""Imitation of a lookahead over the plans of a ``choose`` mode: labels, then behaviour cloning.

The clairvoyant twin (:mod:`ainet_gym.agents.twin`) finds, on ``spine-leaf-2to1-jitter``, a gain over the
best baseline of the ``jobs+bg`` class that switching plans at the right intervals reaches (docs/learning.md).
This module asks whether a policy can learn *when*:

1. :func:`lookahead_labels` plays each episode along a receding-horizon lookahead restricted to the plans of
   the action mode (``choose_bg``: ``ecmp``, ``spray+bg``, ``wcmp+bg``, ``greedy+bg``, ``lp+bg``,
   ``solo-lp+bg``): at each decision every plan runs one interval on a copy of the true state
   (:meth:`~ainet_gym.envs.env.EnvCore.snapshot`), then ``H - 1`` intervals of a base policy
   (``spray+bg``, the best plan played alone there), all ``B x K`` copies in one batched core; the plan whose
   jobs did the most ideal work (:meth:`ainet_gym.envs.env.EnvCore.job_progress`) is the label of that
   decision and is played. It records the observation the policy would have seen (with the env's
   ``obs_features``), the label, every plan's score and the interval's reward.
2. :func:`behaviour_clone` fits the policy network of a PPO model (the network ``ainet-gym train`` builds)
   to the labels by weighted cross-entropy (weights: inverse square root of each plan's frequency) and
   its value network to the discounted returns of the labelled trajectories, and saves it as a model of
   ``ainet-gym train`` (metadata included): ``evaluate ppo:PATH`` plays it, ``train --resume PATH``
   continues it with PPO.

The lookahead sees the future (it simulates on copies of the true state), so its labels are a target, never
a policy of the class. Command line::

    python -m ainet_gym.agents.imitate label spine-leaf-2to1-jitter --seeds 2000000-2000039 --out train.npz
    python -m ainet_gym.agents.imitate clone train.npz --val val.npz --out bc.zip --epochs 60
    python -m ainet_gym.agents.imitate knn train.npz --k 5 --out knn.npz   # evaluate knn:knn.npz
    python -m ainet_gym.agents.imitate qfit train.npz --hidden 64,64 --out q.npz   # evaluate qnet:q.npz

3. :func:`fit_knn` / :class:`KnnAgent` (``knn:PATH`` in ``evaluate``): the plan the ``k`` labelled decisions
   nearest in the observation's ``job_phase`` block were given, a non-parametric imitation that reads only
   the observation (what the network of 2 does not learn to isolate from the other 2,300 inputs). With
   ``--vote value`` (:data:`KNN_VOTES`) the plan of the best mean lookahead value over the neighbours
   (:func:`knn_values`), a cost-sensitive imitation: the siblings of ``spine-leaf-2to1-jitter`` where the
   majority vote closes under half of the twin's gap and this closes more (docs/learning.md).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.errors import check_choice

__all__ = [
    "DEFAULT_BASE",
    "DEFAULT_FALLBACK",
    "DEFAULT_H",
    "DEFAULT_K",
    "DEFAULT_OBJECTIVE",
    "DEFAULT_PREVIOUS_PLAN_SCALE",
    "DEFAULT_TAIL_SLACK",
    "DEFAULT_TAIL_WEIGHT",
    "KNN_FIELDS",
    "KNN_META",
    "KNN_OPTIONAL",
    "KNN_VOTES",
    "OBJECTIVES",
    "PREVIOUS_PLAN",
    "KnnAgent",
    "behaviour_clone",
    "check_plan_model",
    "fit_knn",
    "knn_values",
    "load_knn",
    "lookahead_labels",
    "p99_step_ratio",
    "pick_label",
    "previous_plans",
]

#: the base policy of the lookahead's intervals after the first (the best plan played alone on
#: ``spine-leaf-2to1-jitter``: docs/learning.md)
DEFAULT_BASE = "spray+bg"
#: lookahead intervals (the twin's default, :data:`ainet_gym.agents.twin.DEFAULT_H`)
DEFAULT_H = 8
#: neighbours of :class:`KnnAgent` (picked on validation seeds 100-109: docs/learning.md)
DEFAULT_K = 5
#: scores within this relative distance of the best are ties, broken by the plan order (so that plans with
#: the same split, e.g. ``spray+bg`` and ``wcmp+bg`` without failed links, get one label)
TIE_RTOL = 1e-9
#: label objectives of :func:`lookahead_labels`: ``"util"`` the plan whose jobs did the most ideal work over
#: the lookahead; ``"tail"`` the plan of the most ideal work minus ``tail_weight`` times its GPU-seconds of
#: step time above the base plan's worst step time / ideal over the lookahead (times ``1 + tail_slack``)
OBJECTIVES = ("util", "tail")
#: the label objective by default (today's labels)
DEFAULT_OBJECTIVE = "util"
#: ``"tail"`` objective: the relative slack on the base plan's worst step time / ideal above which step time
#: is penalised (0: any step slower than the base plan's slowest)
DEFAULT_TAIL_SLACK = 0.0
#: ``"tail"`` objective: the penalty per GPU-second of step time above the threshold, in GPU-seconds of ideal
#: work (``inf``: a hard constraint, only plans with no step above it are eligible; the base plan always is)
DEFAULT_TAIL_WEIGHT = float("inf")
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
KNN_OPTIONAL: dict[str, tuple[int, str]] = {
    "q": (2, "f"),
    "margin": (0, "f"),
    "fallback": (0, "U"),
    "vote_plans": (1, "U"),
    "cooldown": (0, "iu"),
    "scale": (1, "f"),
    "previous_plan": (0, "f"),
}
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
#: the plan a value vote with a margin falls back to unless told otherwise: the lookahead's default base plan
#: (:data:`DEFAULT_BASE`)
DEFAULT_FALLBACK = DEFAULT_BASE
#: how :class:`KnnAgent` combines the ``k`` neighbours: ``"label"`` the plan most of them were labelled
#: with; ``"value"`` the plan of the best mean lookahead value over them (``q``), what a cost-sensitive
#: imitation uses: a neighbour where the plans score alike weighs little, one with much at stake much
KNN_VOTES = ("label", "value")
#: the optional member of a knn policy file with its metadata record (a JSON object, as the shipped zips'
#: ``ainet_gym.json``): algorithm, class, training seed, the commands that labelled and fitted it
KNN_META = "ainet_gym.json"


def lookahead_labels(
    scenario: Any,
    seeds: list[int],
    h: int = DEFAULT_H,
    base: str = DEFAULT_BASE,
    action_mode: str = "choose_bg",
    obs_features: tuple[str, ...] = ("phase",),
    history: int = 4,
    steps: int | None = None,
    backend: str | None = None,
    policy: Any = None,
    objective: str = DEFAULT_OBJECTIVE,
    tail_slack: float = DEFAULT_TAIL_SLACK,
    tail_weight: float = DEFAULT_TAIL_WEIGHT,
    extra_plans: tuple[str, ...] = (),
    redraw: Any = None,
) -> dict[str, Any]:
    """Play the episodes of ``seeds`` (one batch) along the lookahead over the plans of ``action_mode``
    (module docstring), or, with ``policy`` (a function of the batch's observations (B, D) giving (B,)
    plan indices, e.g. a cloned model's deterministic ``predict``), play the policy's plans and label the
    states it visits (DAgger's aggregation step), and return the arrays of every decision: ``obs`` (N, D) float32, ``label`` (N,)
    int64 plan index, ``scores`` (N, K) each plan's ideal GPU-seconds over its lookahead, ``reward`` (N,),
    ``seed`` (N,), ``t`` (N,) the decision's interval, ``played`` (N,) the plan played, in episode order (``N = len(seeds) * steps``); and
    ``plans``, ``gpu_utilization`` (B,) each episode's mean reward, ``seconds``; and ``tail`` (N, K) each
    plan's worst step time / ideal over its lookahead (the maximum over the intervals and jobs that
    completed an iteration, 0 if none did), ``excess`` (N, K) each plan's GPU-seconds of step time above the
    threshold of the ``"tail"`` objective (below; 0 when ``base`` is not a plan of the mode), ``step_ratio``
    and ``step_iters`` (N, J) the played interval's step time / ideal and iterations per job slot
    (:func:`p99_step_ratio`).

    ``objective`` (:data:`OBJECTIVES`): ``"util"`` (default) labels the plan with the best score;
    ``"tail"`` the plan with the best score minus ``tail_weight`` times its *excess*: the sum over the
    lookahead's intervals and jobs of iterations x GPUs x ideal step x (step time / ideal - threshold) where
    positive, GPU-seconds of step time above the threshold, the base plan's ``tail`` times
    ``1 + tail_slack`` (``base`` must be a plan of the mode; its excess is 0). ``tail_weight = inf``
    (default): the best score among the plans with no excess, a hard constraint. The lookahead's labels
    without (or with fewer of) the plans that buy GPU time with slower steps than the base's, what
    ``evaluate``'s p99 step time / ideal measures. The metadata records a non-default objective and its
    parameters.

    ``extra_plans``: plans appended to the mode's own (:data:`ainet_gym.routing.plans.EXTRA_PLANS`, e.g. the
    isolating plans ``isolate0+bg`` ..., or the weighted plans ``favour{j}+bg`` / ``favour{j}-w{W}+bg`` of the
    class ``jobs+bg+weights``, whose copies run their interval at the plan's share weights, the base's at the
    scenario's); the labels' ``plans`` field lists them, and a knn fitted on the labels plays in an env with
    the same extra plans (and class). ``base`` may be a weighted plan too (e.g. ``favour0-w1e6+bg``, the best
    static plan of that class): the lookahead's later intervals then run its split at its share weights, so
    each plan is scored as a deviation from that static plan (docs/learning.md, "issue-26zm").

    ``redraw`` (a :class:`ainet_gym.sim.redraw.FutureRedraw`, None: off): each plan is scored on M copies whose
    unobserved background phases are re-drawn, its ``score`` and ``excess`` the means over them, ``tail`` the
    maximum (docs/learning.md, "issue-26zr"); the labels' ``redraw`` field records (M, seed, window).

    Raises
    ------
    ValueError
        If ``action_mode`` is not a ``choose`` mode, ``h < 1``, ``base`` is neither a stateless engine-level
        policy nor a weighted plan,
        ``objective`` is not one of :data:`OBJECTIVES`, ``tail_slack`` is negative or not finite,
        ``tail_weight`` is negative or nan, or the ``"tail"`` objective's ``base`` is not a plan of the mode.
    """
    from ainet_gym.scenario.loader import load_scenario

    _check_label_args(action_mode, h, base, objective, tail_slack, tail_weight)
    t0 = time.perf_counter()
    sc = load_scenario(scenario)
    core, look = _label_cores(
        sc, len(seeds), action_mode, history, steps, backend, obs_features, extra_plans, objective, base,
        1 if redraw is None else redraw.samples,
    )  # fmt: skip
    out = _play_and_label(core, look, seeds, h, base, tail_slack, objective, tail_weight, policy, redraw)
    if redraw is not None:
        out["redraw"] = np.array([redraw.samples, redraw.seed, redraw.window])
    B, T = len(seeds), core.episode_steps
    out["seed"] = np.repeat(np.asarray(seeds, dtype=np.int64), T)
    out["t"] = np.tile(np.arange(T), B)
    out["plans"] = np.array(core.plans)
    out["gpu_utilization"] = out["reward"].reshape(B, T).mean(axis=1)
    out["seconds"] = time.perf_counter() - t0
    meta = [sc.name, action_mode, ",".join(obs_features), str(history), str(T), base, str(h)]
    if objective != DEFAULT_OBJECTIVE:
        meta += [objective, repr(float(tail_slack)), repr(float(tail_weight))]
    out["meta"] = np.array(meta)  # what clone() rebuilds the env from
    return out


def _label_cores(
    sc: Any,
    batch: int,
    action_mode: str,
    history: int,
    steps: int | None,
    backend: str | None,
    obs_features: tuple[str, ...],
    extra_plans: tuple[str, ...],
    objective: str,
    base: str,
    samples: int = 1,
) -> tuple[Any, Any]:
    """The two engines of :func:`lookahead_labels`: ``core``, the ``batch`` episodes played in
    ``action_mode`` (its plans, with ``extra_plans``, and its observation), and ``look``, ``batch x K``
    copies (one per plan) that the lookahead restores from ``core``'s snapshot and steps by splits; between
    the two, the ``"tail"`` objective's ``base`` is refused unless it is a plan of the mode."""
    from ainet_gym.envs.env import EnvCore

    core = EnvCore(
        sc, batch=batch, action_mode=action_mode, history=history, episode_steps=steps, backend=backend,
        obs_features=obs_features, extra_plans=extra_plans,
    )  # fmt: skip
    if objective == "tail" and base not in core.plans:
        raise ValueError(
            f"base = {base!r}: the 'tail' objective compares each plan with the base plan; allowed: a plan of "
            f"{action_mode} ({', '.join(core.plans)})"
        )
    look = EnvCore(
        sc, batch=batch * len(core.plans) * samples, history=history, episode_steps=steps, backend=backend
    )
    return core, look


def _play_and_label(
    core: Any,
    look: Any,
    seeds: list[int],
    h: int,
    base: str,
    tail_slack: float,
    objective: str,
    tail_weight: float,
    policy: Any,
    redraw: Any = None,
) -> dict[str, np.ndarray]:
    """The episodes of :func:`lookahead_labels`: ``core`` reset to ``seeds``, then at each interval every
    plan scored over the lookahead (:func:`_score_plans`), the label picked (:func:`pick_label`) and the
    label (or ``policy``'s plan) played; returns the arrays of every decision in episode order (B * T, ...):
    ``obs``, ``label``, ``scores``, ``reward``, ``played``, ``tail``, ``excess``, ``step_ratio``,
    ``step_iters``."""

    plans = core.plans
    B, K, T = len(seeds), len(plans), core.episode_steps
    base_pol = _base_policy(base)
    M = 1 if redraw is None else redraw.samples
    src = np.repeat(np.arange(B), K * M)  # the copies as (episode, sample, plan)
    hook = None if redraw is None else (lambda look_: redraw.apply(look_.world, seeds, K))
    obs, _ = core.reset(list(seeds))
    if hasattr(policy, "reset"):
        policy.reset()  # a stateful player (_AgentPlayer): new episodes
    rec: dict[str, list[np.ndarray]] = {
        k: []
        for k in ("obs", "label", "scores", "reward", "played", "tail", "excess", "step_ratio", "step_iters")
    }
    for t in range(T):
        score, tail, excess = _score_plans(
            core, look, src, base_pol, min(h, T - t), plans, base, tail_slack, hook
        )
        if M > 1:  # the mean over the sampled futures (the worst step: their maximum)
            score, excess = score.reshape(B, M, K).mean(1), excess.reshape(B, M, K).mean(1)
            tail = tail.reshape(B, M, K).max(1)
        label = pick_label(score, excess, objective, tail_weight)
        rec["obs"].append(np.asarray(obs, dtype=np.float32))
        rec["label"].append(label)
        rec["scores"].append(score)
        rec["tail"].append(tail)
        rec["excess"].append(excess)
        play = label if policy is None else np.asarray(policy(obs), dtype=np.int64).reshape(B)
        obs, reward, _, _, _ = core.step(play)
        ratio, iters = _ratios(core.last_result)
        rec["step_ratio"].append(ratio)
        rec["step_iters"].append(iters)
        rec["reward"].append(np.asarray(reward, dtype=np.float64))
        rec["played"].append(play)
    # (T, B, ...) -> episode order (B * T, ...)
    return {k: np.swapaxes(np.stack(v), 0, 1).reshape(B * T, *np.stack(v).shape[2:]) for k, v in rec.items()}


def _base_policy(base: str) -> Any:
    """The engine-level policy of the lookahead's base ``base``: a router, a switching baseline, or a weighted
    plan's split (its weights are set by :func:`_score_plans`)."""
    from ainet_gym.agents.baselines import SWITCHED
    from ainet_gym.routing.plans import plan_policy, weighted_plan
    from ainet_gym.routing.policies import POLICIES

    if weighted_plan(base) is not None:
        return plan_policy(base)
    return SWITCHED[base][0] if base in SWITCHED else POLICIES[base]


def _check_label_args(
    action_mode: str, h: object, base: str, objective: str, tail_slack: float, tail_weight: float
) -> None:
    """The argument checks of :func:`lookahead_labels` (its Raises section)."""
    from ainet_gym.agents.baselines import SWITCHED
    from ainet_gym.routing.plans import CHOOSE_MODES, weighted_plan
    from ainet_gym.routing.policies import POLICIES

    if action_mode not in CHOOSE_MODES:
        raise ValueError(f"action_mode = {action_mode!r}: allowed: a choose mode ({', '.join(CHOOSE_MODES)})")
    if not isinstance(h, int) or h < 1:
        raise ValueError(f"h = {h!r}: allowed: an integer >= 1 (lookahead intervals)")
    stateless = [p for p in (*POLICIES, *SWITCHED) if not p.startswith("predictive-")]
    if weighted_plan(base) is None:  # (a weighted plan is a base too: raises if misspelt)
        check_choice(
            "base",
            base,
            stateless,
            problem="not a stateless engine-level policy",
            more=" or favour{j}[-w{W}]+bg",
        )
    check_choice("objective", objective, OBJECTIVES)
    if not np.isfinite(tail_slack) or tail_slack < 0:
        raise ValueError(f"tail_slack = {tail_slack!r}: allowed: a finite number >= 0 (relative slack)")
    if np.isnan(tail_weight) or tail_weight < 0:
        raise ValueError(f"tail_weight = {tail_weight!r}: allowed: a number >= 0 or inf (penalty weight)")


def _score_plans(
    core: Any,
    look: Any,
    src: np.ndarray,
    base_pol: Any,
    h: int,
    plans: list[str],
    base: str,
    tail_slack: float,
    after_restore: Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One decision of :func:`lookahead_labels`: every plan of ``plans`` played for one interval on a copy
    of each of ``core``'s B instances (``look``, B x K instances, restored from ``core``'s snapshot at
    ``src``), then ``base_pol`` for ``h - 1`` intervals; returns (B, K) each plan's ideal GPU-seconds
    (``score``), worst step time / ideal (``tail``) and GPU-seconds above the base plan's tail (``excess``,
    zero when ``base`` is not a plan)."""
    from ainet_gym.agents.twin import instance_rows
    from ainet_gym.routing.plans import plan_split

    B, K = core.batch, len(plans)
    stack = np.stack(
        [plan_split(core.routing_context, core.last_result, np.full(B, k), plans) for k in range(K)]
    )
    look.restore(core.snapshot(), src)
    if after_restore is not None:  # e.g. the copies' unobserved future re-drawn (FutureRedraw)
        after_restore(look)
    mb, lb = core.connection_bounds(), look.connection_bounds()
    k_of = np.repeat(np.arange(look.batch) % K, np.diff(lb))
    before = look.job_progress()
    names = [list(x) for x in look.job_names]
    from ainet_gym.routing.plans import weighted_plan

    weighted = getattr(core, "weighted_plans", False)
    weighted_base = weighted_plan(base) is not None
    if weighted:  # each copy at its plan's share weights (class jobs+bg+weights) for the plan's interval
        look.set_plan_weights([plans[i % K] for i in range(look.batch)])
    look.step_split(stack[k_of, instance_rows(mb, src)])
    if weighted or weighted_base:  # the base's intervals at its weights (a plain base: the scenario's)
        look.set_plan_weights([base] * look.batch)
    steps_ = [_ratios(look.last_result, work=True)]
    for _ in range(h - 1):
        look.step_split(base_pol(look.routing_context, look.last_result))
        steps_.append(_ratios(look.last_result, work=True))
    same = np.array([[a == b for a, b in zip(x, y)] for x, y in zip(names, look.job_names)])
    score = np.where(same, look.job_progress() - before, 0.0).sum(axis=1).reshape(-1, K)
    tail = np.max([r.max(axis=1) if r.shape[1] else np.zeros(look.batch) for r, _ in steps_], axis=0)
    tail = tail.reshape(-1, K)
    excess = np.zeros_like(score)
    if base in plans:
        kb = plans.index(base)
        thr = np.repeat(tail[:, kb] * (1.0 + tail_slack), K)[:, None]  # (B * K, 1)
        excess = sum((wt * np.maximum(r - thr, 0.0)).sum(axis=1) for r, wt in steps_).reshape(-1, K)
        excess[:, kb] = 0.0
    return score, tail, excess


def pick_label(
    score: np.ndarray,
    excess: np.ndarray,
    objective: str = DEFAULT_OBJECTIVE,
    tail_weight: float = DEFAULT_TAIL_WEIGHT,
) -> np.ndarray:
    """(B,) the label of each decision from its plans' lookahead ``score`` and ``excess`` (B, K)
    (:func:`lookahead_labels`): the first plan within :data:`TIE_RTOL` of the best of ``score``
    (``objective="util"``), of ``score - tail_weight * excess`` (``"tail"``), or, ``"tail"`` with
    ``tail_weight = inf``, of the scores of the plans without excess (a row where every plan has excess
    gets the first plan of the best score).

    Raises
    ------
    ValueError
        If ``objective`` is not one of :data:`OBJECTIVES` or the shapes differ.
    """
    check_choice("objective", objective, OBJECTIVES)
    score, excess = np.asarray(score, dtype=np.float64), np.asarray(excess, dtype=np.float64)
    if score.shape != excess.shape or score.ndim != 2:
        raise ValueError(f"score {score.shape} and excess {excess.shape}: allowed: the same (B, K) shape")
    cand = score
    if objective == "tail":
        if np.isinf(tail_weight):
            cand = np.where(excess > 0, -np.inf, score)
            none = ~np.isfinite(cand).any(axis=1)
            cand[none] = score[none]
        else:
            cand = score - tail_weight * excess
    top = cand.max(axis=1, keepdims=True)
    return np.argmax(np.isfinite(cand) & (cand >= top - TIE_RTOL * np.abs(top)), axis=1)  # first near-tie


def _ratios(res: Any, work: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(batch, jobs) step time / ideal of an interval's result (its mean step; 0 where no iteration
    completed) and the iterations completed (0 there), as ``evaluate`` counts them; with ``work``, instead
    of the iterations, the iterations x GPUs x ideal step (s): the GPU-seconds one unit of the ratio
    weighs."""
    it = np.asarray(res.iterations)
    st, ideal = np.asarray(res.step_time_s, dtype=np.float64), np.asarray(res.ideal_step_s, dtype=np.float64)
    ok = (it > 0) & np.isfinite(st) & np.isfinite(ideal) & (ideal > 0)
    ratio = np.where(ok, st / np.where(ok, ideal, 1.0), 0.0)
    if work:
        return ratio, np.where(ok, it * np.asarray(res.job_gpus) * np.where(ok, ideal, 0.0), 0.0)
    return ratio, np.where(ok, it, 0).astype(np.int64)


def p99_step_ratio(labels: dict[str, Any]) -> float | None:
    """The 99th percentile of step time / ideal over every job-iteration of the labelled (played)
    episodes, pooled (``evaluate``'s ``p99_step_time_ratio``); None without a completed iteration."""
    x = np.repeat(np.asarray(labels["step_ratio"]).reshape(-1), np.asarray(labels["step_iters"]).reshape(-1))
    return float(np.percentile(x, 99)) if x.size else None


def _returns(reward: np.ndarray, steps: int, gamma: float) -> np.ndarray:
    """(N,) discounted return of each decision of episodes stored one after the other (``steps`` each)."""
    r = reward.reshape(-1, steps)
    g = np.zeros_like(r)
    acc = np.zeros(r.shape[0])
    for t in range(steps - 1, -1, -1):  # a loop over the intervals of an episode, batched over episodes
        acc = r[:, t] + gamma * acc
        g[:, t] = acc
    return g.reshape(-1)


def behaviour_clone(
    labels: dict[str, Any],
    out: str | Path,
    val: dict[str, Any] | None = None,
    epochs: int = 60,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    gamma: float | None = None,
    seed: int = 0,
    weighting: str = "inv_sqrt",
    n_envs: int = 8,
    obs_features: tuple[str, ...] | None = None,
    scenario: Any = None,
) -> dict[str, Any]:
    """Fit a PPO model's policy to ``labels`` (:func:`lookahead_labels`) and save it to ``out`` with the
    metadata of ``ainet-gym train`` (``evaluate ppo:OUT``, ``train --resume OUT``).

    The model is the one ``ainet-gym train`` builds for the labels' scenario, action mode and
    ``obs_features`` (:func:`~ainet_gym.agents.sb3_agents.default_hyperparameters`, ``gamma`` overriding
    its discount). Loss: cross-entropy of the labels weighted per plan (``weighting``: ``"inv_sqrt"``, the
    inverse square root of the plan's frequency, or ``"none"``), or (``"regret"``) the policy's expected
    regret, the sum over plans of its probability times the plan's shortfall to the best plan's lookahead
    score (``scores``), over the mean shortfall: a decision where the plans score alike costs nothing
    whatever the policy answers, and one with much at stake costs in proportion; plus the squared error of the value
    network against the discounted returns of the labelled trajectories. ``obs_features=()`` drops the
    labels' optional observation blocks (appended last, so the default observation is their first
    columns): the same labels, from what the default observation carries. ``scenario``: the labels'
    scenario when it is not a shipped one (a dict or path; default: the name the labels record). Returns the accuracy of the
    deterministic policy (its most likely plan) on ``labels`` and on ``val``, the accuracy of always
    answering the most frequent label of ``labels``, and the seconds.

    Raises
    ------
    ValueError
        Naming a bad ``weighting``, ``epochs`` or labels of another env.
    """
    import torch

    from ainet_gym.agents.sb3_agents import algo_class, default_hyperparameters, save_model

    if weighting not in ("inv_sqrt", "none", "regret"):
        raise ValueError(f"weighting = {weighting!r}: allowed: inv_sqrt, none, regret")
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs = {epochs!r}: allowed: an integer >= 1")
    torch.set_num_threads(1)  # small MLPs run fastest on one thread (as ainet-gym train does)
    t0 = time.perf_counter()
    sc, venv, obs_features = _clone_env(labels, obs_features, scenario, n_envs)
    X, y = _clone_samples(labels, venv)
    hp = default_hyperparameters("ppo", venv.core.episode_steps, n_envs)
    if gamma is not None:
        hp["gamma"] = float(gamma)
    torch.manual_seed(seed)
    model = algo_class("ppo")("MlpPolicy", venv, seed=seed, device="cpu", **hp)
    K = int(venv.action_space.n)
    majority = int(np.argmax(np.bincount(y, minlength=K)))
    ret = _returns(np.asarray(labels["reward"], dtype=np.float64), int(labels["meta"][4]), float(model.gamma))
    weights = _sample_weights(y, np.asarray(labels["scores"], dtype=np.float64), K, weighting)
    _fit_policy(
        model.policy, X, y, ret, weights, weighting == "regret", epochs, batch_size, learning_rate, seed
    )
    result = _clone_report(model.policy, labels, val, X.shape[1], majority, obs_features)
    result["seconds"] = time.perf_counter() - t0
    meta = _clone_metadata(labels, sc, venv, out, seed, n_envs, epochs, weighting, result)
    result["model_path"] = str(save_model(model, out, meta))
    venv.close()
    return result


def _clone_env(
    labels: dict[str, Any], obs_features: tuple[str, ...] | None, scenario: Any, n_envs: int
) -> tuple[Any, Any, tuple[str, ...]]:
    """The scenario, the SB3 vector env of ``n_envs`` copies that :func:`behaviour_clone`'s model is built
    on (the labels' scenario, or ``scenario``; their action mode, history and steps; ``obs_features``,
    default the labels'), and those observation features."""
    from ainet_gym.envs.sb3_vec_env import SB3VecEnv
    from ainet_gym.scenario.loader import load_scenario

    name, mode, feats, history, steps = (str(x) for x in labels["meta"][:5])
    if obs_features is None:
        obs_features = tuple(f for f in feats.split(",") if f)
    sc = load_scenario(name if scenario is None else scenario)
    venv = SB3VecEnv(
        num_envs=n_envs, scenario=sc, action_mode=mode, history=int(history), episode_steps=int(steps),
        **({"obs_features": obs_features} if obs_features else {}),
    )  # fmt: skip
    return sc, venv, obs_features


def _clone_samples(labels: dict[str, Any], venv: Any) -> tuple[np.ndarray, np.ndarray]:
    """(N, D) float32 observations (the first D columns of the labels', those of ``venv``: with
    ``obs_features=()`` the default blocks) and (N,) int64 labels of :func:`behaviour_clone`; refuses
    labels whose observations the env does not give."""
    D = int(venv.observation_space.shape[0])
    X = np.asarray(labels["obs"], dtype=np.float32)[:, :D]  # obs_features=(): the default blocks
    if X.shape[1:] != venv.observation_space.shape:
        raise ValueError(
            f"labels: observations of shape {X.shape[1:]}, the env of their metadata gives "
            f"{venv.observation_space.shape}"
        )
    return X, np.asarray(labels["label"], dtype=np.int64)


def _clone_report(
    policy: Any,
    labels: dict[str, Any],
    val: dict[str, Any] | None,
    D: int,
    majority: int,
    obs_features: tuple[str, ...],
) -> dict[str, Any]:
    """:func:`behaviour_clone`'s result: the fitted policy's accuracy on ``labels`` and ``val``, the
    ``majority`` plan and the accuracy of always answering it, the policy on the other plans' decisions
    (:func:`_clone_minority`), and the observation features."""
    y = np.asarray(labels["label"], dtype=np.int64)
    return {
        "train_accuracy": _clone_accuracy(policy, labels, D),
        "val_accuracy": _clone_accuracy(policy, val, D),
        "majority_plan": str(labels["plans"][majority]),
        "train_majority_accuracy": float((y == majority).mean()),
        "val_majority_accuracy": None
        if val is None
        else float((np.asarray(val["label"]) == majority).mean()),
        "train_other_plans": _clone_minority(policy, labels, D, majority),
        "val_other_plans": _clone_minority(policy, val, D, majority),
        "obs_features": list(obs_features),
    }


def _clone_metadata(
    labels: dict[str, Any],
    sc: Any,
    venv: Any,
    out: str | Path,
    seed: int,
    n_envs: int,
    epochs: int,
    weighting: str,
    result: dict[str, Any],
) -> dict[str, Any]:
    """The metadata :func:`behaviour_clone` saves with its model: ``ainet-gym train``'s (so that ``evaluate
    ppo:OUT`` and ``train --resume OUT`` take it), plus ``behaviour_cloning``: the samples, epochs, weighting,
    the lookahead's base and horizon and the ``result`` (less its seconds)."""
    from ainet_gym.agents.train import TrainConfig, meta_maker

    mode, history = str(labels["meta"][1]), int(labels["meta"][3])
    cfg = TrainConfig(scenario=sc, algo="ppo", action_mode=mode, seed=seed, n_envs=n_envs)
    meta = meta_maker(
        cfg, "ppo", mode, history, "flat", venv.core, sc.name, f"bc-{Path(out).stem}", venv, None
    )(0)
    meta["behaviour_cloning"] = {
        "samples": len(labels["label"]), "epochs": epochs, "weighting": weighting,
        "lookahead_base": str(labels["meta"][5]), "lookahead_h": int(labels["meta"][6]),
        **{k: v for k, v in result.items() if k != "seconds"},
    }  # fmt: skip
    return meta


def _sample_weights(y: np.ndarray, scores: np.ndarray, K: int, weighting: str) -> np.ndarray:
    """The loss weights of :func:`behaviour_clone`: (N,) per sample, the inverse square root of its label's
    frequency (``"inv_sqrt"``) or 1 (``"none"``), normalised to mean 1; or (``"regret"``) (N, K) each plan's
    shortfall to the best plan's lookahead score, over the mean shortfall."""
    if weighting == "regret":
        short = scores.max(axis=1, keepdims=True) - scores  # (N, K) >= 0
        return short / max(float(short.mean()), 1e-300)
    freq = np.bincount(y, minlength=K).astype(np.float64)
    cw = (
        np.where(freq > 0, 1.0 / np.sqrt(np.maximum(freq, 1.0)), 0.0)
        if weighting == "inv_sqrt"
        else np.ones(K)
    )
    return (cw / cw[y].mean())[y]  # mean weight 1 over the samples


def _fit_policy(
    policy: Any,
    X: np.ndarray,
    y: np.ndarray,
    ret: np.ndarray,
    weights: np.ndarray,
    regret: bool,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
) -> None:
    """The training loop of :func:`behaviour_clone`: Adam over shuffled minibatches of the weighted
    cross-entropy of the labels ``y`` (``weights`` (N,) per sample), or with ``regret`` the expected regret
    (``weights`` (N, K), each plan's normalised shortfall), plus half the squared error of the value network
    against the returns ``ret``."""
    import torch

    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    wt, rt = torch.as_tensor(weights, dtype=torch.float32), torch.as_tensor(ret, dtype=torch.float32)
    opt = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    policy.set_training_mode(True)
    for _ in range(epochs):
        for idx in np.array_split(rng.permutation(len(y)), max(1, len(y) // batch_size)):
            i = torch.as_tensor(idx)
            values, logp, _ = policy.evaluate_actions(Xt[i], yt[i])
            if regret:
                probs = policy.get_distribution(Xt[i]).distribution.probs
                fit = (probs * wt[i]).sum(dim=1).mean()
            else:
                fit = -(wt[i] * logp).mean()
            loss = fit + 0.5 * ((values.flatten() - rt[i]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    policy.set_training_mode(False)


def _clone_predict(policy: Any, d: dict[str, Any], D: int) -> np.ndarray:
    """The deterministic policy's plan (its most likely) for each observation of the labels ``d``."""
    import torch

    with torch.no_grad():
        dist = policy.get_distribution(torch.as_tensor(np.asarray(d["obs"], dtype=np.float32)[:, :D]))
        return dist.distribution.probs.argmax(dim=1).numpy()


def _clone_accuracy(policy: Any, d: dict[str, Any] | None, D: int) -> float | None:
    """The share of the labels ``d`` that the deterministic policy answers (``None`` without labels)."""
    if d is None:
        return None
    return float((_clone_predict(policy, d, D) == np.asarray(d["label"])).mean())


def _clone_minority(policy: Any, d: dict[str, Any] | None, D: int, majority: int) -> dict[str, Any] | None:
    """Of the decisions labelled with another plan than the majority's: how many the policy gets right
    (recall), and of those it answers with another plan, how many are right (precision)."""
    if d is None:
        return None
    pred, lab = _clone_predict(policy, d, D), np.asarray(d["label"])
    other, says = lab != majority, pred != majority
    return {
        "labels_other": int(other.sum()),
        "policy_other": int(says.sum()),
        "recall": float((pred == lab)[other].mean()) if other.any() else None,
        "precision": float((pred == lab)[says].mean()) if says.any() else None,
    }


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
    return _save_knn(out, x, labels, k, block, extra, metadata)


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


def _knn_block(labels: dict[str, Any], block: str, scenario: Any) -> slice | np.ndarray:
    """The columns of the observation block(s) ``block`` (:func:`knn_columns`) in the env the labels were
    made in (their scenario, or ``scenario``; their action mode, history, steps and observation features)."""
    from ainet_gym.envs.env import EnvCore

    name, mode, feats, history, steps = (str(x) for x in labels["meta"][:5])
    feats_t = tuple(f for f in feats.split(",") if f)
    core = EnvCore(
        name if scenario is None else scenario, action_mode=mode, history=int(history),
        episode_steps=int(steps), obs_features=feats_t,
    )  # fmt: skip
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


def _save_knn(
    out: str | Path,
    x: np.ndarray,
    labels: dict[str, Any],
    k: int,
    block: str,
    extra: dict[str, np.ndarray],
    metadata: dict[str, Any] | None,
) -> Path:
    """Write :func:`fit_knn`'s file (:data:`KNN_FIELDS`, the optional ``extra`` and the :data:`KNN_META`
    member) to ``out``; returns its path (``.npz`` appended unless there, as ``np.savez`` does)."""
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
        **extra,
        **({} if metadata is None else {KNN_META: np.array(json.dumps(metadata, indent=1))}),
    )
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")


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


def load_knn(path: str | Path) -> dict[str, Any]:
    """The arrays of a knn policy file (:func:`fit_knn`), checked, and its metadata record: ``x`` (N, D)
    float64, ``y`` (N,) int64, ``k``, ``block``, ``meta`` and ``plans`` (lists of str), ``metadata`` (the
    :data:`KNN_META` object, ``{}`` without one).

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
    }


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
    """The :data:`KNN_FIELDS` arrays and the optional :data:`KNN_META` member of the archive ``p``, read
    without pickle after its unpacked size is checked against the model-file ceiling."""
    import zipfile

    from ainet_gym.agents.model_files import MODEL_LIMITS, ModelFileError

    try:
        with zipfile.ZipFile(p) as z:
            unpacked = sum(i.file_size for i in z.infolist())
    except (zipfile.BadZipFile, OSError) as e:
        raise ModelFileError(f"{what}: not an .npz archive ({e})") from None
    if unpacked > MODEL_LIMITS["file_bytes"]:
        raise ModelFileError(
            f"{what}: {unpacked:,} bytes unpacked, above the ceiling of {MODEL_LIMITS['file_bytes']:,} "
            "(ainet_gym.agents.model_files.MODEL_LIMITS['file_bytes']); not reading it"
        )
    try:
        with np.load(p, allow_pickle=False) as z:
            missing = [f for f in KNN_FIELDS if f not in z.files]
            if missing:
                raise ModelFileError(
                    f"{what}: no field {', '.join(missing)}; a knn policy holds {', '.join(KNN_FIELDS)} "
                    "(python -m ainet_gym.agents.imitate knn)"
                )
            arrays = {f: z[f] for f in (*KNN_FIELDS, *KNN_OPTIONAL) if f in z.files}
            extra = z[KNN_META] if KNN_META in z.files else None
    except ValueError as e:
        if isinstance(e, ModelFileError):
            raise
        raise ModelFileError(
            f"{what}: refusing an object (pickled) array or unreadable member ({e})"
        ) from None
    return arrays, extra


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


class KnnAgent:
    """``knn:PATH``: the k-nearest-neighbour imitation of the lookahead saved by :func:`fit_knn`, acting in
    the ``choose`` mode of its labels with their ``obs_features`` (class of the mode's plans). A learned
    policy: it reads only the observation."""

    level = "action"
    learned = True

    def __init__(self, path: str) -> None:
        z = load_knn(path)
        self.x, self.y, self.k, self.block = z["x"], z["y"], z["k"], z["block"]
        self.plans, self.meta, self.q = z["plans"], z["metadata"], z["q"]
        self.margin, self.fallback = z["margin"], z["fallback"]
        self.vote_plans = z["vote_plans"]  # None: every plan
        self.cooldown, self._cool_plan = z["cooldown"]  # 0: none
        self._left: np.ndarray | None = None  # steps of cooldown left per env (cooldown > 0)
        self.scale = z["scale"]  # None: raw columns
        self.prev_scale = z["previous_plan"]  # None: the observation only
        self.obs_block = split_previous_plan(self.block)[0]
        self._prev: np.ndarray | None = None  # the plan of each env's previous decision (-1: none yet)
        meta = z["meta"]
        self.path = path
        self.scenario = meta[0]
        self.name = "knn"
        feats = tuple(f for f in meta[2].split(",") if f)
        self.env_kwargs: dict[str, Any] = {"action_mode": meta[1], "history": int(meta[3])}
        if feats:
            self.env_kwargs["obs_features"] = feats
        extra = extra_plans_of(meta[1], self.plans)
        if extra:
            self.env_kwargs["extra_plans"] = extra
        self._sq = (self.x**2).sum(axis=1)

    def check(self, core: Any) -> None:
        width = self.x.shape[1] - (0 if self.prev_scale is None else len(self.plans))
        check_plan_model(
            core, f"knn:{self.path}", "labelled", self.scenario, self.plans, self.obs_block, "x",
            self.x[:, :width],
        )  # fmt: skip

    def reset(self, core: Any) -> None:
        self._left = None  # a new batch of episodes: no cooldown running
        self._prev = None  # and no previous decision

    def act(self, core: Any, obs: Any) -> np.ndarray:
        """(batch,) :meth:`vote`'s plans; with a ``cooldown``, the fallback plan in the ``cooldown`` steps after
        a step that played another plan (state kept per env since :meth:`reset`); with the
        :data:`PREVIOUS_PLAN` block, the plans are remembered for the next decision's distance."""
        plan = self.vote(core, obs)
        if self.cooldown:
            if self._left is None or self._left.shape != plan.shape:
                self._left = np.zeros(plan.shape, dtype=np.int64)
            plan = np.where(self._left > 0, self._cool_plan, plan).astype(np.int64)
            self._left = np.where(
                self._left > 0, self._left - 1, np.where(plan != self._cool_plan, self.cooldown, 0)
            )
        if self.prev_scale is not None:
            self._prev = plan.copy()
        return plan

    def features(self, core: Any, obs: Any) -> np.ndarray:
        """(batch, D) the columns the distance reads: the observation's blocks, then (the
        :data:`PREVIOUS_PLAN` block) the one-hot of each env's previous plan times its scale (zeros before the
        first :meth:`act` since :meth:`reset`, or when the batch size changed); divided by ``scale`` if the file
        has one."""
        q = np.asarray(obs, dtype=np.float64)[:, knn_columns(core.obs_layout, self.obs_block)]
        if self.prev_scale is not None:
            prev = self._prev
            if prev is None or prev.shape != (q.shape[0],):
                prev = np.full(q.shape[0], -1, dtype=np.int64)
            q = np.concatenate([q, plan_one_hot(prev, len(self.plans), self.prev_scale)], axis=1)
        if self.scale is not None:
            q = q / self.scale  # the columns as the file's x holds them (fit_knn standardize)
        return q

    def vote(self, core: Any, obs: Any) -> np.ndarray:
        """(batch,) the plan most of the ``k`` nearest labelled decisions got (a file with ``q``: the plan of
        the best mean value over them, :data:`KNN_VOTES`, among its ``vote_plans`` if it has them; with a
        ``margin``: the ``fallback`` plan where the best mean value exceeds the fallback's by less than the
        margin)."""
        q = self.features(core, obs)
        d = (q**2).sum(axis=1)[:, None] - 2.0 * q @ self.x.T + self._sq[None, :]  # (B, N) squared distances
        k = min(self.k, self.y.shape[0])
        nn = np.argpartition(d, k - 1, axis=1)[:, :k]
        if self.q is not None:
            v = self.q[nn].mean(axis=1)  # (B, K) mean value of each plan over the neighbours
            rows = np.arange(v.shape[0])
            best = np.argmax(
                v if self.vote_plans is None else np.where(self.vote_plans, v, -np.inf), axis=1
            ).astype(np.int64)  # among the vote plans only (fit_knn vote_plans)
            if self.margin is None:
                return best
            gain = (
                v[rows, best] - v[:, self.fallback]
            )  # the switch's value over the fallback (a vote plan or not)
            return np.where(gain < self.margin, self.fallback, best).astype(np.int64)
        votes = np.zeros((q.shape[0], len(self.plans)))
        np.add.at(votes, (np.repeat(np.arange(q.shape[0]), k), self.y[nn].reshape(-1)), 1.0)
        return np.argmax(votes, axis=1).astype(np.int64)


def _register() -> None:
    from ainet_gym.agents.registry import register_agent

    register_agent(
        "knn",
        KnnAgent,
        needs_arg=True,
        arg_help="PATH",
        description="k-nearest-neighbour imitation of the lookahead over the choose_bg plans (imitate knn)",
        overwrite=True,
    )


_register()


#: The fields every label file of ``label`` holds (:func:`lookahead_labels`); ``clone``, ``knn`` and
#: ``qfit`` read them.
LABEL_FIELDS = ("obs", "label", "plans", "meta")


def _load(path: str | Path) -> dict[str, Any]:
    """The arrays of the label file ``path`` (.npz of ``label``), read without pickle; a ``ValueError``
    naming the file and what is allowed if it is missing, not an .npz archive, holds an object array or
    lacks a field of :data:`LABEL_FIELDS`."""
    import zipfile

    allowed = f"allowed: an .npz of labels from 'python -m ainet_gym.agents.imitate label' ({', '.join(LABEL_FIELDS)})"
    if not Path(path).is_file():
        what = "is a directory" if Path(path).is_dir() else "not found"
        raise ValueError(f"labels {str(path)!r}: {what}; {allowed}")
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files"):  # a .npy: one array, not an archive
                raise ValueError("one array, not an archive")
            out = {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        text = " ".join(str(e).split())[:120] or type(e).__name__
        raise ValueError(f"labels {str(path)!r}: not a readable label file ({text}); {allowed}") from None
    missing = [f for f in LABEL_FIELDS if f not in out]
    if missing:
        raise ValueError(f"labels {str(path)!r}: no field {', '.join(missing)}; {allowed}")
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


def _player(
    path: str, scenario: str, action_mode: str, feats: tuple[str, ...], plans: tuple[str, ...] | None = None
) -> Any:
    """The deterministic plan choice of a saved policy, as a function of the batch's observations: a
    ``knn`` policy file (.npz, :func:`fit_knn`), a ``qnet`` one (.npz with a ``layers`` field,
    :func:`ainet_gym.agents.qnet.fit_qnet`) or a PPO model (.zip). A knn or qnet file must pick among
    ``plans`` (the labelling env's, when given), in that order: a ValueError otherwise."""
    if str(path).endswith(".npz"):
        from types import SimpleNamespace

        from ainet_gym.agents.qnet import QnetAgent, is_qnet_file
        from ainet_gym.envs.env import EnvCore

        agent: Any = QnetAgent(path) if is_qnet_file(path) else KnnAgent(path)
        if plans is not None and list(agent.plans) != list(plans):
            raise ValueError(
                f"policy {path!r}: picks among the plans {list(agent.plans)}; allowed as a label player here: "
                f"one of the plans {list(plans)} (--action-mode, --extra-plans)"
            )
        if getattr(agent, "cooldown", 0):
            raise ValueError(
                f"policy {path!r}: a knn file with a cooldown keeps state per episode; allowed as a label "
                "player: a file without one"
            )
        view = SimpleNamespace(
            obs_layout=EnvCore(scenario, action_mode=action_mode, obs_features=feats).obs_layout
        )
        return _AgentPlayer(agent, view)
    from ainet_gym.agents.sb3_agents import load_model

    model, _ = load_model(path, "ppo")
    return lambda o: model.predict(o, deterministic=True)[0]


class _AgentPlayer:
    """A knn or qnet agent as :func:`lookahead_labels`' ``policy``: called with the batch's observations,
    :meth:`reset` at the start of each batch of episodes (a knn file with the :data:`PREVIOUS_PLAN` block keeps
    the plan of each episode's previous decision)."""

    def __init__(self, agent: Any, view: Any) -> None:
        self.agent, self.view = agent, view

    def __call__(self, obs: Any) -> np.ndarray:
        return self.agent.act(self.view, obs)

    def reset(self) -> None:
        self.agent.reset(self.view)


def _concat(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Label sets of one env (the same ``meta``) joined one after the other."""
    keys = (
        "obs",
        "label",
        "scores",
        "reward",
        "seed",
        "t",
        "gpu_utilization",
        "played",
        "tail",
        "excess",
        "step_ratio",
        "step_iters",
    )
    out = {k: np.concatenate([q[k] for q in parts]) for k in keys if all(k in q for q in parts)}
    out["plans"], out["meta"] = parts[0]["plans"], parts[0]["meta"]
    out.update({k: parts[0][k] for k in ("redraw",) if k in parts[0]})
    return out


def _add_label_parser(sub: Any) -> None:
    """``label``'s arguments (:func:`lookahead_labels`)."""
    from ainet_gym.agents.outputs import (  # --batch 0 failed inside range(), -1 saved no labels
        float_arg,
        int_arg,
    )
    from ainet_gym.sim.redraw import add_redraw_args

    s = sub.add_parser("label", help="play episodes along the lookahead over the plans; save the labels")
    s.add_argument("scenario")
    s.add_argument("--seeds", required=True, help="e.g. 2000000-2000039 (never the held-out 1-10)")
    s.add_argument("--h", type=int_arg(1), default=DEFAULT_H, help="lookahead intervals")
    s.add_argument(
        "--base",
        default=DEFAULT_BASE,
        help="the policy of the lookahead's later intervals (e.g. burst-lp+bg)",
    )
    s.add_argument("--action-mode", default="choose_bg")
    s.add_argument(
        "--extra-plans",
        default="",
        help="comma list of plans appended to the mode's (e.g. isolate0+bg,isolate1+bg; the weighted plans "
        "favour0+bg,favour1+bg or favour0-w4+bg make the class jobs+bg+weights)",
    )
    s.add_argument("--obs-features", default="phase", help="comma list; empty for the default observation")
    s.add_argument("--batch", type=int_arg(1), default=10, help="episodes per batched run")
    s.add_argument("--out", required=True, help=".npz file")
    s.add_argument(
        "--objective",
        default=DEFAULT_OBJECTIVE,
        choices=OBJECTIVES,
        help="util: the plan of most ideal work over the lookahead (default); tail: minus a penalty on the "
        "GPU-seconds of step time above the base plan's worst step time / ideal over the lookahead",
    )
    s.add_argument(
        "--tail-slack",
        type=float_arg("a relative slack", zero_ok=True),
        default=DEFAULT_TAIL_SLACK,
        help="tail objective: relative slack on the base plan's worst step time / ideal (default 0)",
    )
    s.add_argument(
        "--tail-weight",
        type=float_arg("a penalty per GPU-second", zero_ok=True, inf_ok=True),
        default=DEFAULT_TAIL_WEIGHT,
        help="tail objective: penalty per GPU-second of step time above the threshold (default inf: a "
        "hard constraint)",
    )
    s.add_argument(
        "--policy",
        default=None,
        help="a knn or qnet policy (.npz) or ppo model (.zip) to play instead of the labels (DAgger)",
    )
    add_redraw_args(s)


def _add_clone_parser(sub: Any) -> None:
    """``clone``'s arguments (:func:`behaviour_clone`)."""
    from ainet_gym.agents.outputs import TRAIN_SEED_MAX, float_arg, int_arg, unit_interval_arg

    c = sub.add_parser("clone", help="fit a PPO policy to labels; save it as an ainet-gym train model")
    c.add_argument("labels", help=".npz of label (comma list: aggregated, e.g. DAgger rounds)")
    c.add_argument("--val", default=None, help=".npz of label on validation seeds (accuracy only)")
    c.add_argument("--out", required=True, help=".zip model path")
    c.add_argument("--epochs", type=int_arg(1), default=60)
    c.add_argument("--gamma", type=unit_interval_arg("a discount factor"), default=None)
    c.add_argument("--seed", type=int_arg(0, TRAIN_SEED_MAX), default=0)
    c.add_argument("--weighting", default="inv_sqrt", help="inv_sqrt | none | regret")
    c.add_argument("--lr", type=float_arg("a learning rate"), default=1e-3, help="Adam learning rate")
    c.add_argument(
        "--drop-obs-features", action="store_true", help="fit from the default observation blocks only"
    )


def _add_knn_parser(sub: Any) -> None:
    """``knn``'s arguments (:func:`fit_knn`)."""
    from ainet_gym.agents.outputs import float_arg, int_arg

    n = sub.add_parser("knn", help="save the k-nearest-neighbour policy of labels (evaluate knn:OUT)")
    n.add_argument("labels", help=".npz of label (comma list: aggregated)")
    n.add_argument("--k", type=int_arg(1), default=DEFAULT_K)
    n.add_argument("--out", required=True, help=".npz policy file")
    n.add_argument(
        "--blocks",
        default="job_phase",
        help="observation blocks the distance reads, comma list (e.g. job_phase,background); default job_phase; "
        f"{PREVIOUS_PLAN}: also the plan played at the previous decision (one-hot)",
    )
    n.add_argument(
        "--standardize",
        action="store_true",
        help="divide each column of the blocks by its standard deviation over the labels (field scale); "
        "default: raw columns",
    )
    n.add_argument(
        "--vote",
        default="label",
        choices=KNN_VOTES,
        help="label: the majority label of the k neighbours (default); value: the plan of the best mean "
        "lookahead value over them",
    )
    n.add_argument(
        "--value-weight",
        type=float_arg("a penalty per GPU-second", zero_ok=True),
        default=None,
        help="vote value: penalty per GPU-second of excess step time in the values (default: the labels' "
        "tail weight; required for labels of weight inf)",
    )
    n.add_argument(
        "--margin",
        type=float_arg("a difference of values", zero_ok=True),
        default=None,
        help="vote value: play --fallback where the best mean neighbour value exceeds the fallback's by "
        "less than this (default: none, always the best)",
    )
    n.add_argument(
        "--fallback",
        default=DEFAULT_FALLBACK,
        help=f"vote value with --margin: the plan played below the margin (default {DEFAULT_FALLBACK})",
    )
    n.add_argument(
        "--cooldown",
        type=int_arg(0),
        default=0,
        help="after a step playing a plan other than the fallback (--fallback with --margin, else "
        f"{DEFAULT_FALLBACK}), play the fallback for this many steps (default 0: none)",
    )
    n.add_argument(
        "--tail-cap",
        type=float_arg("a step time / ideal"),
        default=None,
        help="vote value: subtract --tail-penalty times how far each plan's lookahead worst step time / ideal "
        "exceeds max(this, the base plan's) from its values (default: none)",
    )
    n.add_argument(
        "--tail-penalty",
        type=float_arg("a value per unit of step time / ideal", zero_ok=True),
        default=0.0,
        help="vote value with --tail-cap: the penalty per unit of step time / ideal above the cap (default 0)",
    )
    n.add_argument(
        "--previous-plan-scale",
        type=float_arg("a scale"),
        default=None,
        help=f"with {PREVIOUS_PLAN} in --blocks: the scale of the previous plan's one-hot (default "
        f"{DEFAULT_PREVIOUS_PLAN_SCALE})",
    )
    n.add_argument(
        "--vote-plans",
        default=None,
        help="vote value: the plans the vote may pick, comma list (default: every plan), e.g. "
        "spray+bg,wcmp+bg,greedy+bg",
    )


def _add_qfit_parser(sub: Any) -> None:
    """``qfit``'s arguments (:func:`ainet_gym.agents.qnet.fit_qnet`)."""
    from ainet_gym.agents.outputs import TRAIN_SEED_MAX, float_arg, int_arg

    q = sub.add_parser("qfit", help="fit an MLP to the plans' lookahead values of labels (evaluate qnet:OUT)")
    q.add_argument("labels", help=".npz of label (comma list: aggregated)")
    q.add_argument("--out", required=True, help=".npz policy file")
    q.add_argument("--blocks", default="job_phase", help="observation blocks of the inputs, comma list")
    q.add_argument(
        "--value-weight",
        type=float_arg("a penalty per GPU-second", zero_ok=True),
        default=None,
        help="penalty per GPU-second of excess step time in the values (default: the labels' tail weight)",
    )
    q.add_argument("--hidden", default="64,64", help="hidden layer widths, comma list (default 64,64)")
    q.add_argument("--epochs", type=int_arg(1), default=40)
    q.add_argument("--batch-size", type=int_arg(1), default=256)
    q.add_argument("--lr", type=float_arg("a learning rate"), default=1e-3, help="Adam learning rate")
    q.add_argument("--seed", type=int_arg(0, TRAIN_SEED_MAX), default=0)


def _run_label(a: Any) -> int:
    """``label``: the lookahead's labels of ``a.seeds`` in batches of ``a.batch`` episodes, saved to ``a.out``."""
    from ainet_gym.agents.evaluate import parse_seeds
    from ainet_gym.routing.plans import CHOOSE_MODES, plans_of_mode

    seeds = parse_seeds(a.seeds)
    feats = tuple(f for f in a.obs_features.split(",") if f)
    extra = tuple(f.strip() for f in a.extra_plans.split(",") if f.strip())
    plans = plans_of_mode(a.action_mode, extra)[1] if a.action_mode in CHOOSE_MODES else None
    play = None
    if a.policy is not None:
        play = _player(a.policy, a.scenario, a.action_mode, feats, plans)
    from ainet_gym.sim.redraw import FutureRedraw

    redraw = None if not a.redraw_future else FutureRedraw(a.redraw_future, a.redraw_seed, a.redraw_window)
    parts = []
    for i in range(0, len(seeds), a.batch):
        part = lookahead_labels(
            a.scenario, seeds[i : i + a.batch], a.h, a.base, a.action_mode, feats, policy=play,
            objective=a.objective, tail_slack=a.tail_slack, tail_weight=a.tail_weight, extra_plans=extra,
            redraw=redraw,
        )  # fmt: skip
        parts.append(part)
        print(
            f"seeds {seeds[i]}..{seeds[min(i + a.batch, len(seeds)) - 1]}: GPU util played "
            f"{part['gpu_utilization'].mean():.4f}, p99 step/ideal {p99_step_ratio(part) or 0.0:.3f}, "
            f"{part['seconds']:.0f} s",
            flush=True,
        )
    out = _concat(parts)
    np.savez_compressed(a.out, **out)
    counts = np.bincount(out["label"], minlength=len(out["plans"]))
    print(
        f"{len(out['label'])} labels: "
        + ", ".join(f"{n} {int(c)}" for n, c in zip(out["plans"], counts))
        + f"; GPU util of the played episodes {out['gpu_utilization'].mean():.4f} over {len(seeds)}, "
        f"p99 step/ideal {p99_step_ratio(out):.3f}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.imitate label|clone ...``: lookahead labels, then behaviour cloning."""

    from ainet_gym.agents.outputs import OneLineParser  # one-line errors, as ainet-gym's

    p = OneLineParser(prog="python -m ainet_gym.agents.imitate", description=main.__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    _add_label_parser(sub)
    _add_clone_parser(sub)
    _add_knn_parser(sub)
    _add_qfit_parser(sub)
    for name in ("clone", "knn", "qfit"):
        sub.choices[name].add_argument(
            "--scenario",
            default=None,
            help="the labels' scenario when it is not a shipped one (a name or YAML path; default: the name "
            "the labels record)",
        )
    for s in sub.choices.values():  # the output rule of the ainet-gym commands: never replace a file unasked
        s.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    a = p.parse_args(argv)
    try:
        return _dispatch(a, argv)
    except (ValueError, OSError, ImportError, RuntimeError) as e:
        text = " ".join(str(e).split()) or type(e).__name__
        print(f"python -m ainet_gym.agents.imitate {a.cmd}: error: {text}", file=sys.stderr)
        return 2


def _out_path(a: Any) -> Path:
    """``a.out`` as the file the command writes (numpy adds ``.npz``, SB3 ``.zip``), checked by the output rule:
    not one of the label files read, not an existing file unless ``--overwrite``."""
    from ainet_gym.agents.outputs import check_out_file

    suffix = ".zip" if a.cmd == "clone" else ".npz"
    out = str(a.out) if str(a.out).endswith(suffix) else f"{a.out}{suffix}"
    inputs = [] if a.cmd == "label" else [x for x in a.labels.split(",") if x]
    if getattr(a, "val", None):
        inputs.append(a.val)
    return check_out_file(out, a.overwrite, inputs)


def _dispatch(a: Any, argv: list[str] | None) -> int:
    """Run the parsed subcommand ``a.cmd`` after checking its output path."""
    a.out = str(_out_path(a))
    if a.cmd == "qfit":
        from ainet_gym.agents.qnet import fit_qnet

        res = fit_qnet(
            _concat([_load(x) for x in a.labels.split(",")]), a.out, a.blocks, a.value_weight, a.hidden,
            a.epochs, a.seed, a.batch_size, a.lr, scenario=a.scenario,
            metadata={"algorithm": "qnet-imitation", "command": "python -m ainet_gym.agents.imitate "
                      + " ".join(argv if argv is not None else sys.argv[1:])},
        )  # fmt: skip
        print(json.dumps(res, indent=1))
        return 0
    if a.cmd == "knn":
        labels = _concat([_load(x) for x in a.labels.split(",")])
        path = fit_knn(
            labels, a.out, a.k, a.blocks, vote=a.vote, value_weight=a.value_weight, margin=a.margin,
            fallback=a.fallback, standardize=a.standardize, scenario=a.scenario,
            vote_plans=None if a.vote_plans is None else a.vote_plans.split(","), cooldown=a.cooldown,
            tail_cap=a.tail_cap, tail_penalty=a.tail_penalty, previous_plan_scale=a.previous_plan_scale,
        )  # fmt: skip
        print(f"knn policy: {path}")
        return 0
    if a.cmd == "label":
        return _run_label(a)
    res = behaviour_clone(
        _concat([_load(x) for x in a.labels.split(",")]), a.out, None if a.val is None else _load(a.val),
        a.epochs, learning_rate=a.lr, gamma=a.gamma, seed=a.seed, weighting=a.weighting,
        obs_features=() if a.drop_obs_features else None, scenario=a.scenario,
    )  # fmt: skip
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
