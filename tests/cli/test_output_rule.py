"""One output rule for every command that writes (ainet_gym/agents/outputs.py): existing files and result folders
are replaced only with --overwrite, the command's own input never; default folders are fresh per run.
And every accepted input does what it says: an empty list or a negative budget is refused, one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ainet_gym.cli import main
from ainet_gym.scenario.loader import scenarios_dir

SCENARIO = "periodic-interference"


def _run(args: list[str]) -> int:
    """``main(args)``'s exit status, argparse's refusals (SystemExit) included."""
    try:
        return main(args)
    except SystemExit as e:
        return int(e.code)


# ---------------------------------------------------------------------- export-fabric


def test_export_fabric_never_writes_over_its_input_scenario(tmp_path, one_line) -> None:
    """Fails on the old code: --graphml wrote over the scenario file it had read."""
    sc = tmp_path / "mine.yaml"
    shutil.copy(scenarios_dir() / f"{SCENARIO}.yaml", sc)
    before = sc.read_bytes()
    for extra in ([], ["--overwrite"]):
        assert main(["export-fabric", str(sc), "--graphml", str(sc), *extra]) == 2
        one_line("--graphml", "input", "never overwritten")
    assert sc.read_bytes() == before


def test_export_fabric_replaces_a_file_only_with_overwrite(tmp_path, one_line) -> None:
    """Fails on the old code: an existing file was replaced without a word."""
    out = tmp_path / "f.graphml"
    out.write_text("mine")
    assert main(["export-fabric", SCENARIO, "--graphml", str(out)]) == 2
    one_line("--graphml", "--overwrite")
    assert out.read_text() == "mine"
    assert main(["export-fabric", SCENARIO, "--graphml", str(out), "--overwrite"]) == 0
    assert out.read_text().startswith("<?xml")


def test_export_fabric_never_writes_over_the_graph_it_read(one_line, tmp_path, capsys) -> None:
    g = tmp_path / "g.graphml"
    assert main(["export-fabric", SCENARIO, "--graphml", str(g)]) == 0
    sc = tmp_path / "g.yaml"
    sc.write_text(
        "name: g\nfabric: {topology: graph, file: g.graphml}\n"
        "workload: {jobs: [{name: a, gpus: 8, compute_ms: 10, collectives: [{op: allreduce, bytes: 1.0e8}]}]}\n"
    )
    capsys.readouterr()
    before = g.read_bytes()
    assert main(["export-fabric", str(sc), "--graphml", str(g), "--overwrite"]) == 2
    one_line("never overwritten")
    assert g.read_bytes() == before


# ---------------------------------------------------------------------- bench, leaderboard, sweep


def test_bench_refuses_earlier_results_and_makes_fresh_folders(tmp_path, monkeypatch, one_line) -> None:
    """Fails on the old code: --out replaced bench.json; --sections ',' measured nothing and exited 0."""
    import ainet_gym.bench as bench

    d = tmp_path / "b"
    d.mkdir()
    (d / "bench.json").write_text("{}")
    assert main(["bench", "--quick", "--out", str(d), "--sections", "allocator"]) == 2
    one_line("--out", "bench.json", "--overwrite")
    assert (d / "bench.json").read_text() == "{}"
    assert main(["bench", "--quick", "--sections", ","]) == 2
    one_line("--sections", "empty")

    seen: list[Path] = []

    def fake_run(cfg, out=None, progress=True, command=None):
        seen.append(Path(out))
        Path(out).mkdir(parents=True)
        (Path(out) / "bench.json").write_text("{}")
        return {"meta": {}}

    monkeypatch.setattr(bench, "run_bench", fake_run)
    monkeypatch.setattr(bench, "format_report", lambda r: "")
    monkeypatch.setattr(bench, "DEFAULT_OUT", str(tmp_path / "bench-results"))
    assert main(["bench", "--quick"]) == 0
    assert main(["bench", "--quick"]) == 0  # a second plain run never fails
    assert len(seen) == 2 and seen[0] != seen[1] and seen[0].parent == seen[1].parent


def test_bench_config_budgets_are_checked() -> None:
    from dataclasses import replace

    from ainet_gym.bench import BenchConfig, check_bench_config

    for field, value in (("min_time_s", -1.0), ("slowest_budget_s", float("nan")), ("max_repeats", 0)):
        with pytest.raises(ValueError, match=field):
            check_bench_config(replace(BenchConfig.quick_preset(), **{field: value}))
    with pytest.raises(ValueError, match="sections: empty"):
        check_bench_config(replace(BenchConfig.quick_preset(), sections=()))


def test_leaderboard_refuses_earlier_results_and_nothing_to_evaluate(tmp_path, one_line) -> None:
    """Fails on the old code: nothing to evaluate ended in ZeroDivisionError (a traceback)."""
    assert (
        main(["leaderboard", "--env-ids", "none", "--scenarios", "none", "--out", str(tmp_path / "l")]) == 2
    )
    one_line("nothing to evaluate")
    (tmp_path / "l").mkdir()
    (tmp_path / "l" / "leaderboard.md").write_text("mine")
    assert main(["leaderboard", "--quick", "--env-ids", "none", "--out", str(tmp_path / "l")]) == 2
    one_line("leaderboard.md", "--overwrite")
    assert (tmp_path / "l" / "leaderboard.md").read_text() == "mine"


def test_sweep_checks_its_arguments_before_ray(tmp_path, one_line) -> None:
    """Fails on the old code: --num-env-runners -1 started Ray and failed with Ray's message; --out
    replaced an earlier sweep's table."""
    assert _run(["sweep", "--num-env-runners", "-1"]) == 2
    one_line("--num-env-runners", "out of range")
    d = tmp_path / "s"
    d.mkdir()
    (d / "results.md").write_text("mine")
    assert main(["sweep", "--scenarios", SCENARIO, "--out", str(d)]) == 2
    one_line("results.md", "--overwrite")


