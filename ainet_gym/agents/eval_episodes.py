"""The episodes of an evaluation (:mod:`ainet_gym.agents.evaluate`): the seeds (:func:`parse_seeds`, and
:func:`episode_seeds`: episode ``e`` of seed ``s`` is env seed ``s + EPISODE_SEED_STRIDE * e``), one batched
rollout of a policy over them (:func:`run_policy`) and its raw per-interval records (:class:`PolicyRun`), with
what a row says of its agent: the traffic it routes (:func:`agent_controls`) and whether it learned
(:func:`is_learned`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ainet_gym.agents.registry import Agent
from ainet_gym.arrays import safe_divide
from ainet_gym.envs.env import EnvCore

__all__ = [
    "EPISODE_SEED_STRIDE",
    "MAX_SEED",
    "PolicyRun",
    "agent_controls",
    "episode_seeds",
    "is_learned",
    "parse_seeds",
    "run_policy",
    "step_ratios",
]


EPISODE_SEED_STRIDE = 100_003
#: Largest evaluation seed: episode seeds ``seed + EPISODE_SEED_STRIDE * episode`` stay below 2**63.
MAX_SEED = 2**62


@dataclass
class PolicyRun:
    """Raw per-episode records of one policy (E episodes, T intervals, J job slots)."""

    name: str
    controls: str  # none | jobs | jobs+bg: the traffic the policy routes (reference: the twin)
    gpu: np.ndarray  # (E, T) GPU utilisation per interval
    max_link: np.ndarray  # (E, T) max network link utilisation per interval
    collisions: np.ndarray  # (E, T)
    ratio: np.ndarray  # (E, T, J) actual / ideal step time, 0 where no iteration completed
    iterations: np.ndarray  # (E, T, J) iterations completed
    seconds: float
    learned: bool = False  # a learned (action-level, not a baseline) policy


def parse_seeds(text: str | list[int]) -> list[int]:
    """``"1,2,3"`` or ``"1-5"`` (inclusive) or a list -> list of ints.

    Raises
    ------
    ValueError
        If a seed is not an integer, a part between commas is empty (``1,,2``) or the list is empty.
    """
    if isinstance(text, list | tuple):
        for s in text:
            if isinstance(s, bool) or not isinstance(s, int | np.integer):
                raise ValueError(f"seeds: {s!r} is not an integer seed; allowed: integers in [0, {MAX_SEED}]")
        seeds = [int(s) for s in text]
    else:
        seeds = []
        parts = [p.strip() for p in str(text).split(",")]
        for part in parts:
            if not part:
                if len(parts) == 1:  # blank: "no seed given" below
                    continue
                raise ValueError(  # "1,,2" or "1,2,": a typo, not a shorter list
                    f"seeds {text!r}: an empty part between commas; allowed: integers >= 0 and ranges LO-HI "
                    "with LO <= HI, comma-separated, e.g. 1,2,3 or 1-5"
                )
            m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
            if m is None:
                raise ValueError(
                    f"seeds {text!r}: {part!r} is not a seed or a range of seeds; allowed: integers >= 0 and "
                    "ranges LO-HI with LO <= HI, comma-separated, e.g. 1,2,3 or 1-5"
                )
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if hi < lo:
                raise ValueError(
                    f"seeds {text!r}: the range {part!r} is empty (LO > HI); write e.g. {hi}-{lo}"
                )
            if hi - lo >= 100_000:
                raise ValueError(
                    f"seeds {text!r}: the range {part!r} has {hi - lo + 1} seeds; allowed: <= 100000"
                )
            seeds.extend(range(lo, hi + 1))
    if not seeds:
        raise ValueError(f"seeds {text!r}: no seed given; write e.g. 1,2,3 or 1-5")
    for s in seeds:
        if isinstance(s, bool) or not 0 <= s <= MAX_SEED:
            raise ValueError(f"seeds: {s!r} is out of range; allowed: integers in [0, {MAX_SEED}]")
    return seeds


def episode_seeds(seeds: list[int], episodes: int) -> list[int]:
    """Env seeds of every (seed, episode), seed-major."""
    return [s + EPISODE_SEED_STRIDE * e for s in seeds for e in range(episodes)]


def step_ratios(info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """An interval's job iterations and their step time over the ideal, (B, J) each, from a step's ``info``
    (0 for both where a job finished no iteration or has no ideal): what :func:`run_policy` records for the
    p99 (each ratio repeated by its iterations)."""
    it = np.asarray(info["iterations"])
    st, ideal = np.asarray(info["step_time_ms"]), np.asarray(info["ideal_step_time_ms"])
    ok = (it > 0) & (ideal > 0)
    return np.where(ok, it, 0), np.where(ok, safe_divide(st, ideal), 0.0)


def run_policy(agent: Agent, core: EnvCore, seeds: list[int]) -> PolicyRun:
    """Run one episode per seed (all at once, ``core.batch == len(seeds)``) and record the metrics."""
    import time

    t0 = time.time()
    obs, _ = core.reset(list(seeds))
    agent.reset(core)
    T, B, J = core.episode_steps, core.batch, core.ideal_step_s.shape[1]
    gpu = np.zeros((B, T))
    mlu = np.zeros((B, T))
    col = np.zeros((B, T))
    ratio = np.zeros((B, T, J))
    iters = np.zeros((B, T, J), dtype=np.int64)
    for t in range(T):
        a = agent.act(core, obs)
        if agent.level == "engine":
            obs, _, _, _, info = core.step_split(a)
        else:
            obs, _, _, _, info = core.step(a)
        gpu[:, t] = info["reward_gpu_utilization"]
        mlu[:, t] = info["max_link_utilization"]
        col[:, t] = info["collisions"]
        iters[:, t], ratio[:, t] = step_ratios(info)
    return PolicyRun(
        agent.name, agent_controls(agent), gpu, mlu, col, ratio, iters, time.time() - t0, is_learned(agent)
    )


def agent_controls(agent: Agent) -> str:
    """The traffic ``agent`` routes: its ``controls`` attribute, else from its action mode
    (``ecmp_weights``, ``split_bg``: ``jobs+bg``; ``split``, ``path``: ``jobs``; ``choose``, ``choose_bg``: their
    plans', ``jobs+bg+weights`` with a weighted extra plan)."""
    c = getattr(agent, "controls", None)
    if c is not None:
        return str(c)
    from ainet_gym.routing.plans import CHOOSE_MODES, plans_class

    mode = agent.env_kwargs.get("action_mode")
    if mode in CHOOSE_MODES:
        return plans_class(tuple(agent.env_kwargs.get("extra_plans", ())), CHOOSE_MODES[mode])
    return "jobs+bg" if mode in ("ecmp_weights", "split_bg") else "jobs"


def is_learned(agent: Agent) -> bool:
    """Whether ``agent`` is a learned policy (not a heuristic, predictive or reference baseline): its
    ``learned`` attribute when it has one."""
    from ainet_gym.agents.baselines import BaselineAgent
    from ainet_gym.agents.predictive import PredictiveAgent

    flag = getattr(agent, "learned", None)
    if flag is not None:
        return bool(flag)
    return not isinstance(agent, BaselineAgent | PredictiveAgent) and agent_controls(agent) != "reference"
