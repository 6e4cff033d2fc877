"""The world and its interval result carry every attribute of the routing protocols
(:mod:`ainet_gym.routing.context`), with the documented shapes, and an engine-level policy run on an env's
``routing_context`` reads nothing else (it runs on a view that has only those members)."""

from __future__ import annotations

import inspect

import numpy as np

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing import context
from ainet_gym.routing.policies import POLICIES, PREDICTIVE


def _members(proto: type) -> list[str]:
    return [n for n, _ in inspect.getmembers(proto) if not n.startswith("_")]


def test_the_world_and_its_result_satisfy_the_routing_protocols() -> None:
    core = EnvCore("periodic-interference", batch=2, episode_steps=4)
    core.reset([1, 2])
    core.step_split(core.routing_context.default_split())
    w = core.routing_context
    assert w is core.world
    pairs = [
        (context.RoutingContext, w),
        (context.ConnectionTable, w.sim),
        (context.BackgroundState, w.sim.state),
        (context.EngineInputs, w.sim.engine_state),
        (context.EpisodeClock, w.state),
        (context.FabricLinks, w.fabric),
        (context.LastInterval, core.last_result),
    ]
    for proto, obj in pairs:
        names = _members(proto)
        assert names, proto
        missing = [n for n in names if not hasattr(obj, n)]
        assert not missing, (proto.__name__, missing)
    sim, B, L = w.sim, w.batch, w.fabric.n_links
    C, P = sim.n_conns, w.max_paths
    assert (
        sim.conn_paths.shape[:2] == sim.conn_paths_global.shape[:2] == sim.engine_state.split.shape == (C, P)
    )
    assert sim.engine_state.capacity_bytes_per_s.shape == core.last_result.link_bytes.shape == (B, L)
    assert sim.state.bg_on.shape == sim.unit_bg.shape == sim.unit_inst.shape == (sim.n_units,)
    assert w.default_split().shape == w.live_paths().shape == (C, P)
    # the background units are the only ones that can be on, and this scenario has some on
    assert not np.any(sim.state.bg_on & ~sim.unit_bg) and np.any(sim.unit_bg)


class _Only:
    """A view of ``obj`` with the members of ``proto`` and nothing else (nested protocols wrapped too)."""

    NESTED = {
        (context.RoutingContext, "sim"): context.ConnectionTable,
        (context.RoutingContext, "state"): context.EpisodeClock,
        (context.RoutingContext, "fabric"): context.FabricLinks,
        (context.ConnectionTable, "state"): context.BackgroundState,
        (context.ConnectionTable, "engine_state"): context.EngineInputs,
    }

    def __init__(self, obj: object, proto: type) -> None:
        self._obj, self._proto, self._names = obj, proto, set(_members(proto))

    def __getattr__(self, name: str):
        if name not in self._names:
            raise AttributeError(f"a routing policy read {name!r}, which its protocol does not list")
        value = getattr(self._obj, name)
        nested = self.NESTED.get((self._proto, name))
        return _Only(value, nested) if nested is not None and value is not None else value


def test_every_engine_policy_reads_only_what_the_protocols_list() -> None:
    """A wrong protocol (a member the policies read but the protocol omits) fails here by name."""
    core = EnvCore("ingest-bursts", batch=2, episode_steps=4)
    core.reset([3, 4])
    core.step_split(POLICIES["spray+bg"](core.routing_context, None))
    view = _Only(core.routing_context, context.RoutingContext)
    last = _Only(core.last_result, context.LastInterval)
    names = [n for n in POLICIES if n not in PREDICTIVE]
    assert {"ecmp", "spray", "wcmp", "greedy", "lp", "lp+bg", "solo-lp+bg"} <= set(names)
    for name in names:
        a = POLICIES[name](view, last)
        b = POLICIES[name](core.routing_context, core.last_result)
        np.testing.assert_array_equal(a, b, err_msg=name)
        np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-12, err_msg=name)


def test_the_predictive_router_reads_only_what_the_protocols_list() -> None:
    """The predict-then-route policies read the scenario, the step counts and the nominal capacities through
    the protocols too (issue 31: no agent reads an env's world): on the view, the same splits, lags included."""
    from ainet_gym.agents.predictive_router import PredictiveRouter

    core = EnvCore("periodic-interference", batch=2, episode_steps=4)
    core.reset([1, 2])
    view = _Only(core.routing_context, context.RoutingContext)
    pairs = [
        (
            PredictiveRouter(view, router, bg, steps=4),
            PredictiveRouter(core.routing_context, router, bg, steps=4),
        )
        for router, bg in (("greedy", False), ("lp", True))
    ]
    for t in range(4):
        last = None if core.last_result is None else _Only(core.last_result, context.LastInterval)
        for on_view, on_world in pairs:
            split = on_world(core.last_result)
            np.testing.assert_array_equal(on_view(last), split, err_msg=f"interval {t}")
        core.step_split(split)  # the LP's: the lags see the load it routed
