"""A saved policy (knn, qnet or PPO) as the player of :func:`~.labels.lookahead_labels`: DAgger's
aggregation step labels the states it visits (:func:`label_player`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ainet_gym.agents.imitate.agent import KnnAgent
from ainet_gym.agents.imitate.label_files import check_fabric


def label_player(
    path: str, scenario: Any, action_mode: str, feats: tuple[str, ...], plans: tuple[str, ...] | None = None
) -> Any:
    """The deterministic plan choice of a saved policy, as a function of the batch's observations: a
    ``knn`` policy file (.npz, :func:`fit_knn`), a ``qnet`` one (.npz with a ``layers`` field,
    :func:`ainet_gym.agents.qnet.fit_qnet`) or a PPO model (.zip). A knn or qnet file must pick among
    ``plans`` (the labelling env's, when given), in that order, and a file with a fabric fingerprint (a knn or
    qnet file's field, a PPO model's metadata) must have been made on ``scenario``'s fabric (:func:`check_fabric`):
    a ValueError otherwise."""
    if str(path).endswith(".npz"):
        from types import SimpleNamespace

        from ainet_gym.agents.qnet import QnetAgent, is_qnet_file
        from ainet_gym.envs.env import EnvCore

        agent: Any = QnetAgent(path) if is_qnet_file(path) else KnnAgent(path)
        if plans is not None and list(agent.plans) != list(plans):
            raise ValueError(
                f"policy {path!r}: picks among the plans {list(agent.plans)}; allowed as a label player here: "
                f"one of the plans {list(plans)} (--action-mode, --extra-plans)"
            )
        if getattr(agent, "cooldown", 0):
            raise ValueError(
                f"policy {path!r}: a knn file with a cooldown keeps state per episode; allowed as a label "
                "player: a file without one"
            )
        core = EnvCore(scenario, action_mode=action_mode, obs_features=feats)
        check_fabric(f"policy {path!r}", getattr(agent, "fabric", None), core.fabric)
        view = SimpleNamespace(obs_layout=core.obs_layout)
        return _AgentPlayer(agent, view)
    from ainet_gym.agents.sb3_agents import load_model
    from ainet_gym.agents.sb3_files import check_model_fabric
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.scenario.loader import load_scenario

    model, meta = load_model(path, "ppo")
    sc = load_scenario(scenario)
    check_model_fabric(f"policy {path!r}", meta, build_fabric(sc.fabric, max_paths=sc.routing.max_paths))
    return lambda o: model.predict(o, deterministic=True)[0]


class _AgentPlayer:
    """A knn or qnet agent as :func:`lookahead_labels`' ``policy``: called with the batch's observations,
    :meth:`reset` at the start of each batch of episodes (a knn file with the :data:`PREVIOUS_PLAN` block keeps
    the plan of each episode's previous decision)."""

    def __init__(self, agent: Any, view: Any) -> None:
        self.agent, self.view = agent, view

    def __call__(self, obs: Any) -> np.ndarray:
        return self.agent.act(self.view, obs)

    def reset(self) -> None:
        self.agent.reset(self.view)
