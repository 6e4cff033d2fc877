"""The step and the reset as functions of (structure, state, action) -> (state, result), as gymnax's
``step_env`` / ``reset_env`` read: :func:`step`, :func:`step_split`, :func:`reset` over an
:class:`~ainet_gym.envs.state.EpisodeState` bound by reference, and :func:`step_state` over snapshots.
:class:`~ainet_gym.envs.core.EnvCore`'s ``step`` and ``step_split`` are these functions on the state it
holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ainet_gym.envs.state import (
    EnvSnapshot,
    EpisodeState,
)

if TYPE_CHECKING:
    from ainet_gym.envs.core import EnvCore

__all__ = ["StepOutput", "reset", "step", "step_split", "step_state"]


#: (observations, rewards, terminated, truncated, info) of one step of a core
StepOutput = tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


def step(
    core: EnvCore, state: EpisodeState, actions: Any, active: np.ndarray | None = None
) -> tuple[EpisodeState, StepOutput]:
    """One step as a function of (structure, state, action) -> (state, result), as gymnax's ``step_env``
    reads: ``core`` is the structure (the scenario compiled: fabric, candidate paths, spaces, slot layout,
    settings, and caches derived from structure and state), ``state`` the episode state
    (:class:`~ainet_gym.envs.state.EpisodeState`), ``actions`` (batch, ...) the action of every instance
    (``active``: the instances that step, all by default). Returns the state after the step and the step's
    output (observations, rewards, terminated, truncated, info).

    The state is stepped in place, by reference: its arrays are written, and the state returned holds them
    (the same containers, but for the engine's two when the step restacked the units: churn, an AllToAll
    rotation). Use the state returned and treat the one passed as spent; to keep a state, step a copy
    (``step(core, s.copy(), a)``). A state the core does not hold yet is bound first
    (:meth:`EnvCore.bind`: no copy; the core's caches derived from the state are made again), so one core
    steps any number of episodes in turns; the state it held before is left as it was.
    :meth:`EnvCore.step` is ``step(core, core.episode_state, actions, active)``.

    Raises
    ------
    RuntimeError
        If ``state`` is that of a core not reset yet.
    ValueError
        If ``state`` is not an episode state of this scenario with this core's batch and history, or the
        actions are not in the action space.
    """
    core.bind(state)
    out = core.step_bound(actions, active)
    return core.episode_state, out


def step_split(
    core: EnvCore, state: EpisodeState, split: npt.ArrayLike, active: np.ndarray | None = None
) -> tuple[EpisodeState, StepOutput]:
    """One interval with an explicit split as a function of (structure, state, split) -> (state, result),
    as :func:`step` reads for an action: ``split`` (connections, max_paths) is every connection's split
    (the engine-level policies' action, :mod:`ainet_gym.routing.policies`), ``active`` the instances that
    step (all by default). Returns the state after the interval and its output (observations, rewards,
    terminated, truncated, info).

    The state is bound and stepped in place, by reference, as in :func:`step` (use the state returned; step a
    copy to keep one); :meth:`EnvCore.step_split` is ``step_split(core, core.episode_state, split, active)``.

    Raises
    ------
    RuntimeError
        If ``state`` is that of a core not reset yet.
    ValueError
        If ``state`` does not fit this core (:meth:`EnvCore.bind`), or ``split`` is not of shape
        (connections, max_paths) with finite ratios >= 0.
    """
    core.bind(state)
    out = core.step_split_bound(split, active)
    return core.episode_state, out


def reset(
    core: EnvCore, seeds: list[int | None], state: EpisodeState | None = None, mask: np.ndarray | None = None
) -> tuple[EpisodeState, tuple[Any, dict[str, Any]]]:
    """A new episode as a function, as gymnax's ``reset_env`` reads: returns the episode state after
    :meth:`EnvCore.reset` with ``seeds`` (one per instance) and its output (observations, info).

    ``state`` None: a new state; the state the core held (if any) is left as it was (a copy of it is
    reset, so it costs a copy). Else ``state`` is bound (:meth:`EnvCore.bind`) and its instances ``mask``
    (default: all) are reset in place, the others going on.
    """
    if state is not None:
        core.bind(state)
    elif core.world.sim is not None:
        core.bind(core.episode_state.copy())
    out = core.reset(seeds, mask)
    return core.episode_state, out


def step_state(core: EnvCore, state: EnvSnapshot, actions: np.ndarray) -> tuple[EnvSnapshot, StepOutput]:
    """:func:`step` on snapshots: ``state`` (an :class:`EnvSnapshot`) is not changed (a copy of its episode
    state is stepped); returns the state after the step as a new snapshot, and the step's output. From a
    state ``s``, ``core.step(a)`` gives the output of ``step_state(core, s, a)`` bit for bit. The copies cost
    about a step and a half (docs/development.md, "State as data"): for search, replay and tests."""
    if not isinstance(state, EnvSnapshot):
        raise ValueError(
            f"step_state: {type(state).__name__} is not an EnvSnapshot (take one with snapshot())"
        )
    _, out = step(core, state.episode.copy(), actions)
    return core.snapshot(), out
