"""The model-file rule (ainet_gym/agents/model_files.py), one crafted payload per loader: a file or folder built to
run a command when loaded (it would create a marker file) is refused with one line naming the path, and
the marker never appears. SB3 zips: tests/agents/test_model_safety.py (the allowlist); here the others and the
command line for each."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from _scenarios import small_spine_leaf  # noqa: E402

from ainet_gym.agents.model_files import (  # noqa: E402
    MODEL_LIMITS,
    ModelFileError,
    ModelNotFoundError,
    UntrustedModelError,
)
from ainet_gym.cli import main  # noqa: E402
from ainet_gym.scenario.loader import LIMITS  # noqa: E402


class _Evil:
    """Unpickling this runs ``touch MARKER``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _evaluate(policy: str, tmp_path: Path) -> int:
    args = ["evaluate", "spine-leaf-2to1", "--policies", policy, "--seeds", "1", "--steps", "1"]
    return main([*args, "--out", str(tmp_path / "ev")])


# ---------------------------------------------------------------------- RLlib checkpoint folders


def _rllib_folder(tmp_path: Path, marker: Path, meta: dict | None = None) -> Path:
    """A folder shaped like an RLlib checkpoint of ainet-gym whose RLlib files are crafted pickles."""
    d = tmp_path / "ckpt"
    mdir = d / "learner_group" / "learner" / "rl_module" / "default_policy"
    mdir.mkdir(parents=True)
    blob = pickle.dumps(_Evil(marker))
    for name in ("class_and_ctor_args.pkl", "module_state.pkl"):
        (mdir / name).write_bytes(blob)
    (d / "algorithm_state.pkl").write_bytes(blob)
    (d / "rllib_checkpoint.json").write_text("{}")
    (d / "ainet_gym.json").write_text(json.dumps(meta or {"framework": "rllib", "algo": "ppo"}))
    return d


def test_an_rllib_folder_of_pickles_is_refused_and_never_runs(tmp_path, one_line) -> None:
    """Fails on the old code: RLModule.from_checkpoint unpickled class_and_ctor_args.pkl (the marker
    appeared) before anything was checked."""
    marker = tmp_path / "pwned"
    d = _rllib_folder(tmp_path, marker)
    assert _evaluate(f"rllib:{d}", tmp_path) == 2
    line = one_line(f"rllib:{d}", "convert-rllib", "--trust-checkpoint")
    assert "Traceback" not in line
    assert not marker.exists()


def test_crafted_policy_weights_are_refused_and_never_run(tmp_path, one_line) -> None:
    from ainet_gym.agents.rllib_policy import POLICY_FILE, POLICY_FORMAT

    marker = tmp_path / "pwned"
    spec = {
        "format": POLICY_FORMAT,
        "layers": [{"linear": [4, 8]}, {"act": "tanh"}, {"linear": [8, 2]}],
        "action": {"kind": "box", "dim": 2},
    }
    d = _rllib_folder(tmp_path, marker, {"framework": "rllib", "policy_module": spec})
    torch.save({"0.weight": _Evil(marker)}, d / POLICY_FILE)  # a pickle, not tensors
    assert _evaluate(f"rllib:{d}", tmp_path) == 2
    one_line(f"rllib:{d}", POLICY_FILE, "not a torch weights file")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda s: s["layers"].__setitem__(0, {"linear": [4, 10**12]}),
            r"layers\[0\]\.linear\[1\] = 1000000000000",
        ),
        (lambda s: s["layers"].__setitem__(0, {"linear": [4, 2**80]}), r"layers\[0\]\.linear\[1\] = "),
        (lambda s: s["layers"].__setitem__(1, {"act": "os.system"}), r"layers\[1\]\.act = 'os\.system'"),
        (
            lambda s: s["layers"].__setitem__(2, {"linear": [9, 2]}),
            r"takes 9 inputs, the layer before gives 8",
        ),
        (lambda s: s["action"].__setitem__("dim", 3), r"last layer gives 2 outputs; its action needs 3"),
        (lambda s: s.__setitem__("layers", [{"linear": [4, 4]}, {"act": "tanh"}] * 20), r"20 linear layers"),
        (lambda s: s.__setitem__("format", "x"), r"format 'x'"),
    ],
)
def test_policy_module_json_is_range_checked_before_anything_is_built(tmp_path, edit, message) -> None:
    from ainet_gym.agents.rllib_policy import POLICY_FORMAT, check_policy_spec

    spec = {
        "format": POLICY_FORMAT,
        "layers": [{"linear": [4, 8]}, {"act": "tanh"}, {"linear": [8, 2]}],
        "action": {"kind": "box", "dim": 2},
    }
    check_policy_spec(spec, "rllib:x")  # the unedited spec passes
    edit(spec)
    with pytest.raises(ModelFileError, match=message):
        check_policy_spec(spec, "rllib:x")


