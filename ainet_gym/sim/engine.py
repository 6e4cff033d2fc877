"""The fluid simulation: jobs that compute and communicate on their own clocks, batched over instances.

Data flow of one decision interval (see docs/model.md):

    split (connections, paths) -> incidence entries (flow, link, coef)
    -> loop: active flows -> max-min fair rates -> time to the next event
             -> advance bytes, timers, link bytes -> process events (phase / iteration ends)
    -> per-job and per-link metrics of the interval

Two backends run the interval (``BatchSim(..., backend=)``, see :func:`resolve_backend`), each a strategy
for the stages of the step behind one interface (:mod:`ainet_gym.sim.backends`, chosen by name there only):
``numba`` walks the whole interval of every instance in one compiled call (:mod:`ainet_gym.sim.backends.numba`),
re-solving an instance only when its set of active flows changed; ``numpy`` (the reference,
:mod:`ainet_gym.sim.backends.numpy_ref`) vectorises each event over the batch. They agree bit for bit on the
shipped scenarios (``python -m ainet_gym.checks.parity``). What both share lives in modules of one concern
(issue 31 item 3), which this module re-exports by name and defines nothing itself:

- :mod:`~ainet_gym.sim.unit`: :class:`CompiledUnit`, a job or background source as arrays ready for stacking;
- :mod:`~ainet_gym.sim.compile_unit`: :func:`compile_job`, :func:`compile_background`;
- :mod:`~ainet_gym.sim.job_tables`: a job's collectives as phases, flows, members and connections
  (:func:`collective_groups`, :func:`rotation_period`);
- :mod:`~ainet_gym.sim.conn_tables`: the connections' candidate paths, cached per fabric (:func:`max_hops`);
- :mod:`~ainet_gym.sim.split_parts`: the part flows of ``routing.split_flows: independent``;
- :mod:`~ainet_gym.sim.entries`: :class:`EntryTable`, the merged incidence entries of a structure;
- :mod:`~ainet_gym.sim.interval`: :class:`IntervalMetrics`, :class:`TooManyEvents`, :data:`EPS_T`, :data:`EPS_B`;
- :mod:`~ainet_gym.sim.batch`: :class:`BatchSim`, the stacked instances and their interval, whose base classes
  are its structure side (:mod:`~ainet_gym.sim.batch_units`: stacking, restacks, :class:`UnitSnapshot`, share
  weights) and its split side (:mod:`~ainet_gym.sim.batch_split`: the split, the part and carry flows, the
  merged entries, :data:`SPLIT_TOL`).

A *unit* is a compiled job or a background source. Units of all instances of a batch are stacked
into flat arrays with per-instance offsets on link ids, so one call of the allocator serves every
instance at each event (iterations = max over instances, not the sum).

Job timeline of one iteration (``c`` = compute time, ``o`` = overlap):
compute runs for ``c``; communication starts at ``(1 - o) c`` and runs its phases in order, each phase
paying ``steps * path latency`` before its bytes flow; the iteration ends when both compute and
communication are done. So step time = c + max(0, comm - o c) (exposed communication).
"""

from __future__ import annotations

from ainet_gym.sim.backends import BACKEND_ENV, BACKENDS, resolve_backend
from ainet_gym.sim.batch import BatchSim
from ainet_gym.sim.batch_split import SPLIT_TOL
from ainet_gym.sim.batch_units import UnitSnapshot
from ainet_gym.sim.compile_unit import compile_background, compile_job
from ainet_gym.sim.conn_tables import max_hops
from ainet_gym.sim.entries import EntryTable
from ainet_gym.sim.interval import EPS_B, EPS_T, IntervalMetrics, TooManyEvents
from ainet_gym.sim.job_tables import collective_groups, rotation_period
from ainet_gym.sim.state import SimState
from ainet_gym.sim.unit import NO_PATH, CompiledUnit

__all__ = [
    "BACKENDS",
    "BACKEND_ENV",
    "EPS_B",
    "EPS_T",
    "NO_PATH",
    "SPLIT_TOL",
    "BatchSim",
    "CompiledUnit",
    "EntryTable",
    "IntervalMetrics",
    "SimState",
    "TooManyEvents",
    "UnitSnapshot",
    "collective_groups",
    "compile_background",
    "compile_job",
    "max_hops",
    "resolve_backend",
    "rotation_period",
]
