"""The env side of a direct policy search (:mod:`ainet_gym.agents.search`): the batched env
(:func:`make_core`), a gate's base agent (:func:`make_base`), the env action of each plan (:func:`plan_index`),
the observation columns a block reads (:func:`block_width`) and one closed-loop episode per row
(:func:`rollout`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ainet_gym.agents.evaluate import step_ratios
from ainet_gym.agents.search_score import BASE_PLAN, SearchConfig, plan_scores

__all__ = [
    "block_width",
    "make_base",
    "make_core",
    "plan_index",
    "rollout",
]


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


def block_width(core: Any, cols: Any) -> int:
    """The number of observation columns ``cols`` (a slice or an index array) selects."""
    return int(np.arange(core.observation_space.shape[-1])[cols].shape[0])
