"""Share weights per unit (``BatchSim.set_share_weights`` / ``EnvCore.set_share_weights``): the weighted
max-min share in both backends, by hand and numpy against numba, in snapshots, and the validation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ainet_gym.checks.parity import RTOL, _compare, max_rel_diff
from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario.loader import load_scenario
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = [
    "numpy",
    pytest.param("numba", marks=pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="no numba")),
]

_JOB = {"gpus": 2, "compute_ms": 10, "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": 4e8}]}


def _two_jobs() -> Any:
    """Two 2-GPU jobs whose sendrecv flows (4e8 bytes each way) share one 400G uplink each way (one spine,
    no latency, efficiency 1), 10 ms compute."""
    return load_scenario(
        {
            "name": "share-weights",
            "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
                       "gpus_per_host": 1, "nic_gbps": 400, "uplink_gbps": 400, "hop_latency_us": 0.0,
                       "link_efficiency": 1.0},
            "workload": {"jobs": [{**_JOB, "name": "a", "placement": [0, 2]},
                                  {**_JOB, "name": "b", "placement": [1, 3]}]},
            "dynamics": {"episode_steps": 3, "decision_interval_ms": 30},
            "routing": {"max_paths": 1},
        }
    )  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_weights_1_to_3_share_one_link_a_quarter_and_three_quarters(backend: str) -> None:
    """By hand: at weights 1:3 the heavy job runs at 3/4 of 50 GB/s (37.5) and ends after 4e8 / 37.5e9 =
    10.667 ms; the light one has moved 1.333e8 bytes by then and takes all 50 GB/s for the remaining 2.667e8
    (5.333 ms): comm 16 ms, steps 10 + 16 = 26.000 and 10 + 10.667 = 20.667 ms. Unweighted, in the same batch:
    both 25 GB/s, 26 ms. Weights 2:2 are the unweighted share."""
    core = EnvCore(_two_jobs(), batch=4, backend=backend)
    core.reset([0, 1, 2, 3])
    core.set_share_weights(np.array([[1.0, 1.0], [1.0, 3.0], [3.0, 1.0], [2.0, 2.0]]))
    _, _, _, _, info = core.step_split(core.routing_context.default_split())
    heavy = 10.0 + 4e8 / 37.5e9 * 1e3
    expect = [[26.0, 26.0], [26.0, heavy], [heavy, 26.0], [26.0, 26.0]]
    np.testing.assert_allclose(np.asarray(info["step_time_ms"]), expect, rtol=1e-9)


def _weighted_run(
    backend: str, scenario: str, intervals: int, seed: int, weighted: bool = True
) -> list[tuple]:
    sc = load_scenario(scenario)
    core = EnvCore(sc, 2, action_mode="split", backend=backend)
    core.reset([seed, seed + 1])
    rng = np.random.default_rng(seed)
    pol = get_policy("greedy")
    outs = []
    for _ in range(intervals):
        J, n_bg = core.world.job_unit.shape[1], core.world.bg_unit.shape[1]
        jw, bw = rng.uniform(0.25, 8.0, (2, J)), rng.uniform(0.25, 8.0, (2, n_bg))
        if weighted:
            core.set_share_weights(jw, bw)
        outs.append(core.step_split(pol(core.world, core.last_result)))
    return outs


@pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("scenario", ["storage-checkpoint", "multi-tenant-churn", "moe-alltoall-skewed"])
def test_numba_matches_numpy_with_random_weights(scenario: str) -> None:
    """Random weights (jobs and background, new at every interval) over a few intervals: every observation,
    reward and info value of the two backends agrees to 1e-9 relative. moe-alltoall-skewed (492 flows) runs
    in the lazy incremental kernel on numba (``test_a_weighted_alltoall_takes_the_lazy_kernel``)."""
    ref, got = (_weighted_run(be, scenario, 4, seed=3) for be in ("numpy", "numba"))
    worst: dict[str, float] = {}
    for t, (x, y) in enumerate(zip(ref, got, strict=True)):
        for name, a, b in zip(("obs", "reward", "terminated", "truncated", "info"), x, y, strict=True):
            _compare(f"step{t}.{name}", a, b, worst)
    bad = {k: v for k, v in worst.items() if v > RTOL}
    assert not bad, bad
    # the weights changed the run (against the same run unweighted)
    plain = _weighted_run("numpy", scenario, 4, seed=3, weighted=False)
    assert any(not np.array_equal(x[1], y[1]) for x, y in zip(ref, plain, strict=True))


@pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")
def test_a_weighted_alltoall_takes_the_lazy_kernel() -> None:
    """A weighted instance of the lazy kernel's size (issue-28zc): moe-alltoall-skewed, 492 flows, two
    instances at random weights per interval (a third of them 1). The numba backend runs it in the lazy
    incremental kernel (its counters: full and incremental fills, parallel-rule solves and departure repairs,
    all in weighted levels) and every figure equals the numpy full re-solve per event to 1e-9 relative. Every
    weight 2 (the weighted code, levels halved) is the unweighted run to 1e-9."""
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario("moe-alltoall-skewed")
    worlds = {}
    for key in ("numpy", "numba", "twos", "plain"):
        worlds[key] = FabricWorld(sc, 2, backend="numpy" if key == "numpy" else "numba")
        worlds[key].reset(seeds=[0, 1])
    n = worlds["numba"].sim.n_units
    assert n == 4 and worlds["numba"].sim.any_lazy()
    rng = np.random.default_rng(7)
    counts = np.zeros(4, dtype=np.int64)
    fields = ("iterations", "step_time_sum_s", "comm_time_sum_s", "active_time_s", "link_bytes")
    for t in range(5):
        w = (
            np.where(rng.random(n) < 1 / 3, 1.0, rng.uniform(0.25, 8.0, n))
            if t
            else np.array([1.0, 3.0, 0.5, 2.0])
        )
        ms = {}
        for key, world in worlds.items():
            world.sim.set_share_weights({"twos": np.full(n, 2.0), "plain": None}.get(key, w))
            if key == "plain":
                world.sim.engine_state.unit_weight = None  # (None: each job's scenario weight, 1 here)
            world.sim.set_split(world.default_split())
            ms[key] = world.sim.run_interval(world.decision_interval_s)
        m = ms["numba"]
        counts += (m.full_fills, m.incremental_solves, m.parallel_solves, m.repairs)
        for f in fields:
            for a, b in (("numpy", "numba"), ("plain", "twos")):
                x, y = np.asarray(getattr(ms[a], f), float), np.asarray(getattr(ms[b], f), float)
                assert max_rel_diff(x, y) <= RTOL, (t, f, a, b, max_rel_diff(x, y))
    assert (counts > 0).all(), counts  # every path of the lazy kernel ran weighted
    assert ms["twos"].incremental_solves > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_weights_are_in_snapshots_and_restored(backend: str) -> None:
    """A snapshot holds the weights: steps after a restore give what they gave, bit for bit, also after the
    weights were changed in between; a copy of one instance (``source``) takes that instance's weights."""
    core = EnvCore(_two_jobs(), batch=2, backend=backend)
    core.reset([0, 1])
    core.set_share_weights(np.array([[1.0, 3.0], [5.0, 1.0]]))
    snap = core.snapshot()
    split = core.routing_context.default_split()
    first = np.asarray(core.step_split(split)[4]["step_time_ms"]).copy()
    core.restore(snap)
    core.set_share_weights(None)
    assert core.world.sim.engine_state.unit_weight is None
    core.restore(snap)
    np.testing.assert_array_equal(np.asarray(core.step_split(split)[4]["step_time_ms"]), first)
    one = EnvCore(_two_jobs(), batch=3, backend=backend)
    one.restore(snap, source=[1, 1, 0])
    got = np.asarray(one.step_split(one.routing_context.default_split())[4]["step_time_ms"])
    np.testing.assert_array_equal(got, first[[1, 1, 0]])