def test_sweep_gives_trials_absolute_scenario_paths(tmp_path, monkeypatch) -> None:
    """Fails on the old code: a relative path passed the driver and failed in every trial (Tune's
    trials run in another working directory)."""
    from ainet_gym.agents.rllib_sweep import trial_scenarios

    shutil.copy(scenarios_dir() / f"{SCENARIO}.yaml", tmp_path / "mine.yaml")
    monkeypatch.chdir(tmp_path)
    where = trial_scenarios(["mine.yaml", SCENARIO])
    assert where["mine.yaml"] == str((tmp_path / "mine.yaml").resolve())
    assert where[SCENARIO] == SCENARIO


# ---------------------------------------------------------------------- accepted input does what it says


@pytest.mark.parametrize(
    ("args", "must"),
    [
        (["soak", SCENARIO, "--modes", ",", "--steps", "1"], "--modes"),
        (["soak", SCENARIO, "--max-seconds", "-1", "--steps", "1"], "--max-seconds"),
        (
            ["soak", SCENARIO, "--modes", "warp", "--steps", "1"],
            "--modes = ['warp']: unknown 'warp'; allowed: path",
        ),
        (["simulate", SCENARIO, "--link-windows", "1000000"], "--link-windows"),
        (["evaluate", SCENARIO, "--seeds", "9" * 5000], "--seeds"),
        (["simulate", SCENARIO, "--seed", "9" * 5000], "(5,000 characters) is out of range"),
        # fails on the old code: ',' was read as 'none' and the leaderboard ran on the default scenarios
        (["leaderboard", "--quick", "--env-ids", ",", "--out", "x"], "--env-ids ',': empty"),
        (["leaderboard", "--quick", "--scenarios", " , ", "--out", "x"], "--scenarios ' , ': empty"),
    ],
)
def test_empty_or_negative_inputs_are_refused(args, must, one_line) -> None:
    """Fails on the old code for soak: an empty mode list or a negative budget printed success, exit 0."""
    assert _run(args) == 2
    assert len(one_line(must)) < 400  # a 5,000-digit value is not echoed


