"""The env ids: one per scenario family and action mode, their specs, max_episode_steps that follows the
scenario, and the vector entry point of every id."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

import ainet_gym
from ainet_gym.envs.env import ACTION_MODES
from ainet_gym.envs.registration import ENV_IDS, env_id_for, env_ids, mode_id_suffix
from ainet_gym.envs.vector_env import FabricRoutingVectorEnv

SCENARIOS = Path(ainet_gym.__file__).resolve().parent.parent / "scenarios"
ALL_IDS = sorted(env_ids())


def yaml_episode_steps(name: str) -> int:
    """``dynamics.episode_steps`` read from the scenario's YAML file itself (not through the loader)."""
    return int(yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())["dynamics"]["episode_steps"])


def test_every_mode_has_an_id_per_family_named_in_camel_case() -> None:
    assert mode_id_suffix("path") == "Path"
    assert mode_id_suffix("ecmp_weights") == "EcmpWeights"
    assert mode_id_suffix("choose") == "Choose"
    assert mode_id_suffix("split_bg") == "SplitBg"  # a mode's words, each capitalised
    want = set()
    for base in ENV_IDS:
        name = base.removesuffix("-v0")
        want.add(base)  # split
        want |= {f"{name}-{mode_id_suffix(m)}-v0" for m in ACTION_MODES if m != "split"}
    assert set(env_ids()) == want
    assert want <= set(gym.registry)
    assert len(want) == len(ENV_IDS) * len(ACTION_MODES)
    assert env_id_for("ainet_gym/SpineLeaf-v0", "ecmp_weights") == "ainet_gym/SpineLeaf-EcmpWeights-v0"


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_spec_entry_points_mode_and_max_episode_steps(env_id: str) -> None:
    base, mode = env_ids()[env_id]
    spec = gym.spec(env_id)
    assert spec.entry_point == "ainet_gym.envs.env:FabricRoutingEnv"
    assert spec.vector_entry_point == "ainet_gym.envs.vector_env:FabricRoutingVectorEnv"
    assert spec.kwargs["scenario"] == ENV_IDS[base]
    assert spec.kwargs.get("action_mode", "split") == mode
    if env_id == base:
        assert "action_mode" not in spec.kwargs  # the base ids keep their kwargs: split by default
    assert spec.max_episode_steps == yaml_episode_steps(ENV_IDS[base])


@pytest.mark.parametrize("mode", ACTION_MODES)
def test_make_truncates_at_the_registered_max_episode_steps(mode: str) -> None:
    env = gym.make(env_id_for("ainet_gym/PeriodicInterference-v0", mode))
    assert env.spec.max_episode_steps == 48 == yaml_episode_steps("periodic-interference")
    assert env.unwrapped.core.action_mode == mode
    env.reset(seed=0)
    env.action_space.seed(0)
    for t in range(1, 49):
        *_, trunc, _ = env.step(env.action_space.sample())
        assert trunc == (t == 48), t


def test_max_episode_steps_follows_an_overriding_scenario() -> None:
    # periodic-interference ends after 48 steps, spine-leaf-2to1 after 64: both directions
    for env_id, scenario in (
        ("ainet_gym/SpineLeaf-Choose-v0", "periodic-interference"),
        ("ainet_gym/PeriodicInterference-Path-v0", "spine-leaf-2to1"),
    ):
        steps = yaml_episode_steps(scenario)
        env = gym.make(env_id, scenario=scenario)
        assert env.spec.max_episode_steps == steps
        assert env.get_wrapper_attr("_max_episode_steps") == steps  # the TimeLimit gymnasium.make added
        for mode in ("vector_entry_point", "sync"):
            venv = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, scenario=scenario)
            assert venv.spec.max_episode_steps == steps, mode
            venv.close()
        assert gym.spec(env_id).max_episode_steps == yaml_episode_steps(
            ENV_IDS[env_ids()[env_id][0]]
        )  # the registry keeps the default scenario's
    # episode_steps= sets the episode length, and so the limit; an explicit max_episode_steps wins
    env = gym.make("ainet_gym/SpineLeaf-v0", episode_steps=5)
    assert env.spec.max_episode_steps == 5
    env = gym.make("ainet_gym/SpineLeaf-v0", scenario="periodic-interference", max_episode_steps=7)
    assert env.spec.max_episode_steps == 7
    venv = gym.make_vec("ainet_gym/SpineLeaf-v0", num_envs=2, max_episode_steps=7)
    assert venv.spec.max_episode_steps == 7 and venv.unwrapped.max_episode_steps == 7


def test_vector_env_truncates_at_max_episode_steps_like_time_limit() -> None:
    # the vector env stops each copy at min(max_episode_steps, episode_steps), as TimeLimit does the single
    # env; the observation's episode progress stays step / episode_steps in both
    venv = gym.make_vec(
        "ainet_gym/PeriodicInterference-Choose-v0", num_envs=2, episode_steps=10, max_episode_steps=3
    )
    single = gym.make("ainet_gym/PeriodicInterference-Choose-v0", episode_steps=10, max_episode_steps=3)
    vobs, _ = venv.reset(seed=4)
    obs, _ = single.reset(seed=4)
    np.testing.assert_array_equal(vobs[0], obs)
    for t in range(1, 4):
        vobs, _, _, vtrunc, _ = venv.step(np.array([1, 2]))
        obs, _, _, trunc, _ = single.step(1)
        np.testing.assert_array_equal(vobs[0], obs)
        assert vtrunc.tolist() == [t == 3, t == 3] and trunc == (t == 3)
    progress = venv.unwrapped.core.obs_layout["episode_progress"]
    assert vobs[0, progress][0] == np.float32(3 / 10)
    with pytest.raises(ValueError, match=r"max_episode_steps = 0: must be an integer >= 1"):
        FabricRoutingVectorEnv(num_envs=1, scenario="periodic-interference", max_episode_steps=0)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_vector_entry_point_of_every_id(env_id: str) -> None:
    _base, mode = env_ids()[env_id]
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", episode_steps=2)
    assert isinstance(venv.unwrapped, FabricRoutingVectorEnv)
    assert venv.unwrapped.core.action_mode == mode
    single = gym.make(env_id, episode_steps=2)
    assert venv.single_action_space == single.action_space
    assert venv.single_observation_space == single.observation_space
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (2, *single.observation_space.shape) and obs.dtype == np.float32
    venv.action_space.seed(0)
    for t in range(1, 3):
        obs, rew, term, trunc, info = venv.step(venv.action_space.sample())
        assert venv.observation_space.contains(obs)
        assert np.all((rew >= 0) & (rew <= 1))
        assert not term.any() and trunc.tolist() == [t == 2] * 2
    venv.close()


def test_scenarios_cli_lists_every_id() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ainet_gym.cli", "scenarios", "--env-ids"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert set(rows) == set(env_ids())
    for env_id, (base, mode) in env_ids().items():
        assert rows[env_id] == [mode, ENV_IDS[base], str(yaml_episode_steps(ENV_IDS[base]))]
