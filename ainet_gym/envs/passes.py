"""The env side of a step as a strategy per backend, chosen by the simulation backend's name here only
(:func:`get_passes`); the simulation side is :mod:`ainet_gym.sim.backends` (which never imports the envs).

A strategy (:class:`EnvPasses`) says how the env decodes split actions and whether its observation is written
by the compiled passes on the interval's kernel threads. ``numpy`` is the readable reference; ``numba`` runs
:mod:`ainet_gym.sim.backends.numba.env_passes`, the same floating-point operations in the same order (bit for bit, checked by
``tests/envs/test_fast_paths.py`` and ``python -m ainet_gym.checks.parity``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from ainet_gym.envs.actions import SPLIT_MODES
from ainet_gym.errors import choice_message
from ainet_gym.routing.split import path_index_split, ratio_split
from ainet_gym.sim.backends.numba import env_passes

__all__ = ["PASSES", "EnvPasses", "NumbaPasses", "NumpyPasses", "get_passes"]


class EnvPasses(Protocol):
    """The env passes of a backend."""

    #: the simulation backend it goes with (:data:`ainet_gym.sim.backends.BACKENDS`)
    name: str
    #: whether the observation (and the per-job info) is written by the compiled passes, the link history
    #: pushed on the kernel threads right after each range's interval
    #: (:class:`~ainet_gym.envs.obs_compiled.EarlyBlocks`); else the numpy observation after the step
    compiled_observation: bool

    def fuses_decode(self, action_mode: str, n_paths: int) -> bool:
        """Whether actions of ``action_mode`` with ``n_paths`` paths per slot can be decoded and merged into
        the engine's entries in one compiled pass per instance range
        (:meth:`~ainet_gym.sim.engine.BatchSim.set_split_fused`)."""
        ...

    def decode_split(
        self,
        action_mode: str,
        actions: np.ndarray,
        ctrl: np.ndarray,
        conns: np.ndarray,
        npaths: np.ndarray,
        default: np.ndarray,
        fixed_of: Callable[[np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """The split (connections, P) of validated ``path`` / split-mode ``actions`` (batch, slots * P):
        ``ctrl`` the flat indices of the controllable slots, ``conns`` their connections, ``npaths`` their
        numbers of paths; every other connection (``fixed_of(conns)``) keeps its ``default`` row."""
        ...


class NumpyPasses:
    """The readable reference."""

    name = "numpy"
    compiled_observation = False

    def fuses_decode(self, action_mode: str, n_paths: int) -> bool:
        """Never: the split is decoded, then merged by the engine."""
        return False

    def decode_split(
        self,
        action_mode: str,
        actions: np.ndarray,
        ctrl: np.ndarray,
        conns: np.ndarray,
        npaths: np.ndarray,
        default: np.ndarray,
        fixed_of: Callable[[np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """``path``: each slot's path index (indices past a connection's paths wrap, documented); split
        modes: each slot's weights ``(a + 1) / 2`` over its paths, normalised."""
        P = default.shape[1]
        split = default.copy()
        if action_mode == "path":
            split[conns] = path_index_split(actions.reshape(-1)[ctrl], npaths, P, wrap=True)
        else:
            split[conns] = ratio_split((actions.reshape(-1, P)[ctrl] + 1.0) / 2.0, npaths)
        return split


class NumbaPasses(NumpyPasses):
    """The compiled passes (:mod:`ainet_gym.sim.backends.numba.env_passes`), for rows up to numpy's pairwise-summation block
    (:data:`~ainet_gym.sim.backends.numba.env_passes.PW_BLOCKSIZE`); the reference otherwise."""

    name = "numba"
    compiled_observation = True

    def fuses_decode(self, action_mode: str, n_paths: int) -> bool:
        """Split modes with rows of at most :data:`~ainet_gym.sim.backends.numba.env_passes.PW_BLOCKSIZE` paths."""
        return action_mode in SPLIT_MODES and n_paths <= env_passes.PW_BLOCKSIZE

    def decode_split(
        self,
        action_mode: str,
        actions: np.ndarray,
        ctrl: np.ndarray,
        conns: np.ndarray,
        npaths: np.ndarray,
        default: np.ndarray,
        fixed_of: Callable[[np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """Split modes: one compiled pass (:func:`ainet_gym.sim.backends.numba.env_passes.decode_split`), the same
        floating-point operations as the reference."""
        P = default.shape[1]
        if not self.fuses_decode(action_mode, P):
            return super().decode_split(action_mode, actions, ctrl, conns, npaths, default, fixed_of)
        rows = np.ascontiguousarray(actions, dtype=np.float64).reshape(-1, P)
        return env_passes.decode_split(
            rows, ctrl, conns, npaths, default, fixed_of(conns), np.empty_like(default)
        )  # type: ignore[no-any-return]


#: the env passes of each simulation backend
PASSES: dict[str, EnvPasses] = {p.name: p for p in (NumbaPasses(), NumpyPasses())}


def get_passes(backend: str) -> EnvPasses:
    """The env passes of the simulation backend ``backend`` (a resolved name, e.g. ``FabricWorld.backend``)."""
    try:
        return PASSES[backend]
    except KeyError:
        raise ValueError(choice_message("backend", backend, PASSES, problem="no env passes")) from None
