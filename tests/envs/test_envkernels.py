"""The compiled env side of a step (numba backend): per-interval figures and the flat observation.

The references are the numpy code they replace, which stays the numpy backend: numpy's own reductions for
the summation kernels (a left-to-right or a wrongly split pairwise sum differs in the last bits), the numpy
formulas of :meth:`IntervalMeter.result` on made-up metrics with the edge cases (failed links, idle copies,
empty job slots, no completed iteration), and the whole numpy backend for the observation, reward and
info, compared bit for bit rather than to the parity tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.scenario.loader import load_scenario
from ainet_gym.sim.backends.numba import jit as _jit
from ainet_gym.sim.backends.numba import threads as _threads
from ainet_gym.sim.backends.numba.jit import from_python
from ainet_gym.sim.backends.numba.sums import gathered_row_sum as _gathered_row_sum
from ainet_gym.sim.backends.numba.sums import pairwise_sum as _pairwise_sum
from ainet_gym.sim.engine import IntervalMetrics
from ainet_gym.sim.world import FabricWorld
from ainet_gym.units import BYTES_PER_S_TO_GBPS

pytestmark = pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")

# compiled-only steps (no Python wrappers of their own): called here through a Python-callable compile
pairwise_sum = from_python(_pairwise_sum)
gathered_row_sum = from_python(_gathered_row_sum)


def _data(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Positive numbers over many magnitudes, so that the order of the additions shows in the result."""
    return rng.exponential(1e9, shape) * rng.choice([1.0, 1e-7, 1e7], shape)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 127, 128, 129, 255, 256, 300, 1000, 1031, 4096, 70001])
def test_pairwise_sum_is_numpys_sum_bit_for_bit(n: int) -> None:
    rng = np.random.default_rng(n)
    x = _data(rng, (3, n))
    for b in range(3):
        assert pairwise_sum(np.ascontiguousarray(x[b]), n) == x[b].sum()
    assert np.array_equal([pairwise_sum(np.ascontiguousarray(r), n) for r in x], x.sum(axis=1))
    if n >= 1000:  # the test can tell: a plain left-to-right sum differs
        seq = np.zeros(3)
        for k in range(n):
            seq += x[:, k]
        assert not np.array_equal(seq, x.sum(axis=1))


@pytest.mark.parametrize("batch", [1, 2, 5, 64])
@pytest.mark.parametrize("n", [3, 8, 100, 128, 256, 1000])
def test_gathered_row_sum_is_numpys_sum_of_a_gather(batch: int, n: int) -> None:
    """``x[:, idx].sum(axis=1)``: numpy gathers into Fortran order for several rows (a left-to-right sum
    per row) and sums a single row pairwise; the kernel must follow both."""
    rng = np.random.default_rng(batch * 1000 + n)
    x = _data(rng, (batch, 2 * n))
    idx = rng.permutation(2 * n)[:n].astype(np.int64)
    buf = np.empty(n)
    ref = x[:, idx].sum(axis=1)
    assert np.array_equal([gathered_row_sum(x, b, idx, buf) for b in range(batch)], ref)


def _metrics(world: FabricWorld, rng: np.random.Generator) -> IntervalMetrics:
    """Made-up metrics of an interval with the edge cases: an idle copy (duration 0), units that completed
    no iteration, a unit that never ran."""
    sim = world.sim
    assert sim is not None
    B, U, L = world.batch, sim.n_units, world.fabric.n_links
    dur = np.full(B, world.decision_interval_s)
    dur[1] = 0.0
    iters = rng.integers(0, 3, U)
    active = rng.uniform(0, world.decision_interval_s, U)
    active[0] = 0.0
    return IntervalMetrics(
        duration_s=dur,
        iterations=iters,
        step_time_sum_s=iters * rng.uniform(0.01, 0.1, U),
        comm_time_sum_s=iters * rng.uniform(0.001, 0.01, U),
        compute_time_s=active * rng.uniform(0, 1, U),
        active_time_s=active,
        link_bytes=_data(rng, (B, L)) * (rng.uniform(size=(B, L)) < 0.7),
        stalled_flows=rng.integers(0, 3, B),
        events=7,
        solver_iterations=9,
    )


