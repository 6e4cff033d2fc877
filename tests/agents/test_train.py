"""What ``ainet-gym train`` takes and prints, the same for both frameworks: the shared arguments
(:func:`train_arguments`) and the lines when a run ends (:func:`format_run`, :func:`report_run`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ainet_gym.agents.train_report import format_run


def _result(interrupted: bool, final: dict[str, float]) -> SimpleNamespace:
    return SimpleNamespace(
        total_timesteps=4096, seconds=12.34, steps_per_second=331.9, final=final, interrupted=interrupted
    )


def test_run_line_says_steps_time_speed_and_the_last_episodes() -> None:
    line = format_run(_result(False, {"gpu_utilization": 0.8125, "collisions": 2.0}))
    assert line == (
        "trained 4096 steps in 12.3 s (332 steps/s); last episodes: GPU util 0.812, collisions 2.000"
    )


def test_run_line_of_an_interrupted_run_without_finished_episodes() -> None:
    line = format_run(_result(True, {}))
    assert line == "interrupted after 4096 steps in 12.3 s (332 steps/s); last episodes: no episode finished"


@pytest.mark.parametrize("framework", ["sb3", "rllib"])
def test_both_frameworks_take_the_shared_train_arguments_and_end_alike(
    framework, monkeypatch, capsys
) -> None:
    import ainet_gym.agents.rllib_train as rllib_train
    import ainet_gym.agents.train as train
    from ainet_gym.cli import build_parser

    seen = []

    def fake(cfg):
        seen.append(cfg)
        return SimpleNamespace(**vars(_result(True, {})), run_name="r1", model_path="m.zip", checkpoint="ck")

    monkeypatch.setattr(train, "train", fake)
    monkeypatch.setattr(rllib_train, "train_rllib", fake)
    argv = ["train", "spine-leaf-2to1", "--framework", framework, "--algo", "ppo", "--action-mode", "path",
            "--timesteps", "9", "--seed", "3", "--logdir", "L", "--out", "o", "--resume", "r", "--no-progress"]  # fmt: skip
    args = build_parser().parse_args(argv)
    assert args.func(args) == 130  # interrupted
    (cfg,) = seen
    assert (cfg.scenario, cfg.algo, cfg.action_mode, cfg.timesteps, cfg.seed) == (
        "spine-leaf-2to1",
        "ppo",
        "path",
        9,
        3,
    )
    assert (cfg.logdir, cfg.out, cfg.resume, cfg.progress, cfg.overwrite) == ("L", "o", "r", False, False)
    saved = (
        "model: m.zip" if framework == "sb3" else "checkpoint: ck   (evaluate with --policies ecmp,rllib:ck)"
    )
    assert capsys.readouterr().out.splitlines() == [
        format_run(_result(True, {})),
        saved,
        "logs:  tensorboard --logdir L  (run r1)",
    ]
