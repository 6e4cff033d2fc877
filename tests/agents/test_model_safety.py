"""Loading a model is safe by default: a zip that is not a model of the expected algorithm is refused
before anything is unpickled, and pickled entries outside the allowlist never run."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

from _scenarios import small_spine_leaf

from ainet_gym.agents.sb3_agents import META_MEMBER, UntrustedModelError, load_model, save_model


def _model(tmp_path: Path, algo: str = "ppo") -> Path:
    from ainet_gym.agents.sb3_agents import algo_class, resolve_action_mode, space_signature
    from ainet_gym.envs.sb3_vec_env import SB3VecEnv

    mode = resolve_action_mode(algo, None)
    venv = SB3VecEnv(num_envs=2, scenario=small_spine_leaf(), action_mode=mode)
    kw = {"n_steps": 8, "batch_size": 16} if algo != "sac" else {"buffer_size": 100}
    model = algo_class(algo)("MlpPolicy", venv, device="cpu", **kw)
    meta = {
        "algo": algo,
        "action_mode": mode,
        "observation_space": space_signature(venv.observation_space),
        "action_space": space_signature(venv.action_space),
    }
    return save_model(model, tmp_path / f"{algo}.zip", meta)


def _rewrite(src: Path, dst: Path, data_edit=None, drop: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            if name in drop:
                continue
            blob = zin.read(name)
            if name == "data" and data_edit is not None:
                d = json.loads(blob)
                data_edit(d)
                blob = json.dumps(d).encode()
            zout.writestr(name, blob)
    return dst


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_model_saved_by_train_loads(tmp_path: Path, algo: str) -> None:
    model, meta = load_model(_model(tmp_path, algo))
    assert type(model).__name__ == algo.upper() and meta["algo"] == algo


def test_a_zip_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "notes.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(
        UntrustedModelError, match=r"ppo:.*notes.zip: not a ppo model .*missing data, policy.pth"
    ):
        load_model(p, "ppo")


def test_a_model_of_another_algorithm_is_refused_without_metadata(tmp_path: Path) -> None:
    ppo = _rewrite(_model(tmp_path), tmp_path / "bare.zip", drop=(META_MEMBER,))
    with pytest.raises(UntrustedModelError, match=r"not a a2c model .*settings are those of ppo"):
        load_model(ppo, "a2c")
    with pytest.raises(UntrustedModelError, match=r"not a sac model"):
        load_model(ppo, "sac")
    model, _ = load_model(ppo, "ppo")  # the right algorithm still loads
    assert type(model).__name__ == "PPO"


@pytest.mark.parametrize("key", ["learning_rate", "observation_space", "policy_class"])
def test_a_crafted_pickle_is_refused_and_never_runs(tmp_path: Path, key: str) -> None:
    marker = tmp_path / "pwned"
    payload = base64.b64encode(pickle.dumps(_Evil(str(marker)))).decode()

    def plant(d: dict) -> None:
        d[key] = {":type:": "<class 'float'>", ":serialized:": payload}

    evil = _rewrite(_model(tmp_path), tmp_path / "evil.zip", data_edit=plant)
    with pytest.raises(UntrustedModelError, match=rf"'{key}' entry references (posix|os|nt)\.system"):
        load_model(evil, "ppo")
    assert not marker.exists()


def test_the_cli_refuses_the_crafted_model_with_one_line(tmp_path: Path, capsys) -> None:
    from ainet_gym.cli import main

    marker = tmp_path / "pwned"
    payload = base64.b64encode(pickle.dumps(_Evil(str(marker)))).decode()
    evil = _rewrite(
        _model(tmp_path),
        tmp_path / "evil.zip",
        data_edit=lambda d: d.update(lr_schedule={":serialized:": payload}),
    )
    args = ["evaluate", "spine-leaf-2to1", "--policies", f"ppo:{evil}", "--seeds", "1", "--steps", "1"]
    assert main([*args, "--out", str(tmp_path / "ev")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refusing to unpickle" in err[0], err
    assert not marker.exists()


def test_a_model_with_broken_tensors_is_refused_with_a_message(tmp_path: Path) -> None:
    src = _model(tmp_path)
    dst = tmp_path / "broken.zip"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            zout.writestr(name, b"garbage" if name == "policy.pth" else zin.read(name))
    with pytest.raises(ValueError, match=r"cannot be loaded as a ppo model"):
        load_model(dst, "ppo")


def test_an_enum_member_pickled_by_getattr_loads_and_nothing_else_does(tmp_path) -> None:
    # Python 3.11.2 pickles SB3's TrainFrequencyUnit.STEP as getattr(TrainFrequencyUnit, 'STEP'): allowed;
    # getattr on anything else stays refused
    import pickle
    import subprocess

    from stable_baselines3.common.type_aliases import TrainFrequencyUnit

    from ainet_gym.agents.sb3_agents import UntrustedModelError
    from ainet_gym.agents.sb3_safety import _restricted_loads as loads

    class ByGetattr:
        def __init__(self, obj: object, name: str) -> None:
            self.obj, self.name = obj, name

        def __reduce__(self):
            return getattr, (self.obj, self.name)

    blob = pickle.dumps(ByGetattr(TrainFrequencyUnit, "STEP"))
    assert loads(blob, "train_freq", tmp_path / "m.zip") is TrainFrequencyUnit.STEP
    with pytest.raises(UntrustedModelError):  # the class itself is refused before getattr runs
        loads(pickle.dumps(ByGetattr(subprocess.Popen, "__init__")), "x", tmp_path / "m.zip")
    with pytest.raises(pickle.UnpicklingError):  # an allowed class, but not an Enum
        loads(pickle.dumps(ByGetattr(dict, "fromkeys")), "x", tmp_path / "m.zip")
    with pytest.raises(pickle.UnpicklingError):
        loads(pickle.dumps(ByGetattr(TrainFrequencyUnit, "__class__")), "x", tmp_path / "m.zip")
