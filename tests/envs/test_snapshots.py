"""Snapshots: ``snapshot()`` / ``restore()`` on the core, the single env and the vector env. Reference: the
rollout the env played the first time; after a restore the same actions must give it again, bit for bit
(observations, rewards, every info key), with failures, churn, background and per-episode jitter, on both
backends, across an autoreset, and copied into a core of another batch size."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _scenarios import churn_dynamics, small_spine_leaf
from _states import assert_states_equal, episode_arrays

from ainet_gym.envs.env import ACTION_MODES, EnvCore, FabricRoutingEnv, step_state
from ainet_gym.envs.state import GeneratorState, SingleWrapperState, VectorWrapperState
from ainet_gym.envs.vector_env import FabricRoutingVectorEnv
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
INFO = ("links", "flows", "collisions")


def dynamic_scenario(steps: int = 10) -> dict:
    """Every source of change: random link failures, churn, periodic background with a jittered phase,
    jittered job starts."""
    sc = small_spine_leaf(steps, name="dynamic", **churn_dynamics(arrival_rate=0.6, mean_steps=3))
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


def _snapshot_after(core: EnvCore, seeds: list[int], action_seed: int, warm: int, ahead: int) -> tuple:
    """Reset ``core`` on ``seeds``, take ``warm`` random steps (action space seeded ``action_seed``), snapshot;
    returns the snapshot and ``ahead`` more random actions to replay from it."""
    core.reset(seeds)
    sp = core.action_space
    sp.seed(action_seed)
    n = len(seeds)
    for _ in range(warm):
        core.step(np.stack([sp.sample() for _ in range(n)]))
    snap = core.snapshot()
    return snap, [np.stack([sp.sample() for _ in range(n)]) for _ in range(ahead)]


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
    snap, acts = _snapshot_after(core, [4, 5, 6], 0, warm=3, ahead=6)
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


def test_single_env_snapshot_holds_its_generator_in_a_typed_record() -> None:
    """The single env's own state is a frozen :class:`SingleWrapperState`: its ``np_random`` (Gymnasium's,
    seeded by ``reset(seed=...)``) restored draws what it drew after the snapshot; a core's snapshot has no
    wrapper state and restoring it leaves the env counting as not reset. Reference: the draws themselves."""
    env = FabricRoutingEnv(dynamic_scenario(6), backend="numpy")
    env.reset(seed=3)
    snap = env.snapshot()
    assert isinstance(snap.wrapper, SingleWrapperState) and snap.wrapper.seeded
    assert isinstance(snap.wrapper.np_random, GeneratorState)
    assert not hasattr(snap, "extra")
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.wrapper.seeded = False  # type: ignore[misc]
    first = env.np_random.random(4)
    env.restore(snap)
    np.testing.assert_array_equal(first, env.np_random.random(4))
    core_snap = env.core.snapshot()
    assert core_snap.wrapper is None
    env.restore(core_snap)
    assert not hasattr(env, "_seeded")  # (as before the records: a core snapshot carries no reset flag)


def test_vector_env_snapshot_holds_pending_autoresets_and_its_seed_generator() -> None:
    """The vector env's own state is a :class:`VectorWrapperState`: a snapshot taken with autoresets pending
    (at an episode end) holds them as a read-only copy that later steps leave alone, and its seed generator:
    after a restore the next step is the autoreset step again, and a ``reset()`` without a seed draws the
    seeds it drew the first time (observations equal); a restore that dropped either would differ."""
    venv = FabricRoutingVectorEnv(2, dynamic_scenario(3), backend="numpy", info_keys=INFO)
    venv.reset(seed=20)
    venv.action_space.seed(2)
    acts = [venv.action_space.sample() for _ in range(4)]
    for a in acts[:3]:
        venv.step(a)
    assert venv.autoreset_pending.all()
    snap = venv.snapshot()
    own = snap.wrapper
    assert isinstance(own, VectorWrapperState) and isinstance(own.rng, GeneratorState)
    np.testing.assert_array_equal(own.autoreset, [True, True])
    assert not own.autoreset.flags.writeable
    venv.reset(seed=1)  # writes the env's pending flags in place
    np.testing.assert_array_equal(own.autoreset, [True, True])  # the record holds a copy
    venv.restore(snap)
    first_step = _record(venv.step, acts[3:])  # the autoreset step: reward 0, reset observations
    first_reset = venv.reset()[0]  # seeds drawn from the vector env's generator
    venv.restore(snap)
    np.testing.assert_array_equal(venv.autoreset_pending, [True, True])
    _assert_same(first_step, _record(venv.step, acts[3:]))
    np.testing.assert_array_equal(first_reset, venv.reset()[0])
    venv.restore(venv.core.snapshot())  # a core's snapshot: no autoreset pending
    assert not venv.autoreset_pending.any()


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


def _state_arrays(core: EnvCore) -> dict[str, np.ndarray]:
    """Every array of the episode state of ``core``: the engine's, the world's and the core's containers."""
    return episode_arrays(core.episode_state)


