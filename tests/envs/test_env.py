"""The Gymnasium environments: API checkers, determinism, vector == singles, bounds, bad input, reward."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from _scenarios import churn_dynamics, small_spine_leaf
from gymnasium.utils.env_checker import check_env

import ainet_gym
from ainet_gym.envs.env import ACTION_MODES, FabricRoutingEnv
from ainet_gym.envs.vector_env import FabricRoutingVectorEnv


def small_scenario(**dyn) -> dict:
    """16 GPUs on 4 leaves x 2 spines (2:1), two ring jobs spread over the leaves."""
    return small_spine_leaf(12, **dyn)


CHURN = small_scenario(**churn_dynamics(arrival_rate=0.5, mean_steps=4))


def rollout(env: gym.Env, seed: int, steps: int, action_seed: int = 0) -> list:
    obs, info = env.reset(seed=seed)
    env.action_space.seed(action_seed)
    out = [(obs, info)]
    for _ in range(steps):
        a = env.action_space.sample()
        out.append(env.step(a))
    return out


def assert_same(x, y) -> None:
    if isinstance(x, dict):
        assert x.keys() == y.keys()
        for k in x:
            assert_same(x[k], y[k])
    elif isinstance(x, list | tuple):
        assert len(x) == len(y)
        for a, b in zip(x, y):
            assert_same(a, b)
    else:
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("env_id", sorted(ainet_gym.ENV_IDS))
@pytest.mark.parametrize("mode", ACTION_MODES)
def test_gymnasium_and_sb3_checkers_pass_without_warnings(env_id: str, mode: str) -> None:
    """Every registered id (each base id in each action mode, made by its mode's own id)."""
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    from ainet_gym.envs.registration import env_id_for

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(env_id_for(env_id, mode), episode_steps=6)
        assert env.unwrapped.core.action_mode == mode
        check_env(env.unwrapped, skip_render_check=True)
        sb3_check_env(env.unwrapped, warn=True)
    ours = [w for w in caught if "ainet_gym" in str(w.filename) or "gymnasium" in str(w.filename)]
    assert not ours, [str(w.message) for w in ours]


@pytest.mark.parametrize("mode", ACTION_MODES)
def test_same_seed_same_rollout_exactly(mode: str) -> None:
    a = FabricRoutingEnv(CHURN, action_mode=mode)
    b = FabricRoutingEnv(CHURN, action_mode=mode)
    assert_same(rollout(a, 7, 10), rollout(b, 7, 10))
    # and a different seed gives a different episode (placement, failures, churn, ECMP hash)
    c = FabricRoutingEnv(CHURN, action_mode=mode)
    r1, r2 = rollout(a, 7, 10), rollout(c, 8, 10)
    assert any(not np.array_equal(x[0], y[0]) for x, y in zip(r1, r2))


#: plans that read the last interval's split (``greedy``'s base load): after a churn restack the batched
#: engine resets every copy's split, a single env only its own, so these differ between a vector env and
#: its single envs (test_greedy_engine_split_is_batch_invariant_under_churn, strict xfail)
_LAST_SPLIT_PLANS = ("greedy", "greedy+bg")


def _sample(venv: FabricRoutingVectorEnv) -> np.ndarray:
    """Random actions of ``venv``; in the choose modes the plans of :data:`_LAST_SPLIT_PLANS` are
    replaced by plan 0 (ecmp)."""
    acts = venv.action_space.sample()
    plans = venv.core.plans
    if plans:
        bad = np.isin(np.asarray(plans)[acts], _LAST_SPLIT_PLANS)
        acts = np.where(bad, 0, acts)
    return acts


def _play_episode(venv: FabricRoutingVectorEnv, singles: list[FabricRoutingEnv], steps: int) -> None:
    """``steps`` steps of random actions: each copy of ``venv`` must equal its single env, value for value."""
    for _ in range(steps):
        acts = _sample(venv)
        vobs, vr, vterm, vtrunc, vinfo = venv.step(acts)
        for i, e in enumerate(singles):
            obs, r, term, trunc, info = e.step(acts[i])
            np.testing.assert_array_equal(vobs[i], obs)
            assert vr[i] == r and vterm[i] == term and vtrunc[i] == trunc
            for k in ("step_time_ms", "job_alive", "failed_links"):
                np.testing.assert_array_equal(vinfo[k][i], info[k], err_msg=k)
    assert vtrunc.all()


@pytest.mark.parametrize("mode", ACTION_MODES)
def test_vector_env_equals_single_envs(mode: str) -> None:
    B = 3
    venv = FabricRoutingVectorEnv(num_envs=B, scenario=CHURN, action_mode=mode, episode_steps=5)
    singles = [FabricRoutingEnv(CHURN, action_mode=mode, episode_steps=5) for _ in range(B)]
    vobs, _ = venv.reset(seed=11)
    for i, e in enumerate(singles):
        obs, _ = e.reset(seed=11 + i)
        np.testing.assert_array_equal(vobs[i], obs)
    venv.action_space.seed(3)
    _play_episode(venv, singles, 5)
    # next-step autoreset: the following step returns reset observations, reward 0, not done; each copy's
    # next episode is the one its single env plays after reset() without a seed (its own random stream)
    vobs, vr, vterm, vtrunc, vinfo = venv.step(venv.action_space.sample())
    assert (vr == 0).all() and not vterm.any() and not vtrunc.any()
    assert (venv.core.world.state.step_count == 0).all()
    for i, e in enumerate(singles):
        obs, info = e.reset()
        np.testing.assert_array_equal(vobs[i], obs)
        for k, v in info.items():  # the reset's info, every key, as the single env reports it
            assert np.asarray(vinfo[k][i]).dtype == np.asarray(v).dtype, k
            np.testing.assert_array_equal(vinfo[k][i], v, err_msg=k)
    _play_episode(venv, singles, 5)


@pytest.mark.xfail(
    strict=True,
    reason="known: a churn restack in one copy resets the split of every copy of a batched engine, and "
    "greedy's base load subtracts the offered load of that split (reported to the lead)",
)
def test_greedy_engine_split_is_batch_invariant_under_churn() -> None:
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.routing.policies import get_policy

    greedy = get_policy("greedy")
    B = 3
    batched = EnvCore(CHURN, batch=B, episode_steps=50)
    singles = [EnvCore(CHURN, batch=1, episode_steps=50) for _ in range(B)]
    batched.reset([11 + i for i in range(B)])
    for i, c in enumerate(singles):
        c.reset([11 + i])
    for _ in range(12):
        obs, *_ = batched.step_split(greedy(batched.world, batched.last_result))
        for i, c in enumerate(singles):
            one, *_ = c.step_split(greedy(c.world, c.last_result))
            np.testing.assert_array_equal(obs[i], one[0])


def test_make_vec_uses_the_native_vector_env() -> None:
    venv = gym.make_vec("ainet_gym/SpineLeaf-v0", num_envs=2, vectorization_mode="vector_entry_point")
    assert isinstance(venv.unwrapped, FabricRoutingVectorEnv)
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (2, *venv.single_observation_space.shape)
    venv.close()


@pytest.mark.parametrize("mode", ACTION_MODES)
def test_observations_stay_in_bounds_with_failures_and_churn(mode: str) -> None:
    env = FabricRoutingEnv(CHURN, action_mode=mode, episode_steps=60)
    obs, _ = env.reset(seed=3)
    env.action_space.seed(1)
    saw_failure = saw_arrival = False
    for _ in range(60):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs), (obs.min(), obs.max())
        assert 0.0 <= r <= 1.0
        saw_failure |= info["failed_links"] > 0
        saw_arrival |= info["job_alive"][2:].any()
    assert saw_failure and saw_arrival
    assert trunc


