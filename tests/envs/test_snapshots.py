"""Snapshots: ``snapshot()`` / ``restore()`` on the core, the single env and the vector env. Reference: the
rollout the env played the first time; after a restore the same actions must give it again, bit for bit
(observations, rewards, every info key), with failures, churn, background and per-episode jitter, on both
backends, across an autoreset, and copied into a core of another batch size."""

from __future__ import annotations

import numpy as np
import pytest
from _scenarios import small_spine_leaf

from ainet_gym.envs.env import ACTION_MODES, EnvCore, FabricRoutingEnv
from ainet_gym.envs.vector_env import FabricRoutingVectorEnv
from ainet_gym.sim import kernels as _kernels

BACKENDS = ["numpy", "numba"] if _kernels.HAVE_NUMBA else ["numpy"]
INFO = ("links", "flows", "collisions")


def dynamic_scenario(steps: int = 10) -> dict:
    """Every source of change: random link failures, churn, periodic background with a jittered phase,
    jittered job starts."""
    sc = small_spine_leaf(
        steps,
        name="dynamic",
        link_failures={"rate_per_step": 0.3, "repair_steps": 3},
        job_churn={
            "arrival_rate": 0.6,
            "mean_steps": 3,
            "max_jobs": 4,
            "templates": [
                {
                    "name": "t1",
                    "gpus": 4,
                    "compute_ms": 10,
                    "collectives": [{"op": "allreduce", "bytes": 5e7}],
                },
                {
                    "name": "t2",
                    "gpus": 2,
                    "compute_ms": 15,
                    "collectives": [{"op": "allgather", "bytes": 5e7}],
                },
            ],
        },
    )
    for job in sc["workload"]["jobs"]:
        job["start_jitter_ms"] = 20.0
    sc["workload"]["background"][0]["offset_jitter_steps"] = 2
    return sc


def _record(step, actions) -> list:
    out = []
    for a in actions:
        obs, r, term, trunc, info = step(a)
        out.append(
            (
                np.array(obs),
                np.array(r),
                np.array(term),
                np.array(trunc),
                {k: np.array(v) for k, v in info.items()},
            )
        )
    return out


def _assert_same(x: list, y: list) -> None:
    assert len(x) == len(y)
    for a, b in zip(x, y):
        for u, v in zip(a[:4], b[:4]):
            np.testing.assert_array_equal(u, v)
        assert a[4].keys() == b[4].keys()
        for k in a[4]:
            np.testing.assert_array_equal(a[4][k], b[4][k], err_msg=k)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ACTION_MODES)
def test_core_restore_replays_bit_for_bit(backend: str, mode: str) -> None:
    core = EnvCore(dynamic_scenario(), batch=3, action_mode=mode, backend=backend, info_keys=INFO)
    core.reset([4, 5, 6])
    sp = core.action_space
    sp.seed(0)
    for _ in range(3):
        core.step(np.stack([sp.sample() for _ in range(3)]))
    snap = core.snapshot()
    acts = [np.stack([sp.sample() for _ in range(3)]) for _ in range(6)]
    first = _record(core.step, acts)
    core.restore(snap)
    _assert_same(first, _record(core.step, acts))
    core.restore(snap)  # a snapshot serves any number of restores
    _assert_same(first, _record(core.step, acts))


@pytest.mark.parametrize("backend", BACKENDS)
def test_single_env_restore_replays_through_the_episode_end_and_the_next_reset(backend: str) -> None:
    env = FabricRoutingEnv(dynamic_scenario(6), backend=backend, info_keys=INFO)
    env.reset(seed=3)
    env.action_space.seed(1)
    env.step(env.action_space.sample())
    snap = env.snapshot()
    acts = [env.action_space.sample() for _ in range(5)]

    def play() -> list:
        out = _record(env.step, acts)  # to the end of the episode (6 steps)
        obs, info = env.reset()  # no seed: the env's own generator goes on
        out.append((obs, np.zeros(1), np.zeros(1), np.zeros(1), {k: np.array(v) for k, v in info.items()}))
        return out + _record(env.step, acts[:2])

    first = play()
    assert first[4][3]  # truncated at the episode end
    env.restore(snap)
    _assert_same(first, play())


@pytest.mark.parametrize("backend", BACKENDS)
def test_vector_env_restore_replays_across_an_autoreset(backend: str) -> None:
    venv = FabricRoutingVectorEnv(3, dynamic_scenario(5), backend=backend, info_keys=INFO)
    venv.reset(seed=20)
    venv.action_space.seed(2)
    for _ in range(3):
        venv.step(venv.action_space.sample())
    snap = venv.snapshot()
    acts = [venv.action_space.sample() for _ in range(6)]  # past the end (5) and the autoreset step
    first = _record(venv.step, acts)
    assert first[1][3].all() and (first[2][1] == 0).all()  # truncated, then the autoreset step
    venv.restore(snap)
    _assert_same(first, _record(venv.step, acts))
    # and the vector env's snapshot is a core snapshot of 3 copies: the single env cannot take it
    env = FabricRoutingEnv(dynamic_scenario(5), backend=backend)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="the snapshot has 3 instances, this world 1"):
        env.restore(snap)


@pytest.mark.parametrize("backend", BACKENDS)
def test_restore_into_a_core_of_another_batch_copies_the_chosen_instances(backend: str) -> None:
    # a planner's use: K copies of instance b's state, each tried with another action
    core = EnvCore(dynamic_scenario(), batch=3, action_mode="split", backend=backend)
    core.reset([7, 8, 9])
    sp = core.action_space
    sp.seed(3)
    for _ in range(4):
        core.step(np.stack([sp.sample() for _ in range(3)]))
    snap = core.snapshot()
    src = np.array([2, 0, 2, 1, 2])
    plan = EnvCore(dynamic_scenario(), batch=5, action_mode="split", backend=backend)
    plan.restore(snap, src)
    for _ in range(5):
        a = np.stack([sp.sample() for _ in range(3)])
        o, r, _, _, info = core.step(a)
        o2, r2, _, _, info2 = plan.step(a[src])
        np.testing.assert_array_equal(o[src], o2)
        np.testing.assert_array_equal(r[src], r2)
        for k in info:
            np.testing.assert_array_equal(np.asarray(info[k])[src], np.asarray(info2[k]), err_msg=k)


def test_snapshot_errors_name_the_problem() -> None:
    core = EnvCore(dynamic_scenario(), batch=2)
    with pytest.raises(RuntimeError, match=r"snapshot\(\) before the first reset"):
        core.snapshot()
    core.reset([1, 2])
    snap = core.snapshot()
    other = EnvCore(small_spine_leaf(10, name="other"), batch=2)
    other.reset([1, 2])
    with pytest.raises(ValueError, match="the snapshot is of scenario 'dynamic', this world runs 'other'"):
        other.restore(snap)
    with pytest.raises(ValueError, match=r"source = \[0, 5\]: needs 2 integers in 0..1"):
        core.restore(snap, [0, 5])
    with pytest.raises(ValueError, match="is not an EnvSnapshot"):
        core.restore("state")  # type: ignore[arg-type]
