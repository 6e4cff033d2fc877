"""The typed records the interval kernels take: the structure, the state and the outputs of an interval,
its settings, the lazy switch's and the lazy kernel's options.

:func:`ainet_gym.sim.backends.numba.interval.run_interval_numba` and
:func:`ainet_gym.sim.backends.numba.lazy.run_interval_lazy` take three array records instead of 55 positional
arrays, grouped by concern:

- :class:`IntervalStructure`: the unit, phase and flow tables of the stacked units and the incidence table
  of their connections, fixed between two restacks (:meth:`BatchSim.set_units
  <ainet_gym.sim.engine.BatchSim.set_units>`; the merged entries' buffers are rewritten in place by each
  split);
- the state (:data:`STATE_FIELDS`): what an interval reads and changes beyond the structure: the engine's
  ``flow_bytes`` (``BatchSim.engine_state.flow_reset``) and ``capacity`` (``engine_state.capacity_bytes_per_s``, flat),
  then every field of :class:`~ainet_gym.sim.state.SimState`, mutated in place;
- :class:`IntervalOutputs`: the per-unit and per-link figures of one interval
  (:class:`~ainet_gym.sim.engine.IntervalMetrics`' arrays), which the kernels zero and fill;

and their scalars in three plain tuples, whose fields the NamedTuples below name (issue-31zc2): the interval's
settings (:class:`IntervalSettings`), the lazy switch's (:class:`LazySwitch`) and the lazy kernel's options
(:class:`LazyOptions`).

The merge of a split (:func:`~ainet_gym.sim.backends.numba.merge.merge_range`, the env's fused decode-and-merge kernel)
takes one more, :class:`MergeTable`: the arrays of the engine's entry table, built once per table.

The field names are defined once, here (the NamedTuples below, and :class:`SimState`'s fields); the
compiled records (numba ``structref`` types of the same fields, :func:`compiled_record`) are built from them.
Why records that are compiled objects rather than tuples: the call cost. A compiled call unboxes every array
it is passed (a reference-counted wrapper per array per call); a record built once holds its arrays'
wrappers, so a call passes one object. Measured on the bench's small scenario (docs/development.md,
"Kernels over typed records"): the same arrays as three records built once cost about half of the
positional call, as tuples or named tuples more than it. The settings change from call to call (the
durations, the switch's arrays are new per interval), so they travel as plain tuples: numba fingerprints a
plain tuple in C (a named tuple costs about 0.5 us more a call to unbox) and a structref built per call
would cost a compiled call more. The kernels read every field into a local once per call (the lazy kernel's
event loop ran 5-15% slower when it read its arrays from the records, docs/development.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import numpy as np

from ainet_gym.sim.state import SimState

if TYPE_CHECKING:
    from ainet_gym.sim.engine import BatchSim, EntryTable

__all__ = [
    "MERGE_FIELDS",
    "OPTIONS_FIELDS",
    "OUTPUTS_FIELDS",
    "SETTINGS_FIELDS",
    "STATE_FIELDS",
    "STRUCTURE_FIELDS",
    "SWITCH_FIELDS",
    "IntervalOutputs",
    "IntervalSettings",
    "IntervalState",
    "IntervalStructure",
    "LazyOptions",
    "LazySwitch",
    "MergeTable",
    "interval_records",
    "kept_records",
    "merge_table",
]


class IntervalStructure(NamedTuple):
    """The stacked units' tables and the incidence table an interval reads (fixed between two restacks)."""

    inst_seg: np.ndarray  # (batch+1,) int64 first merged segment of each instance
    ent_hi: np.ndarray  # (batch,) int64 one past its last compacted entry on a shared link (per split)
    ex_lo: np.ndarray  # (batch,) int64 its first entry on an exclusive link
    fe_lo: np.ndarray  # (flows,) int64 first shared entry of each flow (per split)
    fe_hi: np.ndarray  # (flows,) int64 one past its last
    e_flow: np.ndarray  # (segments,) int64 flow of each compacted entry (per split)
    e_link: np.ndarray  # (segments,) int64 its global link
    e_coef: np.ndarray  # (segments,) float64 its bytes on the link per byte of the flow
    inst_unit: np.ndarray  # (batch+1,) int64 first unit of each instance
    inst_flow: np.ndarray  # (batch+1,) int64 first flow of each instance
    unit_alive: np.ndarray  # (units,) bool (every stacked unit: a departed job is unstacked)
    unit_bg: np.ndarray  # (units,) bool, a background source
    unit_nphases: np.ndarray  # (units,) int64
    unit_compute: np.ndarray  # (units,) float64 s of compute per iteration
    unit_overlap: np.ndarray  # (units,) float64 fraction of the compute overlapping communication
    phase_off: np.ndarray  # (units,) int64 first phase of each unit
    phase_latency: np.ndarray  # (phases,) float64 s
    phase_flow_lo: np.ndarray  # (phases,) int64 first flow of each phase
    phase_flow_n: np.ndarray  # (phases,) int64 its flows
    inst_phase: np.ndarray  # (batch+1,) int64 first phase of each instance
    phase_npred: np.ndarray  # (phases,) int64 predecessors
    phase_succ_off: np.ndarray  # (phases+1,) int64 CSR offsets of the successors
    phase_succ: np.ndarray  # (successor entries,) int64 global phase ids
    flow_unit: np.ndarray  # (flows,) int64
    flow_phase: np.ndarray  # (flows,) int64
    flow_bg: np.ndarray  # (flows,) bool, a background flow
    flow_scale: np.ndarray  # (flows,) float64 bytes against which a remainder rounds to 0
    flow_demand: np.ndarray  # (flows,) float64 bytes/s rate cap


