"""An RLlib checkpoint as a policy of ``ainet-gym evaluate``: ``rllib:DIR``.

``DIR`` is a checkpoint folder written by ``ainet-gym train --framework rllib``. Nothing pickled in it is
read: the policy network is rebuilt by :mod:`ainet_gym.agents.rllib_policy` from ``ainet_gym.json``
(its constructor arguments, range-checked) and ``policy_weights.pt`` (tensors,
``torch.load(weights_only=True)``), so evaluating needs torch but not Ray. It acts deterministically, as
the SB3 policies do with ``deterministic=True``: the mode of its action distribution (the Gaussian mean
for Box actions, the arg-max per slot in path mode), mapped to the env's action space as RLlib's env
runners do (``unsquash_action``: identity on the ``[-1, 1]`` boxes, then clipped to them).

A folder written before this format has only RLlib's pickles: it is refused with one line that gives
the conversion command (``ainet-gym convert-rllib DIR --trust-checkpoint``, for folders you trust).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.model_files import ModelFileError
from ainet_gym.agents.registry import register_agent
from ainet_gym.agents.rllib_checkpoint import read_checkpoint_metadata
from ainet_gym.agents.rllib_policy import load_policy
from ainet_gym.agents.sb3_agents import check_fit, meta_history, space_signature
from ainet_gym.agents.sb3_files import check_model_fabric
from ainet_gym.errors import check_choice

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = ["MODULE_SUBDIR", "RLlibAgent"]

#: where ``Algorithm.save_to_path`` puts the (single-agent) policy module (pickled: never read here).
MODULE_SUBDIR = Path("learner_group") / "learner" / "rl_module" / "default_policy"
_MODES = ("split", "ecmp_weights", "path")


class RLlibAgent:
    """A trained RLlib PPO policy acting through the env's action space (rebuilt from JSON and tensors)."""

    level = "action"

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        what = f"rllib:{path}"
        self.meta = read_checkpoint_metadata(self.path)  # ModelNotFoundError for a wrong folder
        if self.meta.get("framework") != "rllib":
            raise ModelFileError(f"{what}: {self.path / 'ainet_gym.json'} is not an RLlib checkpoint's")
        mode = self.meta.get("action_mode", "split")
        check_choice(f"{what}: metadata action_mode", mode, _MODES, error=ModelFileError)
        if self.meta.get("observation", "flat") != "flat":
            raise ModelFileError(
                f"{what}: metadata observation = {str(self.meta.get('observation'))[:40]!r}; allowed: flat"
            )
        self.net = load_policy(self.path, self.meta, what)
        self.name = "rllib-" + str(self.meta.get("algo", "ppo"))[:40]
        self.env_kwargs: dict[str, Any] = {
            "action_mode": mode,
            "history": meta_history(self.meta, what),
            "observation": "flat",
        }

    def check(self, core: EnvCore) -> None:
        """Refuse ``core`` if its spaces are not the checkpoint's (:func:`check_fit`), its fabric is not the one
        the checkpoint's metadata records (``fabric``; a checkpoint without it, written before issue-26zk2, is
        not checked) or its observation is not the policy's input: a ValueError naming the folder."""
        want = (self.meta.get("observation_space"), self.meta.get("action_space"))
        got = (space_signature(core.observation_space), space_signature(core.action_space))
        check_fit("checkpoint", self.path, self.meta, core.scenario.name, want, got)
        check_model_fabric(
            f"rllib:{self.path}",
            self.meta,
            getattr(core, "fabric", None),
            "ainet-gym train --framework rllib",
        )
        n_obs = int(np.prod(core.observation_space.shape))
        if self.net.obs_dim != n_obs:
            raise ModelFileError(
                f"rllib:{self.path}: its policy takes {self.net.obs_dim} inputs; this scenario's observation has {n_obs}"
            )

    def reset(self, core: EnvCore) -> None:
        return None

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        return self.net.act(np.asarray(obs).reshape(len(obs), -1), core.action_space)


register_agent(
    "rllib",
    RLlibAgent,
    needs_arg=True,
    arg_help="DIR",
    description="an RLlib checkpoint directory (ainet-gym train --framework rllib)",
    overwrite=True,
)
