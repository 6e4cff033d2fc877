"""Policies of every class: each engine-level policy has a controls class; ``greedy+bg``, ``lp+bg`` and the
predictive ``+bg`` routers route the background too; ``lp+bg`` is never worse than ``lp`` in the LP's own
objective; the LP cache returns what a fresh solve returns; ``solo-lp+bg`` gives each job its lowest peak.
(Their rows in evaluation tables: ``tests/agents/test_baseline_classes.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

import ainet_gym
from ainet_gym.agents.registry import make_agent
from ainet_gym.envs.env import EnvCore
from ainet_gym.routing import lp as lp_module
from ainet_gym.routing.loads import controlled_connections, offered_utilization
from ainet_gym.routing.policies import CONTROLS, POLICIES
from tests._scenarios import small_spine_leaf

NEW = ("greedy+bg", "lp+bg", "predictive-greedy+bg", "predictive-lp+bg")


def _core(scenario, seeds=(1, 2)) -> EnvCore:
    core = EnvCore(ainet_gym.load_scenario(scenario), batch=len(seeds))
    core.reset(list(seeds))
    return core


def test_every_policy_has_a_class_and_bg_names_are_jobs_plus_bg() -> None:
    assert set(CONTROLS) == set(POLICIES)
    for name in POLICIES:
        want = "none" if name == "ecmp" else ("jobs+bg" if name.endswith("+bg") else "jobs")
        assert CONTROLS[name] == want, name
    assert set(NEW) <= set(POLICIES)
    for name in NEW:
        assert make_agent(name).controls == "jobs+bg", name


def _bg_collision() -> dict:
    """Storage on leaf 1 sends 4 x 100G to a job's 2 GPUs on leaf 0 over 2 spines (400G uplinks): ECMP
    hashing puts 3 or 4 of the flows on one uplink in most seeds; spread evenly, no uplink passes 50%."""
    return {
        "name": "bg-collision",
        "fabric": {
            "topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 1, "gpus_per_host": 2,
            "nic_gbps": 400, "uplink_gbps": 400, "storage": {"hosts": 1, "gbps": 800, "leaves": [1]},
        },
        "workload": {
            "jobs": [{"name": "a", "gpus": 2, "placement": [0, 1], "compute_ms": 10,
                      "collectives": [{"op": "allreduce", "bytes": 1e7}]}],
            "background": [{"kind": "storage", "gbps": 400, "pattern": "constant", "flows_per_host": 4}],
        },
        "dynamics": {"episode_steps": 4},
        "routing": {"max_paths": 2},
    }  # fmt: skip


@pytest.mark.parametrize("scenario", ["periodic-interference", "bg-collision"])
def test_lp_bg_peak_is_never_above_lp(scenario: str) -> None:
    # the LP's own objective: the peak offered utilisation. lp+bg's feasible set holds lp's routing, so its
    # optimum is never higher (to the 1e-6 relative slack each keeps on its peak for its second LP);
    # periodic-interference: through a checkpoint burst (steps 3-4) and the half-rate link; bg-collision:
    # ECMP stacks the background on one uplink, which only lp+bg can move, so it is strictly lower there
    core = _core(_bg_collision() if scenario == "bg-collision" else scenario, seeds=range(8))
    lower = np.zeros(core.batch, dtype=bool)
    for _ in range(5):
        w = core.world
        u_lp = offered_utilization(w, POLICIES["lp"](w, core.last_result)).max(axis=1)
        u_bg = offered_utilization(w, POLICIES["lp+bg"](w, core.last_result)).max(axis=1)
        assert np.all(u_bg <= u_lp * (1 + 2e-6)), (u_bg, u_lp)
        lower |= u_bg < u_lp * (1 - 1e-3)
        core.step_split(POLICIES["ecmp"](w, core.last_result))
    if scenario == "bg-collision":
        assert lower.sum() >= 4, lower  # the seeds whose hash stacks the background


@pytest.mark.parametrize("name", ["greedy+bg", "lp+bg"])
def test_bg_routers_move_background_and_agree_on_its_absence(name: str) -> None:
    core = _core("periodic-interference")
    for _ in range(4):  # into the checkpoint burst (steps 3-4); greedy needs a last interval
        core.step_split(POLICIES["spray"](core.world, core.last_result))
    w, sim = core.world, core.world.sim
    bg = ~controlled_connections(w) & (sim.conn_npaths > 1)
    assert bg.any() and controlled_connections(w, background=True).all()
    split = POLICIES[name](w, core.last_result)
    np.testing.assert_allclose(split.sum(axis=1), 1.0)
    assert (np.abs(split[bg] - w.default_split()[bg]).max(axis=1) > 1e-9).any()
    # without background, the +bg router is the jobs router, connection for connection
    nobg = small_spine_leaf(6)
    nobg["workload"]["background"] = []
    c2 = _core(nobg)
    c2.step_split(POLICIES["ecmp"](c2.world, None))
    base = name.removesuffix("+bg")
    np.testing.assert_array_equal(
        POLICIES[name](c2.world, c2.last_result), POLICIES[base](c2.world, c2.last_result)
    )


def test_lp_cache_returns_the_fresh_solution(monkeypatch: pytest.MonkeyPatch) -> None:
    core = _core("periodic-interference", seeds=(1, 2, 3))
    cached = [POLICIES["lp+bg"](core.world, None), POLICIES["lp"](core.world, None)]
    again = [POLICIES["lp+bg"](core.world, None), POLICIES["lp"](core.world, None)]  # from the cache
    monkeypatch.setattr(lp_module, "LP_CACHE_SIZE", 0)
    fresh = [POLICIES["lp+bg"](core.world, None), POLICIES["lp"](core.world, None)]
    for a, b, c in zip(cached, again, fresh):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)
    # a returned split is the caller's own: writing it does not change the cached one
    cached[0][:] = 0.0
    monkeypatch.setattr(lp_module, "LP_CACHE_SIZE", 4096)
    np.testing.assert_array_equal(POLICIES["lp+bg"](core.world, None), fresh[0])


def test_solo_lp_gives_each_job_its_lowest_peak_over_the_sprayed_background() -> None:
    # solo-lp+bg: each job by the min-max LP alone over the sprayed background; so for every job, its own
    # peak (its load plus the sprayed background, over capacity) is no higher than under any other
    # routing of that job: lp+bg's, spray's, greedy's (an optimality check of each job's LP)
    from ainet_gym.routing.loads import connection_peak_rate, offered_load

    core = _core("ingest-bursts", seeds=(1, 2))
    for _ in range(3):
        core.step_split(POLICIES["ecmp"](core.world, core.last_result))
    w, sim = core.world, core.world.sim
    d = connection_peak_rate(w)
    cap = sim.engine_state.capacity_bytes_per_s
    sprayed = POLICIES["spray+bg"](w, core.last_result)
    bg = sim.unit_bg[sim.conn_unit]
    bg_load = offered_load(w, sprayed, np.where(bg, d, 0.0))
    solo = POLICIES["solo-lp+bg"](w, core.last_result)
    np.testing.assert_array_equal(solo[bg], sprayed[bg])  # the background is sprayed
    units = np.unique(sim.conn_unit[~bg])
    for other in ("lp+bg", "spray+bg", "greedy+bg"):
        split = POLICIES[other](w, core.last_result)
        for u in units:
            mine = np.where(sim.conn_unit == u, d, 0.0)

            def peak(s: np.ndarray, mine: np.ndarray = mine) -> np.ndarray:
                load = offered_load(w, s, mine) + bg_load
                return np.where(cap > 0, load / np.where(cap > 0, cap, 1.0), 0.0).max(axis=1)

            b = sim.unit_inst[u]
            assert peak(solo)[b] <= peak(split)[b] * (1 + 1e-6) + 1e-9, (other, u)
