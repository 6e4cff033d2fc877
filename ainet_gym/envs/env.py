"""The Gymnasium environment and its batched core, by their documented import path: route the transfers
of AI training jobs over a fabric.

This module defines nothing: it re-exports, by name, the envs' modules of one concern (issue 31):

- :mod:`ainet_gym.envs.core`: :class:`EnvCore`, everything batched over ``batch`` instances of one
  scenario (its actions, spaces, observation and info are its base classes in :mod:`ainet_gym.envs.actions`,
  :mod:`ainet_gym.envs.spaces`, :mod:`ainet_gym.envs.observation` and :mod:`ainet_gym.envs.info`);
- :mod:`ainet_gym.envs.gym_env`: :class:`FabricRoutingEnv`, the single env (``batch = 1``), the
  ``entry_point`` of every registered id (``ainet_gym.envs.env:FabricRoutingEnv``);
- :mod:`ainet_gym.envs.functional`: the step and the reset as functions of the episode state
  (:func:`step`, :func:`step_split`, :func:`reset`, :func:`step_state`);
- :mod:`ainet_gym.envs.state`: :class:`EnvSnapshot` (beside the episode state's containers);
- :mod:`ainet_gym.envs.reset_options`: the reset options the envs refuse.

The constants and helpers of actions.py, obs_layout.py (the observation's block layout, out of observation.py
since issue-31zz) and info.py that it listed stay importable from here.
"""

from __future__ import annotations

from ainet_gym.envs.actions import ACTION_MODES, BG_SLOT_MODES, RESIDUAL_MODES, RESIDUAL_SCALE, SPLIT_MODES
from ainet_gym.envs.core import EnvCore
from ainet_gym.envs.functional import StepOutput, reset, step, step_split, step_state
from ainet_gym.envs.gym_env import FabricRoutingEnv
from ainet_gym.envs.info import INFO_KEYS
from ainet_gym.envs.obs_layout import (
    BG_FEATURES,
    JOB_FEATURES,
    OBS_FEATURE_BLOCKS,
    OBSERVATION_MODES,
    SLOT_FEATURES,
    obs_layout,
    squash,
)
from ainet_gym.envs.reset_options import check_reset_options, reset_options_problem
from ainet_gym.envs.state import EnvSnapshot

__all__ = [
    "ACTION_MODES",
    "BG_FEATURES",
    "BG_SLOT_MODES",
    "INFO_KEYS",
    "JOB_FEATURES",
    "OBSERVATION_MODES",
    "OBS_FEATURE_BLOCKS",
    "RESIDUAL_MODES",
    "RESIDUAL_SCALE",
    "SLOT_FEATURES",
    "SPLIT_MODES",
    "EnvCore",
    "EnvSnapshot",
    "FabricRoutingEnv",
    "StepOutput",
    "check_reset_options",
    "obs_layout",
    "reset",
    "reset_options_problem",
    "squash",
    "step",
    "step_split",
    "step_state",
]
