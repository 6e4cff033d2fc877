"""What one interval of the simulation produces, and when it gives up, for both backends: the event loop's
tolerances (:data:`EPS_T`, :data:`EPS_B`), the interval's figures (:class:`IntervalMetrics`) and the error of an
interval with too many events (:class:`TooManyEvents`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EPS_B", "EPS_T", "IntervalMetrics", "TooManyEvents"]


#: s: timers at or below this are done (both backends)
EPS_T = 1e-12
#: relative: a flow with ``rem <= EPS_B * bytes`` is done (both backends)
EPS_B = 1e-9


class TooManyEvents(RuntimeError):
    """An interval had more events than its ``max_events`` (:meth:`BatchSim.run_interval`); the simulation is
    then mid-interval and must be reset before it runs again. ``metrics``: the solver counters of the
    events run (numba backend; the per-job and per-link figures are not filled), or None."""

    def __init__(self, message: str, metrics: IntervalMetrics | None = None) -> None:
        super().__init__(message)
        self.metrics = metrics


@dataclass
class IntervalMetrics:
    """What one decision interval produced, per instance. Arrays over the batch's flat job slots."""

    duration_s: np.ndarray  # (batch,)
    iterations: np.ndarray  # (units,) iterations completed in the interval
    step_time_sum_s: np.ndarray  # (units,)
    comm_time_sum_s: np.ndarray  # (units,)
    compute_time_s: np.ndarray  # (units,) time spent computing in the interval
    active_time_s: np.ndarray  # (units,) time the job existed (started) in the interval
    link_bytes: np.ndarray  # (batch, links)
    stalled_flows: np.ndarray  # (batch,) active flows with zero rate at some event
    events: int  # global event-loop iterations
    solver_iterations: int  # parallel-rule rounds (numpy backend, phase mode, quantum) plus fills (numba)
    incremental_solves: int = 0  # numba lazy kernel: solves that re-filled part of the flows
    flows_refilled: int = 0  # flows those solves re-filled, summed over them
    flows_active: int = 0  # active flows at those solves, summed over them
    full_fills: int = 0  # numba lazy kernel: fills of every active flow
    rates_written: int = 0  # numba lazy kernel: flows whose rate a solve changed (bitwise) or set (arrivals)
    rates_moved: int = 0  # of those, changed by more than 1e-12 relative (or set), summed over the solves
    parallel_solves: int = 0  # numba lazy kernel: solves by the parallel rule (kernels.PARALLEL_SHARE)
    full_path_events: int = 0  # numba: events of lazy-kernel instances on the full path (kernels.LAZY_SWITCH)
    lazy_switches: int = 0  # numba: hand-offs from the full path to the lazy kernel at an event
    full_path_work: int = 0  # numba: work the switch's cost model counted on the full path (entry visits)
    lazy_work: int = 0  # numba: and in the lazy kernel
    repairs: int = (
        0  # numba lazy kernel: incremental solves the departure repair made (kernels.REPAIR_DEPARTURES)
    )
    repairs_declined: int = 0  # and solves it tried and left to the restart rule
    flows_checked: int = 0  # active flows the repairs read (visits), beside the flows they re-filled

    @property
    def flows_touched(self) -> int:
        """Flows the incremental solves re-filled plus those the departure repair read (visits), summed over
        the solves: over :attr:`flows_active`, the share of the active flows an event touches."""
        return self.flows_refilled + self.flows_checked

    @classmethod
    def empty(cls, duration_s: np.ndarray, n_units: int, n_links: int) -> IntervalMetrics:
        """Uninitialised accumulators, for the compiled interval, which zeroes each instance's part on that
        instance's thread (:func:`ainet_gym.sim.backends.numba.interval.run_interval_numba`) rather than here, serially."""
        b, u = duration_s.shape[0], n_units
        f64, i64 = np.float64, np.int64
        return cls(
            duration_s=duration_s,
            iterations=np.empty(u, dtype=i64),
            step_time_sum_s=np.empty(u, dtype=f64),
            comm_time_sum_s=np.empty(u, dtype=f64),
            compute_time_s=np.empty(u, dtype=f64),
            active_time_s=np.empty(u, dtype=f64),
            link_bytes=np.empty((b, n_links), dtype=f64),
            stalled_flows=np.empty(b, dtype=i64),
            events=0,
            solver_iterations=0,
        )

    @classmethod
    def zeros(cls, duration_s: np.ndarray, n_units: int, n_links: int) -> IntervalMetrics:
        """Zero accumulators for an interval of ``duration_s`` (batch,), which both backends add into."""
        b, u = duration_s.shape[0], n_units
        return cls(
            duration_s=duration_s,
            iterations=np.zeros(u, dtype=np.int64),
            step_time_sum_s=np.zeros(u),
            comm_time_sum_s=np.zeros(u),
            compute_time_s=np.zeros(u),
            active_time_s=np.zeros(u),
            link_bytes=np.zeros((b, n_links)),
            stalled_flows=np.zeros(b, dtype=np.int64),
            events=0,
            solver_iterations=0,
        )
