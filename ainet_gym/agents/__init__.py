"""Agents for ainet-gym: heuristic baselines, stable-baselines3 learners, training and evaluation.

- :mod:`ainet_gym.agents.registry`: the :class:`~ainet_gym.agents.registry.Agent` protocol and the registry behind
  ``--policies`` (``register_agent`` adds one);
- :mod:`ainet_gym.agents.baselines`: ECMP, spray, WCMP, greedy and the LP optimum, at the engine level and
  through every action mode;
- :mod:`ainet_gym.agents.sb3_agents`: PPO, A2C, SAC and MaskablePPO; saving and loading models with metadata;
- :mod:`ainet_gym.agents.marl_agents`: ``marl:PATH``, a per-switch policy (one shared model acting at every switch
  from its local view, :func:`ainet_gym.parallel_env`);
- :mod:`ainet_gym.agents.train`, :mod:`ainet_gym.agents.evaluate`, :mod:`ainet_gym.agents.demo`: the ``ainet-gym train``,
  ``evaluate`` and ``demo`` commands.

stable-baselines3 is imported lazily: the baselines and the evaluation of baselines work without the
``rl`` extra.
"""

from ainet_gym.agents.registry import AGENTS, Agent, available_policies, make_agent, register_agent

__all__ = ["AGENTS", "Agent", "available_policies", "make_agent", "register_agent"]
