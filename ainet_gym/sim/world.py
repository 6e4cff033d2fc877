"""A scenario brought to life: ``batch`` seeded instances of one scenario, stepped together.

:class:`FabricWorld` owns ``batch`` independent copies (instances) of one scenario, each with its own
seeded generator, and steps them together through :class:`~ainet_gym.sim.engine.BatchSim`. It is the
engine under both :func:`ainet_gym.simulate` and the Gymnasium environments. One step is

    apply the split -> run the interval -> measure it -> advance the dynamics

and the parts live in their own modules: GPU placement (:mod:`ainet_gym.sim.placement`), ideal step
times (:mod:`ainet_gym.sim.ideal`), the metrics of an interval (:mod:`ainet_gym.sim.metrics`), what
changes between intervals (:mod:`ainet_gym.sim.dynamics`). The RL action-slot layout over the job slots
is the env's (:mod:`ainet_gym.envs.slots`). Background traffic always follows static ECMP (it belongs to
other tenants).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ainet_gym.arrays import safe_divide
from ainet_gym.fabric.topology import Fabric, build_fabric
from ainet_gym.routing.split import ecmp_split, wcmp_split
from ainet_gym.scenario.spec import JobSpec, Scenario
from ainet_gym.sim.dynamics import (
    LinkState,
    alltoall_rotation,
    background_on,
    churn,
    episode_jitter,
    rotation_due,
)
from ainet_gym.sim.engine import (
    BatchSim,
    CompiledUnit,
    UnitSnapshot,
    compile_background,
    compile_job,
    resolve_backend,
    rotation_period,
)
from ainet_gym.sim.ideal import IdealTimes
from ainet_gym.sim.metrics import ConnectionTable, IntervalMeter, NumbaFigures, StepResult
from ainet_gym.sim.placement import place_job, placement_is_deterministic
from ainet_gym.sim.stack import UnitStack
from ainet_gym.sim.state import EngineState, SimState, WorldState

__all__ = ["ConnectionTable", "FabricWorld", "StepResult", "WorldSnapshot"]

_UNIT_CACHE_SIZE = 512  # compiled units kept per world (placements x rotations seen recently)


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


class FabricWorld:
    """``batch`` seeded instances of ``scenario`` on one shared fabric.

    ``backend`` selects the simulation backend (``"numba"`` or ``"numpy"``; None: ``$AINET_GYM_BACKEND``,
    else numba when it imports), see :func:`ainet_gym.sim.backends.resolve_backend`.

    Per job slot ``j`` of instance ``b``: ``state.jobs[b][j]`` (a :class:`JobSpec` or None),
    ``state.gpus[b][j]`` (its GPU ids in rank order), ``job_unit[b, j]`` (its flat unit in :attr:`sim`, -1:
    empty) and ``job_ideal_step_s[b, j]`` / ``job_ideal_comm_s[b, j]`` (s, nan: empty).
    """

    #: the episode state (:class:`~ainet_gym.sim.state.WorldState`): generators, step counts, ECMP hash
    #: seeds, background offsets, link failures, the jobs and GPUs of the job slots, the dynamics flag
    state: WorldState

    #: the attributes a step may replace or write besides the episode state (and the engine's containers):
    #: what a restack derives from the jobs and GPUs of the state (the engine's units, the job slots' units,
    #: names and ideal times), and caches keyed by what they came from (the capacities last given to the
    #: engine, the default split, the compiled units). Everything else of the world is structure.
    DERIVED: ClassVar[frozenset[str]] = frozenset(
        {"sim", "job_unit", "bg_unit", "job_ideal_step_s", "job_ideal_comm_s", "names", "_slot_units",
         "_slot_keys", "_unit_offset", "_capacity_set", "_default_cache", "_unit_cache", "_bg_cache",
         "_fresh_initial", "_reset_gpus"}
    )  # fmt: skip

    def __init__(self, scenario: Scenario, batch: int = 1, backend: str | None = None) -> None:
        self.scenario = scenario
        self.batch = batch
        self.backend = resolve_backend(backend)
        self.fabric: Fabric = build_fabric(scenario.fabric, max_paths=scenario.routing.max_paths)
        self.max_paths = scenario.routing.max_paths
        # routing.reroute: "in_flight" (a new split moves the transfers in flight at once) or "new_transfers"
        # (a transfer keeps the split it started with: the jobs are compiled with carry flows)
        self.reroute = scenario.routing.reroute
        # routing.split_flows: "coupled" (a split connection is one flow, its paths at a fixed ratio) or
        # "independent" (each path's part of a transfer is a flow of its own: the jobs are compiled with parts)
        self.split_flows = scenario.routing.split_flows
        # routing.ring_run_ahead_bytes: rings cut into sequential segments of at most this many bytes per hop
        self.ring_run_ahead_bytes = scenario.routing.ring_run_ahead_bytes
        self.ideal = IdealTimes(self.fabric, self.max_paths, self.backend)
        churn_spec = scenario.dynamics.job_churn
        self.churn = churn_spec.arrival_rate > 0
        self.templates: tuple[JobSpec, ...] = churn_spec.templates or scenario.jobs
        self.n_job_slots = max(len(scenario.jobs), churn_spec.max_jobs if self.churn else 0)
        self.meter = IntervalMeter(self.fabric)
        self.network_links = self.meter.network_links  # (net_links,) link ids of the network links
        self.decision_interval_s = self._decision_interval()
        self.links = LinkState(self.fabric, scenario.dynamics.link_failures, batch)
        n_bg = len(scenario.background)
        # the per-episode state of every instance (generators, step counts, hash seeds, background offsets,
        # the link state's arrays, the jobs and GPUs of the job slots, filled by reset): one container, which
        # a snapshot copies (read as ``world.state.<field>``)
        self.state = WorldState(
            rngs=[np.random.default_rng(scenario.seed) for _ in range(batch)],
            step_count=np.zeros(batch, dtype=np.int64),
            hash_seed=np.full(batch, scenario.seed, dtype=np.int64),
            # offset_steps plus its per-episode jitter, see episode_jitter
            bg_offset=np.array(
                [[bg.offset_steps for bg in scenario.background] for _ in range(batch)], dtype=np.int64
            ).reshape(batch, n_bg),
            fail_until=self.links.fail_until,
            cap_factor=self.links.cap_factor,
            jobs=[[None] * self.n_job_slots for _ in range(batch)],
            gpus=[[None] * self.n_job_slots for _ in range(batch)],
            dynamics_changed=True,
        )
        # per job slot, derived from the state at each restack: its flat unit and its ideal times
        self.job_unit = np.full((batch, self.n_job_slots), -1, dtype=np.int64)  # (batch, jobs) flat unit
        self.bg_unit = np.zeros((batch, n_bg), dtype=np.int64)  # (batch, background) flat unit
        self.job_ideal_step_s = np.full((batch, self.n_job_slots), np.nan)  # (batch, jobs) s
        self.job_ideal_comm_s = np.full((batch, self.n_job_slots), np.nan)  # (batch, jobs) s
        self.names: list[list[str | None]] = []  # (batch, jobs) job names as of the last restack
        self._capacity_set: np.ndarray | None = None  # the capacity array the dynamics last gave the engine
        self.sim: BatchSim | None = None  # built by the first reset
        self._slot_units: list[list[int]] = []  # (batch, jobs) unit index within its instance, -1: empty
        self._slot_keys: list[list[tuple]] = []  # (batch, jobs) (name, gpus) of each slot's job
        self._unit_offset = np.zeros(batch, dtype=np.int64)  # (batch,) first flat unit of each instance
        self._unit_cache: dict[tuple, CompiledUnit] = {}  # (job, gpus, rotation) -> compiled job
        self._bg_cache: dict[tuple, CompiledUnit] = {}  # (source, gpus) -> compiled background
        # the unit lists of the last restart in place and their initial state (clocks at 0)
        self._fresh_initial: tuple[list[list[CompiledUnit]], UnitSnapshot] | None = None
        # (conn_key, capacity array, hash seeds, dead links, ECMP split)
        self._default_cache: tuple | None = None
        # the GPUs of the scenario's jobs at reset (read-only, shared by the instances) when every placement
        # is deterministic: the same in every episode and instance, and no draw from the generators
        self._reset_gpus: list[np.ndarray] | None = None

    @property
    def _ideal(self) -> np.ndarray:
        """(batch, jobs) s: :attr:`job_ideal_step_s` (the name tests and older code used)."""
        return self.job_ideal_step_s

    # ------------------------------------------------------------------ ideal times
    def ideal_step_s(self, job: JobSpec, gpus: np.ndarray) -> float:
        """Step time of ``job`` alone on a non-blocking fabric with the same hosts (cached)."""
        return self.ideal.times(job, gpus)[0]

    def ideal_comm_s(self, job: JobSpec, gpus: np.ndarray) -> float:
        """Communication time of one iteration of ``job`` alone on the non-blocking fabric (cached)."""
        return self.ideal.times(job, gpus)[1]

    def _decision_interval(self) -> float:
        d = self.scenario.dynamics.decision_interval_ms
        if d is not None:
            return d * 1e-3
        jobs = list(self.scenario.jobs) + (list(self.templates) if self.churn else [])
        rng = np.random.default_rng(0)
        free = np.ones(self.fabric.n_gpus, bool)
        ideal = [self.ideal_step_s(j, place_job(self.fabric, j, free, rng)) for j in jobs]
        return max(ideal, default=0.1)

    # ------------------------------------------------------------------ episode
    def reset(self, seeds: list[int | None] | None = None, mask: np.ndarray | None = None) -> None:
        """Start a new episode in the instances selected by ``mask`` (all by default)."""
        mask = np.ones(self.batch, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        seeds = seeds if seeds is not None else [None] * self.batch
        for b in np.flatnonzero(mask):
            if seeds[b] is not None:
                self.state.rngs[b] = np.random.default_rng(seeds[b])
            rng = self.state.rngs[b]
            self.state.hash_seed[b] = int(rng.integers(2**31))
            placed = self._place_jobs(rng)  # then the jitter, from the same generator
            jobs, self.state.bg_offset[b] = episode_jitter(self.scenario.jobs, self.scenario.background, rng)
            empty = [None] * (self.n_job_slots - len(jobs))  # the slots of jobs that arrive later (churn)
            self.state.jobs[b] = [*jobs, *empty]
            self.state.gpus[b] = [*placed, *empty]
        self.links.reset(mask)
        self.state.step_count[mask] = 0
        if self.sim is not None:
            self.sim.state.time_s[mask] = 0.0
        self._rebuild(reset_mask=mask)
        self._advance_dynamics(mask, first=True)

    def _place_jobs(self, rng: np.random.Generator) -> list[np.ndarray]:
        """GPUs of the scenario's jobs in a new episode, placed in turn on an empty fabric (computed once
        when every placement is deterministic)."""
        if self._reset_gpus is not None:
            return self._reset_gpus
        free = np.ones(self.fabric.n_gpus, dtype=bool)
        placed = []
        for job in self.scenario.jobs:
            g = place_job(self.fabric, job, free, rng)
            free[g] = False
            placed.append(g)
        if all(placement_is_deterministic(job) for job in self.scenario.jobs):
            placed = [np.array(g) for g in placed]  # own copies (an explicit placement's may be the spec's)
            for g in placed:
                g.flags.writeable = False
            self._reset_gpus = placed
        return placed

    def step(
        self,
        split: np.ndarray,
        active: np.ndarray | None = None,
        windows: int = 1,
        connections: bool = True,
        split_set: bool = False,
        after_figures: Callable[[NumbaFigures], tuple[Callable[..., object], Callable[[int, int], tuple]]]
        | None = None,
        max_events: int = 1_000_000,
    ) -> StepResult:
        """Run one decision interval with ``split`` (connections, max_paths) in the ``active`` instances
        (all by default); inactive ones stand still (zero duration).

        ``windows > 1`` runs the interval as that many equal windows (the same fluid model, with window
        boundaries as extra events) and reports ``link_peak_utilization``, the largest window mean of each
        link, as a counter polled ``windows`` times per interval would see it.

        ``split_set=True``: ``split`` is already the engine's split (set by
        :meth:`BatchSim.set_split_fused`), not set again.

        ``connections=False`` skips the per-connection figures of the result (``conn_bytes`` and
        ``connections`` stay None), which the env computes only for its ``"flows"`` info.

        ``after_figures`` (numba backend, one window): given the interval's figures (allocated, not yet
        computed), a compiled kernel and its arguments for an instance range, run on each range's kernel
        thread right after that range's figures (the env's observation of the link history). Ignored
        otherwise: the caller checks ``res`` for what it needs.

        ``max_events``: an interval with more events raises
        :class:`~ainet_gym.sim.engine.TooManyEvents` (the world is then mid-interval:
        reset it before stepping again); the benchmark caps its slowest intervals with it.
        """
        sim = self.sim
        assert sim is not None
        if not isinstance(windows, int | np.integer) or windows < 1:
            raise ValueError(f"windows = {windows!r}: must be an integer >= 1")
        active = np.ones(self.batch, dtype=bool) if active is None else np.asarray(active, dtype=bool)
        if (
            sim.engine_state.pinned is not None
        ):  # routing.reroute new_transfers: transfers in flight keep their split
            if split_set:
                raise ValueError("step(split_set=True): routing.reroute new_transfers needs the split itself")
            sim.carry_over()
        if not split_set:
            sim.set_split(split)  # apply the split
        rem0 = sim.state.rem.copy() if connections else sim.state.rem
        duration = np.where(active, self.decision_interval_s, 0.0)
        # the backend's strategy: numba runs one window's interval, figures and after_figures on the kernel
        # threads (fig: those figures); otherwise one interval per window, measured below
        parts, fig = sim.strategy.run_step(
            sim, self.meter, duration, windows, max_events,
            self.job_unit, self.job_ideal_step_s, self.names, after_figures,
        )  # fmt: skip
        res = self.meter.measure(
            sim, parts, rem0, self.job_unit, self.job_ideal_step_s, self.names, connections, fig
        )  # measure
        self.state.step_count += active  # (in place)
        self._advance_dynamics(active)  # advance the dynamics to the next interval
        return res

    # ------------------------------------------------------------------ snapshots
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

    def _units_unchanged(self) -> bool:
        """Whether every instance's units (and slots) are the very objects the engine has stacked."""
        sim = self.sim
        assert sim is not None
        for b in range(self.batch):
            units, slots = self._units_of(b)
            have = sim.units[b]
            if (
                slots != self._slot_units[b]
                or len(have) != len(units)
                or not all(map(operator.is_, have, units))
            ):
                return False
        return True

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

    def job_names(self, b: int) -> list[str | None]:
        """Names of the jobs in the job slots of instance ``b`` (None: empty)."""
        return [None if j is None else j.name for j in self.state.jobs[b]]

    # ------------------------------------------------------------------ dynamics
    def _advance_dynamics(self, mask: np.ndarray, first: bool = False) -> None:
        """Failures, repairs, churn, AllToAll rotation and background on/off at the start of an interval
        of the ``mask`` instances (``first``: the first interval of an episode, no churn yet)."""
        dyn = self.scenario.dynamics
        step = self.state.step_count
        self.links.repair(step, mask)
        # per-instance draws (each instance has its own generator) only where something is random
        do_churn = self.churn and not first
        rebuild = False
        for b in np.flatnonzero(mask) if self.links.random or do_churn else ():
            rng = self.state.rngs[b]
            if self.links.random:
                self.links.draw_failure(b, int(step[b]), rng)
            if do_churn:
                rebuild |= churn(
                    self.state.jobs[b], self.state.gpus[b], len(self.scenario.jobs), self.templates, dyn.job_churn,
                    self.fabric, int(step[b]), rng,
                )  # fmt: skip
        self.links.apply_scheduled(step, mask)
        restack = rebuild or rotation_due(self.scenario.jobs, step[mask])
        if restack:
            self._rebuild()
        sim = self.sim
        assert sim is not None
        self.state.dynamics_changed = restack or self.links.changed
        es = sim.engine_state
        if self.links.changed or es.capacity_bytes_per_s is not self._capacity_set:
            # the capacities of the next interval (a new array: an earlier result's view keeps its values)
            es.capacity_bytes_per_s = self._capacity_set = self.links.capacity_bytes_per_s()
        on = np.zeros(sim.n_units, dtype=bool)
        on[self.bg_unit] = background_on(self.scenario.background, step, self.state.bg_offset)
        sim.state.bg_on[...] = on

    # ------------------------------------------------------------------ structure
    def _units_of(self, b: int) -> tuple[list[CompiledUnit], list[int]]:
        """Compiled units of instance ``b`` (its jobs in slot order, then its background sources) and the
        unit index of each job slot (-1: empty)."""
        units: list[CompiledUnit] = []
        slot_unit: list[int] = []
        step = int(self.state.step_count[b])
        gpus = self.state.gpus[b]
        for j in range(self.n_job_slots):
            job = self.state.jobs[b][j]
            if job is None:
                slot_unit.append(-1)
                continue
            slot_unit.append(len(units))
            units.append(self._compiled_job(job, gpus[j], alltoall_rotation(job, step)))
        for i, bg in enumerate(self.scenario.background):
            if bg.job is not None:
                idx = next(j for j, jb in enumerate(self.scenario.jobs) if jb.name == bg.job)
                g = gpus[idx] if gpus[idx] is not None else np.arange(self.fabric.n_gpus)
            else:
                g = np.concatenate([x for x in gpus[: len(self.scenario.jobs)] if x is not None])
            units.append(self._compiled_background(i, g))
        return units, slot_unit

    def _same_units(self, a: int, b: int) -> bool:
        """Whether instance ``b`` has the units of instance ``a`` (:meth:`_units_of`): the same job objects on
        the same GPU arrays (or empty slots) at the same step (AllToAll rotations depend on the step only;
        background sources on the GPUs only). A cheap test by identity; False only costs a
        :meth:`_units_of` call."""
        if self.state.step_count[a] != self.state.step_count[b]:
            return False
        return all(map(operator.is_, self.state.jobs[a], self.state.jobs[b])) and all(
            map(operator.is_, self.state.gpus[a], self.state.gpus[b])
        )

    def _compiled_job(self, job: JobSpec, gpus: np.ndarray, rot: int) -> CompiledUnit:
        rot %= rotation_period(job, gpus.shape[0])  # the compiled job repeats with this period
        key = (job, tuple(gpus.tolist()), rot)  # the job's content, not its identity
        if key not in self._unit_cache:
            if len(self._unit_cache) > _UNIT_CACHE_SIZE:
                self._unit_cache.clear()
            self._unit_cache[key] = compile_job(
                self.fabric,
                job,
                gpus,
                rot,
                carry=self.reroute == "new_transfers",
                split_flows=self.split_flows,
                ring_run_ahead_bytes=self.ring_run_ahead_bytes,
            )
        return self._unit_cache[key]

    def _compiled_background(self, i: int, gpus: np.ndarray) -> CompiledUnit:
        key = (i, tuple(gpus.tolist()))
        if key not in self._bg_cache:
            if len(self._bg_cache) > _UNIT_CACHE_SIZE:
                self._bg_cache.clear()
            self._bg_cache[key] = compile_background(self.fabric, self.scenario.background[i], gpus, i)
        return self._bg_cache[key]

    def _rebuild(self, reset_mask: np.ndarray | None = None) -> None:
        """Restack all instances' units; surviving units keep their state."""
        per_inst, slot_units = [], []
        for b in range(self.batch):
            if b > 0 and self._same_units(b - 1, b):  # the copies of a deterministic placement
                u, s = list(per_inst[-1]), list(slot_units[-1])
            else:
                u, s = self._units_of(b)
            per_inst.append(u)
            slot_units.append(s)
        if reset_mask is not None and self._restart_in_place(per_inst, slot_units, reset_mask):
            return
        if self.sim is not None:
            self.sim.set_units(
                per_inst, keep=self._kept_units(slot_units, reset_mask), old=self.sim.snapshot_units()
            )
        else:
            dyn = self.scenario.dynamics
            self.sim = BatchSim(
                self.fabric,
                per_inst,
                dyn.rate_updates,
                self.backend,
                rate_quantum_s=dyn.rate_quantum_us * 1e-6,
            )
        self._slot_units = slot_units
        self._slot_keys = [[self._job_key(b, j) for j in range(self.n_job_slots)] for b in range(self.batch)]
        self._unit_offset = np.concatenate([[0], np.cumsum([len(u) for u in per_inst])])[:-1]
        self.job_unit = np.full((self.batch, self.n_job_slots), -1, dtype=np.int64)
        self.bg_unit = np.zeros((self.batch, len(self.scenario.background)), dtype=np.int64)
        for b in range(self.batch):
            n_jobs = 0
            for j, ui in enumerate(slot_units[b]):
                if ui >= 0:
                    self.job_unit[b, j] = self._unit_offset[b] + ui
                    n_jobs += 1
            for i in range(len(self.scenario.background)):
                self.bg_unit[b, i] = self._unit_offset[b] + n_jobs + i
        self.names = [self.job_names(b) for b in range(self.batch)]
        self.job_ideal_step_s, self.job_ideal_comm_s = self.ideal.tables(self.state.jobs, self.state.gpus)

    def _kept_units(self, slot_units: list[list[int]], reset_mask: np.ndarray | None) -> np.ndarray:
        """(new units,) the old flat unit each new unit continues (-1: a new one): the same job on the
        same GPUs in the same slot of an instance not being reset, and every background source."""
        old_map: dict[tuple, int] = {}
        for b in range(self.batch):
            if reset_mask is not None and reset_mask[b]:
                continue
            for j, ui in enumerate(self._slot_units[b]):
                if ui >= 0:
                    old_map[(b, j, *self._slot_keys[b][j])] = int(self._unit_offset[b] + ui)
            n_jobs_old = sum(1 for x in self._slot_units[b] if x >= 0)
            for i in range(len(self.scenario.background)):
                old_map[(b, "bg", i)] = int(self._unit_offset[b] + n_jobs_old + i)
        keep = []
        for b in range(self.batch):
            for j, ui in enumerate(slot_units[b]):
                if ui >= 0:
                    keep.append(old_map.get((b, j, *self._job_key(b, j)), -1))
            for i in range(len(self.scenario.background)):
                keep.append(old_map.get((b, "bg", i), -1))
        return np.asarray(keep, dtype=np.int64)

    def _restart_in_place(
        self, per_inst: list[list[CompiledUnit]], slot_units: list[list[int]], reset_mask: np.ndarray
    ) -> bool:
        """A reset that leaves every instance's units as they are (the same compiled units in the same job
        slots, as a deterministic placement gives): restart the units of the reset instances in place
        instead of restacking the whole batch. Returns False (nothing done) when the structure changes.

        The restarted state is that of a fresh :class:`BatchSim` of those instances (the engine's own
        initial state), carried over by the engine's own :meth:`BatchSim.snapshot_units` / :meth:`BatchSim.restore_units` (every
        per-unit, per-phase and per-flow field it keeps), so the result equals a full rebuild (``tests/envs/test_fast_paths.py`` checks it).
        """
        sim = self.sim
        if sim is None or slot_units != self._slot_units:
            return False
        for old, new in zip(sim.units, per_inst, strict=True):
            if len(old) != len(new) or not all(map(operator.is_, old, new)):
                return False
        idx = np.flatnonzero(reset_mask)
        if idx.size:
            # one fresh instance per distinct unit list (a deterministic placement gives every copy the
            # same one): its initial state is that of every reset copy with those units, whose clocks a
            # reset has zeroed
            group = np.zeros(self.batch, dtype=np.int64)  # (batch,) fresh instance of each reset copy
            fresh_units: list[list[CompiledUnit]] = []  # instances whose unit lists are the same objects
            for b in idx.tolist():
                units = per_inst[b]
                # the copies of a deterministic placement come in a row: the last group first
                for g in range(len(fresh_units) - 1, -1, -1):
                    rep = fresh_units[g]
                    if len(rep) == len(units) and all(map(operator.is_, rep, units)):
                        group[b] = g
                        break
                else:
                    group[b] = len(fresh_units)
                    fresh_units.append(units)
            # unit of the batch <- unit of the fresh instances (-1: not reset): the same place in its instance
            n_fresh = np.array([len(u) for u in fresh_units], dtype=np.int64)
            fresh_base = np.concatenate(([0], np.cumsum(n_fresh)[:-1]))
            inst = sim.unit_inst
            within = np.arange(sim.n_units) - sim.inst_unit[inst]
            keep = np.where(reset_mask[inst], fresh_base[group[inst]] + within, -1)
            on_clock = bool(sim.state.time_s[idx].any())  # not after a reset
            if on_clock:  # one fresh instance per copy, on its clock
                fresh_units = [per_inst[b] for b in idx]
                keep[keep >= 0] = np.arange(int((keep >= 0).sum()))
            # the engine's own initial state (iter_start from the clocks) and carry-over of unit state
            if on_clock:
                fresh = BatchSim.initial_units(self.fabric, fresh_units, sim.state.time_s[idx])
            else:
                fresh = self._initial_units(fresh_units)
            sim.restore_units(fresh, keep)
            sim.set_split(None)  # as a restack leaves it
        return True

    def _initial_units(self, fresh_units: list[list[CompiledUnit]]) -> UnitSnapshot:
        """:meth:`BatchSim.initial_units` of ``fresh_units`` on clocks at 0, kept (read-only) for the next
        reset with the same unit objects: the episodes of a deterministic placement all start alike."""
        kept = self._fresh_initial
        if (
            kept is not None
            and len(kept[0]) == len(fresh_units)
            and all(len(a) == len(b) and all(map(operator.is_, a, b)) for a, b in zip(kept[0], fresh_units))
        ):
            return kept[1]
        snap = BatchSim.initial_units(self.fabric, fresh_units, np.zeros(len(fresh_units)))
        for a in snap.state.arrays():
            a.flags.writeable = False
        self._fresh_initial = ([list(u) for u in fresh_units], snap)
        return snap

    def _job_key(self, b: int, j: int) -> tuple:
        job, g = self.state.jobs[b][j], self.state.gpus[b][j]
        return ("none",) if job is None else (job.name, tuple(g.tolist()))

    # ------------------------------------------------------------------ routing
    def default_split(self, copy: bool = True) -> np.ndarray:
        """Static ECMP split of every connection (connections, max_paths); ``copy=False`` returns the
        cached array itself, read-only.

        The hash seed of an instance is drawn from its generator at reset: the same episode seed gives
        the same hashing, different seeds sample the ECMP lottery. Like a switch that drops a dead next
        hop from its ECMP group, a connection with a failed link on some candidate paths hashes over its
        live paths only (all dead: unchanged, it stalls).
        """
        sim = self.sim
        assert sim is not None
        cached = self._default_cache
        seeds = self.state.hash_seed.tobytes()
        # valid while the connections (the same conn_key array), the hash seeds and the dead links are;
        # the capacity array is the engine's own while no capacity factor changes (see _advance_dynamics),
        # so the dead links are compared only when it is a new one
        cap = sim.engine_state.capacity_bytes_per_s
        if cached is not None and cached[0] is sim.conn_key and cached[1] is cap and cached[2] == seeds:
            return cached[4].copy() if copy else cached[4]
        dead = cap <= 0
        key = dead.tobytes() if dead.any() else b""
        if cached is not None and cached[0] is sim.conn_key and cached[2] == seeds and cached[3] == key:
            self._default_cache = (sim.conn_key, cap, seeds, key, cached[4])
            return cached[4].copy() if copy else cached[4]
        seed = self.state.hash_seed[sim.unit_inst[sim.conn_unit]] if sim.n_conns else 0
        qps = self.scenario.routing.qps_per_connection
        live = self.live_paths()
        n_live = live.sum(axis=1)
        split = ecmp_split(sim.conn_npaths, sim.conn_key, self.max_paths, qps, seed)
        hit = (n_live < sim.conn_npaths) & (n_live > 0)
        if hit.any():
            # hash onto the k-th live path: pick index among live ones, then map back
            pick = ecmp_split(
                n_live[hit], sim.conn_key[hit], self.max_paths, qps, seed if np.ndim(seed) == 0 else seed[hit]
            )
            rank = np.cumsum(live[hit], axis=1) - 1  # rank of each live path among live ones
            remap = np.zeros_like(pick)
            for k in range(self.max_paths):  # loop over path slots (max_paths), not over flows
                remap += np.where(live[hit] & (rank == k), pick[:, k : k + 1], 0.0)
            split[hit] = remap
        split.flags.writeable = False
        self._default_cache = (sim.conn_key, cap, seeds, key, split)
        return split.copy() if copy else split

    def wcmp(self, link_weight: np.ndarray) -> np.ndarray:
        """WCMP split of every connection (connections, max_paths) from per-instance link weights
        (batch, links): one call over the batch, with ECMP groups and link ids offset per instance."""
        sim = self.sim
        assert sim is not None
        g = self.fabric.link_group
        n_groups = int(g.max()) + 1 if g.size else 0
        offset = (np.arange(self.batch) * n_groups)[:, None]
        groups = np.where(g[None, :] >= 0, g[None, :] + offset, -1).reshape(-1)
        split = wcmp_split(
            sim.conn_paths_global, sim.conn_npaths, np.asarray(link_weight).reshape(-1), groups
        )
        return self.withdraw_dead(split)

    def withdraw_dead(self, split: np.ndarray) -> np.ndarray:
        """``split`` with the share of paths through a failed link (capacity 0) moved, pro rata, to the
        connection's live paths, as switches drop a failed port from their ECMP/WCMP groups (unchanged for
        a connection whose every path is dead, and when no link is down)."""
        sim = self.sim
        assert sim is not None
        if not (sim.engine_state.capacity_bytes_per_s <= 0).any():
            return split
        kept = np.where(self.live_paths(), split, 0.0)
        tot = kept.sum(axis=1, keepdims=True)
        return safe_divide(kept, tot, split)

    def live_paths(self) -> np.ndarray:
        """(connections, max_paths) bool: candidate paths whose links all have capacity > 0."""
        sim = self.sim
        assert sim is not None
        valid = np.arange(self.max_paths)[None, :] < sim.conn_npaths[:, None]
        dead = sim.engine_state.capacity_bytes_per_s.reshape(-1) <= 0
        if not dead.any():
            return valid
        dead = np.concatenate([dead, [False]])
        return valid & ~dead[sim.conn_paths_global].any(axis=2)
