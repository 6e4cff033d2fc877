"""The batched simulation (:class:`BatchSim`): ``batch`` instances of one fabric stacked, the units' state and
the engine's state beside it, the split and its merged entries, and the interval run on the backend's strategy;
a restack carries the surviving units' state (:class:`UnitSnapshot`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from ainet_gym.fabric.topology import Fabric
from ainet_gym.sim.backends import get_backend
from ainet_gym.sim.backends.base import Pending, Then
from ainet_gym.sim.backends.numba import settings as _settings
from ainet_gym.sim.backends.numba import threads as _threads
from ainet_gym.sim.entries import EntryTable
from ainet_gym.sim.interval import IntervalMetrics
from ainet_gym.sim.stack import UnitStack, stack_units
from ainet_gym.sim.state import PRE_COMM, RUNNING, EngineState, SimState
from ainet_gym.sim.unit import CompiledUnit

__all__ = ["SPLIT_TOL", "BatchSim", "UnitSnapshot"]


_STATE_FIELDS = tuple(f.name for f in fields(SimState))  # read through BatchSim.state only


_ENGINE_FIELDS = tuple(f.name for f in fields(EngineState))  # read through BatchSim.engine_state only


_STACK_FIELDS = tuple(f.name for f in fields(UnitStack))  # BatchSim attributes that view the structure


#: routing.split_flows independent: a connection's split row changed when a fraction moved by more than this
SPLIT_TOL = 1e-12


@dataclass(frozen=True)
class UnitSnapshot:
    """The state of stacked units, taken by :meth:`BatchSim.snapshot_units`, with the layout to find each
    unit's flows and phases in it."""

    state: SimState  # a copy of the state
    flow_off: np.ndarray  # (units,) first flow of each unit
    n_flows: np.ndarray  # (units,) flows of each unit
    phase_off: np.ndarray  # (units,) first phase of each unit
    n_phases: np.ndarray  # (units,) phases of each unit
    # routing.reroute new_transfers: each connection's pinned split (conns, max_paths) and the layout to find
    # a unit's connections in it; None without carry flows
    pinned: np.ndarray | None = None
    conn_off: np.ndarray | None = None  # (units,) first connection of each unit
    n_conns: np.ndarray | None = None  # (units,) connections of each unit
    # (units,) each unit's share weight (EngineState.unit_weight), None: every weight 1
    unit_weight: np.ndarray | None = None


def _initial_state(stack: UnitStack, time_s: np.ndarray) -> SimState:
    """The initial state of the units of ``stack`` with the clocks ``time_s`` ((batch,) s, copied)."""
    return SimState.initial(
        stack.flow_bytes, stack.unit_start, stack.unit_compute, stack.unit_overlap, stack.unit_inst,
        stack.phase_npred, np.array(time_s, dtype=np.float64),
    )  # fmt: skip


