"""Per-seed variation of a scenario (``start_jitter_ms`` of a job, ``offset_jitter_steps`` of a periodic
background): checked against the closed forms of the burst schedule and of a compute-only job's first
interval, and off by default (a scenario without the fields plays exactly the episodes it did before)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario import ScenarioError, load_scenario
from tests._scenarios import small_spine_leaf


def _bursts(sc: dict, seeds: list[int], steps: int) -> np.ndarray:
    """(seeds, steps) 0/1: was background 0 on in each interval (ECMP routing)."""
    core = EnvCore(sc, batch=len(seeds))
    core.reset(seeds)
    on = []
    for _ in range(steps):
        on.append(core.world.sim.state.bg_on[core.world.bg_unit[:, 0]].copy())
        core.step_split(get_policy("ecmp")(core.world, None))
    return np.array(on).T.astype(int)


def _schedule(offset: int, period: int, duration: int, steps: int) -> np.ndarray:
    """The documented rule: on where (t - offset) mod period < duration and t >= offset."""
    t = np.arange(steps)
    return (((t - offset) >= 0) & ((t - offset) % period < duration)).astype(int)


def test_burst_offset_is_drawn_per_seed_within_its_range() -> None:
    sc = small_spine_leaf(episode_steps=24)
    bg = {"kind": "storage", "gbps": 200, "pattern": "periodic", "period_steps": 6, "duration_steps": 2}
    sc["workload"]["background"] = [dict(bg, offset_steps=1, offset_jitter_steps=4)]
    seeds = list(range(1, 13))
    got = _bursts(sc, seeds, 24)
    offsets = []
    for row in got:
        # exactly one offset in 1..5 reproduces the whole episode's schedule
        fits = [o for o in range(0, 12) if np.array_equal(row, _schedule(o, 6, 2, 24))]
        assert len(fits) == 1 and 1 <= fits[0] <= 5, row
        offsets.append(fits[0])
    assert len(set(offsets)) >= 3  # 12 seeds over 5 phases: the phase varies
    # the same seed draws the same phase again
    assert np.array_equal(_bursts(sc, seeds[:3], 24), got[:3])


def test_without_jitter_every_seed_has_the_scenario_schedule_and_the_same_episode() -> None:
    sc = small_spine_leaf(episode_steps=12)
    sc["workload"]["background"][0].update(offset_steps=2)
    got = _bursts(sc, [1, 2, 3], 12)
    assert (got == _schedule(2, 3, 1, 12)[None]).all()
    # explicit zeros draw nothing: hash seeds, placements and every result are those of no field at all
    zero = copy.deepcopy(sc)
    zero["workload"]["background"][0]["offset_jitter_steps"] = 0
    for j in zero["workload"]["jobs"]:
        j["start_jitter_ms"] = 0.0
    a, b = EnvCore(sc, batch=3), EnvCore(zero, batch=3)
    a.reset([1, 2, 3])
    b.reset([1, 2, 3])
    assert np.array_equal(a.world.state.hash_seed, b.world.state.hash_seed)
    for _ in range(4):
        ra = a.step_split(get_policy("spray")(a.world, None))[1]
        rb = b.step_split(get_policy("spray")(b.world, None))[1]
        assert np.array_equal(ra, rb)


def test_start_jitter_delays_a_compute_only_job_by_the_drawn_start() -> None:
    # one GPU computing C ms per iteration, nothing to communicate, 100 ms intervals: in the first
    # interval it computes from its start s, so it completes floor((100 - s) / C) iterations (C = 22/3 ms
    # keeps every iteration end off the 0.1 ms grid of the starts)
    sc = {
        "name": "start-jitter",
        "fabric": {"topology": "single_switch", "hosts": 1, "gpus_per_host": 1},
        "workload": {
            "jobs": [{"name": "solo", "gpus": 1, "compute_ms": 22.0 / 3.0, "start_jitter_ms": 40.0}]
        },
        "dynamics": {"episode_steps": 2, "decision_interval_ms": 100.0},
    }
    seeds = list(range(1, 11))
    core = EnvCore(sc, batch=len(seeds))
    core.reset(seeds)
    starts = np.array([core.world.state.jobs[b][0].start_ms for b in range(len(seeds))])
    assert ((starts >= 0) & (starts <= 40.0)).all()
    assert np.allclose(starts * 10, np.round(starts * 10))  # the 0.1 ms grid
    assert len(set(starts.tolist())) >= 5
    core.step_split(get_policy("ecmp")(core.world, None))
    iters = core.last_result.iterations[:, 0]
    assert np.array_equal(iters, np.floor((100.0 - starts) / (22.0 / 3.0))), (iters, starts)
    assert len(set(iters.tolist())) >= 3


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        ("bg", {"pattern": "constant", "offset_jitter_steps": 2}, "offset_jitter_steps"),
        ("bg", {"offset_jitter_steps": -1}, "offset_jitter_steps"),
        ("job", {"start_jitter_ms": -5.0}, "start_jitter_ms"),
        ("template", {"start_jitter_ms": 5.0}, "start_jitter_ms"),
    ],
)
def test_bad_jitter_is_an_error_naming_the_field(
    where: str, value: dict, field: str, small_spine_leaf_scenario: dict
) -> None:
    sc = small_spine_leaf_scenario
    if where == "bg":
        sc["workload"]["background"][0].update(value)
    elif where == "job":
        sc["workload"]["jobs"][0].update(value)
    else:
        tmpl = dict(copy.deepcopy(sc["workload"]["jobs"][0]), name="t", **value)
        sc["dynamics"]["job_churn"] = {"arrival_rate": 0.5, "max_jobs": 3, "templates": [tmpl]}
    with pytest.raises(ScenarioError, match=field):
        load_scenario(sc)


def test_shipped_jitter_scenario_varies_the_episode_of_a_policy_that_routes_everything() -> None:
    # in periodic-interference a jobs+bg policy plays one episode on every seed; in its jitter variant
    # the burst phase and the job starts differ, so spray+bg's GPU utilisation differs between seeds
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scenarios" / "periodic-interference-jitter.yaml"
    util = {}
    for name in ("periodic-interference", "periodic-interference-jitter"):
        sc = path if name.endswith("jitter") else path.with_name(f"{name}.yaml")
        core = EnvCore(sc, batch=3, episode_steps=10)
        core.reset([1, 2, 3])
        total = np.zeros(3)
        for _ in range(10):
            total += core.step_split(get_policy("spray+bg")(core.world, None))[1]
        util[name] = total
    assert np.ptp(util["periodic-interference"]) < 1e-9
    assert np.ptp(util["periodic-interference-jitter"]) > 1e-3


def test_crosscheck_replays_the_episode_s_drawn_start() -> None:
    # ns-3 replays the episode of the seed: the job starts at start_ms plus the seed's draw, not at start_ms
    from ainet_gym.checks.crosscheck import CrosscheckConfig, _run_fluid
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario(
        {
            "name": "xc-jitter",
            "fabric": {"topology": "single_switch", "hosts": 2, "gpus_per_host": 1},
            "workload": {
                "jobs": [
                    {
                        "name": "pair",
                        "gpus": 2,
                        "compute_ms": 1.0,
                        "start_jitter_ms": 2.0,
                        "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": 1e6}],
                    }
                ]
            },
            "dynamics": {"episode_steps": 2},
        }
    )
    starts = set()
    for seed in range(6):
        world = FabricWorld(sc)
        world.reset([seed])
        drawn = world.state.jobs[0][0].start_ms * 1e-3
        (plan,) = _run_fluid(sc, "ecmp", seed, 2, CrosscheckConfig(fluid_repeats=0)).jobs
        assert plan.start_s == pytest.approx(drawn, abs=1e-15)
        starts.add(round(drawn, 6))
    assert len(starts) > 1  # the draw differs from seed to seed