def test_all_weights_1_are_stored_as_none() -> None:
    """Weights of 1 everywhere are the unweighted engine (``unit_weight`` None: the solvers as before)."""
    core = EnvCore(_two_jobs(), batch=1, backend="numpy")
    core.reset([0])
    core.set_share_weights(np.ones((1, 2)))
    assert core.world.sim.engine_state.unit_weight is None
    core.set_share_weights(np.array([[1.0, 2.0]]))
    np.testing.assert_array_equal(core.world.sim.engine_state.unit_weight, [1.0, 2.0])


@pytest.mark.parametrize(
    ("jobs", "background", "match"),
    [
        ([[1.0, 0.0]], 1.0, r"jobs\[0, 1\] = 0.0: allowed: a finite number > 0"),
        ([[1.0, -2.0]], 1.0, r"jobs\[0, 1\] = -2.0"),
        ([[np.nan, 1.0]], 1.0, r"jobs\[0, 0\] = nan"),
        ([[np.inf, 1.0]], 1.0, r"jobs\[0, 0\] = inf"),
        ([[1.0, 2.0, 3.0]], 1.0, r"jobs = .*allowed: finite numbers > 0 of shape \(1, 2\)"),
        ([["x", 1.0]], 1.0, r"jobs = .*allowed: finite numbers > 0"),
    ],
)
def test_a_bad_weight_is_refused_by_name_and_changes_nothing(jobs: Any, background: Any, match: str) -> None:
    core = EnvCore(_two_jobs(), batch=1, backend="numpy")
    core.reset([0])
    core.set_share_weights(np.array([[2.0, 3.0]]))
    with pytest.raises(ValueError, match=match):
        core.set_share_weights(jobs, background)
    np.testing.assert_array_equal(core.world.sim.engine_state.unit_weight, [2.0, 3.0])


