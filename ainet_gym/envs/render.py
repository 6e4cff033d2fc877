"""Rendering: a text table (``ansi``) and a utilisation heat map by tier (``rgb_array``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.fabric.topology import TIERS

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = ["render_ansi", "render_rgb"]


def render_ansi(core: EnvCore, b: int = 0, top: int = 8) -> str:
    """The hottest network links of the last interval and each job's step time against its ideal."""
    w = core.world
    f = w.fabric
    util = core.util_hist[b, 0]
    order = np.argsort(-util, kind="stable")[:top]
    lines = [
        f"step {int(w.step_count[b])}/{core.episode_steps}  interval {w.decision_interval_s * 1e3:.2f} ms"
    ]
    lines.append(f"{'link':<28}{'tier':<12}{'util':>6}{'cap':>6}")
    cap = core.link_capacity_bytes_per_s[b] / f.capacity_bytes_per_s
    for i in order:
        lk = int(core.net_links[i])
        lines.append(f"{f.link_names[lk]:<28}{TIERS[f.link_tier[lk]]:<12}{util[i]:>6.2f}{cap[lk]:>6.2f}")
    last = core.last_result
    ideal = core.ideal_step_s
    lines.append(f"{'job':<20}{'gpus':>5}{'step ms':>10}{'ideal ms':>10}{'util':>7}")
    for j, name in enumerate(w.job_names(b)):
        if name is None:
            continue
        st = np.nan if last is None else last.step_time_s[b, j] * 1e3
        gu = np.nan if last is None else last.gpu_utilization[b, j]
        n = len(w.gpus[b][j])
        lines.append(f"{name:<20}{n:>5}{st:>10.2f}{ideal[b, j] * 1e3:>10.2f}{gu:>7.3f}")
    return "\n".join(lines) + "\n"


def render_rgb(core: EnvCore, b: int = 0) -> np.ndarray:
    """An RGB image (H, W, 3) uint8: utilisation history of the network links, grouped by tier."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = core.world
    f = w.fabric
    tiers = f.link_tier[core.net_links]
    order = np.argsort(tiers, kind="stable")
    data = core.util_hist[b][:, order]  # (history, links)
    fig, ax = plt.subplots(figsize=(8, 3), dpi=80)
    im = ax.imshow(data, aspect="auto", vmin=0.0, vmax=1.0, cmap="inferno", interpolation="nearest")
    bounds = np.flatnonzero(np.diff(tiers[order])) + 0.5
    for x in bounds:
        ax.axvline(x, color="cyan", lw=0.8)
    starts = np.concatenate([[0], np.ceil(bounds).astype(int)])
    for s0, t in zip(starts, np.unique(tiers[order])):
        ax.text(s0 + 1, -0.7, TIERS[t], color="black", fontsize=8, va="bottom")
    ax.set_ylabel("intervals ago")
    ax.set_xlabel("network links (by tier)")
    ax.set_title(f"link utilisation, step {int(w.step_count[b])}", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return img