#: the fields of the structure record, in order
STRUCTURE_FIELDS: tuple[str, ...] = tuple(IntervalStructure.__annotations__)
#: the fields of the state record: the engine's bytes per flow and capacities, then :class:`SimState`'s
STATE_FIELDS: tuple[str, ...] = ("flow_bytes", "capacity", *(f.name for f in fields(SimState)))

#: the state record as Python reads it: ``flow_bytes`` ((flows,) float64, ``EngineState.flow_reset``),
#: ``capacity`` ((batch * links,) float64, ``EngineState.capacity_bytes_per_s`` flat), then every field of
#: :class:`SimState` (its own arrays: an interval writes them in place)
IntervalState = NamedTuple("IntervalState", [(n, np.ndarray) for n in STATE_FIELDS])  # type: ignore[misc]


class IntervalOutputs(NamedTuple):
    """The figures of one interval the kernels zero and fill (:class:`~ainet_gym.sim.engine.IntervalMetrics`)."""

    iters: np.ndarray  # (units,) int64 iterations completed
    step_sum: np.ndarray  # (units,) float64 s, their step times summed
    comm_sum: np.ndarray  # (units,) float64 s, their communication times summed
    compute_t: np.ndarray  # (units,) float64 s computing
    active_t: np.ndarray  # (units,) float64 s with a flow active
    link_bytes: np.ndarray  # (batch * links,) float64 bytes moved on each link
    stalled: np.ndarray  # (units,) int64 flows that moved nothing


#: the fields of the outputs record, in order
OUTPUTS_FIELDS: tuple[str, ...] = tuple(IntervalOutputs.__annotations__)


class MergeTable(NamedTuple):
    """What the merge of a split (:func:`~ainet_gym.sim.backends.numba.merge.merge_range`) reads and writes: the arrays of
    an :class:`~ainet_gym.sim.engine.EntryTable`, fixed between two restacks (the outputs rewritten in place)."""

    seg_cand: np.ndarray  # (segments+1,) int64 first candidate of each segment
    cand_gather: np.ndarray  # (candidates,) int64 index into the flat split of each candidate, segment order
    seg_flow: np.ndarray  # (segments,) int64 flow of each segment, sorted
    seg_link: np.ndarray  # (segments,) int64 its global link
    inst_seg: np.ndarray  # (batch+1,) int64 first segment of each instance
    seg_coef: np.ndarray  # (segments,) float64 written: each segment's coefficient under the split
    e_flow: np.ndarray  # (segments,) int64 written: the nonzero entries, compacted per instance
    e_link: np.ndarray  # (segments,) int64 written: their links
    e_coef: np.ndarray  # (segments,) float64 written: their coefficients
    ent_hi: np.ndarray  # (batch,) int64 written: one past each instance's last entry on a shared link
    seg_row: np.ndarray  # (segments,) int64 connection whose whole row the segment sums (-1: none)
    inst_conn: np.ndarray  # (batch+1,) int64 first connection of each instance
    conn_npaths: np.ndarray  # (connections,) int64 candidate paths of each connection
    rowsum: np.ndarray  # (connections,) float64 written: each connection's split row summed in path order
    seg_excl: np.ndarray  # (segments,) bool: the segment's link is exclusive to its flow in its instance
    ex_lo: np.ndarray  # (batch,) int64 written: each instance's first exclusive entry
    fe_lo: np.ndarray  # (flows,) int64 written: first shared entry of each flow
    fe_hi: np.ndarray  # (flows,) int64 written: one past its last
    inst_flow: np.ndarray  # (batch+1,) int64 first flow of each instance


