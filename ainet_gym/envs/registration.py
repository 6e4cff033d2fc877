"""Gymnasium registration of the ``ainet_gym/`` environments: one id per shipped scenario family and
action mode.

For every base id ``ainet_gym/<Name>-v0`` of :data:`ENV_IDS` (the ``split`` mode) there is an id
``ainet_gym/<Name>-<Mode>-v0`` for every other mode of :data:`ainet_gym.envs.env.ACTION_MODES`, the mode's
name in CamelCase (``path`` -> ``Path``, ``ecmp_weights`` -> ``EcmpWeights``, ``choose`` -> ``Choose``).
Every id has the same ``entry_point`` (:class:`~ainet_gym.envs.env.FabricRoutingEnv`), the same
``vector_entry_point`` (:class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv`) and a
``max_episode_steps``: its default scenario's ``dynamics.episode_steps``. With ``scenario=`` (or
``episode_steps=``) overriding the default, ``max_episode_steps`` follows the episode length of the env
that is made (:class:`ScenarioEnvSpec`), in ``gymnasium.make`` and in ``gymnasium.make_vec``; an explicit
``max_episode_steps=`` still wins, as in Gymnasium.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

__all__ = [
    "ENV_IDS",
    "TRAIN_SEED_OFFSET",
    "ScenarioEnvSpec",
    "env_id_for",
    "env_ids",
    "mode_id_suffix",
    "register_envs",
]

#: training episodes of every trainer (SB3, RLlib) draw their seeds from here up, so that the small seeds stay
#: held out for evaluation
TRAIN_SEED_OFFSET = 1_000_000

#: env id -> default scenario (overridable with ``gymnasium.make(id, scenario=...)``); the ``split`` mode.
#: Every default varies with the seed beyond the ECMP hash: each initial job's start is drawn per episode
#: over at least one of its iterations (``start_jitter_ms``) and periodic background over its whole period
#: (``offset_jitter_steps``), so held-out seeds are different episodes. The ``-jitter`` files are the
#: family's scenario with those fields; the deterministic ones keep their names (and published numbers).
ENV_IDS: dict[str, str] = {
    "ainet_gym/SpineLeaf-v0": "spine-leaf-2to1-jitter",
    "ainet_gym/PeriodicInterference-v0": "periodic-interference-jitter",
    "ainet_gym/FatTree-v0": "fat-tree-k8-data-parallel-jitter",
    "ainet_gym/RailOptimized-v0": "rail-optimized-flat-ring-jitter",
    "ainet_gym/MultiTenant-v0": "multi-tenant-churn-jitter",
    "ainet_gym/MoE-v0": "moe-3d-256-spine-leaf",
}

#: the mode of the base ids (``ainet_gym/<Name>-v0``)
BASE_MODE = "split"
_ENTRY_POINT = "ainet_gym.envs.env:FabricRoutingEnv"
_VECTOR_ENTRY_POINT = "ainet_gym.envs.vector_env:FabricRoutingVectorEnv"


def mode_id_suffix(mode: str) -> str:
    """The id part of an action mode: its words in CamelCase (``ecmp_weights`` -> ``EcmpWeights``)."""
    return "".join(word.capitalize() for word in mode.split("_"))


def env_id_for(base_id: str, mode: str) -> str:
    """The id of ``mode`` on the scenario family of ``base_id`` (``ainet_gym/<Name>-v0``): the base id
    itself for ``split``, else ``ainet_gym/<Name>-<Mode>-v0``."""
    if mode == BASE_MODE:
        return base_id
    name, version = base_id.rsplit("-", 1)
    return f"{name}-{mode_id_suffix(mode)}-{version}"


def env_ids() -> dict[str, tuple[str, str]]:
    """Every registered id of the project -> (its base id, its action mode), base ids first, then the
    mode ids of each family in the order of :data:`~ainet_gym.envs.env.ACTION_MODES`."""
    from ainet_gym.envs.actions import ACTION_MODES

    out: dict[str, tuple[str, str]] = {base: (base, BASE_MODE) for base in ENV_IDS}
    for base in ENV_IDS:
        for mode in ACTION_MODES:
            if mode != BASE_MODE:
                out[env_id_for(base, mode)] = (base, mode)
    return out


@functools.lru_cache(maxsize=64)
def _scenario_steps(scenario: str) -> int | None:
    """``dynamics.episode_steps`` of a scenario given by name or path (None if it does not load)."""
    from ainet_gym.scenario.loader import load_scenario

    try:
        return int(load_scenario(scenario).dynamics.episode_steps)
    except Exception:  # a bad scenario: the env's constructor raises the error that says why
        return None


def _episode_steps_of(kwargs: dict[str, Any]) -> int | None:
    """The episode length an env made with ``kwargs`` will have (``episode_steps``, else its scenario's),
    None where it cannot be told (a scenario that does not load: the env's constructor will say why)."""
    steps = kwargs.get("episode_steps")
    if isinstance(steps, int) and not isinstance(steps, bool):
        return steps
    sc = kwargs["scenario"]
    if isinstance(sc, str | os.PathLike):
        return _scenario_steps(os.fspath(sc))
    from ainet_gym.scenario.loader import load_scenario

    try:
        return int(load_scenario(sc).dynamics.episode_steps)
    except Exception:
        return None


class ScenarioEnvSpec(EnvSpec):
    """The :class:`~gymnasium.envs.registration.EnvSpec` of an ``ainet_gym/`` id, whose
    ``max_episode_steps`` follows the episode length of the env it makes.

    The value is, in this order: an explicit ``max_episode_steps`` in the spec's ``kwargs`` (what
    ``gymnasium.make_vec`` records); else the ``episode_steps`` in its ``kwargs``, else its ``scenario``'s
    ``dynamics.episode_steps`` (the registered spec holds the default scenario: its value is that
    scenario's). Two reads need more: ``gymnasium.make`` reads the *registered* spec right after building
    the env, to wrap it in :class:`~gymnasium.wrappers.TimeLimit`, and ``gymnasium.make_vec`` reads a copy
    with its ``kwargs`` emptied before building a ``vector_entry_point`` env, to pass it as the
    ``max_episode_steps`` keyword. Read from those two functions the value is taken from their local
    variables (``env`` in ``make``: the built env's episode length; ``env_spec_kwargs`` in ``make_vec``:
    the keywords the env will get), so ``gymnasium.make(id, scenario="other")`` truncates where
    ``other``'s episodes end. Gymnasium 1.1 to 1.4 name these variables so; were they renamed, the value
    would fall back to the spec's own, which ``tests/envs/test_env_ids.py`` would catch. An explicit
    ``max_episode_steps=`` to ``make`` or ``make_vec`` still wins, as in Gymnasium.
    """

    @property  # type: ignore[override]
    def max_episode_steps(self) -> int | None:
        """See the class docstring."""
        caller = sys._getframe(1)
        code = caller.f_code
        if code is _MAKE_CODE:  # the registered spec, read after the env was built
            env = caller.f_locals.get("env")
            steps = getattr(getattr(getattr(env, "unwrapped", None), "core", None), "episode_steps", None)
            return int(steps) if steps is not None else self._default_steps()
        kwargs = self.kwargs
        if code is _MAKE_VEC_CODE and not kwargs:  # a copy whose kwargs make_vec moved to a local
            kwargs = caller.f_locals.get("env_spec_kwargs")
        if not isinstance(kwargs, dict) or "scenario" not in kwargs:
            return self._default_steps()
        if kwargs.get("max_episode_steps") is not None:
            return int(kwargs["max_episode_steps"])
        steps = _episode_steps_of(kwargs)
        return steps if steps is not None else self._default_steps()

    @max_episode_steps.setter
    def max_episode_steps(self, value: int | None) -> None:
        self.__dict__["_max_episode_steps"] = value

    def _default_steps(self) -> int | None:
        """The spec's own value: the one it was made with, else (a spec of :func:`register_envs`)
        ``dynamics.episode_steps`` of the default scenario it names (``_steps_of``), read on first use and
        kept. :func:`register_envs` does not load the six default scenarios itself: that took some 0.5 s of
        CPU (their feasibility estimates) at every ``import ainet_gym`` (issue-31zs2)."""
        steps = self.__dict__.get("_max_episode_steps")
        scenario = self.__dict__.get("_steps_of")
        if steps is None and scenario is not None:
            steps = _scenario_steps(scenario)
            if steps is None:  # a default scenario that does not load: say why, as the import used to
                from ainet_gym.scenario.loader import load_scenario

                load_scenario(scenario)
            self.__dict__["_max_episode_steps"] = steps
        return steps


_MAKE_CODE = gym.envs.registration.make.__code__
_MAKE_VEC_CODE = gym.envs.registration.make_vec.__code__


def register_envs() -> None:
    """Register every id of :func:`env_ids` with ``entry_point``, ``vector_entry_point`` and
    ``max_episode_steps`` (its default scenario's episode length, loaded when first read:
    :meth:`ScenarioEnvSpec._default_steps`)."""
    for env_id, (base, mode) in env_ids().items():
        if env_id in gym.registry:
            continue
        scenario = ENV_IDS[base]
        kwargs: dict[str, Any] = {"scenario": scenario}
        if mode != BASE_MODE:
            kwargs["action_mode"] = mode
        spec = ScenarioEnvSpec(
            id=env_id,
            entry_point=_ENTRY_POINT,
            vector_entry_point=_VECTOR_ENTRY_POINT,
            kwargs=kwargs,
            disable_env_checker=False,
        )
        spec.__dict__["_steps_of"] = scenario
        gym.registry[env_id] = spec
