"""The discrete ``choose`` modes: each action runs one routing plan (an engine-level baseline of one
controls class) for the interval, exactly as that baseline does."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _scenarios import small_spine_leaf

from ainet_gym.envs.env import EnvCore, FabricRoutingEnv
from ainet_gym.routing.plans import CHOOSE_MODES, PLANS
from ainet_gym.routing.policies import get_policy

#: 16 GPUs, two ring jobs, periodic storage background, link failures: every plan has work to do
DYNAMIC = small_spine_leaf(12, link_failures={"rate_per_step": 0.2, "repair_steps": 3})


@pytest.mark.parametrize("mode", list(CHOOSE_MODES))
def test_always_choosing_a_plan_reproduces_its_baseline_exactly(mode: str) -> None:
    """Plan k in the choose mode against the baseline run through ``step_split`` (the evaluator's way),
    from the same seed: the same split every interval, and so the same observations and rewards."""
    for k, name in enumerate(PLANS[CHOOSE_MODES[mode]]):
        env = FabricRoutingEnv(DYNAMIC, action_mode=mode)
        ref = EnvCore(DYNAMIC, batch=1)
        obs, info = env.reset(seed=3)
        ref_obs, _ = ref.reset([3])
        np.testing.assert_array_equal(obs, ref_obs[0])
        assert info["plan_class"] == CHOOSE_MODES[mode] and info["plan"] == -1
        for t in range(8):
            core = env.core
            got = core.decode(core.validate(k))
            want = get_policy(name)(ref.world, ref.last_result)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, step {t}")
            obs, r, _, _, info = env.step(k)
            ref_obs, ref_r, *_ = ref.step_split(want)
            np.testing.assert_array_equal(obs, ref_obs[0], err_msg=f"{name}, step {t}")
            assert r == ref_r[0], (name, t)
            assert info["plan"] == k and info["plan_class"] == CHOOSE_MODES[mode]
            np.testing.assert_array_equal(core.world.sim.engine_state.split, ref.world.sim.engine_state.split)


def test_plans_match_hand_computed_splits() -> None:
    """Independent of the policies module: ecmp is one path per connection (one QP), spray an even split
    of each job connection over its candidate paths with background left on its ECMP path."""
    env = FabricRoutingEnv(small_spine_leaf(12), action_mode="choose")
    env.reset(seed=5)
    core = env.core
    sim = core.world.sim
    n = sim.conn_npaths
    ecmp = core.decode(core.validate(0))
    assert ((ecmp == 0) | (ecmp == 1)).all() and (ecmp.sum(axis=1) == 1).all()
    assert (np.argmax(ecmp, axis=1) < n).all()
    spray = core.decode(core.validate(1))
    bg = sim.unit_bg[sim.conn_unit]
    assert bg.any() and (~bg).any()
    even = (np.arange(core.P)[None, :] < n[:, None]) / n[:, None]
    np.testing.assert_allclose(spray[~bg], even[~bg], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(spray[bg], ecmp[bg])
    # choose_bg's spray+bg sprays the background too
    env_bg = FabricRoutingEnv(small_spine_leaf(12), action_mode="choose_bg")
    env_bg.reset(seed=5)
    c2 = env_bg.core
    np.testing.assert_allclose(c2.decode(c2.validate(1)), even, rtol=0, atol=1e-15)


@pytest.mark.parametrize("mode", list(CHOOSE_MODES))
def test_each_copy_of_a_batch_runs_its_own_plan(mode: str) -> None:
    plans = PLANS[CHOOSE_MODES[mode]]
    K = len(plans)
    B = K + 1
    core = EnvCore(DYNAMIC, batch=B, action_mode=mode)
    core.reset(list(range(B)))
    for t in range(3):
        choice = (np.arange(B) + t) % K
        split = core.decode(core.validate(choice))
        sim = core.world.sim
        inst = sim.unit_inst[sim.conn_unit]
        for k in range(K):
            whole = get_policy(plans[k])(core.world, core.last_result)
            rows = choice[inst] == k
            np.testing.assert_array_equal(split[rows], whole[rows], err_msg=f"{plans[k]}, step {t}")
        _, _, _, _, info = core.step(choice)
        np.testing.assert_array_equal(info["plan"], choice)
        assert (info["plan_class"] == CHOOSE_MODES[mode]).all()


def test_bad_plan_indices_raise_and_leave_state_untouched() -> None:
    env = gym.make("ainet_gym/PeriodicInterference-Choose-v0").unwrapped
    env.reset(seed=0)
    before = env.core.world.state.step_count.copy(), env.core.state.util_hist.copy()
    for bad, match in (
        (
            5,
            r"action = 5: out of Discrete\(5\); expected a plan index, an integer in 0\.\.4 "
            r"\(ecmp, spray, wcmp, greedy, lp\)",
        ),
        (-1, r"action = -1: out of Discrete\(5\)"),
        (1.5, r"action = 1\.5: expected a plan index"),
        (np.array([1, 2]), r"action shape \(2,\): expected a scalar"),
        ("lp", r"action dtype <U2: not a number type"),
    ):
        with pytest.raises(ValueError, match=match):
            env.step(bad)
    np.testing.assert_array_equal(env.core.world.state.step_count, before[0])
    np.testing.assert_array_equal(env.core.state.util_hist, before[1])
    env.step(np.int64(4))  # an integer of any type, and 4.0 as a float, are valid
    env.step(4.0)
    core = EnvCore(DYNAMIC, batch=2, action_mode="choose")
    core.reset([0, 1])
    with pytest.raises(ValueError, match=r"action\[1\] = 7: out of Discrete\(5\)"):
        core.step(np.array([0, 7]))


def test_action_masks_allow_every_plan() -> None:
    env = FabricRoutingEnv(DYNAMIC, action_mode="choose_bg")
    env.reset(seed=0)
    assert env.action_masks().tolist() == [True] * len(PLANS["jobs+bg"])


def test_baseline_actions_in_the_choose_modes() -> None:
    from ainet_gym.agents.baselines import BASELINES, baseline_actions, controls

    core = EnvCore(DYNAMIC, batch=2, action_mode="choose")
    core.reset([0, 1])
    core.step(np.array([0, 0]))
    for name in BASELINES:
        a = baseline_actions(name, core)
        assert a.shape == (2,) and a.dtype == np.int64
        if name in PLANS["jobs"]:
            assert (a == PLANS["jobs"].index(name)).all(), name
    # spray+bg sprays the jobs' connections as spray does: the closest plan on the traffic choose routes
    assert (baseline_actions("spray+bg", core) == PLANS["jobs"].index("spray")).all()
    assert controls("lp", "choose") == "jobs" and controls("spray+bg", "choose_bg") == "jobs+bg"


def test_sb3_dqn_and_ppo_learn_on_a_choose_id() -> None:
    """Discrete learners apply: SB3's DQN and PPO run on the Discrete action space by id."""
    from stable_baselines3 import DQN, PPO

    env = gym.make("ainet_gym/PeriodicInterference-Choose-v0", episode_steps=8)
    DQN("MlpPolicy", env, learning_starts=8, buffer_size=64, batch_size=8, seed=0).learn(24)
    PPO("MlpPolicy", env, n_steps=8, batch_size=8, n_epochs=1, seed=0).learn(16)