def test_bad_actions_raise_and_leave_state_untouched() -> None:
    env = FabricRoutingEnv(small_scenario(), action_mode="split")
    ref = FabricRoutingEnv(small_scenario(), action_mode="split")
    env.reset(seed=5)
    ref.reset(seed=5)
    good = np.zeros(env.action_space.shape, dtype=np.float32)
    env.step(good)
    ref.step(good)
    bad_nan = good.copy()
    bad_nan[3] = np.nan
    with pytest.raises(ValueError, match=r"action\[3\] = nan: must be finite"):
        env.step(bad_nan)
    with pytest.raises(ValueError, match=r"action shape \(5,\)"):
        env.step(np.zeros(5, dtype=np.float32))
    big = good.copy()
    big[0] = 1.5
    with pytest.raises(ValueError, match=r"action\[0\] = 1.5: out of the action space; allowed \[-1, 1\]"):
        env.step(big)
    # the env keeps working and is exactly where the reference is
    assert_same(env.step(good), ref.step(good))

    penv = FabricRoutingEnv(small_scenario(), action_mode="path")
    penv.reset(seed=0)
    a = np.zeros(penv.action_space.shape, dtype=np.int64)
    a[1] = 4
    with pytest.raises(ValueError, match=r"action\[1\] = 4: out of MultiDiscrete\(4\); allowed 0..3"):
        penv.step(a)
    a[1] = -1
    with pytest.raises(ValueError, match="out of MultiDiscrete"):
        penv.step(a)
    penv.step(np.zeros(penv.action_space.shape, dtype=np.int64))


