"""Every CLI case of issue 10: exit status 2 and one line naming the flag or field, never a traceback;
``--debug`` shows the traceback. And the output rule of train / evaluate / demo."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import yaml
from _scenarios import small_spine_leaf

from ainet_gym.cli import main


def run(capsys, *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse errors
        code = int(e.code)
    err = capsys.readouterr().err.strip()
    return code, err


def one_line_error(capsys, *argv: str) -> str:
    code, err = run(capsys, *argv)
    assert code == 2, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def small(tmp_path: Path) -> str:
    p = tmp_path / "small.yaml"
    p.write_text(yaml.safe_dump(small_spine_leaf(episode_steps=4)))
    return str(p)


@pytest.fixture
def not_a_model(tmp_path: Path) -> str:
    p = tmp_path / "notes.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("readme.txt", "hello")
    return str(p)


def test_empty_scenario_names_the_argument(capsys) -> None:
    line = one_line_error(capsys, "simulate", "")
    assert "argument scenario: empty" in line


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ("train", "spine-leaf-2to1", "--gamma", "1.5"),
            "argument --gamma: 1.5 is out of range; allowed: a discount factor, a number in (0, 1]",
        ),
        (("train", "spine-leaf-2to1", "--gamma", "0"), "argument --gamma: 0 is out of range"),
        (("train", "spine-leaf-2to1", "--gamma", "nan"), "argument --gamma: nan is out of range"),
        (
            ("train", "spine-leaf-2to1", "--residual-scale", "-1"),
            "argument --residual-scale: -1 is out of range",
        ),
        (
            ("train", "spine-leaf-2to1", "--log-std-init", "inf"),
            "argument --log-std-init: inf is out of range",
        ),
        (("crosscheck", "xc-ring-8", "--seed", "-1"), "argument --seed: -1 is out of range"),
        (("crosscheck", "xc-ring-8", "--steps", "0"), "argument --steps: 0 is out of range"),
        (("crosscheck", "xc-ring-8", "--split-qps", "0"), "argument --split-qps: 0 is out of range"),
        (("crosscheck", "xc-ring-8", "--mss", "x"), "argument --mss: 'x' is not an integer"),
    ],
)
def test_numeric_flags_are_checked_before_anything_runs(capsys, argv: tuple[str, ...], expected: str) -> None:
    # these flags took any float / int before (a gamma of 1.5 reached SB3; a seed of -1 reached ns-3)
    assert expected in one_line_error(capsys, *argv)


def test_a_negative_log_std_is_accepted() -> None:
    from ainet_gym.cli import build_parser

    args = build_parser().parse_args(["train", "spine-leaf-2to1", "--log-std-init", "-2.5", "--gamma", "1"])
    assert (args.log_std_init, args.gamma) == (-2.5, 1.0)


def test_negative_seed_names_the_flag(capsys) -> None:
    assert "argument --seed: -1 is out of range" in one_line_error(
        capsys, "simulate", "spine-leaf-2to1", "--seed", "-1"
    )
    assert "argument --seed: -1 is out of range" in one_line_error(
        capsys, "train", "spine-leaf-2to1", "--seed", "-1"
    )


def test_bad_seed_range_names_the_flag(capsys) -> None:
    line = one_line_error(capsys, "evaluate", "spine-leaf-2to1", "--seeds", "1--3")
    assert "argument --seeds" in line and "'1--3' is not a seed or a range of seeds" in line
    line = one_line_error(capsys, "evaluate", "spine-leaf-2to1", "--seeds", "5-1")
    assert "argument --seeds" in line and "is empty (LO > HI)" in line


@pytest.mark.parametrize("seeds", ["1,,2", "1,2,", ",1", "1, ,2"])
def test_an_empty_seed_part_is_refused(capsys, seeds: str) -> None:
    # "1,,2" ran seeds 1 and 2 (the empty part skipped): a typo, refused by the shared seeds parser
    line = one_line_error(capsys, "evaluate", "spine-leaf-2to1", "--seeds", seeds)
    assert line.startswith(f"ainet-gym evaluate: error: argument --seeds: seeds {seeds!r}: an empty part ")
    assert "allowed: integers >= 0 and ranges LO-HI" in line


def test_the_seeds_parser_keeps_its_forms() -> None:
    from ainet_gym.agents.evaluate import parse_seeds

    assert parse_seeds("1, 3-5,2") == [1, 3, 4, 5, 2]
    with pytest.raises(ValueError, match=r"seeds '': no seed given"):
        parse_seeds("")
    with pytest.raises(ValueError, match=r"seeds '3,,4': an empty part between commas"):
        parse_seeds("3,,4")  # every command that takes seeds parses them here


def test_a_zip_that_is_not_a_model(capsys, not_a_model: str, tmp_path: Path) -> None:
    line = one_line_error(
        capsys,
        "evaluate",
        "spine-leaf-2to1",
        "--policies",
        f"ppo:{not_a_model}",
        "--out",
        str(tmp_path / "e"),
    )
    assert f"ppo:{not_a_model}: not a ppo model" in line
    line = one_line_error(capsys, "train", "spine-leaf-2to1", "--resume", not_a_model, "--timesteps", "64")
    assert line.startswith(f"ainet-gym train: error: --resume {not_a_model!r}:") and "not a ppo model" in line


def test_out_that_is_an_existing_file(capsys, small: str, tmp_path: Path) -> None:
    f = tmp_path / "existing"
    f.write_text("x")
    line = one_line_error(capsys, "evaluate", small, "--policies", "ecmp", "--seeds", "1", "--out", str(f))
    assert f"--out {str(f)!r}: is a file" in line


def test_a_broken_scenario_names_the_field(capsys, tmp_path: Path, small_spine_leaf_scenario: dict) -> None:
    d = small_spine_leaf_scenario
    d["dynamics"]["link_failures"] = {"scheduled": [{"link": "leaf99-spine1", "at_step": 1}]}
    p = tmp_path / "broken.yaml"
    p.write_text(yaml.safe_dump(d))
    line = one_line_error(capsys, "simulate", str(p))
    assert "dynamics.link_failures.scheduled[0].link" in line and "leaf99" in line


def test_debug_shows_the_traceback(tmp_path: Path, small_spine_leaf_scenario: dict) -> None:
    d = small_spine_leaf_scenario
    d["seed"] = 2**70
    p = tmp_path / "big-seed.yaml"
    p.write_text(yaml.safe_dump(d))
    from ainet_gym.scenario.loader import ScenarioError

    with pytest.raises(ScenarioError, match="seed"):
        main(["--debug", "simulate", str(p)])
    with pytest.raises(ScenarioError, match="seed"):
        main(["simulate", str(p), "--debug"])


def test_evaluate_refuses_to_overwrite_earlier_results(capsys, small: str, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = ["evaluate", small, "--policies", "ecmp", "--seeds", "1", "--steps", "1", "--out", str(out)]
    assert run(capsys, *args)[0] == 0
    first = (out / "results.json").read_text()
    line = one_line_error(capsys, *args)
    assert f"--out {str(out)!r}: holds earlier output (results.md" in line and "--overwrite" in line
    assert (out / "results.json").read_text() == first
    assert run(capsys, *args, "--overwrite")[0] == 0


def test_evaluate_default_out_is_a_fresh_folder_per_run(
    capsys, small: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["evaluate", small, "--policies", "ecmp", "--seeds", "1", "--steps", "1"]
    assert run(capsys, *args)[0] == 0
    assert run(capsys, *args)[0] == 0
    runs = sorted(p.name for p in (tmp_path / "out" / "eval").iterdir())
    assert len(runs) == 2 and all(r.startswith("small__") for r in runs), runs
    assert all((tmp_path / "out" / "eval" / r / "results.json").exists() for r in runs)


def test_train_out_rule_and_resume_never_overwrites_its_source(capsys, small: str, tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    base = [
        "train",
        small,
        "--timesteps",
        "32",
        "--n-envs",
        "2",
        "--no-progress",
        "--logdir",
        str(tmp_path / "runs"),
    ]
    d = tmp_path / "models"
    d.mkdir()
    assert run(capsys, *base, "--out", str(d))[0] == 0
    assert (d / "model.zip").is_file() and not (
        tmp_path / "models.zip"
    ).exists()  # a directory gets model.zip
    line = one_line_error(capsys, *base, "--out", str(d))
    assert "a model is already there; pass --overwrite" in line
    m = d / "model.zip"
    before = m.read_bytes()
    line = one_line_error(capsys, *base, "--resume", str(m), "--out", str(m), "--overwrite")
    assert "is the model --resume continues from" in line
    assert m.read_bytes() == before
    assert run(capsys, *base, "--resume", str(m), "--out", str(tmp_path / "next.zip"))[0] == 0
    assert (tmp_path / "next.zip").is_file() and m.read_bytes() == before
    # two runs without --out in the same second get two run folders
    assert run(capsys, *base)[0] == 0
    assert run(capsys, *base)[0] == 0
    assert len(list((tmp_path / "runs").glob("*/model.zip"))) == 2


def test_demo_refuses_an_out_with_earlier_results(capsys, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "results.md").write_text("earlier")
    line = one_line_error(capsys, "demo", "--quick", "--out", str(out))
    assert f"--out {str(out)!r}: holds earlier output (results.md)" in line
    (tmp_path / "m.zip").write_text("not a model")
    line = one_line_error(capsys, "demo", "--quick", "--out", str(tmp_path / "m.zip"))
    assert "a model is already there; pass --overwrite" in line


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--learning-rate", "0"), ("--learning-rate", "nan"), ("--learning-rate", "fast"),
     ("--target-kl", "-0.1"), ("--target-kl", "inf"), ("--ent-coef", "-0.01"), ("--ent-coef", "nan")],
)  # fmt: skip
def test_bad_learning_rate_and_target_kl_name_the_flag(capsys, flag: str, value: str) -> None:
    line = one_line_error(capsys, "train", "spine-leaf-2to1", flag, value)
    assert line.startswith("ainet-gym train: error: argument ") and f"{flag}: " in line
    assert value in line and ("> 0" in line if flag != "--ent-coef" else ">= 0" in line)


def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly() -> None:
    """`ainet-gym scenarios | head -1`: no "Broken pipe" error line, no traceback, status 141."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", "from ainet_gym.cli import main; raise SystemExit(main(['scenarios']))"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == "", err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (("--framework", "rllib", "--obs-blocks", "job_phase"), "--obs-blocks"),
        (("--framework", "rllib", "--n-envs", "4"), "--n-envs"),
        (("--framework", "rllib", "--init-from", "m.zip"), "--init-from"),
        (("--framework", "rllib", "--gamma", "0.5"), "--gamma"),
        (("--num-env-runners", "4"), "--num-env-runners"),
        (("--trust-checkpoint",), "--trust-checkpoint"),
    ],
)
def test_a_flag_the_framework_does_not_read_is_refused_not_ignored(
    capsys, small: str, argv: tuple[str, ...], flag: str
) -> None:
    """Fails on the old code, which trained with the flag silently ignored (RLlib read none of SB3's
    hyperparameters and SB3 none of RLlib's runner flags): the refusal comes before anything is built."""
    line = one_line_error(capsys, "train", small, "--timesteps", "8", *argv)
    assert f"{flag} = " in line and "is not read by this framework" in line and "allowed:" in line


