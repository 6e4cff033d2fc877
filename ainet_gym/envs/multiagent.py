"""Per-switch agents: a PettingZoo ``ParallelEnv`` where each switch sets the WCMP weights of its next hops.

Real fabrics route hop by hop: a switch splits traffic over its equal-cost next hops from what it sees
locally. Here one agent per switch of the chosen tier sets the weights of its own next hops (WCMP at that
switch); every other switch keeps equal weights. The engine is the one of the single-agent env: the agents'
weights fill the action vector of :class:`~ainet_gym.envs.env.EnvCore` in its ``ecmp_weights`` mode and
:meth:`EnvCore.decode` turns them into a split of every connection (a path's share is the product of its
hops' normalised weights), so both envs route identically given the same weights.

:class:`SwitchAgents` holds the per-switch view, batched over the core's instances (the env uses one
instance, the ``marl`` evaluation agent one per episode); :class:`FabricParallelEnv` is the PettingZoo env
(see its docstring for the spaces, rewards and the life cycle of agents). Build it with
:func:`ainet_gym.parallel_env` (or :func:`ainet_gym.aec_env` for the AEC form).

The PettingZoo side is this module (:func:`parallel_env`, :func:`aec_env` and the subclass of
:class:`FabricParallelEnv` with PettingZoo's ``ParallelEnv`` as a base, built on first use); the rest lives in
modules of one concern, whose public names it re-exports (the same objects): :mod:`ainet_gym.envs.switch_agents`
(:class:`SwitchAgents`) and :mod:`ainet_gym.envs.switch_env` (:class:`FabricParallelEnv`, its rewards and reset
options).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from ainet_gym.envs.switch_agents import AGENT_TIERS, LOCAL_OBS_BLOCKS, SwitchAgents
from ainet_gym.envs.switch_env import (
    PETTINGZOO_PROBE_KEY,
    REWARD_MODES,
    FabricParallelEnv,
    check_parallel_reset_options,
)
from ainet_gym.scenario.spec import Scenario

__all__ = [
    "AGENT_TIERS",
    "LOCAL_OBS_BLOCKS",
    "PETTINGZOO_PROBE_KEY",
    "REWARD_MODES",
    "FabricParallelEnv",
    "SwitchAgents",
    "aec_env",
    "check_parallel_reset_options",
    "parallel_env",
]


def _require_pettingzoo() -> Any:
    try:
        import pettingzoo
    except ImportError as e:
        raise ImportError(
            "the multi-agent env needs PettingZoo: pip install 'ainet-gym[pettingzoo]' "
            f"(or pip install pettingzoo) ({e})"
        ) from e
    return pettingzoo


@functools.cache
def _env_class() -> type:
    """:class:`FabricParallelEnv` with PettingZoo's ``ParallelEnv`` as a base (built on first use, so that
    importing this module does not need PettingZoo)."""
    base = _require_pettingzoo().ParallelEnv
    return type("FabricParallelEnv", (FabricParallelEnv, base), {"__doc__": FabricParallelEnv.__doc__})


def parallel_env(
    scenario: str | os.PathLike | dict | Scenario = "periodic-interference",
    agents: str = "leaf",
    reward: str | float = "shared",
    **kwargs: Any,
) -> FabricParallelEnv:
    """A PettingZoo ``ParallelEnv`` with one agent per switch (see :class:`FabricParallelEnv`).

    Raises
    ------
    ImportError
        If PettingZoo is not installed (the ``pettingzoo`` extra).
    ValueError
        Bad ``agents``, ``reward`` or scenario arguments, or a fabric without next-hop choices.
    """
    return _env_class()(scenario=scenario, agents=agents, reward=reward, **kwargs)


def aec_env(
    scenario: str | os.PathLike | dict | Scenario = "periodic-interference",
    agents: str = "leaf",
    reward: str | float = "shared",
    **kwargs: Any,
) -> Any:
    """The AEC form of :func:`parallel_env`, through PettingZoo's ``parallel_to_aec`` converter."""
    _require_pettingzoo()
    from pettingzoo.utils.conversions import parallel_to_aec

    return parallel_to_aec(parallel_env(scenario, agents, reward, **kwargs))
