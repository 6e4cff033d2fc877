"""The cross-check's human-readable outputs show the matched-iteration comparison beside ``rel_error``
(issue-27zzc): the text report of ``ainet-gym crosscheck``, the calibration and learning tables of
``report.py`` and their progress lines, each fed a result built by hand (no ns-3 needed). A job whose
iteration counts differ is marked ``fluid+N`` / ``ns-3+N``; ``--json`` is unchanged."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ainet_gym.checks.crosscheck import report
from ainet_gym.checks.crosscheck.compare import matched_figures
from ainet_gym.checks.crosscheck.fluid import IterationLog
from ainet_gym.checks.crosscheck.report import (
    iteration_gap,
    iterations_cell,
    markdown,
    markdown_learning,
    rankings,
    step_rankings,
    text_report,
)

# Per-iteration communication times (ms) and ends (ms) of one job in each simulator: the fluid completes
# one iteration more (3 against 2) within the span.
FLUID_COMM, FLUID_END = [10.0, 20.0, 6.0], [30.0, 70.0, 96.0]
NS3_COMM, NS3_END = [11.0, 25.0], [31.0, 76.5]
# by hand: over all iterations 36/3 = 12 ms against 36/2 = 18 ms, -33.33%; over the first two (matched)
# 30/2 = 15 ms against 18 ms, -16.67%; ns-3 ends the second 76.5 - 70 = 6.5 ms after the fluid.
ALL_FLUID, ALL_NS3 = 12.0, 18.0
MATCHED_FLUID, MATCHED_NS3 = 15.0, 18.0
MATCHED_ERROR = (15.0 - 18.0) / 18.0
LAG_MS = 6.5


def _extra_fluid_job() -> dict[str, Any]:
    """The job above as :func:`~.compare.crosscheck` reports it, every figure written out by hand."""
    return {
        "name": "llm-a",
        "fluid_comm_ms": ALL_FLUID,
        "ns3_comm_ms": ALL_NS3,
        "rel_error": (ALL_FLUID - ALL_NS3) / ALL_NS3,
        "fluid_step_ms": 40.0,
        "ns3_step_ms": 46.0,
        "step_rel_error": (40.0 - 46.0) / 46.0,
        "matched_iterations": 2,
        "fluid_iterations": 3,
        "ns3_iterations": 2,
        "matched_comm_ms": {"fluid": MATCHED_FLUID, "ns3": MATCHED_NS3},
        "matched_rel_error": MATCHED_ERROR,
        "lag_ms": LAG_MS,
        "intervals": [
            {"step": 0, "fluid_iterations": 1, "ns3_iterations": 1, "fluid_comm_ms": 10.0,
             "ns3_comm_ms": 11.0, "rel_error": -1.0 / 11.0},
            {"step": 1, "fluid_iterations": 2, "ns3_iterations": 1, "fluid_comm_ms": 13.0,
             "ns3_comm_ms": 25.0, "rel_error": (13.0 - 25.0) / 25.0},
        ],
    }  # fmt: skip


def _equal_job() -> dict[str, Any]:
    """A job both simulators complete 4 iterations of: the matched figures are those over all of them."""
    return {
        "name": "llm-b",
        "fluid_comm_ms": 20.5,
        "ns3_comm_ms": 20.0,
        "rel_error": 0.025,
        "fluid_step_ms": 50.5,
        "ns3_step_ms": 50.0,
        "step_rel_error": 0.01,
        "matched_iterations": 4,
        "fluid_iterations": 4,
        "ns3_iterations": 4,
        "matched_comm_ms": {"fluid": 20.5, "ns3": 20.0},
        "matched_rel_error": 0.025,
        "lag_ms": -1.25,
        "intervals": [
            {"step": k, "fluid_iterations": 2, "ns3_iterations": 2, "fluid_comm_ms": 20.5,
             "ns3_comm_ms": 20.0, "rel_error": 0.025} for k in range(2)
        ],
    }  # fmt: skip


def _result(*jobs: dict[str, Any]) -> dict[str, Any]:
    return {"scenario": "xc-hand", "policy": "lp", "seed": 1, "steps": 2, "jobs": list(jobs),
            "fluid_wall_s": 0.002, "ns3_wall_s": 600.0}  # fmt: skip


def _row(text: str, name: str) -> list[str]:
    """The cells of job ``name``'s row of the text report's table (its first line starting with the name)."""
    return next(x for x in text.splitlines() if x.strip().startswith(name)).split()


def test_the_hand_built_job_is_what_the_contract_computes() -> None:
    """The matched fields written by hand above are :func:`matched_figures` of the two logs: the renderer
    is fed what ``crosscheck`` would give it."""
    ms = 1e-3
    m = matched_figures(
        IterationLog(np.array(FLUID_COMM) * ms, np.array(FLUID_END) * ms, np.cumsum(FLUID_COMM) * ms),
        IterationLog(np.array(NS3_COMM) * ms, np.array(NS3_END) * ms, np.cumsum(NS3_COMM) * ms),
    )
    job = _extra_fluid_job()
    for k in ("matched_iterations", "fluid_iterations", "ns3_iterations"):
        assert m[k] == job[k]
    assert m["matched_comm_ms"] == pytest.approx(job["matched_comm_ms"])
    assert m["matched_rel_error"] == pytest.approx(job["matched_rel_error"])
    assert m["lag_ms"] == pytest.approx(job["lag_ms"])


def test_text_report_puts_the_matched_figures_beside_rel_error_and_marks_the_extra_iteration() -> None:
    """One row per job: the means over all iterations and ``rel_error``, then the counts, the matched means,
    the matched error and the lag, each formatted from the dict; the row with one extra fluid iteration is
    marked ``fluid+1`` and the legend says what that means; the equal row carries no mark."""
    text = text_report(_result(_extra_fluid_job(), _equal_job()))
    assert _row(text, "llm-a") == [
        "llm-a", "12.000", "18.000", "-33.33%", "3/2", "fluid+1", "15.000", "18.000", "-16.67%", "+6.500"
    ]  # fmt: skip
    assert f"{100 * MATCHED_ERROR:+.2f}%" == "-16.67%"  # the hand computation, not the overall -33.33%
    assert _row(text, "llm-b") == [
        "llm-b",
        "20.500",
        "20.000",
        "+2.50%",
        "4/4",
        "20.500",
        "20.000",
        "+2.50%",
        "-1.250",
    ]
    lines = text.splitlines()
    header = next(x for x in lines if x.strip().startswith("job"))
    row = next(x for x in lines if x.strip().startswith("llm-a"))
    assert row.index("3/2") == header.index("iterations")  # the counts sit under their heading
    assert "matched iterations" in lines[1] and "all iterations" in lines[1]
    legend = " ".join(x.strip() for x in lines if "fluid+N" in x or x.startswith("    "))
    assert "fluid+N / ns-3+N" in legend and "first min(fluid, ns-3)" in legend
    # the per-interval lines and the wall times stay
    assert any(x.split()[:2] == ["llm-a", "1/1"] and "2/1 13.00 25.00 -48.0%" in x for x in lines)
    assert lines[-1] == "  wall: fluid 2.00 ms, ns-3 600.00 s"


def test_text_report_marks_ns3_ahead_prints_unknowns_as_dash_and_no_legend_without_a_gap() -> None:
    """ns-3 two iterations ahead is marked ``ns-3+2``; a matched figure the fluid's log cannot tell (None)
    prints as ``-``; a report whose counts all agree has no mark and no legend."""
    job = _extra_fluid_job() | {"fluid_iterations": 2, "ns3_iterations": 4, "lag_ms": None,
                                "matched_comm_ms": {"fluid": None, "ns3": 18.0}, "matched_rel_error": None}  # fmt: skip
    text = text_report(_result(job))
    assert _row(text, "llm-a") == [
        "llm-a",
        "12.000",
        "18.000",
        "-33.33%",
        "2/4",
        "ns-3+2",
        "-",
        "18.000",
        "-",
        "-",
    ]
    assert "fluid+N / ns-3+N" in text
    plain = text_report(_result(_equal_job()))
    assert "fluid+" not in plain and "ns-3+" not in plain
    assert iteration_gap(_equal_job()) == "" and iterations_cell({"name": "old"}) == "-"


def test_cli_prints_the_text_report_and_keeps_the_json(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``ainet-gym crosscheck`` without ``--json`` prints :func:`text_report` of the result; with ``--json`` the
    result itself, every field as given (the contract's and 27zy's additive ones)."""
    import ainet_gym.checks.crosscheck as xc
    from ainet_gym.cli import main

    res = _result(_extra_fluid_job(), _equal_job())
    monkeypatch.setattr(xc, "crosscheck", lambda *a, **k: res)
    assert main(["crosscheck", "xc-switch-4"]) == 0
    assert capsys.readouterr().out == text_report(res) + "\n"
    assert main(["crosscheck", "xc-switch-4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == res
    for key in (
        "fluid_comm_ms",
        "ns3_comm_ms",
        "rel_error",
        "matched_rel_error",
        "lag_ms",
        "fluid_iterations",
    ):
        assert key in out["jobs"][0]
    assert {"fluid_wall_s", "ns3_wall_s"} <= set(out)


def _table(md: str) -> list[dict[str, str]]:
    """The first markdown table of ``md`` as one dict per row, keyed by the header's column names."""
    lines = [x for x in md.split("\n\n")[0].splitlines() if x.startswith("|")]
    cols = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for x in lines[2:]:
        cells = [c.strip() for c in x.strip("|").split("|")]
        assert len(cells) == len(cols), x  # every row has every column
        rows.append(dict(zip(cols, cells)))
    return rows


def _old_row() -> dict[str, Any]:
    """A job of a result saved before issue-27zy (``--from-json``): no counts, no matched figures."""
    return {
        k: v
        for k, v in _equal_job().items()
        if "matched" not in k and "iterations" not in k and k != "lag_ms"
    }


def _report_row(job: dict[str, Any], policy: str) -> dict[str, Any]:
    return {"case": "xc-hand", "policy": policy, **job, "worst_interval_error": 0.48, "steps": 2,
            "fluid_wall_s": 0.002, "ns3_wall_s": 600.0, "fluid_cpu_s": 0.001, "ns3_cpu_s": 100.0,
            "transfer_mb": 5.73}  # fmt: skip


@pytest.mark.parametrize("which", ["learning", "calibration"])
def test_report_tables_show_iterations_matched_error_and_lag_beside_the_error(which: str) -> None:
    """Both tables of ``report.py`` have the columns ``iterations fluid/ns-3``, ``matched error`` and ``lag
    ms`` right after ``error``; the row with an extra fluid iteration has its counts in bold with ``fluid+1``;
    a row saved without the fields shows ``-``; a row with an error keeps every column."""
    rows = [
        _report_row(_extra_fluid_job(), "lp"),
        _report_row(_equal_job(), "ecmp"),
        _report_row(_old_row(), "spray"),
        {"case": "xc-hand", "policy": "ppo", "error": "no iteration"},
    ]
    if which == "learning":
        md = markdown_learning({"rows": rows, "rankings": step_rankings(rows)})
    else:
        md = markdown({"rows": rows, "rankings": rankings(rows)})
    table = _table(md)
    cols = list(table[0])
    i = cols.index("error")
    assert cols[i + 1 : i + 4] == ["iterations fluid/ns-3", "matched error", "lag ms"]
    a, b, old, err = table
    assert (a["error"], a["iterations fluid/ns-3"], a["matched error"], a["lag ms"]) == (
        "-33.33%", "**3/2 fluid+1**", "-16.67%", "+6.500"
    )  # fmt: skip
    assert (b["iterations fluid/ns-3"], b["matched error"], b["lag ms"]) == ("4/4", "+2.50%", "-1.250")
    assert (old["error"], old["iterations fluid/ns-3"], old["matched error"], old["lag ms"]) == (
        "+2.50%",
        "-",
        "-",
        "-",
    )
    assert err["error"] == "no iteration"


def _details() -> dict[str, Any]:
    return {"fluid_cpu_s": 0.001, "ns3_cpu_s": 100.0, "transfer_mb": 5.73, "ns3_bytes": 1e9,
            "ns3_transfers": 40, "resplits": 3, "ns3_iterations": [2, 4]}  # fmt: skip


@pytest.mark.parametrize("which", ["learning", "calibration"])
def test_report_runs_carry_the_matched_figures_to_rows_and_progress(
    which: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """:func:`~.report.learning` and :func:`~.report.calibration` keep each job's matched fields in their rows
    (so the table of a saved run shows them) and print them on the progress line."""
    res = _result(_extra_fluid_job(), _equal_job())
    monkeypatch.setattr(report, "crosscheck_in_subprocess", lambda *a, **k: (res, _details()))
    if which == "learning":
        out = report.learning(("xc-hand",), ("lp",))
        md = markdown_learning(out)
    else:
        out = report.calibration((("xc-hand", 2),), ("lp",))
        md = markdown(out)
    progress = capsys.readouterr().out.splitlines()
    assert "iterations 3/2 fluid+1 matched -16.67% lag +6.500 ms" in progress[0]
    assert "iterations 4/4 matched +2.50% lag -1.250 ms" in progress[1]
    assert out["rows"][0]["matched_rel_error"] == MATCHED_ERROR and out["rows"][0]["lag_ms"] == LAG_MS
    assert _table(md)[0]["iterations fluid/ns-3"] == "**3/2 fluid+1**"


# ---------------------------------------------------------------------------------------------- matched step
# issue-27zzf: two policies, one job each, compute 10 ms, no overlap, both jobs starting at 5 ms, so each
# iteration's step is 10 ms + its comm and iteration i ends at 5 ms + the steps up to i. Under "lp" the fluid
# completes a third, short iteration (comm 2 ms) that ns-3 does not; under "ecmp" both complete two.
START_MS = 5.0
LP_FLUID_COMM, LP_NS3_COMM = [10.0, 30.0, 2.0], [11.0, 31.0]  # steps 20, 40, 12 and 21, 41
EC_FLUID_COMM, EC_NS3_COMM = [19.0, 21.8], [20.0, 22.8]  # steps 29, 31.8 and 30, 32.8
# by hand: over all iterations lp 72/3 = 24 ms (fluid) and 62/2 = 31 ms (ns-3), ecmp 60.8/2 = 30.4 and
# 62.8/2 = 31.4: the fluid ranks lp 21% ahead of ecmp, ns-3 ties them (1.3%). Over the matched iterations
# (the first two of each) lp is 60/2 = 30 ms in the fluid, 31 in ns-3: tied with ecmp in both (1.3%).
LP_ALL, LP_MATCHED = {"fluid": 24.0, "ns3": 31.0}, {"fluid": 30.0, "ns3": 31.0}
EC_ALL = EC_MATCHED = {"fluid": 30.4, "ns3": 31.4}


def _hand_log(comm_ms: list[float]) -> tuple[IterationLog, float]:
    """A job's log (s) from its comm times (ms) as above, and its step times summed (s)."""
    steps = 10.0 + np.array(comm_ms)
    ends = START_MS + np.cumsum(steps)
    return IterationLog(np.array(comm_ms) * 1e-3, ends * 1e-3, np.cumsum(comm_ms) * 1e-3), steps.sum() * 1e-3


def _hand_row(policy: str, fluid_comm: list[float], ns3_comm: list[float]) -> dict[str, Any]:
    """The report row of one job under ``policy``: its all-iteration means and :func:`matched_figures`."""
    (fl, fsum), (pk, psum) = _hand_log(fluid_comm), _hand_log(ns3_comm)
    nf, npk = len(fluid_comm), len(ns3_comm)
    job = {"name": "llm-a", "fluid_comm_ms": float(np.mean(fluid_comm)), "ns3_comm_ms": float(np.mean(ns3_comm)),
           "fluid_step_ms": fsum / nf * 1e3, "ns3_step_ms": psum / npk * 1e3, "intervals": [],
           **matched_figures(fl, pk, step_sum_s=(fsum, psum))}  # fmt: skip
    job["rel_error"] = (job["fluid_comm_ms"] - job["ns3_comm_ms"]) / job["ns3_comm_ms"]
    job["step_rel_error"] = (job["fluid_step_ms"] - job["ns3_step_ms"]) / job["ns3_step_ms"]
    return _report_row(job, policy)


def test_matched_step_time_is_the_mean_over_the_matched_iterations_by_hand() -> None:
    """``matched_step_ms`` is each side's mean step over the first ``matched_iterations`` (not over all of
    them, and not the end of the last one over the count: the jobs start at 5 ms), in both orders; without
    the step sums, or where the fluid's log does not know the cut's end, it is None."""
    lp, ec = _hand_row("lp", LP_FLUID_COMM, LP_NS3_COMM), _hand_row("ecmp", EC_FLUID_COMM, EC_NS3_COMM)
    assert (lp["fluid_step_ms"], lp["ns3_step_ms"]) == pytest.approx((LP_ALL["fluid"], LP_ALL["ns3"]))
    assert lp["matched_step_ms"] == pytest.approx(LP_MATCHED)
    assert lp["matched_step_rel_error"] == pytest.approx((30.0 - 31.0) / 31.0)
    assert ec["matched_step_ms"] == pytest.approx(EC_MATCHED)
    (fl, fsum), (pk, psum) = _hand_log(LP_FLUID_COMM), _hand_log(LP_NS3_COMM)
    swapped = matched_figures(pk, fl, step_sum_s=(psum, fsum))  # ns-3 one ahead: its first two, 60/2
    assert swapped["matched_step_ms"] == pytest.approx({"fluid": 31.0, "ns3": 30.0})
    assert matched_figures(fl, pk)["matched_step_ms"] == {"fluid": None, "ns3": None}
    blind = IterationLog(fl.comm_s, np.array([25.0, np.nan, 77.0]) * 1e-3, fl.comm_cum_s)
    m = matched_figures(blind, pk, step_sum_s=(fsum, psum))
    assert m["matched_step_ms"] == {"fluid": None, "ns3": pytest.approx(31.0)}
    assert m["matched_step_rel_error"] is None


def test_step_rankings_rank_by_matched_step_time_beside_the_all_iteration_ranking() -> None:
    """The fluid's extra short iteration makes lp look 21% faster than ecmp over all iterations, which ns-3
    ties (a gain lost); over the matched iterations both simulators tie them, so the second ranking has no
    difference and says that the fluid's ranking changed. The first ranking is as before."""
    rows = [_hand_row("lp", LP_FLUID_COMM, LP_NS3_COMM), _hand_row("ecmp", EC_FLUID_COMM, EC_NS3_COMM)]
    (k,) = step_rankings(rows)
    assert k["fluid_step_ms"] == pytest.approx({"lp": 24.0, "ecmp": 30.4})
    assert k["fluid"] == [["lp"], ["ecmp"]] and k["ns3"] == [["lp", "ecmp"]]
    assert [(d["pair"], d["kind"]) for d in k["differences"]] == [("lp vs ecmp", "gain lost")]
    m = k["matched"]
    assert m["fluid_step_ms"] == pytest.approx({"lp": 30.0, "ecmp": 30.4})
    assert m["ns3_step_ms"] == pytest.approx({"lp": 31.0, "ecmp": 31.4})
    assert m["fluid"] == m["ns3"] == [["lp", "ecmp"]] and m["differences"] == [] and m["missing"] == []
    assert m["same_as_all_iterations"] == {"fluid": False, "ns3": True}
    md = markdown_learning({"rows": rows, "rankings": [k]})
    job_table, all_table, matched_table = md.split("\n\n")
    a, e = _table(job_table)
    assert (a["matched fluid step ms"], a["matched ns-3 step ms"]) == ("30.00", "31.00")
    assert (a["fluid step ms"], e["matched fluid step ms"]) == ("24.00", "30.40")
    assert "| lp < ecmp | lp=ecmp | lp vs ecmp: gain lost (fluid +21.1%, ns-3 +1.3%) |" in all_table
    (row,) = _table(matched_table)
    assert row == {
        "case": "xc-hand",
        "matched step ms, fluid": "lp 30.00, ecmp 30.40",
        "matched step ms, ns-3": "lp 31.00, ecmp 31.40",
        "fluid ranking (matched)": "lp=ecmp",
        "ns-3 ranking (matched)": "lp=ecmp",
        "ranked differently (matched)": "none",
        "vs all iterations": "fluid changed, ns-3 same",
    }
    text = text_report(_result(rows[0]))
    steps = [x.split() for x in text.splitlines() if x.strip().startswith("llm-a")][1]
    assert steps == ["llm-a", "24.000", "31.000", "-22.58%", "30.000", "31.000", "-3.23%"]


def test_old_results_print_dashes_for_the_matched_step_time(tmp_path, capsys) -> None:
    """Rows and results saved before issue-27zzf (no ``matched_step_ms``; before 27zy no counts either) still
    print: ``-`` in the matched step columns and the text report, the policy left out of the matched ranking
    (``-`` when none has it), and a ranking saved without ``matched`` prints a row of ``-``."""
    old = {k: v for k, v in _equal_job().items() if not k.startswith("matched_step")}
    text = text_report(_result(old))
    steps = [x.split() for x in text.splitlines() if x.strip().startswith("llm-b")][1]
    assert steps == ["llm-b", "50.500", "50.000", "+1.00%", "-", "-", "-"]
    rows = [_report_row(old, "lp"), _report_row(_old_row(), "spray")]
    md = markdown_learning({"rows": rows, "rankings": step_rankings(rows)})
    job_table, _, matched_table = md.split("\n\n")
    assert all(r["matched fluid step ms"] == r["matched ns-3 step ms"] == "-" for r in _table(job_table))
    (row,) = _table(matched_table)
    assert row["matched step ms, fluid"] == "lp -, spray -" and row["fluid ranking (matched)"] == "-"
    new = _hand_row("ecmp", EC_FLUID_COMM, EC_NS3_COMM)
    (part,) = _table(
        markdown_learning({"rows": [], "rankings": step_rankings([*rows, new])}).split("\n\n")[2]
    )
    assert part["fluid ranking (matched)"] == "ecmp" and part["vs all iterations"].endswith(
        "(without lp, spray)"
    )
    saved = {"case": "xc-hand", "fluid_step_ms": {"lp": 50.5}, "ns3_step_ms": {"lp": 50.0}, "fluid": [["lp"]],
             "ns3": [["lp"]], "differences": []}  # fmt: skip
    assert (
        _table(markdown_learning({"rows": [], "rankings": [saved]}).split("\n\n")[2])[0]["vs all iterations"]
        == "-"
    )
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"rows": rows}), encoding="utf-8")
    assert report.main(["--learning", "--from-json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "| xc-hand | spray -, lp - | spray -, lp - | - | - | - | - |" in out  # main orders the policies