@pytest.mark.parametrize("backend", BACKENDS)
def test_restore_into_a_fresh_core_replays_the_rollout_bit_for_bit(backend: str) -> None:
    """A snapshot restored into a core that never ran (no reset) and the same actions give the original
    rollout (observations, rewards, infos) and the same episode state after it, every array of the three
    containers equal bit for bit: the containers are the whole state, nothing is left in attributes."""
    core = EnvCore(dynamic_scenario(), batch=3, action_mode="split", backend=backend, info_keys=INFO)
    snap, acts = _snapshot_after(core, [11, 12, 13], 5, warm=3, ahead=6)
    first = _record(core.step, acts)
    end = _state_arrays(core)
    fresh = EnvCore(dynamic_scenario(), batch=3, action_mode="split", backend=backend, info_keys=INFO)
    fresh.restore(snap)
    _assert_same(first, _record(fresh.step, acts))
    assert_states_equal(end, _state_arrays(fresh))


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_state_is_the_step_as_a_function_of_the_state(backend: str) -> None:
    """``step_state(core, s, a) -> (s', out)``: a chain of it from a snapshot gives what ``core.step`` gave
    from there, bit for bit, and leaves its input state unchanged (the same state stepped twice gives the
    same output and the same next state)."""
    core = EnvCore(dynamic_scenario(), batch=2, action_mode="split", backend=backend, info_keys=INFO)
    s0, acts = _snapshot_after(core, [3, 4], 6, warm=1, ahead=4)
    first = _record(core.step, acts)
    end = _state_arrays(core)
    other = EnvCore(dynamic_scenario(), batch=2, action_mode="split", backend=backend, info_keys=INFO)
    s = s0
    outs = []
    for a in acts:
        s, out = step_state(other, s, a)
        outs.append(out)
    it = iter(outs)
    _assert_same(first, _record(lambda _a: next(it), acts))
    other.restore(s)
    assert_states_equal(end, _state_arrays(other))
    # the input state is a value: stepping it again gives the same output and the same next state
    s1a, out_a = step_state(other, s0, acts[0])
    s1b, out_b = step_state(other, s0, acts[0])
    _assert_same(_record(lambda _a: out_a, [0]), _record(lambda _a: out_b, [0]))
    _assert_same(first[:1], _record(lambda _a: out_a, [0]))
    other.restore(s1a)
    after_a = _state_arrays(other)
    other.restore(s1b)
    assert_states_equal(after_a, _state_arrays(other))
    np.testing.assert_array_equal(s1a.world.state.step_count, s0.world.state.step_count + 1)


def test_world_state_take_and_load_copy_the_chosen_instances() -> None:
    """``WorldState.take(src)`` is instance ``src[b]`` in row ``b``, copied (writing the copy leaves the
    source alone; its generators draw what the source's would, without advancing them); ``load`` writes
    them in place (the arrays keep their identity, which the link state shares)."""
    core = EnvCore(dynamic_scenario(), batch=3)
    core.reset([1, 2, 3])
    for _ in range(2):
        core.step(np.zeros((3, *core.action_space.shape), dtype=np.float32))
    w = core.world.state
    src = np.array([2, 0, 2])
    t = w.take(src)
    np.testing.assert_array_equal(t.hash_seed, [w.hash_seed[2], w.hash_seed[0], w.hash_seed[2]])
    np.testing.assert_array_equal(t.fail_until[1], w.fail_until[0])
    assert t.jobs[0] == w.jobs[2] and t.jobs[0] is not w.jobs[2]
    before = w.rngs[2].bit_generator.state
    draws = [t.rngs[0].random(), t.rngs[2].random()]
    assert draws[0] == draws[1]  # two copies of instance 2's generator
    assert w.rngs[2].bit_generator.state == before  # the source did not move
    assert w.rngs[2].random() == draws[0]
    t.step_count[:] = 99
    assert (w.step_count != 99).all()
    fail = w.fail_until
    w.load(t, np.array([1, 1, 0]))  # instance b <- t's instance [1, 1, 0][b], i.e. w's old [0, 0, 2]
    assert w.fail_until is fail and core.world.links.fail_until is fail
    assert (w.step_count == 99).all()
    with pytest.raises(ValueError, match=r"src has shape \(2,\), expected \(3,\)"):
        w.load(t, np.array([0, 1]))


def test_restore_puts_back_the_plan_that_ran() -> None:
    """The plan of a choose mode is episode state: after a restore the info of the last result names the
    plan of the snapshot's interval, not the one run since."""
    core = EnvCore(dynamic_scenario(), batch=2, action_mode="choose")
    core.reset([1, 2])
    core.step(np.array([1, 3]))
    snap = core.snapshot()
    plan = core.info(core.last_result)["plan"].copy()
    core.step(np.array([0, 2]))
    assert (core.info(core.last_result)["plan"] != plan).all()
    core.restore(snap)
    np.testing.assert_array_equal(core.info(core.last_result)["plan"], plan)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "routing", [{"reroute": "new_transfers"}, {"split_flows": "independent"}], ids=["carry", "parts"]
)
def test_restore_replays_with_pinned_splits_and_part_flows(backend: str, routing: dict) -> None:
    """The engine state's optional fields (the pinned splits of carry flows, the part flows' split and bytes)
    come back with a restore into a core that never ran: the same actions give the original rollout, and the
    engine's containers end equal, bit for bit."""
    sc = small_spine_leaf(12, name="engine", link_failures={"rate_per_step": 0.5, "repair_steps": 2})
    sc["routing"].update(routing)
    core = EnvCore(sc, batch=2, action_mode="split", backend=backend, info_keys=INFO)
    snap, acts = _snapshot_after(core, [5, 6], 1, warm=3, ahead=5)
    first = _record(core.step, acts)
    end = _state_arrays(core)
    fresh = EnvCore(sc, batch=2, action_mode="split", backend=backend, info_keys=INFO)
    fresh.restore(snap)
    _assert_same(first, _record(fresh.step, acts))
    assert_states_equal(end, _state_arrays(fresh))
