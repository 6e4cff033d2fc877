"""The cross-check's per-iteration records and the matched-iteration comparison (issue-27zy): the fluid
side's iteration log against a hand computation (no ns-3 needed), and :func:`matched_figures` on two
logs whose counts differ. The ns-3 side's log is tested in tests/checks/test_crosscheck.py (``make
check-ns3``)."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.checks.crosscheck import CrosscheckConfig
from ainet_gym.checks.crosscheck.compare import matched_figures
from ainet_gym.checks.crosscheck.fluid import IterationLog, iteration_log, run_fluid
from ainet_gym.scenario.loader import load_scenario

GBPS = 10.0
EFF = 0.95  # the fabric's link_efficiency (payload per wire bit)
INTERVAL_MS = 4.0
STEPS = 6
# per job: GPUs, compute (ms), AllReduce bytes. Two GPUs in a ring: each hop moves S bytes, on its own NIC
# link (one switch, one GPU per host, no link shared between the jobs), so communication takes S / rate.
JOBS = {"fast": (2, 0.5, 1e6), "slow": (2, 1.0, 2e6)}


def _two_jobs() -> dict:
    return {
        "name": "xc-iter-log",
        "fabric": {
            "topology": "single_switch",
            "hosts": 4,
            "gpus_per_host": 1,
            "nic_gbps": GBPS,
            "profile": "roce",
            "hop_latency_us": 0.0,
            "link_efficiency": EFF,
        },
        "workload": {
            "jobs": [
                {
                    "name": name,
                    "gpus": g,
                    "compute_ms": c,
                    "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": s}],
                }
                for name, (g, c, s) in JOBS.items()
            ]
        },
        "dynamics": {"episode_steps": STEPS, "decision_interval_ms": INTERVAL_MS},
    }


def _known(n_per_interval: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which iterations' comm and end time the log can tell (per interval with ``n`` iterations: the last
    one's both, the one before's end, and its comm when ``n == 2``)."""
    comm, end = [], []
    for n in n_per_interval[n_per_interval > 0]:
        comm += [False] * max(n - 2, 0) + [n == 2] * min(n - 1, 1) + [True]
        end += [False] * max(n - 2, 0) + [True] * min(n - 1, 1) + [True]
    return np.asarray(comm, dtype=bool), np.asarray(end, dtype=bool)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_fluid_iteration_log_is_the_hand_computed_timeline(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two jobs on links of their own: every iteration communicates for tau = S * 8 / (rate * efficiency)
    and iteration i ends at (i + 1) (compute + tau). The log holds those figures at the places it can
    tell (the last two ends and the last comm of each interval, both comms of an interval with two), NaN
    elsewhere, and its sums reproduce the run's; the two jobs end 2-3 and 1-2 iterations per interval,
    so every case of the reconstruction is exercised."""
    monkeypatch.setenv("AINET_GYM_BACKEND", backend)
    sc = load_scenario(_two_jobs())
    run = run_fluid(sc, "ecmp", 0, STEPS, CrosscheckConfig(fluid_repeats=0))
    seen = set()
    for j, jp in enumerate(run.jobs):
        _, compute_ms, nbytes = JOBS[jp.name]
        tau = nbytes * 8 / (GBPS * 1e9 * EFF)
        step = compute_ms * 1e-3 + tau
        lg = run.iteration_log[j]
        n = run.step_iterations[:, j]
        assert len(lg.comm_s) == len(lg.end_s) == len(lg.comm_cum_s) == int(run.iterations[j]) == n.sum()
        # the hand computation's iterations per interval: those ending in (k, k + 1] intervals
        ends = step * np.arange(1, 200)
        hand = np.histogram(ends, bins=np.arange(STEPS + 1) * INTERVAL_MS * 1e-3)[0]
        assert n.tolist() == hand.tolist()
        comm_known, end_known = _known(n)
        assert np.isfinite(lg.comm_s).tolist() == comm_known.tolist()
        assert np.isfinite(lg.end_s).tolist() == end_known.tolist()
        assert np.isfinite(lg.comm_cum_s[np.cumsum(n[n > 0]) - 1]).all()  # the interval sums are always known
        i = np.flatnonzero(end_known)
        assert lg.end_s[i] == pytest.approx(step * (i + 1), rel=1e-6)
        i = np.flatnonzero(comm_known)
        assert lg.comm_s[i] == pytest.approx(np.full(i.size, tau), rel=1e-6)
        i = np.flatnonzero(np.isfinite(lg.comm_cum_s))
        assert lg.comm_cum_s[i] == pytest.approx(tau * (i + 1), rel=1e-6)
        assert lg.comm_cum_s[-1] == pytest.approx(run.comm_sum_s[j], rel=1e-12)
        seen |= set(n.tolist())
    assert {1, 2, 3} <= seen  # one, two and three iterations in an interval all occurred


def test_iteration_log_reconstructs_an_interval_of_three() -> None:
    """By hand: intervals ending 1, 0, 3 and 2 iterations; the first comm of the three-iteration interval
    and the end of its first are NaN, the sum up to its second is not."""
    n = np.array([1, 0, 3, 2])
    comm_sum = np.array([2.0, 0.0, 9.0, 7.0])
    last_comm = np.array([2.0, np.nan, 4.0, 3.0])
    last_step = np.array([5.0, np.nan, 6.0, 5.5])
    last_end = np.array([5.0, np.nan, 23.0, 35.0])
    lg = iteration_log(n, comm_sum, last_comm, last_step, last_end)
    np.testing.assert_array_equal(lg.comm_s, [2.0, np.nan, np.nan, 4.0, 4.0, 3.0])
    np.testing.assert_array_equal(lg.end_s, [5.0, np.nan, 17.0, 23.0, 29.5, 35.0])
    np.testing.assert_array_equal(lg.comm_cum_s, [2.0, np.nan, 7.0, 11.0, 15.0, 18.0])


def test_matched_figures_compare_the_first_common_iterations() -> None:
    """The fluid completes one iteration more than ns-3: the matched means are over ns-3's count, the lag
    is ns-3's end of that iteration less the fluid's; with the counts swapped the roles follow; a cut the
    fluid's log cannot tell gives None, not a guess."""
    fluid = IterationLog(np.array([10.0, 20.0, 6.0]) * 1e-3, np.array([30.0, 70.0, 96.0]) * 1e-3,
                         np.array([10.0, 30.0, 36.0]) * 1e-3)  # fmt: skip
    ns3 = IterationLog(np.array([11.0, 25.0]) * 1e-3, np.array([31.0, 76.5]) * 1e-3,
                       np.array([11.0, 36.0]) * 1e-3)  # fmt: skip
    m = matched_figures(fluid, ns3)
    assert (m["matched_iterations"], m["fluid_iterations"], m["ns3_iterations"]) == (2, 3, 2)
    assert m["matched_comm_ms"]["fluid"] == pytest.approx(15.0)
    assert m["matched_comm_ms"]["ns3"] == pytest.approx(18.0)
    assert m["matched_rel_error"] == pytest.approx((15.0 - 18.0) / 18.0)
    assert m["lag_ms"] == pytest.approx(6.5)
    r = matched_figures(ns3, fluid)  # ns-3 ahead: the roles swap, the lag changes sign
    assert r["matched_rel_error"] == pytest.approx((18.0 - 15.0) / 15.0) and r["lag_ms"] == pytest.approx(
        -6.5
    )
    blind = IterationLog(
        fluid.comm_s, np.array([30.0, np.nan, 96.0]) * 1e-3, np.array([10.0, np.nan, 36.0]) * 1e-3
    )
    b = matched_figures(blind, ns3)
    assert b["matched_comm_ms"] == {"fluid": None, "ns3": pytest.approx(18.0)}
    assert b["matched_rel_error"] is None and b["lag_ms"] is None
    empty = matched_figures(IterationLog(np.zeros(0), np.zeros(0), np.zeros(0)), ns3)
    assert empty["matched_iterations"] == 0 and empty["matched_rel_error"] is None