#: the fields of the merge record, in order
MERGE_FIELDS: tuple[str, ...] = tuple(MergeTable.__annotations__)


class IntervalSettings(NamedTuple):
    """What one interval is asked to do, the kernels' first tuple (passed as a plain tuple in this order)."""

    duration: np.ndarray  # (batch,) float64 s each instance advances
    phase_mode: bool  # rate updates per phase (only a phase's last flow is an event)
    quantum: float  # s, completions within it of the first are one event (0: exact)
    inc_min: int  # least flows of an instance for the lazy kernel (< 0: none)
    max_events: int  # events of one interval before TooManyEvents
    n_links: int  # links of one instance
    max_rounds: int  # settle rounds of one event before ERR_SETTLE
    eps_t: float  # s, time tolerance
    eps_b: float  # bytes, relative completion tolerance
    flow_w: np.ndarray  # (flows,) float64 share weights, or (0,): every weight 1


class LazySwitch(NamedTuple):
    """The switch between the two kernels (passed as a plain tuple in this order): its settings, then which
    kernel has each lazy-kernel instance, the events run and the s left at a hand-off, and its cost model's
    columns (``EngineState.switch_cost``, kept across intervals)."""

    on: bool  # BatchSim.lazy_switch
    ratio: float  # BatchSim.lazy_cost_ratio
    handoff: float  # BatchSim.lazy_handoff_solves
    mode: np.ndarray  # (batch,) int64 0 start, 1 full path, 2 lazy, 3 done
    ev: np.ndarray  # (batch,) int64 events run at a hand-off
    t: np.ndarray  # (batch,) float64 s of the interval left at a hand-off
    cost: np.ndarray  # (batch, N_SWITCH) float64 the cost model's running means, savings and path


class LazyOptions(NamedTuple):
    """The lazy kernel's options (passed as a plain tuple in this order): its parallel-rule fallback and the
    compiled backend's switches (``sim/backends/numba/settings.py``), all passed explicitly (no defaults: an
    omitted bool default collides in numba's dispatch cache, issue-31zb2)."""

    par_share: float  # BatchSim.parallel_share
    par_rounds: int  # BatchSim.parallel_max_rounds
    rep_on: bool  # the departure repair (REPAIR_DEPARTURES)
    grp_on: bool  # progress on group clocks (PROGRESS_GROUPS)
    # heap fills over groups: 1 (GROUP_FILL), 2 kept from solve to solve (GROUP_KEEP, which takes precedence),
    # None flow by flow (both off: the group fills are then not compiled into the kernel, issue-31ze2)
    grp_fill: int | None


#: the fields of the three tuples of scalars, in order
SETTINGS_FIELDS: tuple[str, ...] = tuple(IntervalSettings.__annotations__)
SWITCH_FIELDS: tuple[str, ...] = tuple(LazySwitch.__annotations__)
OPTIONS_FIELDS: tuple[str, ...] = tuple(LazyOptions.__annotations__)


