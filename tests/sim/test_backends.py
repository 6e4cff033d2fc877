"""The compiled (numba) backend against the numpy reference backend, and backend selection.

Parity: one shipped scenario of every family, one seed (two copies in one batch, so that the
per-instance re-solve of the compiled kernel is exercised), 5 intervals, under ECMP, spraying, the
greedy baseline and random split actions, in both rate update modes: every observation, reward, done
flag and info value agrees to 1e-9 relative. The full sweep is ``python -m ainet_gym.checks.parity``.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from ainet_gym.checks.parity import PARITY_POLICIES, RTOL, compare_backends, max_rel_diff
from ainet_gym.sim import backends, engine
from ainet_gym.sim.backends.numba import jit as _jit
from ainet_gym.sim.backends.numba import merge as _merge
from ainet_gym.sim.backends.numba import threads as _threads
from ainet_gym.sim.engine import resolve_backend

pytestmark = pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")

FAMILIES = {
    "spine-leaf": "spine-leaf-2to1",
    "oversubscription": "oversub-7to1",
    "fat-tree": "fat-tree-k8-stride",
    "rail-optimized": "rail-optimized-hierarchical",
    "ecmp collisions": "ecmp-collisions-qp1",
    "link failures": "link-failure",
    "degraded link": "degraded-link",
    "job churn": "multi-tenant-churn",
    "MoE AllToAll": "moe-alltoall-skewed",
    "storage background": "storage-checkpoint",
    "periodic interference": "periodic-interference",
    "transport profile": "profile-roce",
    "graph fabric (3-tier Clos)": "clos3-2pods",
    "multi-port NICs": "dual-plane",
}


@pytest.mark.parametrize("mode", ["event", "phase"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_numba_backend_matches_numpy_reference(family: str, mode: str) -> None:
    for policy in PARITY_POLICIES:
        worst = compare_backends(FAMILIES[family], policy, seed=0, intervals=5, batch=2, rate_updates=mode)
        bad = {k: v for k, v in worst.items() if v > RTOL}
        assert not bad, f"{family} / {policy} / {mode}: {bad}"
        assert any(k.startswith("step4.obs") for k in worst)  # every interval was compared


@pytest.mark.parametrize("family", ["MoE AllToAll", "job churn", "link failures"])
def test_numba_backend_matches_numpy_reference_with_a_rate_quantum(family: str) -> None:
    # completions within 10 us of the first are one event: both backends merge the same ones
    for policy in PARITY_POLICIES:
        worst = compare_backends(FAMILIES[family], policy, seed=0, intervals=5, batch=2, rate_quantum_us=10.0)
        bad = {k: v for k, v in worst.items() if v > RTOL}
        assert not bad, f"{family} / {policy} / quantum 10 us: {bad}"


def test_max_rel_diff_detects_what_parity_must_catch() -> None:
    a = np.array([1.0, 2.0, np.nan])
    assert max_rel_diff(a, a.copy()) == 0.0
    assert max_rel_diff(a, np.array([1.0, 2.0 * (1 + 1e-6), np.nan])) == pytest.approx(1e-6 / (1 + 1e-6))
    assert max_rel_diff(a, np.array([1.0, 2.0, 0.0])) == np.inf  # NaN pattern differs
    assert max_rel_diff(np.array([1, 2]), np.array([1, 3])) == np.inf  # integers must be equal
    assert max_rel_diff(np.zeros(2), np.zeros(3)) == np.inf


def test_backend_keyword_overrides_variable_which_overrides_default(monkeypatch) -> None:
    monkeypatch.delenv(engine.BACKEND_ENV, raising=False)
    assert resolve_backend(None) == "numba"
    monkeypatch.setenv(engine.BACKEND_ENV, "numpy")
    assert resolve_backend(None) == "numpy"
    assert resolve_backend("numba") == "numba"
    monkeypatch.setenv(engine.BACKEND_ENV, "")
    assert resolve_backend(None) == "numba"


def test_unknown_backend_is_an_error_naming_the_source(monkeypatch) -> None:
    with pytest.raises(ValueError, match=r"backend = 'cuda': unknown backend; allowed: numba, numpy"):
        resolve_backend("cuda")
    monkeypatch.setenv(engine.BACKEND_ENV, "jax")
    with pytest.raises(ValueError, match=r"AINET_GYM_BACKEND = 'jax'"):
        resolve_backend(None)


def test_missing_numba_falls_back_with_one_warning(monkeypatch) -> None:
    monkeypatch.delenv(engine.BACKEND_ENV, raising=False)
    monkeypatch.setattr(_jit, "HAVE_NUMBA", False)
    monkeypatch.setattr(backends, "_fallback_warned", False)
    with pytest.warns(RuntimeWarning, match="falls back to the numpy backend"):
        assert resolve_backend(None) == "numpy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_backend(None) == "numpy"  # warned once only
    with pytest.raises(ImportError, match="numba cannot be imported"):
        resolve_backend("numba")


def test_envs_and_simulate_take_the_backend_keyword() -> None:
    from ainet_gym import simulate
    from ainet_gym.envs.env import FabricRoutingEnv
    from ainet_gym.envs.sb3_vec_env import SB3VecEnv
    from ainet_gym.envs.vector_env import FabricRoutingVectorEnv

    assert FabricRoutingEnv("spine-leaf-2to1", backend="numpy").core.world.sim is None  # built at reset
    env = FabricRoutingEnv("spine-leaf-2to1", backend="numpy")
    env.reset(seed=0)
    assert env.core.world.sim.backend == "numpy"
    venv = FabricRoutingVectorEnv(2, "spine-leaf-2to1", backend="numba")
    venv.reset(seed=0)
    assert venv.core.world.sim.backend == "numba"
    sb3 = SB3VecEnv(num_envs=2, scenario="spine-leaf-2to1", backend="numpy")
    assert sb3.venv.core.world.backend == "numpy"
    a = simulate("spine-leaf-2to1", "ecmp", steps=2, backend="numpy")
    b = simulate("spine-leaf-2to1", "ecmp", steps=2, backend="numba")
    assert a == b


def test_collisions_are_computed_only_when_asked() -> None:
    from ainet_gym.envs.env import EnvCore

    plain = EnvCore("spine-leaf-2to1", 2, backend="numba")
    asked = EnvCore("spine-leaf-2to1", 2, backend="numba", info_keys=("collisions",))
    later = EnvCore("spine-leaf-2to1", 2, backend="numba")
    later.request_info("collisions")
    infos = []
    for core in (plain, asked, later):
        core.reset([0, 1])
        infos.append(core.step_split(core.world.default_split())[4])
    assert "collisions" not in infos[0]
    assert np.array_equal(infos[1]["collisions"], infos[2]["collisions"])
    assert {k for k in infos[1] if k != "collisions"} == set(infos[0])
    with pytest.raises(
        ValueError,
        match=r"info_keys = \('colisions',\): unknown 'colisions'; allowed: links, flows, collisions$",
    ):
        EnvCore("spine-leaf-2to1", 1, info_keys=("colisions",))
    with pytest.raises(ValueError, match=r"info_keys = \('colisions',\): unknown 'colisions'; allowed: "):
        plain.request_info("colisions")


# ---------------------------------------------------------------------------------------------- strategies
def _members(protocol: type) -> set[str]:
    """The attributes and methods a protocol class declares."""
    own = {k for k in vars(protocol) if not k.startswith("_")}
    return own | set(getattr(protocol, "__annotations__", {}))


def test_every_backend_has_a_strategy_and_env_passes_of_its_name() -> None:
    from ainet_gym.envs.passes import PASSES, EnvPasses, get_passes
    from ainet_gym.sim.backends import BACKENDS, SimBackend, get_backend

    assert set(PASSES) == set(BACKENDS)
    for name in BACKENDS:
        sim_side, env_side = get_backend(name), get_passes(name)
        assert sim_side.name == name and env_side.name == name
        assert get_backend(name) is sim_side  # one stateless instance per name
        for member in _members(SimBackend):
            assert hasattr(sim_side, member), f"{name}: SimBackend.{member}"
        for member in _members(EnvPasses):
            assert hasattr(env_side, member), f"{name}: EnvPasses.{member}"
    assert [get_backend(n).reference for n in BACKENDS].count(True) == 1  # one readable oracle
    with pytest.raises(ValueError, match=r"backend = 'cuda': no env passes; allowed: numba, numpy"):
        get_passes("cuda")


class _Recorder:
    """A strategy that records the stages called on it and hands them to ``inner``."""

    def __init__(self, inner: object) -> None:
        self.inner, self.calls = inner, []

    def __getattr__(self, name: str) -> object:
        member = getattr(self.inner, name)
        if not callable(member):
            return member

        def call(*args: object, **kwargs: object) -> object:
            self.calls.append(name)
            return member(*args, **kwargs)

        return call


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_the_step_runs_through_the_strategys_stages(backend: str) -> None:
    """The engine, the world and the meter call the stages of ``sim.strategy`` (no branch on the name):
    a strategy put in its place sees every stage, and the results are those of the backend's own."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    worlds = [FabricWorld(load_scenario("storage-checkpoint"), 2, backend=backend) for _ in range(2)]
    for w in worlds:
        w.reset(seeds=[0, 1])
    rec = _Recorder(worlds[1].sim.strategy)
    worlds[1].sim.strategy = rec
    results = []
    for w in worlds:
        results.append([w.step(w.default_split(), windows=k) for k in (1, 3)])
    for one, two in zip(*results, strict=True):
        for f in ("link_bytes", "step_time_s", "throughput_gbps", "link_peak_utilization"):
            a, b = getattr(one, f), getattr(two, f)
            assert (a is None and b is None) or np.array_equal(a, b, equal_nan=True), f
    # one window: merge, the step (one interval; numba: its figures on the kernel threads); three windows:
    # merge, the step of three intervals, then the figures
    figures = [] if rec.figures_on_kernel_threads else ["interval_result"]
    one = ["merge_split", "run_step", "run_interval", *figures]
    three = ["merge_split", "run_step", "run_interval", "run_interval", "run_interval", "interval_result"]
    assert rec.calls == [*one, *three]


