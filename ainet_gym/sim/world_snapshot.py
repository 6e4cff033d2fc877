"""Snapshots of a :class:`~ainet_gym.sim.world.FabricWorld`: the record :class:`WorldSnapshot` (copies of
the world's episode state and of the engine's containers), and the world's side that takes, checks and
restores one, or binds state by reference (:class:`WorldRestore`, its base class)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ainet_gym.scenario.spec import Scenario
from ainet_gym.sim.dynamics import LinkState
from ainet_gym.sim.engine import BatchSim, UnitSnapshot
from ainet_gym.sim.stack import UnitStack
from ainet_gym.sim.state import EngineState, SimState, WorldState

__all__ = ["WorldRestore", "WorldSnapshot", "same_layout"]


@dataclass(frozen=True, eq=False)
class WorldSnapshot:
    """Everything a :class:`FabricWorld` needs to go on from a moment of its episodes, taken by
    :meth:`FabricWorld.snapshot` (copies: later steps of the world do not change it): a copy of the world's
    episode state (:class:`~ainet_gym.sim.state.WorldState`: generators, step counts, hash seeds, background
    offsets, link failures, jobs and GPUs, the dynamics flag), of the engine's two containers (the units'
    :class:`~ainet_gym.sim.state.SimState`, with its layout, and the
    :class:`~ainet_gym.sim.state.EngineState`: the split that ran last, the pinned splits, the part flows'
    split and bytes, the capacities, the lazy switch's cost model) and the first unit, connection and flow
    of each instance (the fields are read from the copies: ``snap.state.step_count``, ``snap.engine.split``)."""

    scenario: Scenario
    state: WorldState  # a copy of the world's episode state
    units: UnitSnapshot  # the engine's state of the units (every unit, phase and flow) and its layout
    engine: EngineState  # a copy of the engine's state beside it
    inst_unit: np.ndarray  # (batch+1,) first unit of each instance
    inst_conn: np.ndarray  # (batch+1,) first connection of each instance
    inst_flow: np.ndarray  # (batch+1,) first flow of each instance
    #: the compiled units the copies are laid out by (shared, never written; None: not recorded)
    stack: UnitStack | None = None

    @property
    def batch(self) -> int:
        """Instances in the snapshot."""
        return self.state.batch

    @classmethod
    def of(
        cls, scenario: Scenario, state: WorldState, sim_state: SimState, engine: EngineState, stack: UnitStack
    ) -> WorldSnapshot:
        """The snapshot of the containers given (held, not copied: pass copies) whose engine arrays are laid
        out by ``stack``: the world's state, the units' state and the engine's beside it."""
        w = engine.unit_weight
        units = UnitSnapshot(
            sim_state, stack.flow_off, stack.unit_nflows, stack.phase_off, stack.unit_nphases,
            None, stack.conn_off, stack.unit_nconns, None if w is None else w.copy(),
        )  # fmt: skip
        conn_inst = stack.unit_inst[stack.conn_unit]
        return cls(
            scenario=scenario,
            state=state,
            units=units,  # (the pinned splits: in the engine state)
            engine=engine,
            inst_unit=np.asarray(stack.inst_unit, dtype=np.int64).copy(),
            inst_conn=np.searchsorted(conn_inst, np.arange(state.batch + 1)).astype(np.int64),
            inst_flow=np.asarray(stack.inst_flow, dtype=np.int64).copy(),
            stack=stack,
        )


def same_layout(a: UnitStack, b: UnitStack) -> bool:
    """Whether the engine arrays of units stacked as ``a`` fit ``b`` row for row (the same units, flows,
    phases and connections per instance, in the same order); cheap when they are the same object."""
    if a is b:
        return True
    if (a.n_units, a.n_flows, a.n_conns) != (b.n_units, b.n_flows, b.n_conns):
        return False
    names = ("unit_inst", "unit_nflows", "unit_nphases", "unit_nconns", "conn_npaths", "flow_bytes")
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in names)


