"""The structure side of :class:`~ainet_gym.sim.world.FabricWorld` (:class:`WorldUnits`, its base class): the
compiled units of each instance (its jobs in slot order, then its background sources; compiled once per job,
GPUs and AllToAll rotation, and cached), stacked into the engine, restacked with the surviving units' state
kept, and restarted in place by a reset that leaves them as they are."""

from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np

from ainet_gym.fabric.topology import Fabric
from ainet_gym.scenario.spec import JobSpec, Scenario
from ainet_gym.sim.dynamics import alltoall_rotation
from ainet_gym.sim.engine import (
    BatchSim,
    CompiledUnit,
    UnitSnapshot,
    compile_background,
    compile_job,
    rotation_period,
)
from ainet_gym.sim.ideal import IdealTimes
from ainet_gym.sim.state import WorldState

__all__ = ["WorldUnits"]

_UNIT_CACHE_SIZE = 512  # compiled units kept per world (placements x rotations seen recently)


class WorldUnits:
    """The structure side of :class:`~ainet_gym.sim.world.FabricWorld`: it holds no state of its own but reads
    and writes the world's, the attributes annotated here, which ``FabricWorld.__init__`` sets (``job_names``
    is its method)."""

    scenario: Scenario
    batch: int
    backend: str
    fabric: Fabric
    ideal: IdealTimes
    n_job_slots: int
    reroute: str
    split_flows: str
    ring_run_ahead_bytes: float | None
    reroute_held_bytes: float
    reroute_held_weight: str
    part_share: str
    reroute_held_parts: str
    ring_window_bytes: float | None
    ring_window_chunk_bytes: float | None
    state: WorldState
    sim: BatchSim | None
    job_unit: np.ndarray
    bg_unit: np.ndarray
    job_ideal_step_s: np.ndarray
    job_ideal_comm_s: np.ndarray
    names: list[list[str | None]]
    job_names: Callable[[int], list[str | None]]
    _slot_units: list[list[int]]
    _slot_keys: list[list[tuple]]
    _unit_offset: np.ndarray
    _unit_cache: dict[tuple, CompiledUnit]
    _bg_cache: dict[tuple, CompiledUnit]
    _fresh_initial: tuple[list[list[CompiledUnit]], UnitSnapshot] | None

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
                reroute_held_bytes=self.reroute_held_bytes,
                reroute_held_weight=self.reroute_held_weight,
                part_share=self.part_share,
                reroute_held_parts=self.reroute_held_parts,
                ring_window_bytes=self.ring_window_bytes,
                ring_window_chunk_bytes=self.ring_window_chunk_bytes,
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
