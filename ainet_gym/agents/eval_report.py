"""The text of an evaluation report (:mod:`ainet_gym.agents.evaluate`): the rows grouped by class
(:func:`table_order`), the markdown table (:func:`markdown_table`), the header line (:func:`report_header`) and
the warning when a table mixes classes that do not control the same traffic (:func:`controls_note`)."""

from __future__ import annotations

from typing import Any

__all__ = [
    "CLASSES",
    "TABLE_COLUMNS",
    "TWIN_COLUMN",
    "controls_note",
    "markdown_table",
    "report_header",
    "table_order",
]


#: the order of the classes in tables
CLASSES = ("none", "jobs", "jobs+bg", "jobs+bg+weights", "reference")


def table_order(policies: dict[str, dict[str, Any]]) -> list[str]:
    """The rows of a table grouped by class: the classes of learned policies first (each learned
    policy at the top of its class), then ``none``, ``jobs``, ``jobs+bg``, ``jobs+bg+weights``, the reference
    last."""
    first = [d["controls"] for d in policies.values() if d.get("learned")]
    order = list(dict.fromkeys([*first, *[c for c in CLASSES if c != "reference"]]))
    order += [c for d in policies.values() if (c := d["controls"]) not in order and c != "reference"]
    order.append("reference")
    rows: list[str] = []
    for c in order:
        names = [n for n, d in policies.items() if d["controls"] == c]
        rows += sorted(names, key=lambda n: not policies[n].get("learned"))  # stable: learned first
    return rows


def _fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _fmt_ci(d: dict[str, Any] | None, nd: int = 3, signed: bool = False) -> str:
    if d is None or d.get("mean") is None:
        return "-"
    f = f"{{:+.{nd}f}}" if signed else f"{{:.{nd}f}}"
    s = f.format(d["mean"])
    if d.get("ci95") is not None:
        s += " [" + ", ".join(f.format(v) for v in d["ci95"]) + "]"
    return s


TABLE_COLUMNS = (
    "policy",
    "GPU util",
    "step time / ideal",
    "p99 step / ideal",
    "max link util",
    "gap to LP of its class",
    "GPU util vs ECMP",
    "class (controls)",
)
#: the column added when the clairvoyant ``twin`` was evaluated
TWIN_COLUMN = "share of ECMP-to-twin gap"


def markdown_table(result: dict[str, Any]) -> str:
    """The results as a markdown table (means with [95% CI]), rows grouped by class
    (:func:`table_order`); with a ``twin`` row, a last column gives each policy's share of the
    ECMP-to-twin gap."""
    pols = result["policies"]
    twin = any(d["controls"] == "reference" for d in pols.values())
    cols = (*TABLE_COLUMNS, TWIN_COLUMN) if twin else TABLE_COLUMNS
    lines = [
        "| " + " | ".join(cols) + " |",
        "|"
        + "|".join(["---"] + ["---:"] * (len(TABLE_COLUMNS) - 2) + ["---"] + (["---:"] if twin else []))
        + "|",
    ]
    for name in table_order(pols):
        d = pols[name]
        gap = "-" if d["gap_to_lp"] is None else f"{100 * d['gap_to_lp']:+.1f}%"
        cells = [
            name,
            _fmt_ci(d["gpu_utilization"]),
            _fmt_ci(d["step_time_ratio"]),
            _fmt(d["p99_step_time_ratio"]),
            _fmt_ci(d["max_link_utilization"]),
            gap,
            _fmt_ci(d["gpu_utilization_vs_ecmp"], signed=True),
            d.get("controls", "jobs"),
        ]
        if twin:
            cells.append(_fmt_ci(d.get("twin_gap_share"), nd=2))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_header(result: dict[str, Any]) -> str:
    """The first line of an evaluation report: scenario, seeds, episode length and what each policy controls."""
    n = len(result["episode_seeds"])
    head = (
        f"scenario {result['scenario']}: {n} episodes (seeds {','.join(map(str, result['seeds']))} x "
        f"{result['episodes']}) of {result['steps']} intervals; mean [95% CI] over episodes"
    )
    warn = controls_note(result)
    return head if warn is None else f"{head}\n{warn}"


def controls_note(result: dict[str, Any]) -> str | None:
    """A warning line when the table mixes policies that route only the jobs' traffic with policies
    that also move background (None when every policy controls the same traffic)."""
    by: dict[str, list[str]] = {}
    for name, d in result["policies"].items():
        by.setdefault(d.get("controls", "jobs"), []).append(name)
    notes = []
    if "jobs" in by and "jobs+bg" in by:
        notes.append(
            f"note: {', '.join(by['jobs+bg'])} also route background traffic, which "
            f"{', '.join(by['jobs'])} leave on static ECMP: compare within each class (gap to LP: the LP "
            "of the policy's class)"
        )
    if "jobs+bg+weights" in by and ("jobs" in by or "jobs+bg" in by):
        notes.append(
            f"note: {', '.join(by['jobs+bg+weights'])} also set share weights between jobs (class "
            "jobs+bg+weights), which the path-only policies do not: compare within each class (their LP: lp+bg)"
        )
    if "reference" in by:
        notes.append(
            f"note: {', '.join(by['reference'])} sees the future (a clairvoyant reference, not a "
            "competitor): shown apart, last"
        )
    return "\n".join(notes) or None
