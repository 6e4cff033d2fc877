"""Direct policy search over the plans of a ``choose`` mode, scored on the closed-loop episode (issue-26zs).

The imitation students of the lookahead (``knn:PATH``, ``qnet:PATH``) are fitted to labels and never scored on
the objective they are judged by, which on ``ingest-bursts`` includes the tail (p99 step time / ideal). Here a
small parametric policy is fitted to that objective directly:

- **The policy** (:func:`plan_scores`): a linear scorer over a few observation blocks (``job_phase``,
  ``background``, ``episode_progress`` by default: the columns the k-NN students read) and a subset of the
  env's plans; each interval it plays the plan of the highest score. The first plan of the subset is the
  reference, score 0; the others have a weight per column and a bias (``theta``, ``(K - 1, D + 1)``).
- **The score** (:func:`candidate_score`): over a batch of training episodes, the mean GPU utilisation minus
  ``tail_weight`` times the excess of the fraction of job-iterations whose step time / ideal is above a
  threshold over ``tail_target``; the threshold is the pooled p99 of a static plan (``tail_plan``, e.g.
  ``favour0+bg``) on the same episodes, so the score asks for that plan's tail.
- **The search** (:func:`cem_search`): the cross-entropy method (diagonal Gaussian over ``theta``); every
  candidate of a generation plays the same training seeds (common random numbers), all in one batch of one
  :class:`~ainet_gym.envs.env.EnvCore`, beside the static ``tail_plan`` and ``mean_plan`` rows and the current
  mean; each generation draws fresh seeds.
- **A gate over a base policy** (issue-26zt): with ``base`` (a policy string, ``dps:PATH`` or ``knn:PATH``)
  and the reserved first plan :data:`BASE_PLAN`, the reference is the base policy's pick and the scorer only
  decides where another plan (``favour0+bg``) overrides it (score > 0); the search starts at "never override"
  (weights 0, bias ``init_bias`` < 0) and logs the base alone as a static row. ``antithetic`` draws the
  samples in mirrored pairs (mean +- std * eps) on the same episodes.
- **The file and the agent**: :func:`save_search_policy` / :func:`load_search_policy` (a plain .npz, read with
  ``allow_pickle=False``), :class:`SearchAgent` (``dps:PATH`` in ``evaluate``; class of its env's plans,
  ``jobs+bg+weights`` with a weighted plan).

Train::

    python -m ainet_gym.agents.search ingest-bursts --plans favour2+bg,favour0+bg,lp+bg,solo-lp+bg \\
        --episodes 16 --population 24 --elite 6 --generations 20 --seed 0 --out runs/dps-s0
    ainet-gym evaluate ingest-bursts --policies dps:runs/dps-s0/final.npz,favour2+bg,favour0+bg --seeds 100-109
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.agents.evaluate import step_ratios

__all__ = [
    "SearchAgent",
    "SearchConfig",
    "candidate_score",
    "cem_search",
    "floor_score",
    "load_search_policy",
    "plan_scores",
    "pooled_tail",
    "save_search_policy",
]

#: the arrays of a search policy file (:func:`save_search_policy`)
SEARCH_FIELDS = ("theta", "plans", "block", "meta")
#: the optional field of a gated policy file: the base policy's string
SEARCH_BASE = "base"
#: the reserved first plan of a gated policy: the base policy's pick
BASE_PLAN = "base"
#: the JSON member of a search policy file (the search's configuration and command)
SEARCH_META = "metadata"


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


def make_core(cfg: SearchConfig, batch: int, base: Any = None) -> Any:
    """The batched env of the search (its mode, extra plans and observation blocks; with a ``base`` agent,
    the env that agent plays in)."""
    from ainet_gym.envs.env import EnvCore

    kw: dict[str, Any] = {
        "action_mode": cfg.action_mode,
        "extra_plans": cfg.extra_plans,
        "obs_features": cfg.obs_features,
    }
    if base is not None:
        kw = {**kw, **base.env_kwargs}
    return EnvCore(cfg.scenario, batch=batch, episode_steps=cfg.episode_steps, **kw)


def make_base(spec: str, core: Any = None) -> Any:
    """The base agent of a gate (``spec`` a policy string), checked against ``core`` if given.

    Raises
    ------
    ValueError
        If the base is a gate itself, or not an agent that acts on the observation.
    """
    from ainet_gym.agents.registry import make_agent

    agent = make_agent(spec)
    if getattr(agent, "level", None) != "action" or getattr(agent, "base", None) is not None:
        raise ValueError(f"base {spec!r}: allowed: a learned action-level policy that is not a gate itself")
    if core is not None:
        agent.check(core)
    return agent


def plan_index(core: Any, plans: tuple[str, ...] | list[str]) -> np.ndarray:
    """(K,) the env action of each of ``plans`` (-1 for a first plan :data:`BASE_PLAN`: the base's pick).

    Raises
    ------
    ValueError
        If a plan is not one of the env's.
    """
    from ainet_gym.errors import names_message

    first = 1 if plans and plans[0] == BASE_PLAN else 0
    bad = [p for p in plans[first:] if p not in core.plans]
    if bad or not plans:
        raise ValueError(names_message("plans", list(plans), core.plans, more=" (the env's plans)"))
    return np.array([-1] * first + [core.plans.index(p) for p in plans[first:]], dtype=np.int64)


def rollout(
    core: Any,
    theta: np.ndarray,
    fixed: np.ndarray,
    plans: np.ndarray,
    cols: Any,
    seeds: list[int],
    base: Any = None,
) -> dict[str, np.ndarray]:
    """Play one episode per row (``core.batch == len(seeds)``): row ``r`` picks by ``theta[r]``
    (:func:`plan_scores`) unless ``fixed[r] >= 0`` (that env action every interval); a pick of plan -1 (a
    gate's reference) plays the ``base`` agent's action. Returns ``gpu`` (B,)
    the episode's mean GPU utilisation, ``ratio`` and ``iters`` (B, T, J) as ``evaluate`` records them,
    ``picks`` (B, K) how often each plan was picked."""
    obs, _ = core.reset(list(seeds))
    if base is not None:
        base.reset(core)
    T, B, J = core.episode_steps, core.batch, core.ideal_step_s.shape[1]
    gpu = np.zeros((B, T))
    ratio = np.zeros((B, T, J))
    iters = np.zeros((B, T, J), dtype=np.int64)
    picks = np.zeros((B, len(plans)), dtype=np.int64)
    for t in range(T):
        k = np.argmax(plan_scores(theta, np.asarray(obs)[:, cols]), axis=1)
        picks[np.arange(B), k] += 1
        a = plans[k]
        if base is not None:
            a = np.where(a >= 0, a, np.asarray(base.act(core, obs), dtype=np.int64))
        a = np.where(fixed >= 0, fixed, a).astype(np.int64)
        obs, _, _, _, info = core.step(a)
        gpu[:, t] = info["reward_gpu_utilization"]
        iters[:, t], ratio[:, t] = step_ratios(info)
    return {"gpu": gpu.mean(axis=1), "ratio": ratio, "iters": iters, "picks": picks}


def _generation(
    core: Any,
    cfg: SearchConfig,
    thetas: np.ndarray,
    plans: np.ndarray,
    cols: Any,
    seeds: list[int],
    base: Any = None,
) -> dict[str, Any]:
    """Score ``thetas`` (C, K - 1, D + 1) on ``seeds`` (the same for each), beside the static ``tail_plan``
    and ``mean_plan`` rows (the next two candidates) and, with a ``base``, the base alone (the last one):
    per candidate util, p99, fraction above the tail plan's p99, score."""
    C, S = thetas.shape[0], len(seeds)
    R = C + 2 + (base is not None)
    fixed = np.full(R, -1, dtype=np.int64)
    fixed[C] = core.plans.index(cfg.tail_plan)
    fixed[C + 1] = core.plans.index(cfg.mean_plan)
    rows_theta = np.repeat(np.concatenate([thetas, np.zeros((R - C, *thetas.shape[1:]))]), S, axis=0)
    r = rollout(core, rows_theta, np.repeat(fixed, S), plans, cols, list(seeds) * R, base)
    util = r["gpu"].reshape(R, S)
    ratio = r["ratio"].reshape((R, S, *r["ratio"].shape[1:]))
    iters = r["iters"].reshape(ratio.shape)
    tau = pooled_tail(ratio[C], iters[C])[0]
    tails = [pooled_tail(ratio[c], iters[c], tau) for c in range(R)]
    floor = mean_floor(util[C + 1], cfg.floor_z)
    if cfg.score == "floor":
        score = np.array([floor_score(util[c].mean(), tails[c][1], floor) for c in range(R)])
    else:
        score = np.array([candidate_score(util[c].mean(), tails[c][1], cfg) for c in range(R)])
    return {
        "util": util,
        "p99": np.array([t[0] for t in tails]),
        "frac": np.array([t[1] for t in tails]),
        "score": score,
        "tau": tau,
        "floor": floor,
        "picks": r["picks"].reshape(R, S, -1).sum(axis=1),
    }


def _width(core: Any, cols: Any) -> int:
    """The number of observation columns ``cols`` (a slice or an index array) selects."""
    return int(np.arange(core.observation_space.shape[-1])[cols].shape[0])


def _check_config(cfg: SearchConfig) -> None:
    """Refuse a configuration the search cannot run (one line each)."""
    if len(set(cfg.plans)) != len(cfg.plans) or len(cfg.plans) < 2:
        raise ValueError(f"plans = {cfg.plans!r}: allowed: at least two distinct plans of the env")
    for name, lo, v in (("episodes", 1, cfg.episodes), ("population", 2, cfg.population),
                        ("generations", 1, cfg.generations), ("elite", 1, cfg.elite)):  # fmt: skip
        if not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} = {v!r}: allowed: an integer >= {lo}")
    if cfg.antithetic and cfg.population % 2:
        raise ValueError(f"population = {cfg.population}: allowed with antithetic: an even number")
    if (BASE_PLAN in cfg.plans[1:]) or ((cfg.plans[0] == BASE_PLAN) != bool(cfg.base)):
        raise ValueError(
            f"plans = {cfg.plans!r}, base = {cfg.base!r}: allowed: a base exactly when the first plan is "
            f"{BASE_PLAN!r}"
        )
    if cfg.elite > cfg.population:
        raise ValueError(f"elite = {cfg.elite}: allowed: at most population ({cfg.population})")
    if cfg.score not in ("penalty", "floor"):
        raise ValueError(f"score = {cfg.score!r}: allowed: 'penalty', 'floor'")
    if not (cfg.tail_weight >= 0 and cfg.init_std > 0 and cfg.min_std >= 0):
        raise ValueError(
            "tail_weight, init_std, min_std: allowed: tail_weight >= 0, init_std > 0, min_std >= 0"
        )


def cem_search(cfg: SearchConfig, out: str | Path | None = None, log: Any = None) -> dict[str, Any]:
    """The cross-entropy method over ``theta`` (:func:`plan_scores`) on the closed-loop score
    (:func:`candidate_score`). Generation ``g`` plays ``population`` samples of N(mean, std^2) and the mean
    itself on the seeds ``first_seed + g * episodes + (0 .. episodes - 1)``; the mean and std become those of
    the ``elite`` best samples (std floored at ``min_std``). With ``out`` (a folder), writes ``log.jsonl`` (one
    line per generation), ``gen-G.npz`` after each generation of ``checkpoints`` and ``final.npz``.
    ``log``: called with each generation's record. Returns ``mean``, ``std``, ``history``."""
    _check_config(cfg)
    rng = np.random.default_rng(cfg.seed)
    base = make_base(cfg.base) if cfg.base else None
    core = make_core(cfg, (cfg.population + 3 + (base is not None)) * cfg.episodes, base)
    core.reset([cfg.first_seed] * core.batch)
    if base is not None:
        base.check(core)
    from ainet_gym.agents.imitate import knn_columns

    cols = knn_columns(core.obs_layout, cfg.block)
    plans = plan_index(core, cfg.plans)
    D = _width(core, cols)
    shape = (len(cfg.plans) - 1, D + 1)
    mean = np.zeros(shape)
    mean[:, -1] = cfg.init_bias
    std = np.full(shape, cfg.init_std)
    history: list[dict[str, Any]] = []
    outdir = None if out is None else Path(out)
    if outdir is not None:
        outdir.mkdir(parents=True, exist_ok=True)
    for g in range(cfg.generations):
        t0 = time.process_time()
        samples = mean + std * _draw(rng, cfg.population, shape, cfg.antithetic)
        thetas = np.concatenate([samples, mean[None]])
        seeds = [cfg.first_seed + g * cfg.episodes + i for i in range(cfg.episodes)]
        res = _generation(core, cfg, thetas, plans, cols, seeds, base)
        order = np.argsort(-res["score"][: cfg.population], kind="stable")
        elite = samples[order[: cfg.elite]]
        rec = _record(g, seeds, res, cfg, float(std.mean()), time.process_time() - t0)
        mean = elite.mean(axis=0)
        std = np.sqrt(elite.var(axis=0) + cfg.min_std**2)
        history.append(rec)
        if log is not None:
            log(rec)
        if outdir is not None:
            with open(outdir / "log.jsonl", "a") as f:
                f.write(json.dumps(rec) + "\n")
            if g + 1 in cfg.checkpoints:
                save_search_policy(outdir / f"gen-{g + 1}.npz", mean, cfg, {"generation": g + 1})
    if outdir is not None:
        save_search_policy(outdir / "final.npz", mean, cfg, {"generation": cfg.generations})
    return {"mean": mean, "std": std, "history": history}


def _draw(rng: np.random.Generator, n: int, shape: tuple[int, ...], antithetic: bool) -> np.ndarray:
    """(n, *shape) standard normal draws; ``antithetic``: pairs (eps, -eps)."""
    if not antithetic:
        return rng.standard_normal((n, *shape))
    eps = rng.standard_normal((n // 2, *shape))
    return np.stack([eps, -eps], axis=1).reshape((n, *shape))


def _record(g: int, seeds: list[int], res: dict[str, Any], cfg: SearchConfig, std: float, cpu: float) -> dict:
    """One generation's log line: the incumbent mean's row (index population), the best sample, the static
    rows; util = mean over the episodes; gain = paired mean over ``mean_plan``."""
    P = cfg.population
    u = res["util"].mean(axis=1)
    best = int(np.argmax(res["score"][:P]))
    rec = {
        "generation": g + 1,
        "seeds": [seeds[0], seeds[-1]],
        "tau": res["tau"],
        "floor": res["floor"],
        "mean_policy": {"util": u[P], "p99": res["p99"][P], "frac": res["frac"][P], "score": res["score"][P],
                        "gain": float((res["util"][P] - res["util"][P + 2]).mean()),
                        "picks": res["picks"][P].tolist()},
        "best_sample": {"util": u[best], "p99": res["p99"][best], "frac": res["frac"][best],
                        "score": res["score"][best]},
        "elite_score": float(np.sort(res["score"][:P])[::-1][: cfg.elite].mean()),
        cfg.tail_plan: {"util": u[P + 1], "p99": res["p99"][P + 1], "frac": res["frac"][P + 1]},
        cfg.mean_plan: {"util": u[P + 2], "p99": res["p99"][P + 2], "frac": res["frac"][P + 2]},
        "std": std,
        "cpu_s": cpu,
    }  # fmt: skip
    if u.shape[0] > P + 3:  # the base alone (a gate's search)
        rec[BASE_PLAN] = {"util": u[P + 3], "p99": res["p99"][P + 3], "frac": res["frac"][P + 3],
                          "score": res["score"][P + 3]}  # fmt: skip
    return rec


# ---------------------------------------------------------------------------------------------- the file
def save_search_policy(
    path: str | Path, theta: np.ndarray, cfg: SearchConfig, extra: dict | None = None
) -> Path:
    """Write ``theta`` (K - 1, D + 1) and what plays it: the plans, the block, the env (scenario, mode,
    observation blocks, extra plans) and the configuration as JSON."""
    meta = np.array([cfg.scenario, cfg.action_mode, ",".join(cfg.obs_features), ",".join(cfg.extra_plans)])
    info = {"algorithm": "dps-cem-linear", "config": asdict(cfg), **(extra or {})}
    p = Path(path)
    arrays = {"base": np.array(cfg.base)} if cfg.base else {}
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
    (a gate's base policy string, or None).

    Raises
    ------
    ModelFileError
        One line naming the file and what is wrong (not an .npz, a missing or ill-shaped field, an object array).
    ModelNotFoundError
        If the file does not exist.
    """
    from ainet_gym.agents.model_files import check_size, existing, json_member, read_npz_members

    what = f"dps policy {str(path)!r}"
    p = existing(path, "dps policy")
    check_size(p, what)
    holds = f"a dps policy holds {', '.join(SEARCH_FIELDS)}"
    arrays = read_npz_members(
        p, what, SEARCH_FIELDS, holds, lambda f: f in (*SEARCH_FIELDS, SEARCH_META, SEARCH_BASE)
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
    }


class SearchAgent:
    """``dps:PATH``: a linear plan scorer fitted by direct policy search (:func:`cem_search`), acting in the
    ``choose`` mode of its file with its observation blocks and extra plans (class of the env's plans). A
    learned policy: it reads only the observation. A gate (a file with a ``base``) plays its base agent's
    action where no other plan scores above 0, in the base's env."""

    level = "action"
    learned = True

    def __init__(self, path: str) -> None:
        z = load_search_policy(path)
        self.theta, self.plans, self.block = z["theta"], z["plans"], z["block"]
        self.scenario, self.metadata = z["scenario"], z["metadata"]
        self.path = path
        self.name = "dps"
        self.env_kwargs: dict[str, Any] = {"action_mode": z["action_mode"]}
        if z["obs_features"]:
            self.env_kwargs["obs_features"] = z["obs_features"]
        if z["extra_plans"]:
            self.env_kwargs["extra_plans"] = z["extra_plans"]
        self._actions: np.ndarray | None = None
        self.base = None if z["base"] is None else make_base(z["base"])
        if self.base is not None:
            self.env_kwargs = dict(self.base.env_kwargs)

    def check(self, core: Any) -> None:
        """Refuse an env of another scenario, without the file's plans or with another block width."""
        from ainet_gym.agents.imitate import knn_columns

        label = f"dps:{self.path}"
        if core.scenario.name != self.scenario:
            raise ValueError(
                f"{label}: fitted on scenario {self.scenario!r}, evaluated on {core.scenario.name!r}"
            )
        try:
            self._actions = plan_index(core, self.plans)
            width = _width(core, knn_columns(core.obs_layout, self.block))
        except ValueError as e:
            raise ValueError(f"{label}: {e}") from None
        if width != self.theta.shape[1] - 1:
            raise ValueError(
                f"{label}: field 'theta' reads {self.theta.shape[1] - 1} columns; the block has {width}"
            )
        if self.base is not None:
            self.base.check(core)

    def reset(self, core: Any) -> None:
        if self.base is not None:
            self.base.reset(core)

    def act(self, core: Any, obs: Any) -> np.ndarray:
        """(batch,) the env action of the plan of the highest score (ties: the earlier plan of the file)."""
        from ainet_gym.agents.imitate import knn_columns

        if self._actions is None:
            self._actions = plan_index(core, self.plans)
        x = np.asarray(obs, dtype=np.float64)[:, knn_columns(core.obs_layout, self.block)]
        a = self._actions[np.argmax(plan_scores(self.theta, x), axis=1)]
        if self.base is not None:
            a = np.where(a >= 0, a, np.asarray(self.base.act(core, obs), dtype=np.int64))
        return a.astype(np.int64)


def _register() -> None:
    from ainet_gym.agents.registry import register_agent

    register_agent(
        "dps",
        SearchAgent,
        needs_arg=True,
        arg_help="PATH",
        description="linear plan scorer fitted by direct policy search (CEM) on the closed-loop score",
        overwrite=True,
    )


_register()


# ---------------------------------------------------------------------------------------------- command line
def _tuple(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def build_parser() -> argparse.ArgumentParser:
    """``python -m ainet_gym.agents.search``'s arguments (:class:`SearchConfig`'s fields)."""
    d = SearchConfig()
    p = argparse.ArgumentParser(prog="python -m ainet_gym.agents.search", description=__doc__.split("\n")[0])
    p.add_argument("scenario")
    p.add_argument("--out", required=True, help="folder: log.jsonl, gen-G.npz, final.npz")
    for name, kind in (("plans", _tuple), ("extra_plans", _tuple), ("obs_features", _tuple), ("block", str),
                       ("tail_plan", str), ("mean_plan", str), ("tail_weight", float), ("tail_target", float),
                       ("first_seed", int), ("episodes", int), ("population", int), ("elite", int),
                       ("generations", int), ("init_std", float), ("min_std", float), ("init_bias", float),
                       ("seed", int), ("episode_steps", int), ("base", str), ("score", str),
                       ("floor_z", float)):  # fmt: skip
        v = getattr(d, name)
        shown = ",".join(v) if isinstance(v, tuple) else v
        p.add_argument("--" + name.replace("_", "-"), type=kind, default=v, help=f"default {shown}")
    p.add_argument("--antithetic", action="store_true", help="mirrored pairs of samples")
    p.add_argument("--checkpoints", type=lambda s: tuple(int(x) for x in s.split(",") if x), default=())
    return p


def main(argv: list[str] | None = None) -> int:
    """Run :func:`cem_search` from the command line; print one line per generation."""
    a = vars(build_parser().parse_args(argv))
    out = a.pop("out")
    cfg = SearchConfig(**a)

    def show(rec: dict) -> None:
        m = rec["mean_policy"]
        print(
            f"gen {rec['generation']:3d} mean util {m['util']:.4f} p99 {m['p99']:.3f} frac {m['frac']:.4f} "
            f"score {m['score']:.4f} gain {m['gain']:+.4f} | best {rec['best_sample']['score']:.4f} "
            f"elite {rec['elite_score']:.4f} | {cfg.tail_plan} p99 {rec['tau']:.3f} floor {rec['floor']:.4f} | std {rec['std']:.3f} "
            f"cpu {rec['cpu_s']:.0f}s"
            + (
                f" | base util {rec[BASE_PLAN]['util']:.4f} score {rec[BASE_PLAN]['score']:.4f}"
                if cfg.base
                else ""
            )
            + f" | picks {m['picks']}",
            flush=True,
        )

    cem_search(cfg, out, show)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