def test_rllib_reads_the_learning_rate() -> None:
    """``--learning-rate`` reaches RLlib's config as SB3's PPO reads it (a linear decay to a tenth), where the
    old code dropped it and trained at 3e-4."""
    import argparse
    from dataclasses import replace

    from ainet_gym.agents import rllib_train

    seen: list[rllib_train.RLlibTrainConfig] = []

    def fake_train(cfg: rllib_train.RLlibTrainConfig) -> None:
        seen.append(cfg)
        raise RuntimeError("stop")

    ns = argparse.Namespace(
        scenario="spine-leaf-2to1", algo="ppo", action_mode=None, timesteps=8, seed=0, logdir="runs", out=None,
        resume=None, no_progress=True, overwrite=False, num_env_runners=0, envs_per_runner=1, address=None,
        trust_checkpoint=False, learning_rate=1e-4,
    )  # fmt: skip
    orig = rllib_train.train_rllib
    rllib_train.train_rllib = fake_train  # type: ignore[assignment]
    try:
        with pytest.raises(RuntimeError, match="stop"):
            rllib_train.train_rllib_main(ns)
    finally:
        rllib_train.train_rllib = orig  # type: ignore[assignment]
    assert seen[0].lr == pytest.approx(1e-4) and seen[0].lr_final == pytest.approx(1e-5)
    assert replace(seen[0], lr=3e-4, lr_final=3e-5) == rllib_train.RLlibTrainConfig(
        scenario="spine-leaf-2to1", timesteps=8, num_env_runners=0, envs_per_runner=1, progress=False
    )
