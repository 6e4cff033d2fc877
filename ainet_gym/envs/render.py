"""Rendering: a text table (``ansi``) and a utilisation heat map by tier (``rgb_array``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.errors import check_choice
from ainet_gym.fabric.topology import TIERS

if TYPE_CHECKING:
    from ainet_gym.envs.core import EnvCore

__all__ = [
    "RENDER_MODES",
    "RGB_HEIGHT",
    "RGB_WIDTH",
    "check_render_mode",
    "colormap",
    "render_ansi",
    "render_rgb",
]

#: the render modes of the package's envs (their ``metadata["render_modes"]``)
RENDER_MODES: tuple[str, ...] = ("ansi", "rgb_array")


def check_render_mode(render_mode: str | None, allowed: Sequence[str] = RENDER_MODES) -> str | None:
    """``render_mode`` when it is None or one of ``allowed`` (the env's ``metadata["render_modes"]``).

    Raises
    ------
    ValueError
        Otherwise, naming the field, the value and what is allowed.
    """
    check_choice("render_mode", render_mode, [None, *allowed])
    return render_mode


def render_ansi(core: EnvCore, b: int = 0, top: int = 8) -> str:
    """The hottest network links of the last interval and each job's step time against its ideal."""
    w = core.world
    f = w.fabric
    util = core.state.util_hist[b, 0]
    order = np.argsort(-util, kind="stable")[:top]
    lines = [
        f"step {int(w.state.step_count[b])}/{core.episode_steps}  interval {w.decision_interval_s * 1e3:.2f} ms"
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
        n = len(w.state.gpus[b][j])
        lines.append(f"{name:<20}{n:>5}{st:>10.2f}{ideal[b, j] * 1e3:>10.2f}{gu:>7.3f}")
    return "\n".join(lines) + "\n"


#: matplotlib's "inferno" colour map sampled at 17 evenly spaced points (0, 1/16, ..., 1), uint8 RGB;
#: :func:`render_rgb` interpolates linearly between them (no matplotlib at render time)
_INFERNO_17 = np.array(
    [[0, 0, 4], [11, 7, 36], [33, 12, 74], [61, 9, 101], [87, 16, 110], [113, 25, 110], [138, 34, 106],
     [163, 44, 97], [188, 55, 84], [210, 70, 68], [228, 90, 49], [241, 115, 29], [249, 142, 9],
     [252, 172, 17], [249, 203, 53], [242, 234, 105], [252, 255, 164]],
    dtype=np.float64,
)  # fmt: skip

#: the frame of :func:`render_rgb`: size and the heat map's box (pixels)
RGB_WIDTH, RGB_HEIGHT = 640, 240
_MAP_LEFT, _MAP_TOP, _MAP_RIGHT, _MAP_BOTTOM = 58, 36, 572, 206
_BAR_LEFT, _BAR_RIGHT = 586, 598


def colormap(values: np.ndarray) -> np.ndarray:
    """uint8 RGB (..., 3) of ``values`` in [0, 1] (clipped; NaN as 0) on the inferno colour map."""
    v = np.clip(np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0), 0.0, 1.0) * 16.0
    i = np.minimum(v.astype(np.int64), 15)
    f = (v - i)[..., None]
    return np.rint(_INFERNO_17[i] * (1.0 - f) + _INFERNO_17[i + 1] * f).astype(np.uint8)


@functools.lru_cache(maxsize=1)
def _font() -> Any:
    from PIL import ImageFont

    return ImageFont.load_default(size=11)


@functools.lru_cache(maxsize=16)
def _frame(tier_starts: tuple[tuple[int, int], ...], n_links: int, history: int) -> np.ndarray:
    """The static part of a :func:`render_rgb` frame (labels, boxes, colour bar), uint8 (H, W, 3), for
    tiers starting at the given (link column, tier) pairs; made once per layout."""
    from PIL import Image, ImageDraw

    img = np.full((RGB_HEIGHT, RGB_WIDTH, 3), 255, dtype=np.uint8)
    mw, mh = _MAP_RIGHT - _MAP_LEFT, _MAP_BOTTOM - _MAP_TOP
    img[_MAP_TOP:_MAP_BOTTOM, _BAR_LEFT:_BAR_RIGHT] = colormap(np.linspace(1.0, 0.0, mh))[:, None, :]
    pic = Image.fromarray(img)
    draw = ImageDraw.Draw(pic)
    font = _font()
    black = (0, 0, 0)
    draw.rectangle((_MAP_LEFT - 1, _MAP_TOP - 1, _MAP_RIGHT, _MAP_BOTTOM), outline=black)
    draw.rectangle((_BAR_LEFT - 1, _MAP_TOP - 1, _BAR_RIGHT, _MAP_BOTTOM), outline=black)
    for s0, tier in tier_starts:
        x = _MAP_LEFT + s0 * mw // max(n_links, 1)
        draw.text((x + 2, _MAP_TOP - 13), TIERS[tier], fill=black, font=font)
    draw.text(((_MAP_LEFT + _MAP_RIGHT) // 2, _MAP_BOTTOM + 14), "network links (by tier)", fill=black,
              font=font, anchor="ma")  # fmt: skip
    for h in range(history):  # row labels: intervals ago
        y = _MAP_TOP + (2 * h + 1) * mh // (2 * history)
        draw.text((_MAP_LEFT - 4, y), str(h), fill=black, font=font, anchor="rm")
    draw.multiline_text(
        (2, (_MAP_TOP + _MAP_BOTTOM) // 2), "intervals\nago", fill=black, font=font, anchor="lm"
    )
    draw.text((_BAR_RIGHT + 4, _MAP_TOP), "1", fill=black, font=font, anchor="lm")
    draw.text((_BAR_RIGHT + 4, _MAP_BOTTOM), "0", fill=black, font=font, anchor="lm")
    out = np.asarray(pic).copy()
    out.flags.writeable = False
    return out


def render_rgb(core: EnvCore, b: int = 0) -> np.ndarray:
    """An RGB image (240, 640, 3) uint8: utilisation history of the network links (rows: intervals ago,
    newest on top; columns: links grouped by tier, cyan lines between tiers) on the inferno colour map
    from 0 to 1, with the step, the tier names and a colour bar.

    Drawn with numpy (the (history, links) array coloured, then resampled to the box by nearest
    neighbour) over a frame of labels drawn once per layout with Pillow: a few milliseconds a frame
    (about a second through matplotlib before).
    """
    from PIL import Image, ImageDraw

    w = core.world
    tiers = w.fabric.link_tier[core.net_links]
    order = np.argsort(tiers, kind="stable")
    data = core.state.util_hist[b][:, order]  # (history, links)
    H, N = data.shape
    ordered = tiers[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(ordered)) + 1)) if N else np.zeros(0, np.int64)
    layout = tuple((int(s0), int(ordered[s0])) for s0 in starts)
    img = _frame(layout, N, H).copy()
    mw, mh = _MAP_RIGHT - _MAP_LEFT, _MAP_BOTTOM - _MAP_TOP
    if N:
        rows = np.arange(mh) * H // mh  # nearest neighbour: pixel -> (interval, link)
        cols = np.arange(mw) * N // mw
        img[_MAP_TOP:_MAP_BOTTOM, _MAP_LEFT:_MAP_RIGHT] = colormap(data)[rows[:, None], cols[None, :]]
        for s0, _tier in layout[1:]:  # tier boundaries
            img[_MAP_TOP:_MAP_BOTTOM, _MAP_LEFT + s0 * mw // N] = (0, 255, 255)
    pic = Image.fromarray(img)
    title = f"link utilisation, step {int(w.state.step_count[b])}"
    ImageDraw.Draw(pic).text((RGB_WIDTH // 2, 4), title, fill=(0, 0, 0), font=_font(), anchor="ma")
    return np.asarray(pic).copy()
