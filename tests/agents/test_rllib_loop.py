"""The RLlib training loop without Ray: a fake algorithm stands in for ``Algorithm.train()``, so the loop's
bookkeeping (when it stops, what it logs, what an interrupt keeps) is tested in the main suite; the RLlib venv
(``make check-rllib``) runs the same loop on real RLlib."""

from __future__ import annotations

import csv
import json
import sys
import types
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import ainet_gym.envs
from ainet_gym.agents import rllib_train
from ainet_gym.agents.rllib_checkpoint import META_FILE
from ainet_gym.agents.rllib_logging import train_loop, write_progress_csv


class _Algo:
    """Samples ``per_iter`` env steps per ``train()``; raises KeyboardInterrupt on iteration ``stop_at``."""

    def __init__(self, per_iter: int, stop_at: int | None = None) -> None:
        self.per_iter, self.stop_at, self.calls = per_iter, stop_at, 0

    def train(self) -> dict:
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return {
            "training_iteration": self.calls,
            "env_runners": {"num_env_steps_sampled": self.per_iter, "episode_return_mean": 0.5 * self.calls},
        }


class _Writer:
    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []
        self.closed = False

    def add_scalar(self, k: str, v: float, step: int) -> None:
        self.scalars.append((k, v, step))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_the_loop_stops_at_the_first_iteration_that_reaches_the_target() -> None:
    algo, writer = _Algo(per_iter=300), _Writer()
    steps, rows, _final, interrupted = train_loop(algo, writer, start=1000, target=2000, progress=False)
    # 1000 + 4 x 300 = 2200 >= 2000 after the 4th iteration (3 would give 1900)
    assert (steps, algo.calls, interrupted) == (2200, 4, False)
    assert [r["timesteps"] for r in rows] == [1300, 1600, 1900, 2200]
    assert [r["rollout/ep_rew_mean"] for r in rows] == [0.5, 1.0, 1.5, 2.0]
    assert writer.closed
    assert {s for k, _v, s in writer.scalars if k == "rollout/ep_rew_mean"} == {1300, 1600, 1900, 2200}


def test_an_interrupt_keeps_the_iterations_done_and_closes_the_log() -> None:
    algo, writer = _Algo(per_iter=100, stop_at=3), _Writer()
    steps, rows, _final, interrupted = train_loop(algo, writer, start=0, target=10_000, progress=False)
    assert (steps, len(rows), interrupted, writer.closed) == (200, 2, True, True)


def test_progress_csv_has_timesteps_first_and_every_column(tmp_path: Path) -> None:
    p = tmp_path / "progress.csv"
    write_progress_csv(p, [{"timesteps": 1, "b": 2.0}, {"timesteps": 2, "a": 3.0}])
    with open(p) as f:
        got = list(csv.reader(f))
    assert got == [["timesteps", "a", "b"], ["1", "", "2.0"], ["2", "3.0", ""]]
    write_progress_csv(tmp_path / "none.csv", [])
    assert not (tmp_path / "none.csv").exists()


# ----------------------------------------------------------------------------------------------------------
# train_rllib end to end on stub Ray modules: what it builds, restores, logs and saves, in which order
# ----------------------------------------------------------------------------------------------------------


class _Module:
    observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)


class _StubAlgo(_Algo):
    def __init__(self, calls: list[tuple]) -> None:
        super().__init__(per_iter=6)
        self.log = calls

    def get_module(self) -> _Module:
        return _Module()

    def restore_from_path(self, path: str) -> None:
        self.log.append(("restore", Path(path).name))

    def stop(self) -> None:
        self.log.append(("stop",))


class _Conf:
    env_config = {"episode_steps": 7}

    def __init__(self, calls: list[tuple]) -> None:
        self.log = calls

    def build_algo(self) -> _StubAlgo:
        self.log.append(("build",))
        return _StubAlgo(self.log)