def test_a_path_action_of_1e20_is_reported_as_given() -> None:
    """Fails on the old code: 1e20 was converted to int64 first and reported as -9223372036854775808."""
    from ainet_gym.envs.env import FabricRoutingEnv

    env = FabricRoutingEnv(scenario=SCENARIO, action_mode="path")
    env.reset(seed=1)
    a = np.zeros(env.action_space.shape)
    a[3] = 1e20
    with pytest.raises(ValueError, match=r"action\[3\] = 1e\+20: out of MultiDiscrete"):
        env.step(a)


def test_outputs_helpers_refuse_inputs_even_with_overwrite(tmp_path) -> None:
    from ainet_gym.agents.outputs import check_out_file, check_out_files

    f = tmp_path / "in.yaml"
    f.write_text("x")
    with pytest.raises(ValueError, match="never overwritten"):
        check_out_file(f, True, [f])
    with pytest.raises(ValueError, match="holds this command's input"):
        check_out_files(tmp_path, True, ["a"], [f])
    assert check_out_files(tmp_path / "new", False, ["a"]) == tmp_path / "new"


# ------------------------------------------------ the scenario is an input too (evaluate, demo, train)


@pytest.mark.parametrize("command", ["evaluate", "demo"])
def test_results_never_replace_the_input_scenario_even_with_overwrite(tmp_path, one_line, command) -> None:
    """Fails on the old code: with --overwrite, ``evaluate ev/results.md --out ev`` wrote its table over the
    scenario it had just read (the scenario was not among the inputs the output rule protects)."""
    out = tmp_path / "ev"
    out.mkdir()
    scenario = out / "results.md"
    shutil.copy(scenarios_dir() / f"{SCENARIO}.yaml", scenario)
    before = scenario.read_bytes()
    if command == "evaluate":
        args = ["evaluate", str(scenario), "--policies", "ecmp", "--seeds", "1", "--steps", "1"]
    else:
        args = ["demo", "--scenario", str(scenario), "--quick", "--timesteps", "8"]
    assert _run([*args, "--out", str(out), "--overwrite"]) == 2
    one_line("results.md", "this command's input", "even with --overwrite")
    assert scenario.read_bytes() == before


def test_train_never_writes_its_model_over_the_input_scenario(tmp_path, one_line) -> None:
    """Fails on the old code: a scenario file named model.zip in --out was replaced by the model."""
    scenario = tmp_path / "model.zip"
    shutil.copy(scenarios_dir() / f"{SCENARIO}.yaml", scenario)
    before = scenario.read_bytes()
    args = [
        "train",
        str(scenario),
        "--timesteps",
        "8",
        "--out",
        str(tmp_path),
        "--overwrite",
        "--no-progress",
    ]
    assert _run(args) == 2
    one_line("model.zip", "this command's input", "even with --overwrite")
    assert scenario.read_bytes() == before


def test_rllib_overwrite_never_removes_a_folder_holding_the_input_scenario(tmp_path) -> None:
    """Fails on the old code: ``train --framework rllib --out CKPT --overwrite`` removed the whole checkpoint
    folder, a scenario file kept in it included (checked before Ray is imported)."""
    from ainet_gym.agents.rllib_train import RLlibTrainConfig, _check

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "rllib_checkpoint.json").write_text("{}")
    scenario = ckpt / "mine.yaml"
    shutil.copy(scenarios_dir() / f"{SCENARIO}.yaml", scenario)
    with pytest.raises(ValueError, match=r"holds this command's input .*mine\.yaml"):
        _check(RLlibTrainConfig(scenario=str(scenario), out=str(ckpt), overwrite=True))
    # an RLlib checkpoint folder without inputs in it may still be replaced with --overwrite
    scenario.unlink()
    _check(RLlibTrainConfig(scenario=SCENARIO, out=str(ckpt), overwrite=True))


