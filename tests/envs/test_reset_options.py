"""Reset options and the batch size on bad input (issue 31q): the envs take no reset options, so anything
but ``None`` or ``{}`` is refused with a message naming it, and the refused reset leaves the episode as it
was (it was silently ignored before: ``{"reset_mask": ...}`` reset every copy). The PettingZoo env refuses
them too, naming each key and value (issue 31y; it warned and went on since issue 31s), except the one probe of
PettingZoo's own API tests, ``options={"options": 1}``, which warns and resets as without options (read in
pettingzoo/test/parallel_test.py and api_test.py, 1.27; tests/envs/test_multiagent.py runs both tests)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import ainet_gym
from ainet_gym.envs.vector_env import FabricRoutingVectorEnv
from tests._scenarios import small_spine_leaf


def _single() -> gym.Env:
    return ainet_gym.envs.env.FabricRoutingEnv(small_spine_leaf(episode_steps=6))


@pytest.mark.parametrize("options", [{"reset_mask": np.array([True])}, {"x": 1}, [1]])
def test_single_env_refuses_reset_options_and_keeps_its_episode(options: object) -> None:
    env, ref = _single(), _single()
    env.reset(seed=3)
    ref.reset(seed=3)
    a = env.action_space.sample()
    env.step(a)
    ref.step(a)
    with pytest.raises(ValueError, match=r"reset options = .*: not supported; allowed: None or \{\}"):
        env.reset(seed=5, options=options)
    b = env.action_space.sample()
    o1, r1, *_ = env.step(b)
    o2, r2, *_ = ref.step(b)
    np.testing.assert_array_equal(o1, o2)
    assert r1 == r2


def test_empty_options_are_accepted() -> None:
    env = _single()
    o1, _ = env.reset(seed=1, options={})
    o2, _ = env.reset(seed=1, options=None)
    np.testing.assert_array_equal(o1, o2)


def test_vector_env_refuses_reset_options() -> None:
    v = FabricRoutingVectorEnv(2, small_spine_leaf(episode_steps=4))
    with pytest.raises(ValueError, match=r"reset options = \['reset_mask'\]: not supported"):
        v.reset(seed=0, options={"reset_mask": np.array([True, False])})
    v.reset(seed=0, options={})


@pytest.mark.parametrize("n", [True, False])
def test_a_bool_is_not_a_number_of_envs(n: bool) -> None:
    # True was taken as 1 env
    with pytest.raises(ValueError, match=f"num_envs = {n}: must be an integer >= 1"):
        FabricRoutingVectorEnv(n, small_spine_leaf(episode_steps=4))


def _parallel():
    pytest.importorskip("pettingzoo")
    return ainet_gym.parallel_env(scenario=small_spine_leaf(episode_steps=4))


def _same_next_step(env, ref) -> None:
    """``env`` and ``ref`` step alike: the same agents, observations and rewards for the same actions."""
    assert env.agents == ref.agents
    acts = {a: env.action_space(a).sample() for a in env.agents}
    o1, r1, *_ = env.step(acts)
    o2, r2, *_ = ref.step(acts)
    assert r1 == r2
    for a in o1:
        np.testing.assert_array_equal(o1[a], o2[a])


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"reset_mask": np.array([True])}, r"reset option 'reset_mask' = array\(\[ True\]\)"),
        ({"b": 1, "a": "x"}, r"reset options 'a' = 'x', 'b' = 1"),
        ({"options": 1, "seed": 3}, r"reset option 'seed' = 3"),  # the probe's key does not let others in
        ([1], r"reset options = \[1\] \(a list\)"),
    ],
)
def test_pettingzoo_env_refuses_reset_options_and_keeps_its_episode(options: object, shown: str) -> None:
    env, ref = _parallel(), _parallel()
    env.reset(seed=4)
    ref.reset(seed=4)
    acts = {a: env.action_space(a).sample() for a in env.agents}
    env.step(acts)
    ref.step(acts)
    with pytest.raises(
        ValueError, match=rf"^{shown}: not supported; allowed: None or \{{\}} \(the env takes no"
    ):
        env.reset(seed=5, options=options)
    _same_next_step(env, ref)


def test_pettingzoo_env_ignores_the_api_test_probe_with_a_warning() -> None:
    # the options pettingzoo.test.parallel_api_test and api_test reset with to check the signature
    env, ref = _parallel(), _parallel()
    with pytest.warns(
        UserWarning, match=r"reset options = \['options'\]: not supported; allowed: None or \{\}"
    ):
        obs, infos = env.reset(seed=4, options={"options": 1})
    want_obs, want_infos = ref.reset(seed=4)
    assert obs.keys() == want_obs.keys() and env.agents == ref.agents
    for a in obs:
        np.testing.assert_array_equal(obs[a], want_obs[a])
    _same_next_step(env, ref)


@pytest.mark.parametrize("options", [None, {}])
def test_pettingzoo_env_takes_no_options_silently(options: object) -> None:
    env = _parallel()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.reset(seed=1, options=options)
