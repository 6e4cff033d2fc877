"""Learning agents from stable-baselines3 (and sb3-contrib): algorithms, defaults, saving and loading.

=================  =====================================  ==============================================
algorithm          action modes                           default mode
=================  =====================================  ==============================================
``ppo``            split, path, ecmp_weights, split_bg    split
``a2c``            split, path, ecmp_weights, split_bg    split
``sac``            split, ecmp_weights, split_bg          split (continuous actions only)
``maskable_ppo``   path                                   path (invalid path indices masked)
=================  =====================================  ==============================================

A saved model is SB3's ``.zip`` with one extra member, ``ainet_gym.json``: the algorithm, the env
arguments it was trained with (action mode, history, observation, reward), the scenario, the observation and
action shapes and (``fabric``, models saved since issue-26zh2) the fingerprint of the fabric it was trained on.
SB3 ignores the member; :func:`load_model` reads it to rebuild the env the model acts in, and
:meth:`SB3Agent.check` to reject a scenario that does not fit the model or (``fabric``) is another fabric.

Trust: a model file holds pickled Python objects, and unpickling a crafted file can run code.
:func:`load_model` checks that the file is an SB3 model of the expected algorithm and unpickles its
entries with an allowlist of classes before SB3 sees it, but load only model files you trust.

The agent (:class:`SB3Agent`, registered as ``ppo:PATH``, ``a2c:PATH``, ``sac:PATH`` and ``maskable_ppo:PATH``)
is this module; the rest lives in modules of one concern, whose public names it re-exports (the same objects):
:mod:`ainet_gym.agents.sb3_algos` (algorithms, action modes, hyperparameters), :mod:`ainet_gym.agents.sb3_files`
(saving, metadata, loading), :mod:`ainet_gym.agents.sb3_safety` (the allowlist unpickler) and
:mod:`ainet_gym.agents.sb3_meta` (a model's metadata as env keywords).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.model_files import ModelFileError as ModelFileError  # what load_model raises
from ainet_gym.agents.model_files import ModelNotFoundError as ModelNotFoundError
from ainet_gym.agents.model_files import UntrustedModelError
from ainet_gym.agents.registry import register_agent
from ainet_gym.agents.sb3_algos import ALGO_MODES, algo_class, default_hyperparameters, resolve_action_mode
from ainet_gym.agents.sb3_files import (
    META_MEMBER,
    check_fit,
    check_model_fabric,
    load_model,
    read_metadata,
    save_model,
    space_signature,
)
from ainet_gym.agents.sb3_files import OPTIMIZER_MEMBER as OPTIMIZER_MEMBER
from ainet_gym.agents.sb3_meta import meta_extra_plans, meta_history, meta_obs_features, meta_residual
from ainet_gym.agents.sb3_safety import safe_objects as safe_objects

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

    from ainet_gym.envs.env import EnvCore

__all__ = [
    "ALGO_MODES",
    "META_MEMBER",
    "SB3Agent",
    "UntrustedModelError",
    "algo_class",
    "default_hyperparameters",
    "load_model",
    "meta_extra_plans",
    "meta_history",
    "meta_obs_features",
    "meta_residual",
    "read_metadata",
    "resolve_action_mode",
    "save_model",
    "space_signature",
]


def _signature_of_model(model: BaseAlgorithm) -> tuple[dict, dict]:
    return space_signature(model.observation_space), space_signature(model.action_space)


class SB3Agent:
    """A trained SB3 model acting through the env's action space (deterministic actions).

    The env it needs (action mode, history, observation) comes from the model's metadata; without
    metadata the action mode is inferred from the action space (MultiDiscrete: path, else split).
    """

    level = "action"

    def __init__(self, path: str | os.PathLike, algo: str | None = None) -> None:
        self.path = Path(path)
        self.model, self.meta = load_model(path, algo)
        self.algo = self.meta["algo"]
        self.name = self.algo
        from gymnasium import spaces

        mode = self.meta.get("action_mode")
        if mode is None:
            mode = "path" if isinstance(self.model.action_space, spaces.MultiDiscrete) else "split"
        self.env_kwargs: dict[str, Any] = {
            "action_mode": mode,
            "history": meta_history(self.meta, f"{self.algo}:{path}"),
            "observation": self.meta.get("observation", "flat"),
            **meta_residual(self.meta, f"{self.algo}:{path}"),
            **meta_obs_features(self.meta, f"{self.algo}:{path}"),
            **meta_extra_plans(self.meta, f"{self.algo}:{path}"),
        }

    def check(self, core: EnvCore) -> None:
        """Refuse ``core`` if its spaces are not the model's (:func:`check_fit`) or its fabric is not the one the
        model's metadata records (``fabric``; a model without it is not checked): a ValueError naming the file."""
        got = (space_signature(core.observation_space), space_signature(core.action_space))
        check_fit("model", self.path, self.meta, core.scenario.name, _signature_of_model(self.model), got)
        check_model_fabric(self.spec_name(), self.meta, getattr(core, "fabric", None))

    def spec_name(self) -> str:
        """How errors name the model: ``ALGO:PATH`` (the policy string that plays it)."""
        return f"{self.algo}:{self.path}"

    def reset(self, core: EnvCore) -> None:
        return None

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        kw: dict[str, Any] = {"deterministic": True}
        if self.algo == "maskable_ppo":
            kw["action_masks"] = core.action_masks()
        actions, _ = self.model.predict(obs, **kw)
        return np.asarray(actions)


for _algo in ALGO_MODES:
    register_agent(
        _algo,
        (lambda a: lambda path: SB3Agent(path, a))(_algo),
        needs_arg=True,
        arg_help="PATH",
        description=f"a trained {_algo} model (ainet-gym train --algo {_algo})",
        overwrite=True,
    )