def test_soak_runs_every_action_mode_by_default(monkeypatch, capsys) -> None:
    """``soak`` says it runs every action mode (fails on the old code: its default was split, path and
    ecmp_weights, so the choose, choose_bg and split_bg modes were never soaked unless named)."""
    import ainet_gym.checks.soak as soak_mod
    from ainet_gym.checks.soak import SoakResult
    from ainet_gym.envs.env import ACTION_MODES

    ran: list[str] = []

    def fake(scenario, mode, steps, **kw):
        ran.append(mode)
        return SoakResult(scenario, mode, steps, 0, 0, 0, 0.0)

    monkeypatch.setattr(soak_mod, "soak", fake)
    assert main(["soak", SCENARIO, "--steps", "1"]) == 0
    assert ran == list(ACTION_MODES)


def test_leaderboard_and_sweep_never_write_where_their_input_scenario_is(tmp_path, one_line) -> None:
    """Fails on the old code: ``leaderboard --scenarios lb/leaderboard.md --out lb --overwrite`` wrote its table
    over the scenario it evaluated (the output rule had no inputs for leaderboard and sweep); the sweep is
    refused at the driver, before Ray."""
    out = tmp_path / "lb"
    out.mkdir()
    scenario = out / "leaderboard.md"
    shutil.copy(scenarios_dir() / f"{SCENARIO}.yaml", scenario)
    before = scenario.read_bytes()
    args = ["leaderboard", "--quick", "--env-ids", "none", "--scenarios", str(scenario), "--out", str(out)]
    assert _run([*args, "--overwrite"]) == 2
    one_line("its leaderboard.md would replace this command's input", "even with --overwrite")
    assert scenario.read_bytes() == before
    (out / "results.md").write_bytes(before)  # the sweep's table, or inside its checkpoints/ folder
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / "mine.yaml").write_bytes(before)
    for sc in (out / "results.md", out / "checkpoints" / "mine.yaml"):
        sweep = ["sweep", "--scenarios", str(sc), "--out", str(out), "--overwrite", "--timesteps", "8"]
        assert _run(sweep) == 2
        one_line("would replace this command's input", str(sc))
        assert sc.read_bytes() == before


def test_a_scenario_beside_the_leaderboard_is_not_its_output(tmp_path) -> None:
    """A scenario in the --out folder that no written file replaces is fine (results beside it)."""
    from ainet_gym.agents.outputs import check_out_files

    mine = tmp_path / "mine.yaml"
    mine.write_text("x")
    assert check_out_files(tmp_path, False, ["leaderboard.md"], read=[mine]) == tmp_path


def test_a_scenario_beside_the_results_is_not_earlier_output(tmp_path, capsys) -> None:
    """The scenario is protected only where a result file would replace it: ``evaluate mine.yaml --out .``
    (results written beside the scenario) still runs without --overwrite, as before."""
    shutil.copy(scenarios_dir() / f"{SCENARIO}.yaml", tmp_path / "mine.yaml")
    args = ["evaluate", str(tmp_path / "mine.yaml"), "--policies", "ecmp", "--seeds", "1", "--steps", "1"]
    assert _run([*args, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "results.md").exists() and (tmp_path / "mine.yaml").exists()


# ---------------------------------------------------------------------- the modules' own command lines

MODULE_COMMANDS = [
    ("ainet_gym.agents.predictive", [SCENARIO], "--out"),
    ("ainet_gym.agents.twin", ["sweep", SCENARIO], "--json"),
    ("ainet_gym.agents.graph_policy", ["train", SCENARIO], "--out"),
    ("ainet_gym.checks.reroute", ["--scenarios", SCENARIO], "--out"),
    ("ainet_gym.checks.crosscheck.report", [], "--out"),
]


@pytest.mark.parametrize(("module", "args", "flag"), MODULE_COMMANDS, ids=[m for m, _, _ in MODULE_COMMANDS])
def test_module_commands_never_replace_a_file_unasked(module, args, flag, tmp_path, one_line) -> None:
    """The research commands run as ``python -m`` follow the same rule: an existing output file is refused in
    one line naming the flag, before any work, and is left as it was (they wrote over it silently before)."""
    import importlib

    main_of = importlib.import_module(module).main
    old = tmp_path / "old.json"
    old.write_text("keep me")
    assert main_of([*args, flag, str(old)]) == 2
    one_line(flag, "exists", "--overwrite")
    assert old.read_text() == "keep me"
