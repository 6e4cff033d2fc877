"""The RLlib training loop without Ray: a fake algorithm stands in for ``Algorithm.train()``, so the loop's
bookkeeping (when it stops, what it logs, what an interrupt keeps) is tested in the main suite; the RLlib venv
(``make check-rllib``) runs the same loop on real RLlib."""

from __future__ import annotations

import contextlib
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
    # SB3's logger binds torch's SummaryWriter at its import (None if that fails): import it for real first, so
    # that a test loading SB3 under the stub (evaluate, issue-26zk2) leaves the later tests their TensorBoard
    with contextlib.suppress(ImportError):
        import stable_baselines3.common.logger  # noqa: F401
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


# ----------------------------------------------------------------------------------------------------------
# the fabric fingerprint of a checkpoint (issue-26zk2): written by train_rllib, checked by rllib:DIR and --resume
# ----------------------------------------------------------------------------------------------------------


def _ppo_module(core: Any) -> Any:
    """A torch module shaped like RLlib's PPO module (an actor encoder and a ``pi`` head) on ``core``'s spaces:
    what ``save_checkpoint`` exports as plain weights."""
    import torch

    n_obs, n_act = int(np.prod(core.observation_space.shape)), int(np.prod(core.action_space.shape))
    m = torch.nn.Module()
    m.encoder = torch.nn.Module()
    m.encoder.actor_encoder = torch.nn.Sequential(torch.nn.Linear(n_obs, 8), torch.nn.Tanh())
    m.pi = torch.nn.Sequential(torch.nn.Linear(8, n_act))
    m.observation_space, m.action_space = core.observation_space, core.action_space
    return m


class _SavingAlgo(_StubAlgo):
    """A stub algorithm whose module is a real torch network (exported by the real ``save_checkpoint``)."""

    def __init__(self, calls: list[tuple], module: Any) -> None:
        super().__init__(calls)
        self.module = module

    def get_module(self) -> Any:
        return self.module

    def save_to_path(self, path: str) -> None:  # RLlib's own files: a stand-in
        (Path(path) / "rllib_checkpoint.json").write_text("{}")


def test_a_checkpoint_records_its_fabric_and_rllib_and_resume_refuse_another(
    stub_ray: list[tuple], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, one_line
) -> None:
    """``train --framework rllib`` (stub Ray, the real checkpoint writer) on the 4:1 graph scenario writes its
    fabric's fingerprint into ``ainet_gym.json``; ``evaluate rllib:DIR`` on the 2:1 copy (same name and spaces)
    and ``--resume DIR`` there are one line (exit 2) naming the folder, the field and both fingerprints, the
    resume before Ray starts; ``--allow-other-fabric`` resumes and the new checkpoint records both; a folder
    without the field (written before it) plays and resumes anywhere, unchecked. Fails on the old code: the
    checkpoint had no ``fabric`` and the refused commands exited 0 (and ``--allow-other-fabric`` was refused)."""
    pytest.importorskip("torch")
    import shutil

    from _scenarios import fp_graph_two_fabrics, scenario_fingerprint

    from ainet_gym.agents import rllib_checkpoint
    from ainet_gym.cli import main
    from ainet_gym.envs.env import EnvCore

    four, two = fp_graph_two_fabrics(tmp_path)
    fp4, fp2 = scenario_fingerprint(four), scenario_fingerprint(two)
    assert fp4 != fp2
    module = _ppo_module(EnvCore(str(four), history=4))
    conf = _Conf(stub_ray)
    conf.build_algo = lambda: stub_ray.append(("build",)) or _SavingAlgo(stub_ray, module)  # type: ignore[method-assign]
    monkeypatch.setattr(sys.modules["ainet_gym.envs.rllib"], "ppo_config", lambda sc, **kw: conf)
    monkeypatch.setattr(rllib_train, "save_checkpoint", rllib_checkpoint.save_checkpoint)

    def train(scenario: Path, out: str, *flags: str) -> int:
        argv = ["train", str(scenario), "--framework", "rllib", "--timesteps", "6", "--num-env-runners", "0",
                "--no-progress", "--logdir", str(tmp_path / f"logs-{out}"), "--out", str(tmp_path / out), *flags]  # fmt: skip
        return main(argv)

    def meta_of(folder: Path) -> dict:
        return json.loads((folder / META_FILE).read_text())

    def edited(name: str, **change: Any) -> Path:  # a copy of the checkpoint with its metadata edited
        d = tmp_path / name
        shutil.copytree(ck, d)
        meta = {k: v for k, v in meta_of(ck).items() if k != "fabric"} | change
        (d / META_FILE).write_text(json.dumps(meta))
        return d

    def evaluate(scenario: Path, folder: Path) -> int:
        capsys.readouterr()
        ev = ["evaluate", str(scenario), "--policies", f"rllib:{folder}", "--seeds", "1", "--steps", "2"]
        return main([*ev, "--out", str(tmp_path / "ev"), "--overwrite"])

    assert train(four, "ck") == 0
    ck = tmp_path / "ck"
    meta = meta_of(ck)
    assert meta["fabric"] == fp4 and "source_fabric" not in meta and "policy_module" in meta
    assert evaluate(two, ck) == 2
    one_line(f"rllib:{ck}: field 'fabric' = '{fp4}' (the fabric it was trained on), the scenario played has "
             f"fabric '{fp2}'; allowed: the scenario it was trained on (the same links and capacities), or train a "
             "model on this fabric (ainet-gym train --framework rllib)")  # fmt: skip
    assert evaluate(four, ck) == 0
    old = edited("old")  # written before the field: played on any fabric
    assert evaluate(two, old) == 0
    assert evaluate(two, edited("five", fabric=5)) == 2
    one_line("field 'fabric' = 5; allowed: a 0-d non-empty string")

    capsys.readouterr()
    stub_ray.clear()
    assert train(two, "r1", "--resume", str(ck), "--trust-checkpoint") == 2
    one_line(f"--resume '{ck}': field 'fabric' = '{fp4}'", f"the scenario trained on has fabric '{fp2}'",
             "a new run without --resume, or --allow-other-fabric")  # fmt: skip
    assert stub_ray == [] and not (tmp_path / "r1").exists() and not (tmp_path / "logs-r1").exists()
    assert train(two, "r1", "--resume", str(ck)) == 2  # the fabric is told before the trust question
    one_line(f"--resume '{ck}': field 'fabric' = '{fp4}'")
    assert train(two, "r2", "--resume", str(ck), "--trust-checkpoint", "--allow-other-fabric") == 0
    meta = meta_of(tmp_path / "r2")
    assert (meta["fabric"], meta["source_fabric"], meta["resumed_from"]) == (fp2, fp4, str(ck))
    assert ("restore", "ck") in stub_ray
    assert train(four, "r3", "--resume", str(ck), "--trust-checkpoint") == 0  # its own fabric
    assert meta_of(tmp_path / "r3")["fabric"] == fp4 and "source_fabric" not in meta_of(tmp_path / "r3")
    assert train(two, "r4", "--resume", str(old), "--trust-checkpoint") == 0  # no fingerprint: unchecked
    assert meta_of(tmp_path / "r4")["fabric"] == fp2 and "source_fabric" not in meta_of(tmp_path / "r4")
    capsys.readouterr()
    assert train(four, "r5", "--allow-other-fabric") == 2  # the flag says something only with --resume
    one_line("allow_other_fabric = True without a source model: allowed: with resume")
