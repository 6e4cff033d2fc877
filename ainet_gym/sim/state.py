"""The mutable state of a batched simulation: typed containers of arrays.

:class:`SimState` holds everything a decision interval changes: per flow the bytes left, per unit the
phase cursor, timers and iteration bookkeeping, per phase its state, per instance the clock. The
structure it runs on (units, phases, flows, connections, candidate paths) is static between restacks
and lives on :class:`~ainet_gym.sim.engine.BatchSim`. Both backends mutate these arrays in place: the
compiled kernel takes them in the order of the fields (:meth:`SimState.arrays`), the numpy backend
writes them through ``sim.state``.

:class:`WorldState` holds what the world adds per episode and instance (generators, step counts, ECMP hash
seeds, background offsets, link failures, the jobs in their slots and their GPUs); :class:`EngineState` what
the engine keeps beside :class:`SimState` (the split, the pinned splits, the part flows' split and bytes, the
capacities, the lazy switch's cost model); the env's own (:class:`ainet_gym.envs.state.EnvState`) the link
history and the last result. Together they are the episode state; a snapshot is a copy of them
(docs/development.md, "State as data").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

import numpy as np

__all__ = [
    "DONE", "IDLE", "PRE_COMM", "RUNNING", "WAITING", "EngineState", "SimState", "WorldState",
    "clone_generator", "instance_rows",
]  # fmt: skip

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

    Its fields are those of the interval kernels' state record (:data:`ainet_gym.sim.records.STATE_FIELDS`).
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


def instance_rows(off: np.ndarray, src: np.ndarray) -> np.ndarray:
    """The rows of the instances ``src`` (in that order) of a table whose instance ``b`` holds the rows
    ``off[b]:off[b + 1]`` (``off``: (instances + 1,) offsets), concatenated."""
    off = np.asarray(off, dtype=np.int64)
    lo, n = off[src], off[src + 1] - off[src]
    within = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    return np.repeat(lo, n) + within


@dataclass(eq=False)
class EngineState:
    """What a :class:`~ainet_gym.sim.engine.BatchSim` keeps from interval to interval beside its
    :class:`SimState`: the inputs of the next interval (the split, the capacities), what the split leaves
    behind (the pinned splits of ``routing.reroute: new_transfers``, the split the part flows of
    ``routing.split_flows: independent`` were handed their bytes under, the bytes each flow starts an
    iteration with) and the lazy switch's cost model. Owned by :attr:`BatchSim.engine_state
    <ainet_gym.sim.engine.BatchSim.engine_state>`, read as ``sim.engine_state.<field>``.

    The fields come in three layouts, by what their first axis counts (:attr:`CONN_FIELDS`,
    :attr:`FLOW_FIELDS`, :attr:`INSTANCE_FIELDS`): a copy of some instances (:meth:`take`) needs the
    first connection and flow of each instance (the engine's structure). A snapshot of the engine is a copy
    of this container (:meth:`copy`), a restore its :meth:`load` (:meth:`BatchSim.load_engine_state
    <ainet_gym.sim.engine.BatchSim.load_engine_state>`, which merges the split's entries again).
    """

    split: np.ndarray  # (connections, max_paths) float64, the split of the next interval
    # (connections, max_paths) float64 routing.reroute new_transfers: the split each connection's carried
    # transfers started with (0 where none is carried); None without carry flows
    pinned: np.ndarray | None
    # (connections, max_paths) float64 routing.split_flows independent: the split the part flows' remainders
    # were handed under (BatchSim.set_split); None: none yet, or no part flows
    part_split: np.ndarray | None
    flow_reset: (
        np.ndarray
    )  # (flows,) float64 bytes each flow starts an iteration with (the kernels' flow_bytes)
    capacity_bytes_per_s: np.ndarray  # (batch, links) float64 bytes/s during the next interval (the world's)
    switch_cost: np.ndarray  # (batch, kernels.N_SWITCH) float64 the lazy switch's cost model, kernel-updated
    # (units,) float64 > 0 the share weight of every flow of each stacked unit (the level rate / weight is
    # made max-min fair; BatchSim.set_share_weights); None: every weight 1
    unit_weight: np.ndarray | None = None
    # (connections, max_paths) float64 routing.reroute_held_weight part: the coefficient of the held parts of
    # each (connection, path), the fraction the path had just before the split change that last handed them
    # bytes (> 0: it lost share), 1 before any; their bytes are stored as held bytes / it. None: held parts
    # at coefficient 1 (routing.reroute_held_weight one), or no held parts
    held_weight: np.ndarray | None = None

    #: fields with one row per connection, per flow, per instance and per unit
    CONN_FIELDS = ("split", "pinned", "part_split", "held_weight")
    FLOW_FIELDS = ("flow_reset",)
    INSTANCE_FIELDS = ("capacity_bytes_per_s", "switch_cost")
    UNIT_FIELDS = ("unit_weight",)
    #: fields that may be None on either side of a :meth:`load` (not known yet; all weights 1)
    OPTIONAL_FIELDS = ("part_split", "unit_weight", "held_weight")

    def take(
        self,
        src: Sequence[int] | np.ndarray,
        inst_conn: np.ndarray,
        inst_flow: np.ndarray,
        inst_unit: np.ndarray | None = None,
    ) -> EngineState:
        """A copy of the instances ``src`` (in that order; repeats allowed) of this state, whose instance ``b``
        has the connections ``inst_conn[b]:inst_conn[b + 1]``, the flows ``inst_flow[b]:inst_flow[b + 1]``
        and the units ``inst_unit[b]:inst_unit[b + 1]`` (the layout of the engine the state is of;
        ``inst_unit`` is needed only when :attr:`unit_weight` is set)."""
        idx = np.asarray(src, dtype=np.int64)
        rows = {"conn": instance_rows(inst_conn, idx), "flow": instance_rows(inst_flow, idx), "inst": idx}
        if self.unit_weight is not None:
            if inst_unit is None:
                raise ValueError(
                    "EngineState.take: unit_weight is set; pass inst_unit (the units of each instance)"
                )
            rows["unit"] = instance_rows(inst_unit, idx)
        out = {}
        for kind, names in (
            ("conn", self.CONN_FIELDS),
            ("flow", self.FLOW_FIELDS),
            ("inst", self.INSTANCE_FIELDS),
            ("unit", self.UNIT_FIELDS),
        ):
            for k in names:
                v = getattr(self, k)
                out[k] = None if v is None else np.array(v[rows[kind]], dtype=np.float64)
        return EngineState(**out)

    def copy(self) -> EngineState:
        """A deep copy (every array copied)."""
        return EngineState(
            *(None if a is None else np.array(a, dtype=np.float64) for a in _engine_fields_of(self))
        )

    def load(self, other: EngineState) -> None:
        """Make this state a copy of ``other``, whose every array has the shape of this state's (a copy of
        this engine's state, or :meth:`take` of one with the same units). Each field is replaced by a copy
        (not written in place: an earlier result may hold the capacities, a structure the bytes per flow);
        ``part_split``, ``unit_weight`` and ``held_weight`` may be None on either side (no split known yet; every
        weight 1)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name not in self.OPTIONAL_FIELDS and (mine is None) != (theirs is None):
                have = "None" if theirs is None else f"shape {theirs.shape}"
                raise ValueError(
                    f"EngineState.load: {f.name} is {have}, this engine's is "
                    f"{'None' if mine is None else mine.shape} (another structure)"
                )
            if mine is not None and theirs is not None and mine.shape != theirs.shape:
                raise ValueError(
                    f"EngineState.load: {f.name} has shape {theirs.shape}, this engine's {mine.shape} (another structure)"
                )
            setattr(self, f.name, None if theirs is None else np.array(theirs, dtype=np.float64))


_engine_fields_of = attrgetter(
    *(f.name for f in fields(EngineState))
)  # every field of an EngineState, in order


def clone_generator(g: np.random.Generator) -> np.random.Generator:
    """A generator of the same bit generator class in the same state as ``g`` (independent of it)."""
    bit = type(g.bit_generator)()
    bit.state = g.bit_generator.state
    return np.random.Generator(bit)


def _take(value: object, src: np.ndarray) -> object:
    """The instances ``src`` of one per-instance field, copied: an array's rows, a list's items (a list of
    generators cloned, a list of lists copied one level down; their items, job specs and read-only GPU
    arrays, are shared)."""
    if isinstance(value, np.ndarray):
        return value[src]  # advanced indexing: a copy
    if isinstance(value, list):
        items = [value[s] for s in src.tolist()]
        if items and isinstance(items[0], np.random.Generator):
            return [clone_generator(g) for g in items]
        return [list(x) for x in items]
    raise TypeError(f"WorldState field of type {type(value).__name__}: not a per-instance field")


@dataclass(eq=False)
class WorldState:
    """The per-episode state of the instances of a :class:`~ainet_gym.sim.world.FabricWorld`, beside the
    engine's (:class:`SimState`): what the world draws and counts per instance ``b`` of its ``batch``.

    The structure the world runs on (the fabric, its candidate paths, the compiled units, the decision
    interval) is fixed after construction (or cached by content) and is not here. Every field but
    :attr:`dynamics_changed` has one entry per instance along its first axis, which is what
    :meth:`take` and :meth:`load` copy; a snapshot of the world is a copy of this container
    (:meth:`copy`) plus the engine's state.
    """

    rngs: list[np.random.Generator]  # (batch,) each instance's generator: placement, jitter, failures, churn
    step_count: np.ndarray  # (batch,) int64 intervals run in the episode
    hash_seed: np.ndarray  # (batch,) int64 ECMP hash seed, drawn at reset
    bg_offset: np.ndarray  # (batch, background) int64 step offset of each periodic background (jittered)
    fail_until: np.ndarray  # (batch, links) int64 repair step of each link, -1: up (the LinkState's array)
    cap_factor: np.ndarray  # (batch, links) share of the nominal capacity (the LinkState's array)
    jobs: list[list[Any]]  # (batch, job slots) the JobSpec in each slot (None: empty)
    gpus: list[list[np.ndarray | None]]  # (batch, job slots) its GPU ids, read-only arrays (None: empty)
    dynamics_changed: bool  # whether the last advance of the dynamics changed a capacity or restacked

    #: fields with one entry per instance (all but ``dynamics_changed``)
    INSTANCE_FIELDS = (
        "rngs",
        "step_count",
        "hash_seed",
        "bg_offset",
        "fail_until",
        "cap_factor",
        "jobs",
        "gpus",
    )

    @property
    def batch(self) -> int:
        """Instances."""
        return int(self.step_count.shape[0])

    def take(self, src: Sequence[int] | np.ndarray) -> WorldState:
        """A copy of the instances ``src`` (in that order; repeats allowed): instance ``b`` of the result is
        instance ``src[b]`` of this state."""
        idx = np.asarray(src, dtype=np.int64)
        out = {k: _take(getattr(self, k), idx) for k in self.INSTANCE_FIELDS}
        return WorldState(**out, dynamics_changed=self.dynamics_changed)

    def copy(self) -> WorldState:
        """A deep copy (every array and generator copied; job specs and GPU arrays shared, read-only)."""
        return self.take(np.arange(self.batch))

    def load(self, other: WorldState, src: Sequence[int] | np.ndarray | None = None) -> None:
        """Write the instances ``src`` of ``other`` (default: all, ``other`` of the same batch) into this
        state, in place: the arrays keep their identity (the :class:`~ainet_gym.sim.dynamics.LinkState`
        shares two of them), the lists and generators are replaced by copies. ``dynamics_changed`` is
        ``other``'s; the caller decides it for a copy of other instances."""
        idx = np.arange(self.batch) if src is None else np.asarray(src, dtype=np.int64)
        if idx.shape != (self.batch,):
            raise ValueError(f"load: src has shape {idx.shape}, expected ({self.batch},) (one per instance)")
        for k in self.INSTANCE_FIELDS:
            mine, theirs = getattr(self, k), _take(getattr(other, k), idx)
            if isinstance(mine, np.ndarray):
                mine[...] = theirs
            else:
                setattr(self, k, theirs)
        self.dynamics_changed = other.dynamics_changed
