"""The cross-entropy method of a direct policy search (:mod:`ainet_gym.agents.search`): :func:`cem_search`
scores each generation's candidates beside the static plans on common seeds, keeps the elite and logs one line
per generation."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.agents.search_files import save_search_policy
from ainet_gym.agents.search_rollout import block_width, make_base, make_core, plan_index, rollout
from ainet_gym.agents.search_score import (
    BASE_PLAN,
    SearchConfig,
    candidate_score,
    floor_score,
    mean_floor,
    pooled_tail,
)

__all__ = [
    "cem_search",
]


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
    from ainet_gym.fabric.topology import fabric_fingerprint

    fabric = fabric_fingerprint(core.fabric)  # recorded in the files: dps:PATH refuses another fabric
    from ainet_gym.agents.imitate import knn_columns

    cols = knn_columns(core.obs_layout, cfg.block)
    plans = plan_index(core, cfg.plans)
    D = block_width(core, cols)
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
                save_search_policy(outdir / f"gen-{g + 1}.npz", mean, cfg, {"generation": g + 1}, fabric)
    if outdir is not None:
        save_search_policy(outdir / "final.npz", mean, cfg, {"generation": cfg.generations}, fabric)
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