def test_action_range_check_of_every_number_type() -> None:
    """Float actions are range-checked as |a| <= 1, integers by their min and max: |a| of the most negative
    int64 is itself, so taking it for integers would let that action through."""
    env = FabricRoutingEnv(small_scenario(), action_mode="split")
    env.reset(seed=5)
    a = np.zeros(env.action_space.shape, dtype=np.int64)
    a[0], a[1] = -1, 1
    env.step(a)  # integers in [-1, 1] are actions
    a[2] = np.iinfo(np.int64).min
    with pytest.raises(ValueError, match=r"action\[2\] = -9.22337e\+18: out of the action space"):
        env.step(a)
    f = np.zeros(env.action_space.shape, dtype=np.float32)
    f[4] = -np.inf
    with pytest.raises(ValueError, match=r"action\[4\] = -inf: must be finite"):
        env.step(f)
    f[4] = np.nextafter(np.float32(1), np.float32(2))  # float32 round-off above 1: clipped, not refused
    env.step(f)


def test_single_env_info_values_are_row_zero_as_python_scalars() -> None:
    env = FabricRoutingEnv(small_scenario(), action_mode="split")
    env.reset(seed=5)
    info = env.step(np.zeros(env.action_space.shape, dtype=np.float32))[4]
    batched = env.unwrapped.core.info(env.unwrapped.core.state.last)
    assert info.keys() == batched.keys()
    for k, v in batched.items():
        if v.ndim == 1:  # a number per instance: the single env's is a Python int, float or bool
            assert type(info[k]) is type(v[0].item()) and info[k] == v[0], k
        else:  # an array per instance: row 0
            assert isinstance(info[k], np.ndarray) and np.array_equal(info[k], v[0], equal_nan=True), k


@pytest.mark.parametrize("make", ["single", "vector", "parallel"])
def test_every_env_refuses_a_bad_render_mode_with_one_message(make: str) -> None:
    """The single, the vector and the multi-agent env refuse a render mode they do not offer before
    building anything, with the same one-line message (field, value, what is allowed), and take each
    mode they offer."""
    from ainet_gym.envs.multiagent import FabricParallelEnv

    ctor = {
        "single": lambda mode: FabricRoutingEnv(small_scenario(), render_mode=mode),
        "vector": lambda mode: FabricRoutingVectorEnv(2, small_scenario(), render_mode=mode),
        "parallel": lambda mode: FabricParallelEnv("periodic-interference", render_mode=mode),
    }[make]
    for bad in ("human", "ANSI", ""):
        with pytest.raises(ValueError) as err:
            ctor(bad)
        assert str(err.value) == f"render_mode = {bad!r}: unknown; allowed: None, ansi, rgb_array"
    for good in (None, "ansi", "rgb_array"):
        assert ctor(good).render_mode == good