def test_fused_split_is_refused_by_a_backend_without_it() -> None:
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    w = FabricWorld(load_scenario("spine-leaf-2to1"), 1, backend="numpy")
    w.reset(seeds=[0])
    with pytest.raises(ValueError, match=r"set_split_fused: backend 'numpy'; needs one with fused splits"):
        w.sim.set_split_fused(_merge.merge_range, (), np.empty_like(w.sim.engine_state.split))
    with pytest.raises(ValueError, match=r"run_interval\(then=...\): backend 'numpy'; needs 'numba'"):
        w.sim.run_interval(0.001, then=lambda m: (None, None))


# ---------------------------------------------------------------------------------------------- threads
def _force_threads(monkeypatch, threads: int = 2) -> None:
    """Spread even small batches over ``threads`` threads, in one range per instance if need be."""
    monkeypatch.setattr(_threads, "MIN_SEGMENTS_PER_RANGE", 1)
    monkeypatch.setattr(_threads, "kernel_threads", lambda: threads)


@pytest.mark.parametrize("family", ["spine-leaf", "job churn", "MoE AllToAll", "link failures"])
def test_instances_on_several_threads_match_the_numpy_reference(family: str, monkeypatch) -> None:
    _force_threads(monkeypatch)
    from ainet_gym.envs.env import EnvCore

    core = EnvCore(FAMILIES[family], 5, backend="numba")
    core.reset(list(range(5)))
    assert len(core.world.sim.table.ranges) > 1  # the batch is really cut into ranges
    for policy in ("random", "ecmp"):
        worst = compare_backends(FAMILIES[family], policy, seed=3, intervals=4, batch=5)
        bad = {k: v for k, v in worst.items() if v > RTOL}
        assert not bad, f"{family} / {policy}: {bad}"


