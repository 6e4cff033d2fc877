"""The flat observation's block layout, part of the env's contract (shipped checkpoints read these offsets):
the observation modes (:data:`OBSERVATION_MODES`), the features of each block (:data:`JOB_FEATURES`,
:data:`SLOT_FEATURES`, :data:`BG_FEATURES`), the optional blocks (:data:`OBS_FEATURE_BLOCKS`, checked by
:func:`check_obs_features`), the consecutive slices of a layout (:func:`obs_layout`) and the map of a
non-negative figure into [0, 1) (:func:`squash`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ainet_gym.errors import names_message

__all__ = [
    "BG_FEATURES",
    "JOB_FEATURES",
    "OBSERVATION_MODES",
    "OBS_FEATURE_BLOCKS",
    "SLOT_FEATURES",
    "check_obs_features",
    "obs_layout",
    "squash",
]


OBSERVATION_MODES = ("flat", "graph")


JOB_FEATURES = ("alive", "efficiency", "gpu_utilization", "communicating", "iteration_progress")


SLOT_FEATURES = ("controllable", "demand", "n_paths")


BG_FEATURES = ("active_last", "scheduled_next")


#: Optional observation blocks (``obs_features=`` at construction; none by default, so the default
#: observation space, the shipped checkpoints and every contract are unchanged): name -> the per-job-slot
#: features of the block, appended after ``episode_progress`` in this order.
OBS_FEATURE_BLOCKS: dict[str, tuple[str, ...]] = {
    # each job's position in its iteration, read from the simulator's state at the decision, in ideal
    # iterations: what a lookahead needs to tell when the jobs' communication phases will overlap
    "phase": ("to_comm", "comm_left", "comm_time_left"),
}


def check_obs_features(obs_features: Sequence[str]) -> tuple[str, ...]:
    """``obs_features`` checked (see :class:`FabricRoutingEnv`, Arguments): a tuple of distinct names of
    :data:`OBS_FEATURE_BLOCKS`, in the order given.

    Raises
    ------
    ValueError
        Naming the bad value and what is allowed.
    """
    allowed = ", ".join(OBS_FEATURE_BLOCKS)
    if isinstance(obs_features, str) or not isinstance(obs_features, Sequence):
        raise ValueError(f"obs_features = {obs_features!r}: allowed: a list of names among {allowed}")
    out = tuple(obs_features)
    if any(f not in OBS_FEATURE_BLOCKS for f in out):
        raise ValueError(names_message("obs_features", out, OBS_FEATURE_BLOCKS, more=" (distinct)"))
    if len(set(out)) != len(out):
        raise ValueError(
            f"obs_features = {obs_features!r}: a name is repeated; allowed: distinct names among {allowed}"
        )
    return out


def squash(x: np.ndarray) -> np.ndarray:
    """x / (1 + x): maps [0, inf) onto [0, 1) monotonically."""
    return x / (1.0 + x)


def obs_layout(sizes: dict[str, int]) -> tuple[dict[str, slice], int]:
    """Consecutive slices of a flat observation for blocks of the given sizes, and the total size."""
    layout: dict[str, slice] = {}
    o = 0
    for k, n in sizes.items():
        layout[k] = slice(o, o + n)
        o += n
    return layout, o
