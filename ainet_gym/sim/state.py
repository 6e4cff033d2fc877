"""The mutable state of a batched simulation: one typed container of arrays.

:class:`SimState` holds everything a decision interval changes: per flow the bytes left, per unit the
phase cursor, timers and iteration bookkeeping, per phase its state, per instance the clock. The
structure it runs on (units, phases, flows, connections, candidate paths) is static between restacks
and lives on :class:`~ainet_gym.sim.engine.BatchSim`. Both backends mutate these arrays in place: the
compiled kernel takes them in the order of the fields (:meth:`SimState.arrays`), the numpy backend
writes them through ``sim.state``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter

import numpy as np

__all__ = ["DONE", "IDLE", "PRE_COMM", "RUNNING", "WAITING", "SimState"]

# unit phase cursor values (in communication, the cursor counts the phases done)
WAITING = -2  # before start_ms
PRE_COMM = -1  # computing, communication not started yet
# phase states
IDLE = 0  # waiting for its predecessors (or its unit is not communicating)
RUNNING = 1  # paying its latency, then moving its bytes
DONE = 2


@dataclass(eq=False)
class SimState:
    """Mutable per-flow, per-unit, per-phase and per-instance state of a :class:`BatchSim`.

    The field order is the order in which :func:`ainet_gym.sim.kernels.run_interval_numba` takes them.
    Every array is C-contiguous and of the dtype given below (the kernel mutates them in place).
    """

    rem: np.ndarray  # (flows,) float64 bytes left in the current iteration (inf: background)
    phase_cur: np.ndarray  # (units,) int64 WAITING, PRE_COMM or the number of phases done
    t_start_left: np.ndarray  # (units,) float64 s until the job starts (start_ms)
    t_compute_left: np.ndarray  # (units,) float64 s of compute left in the current iteration
    t_comm_start_left: np.ndarray  # (units,) float64 s until the communication starts (overlap)
    phase_state: np.ndarray  # (phases,) int64 IDLE, RUNNING or DONE
    phase_wait: np.ndarray  # (phases,) int64 predecessors not done yet
    phase_lat_left: np.ndarray  # (phases,) float64 s of latency left to pay (RUNNING phases)
    iter_start: np.ndarray  # (units,) float64 s, simulated time the current iteration started
    comm_start: np.ndarray  # (units,) float64 s, time its communication started
    comm_end: np.ndarray  # (units,) float64 s, time its communication ended
    iterations_total: np.ndarray  # (units,) int64 iterations completed since the unit was stacked
    last_step_s: np.ndarray  # (units,) float64 s, step time of the last completed iteration (nan: none)
    last_comm_s: np.ndarray  # (units,) float64 s, its communication time (nan: none)
    bg_on: np.ndarray  # (units,) bool, background units switched on this interval (False for jobs)
    time_s: np.ndarray  # (batch,) float64 s, simulated clock of each instance

    #: fields with one entry per unit, per phase and per flow (what a restack carries to surviving units)
    UNIT_FIELDS = (
        "phase_cur", "t_start_left", "t_compute_left", "t_comm_start_left", "iter_start", "comm_start",
        "comm_end", "iterations_total", "last_step_s", "last_comm_s", "bg_on",
    )  # fmt: skip
    PHASE_FIELDS = ("phase_state", "phase_wait", "phase_lat_left")

    @classmethod
    def initial(
        cls,
        flow_bytes: np.ndarray,
        unit_start_s: np.ndarray,
        unit_compute_s: np.ndarray,
        unit_overlap: np.ndarray,
        unit_inst: np.ndarray,
        phase_npred: np.ndarray,
        time_s: np.ndarray,
    ) -> SimState:
        """The state of freshly stacked units: every job at the start of its first iteration (or
        waiting for its start time), every phase idle, background off; the clocks ``time_s`` (batch,)."""
        started = unit_start_s > 0
        U = unit_start_s.shape[0]
        return cls(
            rem=np.array(flow_bytes, dtype=np.float64),
            phase_cur=np.where(started, WAITING, PRE_COMM).astype(np.int64),
            t_start_left=np.array(unit_start_s, dtype=np.float64),
            t_compute_left=np.where(started, 0.0, unit_compute_s).astype(np.float64),
            t_comm_start_left=np.where(started, 0.0, (1.0 - unit_overlap) * unit_compute_s).astype(
                np.float64
            ),
            phase_state=np.full(phase_npred.shape[0], IDLE, dtype=np.int64),
            phase_wait=np.array(phase_npred, dtype=np.int64),
            phase_lat_left=np.zeros(phase_npred.shape[0]),
            iter_start=(time_s[unit_inst] + unit_start_s).astype(np.float64),
            comm_start=np.zeros(U),
            comm_end=np.zeros(U),
            iterations_total=np.zeros(U, dtype=np.int64),
            last_step_s=np.full(U, np.nan),
            last_comm_s=np.full(U, np.nan),
            bg_on=np.zeros(U, dtype=bool),
            time_s=np.ascontiguousarray(time_s, dtype=np.float64),
        )

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The fields in their order (the kernel's state parameters)."""
        return _fields_of(self)

    def copy(self) -> SimState:
        """A deep copy (every array copied)."""
        return SimState(*(a.copy() for a in self.arrays()))


_fields_of = attrgetter(*(f.name for f in fields(SimState)))  # every field of a SimState, in order
