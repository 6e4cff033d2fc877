"""The event steps the two compiled interval kernels share (``kernels.settle_units`` and the others).

References are hand computations on a one-unit, two-phase job; the property that both kernels' ways of
knowing a phase's bytes left (a scan of ``rem``, or the lazy kernel's counts ``pend``) settle alike.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from ainet_gym.sim import kernels
from ainet_gym.sim.state import DONE, IDLE, RUNNING, WAITING

pytestmark = pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba is not installed")

SHARED = ("settle_units", "end_phases", "end_iteration", "next_unit_event", "advance_units", "advance_flow",
          "exclusive_caps", "add_link_bytes", "join_flow", "lazy_stats", "parallel_rule")  # fmt: skip


def _job(rem: list[float], phase_cur: int, t_start: float, t_compute: float, now_iter: float) -> dict:
    """One unit (compute 1 s, fully overlapped), phases 0 -> 1 (no latency), one flow each of 5 bytes."""
    f64, i64 = np.float64, np.int64
    return dict(
        units=kernels.UnitTable(
            np.ones(1, np.bool_), np.zeros(1, np.bool_), np.array([2], i64), np.array([0], i64),
            np.array([0, 1], i64), np.array([1, 1], i64),
        ),
        clock=kernels.UnitClock(
            phase_cur=np.array([phase_cur], i64), t_start_left=np.array([t_start], f64),
            t_compute_left=np.array([t_compute], f64), t_comm_start_left=np.zeros(1, f64),
            phase_state=np.array([RUNNING, RUNNING] if phase_cur == 1 else [0, 0], i64),
            phase_wait=np.zeros(2, i64), phase_lat_left=np.zeros(2, f64), iter_start=np.array([now_iter], f64),
            comm_start=np.array([now_iter], f64), comm_end=np.zeros(1, f64),
        ),
        rem=np.array(rem, f64),
        job=kernels.JobParams(np.array([1.0]), np.array([1.0]), np.array([5.0, 5.0])),
        graph=kernels.PhaseGraph(np.zeros(2), np.array([0, 1], i64), np.array([0, 1, 1], i64), np.array([1], i64)),
        tallies=kernels.IterationTallies(np.zeros(1, i64), np.full(1, np.nan), np.full(1, np.nan),
                                         np.zeros(1, i64), np.zeros(1, f64), np.zeros(1, f64)),
        stats=np.zeros(kernels.N_STATS, i64),
    )  # fmt: skip


def _settle(a: dict, now: float, counted: bool) -> tuple[bool, np.ndarray, np.ndarray]:
    pend = np.array([int(r > 0) for r in a["rem"]], dtype=np.int64)  # one flow per phase
    joined = np.ones(2, dtype=np.bool_)
    ok = kernels.settle_units(0, 1, now, 16, 1e-12, counted, pend, joined, **a)
    return ok, pend, joined


@pytest.mark.parametrize("counted", [False, True])
def test_a_job_starts_and_runs_its_first_phase_through(counted: bool) -> None:
    """At t = 2 s a waiting job starts, its communication starts at once (overlap 1), phase 0 (no bytes
    left) ends and phase 1 (5 bytes left) runs: cursor 1, compute 1 s left, both starts at 2 s."""
    a = _job([0.0, 5.0], WAITING, 0.0, 0.0, 0.0)
    ok, _, joined = _settle(a, 2.0, counted)
    assert ok
    assert a["clock"].phase_cur[0] == 1
    assert list(a["clock"].phase_state) == [DONE, RUNNING]
    assert a["clock"].iter_start[0] == a["clock"].comm_start[0] == 2.0
    assert a["clock"].t_compute_left[0] == 1.0
    assert a["tallies"].iters[0] == 0
    assert list(joined) == ([False, False] if counted else [True, True])  # started phases join anew


@pytest.mark.parametrize("counted", [False, True])
def test_an_iteration_ends_when_its_last_phase_and_compute_end(counted: bool) -> None:
    """Phase 1's bytes are done and compute is done at t = 3.5 s for an iteration begun at 1 s: step 2.5 s,
    communication 3.5 - 1 = 2.5 s, then the next iteration: compute 1 s, bytes 5 again (both phases counted
    with bytes left), and its communication at once (overlap 1): cursor 0, phase 0 running, phase 1 idle."""
    a = _job([0.0, 0.0], 1, 0.0, 0.0, 1.0)
    a["clock"].phase_state[:] = [DONE, RUNNING]
    ok, pend, _ = _settle(a, 3.5, counted)
    assert ok
    t = a["tallies"]
    assert (t.iters[0], t.iterations_total[0]) == (1, 1)
    assert t.step_sum[0] == t.last_step_s[0] == 2.5
    assert t.comm_sum[0] == t.last_comm_s[0] == 2.5
    assert a["clock"].comm_end[0] == 3.5 and a["clock"].iter_start[0] == 3.5
    assert a["clock"].t_compute_left[0] == 1.0
    assert a["clock"].phase_cur[0] == 0 and a["clock"].comm_start[0] == 3.5
    assert list(a["clock"].phase_state) == [RUNNING, IDLE]
    assert list(a["rem"]) == [5.0, 5.0]
    if counted:
        assert list(pend) == [1, 1]


def test_a_step_of_zero_time_is_an_error_naming_the_unit() -> None:
    a = _job([0.0, 0.0], 1, 0.0, 0.0, 3.5)
    a["clock"].phase_state[:] = [DONE, RUNNING]
    ok, _, _ = _settle(a, 3.5, False)
    assert not ok
    assert (a["stats"][2], a["stats"][3]) == (kernels.ERR_ZERO_STEP, 0)


def test_both_kernels_call_the_shared_steps_compiled_without_reference_counts() -> None:
    """The steps are called, not written again, by both loops, and compiled with ``_nrt=False`` (numba's
    ``inline="always"`` would copy every array argument into a counted local at every event)."""
    for name in ("run_interval_numba", "run_interval_lazy"):
        src = inspect.getsource(getattr(kernels, name).py_func)
        for step in (
            "settle_units(",
            "next_unit_event(",
            "advance_units(",
            "advance_flow(",
            "add_link_bytes(",
        ):
            assert step in src, (name, step)
        assert "phase_succ_off[p + 1]" not in src, name  # a phase's successors: end_phases' only
    for step in SHARED:
        assert getattr(kernels, step).targetoptions.get("_nrt") is False, step


def test_first_at_least_is_numpys_left_search_sorted() -> None:
    """The log's binary search (``first_at_least``) against ``np.searchsorted(..., side="left")`` on sorted
    levels with ties, at the ends and between them (a search that stopped at the last tie, or searched the
    whole buffer instead of its first ``n``, would differ)."""
    level = np.array([0.5, 1.0, 1.0, 1.0, 2.0, 3.0, 3.0, 9.0, -1.0, -1.0])  # the last two: beyond n
    n = 8
    for x in (-np.inf, 0.0, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 9.0, 10.0, np.inf):
        assert kernels.first_at_least(level, n, x) == np.searchsorted(level[:n], x, side="left"), x
