"""The ``split_bg`` action mode: ``split`` with one more slot per background connection, so an agent routes
all traffic per connection (the class of ``lp+bg``). Reference: the ``split`` mode itself (the job part
must decode alike), the background slots' own weights, and the engine-level ``lp+bg`` split."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.agents.baselines import baseline_actions, engine_split
from ainet_gym.envs.env import EnvCore, FabricRoutingEnv
from ainet_gym.envs.vector_env import FabricRoutingVectorEnv
from ainet_gym.routing.loads import controlled_connections
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]


def _pair(backend: str, batch: int = 2) -> tuple[EnvCore, EnvCore]:
    a = EnvCore("periodic-interference", batch=batch, action_mode="split", backend=backend)
    b = EnvCore("periodic-interference", batch=batch, action_mode="split_bg", backend=backend)
    a.reset([3, 4][:batch])
    b.reset([3, 4][:batch])
    return a, b


def test_slots_cover_every_connection_job_slots_first() -> None:
    a, b = _pair("numpy")
    sim = b.world.sim
    # periodic-interference: one checkpoint source of 2 storage hosts x 8 flows = 16 connections
    assert b.n_slots == a.n_slots + 16
    assert b.action_space.shape == (b.n_slots * b.P,)
    np.testing.assert_array_equal(b.slot_connection[:, : a.n_slots], a.slot_connection)
    # every connection of the batch has exactly one slot; the controllable ones are the multi-path ones
    conn = b.slot_connection[b.slot_connection >= 0]
    assert np.array_equal(np.sort(conn), np.arange(sim.n_conns))
    ctrl = np.zeros(sim.n_conns, dtype=bool)
    ctrl[b.slot_connection[b.controllable]] = True
    np.testing.assert_array_equal(ctrl, sim.conn_npaths > 1)
    assert (~controlled_connections(b.world) & ctrl).sum() == 2 * 12  # 4 of 16 stay on the storage leaf
    # the observation: the same blocks, the slot block longer by the background slots
    oa, ob = a.observe(None), b.observe(None)
    la, lb = a.obs_layout, b.obs_layout
    np.testing.assert_array_equal(
        oa[:, la["slots"]], ob[:, lb["slots"]][:, : la["slots"].stop - la["slots"].start]
    )
    for k in ("link_utilization", "link_capacity", "jobs", "background", "episode_progress"):
        np.testing.assert_array_equal(oa[:, la[k]], ob[:, lb[k]], err_msg=k)


@pytest.mark.parametrize("backend", BACKENDS)
def test_job_slots_decode_as_split_and_background_slots_route_background(backend: str) -> None:
    a, b = _pair(backend)
    rng = np.random.default_rng(0)
    sim_b = b.world.sim
    bg = sim_b.unit_bg[sim_b.conn_unit] & (sim_b.conn_npaths > 1)
    for _ in range(5):  # through the checkpoint burst of steps 3-4
        act_a = rng.uniform(-1, 1, (2, *a.action_space.shape)).astype(np.float32)
        act_b = np.full((2, b.n_slots, b.P), -1.0, dtype=np.float32)
        act_b[:, : a.n_slots] = act_a.reshape(2, a.n_slots, a.P)
        act_b[:, a.n_slots :, 1] = 1.0  # every background connection on its candidate path 1
        split_a = a.decode(a.validate(act_a))
        split_b = b.decode(b.validate(act_b.reshape(2, -1)))
        np.testing.assert_array_equal(split_b[~bg], split_a[~bg])
        want = np.zeros((int(bg.sum()), b.P))
        want[:, 1] = 1.0
        np.testing.assert_array_equal(split_b[bg], want)
        b.step(act_b.reshape(2, -1))
        a.step(act_a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_bg_step_equals_the_engine_step_of_its_decoded_split(backend: str) -> None:
    b = EnvCore("periodic-interference", batch=2, action_mode="split_bg", backend=backend)
    ref = EnvCore("periodic-interference", batch=2, action_mode="split_bg", backend=backend)
    b.reset([5, 6])
    ref.reset([5, 6])
    rng = np.random.default_rng(1)
    for _ in range(6):
        act = rng.uniform(-1, 1, (2, *b.action_space.shape)).astype(np.float32)
        split = ref.decode(ref.validate(act))
        ob, rb, *_, ib = b.step(act)
        oref, rref, *_, iref = ref.step_split(split)
        np.testing.assert_array_equal(ob, oref)
        np.testing.assert_array_equal(rb, rref)


def test_lp_bg_is_exact_through_split_bg_and_moves_background() -> None:
    b = EnvCore("periodic-interference", batch=2, action_mode="split_bg")
    b.reset([1, 2])
    for _ in range(4):
        b.step_split(engine_split("ecmp", b))
    want = engine_split("lp+bg", b)
    got = b.decode(b.validate(baseline_actions("lp+bg", b)))
    np.testing.assert_allclose(got, want, atol=2e-6)
    sim = b.world.sim
    bg = sim.unit_bg[sim.conn_unit] & (sim.conn_npaths > 1)
    assert (np.abs(got[bg] - b.world.default_split()[bg]).max(axis=1) > 1e-3).any()


def test_split_bg_env_and_vector_env_and_bad_action() -> None:
    env = FabricRoutingEnv("periodic-interference", action_mode="split_bg", episode_steps=3)
    venv = FabricRoutingVectorEnv(2, "periodic-interference", action_mode="split_bg", episode_steps=3)
    obs, _ = env.reset(seed=9)
    vobs, _ = venv.reset(seed=9)
    np.testing.assert_array_equal(obs, vobs[0])
    a = np.zeros(env.action_space.shape, dtype=np.float32)
    o1, r1, *_ = env.step(a)
    vo, vr, *_ = venv.step(np.stack([a, a]))
    np.testing.assert_array_equal(o1, vo[0])
    assert r1 == vr[0]
    with pytest.raises(ValueError, match=r"action shape \(3,\): expected"):
        env.step(np.zeros(3, dtype=np.float32))