@pytest.mark.parametrize("name", ["moe-alltoall-skewed", "spine-leaf-2to1"])
def test_interval_counters_of_several_ranges_are_those_of_one(name: str, monkeypatch) -> None:
    """The numba backend's counters of an interval cut into several instance ranges are those of the same
    interval in one range: events the most of any instance, the others summed over the instances."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    monkeypatch.setattr(_threads, "kernel_threads", lambda: 1)  # the first world: one range
    worlds = [FabricWorld(load_scenario(name), 4, backend="numba")]
    worlds[0].reset(seeds=[0, 1, 2, 3])
    _force_threads(monkeypatch)
    worlds.append(FabricWorld(load_scenario(name), 4, backend="numba"))
    worlds[1].reset(seeds=[0, 1, 2, 3])
    assert len(worlds[0].sim.table.ranges) == 1 and len(worlds[1].sim.table.ranges) > 1
    fields = ("events", "solver_iterations", "full_path_events", "lazy_switches", "full_path_work", "lazy_work",
              "repairs", "repairs_declined", "flows_checked", "incremental_solves", "flows_refilled",
              "flows_active", "full_fills", "rates_written", "rates_moved", "parallel_solves")  # fmt: skip
    per_interval = []
    for _ in range(4):
        ms = [w.sim.run_interval(0.05) for w in worlds]
        per_interval.append(tuple(getattr(ms[0], f) for f in fields))
        for f in fields:
            assert getattr(ms[0], f) == getattr(ms[1], f), f
    assert any(c[0] > 0 for c in per_interval)  # events ran


def test_the_kernels_round_bound_follows_the_stack() -> None:
    """The settle-round bound the numba backend keeps between intervals is that of the current stack: a new
    stack with longer units gets its own (4 per phase of the longest unit, plus 8)."""
    import dataclasses

    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.backends.numba.backend import _max_rounds
    from ainet_gym.sim.world import FabricWorld

    w = FabricWorld(load_scenario("spine-leaf-2to1"), 1, backend="numba")
    w.reset(seeds=[0])
    sim = w.sim
    n = _max_rounds(sim)
    assert n == 4 * int(sim.unit_nphases.max()) + 8 and _max_rounds(sim) == n
    sim._bind(dataclasses.replace(sim.stack, unit_nphases=sim.unit_nphases + 3))  # a restack, by hand
    assert _max_rounds(sim) == n + 12


def test_compiled_merge_gives_the_numpy_incidence_entries(monkeypatch) -> None:
    """The per-instance merge (on threads, compacted on demand) gives exactly the entries of the numpy
    backend's bincount merge, for a random split and for the first-path split."""
    _force_threads(monkeypatch)
    from ainet_gym.envs.env import EnvCore

    sims = []
    for be in ("numpy", "numba"):
        core = EnvCore("fat-tree-k8-stride", 3, backend=be)
        core.reset([0, 1, 2])
        sims.append(core.world.sim)
    rng = np.random.default_rng(0)
    split = rng.random((sims[0].n_conns, sims[0].fabric.max_paths))
    split[rng.random(split.shape) < 0.3] = 0.0  # some candidate paths unused: their entries drop out
    for s in (split, None):
        for sim in sims:
            sim.set_split(s)
        for name in ("e_flow", "e_link", "e_coef", "inst_entry", "e_lperm"):
            a, b = getattr(sims[0], name), getattr(sims[1], name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert sims[1].e_coef.min() > 0


def test_batch_ranges_cover_the_batch_in_balanced_contiguous_ranges() -> None:
    ranges = _threads.batch_ranges(np.ones(10), 2, min_cost=1)
    assert len(ranges) == 2 * _threads.RANGES_PER_THREAD
    assert ranges[0][0] == 0 and ranges[-1][1] == 10
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert max(hi - lo for lo, hi in ranges) - min(hi - lo for lo, hi in ranges) <= 1
    heavy = _threads.batch_ranges(np.array([9.0, 1, 1, 1, 1, 1, 1, 1, 1, 1]), 2, min_cost=1)
    assert heavy[0] == (0, 1)  # the expensive instance alone in the first range
    assert _threads.batch_ranges(np.ones(10), 2, min_cost=100) == [(0, 10)]  # too little work to share
    assert _threads.batch_ranges(np.ones(10), 1, min_cost=1) == [(0, 10)]
    assert _threads.batch_ranges(np.ones(1), 8, min_cost=1) == [(0, 1)]


def test_run_ranges_runs_every_range_once_and_reraises(monkeypatch) -> None:
    monkeypatch.setattr(_threads, "kernel_threads", lambda: 2)
    seen: list[tuple[int, int]] = []
    ranges = [(0, 2), (2, 3), (3, 7), (7, 8)]
    _threads.run_ranges(lambda lo, hi: seen.append((lo, hi)), ranges, lambda lo, hi: (lo, hi))
    assert sorted(seen) == ranges

    def fail(lo: int, hi: int) -> None:
        if lo == 3:
            raise ValueError("range 3")

    with pytest.raises(ValueError, match="range 3"):
        _threads.run_ranges(fail, ranges, lambda lo, hi: (lo, hi))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_threaded_kernel_works_in_a_forked_child(monkeypatch) -> None:
    """A child forked after the parent used the worker threads (SB3's SubprocVecEnv can fork) makes its
    own and gets the parent's results."""
    import multiprocessing as mp

    _force_threads(monkeypatch)
    from ainet_gym.envs.vector_env import FabricRoutingVectorEnv

    def run() -> np.ndarray:
        env = FabricRoutingVectorEnv(4, "spine-leaf-2to1", backend="numba")
        env.reset(seed=0)
        a = np.random.default_rng(0).uniform(-1, 1, (4, *env.single_action_space.shape))
        return np.stack([env.step(a)[0] for _ in range(3)])

    here = run()
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=lambda: q.put(run()))
    p.start()
    there = q.get(timeout=120)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert np.array_equal(here, there)
