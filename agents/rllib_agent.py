"""An RLlib checkpoint as a policy of ``ainet-gym evaluate``: ``rllib:DIR``.

``DIR`` is a checkpoint directory written by ``ainet-gym train --framework rllib`` (RLlib's
``Algorithm.save_to_path`` plus ``ainet_gym.json``). Only the policy network is loaded
(``RLModule.from_checkpoint`` on ``DIR/learner_group/learner/rl_module/default_policy``), without
starting Ray. It acts deterministically, as the SB3 policies do with ``deterministic=True``: the mode
of its action distribution (the Gaussian mean for Box actions, the arg-max per slot in path mode),
mapped to the env's action space as RLlib's env runners do (``unsquash_action``: identity on the
``[-1, 1]`` boxes, then clipped to them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.registry import register_agent
from ainet_gym.agents.rllib_train import read_checkpoint_metadata
from ainet_gym.agents.sb3_agents import check_fit, space_signature

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = ["MODULE_SUBDIR", "RLlibAgent"]

#: where ``Algorithm.save_to_path`` puts the (single-agent) policy module.
MODULE_SUBDIR = Path("learner_group") / "learner" / "rl_module" / "default_policy"


class RLlibAgent:
    """A trained RLlib PPO policy acting through the env's action space."""

    level = "action"

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.meta = read_checkpoint_metadata(self.path)  # FileNotFoundError for a wrong directory
        if self.meta.get("framework") != "rllib":
            raise ValueError(f"rllib:{path}: {self.path / 'ainet_gym.json'} is not an RLlib checkpoint's")
        mdir = self.path / MODULE_SUBDIR
        if not mdir.is_dir():
            raise FileNotFoundError(f"rllib:{path}: no policy module in {str(mdir)!r}")
        try:
            import torch
            from ray.rllib.core.rl_module.rl_module import RLModule
            from ray.rllib.utils.spaces.space_utils import unsquash_action
        except ImportError as e:
            raise ImportError(
                f"rllib:{path} needs the rllib extra: pip install 'ainet-gym[rllib]' ({e})"
            ) from e
        self._torch = torch
        self._unsquash = unsquash_action
        self.module = RLModule.from_checkpoint(str(mdir.resolve()))
        self.module.eval()
        self._dist_cls = self.module.get_inference_action_dist_cls()
        self.name = "rllib-" + str(self.meta.get("algo", "ppo"))
        self.env_kwargs: dict[str, Any] = {
            "action_mode": self.meta.get("action_mode", "split"),
            "history": int(self.meta.get("history", 4)),
            "observation": self.meta.get("observation", "flat"),
        }

    def check(self, core: EnvCore) -> None:
        want = (space_signature(self.module.observation_space), space_signature(self.module.action_space))
        got = (space_signature(core.observation_space), space_signature(core.action_space))
        check_fit("checkpoint", self.path, self.meta, core.scenario.name, want, got)

    def reset(self, core: EnvCore) -> None:
        return None

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        torch = self._torch
        with torch.no_grad():
            out = self.module.forward_inference(
                {"obs": torch.as_tensor(np.asarray(obs), dtype=torch.float32)}
            )
            dist = self._dist_cls.from_logits(out["action_dist_inputs"]).to_deterministic()
            a = dist.sample().cpu().numpy()
        a = np.stack([self._unsquash(x, self.module.action_space) for x in a])
        return a.astype(np.int64) if self.env_kwargs["action_mode"] == "path" else a


register_agent(
    "rllib",
    RLlibAgent,
    needs_arg=True,
    arg_help="DIR",
    description="an RLlib checkpoint directory (ainet-gym train --framework rllib)",
    overwrite=True,
)
