"""The structure side of :class:`~ainet_gym.sim.batch.BatchSim` (:class:`BatchUnits`, its base class): units
stacked and restacked with the surviving units' state carried over (:class:`UnitSnapshot`), the engine state of
fresh units, snapshots and restores, state bound by reference, and the units' share weights."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ainet_gym.fabric.topology import Fabric
from ainet_gym.sim.backends.base import Pending, SimBackend
from ainet_gym.sim.backends.numba import settings as _settings
from ainet_gym.sim.stack import UnitStack, stack_units
from ainet_gym.sim.state import PRE_COMM, EngineState, SimState
from ainet_gym.sim.unit import CompiledUnit
from ainet_gym.sim.upstream import check_upstream

__all__ = ["BatchUnits", "UnitSnapshot"]


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


class BatchUnits:
    """The structure side of :class:`~ainet_gym.sim.batch.BatchSim`: it holds no state of its own and reads
    the simulation's, the attributes annotated here, which ``BatchSim.__init__`` and :meth:`set_units` set
    (the split side's are :class:`~ainet_gym.sim.batch_split.BatchSplit`'s)."""

    # set by BatchSim.__init__, BatchSim._bind (the structure's fields) and BatchSplit
    batch: int
    fabric: Fabric
    strategy: SimBackend
    backend: str
    parts: np.ndarray
    held: np.ndarray
    held_part: np.ndarray
    carry_flows: np.ndarray
    _pending: Pending | None
    state: SimState
    engine_state: EngineState
    flat_units: list[CompiledUnit]
    flow_off: np.ndarray
    phase_off: np.ndarray
    conn_off: np.ndarray
    unit_inst: np.ndarray
    unit_nflows: np.ndarray
    unit_nphases: np.ndarray
    unit_nconns: np.ndarray
    n_units: int
    n_flows: int
    n_conns: int
    # BatchSim's and BatchSplit's methods it calls
    _bind: Callable[[UnitStack], None]
    _bind_state: Callable[[SimState], None]
    _bind_parts: Callable[[UnitStack], None]
    _build_entry_table: Callable[[], None]
    _merge_split: Callable[[], None]
    merge_pending: Callable[[], None]
    set_split: Callable[[np.ndarray | None], None]

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
        check_upstream(units, self.strategy.background_upstream, self.backend)
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
            held_weight=self._initial_held_weight(shape, None if old is None else old.held_weight),
        )

    def _initial_held_weight(self, shape: tuple[int, int], old: np.ndarray | None) -> np.ndarray | None:
        """``EngineState.held_weight`` of freshly stacked units: None unless a unit's held parts take their
        part's weight (``routing.reroute_held_weight: part``); kept over a restack with the same connections
        (as ``part_split``, with the held bytes the surviving units carry), else 1 everywhere."""
        if not (self.held.size and self.held_part.any()):
            return None
        return old.copy() if old is not None and old.shape == shape else np.ones(shape)

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
