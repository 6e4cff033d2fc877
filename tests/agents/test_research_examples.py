"""Smoke runs of the research-code examples (``make check-examples``: the ``examples`` extra): each
library's example, by the command ``examples/learning_curves.py`` documents, for a few hundred env steps
on its ``ainet_gym/`` id, must finish and log whole episodes with returns a policy can reach."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_learning_curves() -> ModuleType:
    """``examples/learning_curves.py`` as a module, loaded by path: examples/ is not put on ``sys.path``,
    where its folders named after the libraries (examples/tianshou/, ...) would pass for them."""
    spec = importlib.util.spec_from_file_location("learning_curves", ROOT / "examples" / "learning_curves.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


lc = _load_learning_curves()

NEEDS = {
    "cleanrl-ppo-continuous": "tyro",
    "cleanrl-ppo-discrete": "tyro",
    "cleanrl-dqn": "tyro",
    "rl-zoo3-ppo": "rl_zoo3",
    "tianshou-dqn": "tianshou",
}


@pytest.mark.parametrize("name", list(lc.LIBRARIES))
def test_example_runs_and_logs_episodes(name: str, tmp_path: Path) -> None:
    spec = importlib.util.find_spec(NEEDS[name])
    # a folder named after the library on sys.path (examples/rl_zoo3/, ...) would be a namespace package
    # (no origin), not the library
    if spec is None or spec.origin is None:
        pytest.skip(f"{NEEDS[name]} is not installed (the examples extra: make check-examples)")
    lib = lc.LIBRARIES[name]
    cmd = lc.command(name, lib.quick_steps, tmp_path / "runs", seed=3)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # as learning_curves.py: no spin-waiting thread pools
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    episodes = lc.read_episodes(name, tmp_path / "runs")
    import gymnasium as gym

    import ainet_gym  # noqa: F401

    steps = gym.spec(lib.env_id).max_episode_steps  # 48: every reward in [0, 1]
    assert len(episodes) >= 2, out.stdout[-2000:]
    assert (episodes[:, 1] > 0).all() and (episodes[:, 1] <= steps).all(), episodes
    assert (episodes[:, 0] <= lib.quick_steps + 4 * steps).all()  # logged against env steps
