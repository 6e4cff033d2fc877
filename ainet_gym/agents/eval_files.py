"""The files of an evaluation (:mod:`ainet_gym.agents.evaluate`): ``results.md``, ``results.csv``,
``episodes.csv``, ``results.json`` (:func:`write_outputs`) and the three-panel ``figure.png`` (:func:`plot`)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.agents.eval_episodes import PolicyRun
from ainet_gym.agents.eval_report import markdown_table, report_header
from ainet_gym.agents.eval_stats import episode_ratio, ratio_samples

__all__ = [
    "plot",
    "write_outputs",
]


def write_outputs(result: dict[str, Any], runs: dict[str, PolicyRun], out: Path) -> dict[str, str]:
    """results.md, results.csv, episodes.csv, results.json and figure.png in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "table": str(out / "results.md"),
        "csv": str(out / "results.csv"),
        "episodes_csv": str(out / "episodes.csv"),
        "json": str(out / "results.json"),
        "figure": str(out / "figure.png"),
    }
    result["files"] = files
    Path(files["table"]).write_text(f"{report_header(result)}\n\n{markdown_table(result)}\n")
    with open(files["csv"], "w", newline="") as fh:
        wr = csv.writer(fh)
        keys = ("gpu_utilization", "step_time_ratio", "max_link_utilization", "gpu_utilization_vs_ecmp")
        head = ["policy", "controls"]
        for k in keys:
            head += [f"{k}_mean", f"{k}_ci95_lo", f"{k}_ci95_hi"]
        head += [
            "p99_step_time_ratio",
            "gap_to_lp",
            "lp_reference",
            "twin_gap_share",
            "collisions",
            "episodes",
        ]
        wr.writerow(head)
        for name, d in result["policies"].items():
            row: list[Any] = [name, d.get("controls", "jobs")]
            for k in keys:
                v = d[k] or {}
                ci = v.get("ci95") or [None, None]
                row += [v.get("mean"), *ci]
            share = (d.get("twin_gap_share") or {}).get("mean")
            row += [d["p99_step_time_ratio"], d["gap_to_lp"], d["lp_reference"], share]
            row += [d["collisions"], d["episodes"]]
            wr.writerow(["" if x is None else x for x in row])
    with open(files["episodes_csv"], "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["policy", "seed", "gpu_utilization", "step_time_ratio", "max_link_utilization"])
        for name, run in runs.items():
            er = episode_ratio(run)
            for i, s in enumerate(result["episode_seeds"]):
                wr.writerow([name, s, run.gpu[i].mean(), er[i], run.max_link[i].mean()])
    Path(files["json"]).write_text(json.dumps(result, indent=1) + "\n")
    plot(result, runs, Path(files["figure"]))
    return files


def plot(result: dict[str, Any], runs: dict[str, PolicyRun], path: Path) -> None:
    """Three panels: GPU utilisation per policy (mean, 95% CI), CDF of step time / ideal over
    job-iterations, and GPU utilisation per interval (mean over episodes)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    names = list(result["policies"])
    cmap = "tab10" if len(names) <= 10 else "tab20"
    palette = [matplotlib.colormaps[cmap](i % 20) for i in range(len(names))]
    colors = dict(zip(names, palette))
    means, errs = [], [[], []]
    for n in names:
        g = result["policies"][n]["gpu_utilization"]
        means.append(g["mean"])
        lo, hi = g["ci95"] or [g["mean"], g["mean"]]
        errs[0].append(g["mean"] - lo)
        errs[1].append(hi - g["mean"])
    ax1.bar(names, means, yerr=errs, capsize=4, color=[colors[n] for n in names])
    if "lp" in result["policies"]:
        ax1.axhline(result["policies"]["lp"]["gpu_utilization"]["mean"], color="k", ls="--", lw=1, label="LP")
        ax1.legend(loc="lower right")
    ax1.set_ylabel("GPU utilisation (mean, 95% CI)")
    ax1.set_ylim(0, 1)
    ax1.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax1.set_title("GPU utilisation per policy")
    for n in names:
        s = np.sort(ratio_samples(runs[n]))
        if s.size:
            ax2.step(s, np.arange(1, s.size + 1) / s.size, where="post", label=n, color=colors[n])
    ax2.set_xlabel("step time / ideal (per job-iteration)")
    ax2.set_ylabel("CDF")
    ax2.set_title("Step times")
    if ax2.get_legend_handles_labels()[0]:  # no completed iteration in a very short run: nothing to label
        ax2.legend(fontsize=8)
    else:
        ax2.text(0.5, 0.5, "no completed iteration", ha="center", va="center", transform=ax2.transAxes)
    for n in names:
        ax3.plot(runs[n].gpu.mean(axis=0), label=n, color=colors[n], lw=1.2)
    ax3.set_xlabel("interval")
    ax3.set_ylabel("GPU utilisation (mean over episodes)")
    ax3.set_ylim(0, 1)
    ax3.set_title("GPU utilisation per interval")
    fig.suptitle(report_header(result), fontsize=9)
    fig.savefig(path, dpi=110)