def interval_records(sim: BatchSim) -> tuple[IntervalStructure, IntervalState]:
    """The structure and state records of the next interval of ``sim``: its own arrays (the tables of its
    :class:`~ainet_gym.sim.stack.UnitStack`, the entry buffers of its
    :class:`~ainet_gym.sim.engine.EntryTable`, its :class:`~ainet_gym.sim.state.EngineState`'s bytes per
    flow and capacities, flat, and its :class:`SimState`), which both backends' intervals read and write
    (the compiled records hold the same arrays, :func:`compiled_record`)."""
    t, i64 = sim.table, np.int64
    structure = IntervalStructure(
        inst_seg=t.inst_seg, ent_hi=t.ent_hi, ex_lo=t.ex_lo, fe_lo=t.fe_lo, fe_hi=t.fe_hi,
        e_flow=t.e_flow_buf, e_link=t.e_link_buf, e_coef=t.e_coef_buf,
        inst_unit=sim.inst_unit, inst_flow=sim.inst_flow,
        unit_alive=np.ones(sim.n_units, dtype=np.bool_),  # every stacked unit (a departed job is unstacked)
        unit_bg=sim.unit_bg, unit_nphases=sim.unit_nphases, unit_compute=sim.unit_compute,
        unit_overlap=sim.unit_overlap, phase_off=np.asarray(sim.phase_off, dtype=i64),
        phase_latency=sim.phase_latency, phase_flow_lo=sim.phase_flow_lo, phase_flow_n=sim.phase_flow_n,
        inst_phase=sim.inst_phase, phase_npred=sim.phase_npred, phase_succ_off=sim.phase_succ_off,
        phase_succ=sim.phase_succ, flow_unit=np.asarray(sim.flow_unit, dtype=i64), flow_phase=sim.flow_phase,
        flow_bg=sim.flow_bg, flow_scale=sim.flow_scale, flow_demand=sim.flow_demand,
    )  # fmt: skip
    es = sim.engine_state
    cap = np.ascontiguousarray(es.capacity_bytes_per_s, dtype=np.float64).reshape(-1)
    return structure, IntervalState(es.flow_reset, cap, *sim.state.arrays())


_R = TypeVar("_R")


def kept_records(sim: BatchSim, slot: str, build: Callable[[IntervalStructure, IntervalState], _R]) -> _R:
    """``build`` of :func:`interval_records` of ``sim``, kept in ``sim.backend_scratch[slot]`` and built again
    only when an array the records hold was replaced: a restack (a new :class:`~ainet_gym.sim.stack.UnitStack`,
    :class:`~ainet_gym.sim.engine.EntryTable` and :class:`SimState`), new capacities or bytes per flow. Both
    backends keep their records so (made at every interval they cost some 60 us on the numpy backend and what
    the positional call did on the compiled one; docs/development.md, "issue-31zv2"). The key holds the objects
    themselves, so none is freed and its ``id`` reused while the records live; capacities that had to be
    copied (not C-contiguous float64) are read again at the next call."""
    es = sim.engine_state
    stack, table, state_ = sim.stack, sim.table, sim.state
    cap, flow_reset = es.capacity_bytes_per_s, es.flow_reset
    held = sim.backend_scratch.get(slot)
    if held is not None:  # (an explicit identity chain: a generator over the key cost microseconds a call)
        k = held[0]
        if k[0] is stack and k[1] is table and k[2] is state_ and k[3] is cap and k[4] is flow_reset:
            return held[1]  # type: ignore[no-any-return]
    structure, state = interval_records(sim)
    value = build(structure, state)
    if np.shares_memory(state.capacity, cap):
        sim.backend_scratch[slot] = ((stack, table, state_, cap, flow_reset), value)
    return value


def merge_table(table: EntryTable) -> MergeTable:
    """The merge record of ``table``: its own arrays (the merge writes the entry buffers, ``seg_coef``,
    ``ent_hi``, ``ex_lo``, ``fe_lo``, ``fe_hi`` and ``rowsum_buf`` in place)."""
    t = table
    return MergeTable(
        seg_cand=t.seg_cand, cand_gather=t.cand_gather, seg_flow=t.seg_flow, seg_link=t.seg_link,
        inst_seg=t.inst_seg, seg_coef=t.seg_coef, e_flow=t.e_flow_buf, e_link=t.e_link_buf, e_coef=t.e_coef_buf,
        ent_hi=t.ent_hi, seg_row=t.seg_row, inst_conn=t.inst_conn, conn_npaths=t.conn_npaths, rowsum=t.rowsum_buf,
        seg_excl=t.seg_excl, ex_lo=t.ex_lo, fe_lo=t.fe_lo, fe_hi=t.fe_hi, inst_flow=t.inst_flow,
    )  # fmt: skip