@pytest.fixture
def stub_ray(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Stub ``ray``, ``torch.utils.tensorboard`` and :mod:`ainet_gym.envs.rllib` (its ``init_ray`` and
    ``ppo_config``), and a ``save_checkpoint`` that records; returns the list of the calls made."""
    calls: list[tuple] = []
    ray = types.ModuleType("ray")
    ray.__version__ = "0.stub"  # type: ignore[attr-defined]
    ray.is_initialized = lambda: False  # type: ignore[attr-defined]
    ray.shutdown = lambda: calls.append(("shutdown",))  # type: ignore[attr-defined]
    tb = types.ModuleType("torch.utils.tensorboard")
    tb.SummaryWriter = lambda logdir: _Writer()  # type: ignore[attr-defined]
    arl = types.ModuleType("ainet_gym.envs.rllib")
    arl.init_ray = lambda address, runners: calls.append(("init_ray", address, runners))  # type: ignore[attr-defined]

    def ppo_config(scenario: Any, **kw: Any) -> _Conf:
        calls.append(("ppo_config", scenario.name, {k: v for k, v in kw.items() if k != "callbacks"}))
        return _Conf(calls)

    def save(algo: Any, out: Path, meta: dict[str, Any]) -> Path:
        calls.append(("save", out.name, {k: v for k, v in meta.items() if k != "run_name"}))
        return out

    arl.ppo_config = ppo_config  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", tb)
    monkeypatch.setitem(sys.modules, "ainet_gym.envs.rllib", arl)
    monkeypatch.setattr(ainet_gym.envs, "rllib", arl, raising=False)
    monkeypatch.setattr(rllib_train, "make_fabric_callback", lambda: object)
    monkeypatch.setattr(rllib_train, "save_checkpoint", save)
    return calls


def test_train_rllib_builds_trains_saves_and_stops_in_order(stub_ray: list[tuple], tmp_path: Path) -> None:
    cfg = rllib_train.RLlibTrainConfig(
        scenario="spine-leaf-2to1", timesteps=10, seed=3, logdir=tmp_path, progress=False, torch_threads=None
    )
    res = rllib_train.train_rllib(cfg)
    # two iterations of 6 steps reach 10; the checkpoint goes into the run folder
    assert (res.total_timesteps, len(res.history), res.interrupted) == (12, 2, False)
    assert res.checkpoint == res.run_dir / "checkpoint" and (res.run_dir / "progress.csv").is_file()
    assert res.run_name.startswith("spine-leaf-2to1__rllib-ppo__3__")
    names = [c[0] for c in stub_ray]
    assert names == ["init_ray", "ppo_config", "build", "save", "stop", "shutdown"]
    assert stub_ray[0] == ("init_ray", None, 2)
    assert stub_ray[1][2] == {
        "num_env_runners": 2, "envs_per_runner": 16, "seed": 3, "action_mode": "split", "history": 4,
        "episode_steps": None, "lr": 3e-4, "lr_final": 3e-5, "decay_steps": 10, "hyperparameters": {},
    }  # fmt: skip
    meta = stub_ray[3][2]
    assert (meta["framework"], meta["timesteps"], meta["episode_steps"], meta["resumed_from"]) == (
        "rllib",
        12,
        7,
        None,
    )
    assert meta["observation_space"] == {"kind": "Box", "shape": [3]}


def test_train_rllib_resumes_with_the_checkpoints_settings(stub_ray: list[tuple], tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    sig = {"observation_space": {"kind": "Box", "shape": [3]}, "action_space": {"kind": "Box", "shape": [2]}}
    meta_old = {"framework": "rllib", "action_mode": "ecmp_weights", "history": 2, "timesteps": 100, **sig}
    (old / META_FILE).write_text(json.dumps(meta_old))
    cfg = rllib_train.RLlibTrainConfig(
        scenario="spine-leaf-2to1", timesteps=5, logdir=tmp_path, out=tmp_path / "new", resume=old,
        trust_checkpoint=True, progress=False, torch_threads=None,
    )  # fmt: skip
    res = rllib_train.train_rllib(cfg)
    assert (res.total_timesteps, res.checkpoint, res.run_name.split("__")[1]) == (
        106,
        tmp_path / "new",
        "rllib-ppo-ecmp_weights",
    )
    assert [c[0] for c in stub_ray] == [
        "init_ray",
        "ppo_config",
        "build",
        "restore",
        "save",
        "stop",
        "shutdown",
    ]
    conf = stub_ray[1][2]
    assert (conf["action_mode"], conf["history"], conf["decay_steps"]) == ("ecmp_weights", 2, 105)
    meta = stub_ray[4][2]
    assert (meta["timesteps"], meta["history"], meta["resumed_from"]) == (106, 2, str(old))


def test_train_rllib_refuses_an_untrusted_resume_before_ray(stub_ray: list[tuple], tmp_path: Path) -> None:
    from ainet_gym.agents.model_files import UntrustedModelError

    old = tmp_path / "old"
    old.mkdir()
    (old / META_FILE).write_text(json.dumps({"framework": "rllib"}))
    cfg = rllib_train.RLlibTrainConfig(logdir=tmp_path, out=tmp_path / "new", resume=old, progress=False)
    with pytest.raises(UntrustedModelError):
        rllib_train.train_rllib(cfg)
    assert stub_ray == []


def test_train_rllib_stops_ray_when_the_checkpoint_does_not_fit(
    stub_ray: list[tuple], tmp_path: Path
) -> None:
    old = tmp_path / "old"
    old.mkdir()
    meta_old = {"framework": "rllib", "observation_space": {"kind": "Box", "shape": [9]}}
    (old / META_FILE).write_text(json.dumps(meta_old))
    cfg = rllib_train.RLlibTrainConfig(
        logdir=tmp_path, out=tmp_path / "new", resume=old, trust_checkpoint=True, progress=False,
        torch_threads=None,
    )  # fmt: skip
    with pytest.raises(ValueError, match="does not fit scenario"):
        rllib_train.train_rllib(cfg)
    assert [c[0] for c in stub_ray] == ["init_ray", "ppo_config", "build", "stop", "shutdown"]
