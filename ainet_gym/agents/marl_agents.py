"""Per-switch policies in ``ainet-gym evaluate``: ``marl:PATH``, a parameter-shared model of
``examples/marl_ppo.py`` acting at every switch from the switch's local observation.

The evaluator runs ``B`` episodes at once on an :class:`~ainet_gym.envs.env.EnvCore` in ``ecmp_weights`` mode.
Each step this agent builds every switch's local observation with
:class:`~ainet_gym.envs.multiagent.SwitchAgents` (the same code as :func:`ainet_gym.parallel_env`), asks the one
shared policy for each switch's next-hop weights (one batched ``predict`` over episodes x switches), and
returns the resulting split of every connection (engine level), so the per-switch policy is scored on
the same seeds, episode length and metrics as the baselines and the centralised PPO.

One difference from the PettingZoo env, on purpose: there a switch that loses its last next-hop choice
leaves for the rest of the episode (PettingZoo does not revive agents); here every switch with a choice
acts at every step, a repaired one included.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.model_files import MODEL_LIMITS, ModelFileError
from ainet_gym.agents.registry import register_agent
from ainet_gym.agents.sb3_agents import check_fit, meta_history
from ainet_gym.agents.sb3_files import check_model_fabric
from ainet_gym.errors import check_choice

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = ["MARL_KIND", "MarlAgent", "marl_metadata"]

MARL_KIND = "per_switch"
#: metadata keys a per-switch model must have (:func:`marl_metadata` writes them).
MARL_KEYS = ("agents", "history", "observation_shape", "action_shape")


def marl_metadata(env: Any, scenario_name: str, **extra: Any) -> dict[str, Any]:
    """The ``ainet_gym.json`` metadata of a per-switch model trained on ``env`` (a
    :class:`~ainet_gym.envs.multiagent.FabricParallelEnv`): what :class:`MarlAgent` needs to rebuild the
    switches' view and to reject a scenario whose spaces do not fit, and ``fabric``, the fingerprint of the env's
    fabric (:func:`~ainet_gym.fabric.topology.fabric_fingerprint`: ``marl:PATH`` refuses to play on another
    fabric, issue-26zk2)."""
    from ainet_gym.fabric.topology import fabric_fingerprint

    sw = env.switches
    return {
        "algo": "ppo",
        "kind": MARL_KIND,
        "scenario": scenario_name,
        "agents": sw.tier,
        "history": env.core.history,
        "withdraw_dead": sw.withdraw_dead,
        "observation_shape": list(sw.observation_space.shape),
        "action_shape": list(sw.action_space.shape),
        "agent_names": list(sw.names),
        "fabric": fabric_fingerprint(env.core.fabric),
        **extra,
    }


class MarlAgent:
    """A parameter-shared per-switch policy (SB3 PPO over one switch's observation and next hops)."""

    level = "engine"

    def __init__(self, path: str | os.PathLike) -> None:
        from ainet_gym.agents.sb3_agents import load_model

        self.path = Path(path)
        self.model, self.meta = load_model(path, "ppo", label=f"marl:{path}")
        if self.meta.get("kind") != MARL_KIND:
            raise ValueError(
                f"marl:{path}: not a per-switch model (no kind={MARL_KIND!r} in its metadata); "
                "train one with examples/marl_ppo.py, or evaluate a centralised model as ppo:PATH"
            )
        self._check_meta(f"marl:{path}")
        self.name = "marl"
        self.env_kwargs: dict[str, Any] = {
            "action_mode": "ecmp_weights",
            "history": meta_history(self.meta, f"marl:{path}"),
        }
        self.switches: Any = None

    def _check_meta(self, what: str) -> None:
        """Every key the agent reads from the metadata, present and of the right type (one line naming the
        file and the key otherwise)."""
        from ainet_gym.envs.multiagent import AGENT_TIERS

        m = self.meta
        missing = [k for k in MARL_KEYS if k not in m]
        if missing:
            raise ModelFileError(
                f"{what}: its per-switch metadata lacks {', '.join(missing)} (written by examples/marl_ppo.py "
                "with marl_metadata)"
            )
        check_choice(f"{what}: metadata agents", m["agents"], AGENT_TIERS, error=ModelFileError)
        for k in ("observation_shape", "action_shape"):
            v = m[k]
            ok = (
                isinstance(v, list)
                and len(v) == 1
                and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
            )
            if not ok or not 1 <= v[0] <= MODEL_LIMITS["dim_max"]:
                raise ModelFileError(
                    f"{what}: metadata {k} = {str(v)[:40]}; allowed: [n], an integer n in "
                    f"[1, {MODEL_LIMITS['dim_max']:,}]"
                )
        if not isinstance(m.get("withdraw_dead", True), bool):
            raise ModelFileError(
                f"{what}: metadata withdraw_dead = {m['withdraw_dead']!r}; allowed: true or false"
            )

    def _view(self, core: EnvCore) -> Any:
        from ainet_gym.envs.multiagent import SwitchAgents

        if self.switches is None or self.switches.core is not core:
            self.switches = SwitchAgents(
                core, self.meta["agents"], bool(self.meta.get("withdraw_dead", True))
            )
        return self.switches

    def check(self, core: EnvCore) -> None:
        """Refuse ``core`` if its switches' spaces are not the model's (:func:`check_fit`) or its fabric is not
        the one the model's metadata records (``fabric``; a model without it, saved before issue-26zk2, is not
        checked): a ValueError naming the file."""
        sw = self._view(core)
        got = (list(sw.observation_space.shape), list(sw.action_space.shape))
        want = (self.meta["observation_shape"], self.meta["action_shape"])
        check_fit("model", self.path, self.meta, core.scenario.name, want, got, noun="per-switch ")
        check_model_fabric(
            f"marl:{self.path}", self.meta, getattr(core, "fabric", None), "examples/marl_ppo.py on it"
        )

    def reset(self, core: EnvCore) -> None:
        self._view(core)

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        sw = self._view(core)
        local = sw.observe(obs)  # (batch, agents, D)
        B, A, D = local.shape
        actions, _ = self.model.predict(local.reshape(B * A, D), deterministic=True)
        actions = np.clip(np.asarray(actions, dtype=np.float64).reshape(B, A, sw.K), -1.0, 1.0)
        return sw.split(actions, sw.has_choice())


register_agent(
    "marl",
    MarlAgent,
    needs_arg=True,
    arg_help="PATH",
    description="a per-switch policy (parameter-shared PPO, examples/marl_ppo.py)",
    overwrite=True,
)
