"""What ``ainet-gym train`` takes and prints, the same for both frameworks: the shared arguments
(:func:`train_arguments`) and the lines when a run ends (:func:`format_run`, :func:`report_run`)."""

from __future__ import annotations

from pathlib import Path
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


# ------------------------------ train --resume / --init-from of a model of another fabric (issue-26zj2)


def _two_fabrics(folder: Path) -> tuple[Path, Path, str, str]:
    """The collision scenario (2 leaves x 2 spines, 4 GPUs) as a YAML file with its 400G uplinks and a copy with
    them at 200G: the same name, nodes and spaces, another fabric; both files and their fingerprints."""
    import yaml
    from _scenarios import collision_scenario

    from ainet_gym.fabric.topology import build_fabric, fabric_fingerprint
    from ainet_gym.scenario.loader import load_scenario

    paths, fps = [], []
    for gbps in (400, 200):
        sc = collision_scenario()
        sc["fabric"]["uplink_gbps"] = gbps
        path = folder / f"up{gbps}" / "s.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(yaml.safe_dump(sc))
        loaded = load_scenario(str(path))
        paths.append(path)
        fps.append(fabric_fingerprint(build_fabric(loaded.fabric, max_paths=loaded.routing.max_paths)))
    assert fps[0] != fps[1]
    return paths[0], paths[1], fps[0], fps[1]


def test_train_on_from_a_model_of_another_fabric_is_refused_before_any_step_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_line
) -> None:
    """``train --resume|--init-from MODEL`` on a scenario whose fabric is not the one the model records is one
    line (exit 2) naming the flag, the file, both fingerprints and what is allowed, and neither learns nor
    writes; ``--allow-other-fabric`` trains it on and the new model records both fabrics; a model without a
    fingerprint (saved before issue-26zh2) and one of the same fabric are taken unchecked. Fails on the old code:
    the refused runs exited 0 and the new model recorded only the scenario's fabric."""
    from _scenarios import zip_without_fabric

    import ainet_gym.agents.train as train_mod
    from ainet_gym.agents.sb3_agents import read_metadata
    from ainet_gym.cli import main as cli_main

    four, two, fp4, fp2 = _two_fabrics(tmp_path)
    learned: list[int] = []
    real_learn = train_mod._learn
    monkeypatch.setattr(train_mod, "_learn", lambda m, c, cb: learned.append(1) or real_learn(m, c, cb))

    def run(scenario: Path, out: str, *flags: str) -> int:
        argv = ["train", str(scenario), "--timesteps", "8", "--n-envs", "2", "--no-progress",
                "--logdir", str(tmp_path / f"logs-{out}"), "--out", str(tmp_path / f"{out}.zip"), *flags]  # fmt: skip
        return cli_main(argv)

    assert run(four, "a") == 0
    model = tmp_path / "a.zip"
    assert read_metadata(model)["fabric"] == fp4 and len(learned) == 1
    for flag in ("--resume", "--init-from"):
        out, steps_before = "refused" + flag.replace("-", ""), len(learned)
        assert run(two, out, flag, str(model)) == 2, flag
        one_line(f"{flag} '{model}'", f"'fabric' = '{fp4}'", f"the scenario trained on has fabric '{fp2}'",
                 "allowed: a model trained on this fabric", "--allow-other-fabric")  # fmt: skip
        assert len(learned) == steps_before and not (tmp_path / f"{out}.zip").exists()
        assert not any((tmp_path / f"logs-{out}").glob("*")), "a run folder was made"
        ok = "allowed" + flag.replace("-", "")
        assert run(two, ok, flag, str(model), "--allow-other-fabric") == 0, flag
        meta = read_metadata(tmp_path / f"{ok}.zip")
        assert (meta["fabric"], meta["source_fabric"]) == (fp2, fp4), flag
    assert len(learned) == 3
    assert run(four, "same", "--resume", str(model)) == 0  # the model's own fabric: no source_fabric
    meta = read_metadata(tmp_path / "same.zip")
    assert meta["fabric"] == fp4 and "source_fabric" not in meta
    old = tmp_path / "old.zip"  # a model of before issue-26zh2: no key 'fabric', taken on any fabric
    zip_without_fabric(model, old)
    assert run(two, "old-on", "--resume", str(old)) == 0
    meta = read_metadata(tmp_path / "old-on.zip")
    assert meta["fabric"] == fp2 and "source_fabric" not in meta
    assert run(two, "bare", "--allow-other-fabric") == 2  # the flag says something only with a source model
    one_line("allow_other_fabric = True without a source model", "allowed: with resume or init_from")
    # --framework rllib reads the flag too (issue-26zk2: tests/agents/test_rllib_loop.py), for its --resume only
    rl = ["train", str(two), "--framework", "rllib", "--allow-other-fabric"]
    assert cli_main([*rl, "--out", str(tmp_path / "rl")]) == 2
    one_line("allow_other_fabric = True without a source model", "allowed: with resume")