def test_batchsim_refuses_bad_weights_by_unit() -> None:
    core = EnvCore(_two_jobs(), batch=1, backend="numpy")
    core.reset([0])
    sim = core.world.sim
    with pytest.raises(
        ValueError, match=r"share_weights\[1\] = 0.0 \(unit 'b'\): allowed: a finite number > 0"
    ):
        sim.set_share_weights([1.0, 0.0])
    with pytest.raises(ValueError, match=r"share_weights has shape \(3,\): allowed: \(2,\)"):
        sim.set_share_weights([1.0, 1.0, 1.0])
    assert sim.engine_state.unit_weight is None


def test_a_kept_job_keeps_its_weight_over_a_restack_and_a_new_one_starts_at_1() -> None:
    """Job churn restacks the units: a job that stays keeps its weight, a job that arrives starts at 1."""
    core = EnvCore(load_scenario("multi-tenant-churn"), 1, action_mode="split", backend="numpy")
    core.reset([0])
    pol = get_policy("ecmp")
    restacks = 0
    for _ in range(30):
        w = core.world
        J = w.job_unit.shape[1]
        core.set_share_weights(np.arange(2.0, 2.0 + J)[None, :])
        names, stack = list(w.job_names(0)), w.sim.stack
        core.step_split(pol(w, core.last_result))
        if w.sim.stack is stack:
            continue
        restacks += 1
        uw = w.sim.engine_state.unit_weight
        for j, name in enumerate(w.job_names(0)):
            if name is None:
                continue
            got = 1.0 if uw is None else uw[w.job_unit[0, j]]
            assert got == (2.0 + j if name == names[j] else 1.0), (j, name, names[j])
    assert restacks > 0


def _with_weights(wa: Any, wb: Any) -> Any:
    """:func:`_two_jobs` with ``share_weight`` ``wa`` and ``wb``."""
    d = {
        "name": "share-weights",
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 1, "hosts_per_leaf": 2, "gpus_per_host": 1,
                   "nic_gbps": 400, "uplink_gbps": 400, "hop_latency_us": 0.0, "link_efficiency": 1.0},
        "workload": {"jobs": [{**_JOB, "name": "a", "placement": [0, 2], "share_weight": wa},
                              {**_JOB, "name": "b", "placement": [1, 3], "share_weight": wb}]},
        "dynamics": {"episode_steps": 3, "decision_interval_ms": 30},
        "routing": {"max_paths": 1},
    }  # fmt: skip
    return load_scenario(d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_scenario_share_weight_is_each_jobs_initial_weight(backend: str) -> None:
    """``jobs[].share_weight`` 1 and 3: the 1:3 hand computation, from reset and after set_share_weights(None);
    weights set from the env replace it until then."""
    assert _two_jobs().jobs[0].share_weight == 1.0  # the default
    core = EnvCore(_with_weights(1.0, 3.0), batch=1, backend=backend)
    core.reset([0])
    np.testing.assert_array_equal(core.world.sim.engine_state.unit_weight, [1.0, 3.0])
    split = core.routing_context.default_split()
    heavy = 10.0 + 4e8 / 37.5e9 * 1e3
    np.testing.assert_allclose(
        np.asarray(core.step_split(split)[4]["step_time_ms"]), [[26.0, heavy]], rtol=1e-9
    )
    core.set_share_weights(np.ones((1, 2)))
    assert core.world.sim.engine_state.unit_weight is None
    core.set_share_weights(None)
    np.testing.assert_array_equal(core.world.sim.engine_state.unit_weight, [1.0, 3.0])


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "x", 2e6])
def test_a_bad_scenario_share_weight_is_refused_by_field(bad: Any) -> None:
    from ainet_gym.scenario.loader import ScenarioError

    with pytest.raises(ScenarioError, match=r"jobs\[1\]\.share_weight"):
        _with_weights(1.0, bad)
