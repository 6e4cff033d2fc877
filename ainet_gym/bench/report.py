"""The bench's output: the targets of the issue (PASS/MISS and the ratio), the terminal tables, the
scaling plot and the JSON-ready results.

Modules: this one writes the files (the scaling plot, the JSON-ready results); the targets are
:mod:`ainet_gym.bench.targets`, the terminal tables :mod:`ainet_gym.bench.tables`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np


def plot_scaling(scaling: dict[str, Any], path: Path) -> None:
    """The scaling curves (log-log, with fits): ms per interval against GPUs, transfers and jobs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("gpus", "GPUs (2:1 spine-leaf)", "cost vs fabric size",
         [(scaling["fabric_size"], "8 ring AllReduce jobs of N/8 GPUs", "exponent_vs_gpus")]),
        ("transfers", "transfers per iteration (src, dst pairs)", "cost vs transfers",
         [(scaling["fabric_size"], "fabric sweep (ring jobs)", "exponent_vs_transfers_fabric_sweep"),
          (scaling["transfers"], f"fixed {scaling['transfers_fabric_gpus']:,} GPUs, 8 AllToAll jobs",
           "exponent_vs_transfers")]),
    ]  # fmt: skip
    if scaling.get("jobs"):
        panels.append(("jobs", "jobs (independent clocks)", "cost vs jobs",
                       [(scaling["jobs"], f"fixed {scaling['transfers_fabric_gpus']:,} GPUs, ring AllReduce",
                         "exponent_vs_jobs")]))  # fmt: skip
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2))
    for ax, (key, xlabel, title, series) in zip(np.atleast_1d(axes), panels):
        for rows, label, exp_key in series:
            x = np.array([r[key] for r in rows], float)
            y = np.array([r["interval_ms"] for r in rows], float)
            k = scaling.get(exp_key)
            (line,) = ax.loglog(x, y, "o-", label=f"{label}: ~{key}^{k:.2f}" if k is not None else label)
            if k is not None and x.size >= 2:
                c = np.polyfit(np.log(x), np.log(y), 1)
                ax.loglog(x, np.exp(np.polyval(c, np.log(x))), "--", color=line.get_color(), alpha=0.5)
        x0 = np.array([r[key] for r in series[-1][0]], float)
        if x0.size >= 2:
            y0 = series[-1][0][0]["interval_ms"]
            ax.loglog(x0, y0 * x0 / x0[0], ":", color="gray", label="linear (from the first point)")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("ms per decision interval")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("ainet-gym: wall time of one decision interval (FabricWorld.step, static ECMP)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        x = float(x)
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return None
    return x