def _ranges_index(dst_off: np.ndarray, src_off: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Element indices of the ranges ``dst_off[i] + (0..n[i]-1)`` and ``src_off[i] + (0..n[i]-1)``, concatenated."""
    n = np.asarray(n, dtype=np.int64)
    within = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    return np.repeat(dst_off, n) + within, np.repeat(src_off, n) + within


def _check_share_weights(weights: npt.ArrayLike, n_units: int, unit_name: Callable[[int], str]) -> np.ndarray:
    """``weights`` as a fresh (units,) float64 array of finite numbers > 0, or a ValueError naming the field,
    the first bad value (and its unit) and what is allowed."""
    try:
        w = np.array(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"share_weights = {weights!r}: allowed: {n_units} finite numbers > 0 (one per unit)"
        ) from None
    if w.shape != (n_units,):
        raise ValueError(
            f"share_weights has shape {w.shape}: allowed: ({n_units},), one finite number > 0 per unit"
        )
    bad = np.flatnonzero(~(np.isfinite(w) & (w > 0.0)))
    if bad.size:
        u = int(bad[0])
        raise ValueError(
            f"share_weights[{u}] = {float(w[u])!r} (unit {unit_name(u)!r}): allowed: a finite number > 0"
        )
    return w


def _default_weights(units: list[CompiledUnit]) -> np.ndarray:
    """(units,) each unit's initial share weight (:attr:`CompiledUnit.share_weight`)."""
    return np.array([u.share_weight for u in units], dtype=np.float64)


def _weights_or_none(w: np.ndarray) -> np.ndarray | None:
    """``w``, or None when every weight is 1 (the unweighted solvers, bit for bit as without weights)."""
    return None if bool(np.all(w == 1.0)) else w


def _switch_state(batch: int) -> np.ndarray:
    """The switch's per-instance state (:data:`ainet_gym.sim.backends.numba.settings.N_SWITCH` columns): the work per entry
     of the full path and of the lazy kernel before any is measured (:data:`~ainet_gym.sim.backends.numba.settings.FULL_WORK_PER_ENTRY`
    , :data:`~ainet_gym.sim.backends.numba.settings.LAZY_WORK_PER_ENTRY`), no savings, the full path
     (which has no set-up of its own: the first solve of either path re-solves every active flow)."""
    out = np.zeros((batch, _settings.N_SWITCH))
    out[:, 0] = float(_settings.FULL_WORK_PER_ENTRY)
    out[:, 1] = float(_settings.LAZY_WORK_PER_ENTRY)
    out[:, 3] = 1.0
    return out


class BatchSim:
    """Stacked state of ``batch`` instances of one fabric, each with its own units and capacities.

    Build with the list of units of each instance; call :meth:`run_interval` with the split of every
    connection. Structure changes (a job arrives or leaves) go through :meth:`set_units`.

    Three kinds of data: the *structure* (:attr:`stack`, a :class:`~ainet_gym.sim.stack.UnitStack` of
    ``unit_*``, ``phase_*``, ``flow_*``, ``member_*``, ``conn_*``, ``inst_*`` tables, replaced by
    :meth:`set_units` only), the *state* of the units (:attr:`state`, a :class:`SimState`, mutated in
    place by :meth:`run_interval`: read and write it as ``sim.state.rem`` etc.) and the *engine's state*
    beside it (:attr:`engine_state`, an :class:`~ainet_gym.sim.state.EngineState`: the split, written by
    :meth:`set_split`, the pinned splits, the part flows' split and bytes, the capacities, written by the
    world as ``sim.engine_state.capacity_bytes_per_s``, and the lazy switch's cost model). The incidence
    entries ``e_*`` of the split are derived from the structure and the split. Each field of the
    structure is also readable as an attribute of the same name (``sim.conn_npaths`` is
    ``sim.stack.conn_npaths``, the same array).
    """

    stack: UnitStack
    state: SimState
    engine_state: EngineState

    def __init__(
        self,
        fabric: Fabric,
        units: list[list[CompiledUnit]],
        rate_updates: str = "event",
        backend: str | None = None,
        rate_quantum_s: float = 0.0,
        incremental: bool = True,
    ) -> None:
        if rate_updates not in ("event", "phase"):
            raise ValueError(f"rate_updates = {rate_updates!r}: allowed: event, phase")
        if not (isinstance(rate_quantum_s, int | float) and 0.0 <= rate_quantum_s < np.inf):
            raise ValueError(f"rate_quantum_s = {rate_quantum_s!r}: allowed: a finite time in s >= 0")
        self.rate_updates = rate_updates
        # completions up to this many seconds after the first one are one event (0: every completion is)
        self.rate_quantum_s = float(rate_quantum_s)
        # the backend's strategy for every stage of an interval (ainet_gym.sim.backends), and its name
        self.strategy = get_backend(backend)
        self.backend = self.strategy.name
        # numba, exact event mode: instances with at least this many flows run in the lazy exact kernel
        # (incremental fills, per-flow progress kept from the last rate change); the others, or all with -1,
        # in the parallel-rule kernel, bit for bit as the numpy backend
        self.incremental_min_flows = _settings.INCREMENTAL_MIN_FLOWS if incremental else -1
        # the lazy kernel's solves that re-fill more than this share of the active flows take the parallel rule
        # for their first parallel_max_rounds rounds (1: never); docs/engine-alltoall.md
        self.parallel_share = float(_settings.PARALLEL_SHARE)
        self.parallel_max_rounds = int(_settings.PARALLEL_MAX_ROUNDS)
        # a lazy-kernel instance moves between the full re-solve per event and the lazy kernel by a cost model
        # of the work counted in the kernels (off: the lazy kernel from the start to the end); the lazy work
        # is weighted by lazy_cost_ratio, and a hand-off needs savings of lazy_handoff_solves predicted full
        # solves; docs/engine-alltoall.md
        self.lazy_switch = bool(_settings.LAZY_SWITCH)
        self.lazy_cost_ratio = float(_settings.LAZY_COST_RATIO)
        self.lazy_handoff_solves = float(_settings.LAZY_HANDOFF_SOLVES)
        # what a backend keeps from interval to interval for this simulation (numba: the lazy kernel's fill
        # and repair scratch per instance range, allocated once, not per interval; docs/engine-alltoall.md)
        self.backend_scratch: dict[object, object] = {}
        self.fabric = fabric
        self.batch = len(units)
        self.n_links = fabric.n_links
        # set by set_units (with self.stack, self.state and self.engine_state) and set_split:
        self.table: EntryTable  # the merged incidence entries of the structure
        self._entries: tuple[np.ndarray, ...] | None = None  # (e_flow, e_link, e_coef, keep), on demand
        self._e_lperm: np.ndarray | None = None  # the entries in link order, on demand (numpy allocator)
        # a split set by set_split_fused(defer=True) and not merged yet: (kernel, its arguments of a range)
        self._pending: Pending | None = None
        self.set_units(units, time_s=np.zeros(self.batch))

    def __setattr__(self, name: str, value: object) -> None:
        if name in _STATE_FIELDS:
            raise AttributeError(f"BatchSim.{name}: the state is BatchSim.state.{name}; write that in place")
        if name in _ENGINE_FIELDS:
            raise AttributeError(f"BatchSim.{name}: the engine's state is BatchSim.engine_state.{name}")
        if name in _STACK_FIELDS:
            raise AttributeError(f"BatchSim.{name} is BatchSim.stack.{name}, set by set_units only")
        object.__setattr__(self, name, value)

    def _bind(self, stack: UnitStack) -> None:
        """Make ``stack`` the simulation's structure (and its fields readable as attributes)."""
        object.__setattr__(self, "stack", stack)
        for name in _STACK_FIELDS:
            object.__setattr__(self, name, getattr(stack, name))

    def __getattr__(self, name: str) -> object:  # only for names not found the usual way
        if name in _STATE_FIELDS:
            raise AttributeError(f"BatchSim.{name}: the state is BatchSim.state.{name}")
        if name in _ENGINE_FIELDS:
            raise AttributeError(f"BatchSim.{name}: the engine's state is BatchSim.engine_state.{name}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _bind_state(self, state: SimState) -> None:
        """Make ``state`` the simulation's state."""
        object.__setattr__(self, "state", state)

    # ------------------------------------------------------------------ structure
    def set_units(
        self,
        units: list[list[CompiledUnit]],
        keep: np.ndarray | None = None,
        old: UnitSnapshot | None = None,
        time_s: np.ndarray | None = None,
    ) -> None:
        """(Re)stack units in the initial state; where ``keep`` maps a new unit to an old unit index of
        the snapshot ``old`` (:meth:`snapshot_units`, -1: none), the unit continues from its old state.
        The clocks stay (``time_s``, (batch,) s, sets them)."""
        time_s = self.state.time_s if time_s is None else time_s
        stack = stack_units(self.fabric, units)
        self._bind(stack)
        self._bind_state(_initial_state(stack, time_s))
        # routing.reroute new_transfers: the carry flows (each connection's pinned split: the engine state's)
        self.carry_flows = np.flatnonzero(stack.flow_parent >= 0)
        self._bind_parts(stack)
        self.engine_state = self._initial_engine_state(stack, getattr(self, "engine_state", None))
        if old is not None and keep is not None:
            self.restore_units(old, keep)
        # the most flows of one instance (which kernel an instance takes, BatchSim.any_lazy)
        self._max_inst_flows = int(np.diff(stack.inst_flow).max(initial=0))
        self._build_entry_table()
        self.set_split(None)

    def _initial_engine_state(self, stack: UnitStack, old: EngineState | None) -> EngineState:
        """The engine state of freshly stacked units (the split is set next, by :meth:`set_split`): the
        capacities of ``old`` (the engine state before a restack; None: the nominal ones, until the world
        writes its own), no pinned split, the cost model afresh, and the split the part flows were handed
        under kept over a restack with the same connections."""
        P = self.fabric.max_paths
        shape = (stack.n_conns, P)
        part = None if old is None else old.part_split
        return EngineState(
            split=np.zeros(shape),
            pinned=np.zeros(shape) if self.carry_flows.size else None,
            part_split=part if self.parts.size and part is not None and part.shape == shape else None,
            # without part flows, the flows' own bytes; with them, written by set_split
            flow_reset=stack.flow_bytes.copy() if self.parts.size else stack.flow_bytes,
            capacity_bytes_per_s=(
                np.tile(self.fabric.capacity_bytes_per_s, (self.batch, 1))
                if old is None
                else old.capacity_bytes_per_s
            ),
            switch_cost=_switch_state(self.batch),
            unit_weight=_weights_or_none(_default_weights(stack.flat_units)),
        )

    @staticmethod
    def initial_units(fabric: Fabric, units: list[list[CompiledUnit]], time_s: np.ndarray) -> UnitSnapshot:
        """The state a :class:`BatchSim` of ``units`` (one list per instance) with the clocks ``time_s``
        ((instances,) s) starts from, as a snapshot for :meth:`restore_units`: a restart in place without
        building a simulation (no incidence table, no split)."""
        stack = stack_units(fabric, units)
        return UnitSnapshot(
            _initial_state(stack, time_s),
            stack.flow_off,
            stack.unit_nflows,
            stack.phase_off,
            stack.unit_nphases,
        )

    def snapshot_units(self, pinned: bool = True) -> UnitSnapshot:
        """A copy of the state with its layout, for :meth:`set_units` / :meth:`restore_units` to carry
        to surviving units, and the pinned splits of their connections (``pinned=False``: without them, for
        a snapshot that copies the whole engine state, :meth:`EngineState.copy
        <ainet_gym.sim.state.EngineState.copy>`, and restores it with :meth:`load_engine_state`)."""
        pinned = self.engine_state.pinned if pinned else None
        w = self.engine_state.unit_weight
        return UnitSnapshot(
            self.state.copy(), self.flow_off, self.unit_nflows, self.phase_off, self.unit_nphases,
            None if pinned is None else pinned.copy(), self.conn_off, self.unit_nconns,
            None if w is None else w.copy(),
        )  # fmt: skip

    def load_engine_state(self, other: EngineState) -> None:
        """Make the engine's state a copy of ``other`` (:meth:`EngineState.copy
        <ainet_gym.sim.state.EngineState.copy>` of this simulation's, or :meth:`~ainet_gym.sim.state.EngineState.take`
        of the instances of one with the same units: a restore) and merge the entries of its split. The part
        flows' bytes are not handed out again: ``other.part_split`` is the split they were handed under."""
        w = other.unit_weight
        if w is not None and w.shape != (self.n_units,):
            raise ValueError(
                f"load_engine_state: unit_weight has shape {w.shape}, this engine has {self.n_units} units "
                "(another structure)"
            )
        self._pending = None
        self.engine_state.load(other)
        self._merge_split()

    def bind_state(self, state: SimState, engine: EngineState) -> None:
        """Make ``state`` and ``engine`` the simulation's containers, by reference (not copies: the next
        intervals write them), and merge the entries of ``engine``'s split. Both must be laid out by this
        simulation's units (:attr:`stack`, or a stack of the same layout).

        Raises
        ------
        ValueError
            If an array's length does not fit the units (another structure).
        """
        want = {"rem": self.n_flows, "phase_cur": self.n_units, "time_s": self.batch}
        for name, n in want.items():
            got = getattr(state, name).shape[0]
            if got != n:
                raise ValueError(
                    f"bind_state: state.{name} has {got} rows, this engine {n} (another structure)"
                )
        if (
            engine.split.shape != (self.n_conns, self.fabric.max_paths)
            or engine.flow_reset.shape[0] != self.n_flows
        ):
            raise ValueError(
                f"bind_state: the engine state's split has shape {engine.split.shape}, this engine's "
                f"{(self.n_conns, self.fabric.max_paths)} (another structure)"
            )
        self.merge_pending()  # (the state being left takes its deferred split)
        self._bind_state(state)
        self.engine_state = engine
        self._pending = None
        self._merge_split()

    def _restore_weights(self, old: UnitSnapshot, new_u: np.ndarray, old_u: np.ndarray) -> None:
        """The share weights of the units ``new_u``: those of the units ``old_u`` of ``old`` (1 where it
        has none)."""
        es, ow = self.engine_state, old.unit_weight
        if ow is None and es.unit_weight is None:
            return
        w = np.ones(self.n_units) if es.unit_weight is None else es.unit_weight.copy()
        w[new_u] = _default_weights(self.flat_units)[new_u] if ow is None else ow[old_u]
        es.unit_weight = _weights_or_none(w)

    def set_share_weights(self, weights: npt.ArrayLike | None) -> None:
        """Set the share weight of every stacked unit (``weights``: (units,), in the order of
        :attr:`flat_units`; None: every weight 1): each flow of unit ``u`` is allocated at weight
        ``weights[u]``, the level ``rate / weight`` made max-min fair (docs/model.md, "Share weights"). Kept
        in :attr:`engine_state` (``unit_weight``, in snapshots) until set again; a unit kept over a restack
        (:meth:`set_units` with ``keep``) keeps its weight, a new unit starts at its own
        (:attr:`CompiledUnit.share_weight`, a job's ``share_weight``, default 1; None sets those).

        Raises
        ------
        ValueError
            If ``weights`` is not (units,) finite numbers > 0 (nothing is changed then).
        """
        if weights is None:
            self.engine_state.unit_weight = _weights_or_none(_default_weights(self.flat_units))
            return
        w = _check_share_weights(weights, self.n_units, lambda u: self.flat_units[u].name)
        self.engine_state.unit_weight = _weights_or_none(w)

    def restore_units(self, old: UnitSnapshot, keep: np.ndarray) -> None:
        """Give each unit ``i`` with ``keep[i] >= 0`` the state of unit ``keep[i]`` of the snapshot ``old``
        (its flows' bytes when it has as many flows, its phases when it has as many phases; with another
        phase structure a communicating unit restarts its communication)."""
        st, src = self.state, old.state
        keep = np.asarray(keep, dtype=np.int64)
        new_u = np.flatnonzero(keep >= 0)
        old_u = keep[new_u]
        # a restored instance starts the switch's cost model afresh (as a new simulation would)
        self.engine_state.switch_cost[self.unit_inst[new_u]] = _switch_state(1)
        for k in SimState.UNIT_FIELDS:
            getattr(st, k)[new_u] = getattr(src, k)[old_u]
        # the flows of units with as many flows as before
        same = old.n_flows[old_u] == self.unit_nflows[new_u]
        dst, sel = _ranges_index(
            self.flow_off[new_u[same]], old.flow_off[old_u[same]], self.unit_nflows[new_u[same]]
        )
        st.rem[dst] = src.rem[sel]
        # the phases of units with as many phases as before
        same = old.n_phases[old_u] == self.unit_nphases[new_u]
        dst, sel = _ranges_index(
            self.phase_off[new_u[same]], old.phase_off[old_u[same]], self.unit_nphases[new_u[same]]
        )
        for k in SimState.PHASE_FIELDS:
            getattr(st, k)[dst] = getattr(src, k)[sel]
        # the pinned splits of units with as many connections as before (routing.reroute new_transfers)
        self._restore_weights(old, new_u, old_u)
        pinned = self.engine_state.pinned
        if pinned is not None and old.pinned is not None and old.n_conns is not None:
            same_c = old.n_conns[old_u] == self.unit_nconns[new_u]
            dst_c, sel_c = _ranges_index(
                self.conn_off[new_u[same_c]], old.conn_off[old_u[same_c]], self.unit_nconns[new_u[same_c]]
            )
            pinned[dst_c] = old.pinned[sel_c]
        # another phase structure: a communicating unit restarts its communication
        other = new_u[~same]
        restart = other[(st.phase_cur[other] >= 0) & (st.phase_cur[other] < self.unit_nphases[other])]
        st.phase_cur[restart] = PRE_COMM
        st.t_comm_start_left[restart] = 0.0

    def _bind_parts(self, stack: UnitStack) -> None:
        """The part flows of ``routing.split_flows: independent`` (none otherwise): each part's flow, the flow
        whose bytes it carries a share of, its connection, its path and its group (the parts of one flow on
        one connection). (The bytes each flow starts an iteration with and the split the parts were handed
        their bytes under are engine state, :attr:`EngineState.flow_reset
        <ainet_gym.sim.state.EngineState.flow_reset>` and ``part_split``.)"""
        self.parts = np.flatnonzero(stack.flow_part_of >= 0)
        if not self.parts.size:
            return
        first = np.searchsorted(stack.member_flow, self.parts)  # a part has one member
        self.part_parent = stack.flow_part_of[self.parts]
        self.part_conn = stack.member_conn[first]
        self.part_path = stack.member_path[first]
        self.part_group = np.cumsum(self.part_path == 0) - 1  # a group's parts are its paths 0, 1, ...

    def _hand_parts(self, split: np.ndarray) -> None:
        """Hand each transfer's bytes to its part flows under ``split`` (``routing.split_flows:
        independent``): a flow's own remainder (its bytes at the start) goes to every part whose path has a
        share; on a connection whose split row changed (``reroute: in_flight``), the bytes its parts have
        left (each part's remainder times its old share, summed) are handed out again under the new row,
        as the replay moves a connection's unsent bytes; the other parts keep their remainders. A part whose
        path has no share starts each iteration with nothing (``engine_state.flow_reset``)."""
        p = self.parts
        if not p.size:
            return
        st, es = self.state, self.engine_state
        c, q, par, g = self.part_conn, self.part_path, self.part_parent, self.part_group
        f_new = np.asarray(split, dtype=np.float64)[c, q]
        rem = st.rem[p]
        n_g = int(g[-1]) + 1
        if es.part_split is None:  # no earlier split known: each group's least advanced part
            left = np.zeros(n_g)
            np.maximum.at(left, g, rem)
            changed = np.ones(n_g, dtype=bool)
        else:
            f_old = es.part_split[c, q]
            left = np.bincount(g, weights=f_old * rem, minlength=n_g)
            changed = np.bincount(g, weights=np.abs(f_new - f_old) > SPLIT_TOL, minlength=n_g) > 0
        own = np.zeros(n_g)
        own[g] = st.rem[par]  # a flow's own remainder, handed to its parts
        changed |= own > 0
        left += own
        st.rem[p] = np.where(changed[g], np.where(f_new > 0, left[g], 0.0), rem)
        st.rem[par] = 0.0
        es.flow_reset[p] = np.where(f_new > 0, self.flow_bytes[par], 0.0)
        es.flow_reset[par] = 0.0
        es.part_split = np.array(split, dtype=np.float64)

    def member_share(self) -> np.ndarray | None:
        """(members,) the share of its flow's moved bytes each member carries on its connection: the part
        flows' path fractions under the current split (``routing.split_flows: independent``), 1 elsewhere;
        None without part flows (every member carries all of its flow's)."""
        if not self.parts.size:
            return None
        out = np.ones(self.member_flow.shape[0])
        first = np.searchsorted(self.member_flow, self.parts)
        out[first] = np.asarray(self.engine_state.split, dtype=np.float64)[self.part_conn, self.part_path]
        return out

    # ------------------------------------------------------------------ routing
    def _build_entry_table(self) -> None:
        member_paths = self.conn_paths_global[self.member_conn]  # (members, paths, hops)
        P = self.fabric.max_paths
        mp = self.member_path
        if (mp != -1).any():  # routing.split_flows independent: a part takes its one path, its flow none
            take = (mp[:, None] == -1) | (mp[:, None] == np.arange(P)[None, :])
            member_paths = np.where(take[:, :, None], member_paths, -1)
        if self.engine_state.pinned is not None:
            # carry flows take their connection's pinned split: the engine's split rows are [split | pinned]
            # (2 P columns), a carry member's candidates are columns P..2P-1, every other member's 0..P-1
            carry = self.flow_parent[self.member_flow] >= 0
            wide = np.full((member_paths.shape[0], 2 * P, member_paths.shape[2]), -1, dtype=np.int64)
            wide[~carry, :P] = member_paths[~carry]
            wide[carry, P:] = member_paths[carry]
            member_paths, P = wide, 2 * P
        self.table = EntryTable.build(
            member_paths, self.member_flow, self.member_conn, self.inst_flow,
            P, self.batch, self.n_links, self.conn_npaths,
            np.searchsorted(self.unit_inst[self.conn_unit], np.arange(self.batch + 1)),
        )  # fmt: skip

    def carry_over(self) -> None:
        """A decision boundary under ``routing.reroute: new_transfers`` (call it before the next interval's
        :meth:`set_split`): every transfer in flight keeps the split it started with. A job flow whose
        phase has started and that has bytes left hands them to its carry flow, which carries them on its
        connections' current split rows, pinned until it has delivered them; the flow itself is free for
        its next transfer, which takes the split of the interval in which it starts. A carry flow already
        in flight keeps its pinned rows. (Compiled jobs have carry flows only under ``new_transfers``; a
        stage pipeline, whose concurrent phases may share a connection, is refused by the loader.)"""
        es = self.engine_state
        if es.pinned is None:
            return
        st = self.state
        g = self.carry_flows
        f = self.flow_parent[g]
        moving = (st.rem[f] > 0) & (st.phase_state[self.flow_gphase[f]] == RUNNING)
        carrying = st.rem[g] > 0  # carried since an earlier boundary: keep their pins
        member_carry = self.flow_parent[self.member_flow] >= 0
        pin_of = np.full(self.n_flows, -1, dtype=np.int64)  # (flows,) 1: keep the pin, 2: pin the split
        pin_of[g[carrying]] = 1
        pin_of[g[moving]] = 2
        m = np.flatnonzero(member_carry)
        how = pin_of[self.member_flow[m]]
        keep_c = np.unique(self.member_conn[m[how == 1]])
        new_c = np.unique(self.member_conn[m[how == 2]])
        if np.intersect1d(keep_c, new_c).size:  # concurrent phases on one connection (not compiled)
            raise RuntimeError(
                "carry_over: a connection carries transfers that started in different intervals"
            )
        pinned = np.zeros_like(es.pinned)
        pinned[keep_c] = es.pinned[keep_c]
        pinned[new_c] = es.split[new_c]
        es.pinned = pinned
        st.rem[g[moving]] = st.rem[f[moving]]
        st.rem[f[moving]] = 0.0

    def set_split(self, split: np.ndarray | None) -> None:
        """Set the split (connections, max_paths) of every connection; None = first path only.

        Duplicate (flow, link) entries (a NIC link shared by every path of a connection, the hops of a
        ring on one link) are merged: their coefficients add, by the backend's strategy
        (:meth:`~ainet_gym.sim.backends.base.SimBackend.merge_split`). On the numba backend the merge runs when the
        entries are next needed (the next interval, or a read of them: :meth:`merge_pending`), so a split
        that another replaces first (a restack's, before the env sets its own) costs nothing; ``split`` must
        not be changed in place before then.
        """
        if split is None:
            split = np.zeros((self.n_conns, self.fabric.max_paths))
            split[:, 0] = 1.0
        self._pending = None
        self.engine_state.split = split
        self._hand_parts(split)
        self._merge_split()

    def _merge_split(self) -> None:
        """The merged entries of the engine state's split (and pinned splits), by the backend's strategy."""
        self._e_lperm = None
        self._entries = None
        es = self.engine_state
        split = es.split
        if es.pinned is not None:  # rows [split | pinned] (see _build_entry_table)
            split = np.concatenate([np.asarray(split, dtype=np.float64), es.pinned], axis=1)
        # the backend merges now (numpy) or leaves a pass for the interval's kernel threads (numba)
        self._entries, self._pending = self.strategy.merge_split(self.table, split)

    def set_split_fused(
        self, kernel: Callable[..., object], args: tuple, out: np.ndarray, defer: bool = False
    ) -> None:
        """Set the split (connections, max_paths) that the compiled ``kernel`` writes into ``out`` (C-contiguous
        float64), instance range by instance range, merging each instance's entries in the same pass (the
        numba backend; the result is that of :meth:`set_split` with the same split).

        ``kernel(lo, hi, *args, out, table, go)`` (``table``: the entry table's compiled merge record,
        :meth:`EntryTable.merge_record`; ``go``: the kernel threads' flags) must call :func:`ainet_gym.sim.backends.numba.crew.announce` on ``go`` first, write the rows of
        ``out`` of the connections of the instances ``lo:hi`` and then call
        :func:`ainet_gym.sim.backends.numba.merge.merge_range` on them (with ``out.reshape(-1)`` as the split); it must
        release the GIL (ranges run on the kernel threads).

        ``defer=True`` leaves the pass to the next :meth:`run_interval`, which runs it for each instance
        range just before that range's interval, on the same thread: one hand-off to the kernel threads
        per interval instead of two (each costs tens of microseconds). Anything that reads the split or
        its entries before then runs the pass first (:meth:`merge_pending`).
        """
        if not self.strategy.fused_split:
            raise ValueError(
                f"set_split_fused: backend {self.backend!r}; needs one with fused splits ('numba')"
            )
        if self.engine_state.pinned is not None:
            raise ValueError(
                "set_split_fused: the units have carry flows (routing.reroute new_transfers); use set_split"
            )
        if self.parts.size:
            raise ValueError(
                "set_split_fused: the units have part flows (routing.split_flows independent); use set_split"
            )
        if out.shape != (self.n_conns, self.fabric.max_paths) or not out.flags.c_contiguous:
            raise ValueError(
                f"out: shape {out.shape}, expected C-contiguous {(self.n_conns, self.fabric.max_paths)}"
            )
        self.engine_state.split = out
        self._e_lperm = None
        self._entries = None
        table, go = self.table.merge_record(), _threads.go_flags()

        def args_of(lo: int, hi: int) -> tuple:
            return (lo, hi, *args, out, table, go)

        self._pending = (kernel, args_of)
        if not defer:
            self.merge_pending()

    def merge_pending(self) -> None:
        """Run the pass of a deferred :meth:`set_split_fused` now (nothing if none is pending)."""
        if self._pending is None:
            return
        kernel, args_of = self._pending
        self._pending = None
        _threads.run_ranges(kernel, self.table.ranges, args_of)

    def _entry_table(self) -> tuple[np.ndarray, ...]:
        """(e_flow, e_link, e_coef, keep): the nonzero merged entries of the split, sorted by flow, and the
        mask of the segments they come from."""
        self.merge_pending()
        if self._entries is None:
            t = self.table
            keep = t.seg_coef > 0
            self._entries = (t.seg_flow[keep], t.seg_link[keep], t.seg_coef[keep], keep)
        return self._entries

    @property
    def e_flow(self) -> np.ndarray:
        """(entries,) flow of each incidence entry of the split (sorted by flow, so by instance)."""
        return self._entry_table()[0]

    @property
    def e_link(self) -> np.ndarray:
        """(entries,) global link id (``instance * links + link``) of each incidence entry."""
        return self._entry_table()[1]

    @property
    def e_coef(self) -> np.ndarray:
        """(entries,) > 0, bytes on the link per byte of the flow (split ratios summed over paths)."""
        return self._entry_table()[2]

    @property
    def inst_entry(self) -> np.ndarray:
        """(batch+1,) the entries of each instance (entries are sorted by flow, flows by instance)."""
        return np.searchsorted(self.e_flow, self.inst_flow).astype(np.int64)

    @property
    def e_lperm(self) -> np.ndarray:
        """(entries,) the incidence entries in link order (for the numpy allocator)."""
        if self._e_lperm is not None:
            return self._e_lperm
        keep = self._entry_table()[3]
        new_index = np.cumsum(keep) - 1
        perm = self.table.seg_lperm
        self._e_lperm = new_index[perm[keep[perm]]]
        return self._e_lperm

    # ------------------------------------------------------------------ dynamics
    def run_interval(
        self,
        duration_s: np.ndarray | float,
        max_events: int = 1_000_000,
        then: Then | None = None,
    ) -> IntervalMetrics:
        """Advance every instance by ``duration_s`` of simulated time, event to event, on the backend's
        strategy (:mod:`ainet_gym.sim.backends`).

        ``then`` (backends with ``figures_on_kernel_threads``, numba): given the interval's metrics (before
        they are filled), a compiled kernel and its arguments for an instance range, run on each range's
        thread right after that range's interval (the env's figures of the interval,
        :meth:`IntervalMeter.figures`)."""
        return self.strategy.run_interval(self, duration_s, max_events, then)

    def take_pending(self) -> Pending | None:
        """The deferred merge pass of the split (:meth:`set_split`, :meth:`set_split_fused` with
        ``defer=True``), for the backend to run on its kernel threads with the interval; it is then no
        longer pending. None: the entries are merged."""
        pending, self._pending = self._pending, None
        return pending

    def any_lazy(self) -> bool:
        """Whether an instance runs in the lazy exact kernel this interval
        (:func:`ainet_gym.sim.backends.numba.interval.lazy_instance`): exact event mode and at least
        :attr:`incremental_min_flows` flows (>= 0)."""
        k = self.incremental_min_flows
        if k < 0 or self.rate_updates != "event" or self.rate_quantum_s > 0.0:
            return False
        return self._max_inst_flows >= k