def test_bad_constructor_arguments_name_the_argument() -> None:
    with pytest.raises(
        ValueError, match="action_mode = 'paths': unknown; allowed: path, split, ecmp_weights"
    ):
        FabricRoutingEnv(small_scenario(), action_mode="paths")
    with pytest.raises(ValueError, match="history = 0"):
        FabricRoutingEnv(small_scenario(), history=0)
    with pytest.raises(ValueError, match="reward = 'speed': unknown"):
        FabricRoutingEnv(small_scenario(), reward="speed")
    with pytest.raises(ValueError, match="render_mode = 'human'"):
        FabricRoutingEnv(small_scenario(), render_mode="human")
    with pytest.raises(ainet_gym.ScenarioError, match=r"fabric\.topology"):
        bad = small_scenario()
        bad["fabric"]["topology"] = "spine-leaf"
        FabricRoutingEnv(bad)
    with pytest.raises(RuntimeError, match="before reset"):
        FabricRoutingEnv(small_scenario()).step(np.zeros(1))


@pytest.mark.parametrize("reward", ["gpu_utilization", "step_time"])
def test_routing_that_avoids_a_collision_earns_more_reward(collision: dict, reward: str) -> None:
    env = FabricRoutingEnv(collision, action_mode="path", reward=reward)
    env.reset(seed=0)
    mask = env.unwrapped.core.controllable[0]
    assert mask.sum() == 4  # each job: a->b and b->a, each with 2 candidate paths
    collide = np.zeros(env.action_space.shape, dtype=np.int64)  # everything on spine 0
    apart = np.zeros_like(collide)
    apart[2:] = 1  # job b on spine 1
    r_collide = [env.step(collide)[1] for _ in range(3)]
    env.reset(seed=0)
    r_apart = [env.step(apart)[1] for _ in range(3)]
    assert min(r_apart) > max(r_collide)
    # and the numbers are the closed form: 400 MB at 50 GB/s = 8 ms alone, 16 ms when colliding
    env.reset(seed=0)
    info = env.step(apart)[4]
    steps = info["step_time_ms"][:2]
    np.testing.assert_allclose(steps, 10 + 8, rtol=1e-9)
    env.reset(seed=0)
    info = env.step(collide)[4]
    np.testing.assert_allclose(info["step_time_ms"][:2], 10 + 16, rtol=1e-9)


def test_action_masks_match_candidate_paths(collision: dict) -> None:
    env = FabricRoutingEnv(collision, action_mode="path")
    env.reset(seed=0)
    m = env.action_masks().reshape(-1, 2)
    assert m.all()  # every slot is a cross-leaf connection with two paths
    env2 = FabricRoutingEnv(small_scenario(), action_mode="path")
    _, info = env2.reset(seed=0)
    m2 = env2.action_masks().reshape(len(info["action_mask"]), -1)
    assert (m2[~info["action_mask"]].sum(axis=1) == 1).all()  # masked slots allow only index 0
    assert (m2[info["action_mask"]].sum(axis=1) > 1).all()


def test_graph_observation_and_render() -> None:
    env = FabricRoutingEnv(small_scenario(), observation="graph", render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    obs, *_ = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)
    f = env.core.world.fabric
    np.testing.assert_array_equal(obs["edge_index"][0], f.link_src)
    text = env.render()
    assert "link" in text and "a" in text
    env2 = FabricRoutingEnv(small_scenario(), render_mode="rgb_array")
    env2.reset(seed=0)
    env2.step(env2.action_space.sample())
    img = env2.render()
    assert img.ndim == 3 and img.shape[2] == 3 and img.dtype == np.uint8 and img.std() > 0


def test_flattened_graph_observation_is_float32() -> None:
    from gymnasium.wrappers import FlattenObservation

    env = FlattenObservation(gym.make("ainet_gym/PeriodicInterference-v0", observation="graph"))
    assert env.observation_space.dtype == np.float32
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    obs, *_ = env.step(env.action_space.sample())
    assert obs.dtype == np.float32
    raw = env.unwrapped.core.observe(env.unwrapped.core.last_result)
    f = env.unwrapped.core.world.fabric
    # node ids survive the float32 round trip exactly
    np.testing.assert_array_equal(raw["edge_index"][0].astype(np.int64), np.stack([f.link_src, f.link_dst]))


