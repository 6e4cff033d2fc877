"""Lookahead copies that re-draw the future a controller cannot observe (docs/learning.md, "issue-26zr").

A lookahead teacher (``imitate label``) plays each plan on copies of the true state; the copies then see the
episode's whole future, including what was drawn at reset and is not in the observation. The one such draw
that shapes the future on the shipped scenarios is a periodic background source's phase (its
``offset_steps`` plus the per-episode ``offset_jitter_steps`` draw, :func:`ainet_gym.sim.dynamics.episode_jitter`):
the observation's background block shows a source on in the interval just run and in the one about to run,
not later. :class:`FutureRedraw` replaces, in copies of a world, each such offset by a draw among the offsets
whose on/off pattern equals the true one on the intervals the controller has seen (``window``), so that
everything already observed or started (units, clocks, flows, links, hash seeds, the interval about to run)
stays bit for bit and only the later bursts differ.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ainet_gym.scenario.spec import BackgroundSpec
from ainet_gym.sim.state import WorldState

__all__ = ["FutureRedraw", "consistent_offsets", "redrawable"]


def redrawable(bg: BackgroundSpec) -> bool:
    """Whether background source ``bg`` has a per-episode phase draw (periodic, ``offset_jitter_steps > 0``)."""
    return bg.pattern != "constant" and bg.offset_jitter_steps > 0


def consistent_offsets(bg: BackgroundSpec, offset: int, step: int, window: int) -> np.ndarray:
    """(n,) int64 the offsets ``bg`` can draw (``offset_steps`` .. ``offset_steps + offset_jitter_steps``) whose
    on/off pattern equals that of ``offset`` on the intervals ``max(0, step - window)`` .. ``step`` (as
    :func:`ainet_gym.sim.dynamics.background_on` computes it); ``offset`` itself is always among them."""
    cand = np.arange(bg.offset_steps, bg.offset_steps + bg.offset_jitter_steps + 1, dtype=np.int64)
    s = np.arange(max(0, step - window), step + 1, dtype=np.int64)

    def on(o: np.ndarray) -> np.ndarray:
        phase = s[None, :] - o[:, None]
        return (phase >= 0) & (phase % bg.period_steps < bg.duration_steps)

    same = (on(cand) == on(np.array([offset], dtype=np.int64))).all(axis=1)
    return cand[same]


class FutureRedraw:
    """Re-draw, in lookahead copies, the background phases the controller has not observed.

    ``samples`` (M >= 1) futures per decision; ``seed`` (>= 0) seeds the draws with the episode seed and the
    interval, so a label does not depend on the batch it ran in; ``window`` (>= 0) the past intervals the
    controller is taken to have seen besides the one about to run (1: the observation's ``active_last`` and
    ``scheduled_next``, what a memoryless policy sees; a large window: the whole history, which pins a source's
    phase once one of its bursts has been scheduled).

    Raises
    ------
    ValueError
        If ``samples``, ``seed`` or ``window`` is not an integer in its range (the field is named).
    """

    def __init__(self, samples: int, seed: int = 0, window: int = 1) -> None:
        for name, value, low in (
            ("redraw_future", samples, 1),
            ("redraw_seed", seed, 0),
            ("redraw_window", window, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise ValueError(f"{name} = {value!r}: allowed: an integer >= {low}")
        self.samples, self.seed, self.window = int(samples), int(seed), int(window)

    def draws(self, bg: BackgroundSpec, offset: int, step: int, episode_seed: int, source: int) -> np.ndarray:
        """(M,) the offsets of source ``source`` (``bg``, true offset ``offset``) in the M sampled futures of the
        decision before interval ``step`` of the episode of ``episode_seed``: uniform with replacement over
        :func:`consistent_offsets`."""
        rng = np.random.default_rng([self.seed, int(episode_seed), int(step), int(source)])
        return rng.choice(consistent_offsets(bg, offset, step, self.window), size=self.samples)

    def apply(
        self, st: WorldState, background: Sequence[BackgroundSpec], seeds: Sequence[int], plans: int
    ) -> None:
        """Re-draw, in place, the phases (``bg_offset``) of the episode state ``st`` of a world running
        ``background``, whose instances are the copies of ``len(seeds)`` episodes laid out as (episode, sample,
        plan): instance ``(b * M + m) * plans + k`` is plan ``k``'s copy of episode ``b`` in sample ``m``; every
        plan of a sample gets the same draw (:meth:`ainet_gym.envs.env.EnvCore.redraw_background`). Nothing else
        of the state changes."""
        M, K = self.samples, plans
        if st.batch != len(seeds) * M * K:
            raise ValueError(
                f"FutureRedraw.apply: the world has {st.batch} instances, not {len(seeds)} episodes x {M} samples "
                f"x {K} plans"
            )
        for j, bg in enumerate(background):
            if not redrawable(bg):
                continue
            for b, seed in enumerate(seeds):
                i0 = b * M * K
                d = self.draws(bg, int(st.bg_offset[i0, j]), int(st.step_count[i0]), seed, j)
                st.bg_offset[i0 : i0 + M * K, j] = np.repeat(d, K)
