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

This module holds the world's construction, reset, step and dynamics; its other sides are its base classes,
one module each: the compiled units of the job slots, stacked into the engine and restacked
(:class:`~ainet_gym.sim.world_units.WorldUnits`), the world's own routing, static ECMP and WCMP with dead paths
withdrawn (:class:`~ainet_gym.sim.world_routing.WorldRouting`), and snapshots, restores and state bound by
reference (:class:`~ainet_gym.sim.world_snapshot.WorldRestore`, beside the record
:class:`~ainet_gym.sim.world_snapshot.WorldSnapshot`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np

from ainet_gym.fabric.topology import Fabric, build_fabric
from ainet_gym.scenario.spec import JobSpec, Scenario
from ainet_gym.sim.dynamics import LinkState, background_on, churn, episode_jitter, rotation_due
from ainet_gym.sim.engine import BatchSim, CompiledUnit, UnitSnapshot, resolve_backend
from ainet_gym.sim.ideal import IdealTimes
from ainet_gym.sim.metrics import ConnectionTable, IntervalMeter, NumbaFigures, StepResult
from ainet_gym.sim.placement import place_job, placement_is_deterministic
from ainet_gym.sim.state import WorldState
from ainet_gym.sim.world_routing import WorldRouting
from ainet_gym.sim.world_snapshot import WorldRestore, WorldSnapshot
from ainet_gym.sim.world_units import WorldUnits

__all__ = ["ConnectionTable", "FabricWorld", "StepResult", "WorldSnapshot"]


class FabricWorld(WorldUnits, WorldRouting, WorldRestore):
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
        # routing.reroute_held_bytes: the bytes a path part keeps on its old path at a split change in flight
        self.reroute_held_bytes = scenario.routing.reroute_held_bytes
        # routing.reroute_held_weight: a held part's coefficient, 1 (one) or its part's old fraction (part)
        self.reroute_held_weight = scenario.routing.reroute_held_weight
        # routing.part_share: a path part's coefficient f with all the bytes (fraction) or 1 with f of them
        self.part_share = scenario.routing.part_share
        # routing.reroute_held_parts: every part that loses share holds bytes (all) or only a queued one (queued)
        self.reroute_held_parts = scenario.routing.reroute_held_parts
        # routing.ring_window_bytes: the NCCL window of the rings' sub-flows (None: none; sim.ring_window)
        self.ring_window_bytes = scenario.routing.ring_window_bytes
        # routing.ring_window_chunk_bytes: the window's upstream bound in whole chunks (None: not rounded)
        self.ring_window_chunk_bytes = scenario.routing.ring_window_chunk_bytes
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