class WorldRestore:
    """The snapshot side of :class:`~ainet_gym.sim.world.FabricWorld`: it holds no state of its own but reads
    and writes the world's, the attributes annotated here, which ``FabricWorld.__init__`` sets (``reset`` is
    its method; ``_units_unchanged`` and ``_rebuild`` are :class:`~ainet_gym.sim.world_units.WorldUnits`')."""

    scenario: Scenario
    batch: int
    n_job_slots: int
    links: LinkState
    state: WorldState
    sim: BatchSim | None
    _capacity_set: np.ndarray | None
    reset: Callable[..., None]
    _units_unchanged: Callable[[], bool]
    _rebuild: Callable[..., None]

    def snapshot(self) -> WorldSnapshot:
        """A copy of the state of every instance (:class:`WorldSnapshot`), for :meth:`restore`.

        Raises
        ------
        RuntimeError
            Before the first :meth:`reset` (there is no state yet).
        """
        sim = self.sim
        if sim is None:
            raise RuntimeError("snapshot() before the first reset(): there is no state yet")
        sim.merge_pending()  # a deferred split is written by its merge: take it as the engine will run it
        return WorldSnapshot.of(
            self.scenario, self.state.copy(), sim.state.copy(), sim.engine_state.copy(), sim.stack
        )

    def restore_source(self, snap: WorldSnapshot, source: Sequence[int] | np.ndarray | None) -> np.ndarray:
        """(batch,) the snapshot instance each instance of this world takes (:meth:`restore`'s checks).

        Raises
        ------
        ValueError
            If ``snap`` is not a snapshot of this scenario, or ``source`` does not give one of its
            instances per instance of this world.
        """
        if not isinstance(snap, WorldSnapshot):
            raise ValueError(f"restore: {type(snap).__name__} is not a WorldSnapshot")
        if snap.scenario is not self.scenario and snap.scenario != self.scenario:
            raise ValueError(
                f"restore: the snapshot is of scenario {snap.scenario.name!r}, this world runs "
                f"{self.scenario.name!r} (another scenario or other parameters)"
            )
        B = self.batch
        if source is None:
            if snap.batch != B:
                raise ValueError(
                    f"restore: the snapshot has {snap.batch} instances, this world {B}; pass source= (one "
                    "snapshot instance per instance of this world)"
                )
            return np.arange(B)
        src = np.asarray(source)
        if src.shape != (B,) or src.dtype.kind not in "iu" or (src < 0).any() or (src >= snap.batch).any():
            raise ValueError(
                f"restore: source = {np.asarray(source).tolist()!r}: needs {B} integers in "
                f"0..{snap.batch - 1} (the snapshot instance of each instance of this world)"
            )
        return src

    def restore(self, snap: WorldSnapshot, source: Sequence[int] | np.ndarray | None = None) -> None:
        """Put every instance back into the state of ``snap``: instance ``b`` takes the state of the
        snapshot's instance ``source[b]`` (default: ``b``, the snapshot of a world of the same batch).
        Steps from there give what the snapshot's instance gave, bit for bit (same splits, same results).

        ``source`` lets a world of another batch size copy instances, e.g. ``[b] * K`` to try K routings
        from instance ``b``'s state (a planner's lookahead). The compiled units are this world's own
        (compiled again, or found in its cache, from the jobs and GPUs of the snapshot); the engine
        restacks only when the units differ from those it has.

        Raises
        ------
        ValueError
            If ``snap`` is of another scenario, or ``source`` does not give one instance of the
            snapshot per instance of this world.
        """
        src = self.restore_source(snap, source)
        B = self.batch
        if self.sim is None:
            self.reset([None] * B)  # builds the engine; its state is replaced below
        # the world's episode state: instance b <- the snapshot's instance source[b] (the link state's arrays
        # are written in place; it is told so)
        self.state.load(snap.state, src)
        self.links.restored()
        if not self._units_unchanged():  # the structure: restack only if the units differ from the engine's
            self._rebuild()
        sim = self.sim
        assert sim is not None
        # the engine's state: unit k of instance b <- unit k of the snapshot's instance source[b]
        inst = sim.unit_inst
        local = np.arange(sim.n_units) - sim.inst_unit[inst]
        sim.restore_units(snap.units, snap.inst_unit[src[inst]] + local)
        sim.state.time_s[:] = snap.units.state.time_s[src]
        # the engine's state beside the units' (split, pinned splits, part flows, capacities, cost model):
        # the snapshot's container, or its instances src, loaded whole; the split's entries merged again
        engine = (
            snap.engine
            if source is None
            else snap.engine.take(src, snap.inst_conn, snap.inst_flow, snap.inst_unit)
        )
        sim.load_engine_state(engine)
        self._capacity_set = sim.engine_state.capacity_bytes_per_s
        if source is not None:  # a copy of other instances: the env's cached blocks are out of date
            self.state.dynamics_changed = True

    def bind_state(
        self, state: WorldState, sim_state: SimState, engine: EngineState, stack: UnitStack
    ) -> None:
        """Make ``state`` the world's episode state and ``sim_state`` / ``engine`` (laid out by ``stack``) the
        engine's, by reference (not copies: the next steps write them). The link state takes its two arrays;
        the engine restacks first when the units of ``state``'s jobs are not those it has. The engine must
        exist (after a reset).

        Raises
        ------
        ValueError
            If the batch or the units' layout is not this world's (another scenario or batch).
        """
        if state.batch != self.batch:
            raise ValueError(f"bind_state: the state has {state.batch} instances, this world {self.batch}")
        mine = self.state
        for name in ("bg_offset", "fail_until"):
            if getattr(state, name).shape != getattr(mine, name).shape:
                raise ValueError(
                    f"bind_state: the state's {name} has shape {getattr(state, name).shape}, this world's "
                    f"{getattr(mine, name).shape} (a state of another scenario)"
                )
        if any(len(j) != self.n_job_slots for j in state.jobs):
            raise ValueError(
                f"bind_state: the state's instances do not have {self.n_job_slots} job slots (a state of "
                "another scenario)"
            )
        sim = self.sim
        assert sim is not None
        sim.merge_pending()  # a deferred split belongs to the state being left: write it there
        self.state = state
        self.links.fail_until, self.links.cap_factor = state.fail_until, state.cap_factor
        self.links.restored()
        if not self._units_unchanged():
            self._rebuild()  # (new engine containers, replaced below)
        sim = self.sim
        assert sim is not None
        if not same_layout(stack, sim.stack):
            raise ValueError(
                "bind_state: the state's units are not laid out as this world's units of its jobs "
                "(a state of another scenario)"
            )
        sim.bind_state(sim_state, engine)
        self._capacity_set = engine.capacity_bytes_per_s
