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

With ``starts=True`` (off by default) the copies also re-draw each job start the observation hides
(docs/learning.md, "issue-26zm2"): an initial job with ``start_jitter_ms > 0`` starts at ``start_ms`` plus a
draw on a 0.1 ms grid, and while it waits the ``job_phase`` block shows its time to the first communication
clipped at one ideal iteration (:meth:`ainet_gym.envs.obs_blocks.ObservationBlocks.job_phase_features`), so a
start later than that is not observed. :func:`consistent_starts` lists the starts of the grid that the clipped
observation allows; a copy moves the job's start (its ``t_start_left`` and ``iter_start`` in the simulator's
state) to one of them, and nothing else. A start once shown (clipped below one ideal iteration) or passed is
kept: the observation then pins it, so the window does not matter for starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.scenario.spec import BackgroundSpec, JobSpec
from ainet_gym.sim.state import WorldState

if TYPE_CHECKING:
    from ainet_gym.sim.world import FabricWorld

__all__ = ["FutureRedraw", "consistent_offsets", "consistent_starts", "redrawable"]


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


def consistent_starts(
    job: JobSpec, drawn_ms: float, left_s: float, first_comm_s: float, ideal_s: float
) -> np.ndarray:
    """(n,) float64 the times to its start (s) that a waiting job can have at a decision, given what the
    observation shows: ``job`` the scenario's job (its ``start_ms`` and ``start_jitter_ms``: the grid
    ``start_ms + 0, 0.1, ..., start_jitter_ms`` ms the episode drew from), ``drawn_ms`` the start it drew,
    ``left_s`` > 0 the time left to it, ``first_comm_s`` the compute before its first communication and
    ``ideal_s`` its ideal iteration. The observation's ``to_comm`` is ``(left_s + first_comm_s) / ideal_s``
    clipped at 1: below 1 it shows the start, and only ``left_s`` is returned; at 1 every start of the grid
    whose ``to_comm`` is clipped too, each as ``left_s`` plus its distance to the drawn start (``left_s`` itself,
    bit for bit, for the drawn one).

    Raises
    ------
    ValueError
        If ``drawn_ms`` is not on the grid of ``job`` (the job is not the scenario's, or not jittered).
    """
    n = int(job.start_jitter_ms * 10)
    k_true = round((drawn_ms - job.start_ms) * 10)
    if n <= 0 or not 0 <= k_true <= n or abs(job.start_ms + k_true / 10 - drawn_ms) > 1e-6:
        raise ValueError(
            f"consistent_starts: drawn_ms = {drawn_ms!r} for job {job.name!r}: allowed: start_ms + 0.1 ms steps "
            f"up to start_jitter_ms ({job.start_ms:g} .. {job.start_ms + job.start_jitter_ms:g})"
        )
    if (left_s + first_comm_s) / ideal_s < 1.0:
        return np.array([left_s], dtype=np.float64)
    left = left_s + (np.arange(n + 1) - k_true) * 1e-4
    left[k_true] = left_s
    return left[(left + first_comm_s) / ideal_s >= 1.0]


class FutureRedraw:
    """Re-draw, in lookahead copies, the background phases the controller has not observed.

    ``samples`` (M >= 1) futures per decision; ``seed`` (>= 0) seeds the draws with the episode seed and the
    interval, so a label does not depend on the batch it ran in; ``window`` (>= 0) the past intervals the
    controller is taken to have seen besides the one about to run (1: the observation's ``active_last`` and
    ``scheduled_next``, what a memoryless policy sees; a large window: the whole history, which pins a source's
    phase once one of its bursts has been scheduled); ``starts`` (False: off) re-draws the job starts the
    observation hides too (:func:`consistent_starts`, :meth:`apply_starts`).

    Raises
    ------
    ValueError
        If ``samples``, ``seed`` or ``window`` is not an integer in its range (the field is named).
    """

    def __init__(self, samples: int, seed: int = 0, window: int = 1, starts: bool = False) -> None:
        for name, value, low in (
            ("redraw_future", samples, 1),
            ("redraw_seed", seed, 0),
            ("redraw_window", window, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise ValueError(f"{name} = {value!r}: allowed: an integer >= {low}")
        if not isinstance(starts, bool | np.bool_):
            raise ValueError(f"redraw_starts = {starts!r}: allowed: True or False")
        self.samples, self.seed, self.window, self.starts = int(samples), int(seed), int(window), bool(starts)

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

    def start_draws(self, candidates: np.ndarray, step: int, episode_seed: int, slot: int) -> np.ndarray:
        """(M,) the times to the start of job slot ``slot`` in the M sampled futures of the decision before
        interval ``step`` of the episode of ``episode_seed``: uniform with replacement over ``candidates``
        (:func:`consistent_starts`; a stream of its own, apart from the background's)."""
        rng = np.random.default_rng([self.seed, int(episode_seed), int(step), 1, int(slot)])
        return rng.choice(candidates, size=self.samples)

    def apply_starts(self, world: FabricWorld, seeds: Sequence[int], plans: int) -> None:
        """Re-draw, in place, the hidden starts of the waiting jobs of ``world`` (a :class:`FabricWorld` whose
        instances are the copies of ``len(seeds)`` episodes laid out as in :meth:`apply`): in each copy of
        sample ``m`` the job's ``t_start_left`` becomes the sample's draw and its ``iter_start`` moves by as
        much; every plan of a sample gets the same draw; nothing else of the state changes. Only the scenario's
        initial jobs with ``start_jitter_ms > 0`` that still wait are re-drawn."""
        from ainet_gym.sim.state import WAITING

        M, K = self.samples, plans
        st, sim = world.state, world.sim
        if st.batch != len(seeds) * M * K or sim is None:
            raise ValueError(
                f"FutureRedraw.apply_starts: the world has {st.batch} instances, not {len(seeds)} episodes x {M} "
                f"samples x {K} plans"
            )
        ss = sim.state
        for j, spec in enumerate(world.scenario.jobs):
            if spec.start_jitter_ms <= 0:
                continue
            for b, seed in enumerate(seeds):
                i0 = b * M * K
                u0, job = int(world.job_unit[i0, j]), st.jobs[i0][j]
                if u0 < 0 or job is None or job.name != spec.name or ss.phase_cur[u0] != WAITING:
                    continue
                left = float(ss.t_start_left[u0])
                first = (1.0 - float(sim.unit_overlap[u0])) * float(sim.unit_compute[u0])
                cand = consistent_starts(
                    spec, job.start_ms, left, first, float(world.job_ideal_step_s[i0, j])
                )
                if cand.size == 1:
                    continue
                d = self.start_draws(cand, int(st.step_count[i0]), seed, j)
                u = world.job_unit[i0 : i0 + M * K, j]
                new = np.repeat(d, K)
                ss.iter_start[u] = ss.iter_start[u] + (new - ss.t_start_left[u])
                ss.t_start_left[u] = new