def test_rgb_array_heat_map_shows_the_link_history() -> None:
    """Each heat-map pixel is the inferno colour (matplotlib's to 8/255: 17 samples of it interpolated
    linearly; another map, or the scale reversed, is off by far more) of the utilisation of the link and
    interval under it."""
    import matplotlib

    from ainet_gym.envs import render as r

    vals = np.linspace(0.0, 1.0, 101)
    ref = np.rint(matplotlib.colormaps["inferno"](vals)[:, :3] * 255)
    assert np.abs(r.colormap(vals).astype(int) - ref).max() <= 8
    assert np.abs(r.colormap(vals[::-1]).astype(int) - ref).max() > 100  # the tolerance cannot hide a flip
    env = FabricRoutingEnv(small_scenario(), render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.action_space.sample())
    core = env.core
    img = env.render()
    assert img.shape == (r.RGB_HEIGHT, r.RGB_WIDTH, 3)
    order = np.argsort(core.world.fabric.link_tier[core.net_links], kind="stable")
    hist = core.state.util_hist[0][:, order]  # (history, links) as drawn, newest first
    H, N = hist.shape
    mh, mw = r._MAP_BOTTOM - r._MAP_TOP, r._MAP_RIGHT - r._MAP_LEFT
    for h in range(H):
        for n in range(N):  # the centre pixel of each cell
            y = r._MAP_TOP + (2 * h + 1) * mh // (2 * H)
            x = r._MAP_LEFT + (2 * n + 1) * mw // (2 * N)
            if (img[y, x] == (0, 255, 255)).all():  # a tier boundary drawn over the cell
                continue
            np.testing.assert_array_equal(
                img[y, x], r.colormap(hist[h, n]), err_msg=f"interval {h}, link {n}"
            )
    assert hist[0].max() > 0.05  # the picture shows traffic, not only the empty colour


def test_sb3_adapter_trains_ppo_and_reports_terminal_observation() -> None:
    from stable_baselines3 import PPO

    from ainet_gym.envs.sb3_vec_env import SB3VecEnv

    venv = SB3VecEnv(num_envs=2, seed=0, scenario=small_scenario(), episode_steps=4)
    obs = venv.reset()
    assert obs.shape == (2, *venv.observation_space.shape)
    for _ in range(4):
        obs, _rew, dones, infos = venv.step(np.stack([venv.action_space.sample() for _ in range(2)]))
    assert dones.all()
    assert all("terminal_observation" in i and i["TimeLimit.truncated"] for i in infos)
    assert (venv.core.world.state.step_count == 0).all()  # same-step reset
    model = PPO("MlpPolicy", venv, n_steps=8, batch_size=8, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=32)
    assert model.num_timesteps >= 32


@pytest.mark.parametrize("scenario", ["multi-tenant-churn", "periodic-interference", "moe-alltoall-skewed"])
def test_every_job_connection_has_one_action_slot(scenario: str) -> None:
    """The env's action slots route each job connection once and no background connection, through churn,
    background bursts and AllToAll rotations (the engine-level policies' controlled connections are the
    same set)."""
    from ainet_gym.routing.loads import controlled_connections

    env = FabricRoutingVectorEnv(num_envs=2, scenario=scenario, episode_steps=10)
    env.reset(seed=1)
    env.action_space.seed(1)
    core = env.core
    for _ in range(12):
        sim = core.world.sim
        conns = core.slot_connection[core.slot_connection >= 0]
        assert len(np.unique(conns)) == len(conns)  # one slot each
        jobs = np.flatnonzero(~sim.unit_bg[sim.conn_unit])
        np.testing.assert_array_equal(np.sort(conns), jobs)
        np.testing.assert_array_equal(np.flatnonzero(controlled_connections(core.world)), jobs)
        env.step(env.action_space.sample())
