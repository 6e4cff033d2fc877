"""Every registered env id varies with the seed, from the workload, not only from the ECMP hash.

Over every id of the gymnasium registry under ``ainet_gym/`` (every family x every action mode, the ids of
later modes included as they are registered): under one fixed action the episode return differs across
seeds 0-4; static ECMP's episode GPU utilisation over seeds 1-10 has a standard deviation >= 0.005, and
``spray+bg`` (which hashes nothing) varies too; and the default scenario draws the jobs' relative
phases over at least one iteration (and periodic background over its whole period)."""

from __future__ import annotations

from functools import cache

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import ainet_gym  # noqa: F401  (registers the ids)
from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import POLICIES

IDS = sorted(i for i in gym.registry if i.startswith("ainet_gym/"))


def _scenario(env_id: str) -> str:
    return gym.registry[env_id].kwargs["scenario"]


def _fixed_action(space: gym.Space) -> np.ndarray | int:
    if isinstance(space, spaces.Discrete):
        return 0
    return np.zeros(space.shape, dtype=space.dtype)


@cache
def _episode_gpu(scenario: str, policy: str) -> np.ndarray:
    """(10,) episode GPU utilisation of an engine-level policy, seeds 1-10."""
    core = EnvCore(scenario, batch=10)
    core.reset(list(range(1, 11)))
    gpu = np.zeros((10, core.episode_steps))
    for t in range(core.episode_steps):
        _, _, _, _, info = core.step_split(POLICIES[policy](core.world, core.last_result))
        gpu[:, t] = info["reward_gpu_utilization"]
    return gpu.mean(axis=1)


def test_the_ids_cover_every_family_and_mode() -> None:
    from ainet_gym.envs.env import ACTION_MODES
    from ainet_gym.envs.registration import ENV_IDS

    assert len(IDS) == len(ENV_IDS) * len(ACTION_MODES)


@pytest.mark.parametrize("env_id", IDS)
def test_a_fixed_action_gives_another_return_on_every_seed(env_id: str) -> None:
    venv = gym.make_vec(env_id, num_envs=5, vectorization_mode="vector_entry_point")
    venv.reset(seed=[0, 1, 2, 3, 4])
    a = np.stack([np.asarray(_fixed_action(venv.single_action_space))] * 5)
    total = np.zeros(5)
    for _ in range(venv.unwrapped.core.episode_steps):
        _, r, _, trunc, _ = venv.step(a)
        total += r
    assert trunc.all()
    assert np.unique(np.round(total, 12)).size > 1, total


@pytest.mark.parametrize("scenario", sorted({_scenario(i) for i in IDS}))
def test_ecmp_varies_over_held_out_seeds_from_the_workload(scenario: str) -> None:
    g = _episode_gpu(scenario, "ecmp")
    assert g.std(ddof=1) >= 0.005, g
    # spray+bg splits every connection evenly: no hash anywhere, so what varies is the workload
    sprayed = _episode_gpu(scenario, "spray+bg")
    assert sprayed.std(ddof=1) >= 1e-4, sprayed


@pytest.mark.parametrize("scenario", sorted({_scenario(i) for i in IDS}))
def test_phases_are_drawn_over_at_least_one_iteration(scenario: str) -> None:
    core = EnvCore(scenario, batch=1)
    core.reset([0])
    sc = core.scenario
    ideal_ms = core.world.job_ideal_step_s[0, : len(sc.jobs)] * 1e3
    jitter = np.array([j.start_jitter_ms for j in sc.jobs])
    if len(jitter) == 1:
        # one job: its phase against the interval grid (and the background) spans a whole iteration
        assert jitter[0] >= ideal_ms[0], (jitter, ideal_ms)
    else:
        # the relative start of two jobs spans the sum of their windows: some pair covers the slowest iteration
        pairs = jitter[:, None] + jitter[None, :] - np.diag(2 * jitter)
        assert pairs.max() >= ideal_ms.max(), (jitter, ideal_ms)
    assert (jitter > 0).all()
    for bg in sc.background:
        if bg.pattern == "periodic":
            assert bg.offset_jitter_steps >= bg.period_steps - 1, bg