@pytest.mark.parametrize("name", ["spine-leaf-2to1", "multi-tenant-churn", "fat-tree-k8-stride"])
def test_compiled_interval_figures_equal_the_numpy_formulas(name: str) -> None:
    world = FabricWorld(load_scenario(name), batch=4, backend="numba")
    world.reset(seeds=[0, 1, 2, 3])
    sim = world.sim
    assert sim is not None
    rng = np.random.default_rng(0)
    cap = sim.engine_state.capacity_bytes_per_s
    cap[2, rng.choice(world.fabric.n_links, 5, replace=False)] = 0.0  # failed links in one copy
    job_unit = world.job_unit.copy()
    job_unit[3, -1] = -1  # an empty job slot
    m = _metrics(world, rng)
    got = world.meter.measure(sim, [m], sim.state.rem, job_unit, world.job_ideal_step_s, world.names, False)
    ref = world.meter.result(sim, m, job_unit, world.job_ideal_step_s, world.names)  # the numpy formulas
    with np.errstate(invalid="ignore", divide="ignore"):
        thr = m.link_bytes[:, world.fabric.gpu_uplinks].sum(axis=1) / m.duration_s * BYTES_PER_S_TO_GBPS
    ref.throughput_gbps = np.where(m.duration_s > 0, thr, 0.0)
    ref.capacity_bytes_per_s = cap.copy()
    assert got.capacity_bytes_per_s is not cap
    for field in (
        "job_alive", "job_gpus", "iterations", "step_time_s", "comm_time_s", "ideal_step_s",
        "gpu_utilization", "efficiency", "link_utilization", "max_link_utilization", "tier_bytes",
        "failed_links", "compute_s", "capacity_bytes_per_s", "throughput_gbps",
    ):  # fmt: skip
        a, b = getattr(got, field), getattr(ref, field)
        assert a.dtype == b.dtype and a.shape == b.shape, field
        assert a.tobytes() == b.tobytes(), field  # bit for bit, NaN where numpy has NaN
    assert got.failed_links[2] > 0 and np.isnan(got.efficiency).any() and (got.link_utilization[1] == 0).all()


def _rollout(name: str, backend: str, steps: int, info_keys: tuple[str, ...]) -> list:
    from ainet_gym.envs.vector_env import FabricRoutingVectorEnv

    env = FabricRoutingVectorEnv(3, name, backend=backend, episode_steps=4, info_keys=info_keys)
    out = [env.reset(seed=5)]
    rng = np.random.default_rng(1)
    for _ in range(steps):  # past two episode ends: autoreset copies stand still for a step
        out.append(env.step(rng.uniform(-1, 1, (3, *env.single_action_space.shape)).astype(np.float32)))
    return out


def _flatten(x: object, path: str = "") -> dict[str, np.ndarray]:
    if isinstance(x, tuple | list):
        return {k: v for i, y in enumerate(x) for k, v in _flatten(y, f"{path}[{i}]").items()}
    if isinstance(x, dict):
        return {k: v for key, y in x.items() for k, v in _flatten(y, f"{path}.{key}").items()}
    return {path: np.asarray(x)}


@pytest.mark.parametrize(
    ("name", "info_keys"),
    [("link-failure", ()), ("multi-tenant-churn", ("links", "collisions")), ("periodic-interference", ())],
)
def test_compiled_env_side_is_bit_for_bit_the_numpy_backend(
    name: str, info_keys: tuple[str, ...], monkeypatch
) -> None:
    """Every observation, reward, done flag and info value of the vector env, bit for bit (the allocation in
    the parallel-rule kernel: the lazy exact kernel agrees to round-off, tests/sim/test_incremental.py)."""
    from ainet_gym.sim.backends.numba import settings

    monkeypatch.setattr(settings, "INCREMENTAL_MIN_FLOWS", -1)
    a = _flatten(_rollout(name, "numba", 10, info_keys))
    b = _flatten(_rollout(name, "numpy", 10, info_keys))
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), k


@pytest.mark.parametrize("name", ["spine-leaf-2to1", "multi-tenant-churn", "link-failure"])
def test_history_block_on_the_kernel_threads_equals_the_serial_observation(name: str, monkeypatch) -> None:
    """The link-history block and the per-job info arrays (:func:`info_jobs`) computed right after each
    range's interval (before the dynamics of the next one) give the observation, rewards and info that
    the serial numpy-formula path gives, bit for bit, with copies that stand still (reset) and link
    failures (capacities change between the two)."""
    from ainet_gym.envs.env import EnvCore

    monkeypatch.setattr(_threads, "MIN_SEGMENTS_PER_RANGE", 1)  # small batches cut into ranges, on 2 threads
    monkeypatch.setattr(_threads, "kernel_threads", lambda: 2)
    early, late = (EnvCore(name, batch=6, backend="numba") for _ in range(2))
    monkeypatch.setattr(late, "_early_blocks", lambda active: None)
    for c in (early, late):
        c.reset(seeds=list(range(6)))
    assert len(early.world.sim.table.ranges) > 1
    rng = np.random.default_rng(4)
    changed = 0
    for t in range(40):
        a = rng.uniform(-1.0, 1.0, (6, *early.action_space.shape)).astype(np.float32)
        active = np.ones(6, dtype=bool)
        active[t % 6] = False
        o1, r1, *_, i1 = early.step(a, active=active)
        o2, r2, *_, i2 = late.step(a, active=active)
        assert o1.tobytes() == o2.tobytes()
        assert r1.tobytes() == r2.tobytes()
        assert list(i1) == list(i2)  # the same keys in the same order
        for k in i1:  # the info's per-job arrays and rewards of info_jobs, and the rest
            assert np.asarray(i1[k]).tobytes() == np.asarray(i2[k]).tobytes(), k
        changed += early.world.state.dynamics_changed
    if name != "spine-leaf-2to1":  # the early blocks were written again after a failure or a restack
        assert changed > 0
    assert early.state.util_hist.tobytes() == late.state.util_hist.tobytes()