def test_the_rebuilt_policy_matches_an_independent_torch_reference(tmp_path) -> None:
    """An MLP shaped like RLlib's PPO module (actor encoder of two tanh layers, a linear pi head) exported
    and rebuilt gives the module's own mean, then RLlib's unsquash (bounds, clip); MultiDiscrete: the
    arg-max per slot."""
    from gymnasium import spaces

    from ainet_gym.agents.rllib_policy import PolicyNet, export_policy

    torch.manual_seed(0)

    class Fake(torch.nn.Module):
        def __init__(self, n_obs: int, n_out: int, space) -> None:
            super().__init__()
            self.encoder = torch.nn.Module()
            self.encoder.actor_encoder = torch.nn.Sequential(
                torch.nn.Linear(n_obs, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh()
            )
            self.pi = torch.nn.Sequential(torch.nn.Linear(16, n_out))
            self.action_space = space

    obs = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
    box = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
    m = Fake(6, 3, box)
    spec = export_policy(m, tmp_path)
    net = PolicyNet(spec, torch.load(tmp_path / "policy_weights.pt", weights_only=True), "t")
    with torch.no_grad():
        ref = m.pi(m.encoder.actor_encoder(torch.as_tensor(obs))).numpy()
    np.testing.assert_allclose(net.dist_inputs(obs), ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(net.act(obs, box), np.clip(ref, -1, 1), rtol=1e-6, atol=1e-7)
    wide = spaces.Box(0.0, 4.0, shape=(3,), dtype=np.float32)  # unsquash: 0 + (a + 1) * 4 / 2
    np.testing.assert_allclose(net.act(obs, wide), np.clip(2.0 * (ref + 1.0), 0, 4), rtol=1e-6, atol=1e-6)

    md = spaces.MultiDiscrete([3, 2])
    m2 = Fake(6, 5, md)
    spec2 = export_policy(m2, tmp_path)
    net2 = PolicyNet(spec2, torch.load(tmp_path / "policy_weights.pt", weights_only=True), "t")
    with torch.no_grad():
        logits = m2.pi(m2.encoder.actor_encoder(torch.as_tensor(obs))).numpy()
    want = np.stack([logits[:, :3].argmax(1), logits[:, 3:].argmax(1)], axis=1)
    np.testing.assert_array_equal(net2.act(obs, md), want)


def test_resume_of_an_untrusted_rllib_folder_is_refused_before_ray(tmp_path, one_line) -> None:
    """Fails on the old code: --resume handed the folder to RLlib's restore_from_path (pickles)."""
    marker = tmp_path / "pwned"
    d = _rllib_folder(tmp_path, marker)
    rc = main(
        ["train", "spine-leaf-2to1", "--framework", "rllib", "--resume", str(d), "--out", str(tmp_path / "o")]
    )
    assert rc == 2
    one_line(str(d), "--trust-checkpoint", "can run code")
    assert not marker.exists()


def test_convert_needs_the_trust_flag(tmp_path, one_line) -> None:
    marker = tmp_path / "pwned"
    d = _rllib_folder(tmp_path, marker)
    assert main(["convert-rllib", str(d)]) == 2
    one_line(str(d), "--trust-checkpoint")
    assert not marker.exists()
    with pytest.raises(UntrustedModelError):
        from ainet_gym.agents.rllib_checkpoint import convert_checkpoint

        convert_checkpoint(d, trusted=False)


# ---------------------------------------------------------------------- graph policies


def test_a_crafted_graph_policy_is_refused_and_never_runs(tmp_path, one_line) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "graph.pt"
    torch.save({"format": "x", "config": _Evil(marker)}, evil)
    assert _evaluate(f"graph:{evil}", tmp_path) == 2
    one_line(f"graph:{evil}", "not a torch weights file")
    assert not marker.exists()


@pytest.mark.parametrize(
    "content", [b"name: not a torch file\n", b"PK\x03\x04garbage", bytes(range(256)) * 4, b""]
)
def test_a_file_that_is_not_a_torch_checkpoint_is_one_line(tmp_path, one_line, content) -> None:
    """Fails on the old code for the text file: torch.load raised KeyError, a traceback."""
    f = tmp_path / "notes.txt"
    f.write_bytes(content)
    assert _evaluate(f"graph:{f}", tmp_path) == 2
    one_line(f"graph:{f}")


def test_graph_policy_config_is_range_checked(tmp_path) -> None:
    from ainet_gym.agents.graph_policy import FORMAT, load_graph_policy

    p = tmp_path / "g.pt"
    torch.save({"format": FORMAT, "config": {"history": 10**9}, "state_dict": {}, "info": "{}"}, p)
    with pytest.raises(ModelFileError, match=r"history = 1000000000: must be an integer in \[1, 1,000\]"):
        load_graph_policy(p)


# ---------------------------------------------------------------------- per-switch and SB3 models


def _ppo_zip(tmp_path: Path, meta: dict, data_edit=None) -> Path:
    from ainet_gym.agents.sb3_agents import algo_class, save_model
    from ainet_gym.envs.sb3_vec_env import SB3VecEnv

    venv = SB3VecEnv(num_envs=2, scenario=small_spine_leaf(), action_mode="split")
    model = algo_class("ppo")("MlpPolicy", venv, device="cpu", n_steps=8, batch_size=16)
    src = save_model(model, tmp_path / "src.zip", meta)
    if data_edit is None:
        return src
    dst = tmp_path / "evil.zip"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            blob = zin.read(name)
            if name == "data":
                d = json.loads(blob)
                data_edit(d)
                blob = json.dumps(d).encode()
            zout.writestr(name, blob)
    return dst


def test_a_crafted_per_switch_model_is_refused_and_never_runs(tmp_path, one_line) -> None:
    marker = tmp_path / "pwned"
    payload = base64.b64encode(pickle.dumps(_Evil(marker))).decode()
    meta = {"algo": "ppo", "kind": "per_switch", "agents": "leaf", "history": 4}
    evil = _ppo_zip(tmp_path, meta, lambda d: d.update(lr_schedule={":serialized:": payload}))
    assert _evaluate(f"marl:{evil}", tmp_path) == 2
    one_line(str(evil), "refusing to unpickle")
    assert not marker.exists()


def test_per_switch_metadata_missing_a_key_is_one_line(tmp_path, one_line) -> None:
    """Fails on the old code: KeyError 'observation_shape' (a traceback)."""
    meta = {"algo": "ppo", "kind": "per_switch", "agents": "leaf", "history": 4}
    p = _ppo_zip(tmp_path, meta)
    assert _evaluate(f"marl:{p}", tmp_path) == 2
    one_line(f"marl:{p}", "lacks observation_shape, action_shape")


@pytest.mark.parametrize("history", [10**9, -1, "4", 2.5])
def test_model_metadata_history_is_range_checked(tmp_path, one_line, history) -> None:
    """Fails on the old code for 1e9: the env allocated a 1e9-interval history (MemoryError)."""
    p = _ppo_zip(tmp_path, {"algo": "ppo", "action_mode": "split", "history": history})
    assert _evaluate(f"ppo:{p}", tmp_path) == 2
    one_line(str(p), "history", f"[1, {int(LIMITS['history_max']):,}]")


def test_a_crafted_shipped_checkpoint_is_refused_and_never_runs(tmp_path, monkeypatch, one_line) -> None:
    import ainet_gym.pretrained as shipped

    marker = tmp_path / "pwned"
    payload = base64.b64encode(pickle.dumps(_Evil(marker))).decode()
    evil = _ppo_zip(
        tmp_path,
        {"algo": "ppo", "action_mode": "split"},
        lambda d: d.update(lr_schedule={":serialized:": payload}),
    )
    folder = tmp_path / "shipped"
    folder.mkdir()
    evil.rename(folder / "spine-leaf-2to1.zip")
    monkeypatch.setattr(shipped, "PRETRAINED_DIR", folder)
    assert _evaluate("pretrained", tmp_path) == 2
    one_line("spine-leaf-2to1.zip", "refusing to unpickle")
    assert not marker.exists()
    assert shipped.pretrained_path("../shipped/spine-leaf-2to1") is None  # a name never leaves the folder


def test_model_files_above_the_ceiling_are_refused_unread(tmp_path, monkeypatch, one_line) -> None:
    p = _ppo_zip(tmp_path, {"algo": "ppo", "action_mode": "split"})
    monkeypatch.setitem(MODEL_LIMITS, "file_bytes", 1000)
    assert _evaluate(f"ppo:{p}", tmp_path) == 2
    one_line(str(p), "above the ceiling of 1,000", "MODEL_LIMITS['file_bytes']")


def test_missing_model_paths_are_both_value_and_file_errors(tmp_path) -> None:
    from ainet_gym.agents.registry import make_agent

    for spec in (f"ppo:{tmp_path / 'no.zip'}", f"graph:{tmp_path / 'no.pt'}", f"rllib:{tmp_path / 'no'}"):
        with pytest.raises(ModelNotFoundError) as e:
            make_agent(spec)
        assert isinstance(e.value, ValueError) and isinstance(e.value, FileNotFoundError)


@pytest.mark.parametrize("content", [b"root:x:0:0:root:/root:/bin/bash\n", b"PK\x03\x04 not really a zip"])
def test_a_per_switch_model_that_is_not_a_model_is_named_as_given(tmp_path, one_line, content) -> None:
    """A refused model file: one line naming the path as given, with its loader (fails on the old code: a
    ``marl:`` file was reported as ``ppo:PATH``, the loader the per-switch one is built on)."""
    p = tmp_path / "switches.zip"
    p.write_bytes(content)
    assert _evaluate(f"marl:{p}", tmp_path) == 2
    line = one_line(f"marl:{p}")
    assert "ppo:" not in line, line


@pytest.mark.parametrize(
    "loader",
    [
        "ainet_gym.agents.search:load_search_policy",
        "ainet_gym.agents.qnet:load_qnet",
        "ainet_gym.agents.imitate:load_knn",
    ],
)
def test_npz_policies_above_the_ceiling_unpacked_are_refused_unread(tmp_path, monkeypatch, loader) -> None:
    """A small archive that unpacks above ``MODEL_LIMITS["file_bytes"]`` (a zip bomb) is refused from its zip
    directory, before any member is decompressed, by each .npz policy loader (one shared reader)."""
    import importlib

    module, name = loader.split(":")
    load = getattr(importlib.import_module(module), name)
    p = tmp_path / "bomb.npz"
    np.savez_compressed(p, theta=np.zeros(1_000_000))  # 8 MB unpacked, a few KB on disk
    assert p.stat().st_size < 100_000
    monkeypatch.setitem(MODEL_LIMITS, "file_bytes", 100_000)
    with pytest.raises(ModelFileError, match=r"8,000,\d+ bytes unpacked, above the ceiling of 100,000"):
        load(p)
    monkeypatch.setitem(MODEL_LIMITS, "file_bytes", 2 * 2**30)
    with pytest.raises(
        ModelFileError, match="no field"
    ):  # under the ceiling it is read, and refused for its fields
        load(p)
