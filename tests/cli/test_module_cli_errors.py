"""The ``python -m ainet_gym.agents.* / ainet_gym.checks.*`` command lines on bad input (issues 31q, 31r):
exit status 2 and one line naming the field, the value and what is allowed, never a traceback nor argparse's
usage block."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ainet_gym.agents import graph_policy, imitate, predictive, pretrained, train, twin
from ainet_gym.bench import vs_simgrid
from ainet_gym.checks import cluster, parity, rate_groups, reroute
from ainet_gym.checks.crosscheck import report as crosscheck


def _run(capsys, main: Callable[..., int], argv: list[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse errors
        code = int(e.code)
    return code, capsys.readouterr().err.strip()


def one_line(capsys, main: Callable[..., int], argv: list[str]) -> str:
    code, err = _run(capsys, main, argv)
    assert code == 2, (code, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err  # argparse's own parser printed its usage block first (issue 31r)
    return lines[0]


#: each module command line: (its prog, its main, the arguments of a command it would run)
MODULES = [
    ("python -m ainet_gym.agents.imitate", imitate.main, ["knn", "l.npz", "--out", "k.npz"]),
    ("python -m ainet_gym.agents.pretrained", pretrained.main, ["list"]),
    ("python -m ainet_gym.agents.predictive", predictive.main, ["nosuch"]),
    ("python -m ainet_gym.agents.twin", twin.main, ["sweep", "nosuch"]),
    ("python -m ainet_gym.agents.graph_policy", graph_policy.main, ["train", "nosuch", "--out", "g.pt"]),
    ("python -m ainet_gym.agents.train", train.main, ["select", "folder", "nosuch"]),
    ("python -m ainet_gym.checks.parity", parity.parity_main, ["nosuch"]),
    ("python -m ainet_gym.checks.reroute", reroute.main, ["--scenarios", "nosuch"]),
    ("python -m ainet_gym.checks.rate_groups", rate_groups.rate_groups_main, []),
    ("python -m ainet_gym.checks.crosscheck", crosscheck.main, []),
]


@pytest.mark.parametrize(("prog", "main", "argv"), MODULES, ids=[m[0].split(".")[-1] for m in MODULES])
def test_an_unknown_flag_is_one_line(capsys, prog: str, main: Callable[..., int], argv: list[str]) -> None:
    line = one_line(capsys, main, [*argv, "--no-such-flag"])
    assert line == f"{prog}: error: unrecognized arguments: --no-such-flag (see {prog} --help)"


@pytest.mark.parametrize(
    ("main", "argv", "expected"),
    [
        (
            imitate.main,
            ["knn", "l.npz", "--out", "k.npz", "--k", "x"],
            "argument --k: 'x' is not an integer",
        ),
        (twin.main, ["sweep"], "the following arguments are required: scenario"),
        (
            graph_policy.main,
            ["train", "x", "--out", "g.pt", "--seed", "1.5"],
            "argument --seed: '1.5' is not an",
        ),
        (predictive.main, ["x", "--history", ""], "argument --history: '' is not an integer"),
        (pretrained.main, ["nosuch"], "argument cmd: invalid choice: 'nosuch' (choose from"),
        (crosscheck.main, ["--mss", "x"], "argument --mss: 'x' is not an integer"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag(
    capsys, main: Callable[..., int], argv: list[str], expected: str
) -> None:
    assert expected in one_line(capsys, main, argv)


@pytest.mark.parametrize(
    ("main", "argv"),
    [
        (imitate.main, []),
        (imitate.main, ["knn"]),  # a subcommand's help
        (pretrained.main, ["export"]),
        (predictive.main, []),
        (twin.main, ["sweep"]),
        (graph_policy.main, ["train"]),
        (train.main, ["select"]),
        (parity.parity_main, []),
        (reroute.main, []),
        (rate_groups.rate_groups_main, []),
        (crosscheck.main, []),
    ],
)
def test_help_is_still_the_full_help(capsys, main: Callable[..., int], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith("usage: ")
    assert "options:" in out and "-h, --help" in out and len(out.splitlines()) >= 4, out


def test_select_on_a_folder_without_models_is_one_line(capsys, tmp_path: Path) -> None:
    # it printed FileNotFoundError's traceback (found while splitting agents/train.py, issue-31zx)
    for folder in (tmp_path / "missing", tmp_path):
        line = one_line(capsys, train.main, ["select", str(folder), "spine-leaf-2to1", "--seeds", "100"])
        assert line == f"python -m ainet_gym.agents.train select: error: no model (*.zip) in {str(folder)!r}"


def test_empty_seed_part_is_one_line(capsys) -> None:
    # "1,,2" ran seeds 1 and 2 (the empty part skipped)
    line = one_line(capsys, twin.main, ["sweep", "nosuch", "--seeds", "1,,2"])
    assert "seeds '1,,2': an empty part between commas; allowed: integers >= 0" in line


@pytest.fixture
def bad_labels(tmp_path: Path) -> dict[str, str]:
    """Label files a user may pass by mistake: missing, truncated, an archive of other arrays, a text file."""
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    full = tmp_path / "full.npz"
    np.savez(full, obs=np.zeros((2, 3)), label=np.zeros(2, dtype=np.int64))
    (tmp_path / "trunc.npz").write_bytes(full.read_bytes()[:60])
    (tmp_path / "notes.txt").write_text("hello")
    return {
        "missing": str(tmp_path / "missing.npz"),
        "trunc": str(tmp_path / "trunc.npz"),
        "other": str(tmp_path / "other.npz"),
        "text": str(tmp_path / "notes.txt"),
    }


@pytest.mark.parametrize("cmd", ["clone", "knn", "qfit"])
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "not found"),
        ("trunc", "not a readable label file"),
        ("other", "no field obs, label, plans, meta"),
        ("text", "not a readable label file"),
    ],
)
def test_imitate_bad_label_files_name_the_file(
    capsys, tmp_path: Path, bad_labels: dict[str, str], cmd: str, case: str, expected: str
) -> None:
    # a truncated archive (BadZipFile) and an archive without the label fields (KeyError 'plans') were
    # tracebacks; a missing file printed only "[Errno 2] ..."
    line = one_line(capsys, imitate.main, [cmd, bad_labels[case], "--out", str(tmp_path / "out")])
    assert line.startswith(f"python -m ainet_gym.agents.imitate {cmd}: error: labels {bad_labels[case]!r}: ")
    assert expected in line and "allowed: an .npz of labels" in line


@pytest.mark.parametrize("value", ["0", "-1"])
def test_imitate_label_batch_must_be_positive(capsys, tmp_path: Path, value: str) -> None:
    # --batch 0 failed inside range() ("arg 3 must not be zero"), --batch -1 with "need at least one array"
    line = one_line(
        capsys,
        imitate.main,
        ["label", "nosuch", "--seeds", "1", "--batch", value, "--out", str(tmp_path / "l")],
    )
    assert f"argument --batch: {value} is out of range; allowed: an integer >= 1" in line


def test_pretrained_export_of_a_missing_model(capsys, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.zip")
    argv = ["export", missing, "--scenario", "x", "--command", "y", "--out", str(tmp_path / "p.zip")]
    line = one_line(capsys, pretrained.main, argv)
    assert line == f"python -m ainet_gym.agents.pretrained export: error: model {missing!r} not found"


def test_pretrained_export_of_a_zip_that_is_not_a_model(capsys, tmp_path: Path) -> None:
    p = tmp_path / "notes.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("readme.txt", "hello")
    argv = ["export", str(p), "--scenario", "x", "--command", "y", "--out", str(tmp_path / "p.zip")]
    line = one_line(capsys, pretrained.main, argv)
    assert line.startswith(f"python -m ainet_gym.agents.pretrained export: error: model {str(p)!r}: ")


def test_predictive_unknown_scenario(capsys) -> None:
    line = one_line(capsys, predictive.main, ["nosuch"])
    assert line.startswith("python -m ainet_gym.agents.predictive: error: nosuch: no such scenario")


@pytest.mark.parametrize(("flag", "value"), [("--k", "x"), ("--h", "0"), ("--k", "")])
def test_twin_sweep_int_lists_name_the_flag(capsys, flag: str, value: str) -> None:
    # --k x was "invalid literal for int() with base 10: 'x'" in a traceback
    line = one_line(capsys, twin.main, ["sweep", "nosuch", flag, value, "--seeds", "1"])
    assert f"error: {flag} {value!r}: allowed: a comma list of integers >= 1" in line


def test_twin_sweep_bad_seed_range(capsys) -> None:
    line = one_line(capsys, twin.main, ["sweep", "nosuch", "--seeds", "5-1"])
    assert "seeds '5-1': the range '5-1' is empty (LO > HI)" in line


@pytest.mark.parametrize(("flag", "value"), [("--seeds", "0"), ("--seeds", "-1"), ("--intervals", "0")])
def test_parity_counts_must_be_positive(capsys, flag: str, value: str) -> None:
    # these ran no comparison at all and printed "all equal", exit 0
    line = one_line(capsys, parity.parity_main, ["nosuch", flag, value])
    assert f"argument {flag}: {value} is out of range; allowed: an integer >= 1" in line


def test_parity_unknown_scenario(capsys) -> None:
    line = one_line(capsys, parity.parity_main, ["nosuch", "--seeds", "1", "--intervals", "1"])
    assert line.startswith("python -m ainet_gym.checks.parity: error: nosuch: no such scenario")


@pytest.mark.parametrize(
    ("seeds", "expected"),
    [("5-1", "the range '5-1' is empty (LO > HI)"), ("a-b", "'a-b' is not a seed or a range of seeds")],
)
def test_reroute_seeds_name_the_flag_value(capsys, seeds: str, expected: str) -> None:
    # 5-1 was "seeds []: no seed given" in a traceback, a-b "invalid literal for int()"
    line = one_line(capsys, reroute.main, ["--scenarios", "nosuch", "--seeds", seeds])
    assert line.startswith("python -m ainet_gym.checks.reroute: error: ") and expected in line


def test_reroute_unknown_scenario(capsys) -> None:
    line = one_line(capsys, reroute.main, ["--scenarios", "nosuch", "--seeds", "1"])
    assert "error: nosuch: no such scenario" in line


@pytest.mark.parametrize("flag", ["--jobs", "--job-gpus", "--events", "--interval"])
def test_rate_groups_counts_must_be_positive(capsys, flag: str) -> None:
    line = one_line(capsys, rate_groups.rate_groups_main, [flag, "-1"])
    assert f"argument {flag}: -1 is out of range; allowed: an integer >= 1" in line


def test_rate_groups_bad_gpus_is_one_line(capsys) -> None:
    line = one_line(capsys, rate_groups.rate_groups_main, ["--gpus", "0"])
    assert line.startswith(
        "python -m ainet_gym.checks.rate_groups: error: argument --gpus: 0 is out of range"
    )


def test_debug_variable_shows_the_traceback(monkeypatch) -> None:
    monkeypatch.setenv("AINET_GYM_DEBUG", "1")
    with pytest.raises(ValueError, match="no such scenario"):
        predictive.main(["nosuch"])


_LABEL = ["label", "nosuch", "--seeds", "1", "--out", "l.npz"]
_CLONE, _KNN, _QFIT = (
    ["clone", "l.npz", "--out", "m.zip"],
    ["knn", "l.npz", "--out", "k.npz"],
    ["qfit", "l.npz", "--out", "q.npz"],
)
_EXPORT = ["export", "m.zip", "--scenario", "x", "--command", "c"]
_GRAPH = ["train", "nosuch", "--out", "g.pt"]
#: (prog, main, the arguments before the flag, flag, a bad value, what the message allows): every int and
#: float flag of the module command lines that took any value before issue 31s (a count of 0, a negative
#: seed or learning rate, nan ran or failed deep inside)
BAD_NUMBERS = [
    ("agents.imitate label", imitate.main, _LABEL, "--h", "0", "an integer >= 1"),
    (
        "agents.imitate label",
        imitate.main,
        _LABEL,
        "--tail-slack",
        "-0.5",
        "a relative slack, a finite number >= 0",
    ),
    ("agents.imitate label", imitate.main, _LABEL, "--tail-weight", "nan", "a number (inf allowed) >= 0"),
    ("agents.imitate label", imitate.main, _LABEL, "--tail-weight", "-1", "a number (inf allowed) >= 0"),
    ("agents.imitate label", imitate.main, _LABEL, "--redraw-future", "-1", "an integer in [0, 1000]"),
    ("agents.imitate label", imitate.main, _LABEL, "--redraw-seed", "-1", "an integer in [0, 4294967295]"),
    ("agents.imitate label", imitate.main, _LABEL, "--redraw-window", "-1", "an integer in [0, 1000]"),
    ("agents.imitate clone", imitate.main, _CLONE, "--epochs", "0", "an integer >= 1"),
    ("agents.imitate clone", imitate.main, _CLONE, "--gamma", "0", "a discount factor, a number in (0, 1]"),
    ("agents.imitate clone", imitate.main, _CLONE, "--gamma", "1.5", "a number in (0, 1]"),
    ("agents.imitate clone", imitate.main, _CLONE, "--seed", "-1", "an integer in [0, 2147483647]"),
    ("agents.imitate clone", imitate.main, _CLONE, "--lr", "0", "a learning rate, a finite number > 0"),
    ("agents.imitate knn", imitate.main, _KNN, "--k", "0", "an integer >= 1"),
    ("agents.imitate knn", imitate.main, _KNN, "--value-weight", "inf", "a finite number >= 0"),
    ("agents.imitate knn", imitate.main, _KNN, "--margin", "-1", "a finite number >= 0"),
    ("agents.imitate qfit", imitate.main, _QFIT, "--epochs", "0", "an integer >= 1"),
    ("agents.imitate qfit", imitate.main, _QFIT, "--batch-size", "0", "an integer >= 1"),
    ("agents.imitate qfit", imitate.main, _QFIT, "--lr", "-0.001", "a finite number > 0"),
    ("agents.imitate qfit", imitate.main, _QFIT, "--seed", "-1", "an integer in [0, 2147483647]"),
    ("agents.imitate qfit", imitate.main, _QFIT, "--value-weight", "-1", "a finite number >= 0"),
    ("agents.pretrained export", pretrained.main, _EXPORT, "--training-seed", "-1", "an integer in [0, "),
    ("agents.graph_policy train", graph_policy.main, _GRAPH, "--timesteps", "0", "an integer >= 1"),
    ("agents.graph_policy train", graph_policy.main, _GRAPH, "--n-envs", "0", "an integer in [1, 100000]"),
    ("agents.graph_policy train", graph_policy.main, _GRAPH, "--seed", "-1", "an integer in [0, "),
    ("agents.graph_policy train", graph_policy.main, _GRAPH, "--hidden", "0", "an integer >= 1"),
    ("agents.graph_policy train", graph_policy.main, _GRAPH, "--rounds", "-1", "an integer >= 0"),
    ("agents.graph_policy train", graph_policy.main, _GRAPH, "--history", "0", "an integer >= 1"),
    ("agents.graph_policy train", graph_policy.main, _GRAPH, "--episode-steps", "0", "an integer >= 1"),
    ("agents.predictive", predictive.main, ["nosuch"], "--train-seeds", "0", "an integer >= 1"),
    ("agents.predictive", predictive.main, ["nosuch"], "--history", "-1", "an integer >= 1"),
    ("agents.twin sweep", twin.main, ["sweep", "nosuch"], "--steps", "0", "an integer >= 1"),
    ("checks.cluster", cluster.main, ["--scenario", "nosuch"], "--episode-steps", "0", "an integer >= 1"),
    (
        "checks.cluster",
        cluster.main,
        ["--scenario", "nosuch"],
        "--envs-per-runner",
        "0",
        "an integer in [1, ",
    ),
    ("checks.reroute", reroute.main, ["--scenarios", "nosuch"], "--steps", "0", "an integer >= 1"),
    ("checks.rate_groups", rate_groups.rate_groups_main, [], "--gpus", "-8", "an integer >= 1"),
    ("checks.parity", parity.parity_main, ["nosuch"], "--incremental-min-flows", "-2", "an integer >= -1"),
    ("checks.crosscheck", crosscheck.main, [], "--seed", "-1", "an integer in [0, "),
    ("checks.crosscheck", crosscheck.main, [], "--steps", "0", "an integer in [1, 10000000]"),
    ("checks.crosscheck", crosscheck.main, [], "--reorder-threshold", "0", "an integer >= 1"),
    ("checks.crosscheck", crosscheck.main, [], "--mss", "0", "an integer >= 1"),
    ("checks.crosscheck", crosscheck.main, [], "--del-ack-count", "0", "an integer >= 1"),
    ("checks.crosscheck", crosscheck.main, [], "--max-gpus", "0", "an integer >= 1"),
    ("checks.crosscheck", crosscheck.main, [], "--split-qps", "0", "an integer >= 1"),
    ("checks.crosscheck", crosscheck.main, [], "--fq-flows", "-1", "an integer >= 1"),
    ("checks.crosscheck", crosscheck.main, [], "--wall-limit-s", "0", "a finite number > 0"),
    ("bench.vs_simgrid", vs_simgrid.main, [], "--gpus", "0", "an integer >= 1"),
    (
        "bench.vs_simgrid",
        vs_simgrid.main,
        [],
        "--bytes",
        "-1e9",
        "a buffer size in bytes, a finite number > 0",
    ),
    ("bench.vs_simgrid", vs_simgrid.main, [], "--repeats", "0", "an integer >= 1"),
]


@pytest.mark.parametrize(
    ("prog", "main", "before", "flag", "value", "allowed"),
    BAD_NUMBERS,
    ids=[f"{b[0].split('.')[-1]}{b[3]}={b[4]}" for b in BAD_NUMBERS],
)
def test_a_number_out_of_range_is_one_line_naming_the_flag(
    capsys, prog: str, main: Callable[..., int], before: list[str], flag: str, value: str, allowed: str
) -> None:
    line = one_line(capsys, main, [*before, f"{flag}={value}"])
    assert line.startswith(
        f"python -m ainet_gym.{prog}: error: argument {flag}: {value} is out of range; allowed: "
    ), line
    assert allowed in line, line


def test_the_tail_weight_may_be_infinite() -> None:
    """``--tail-weight inf`` is the documented hard constraint (the default): allowed, unlike nan."""
    from ainet_gym.agents.arg_types import float_arg

    parse = float_arg("a penalty per GPU-second", zero_ok=True, inf_ok=True)
    assert parse("inf") == float("inf") and parse("0") == 0.0
