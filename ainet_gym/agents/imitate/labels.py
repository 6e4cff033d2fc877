"""The lookahead's labels: episodes played along a receding-horizon lookahead over the plans of a
``choose`` mode (or a policy's plans, DAgger), each decision labelled with the plan of the best
lookahead score (:func:`lookahead_labels`, :func:`pick_label`), and the step-time tail of the
played episodes (:func:`p99_step_ratio`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ainet_gym.errors import check_choice

#: the base policy of the lookahead's intervals after the first (the best plan played alone on
#: ``spine-leaf-2to1-jitter``: docs/learning.md)
DEFAULT_BASE = "spray+bg"
#: lookahead intervals (the twin's default, :data:`ainet_gym.agents.twin.DEFAULT_H`)
DEFAULT_H = 8
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
    hold: int = 1,
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
    maximum (docs/learning.md, "issue-26zr"); the labels' ``redraw`` field records (M, seed, window). With
    ``redraw.starts`` the job starts the observation hides are re-drawn too, and ``redraw_starts`` is 1
    (docs/learning.md, "issue-26zm2").

    ``fabric``: the fingerprint of the fabric the episodes were played on
    (:func:`~ainet_gym.fabric.topology.fabric_fingerprint`, a 0-d string): ``concat_labels`` and ``imitate
    knn`` refuse to join labels of different fabrics, and a knn file fitted on them refuses to play on another
    (docs/learning.md, "issue-26zf2").

    ``hold`` (1: today's lookahead): each plan is held for the first ``min(hold, h)`` intervals of its lookahead
    (its split recomputed each interval from the copy's own last interval), then ``base``; the decision is still
    taken every interval. ``hold = h`` scores each plan as held over the whole horizon (docs/learning.md,
    "issue-26zz"); the labels' ``hold`` field records a ``hold`` other than 1.

    Long because this docstring is the labels' reference (every array returned, every option); the code is
    under 50 lines, the checks, the cores and the play in helpers of their own.

    Raises
    ------
    ValueError
        If ``action_mode`` is not a ``choose`` mode, ``h < 1``, ``base`` is neither a stateless engine-level
        policy nor a weighted plan,
        ``objective`` is not one of :data:`OBJECTIVES`, ``tail_slack`` is negative or not finite,
        ``tail_weight`` is negative or nan, the ``"tail"`` objective's ``base`` is not a plan of the mode, or
        ``hold < 1``.
    """
    from ainet_gym.fabric.topology import fabric_fingerprint
    from ainet_gym.scenario.loader import load_scenario

    if not isinstance(hold, int) or hold < 1:
        raise ValueError(f"hold = {hold!r}: allowed: an integer >= 1 (intervals each plan is held)")

    _check_label_args(action_mode, h, base, objective, tail_slack, tail_weight)
    t0 = time.perf_counter()
    sc = load_scenario(scenario)
    core, look = _label_cores(
        sc, len(seeds), action_mode, history, steps, backend, obs_features, extra_plans, objective, base,
        1 if redraw is None else redraw.samples,
    )  # fmt: skip
    out = _play_and_label(
        core, look, seeds, h, base, tail_slack, objective, tail_weight, policy, redraw, hold
    )
    if hold != 1:
        out["hold"] = np.array(hold)
    if redraw is not None:
        out["redraw"] = np.array([redraw.samples, redraw.seed, redraw.window])
        if redraw.starts:
            out["redraw_starts"] = np.array(1)
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
    out["fabric"] = np.array(fabric_fingerprint(core.fabric))  # label_files.FABRIC_FIELD (issue-26zf2)
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
    hold: int = 1,
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
    hook = None if redraw is None else (lambda look_: look_.redraw_background(redraw, seeds, K))
    obs, _ = core.reset(list(seeds))
    if hasattr(policy, "reset"):
        policy.reset()  # a stateful player (_AgentPlayer): new episodes
    rec: dict[str, list[np.ndarray]] = {
        k: []
        for k in ("obs", "label", "scores", "reward", "played", "tail", "excess", "step_ratio", "step_iters")
    }
    for t in range(T):
        score, tail, excess = _score_plans(
            core, look, src, base_pol, min(h, T - t), plans, base, tail_slack, hook, hold
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
    hold: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One decision of :func:`lookahead_labels`: every plan of ``plans`` played for one interval on a copy
    of each of ``core``'s B instances (``look``, B x K instances, restored from ``core``'s snapshot at
    ``src``; held ``hold`` intervals, :func:`lookahead_labels`), then ``base_pol`` for the rest of the ``h``
    intervals; returns (B, K) each plan's ideal GPU-seconds
    (``score``), worst step time / ideal (``tail``) and GPU-seconds above the base plan's tail (``excess``,
    zero when ``base`` is not a plan)."""
    from ainet_gym.agents.twin_plan import instance_rows
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
    steps_ = [_ratios(look.last_result, work=True)]
    own = np.arange(look.batch) % K  # each copy's plan
    for _ in range(min(hold, h) - 1):  # the plan held (hold > 1), recomputed from the copy's last interval
        look.step_split(plan_split(look.routing_context, look.last_result, own, tuple(plans)))
        steps_.append(_ratios(look.last_result, work=True))
    if weighted or weighted_base:  # the base's intervals at its weights (a plain base: the scenario's)
        look.set_plan_weights([base] * look.batch)
    for _ in range(h - min(hold, h)):
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
