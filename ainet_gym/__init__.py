"""ainet-gym: learn to route traffic in AI data-centre fabrics.

The public surface (see docs/model.md, "Contracts"):

- :func:`max_min_fair`, :func:`max_min_fair_batched`: the bandwidth allocator;
- :func:`load_scenario`, :class:`ScenarioError`, :func:`list_scenarios`: scenario files;
- :func:`simulate`: a scenario under a routing policy, without RL;
- :func:`crosscheck`: the same scenario and policy in the fluid model and in ns-3 (optional extra ``ns3``);
- :func:`fabric_from_graph`, :func:`fabric_to_graph`: your own topology as a networkx graph, and back;
- the Gymnasium environments registered under the ``ainet_gym/`` namespace (importing this package
  registers them);
- :func:`parallel_env`, :func:`aec_env`: per-switch agents as a PettingZoo env (the ``pettingzoo`` extra;
  imported on first use).
"""

from typing import Any

from ainet_gym.envs.registration import ENV_IDS, register_envs
from ainet_gym.fabric.topology import fabric_from_graph, fabric_to_graph
from ainet_gym.routing.predictive_policy import register_predictive_router
from ainet_gym.scenario import ScenarioError, list_scenarios, load_scenario
from ainet_gym.sim.allocator import max_min_fair, max_min_fair_batched

__version__ = "0.3.0"

register_envs()


def _predictive_router(world: Any, router: str, background: bool) -> Any:
    """Routing's ``predictive-*`` policies reach the agents' predictive router through this stand-in until
    the router's module is imported (which registers :class:`~ainet_gym.agents.predictive_router.PredictiveRouter`
    in its place): importing ``ainet_gym`` does not import the agents (their registry, the forecaster, the
    LP: some 10% of a fresh process's start-up, issue-31zs2). The router's own module, not
    ``ainet_gym.agents.predictive``, so that ``python -m ainet_gym.agents.predictive`` runs a module the
    package has not imported (runpy warns otherwise)."""
    from ainet_gym.agents.predictive_router import PredictiveRouter

    return PredictiveRouter(world, router, background)


# routing sits below the agents: the upper room registers what the lower one calls
register_predictive_router(_predictive_router)

#: public names imported on first use: the per-switch env (the ``pettingzoo`` extra), the ns-3 cross-check
#: (its config, fluid run, ns-3 driver and report: some 2,500 lines) and :func:`simulate`: modules a process
#: that steps an env does not run (issue-31zs2)
_LAZY = {
    "parallel_env": "ainet_gym.envs.multiagent",
    "aec_env": "ainet_gym.envs.multiagent",
    "crosscheck": "ainet_gym.checks.crosscheck",
    "simulate": "ainet_gym.sim.simulate",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ainet_gym' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ENV_IDS",
    "ScenarioError",
    "__version__",
    "aec_env",
    "crosscheck",
    "fabric_from_graph",
    "fabric_to_graph",
    "list_scenarios",
    "load_scenario",
    "max_min_fair",
    "max_min_fair_batched",
    "parallel_env",
    "simulate",
]
