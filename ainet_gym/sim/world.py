"""A scenario brought to life: placement, background, failures, churn and metrics, batched.

:class:`FabricWorld` owns ``batch`` independent copies (instances) of one scenario, each with its own
seeded generator, and steps them together through :class:`~ainet_gym.sim.engine.BatchSim`. It is the
engine under both :func:`ainet_gym.simulate` and the Gymnasium environments.

Action slots: every job slot ``j`` owns ``slot_width[j]`` consecutive slots, one per connection of
the job (a connection is a (source GPU, destination GPU) pair its collectives use). A slot is
*controllable* when its connection has more than one candidate path; other slots are masked.
Background traffic always follows static ECMP (it belongs to other tenants).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ainet_gym.fabric.topology import TIERS, Fabric, build_fabric, nonblocking_fabric
from ainet_gym.routing.split import ecmp_split, wcmp_split
from ainet_gym.scenario.spec import JobSpec, Scenario
from ainet_gym.sim.engine import (
    BatchSim,
    CompiledUnit,
    IntervalMetrics,
    compile_background,
    compile_job,
    resolve_backend,
)
from ainet_gym.units import BYTES_PER_S_TO_GBPS

__all__ = ["ConnectionTable", "FabricWorld", "StepResult"]


@dataclass
class StepResult:
    """Per-instance results of one decision interval. Arrays have a leading batch axis."""

    duration_s: np.ndarray  # (batch,)
    job_alive: np.ndarray  # (batch, jobs) bool
    job_gpus: np.ndarray  # (batch, jobs) int
    iterations: np.ndarray  # (batch, jobs)
    step_time_s: np.ndarray  # (batch, jobs) mean over completed iterations, nan where none
    comm_time_s: np.ndarray  # (batch, jobs)
    ideal_step_s: np.ndarray  # (batch, jobs)
    gpu_utilization: np.ndarray  # (batch, jobs) compute time / elapsed time, nan where not running
    efficiency: np.ndarray  # (batch, jobs) ideal / actual step time in (0, 1], nan where not running
    link_bytes: np.ndarray  # (batch, links)
    link_utilization: np.ndarray  # (batch, links) bytes / (current capacity * duration), 0 where failed
    max_link_utilization: np.ndarray  # (batch,) over network (non-NVLink) links
    tier_bytes: np.ndarray  # (batch, tiers)
    stalled_transfers: np.ndarray  # (batch,)
    failed_links: np.ndarray  # (batch,) network links at capacity 0 during the interval
    events: int
    # (batch, jobs) name of the job that ran in each slot during this interval (None: empty); arrivals
    # and departures at the interval's end show up in the next result, never in this one
    job_names: list[list[str | None]] = field(default_factory=list)
    # (batch, jobs) s, compute time of one iteration of the job that ran in the slot (nan: empty)
    compute_s: np.ndarray | None = None
    capacity_bytes_per_s: np.ndarray | None = None  # (batch, links) bytes/s during the interval
    throughput_gbps: np.ndarray | None = None  # (batch,) Gbit/s the GPUs' NICs sent into the network
    link_peak_utilization: np.ndarray | None = None  # (batch, links) max over windows of the window mean
    conn_bytes: np.ndarray | None = None  # (connections,) bytes each job connection moved; nan: background
    # the job connections as they were during the interval (churn may restack them after it)
    connections: ConnectionTable | None = None
    slot_bytes: np.ndarray | None = None  # (batch, slots) bytes moved by each action slot's connection


@dataclass(frozen=True)
class ConnectionTable:
    """The job connections of one decision interval, read from the simulation before the interval's
    arrivals and departures restack it, so that per-connection figures describe the jobs that ran."""

    job_unit: np.ndarray  # (batch, jobs) flat unit of each job slot, -1 if empty
    conn_off: np.ndarray  # (units,) first connection of each unit
    n_conns: np.ndarray  # (units,) connections of each unit
    src: np.ndarray  # (conns,) source GPU
    dst: np.ndarray  # (conns,) destination GPU
    paths: np.ndarray  # (conns, max_paths, max_hops) link ids, -1 padded
    npaths: np.ndarray  # (conns,) candidate paths
    split: np.ndarray  # (conns, max_paths) share of each path
    bytes: np.ndarray  # (conns,) bytes moved in the interval; nan for background


class FabricWorld:
    """``batch`` seeded instances of ``scenario`` on one shared fabric.

    ``backend`` selects the simulation backend (``"numba"`` or ``"numpy"``; None: ``$AINET_GYM_BACKEND``,
    else numba when it imports), see :func:`ainet_gym.sim.engine.resolve_backend`.
    """

    def __init__(self, scenario: Scenario, batch: int = 1, backend: str | None = None) -> None:
        self.scenario = scenario
        self.batch = batch
        self.backend = resolve_backend(backend)
        self.fabric: Fabric = build_fabric(scenario.fabric, max_paths=scenario.routing.max_paths)
        self._nb_fabric: Fabric | None = None
        self._ideal_cache: dict[tuple, float] = {}
        self._ideal_comm_cache: dict[tuple, float] = {}
        churn = scenario.dynamics.job_churn
        self.churn = churn.arrival_rate > 0
        self.templates: tuple[JobSpec, ...] = churn.templates or scenario.jobs
        self.n_job_slots = max(len(scenario.jobs), churn.max_jobs if self.churn else 0)
        # slot width per job slot: connections of the widest job that may occupy it
        widths = [self._n_conns(j) for j in scenario.jobs]
        tmpl_w = max((self._n_conns(t) for t in self.templates), default=0) if self.churn else 0
        self.slot_width = np.array(
            [max(widths[j] if j < len(widths) else 0, tmpl_w) for j in range(self.n_job_slots)],
            dtype=np.int64,
        )
        self.slot_offset = np.concatenate([[0], np.cumsum(self.slot_width)])[:-1]
        self.n_slots = int(self.slot_width.sum())
        self.max_paths = scenario.routing.max_paths
        self.network_links = np.flatnonzero(self.fabric.network_links)
        # (links, tiers) 1 where a link belongs to a tier: tier bytes in one matrix product
        self._tier_links = [np.flatnonzero(self.fabric.link_tier == i) for i in range(len(TIERS))]
        self.decision_interval_s = self._decision_interval()
        self.rngs = [np.random.default_rng(scenario.seed) for _ in range(batch)]
        self.sim: BatchSim | None = None
        self.step_count = np.zeros(batch, dtype=np.int64)
        self.hash_seed = np.full(batch, scenario.seed, dtype=np.int64)  # (batch,) ECMP hash seeds
        # (eligible,) link ids a random failure may hit: network links of the listed tiers, one per duplex pair
        f = self.fabric
        self._failure_eligible = np.flatnonzero(
            f.network_links
            & np.isin(np.asarray(TIERS)[f.link_tier], scenario.dynamics.link_failures.tiers)
            & (f.link_src < f.link_dst)
        )
        self._names: list[list[str | None]] = []  # (batch, jobs) job names as of the last restack
        # (batch, backgrounds) step offset of each periodic background in this episode (offset_steps plus
        # its per-episode jitter) and the start-jittered copies of the initial jobs, see _draw_jitter
        self.bg_offset = np.array(
            [[bg.offset_steps for bg in scenario.background] for _ in range(batch)], dtype=np.int64
        ).reshape(batch, len(scenario.background))
        self._jittered: dict[tuple[int, float], JobSpec] = {}

    # ------------------------------------------------------------------ helpers
    def _n_conns(self, job: JobSpec) -> int:
        gpus = np.arange(job.gpus) % self.fabric.n_gpus
        u = compile_job(self.fabric, job, gpus) if job.collectives else None
        return 0 if u is None else int(u.conn_src.shape[0])

    def ideal_step_s(self, job: JobSpec, gpus: np.ndarray) -> float:
        """Step time of ``job`` alone on a non-blocking fabric with the same hosts (cached)."""
        hosts = tuple(self.fabric.gpu_host[gpus].tolist())
        key = (job.compute_ms, job.overlap, job.collectives, tuple(gpus.tolist()), hosts)
        if key not in self._ideal_cache:
            if self._nb_fabric is None:
                self._nb_fabric = nonblocking_fabric(self.fabric)
            solo = replace(job, start_ms=0.0)
            unit = compile_job(self._nb_fabric, solo, gpus)
            sim = BatchSim(self._nb_fabric, [[unit]], backend=self.backend)
            if self._nb_fabric.endpoint_ports is not None:  # multi-port NICs: every port, evenly
                n = sim.conn_npaths[:, None]
                sim.set_split((np.arange(self.max_paths)[None, :] < n) / np.maximum(n, 1))
            horizon = max(solo.compute_ms * 1e-3, 1e-3)
            for _ in range(60):
                sim.run_interval(horizon)
                if sim.iterations_total[0] >= 1:
                    break
                horizon *= 2
            else:
                raise RuntimeError(f"job {job.name!r}: no iteration completes on a non-blocking fabric")
            self._ideal_cache[key] = float(sim.last_step_s[0])
            self._ideal_comm_cache[key] = float(sim.last_comm_s[0])
        return self._ideal_cache[key]

    def ideal_comm_s(self, job: JobSpec, gpus: np.ndarray) -> float:
        """Communication time of one iteration of ``job`` alone on the non-blocking fabric (cached)."""
        self.ideal_step_s(job, gpus)
        hosts = tuple(self.fabric.gpu_host[gpus].tolist())
        return self._ideal_comm_cache[
            (job.compute_ms, job.overlap, job.collectives, tuple(gpus.tolist()), hosts)
        ]

    def _decision_interval(self) -> float:
        d = self.scenario.dynamics.decision_interval_ms
        if d is not None:
            return d * 1e-3
        jobs = list(self.scenario.jobs) + (list(self.templates) if self.churn else [])
        rng = np.random.default_rng(0)
        ideal = [self.ideal_step_s(j, self._place(j, np.ones(self.fabric.n_gpus, bool), rng)) for j in jobs]
        return max(ideal, default=0.1)

    def _place(self, job: JobSpec, free: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """GPU ids for ``job`` among ``free`` GPUs, in rank order (``job.rank_order``).

        ``placement`` keeps the order the placement gives (ascending ids for contiguous and random,
        leaf round-robin for spread, the listed order for explicit ids); ``sorted`` ascending ids;
        ``shuffled`` a permutation drawn from the instance's generator (after the placement's own draws,
        so the GPUs are those of ``placement``); ``by_host`` host by host, hosts in the order the placement
        first uses them, each host's GPUs in ascending id (consecutive local ranks).
        """
        g = self._place_gpus(job, free, rng)
        order = job.rank_order
        if order == "placement":
            return g
        if order == "sorted":
            return np.sort(g)
        if order == "shuffled":
            return g[rng.permutation(g.shape[0])]
        if order == "by_host":
            host = self.fabric.gpu_host[g]
            _, first = np.unique(host, return_index=True)
            host_rank = np.empty(int(host.max()) + 1, dtype=np.int64)
            host_rank[host[np.sort(first)]] = np.arange(first.shape[0])
            return g[np.lexsort((g, host_rank[host]))]
        raise ValueError(f"job {job.name!r}: unknown rank_order {order!r}")

    def _place_gpus(self, job: JobSpec, free: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """GPU ids for ``job`` among ``free`` GPUs, in the placement's order."""
        n = job.gpus
        ids = np.flatnonzero(free)
        if ids.shape[0] < n:
            raise ValueError(f"job {job.name!r}: needs {n} GPUs, {ids.shape[0]} free")
        pl = job.placement
        if not isinstance(pl, str):
            g = np.asarray(pl, dtype=np.int64)
            if not free[g].all():
                raise ValueError(f"job {job.name!r}: explicit GPUs {g[~free[g]].tolist()} are taken")
            return g
        if pl == "contiguous":
            # first fit of a contiguous free block; else the lowest free ids (fragmented)
            run = np.convolve(free.astype(np.int64), np.ones(n, dtype=np.int64), mode="valid")
            starts = np.flatnonzero(run == n)
            return np.arange(starts[0], starts[0] + n) if starts.size else ids[:n]
        if pl == "spread":
            # round-robin over leaves: rank r on the (r mod leaves)-th leaf with free GPUs, so that
            # consecutive ranks (ring neighbours) sit on different leaves
            leaf = self.fabric.endpoint_leaf[ids]
            by_leaf = np.argsort(leaf, kind="stable")
            rank_in_leaf = np.empty_like(ids)
            rank_in_leaf[by_leaf] = np.arange(ids.shape[0]) - np.searchsorted(leaf[by_leaf], leaf[by_leaf])
            order = np.lexsort((leaf, rank_in_leaf))
            return ids[order[:n]]
        if pl == "random":
            return np.sort(rng.choice(ids, size=n, replace=False))
        raise ValueError(f"job {job.name!r}: unknown placement {pl!r}")

    # ------------------------------------------------------------------ episode
    def reset(self, seeds: list[int | None] | None = None, mask: np.ndarray | None = None) -> None:
        """Start a new episode in the instances selected by ``mask`` (all by default)."""
        mask = np.ones(self.batch, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        seeds = seeds if seeds is not None else [None] * self.batch
        if self.sim is None:
            self.jobs: list[list[JobSpec | None]] = [[None] * self.n_job_slots for _ in range(self.batch)]
            self.gpus: list[list[np.ndarray | None]] = [[None] * self.n_job_slots for _ in range(self.batch)]
            self.lifetime = np.full((self.batch, self.n_job_slots), -1, dtype=np.int64)
            self.fail_until = np.full((self.batch, self.fabric.n_links), -1, dtype=np.int64)
            self.cap_factor = np.ones((self.batch, self.fabric.n_links))
            self.dropped_arrivals = np.zeros(self.batch, dtype=np.int64)
        for b in np.flatnonzero(mask):
            if seeds[b] is not None:
                self.rngs[b] = np.random.default_rng(seeds[b])
            rng = self.rngs[b]
            self.hash_seed[b] = int(rng.integers(2**31))
            free = np.ones(self.fabric.n_gpus, dtype=bool)
            self.jobs[b] = [None] * self.n_job_slots
            self.gpus[b] = [None] * self.n_job_slots
            self.lifetime[b] = -1
            for j, job in enumerate(self.scenario.jobs):
                g = self._place(job, free, rng)
                free[g] = False
                self.jobs[b][j] = job
                self.gpus[b][j] = g
            self._draw_jitter(b, rng)
            self.fail_until[b] = -1
            self.cap_factor[b] = 1.0
            self.step_count[b] = 0
            self.dropped_arrivals[b] = 0
        if self.sim is not None:
            self.sim.time_s[mask] = 0.0
        self._rebuild(reset_mask=mask)
        self._apply_step_dynamics(mask, first=True)

    def _draw_jitter(self, b: int, rng: np.random.Generator) -> None:
        """Per-episode variation of instance ``b``: each initial job's start (``start_jitter_ms``, on a
        0.1 ms grid) and each periodic background's offset (``offset_jitter_steps``), drawn after the
        placements and only for fields > 0, so a scenario without jitter draws nothing and its episodes
        are the same as before the fields existed."""
        for j, job in enumerate(self.scenario.jobs):
            if job.start_jitter_ms > 0:
                start = round(job.start_ms + rng.integers(int(job.start_jitter_ms * 10) + 1) / 10, 1)
                # one JobSpec object per (job, start): the unit cache is keyed by the object's id
                self.jobs[b][j] = self._jittered.setdefault((j, start), replace(job, start_ms=start))
        for i, bg in enumerate(self.scenario.background):
            jitter = bg.offset_jitter_steps
            self.bg_offset[b, i] = bg.offset_steps + (int(rng.integers(jitter + 1)) if jitter > 0 else 0)

    def _units_of(self, b: int) -> tuple[list[CompiledUnit], list[int]]:
        units: list[CompiledUnit] = []
        slot_unit: list[int] = []
        step = int(self.step_count[b])
        for j in range(self.n_job_slots):
            job = self.jobs[b][j]
            if job is None:
                slot_unit.append(-1)
                continue
            rot = 0
            for c in job.collectives:
                if c.op == "alltoall" and c.skew > 0 and c.skew_period_steps:
                    rot = step // c.skew_period_steps
            slot_unit.append(len(units))
            units.append(self._compile_cached(job, self.gpus[b][j], rot))
        for i, bg in enumerate(self.scenario.background):
            if bg.job is not None:
                idx = next(j for j, jb in enumerate(self.scenario.jobs) if jb.name == bg.job)
                g = self.gpus[b][idx] if self.gpus[b][idx] is not None else np.arange(self.fabric.n_gpus)
            else:
                g = np.concatenate([x for x in self.gpus[b][: len(self.scenario.jobs)] if x is not None])
            units.append(self._compile_bg_cached(i, g))
        return units, slot_unit

    def _compile_cached(self, job: JobSpec, gpus: np.ndarray, rot: int) -> CompiledUnit:
        cache = self.__dict__.setdefault("_unit_cache", {})
        key = (id(job), job.name, tuple(gpus.tolist()), rot)
        if key not in cache:
            if len(cache) > 512:
                cache.clear()
            cache[key] = compile_job(self.fabric, job, gpus, rot)
        return cache[key]

    def _compile_bg_cached(self, i: int, gpus: np.ndarray) -> CompiledUnit:
        cache = self.__dict__.setdefault("_bg_cache", {})
        key = (i, tuple(gpus.tolist()))
        if key not in cache:
            if len(cache) > 512:
                cache.clear()
            cache[key] = compile_background(self.fabric, self.scenario.background[i], gpus, i)
        return cache[key]

    def _rebuild(self, reset_mask: np.ndarray | None = None) -> None:
        """Restack all instances' units; surviving units keep their state."""
        per_inst, slot_units = [], []
        for b in range(self.batch):
            u, s = self._units_of(b)
            per_inst.append(u)
            slot_units.append(s)
        if reset_mask is not None and self._restart_in_place(per_inst, slot_units, reset_mask):
            return
        keep = None
        if self.sim is not None:
            old_map: dict[tuple, int] = {}
            for b in range(self.batch):
                if reset_mask is not None and reset_mask[b]:
                    continue
                for j, ui in enumerate(self.slot_units[b]):
                    if ui >= 0:
                        old_map[(b, j, *self._job_key(b, j, old=True))] = self._flat_index(b, ui)
                n_jobs_old = sum(1 for x in self.slot_units[b] if x >= 0)
                for i in range(len(self.scenario.background)):
                    old_map[(b, "bg", i)] = self._flat_index(b, n_jobs_old + i)
            keep_list = []
            for b in range(self.batch):
                for j, ui in enumerate(slot_units[b]):
                    if ui >= 0:
                        keep_list.append(old_map.get((b, j, *self._job_key(b, j, old=False)), -1))
                for i in range(len(self.scenario.background)):
                    keep_list.append(old_map.get((b, "bg", i), -1))
            keep = np.asarray(keep_list, dtype=np.int64)
            self.sim.snapshot_units()
            cap = self.sim.capacity_bytes_per_s
            time_s = self.sim.time_s
            self.sim.set_units(per_inst, keep=keep)
            self.sim.capacity_bytes_per_s = cap
            self.sim.time_s = time_s
        else:
            self.sim = BatchSim(self.fabric, per_inst, self.scenario.dynamics.rate_updates, self.backend)
        self.slot_units = slot_units
        self._slot_keys = [
            [self._job_key(b, j, old=False) for j in range(self.n_job_slots)] for b in range(self.batch)
        ]
        self._unit_offset = np.concatenate([[0], np.cumsum([len(u) for u in per_inst])])[:-1]
        self.job_unit = np.full((self.batch, self.n_job_slots), -1, dtype=np.int64)  # (batch, jobs) flat unit
        self.bg_unit = np.zeros((self.batch, len(self.scenario.background)), dtype=np.int64)  # (batch, bg)
        for b in range(self.batch):
            n_jobs = 0
            for j, ui in enumerate(slot_units[b]):
                if ui >= 0:
                    self.job_unit[b, j] = self._flat_index(b, ui)
                    n_jobs += 1
            for i in range(len(self.scenario.background)):
                self.bg_unit[b, i] = self._flat_index(b, n_jobs + i)
        self._build_slot_maps()
        self._names = [self.job_names(b) for b in range(self.batch)]
        self._ideal = np.full((self.batch, self.n_job_slots), np.nan)  # (batch, jobs) s
        self._ideal_comm = np.full((self.batch, self.n_job_slots), np.nan)  # (batch, jobs) s
        for b in range(self.batch):
            for j in range(self.n_job_slots):
                if self.jobs[b][j] is not None:
                    self._ideal[b, j] = self.ideal_step_s(self.jobs[b][j], self.gpus[b][j])
                    self._ideal_comm[b, j] = self.ideal_comm_s(self.jobs[b][j], self.gpus[b][j])

    def _restart_in_place(
        self, per_inst: list[list[CompiledUnit]], slot_units: list[list[int]], reset_mask: np.ndarray
    ) -> bool:
        """A reset that leaves every instance's units as they are (the same compiled units in the same job
        slots, as a deterministic placement gives): restart the units of the reset instances in place
        instead of restacking the whole batch. Returns False (nothing done) when the structure changes.

        The restarted state is that of a fresh :class:`BatchSim` of those instances (the engine's own
        initial state), carried over by the engine's own :meth:`BatchSim.snapshot_units` / ``_restore`` (every
        per-unit, per-phase and per-flow field it keeps), so the result equals a full rebuild (``tests/test_envspeed.py`` checks it).
        """
        sim = self.sim
        if sim is None or slot_units != self.slot_units:
            return False
        for b in range(self.batch):
            old = sim.units[b]
            if len(old) != len(per_inst[b]) or any(x is not y for x, y in zip(old, per_inst[b])):
                return False
        idx = np.flatnonzero(reset_mask)
        if idx.size:
            # one fresh single-instance sim per distinct unit list (a deterministic placement gives every
            # copy the same one): its initial state is that of every reset copy with those units, whose
            # clocks a reset has zeroed
            keep = np.full(sim.n_units, -1, dtype=np.int64)  # unit of the batch <- unit of the fresh sims
            groups: dict[tuple[int, ...], list[int]] = {}
            for b in idx:
                groups.setdefault(tuple(id(u) for u in per_inst[b]), []).append(int(b))
            fresh_units: list[list[CompiledUnit]] = []
            base = 0
            for members in groups.values():
                n = len(per_inst[members[0]])
                fresh_units.append(per_inst[members[0]])
                for b in members:
                    keep[sim.inst_unit[b] : sim.inst_unit[b + 1]] = base + np.arange(n)
                base += n
            if sim.time_s[idx].any():  # not after a reset: one fresh instance per copy, on its clock
                fresh_units = [per_inst[b] for b in idx]
                keep[keep >= 0] = np.arange(int((keep >= 0).sum()))
            fresh = BatchSim(self.fabric, fresh_units, sim.rate_updates, self.backend)
            if sim.time_s[idx].any():
                fresh.time_s[:] = sim.time_s[idx]
                fresh.set_units(fresh.units)  # iter_start from the clocks
            fresh.snapshot_units()
            sim._restore(fresh._state_snapshot, keep)  # the engine's own carry-over of unit state
            units = np.flatnonzero(keep >= 0)
            sim.unit_alive[units] = fresh.unit_alive[keep[units]]
            sim.set_split(None)  # as a restack leaves it
        return True

    def _job_key(self, b: int, j: int, old: bool) -> tuple:
        if old:
            return self._slot_keys[b][j]
        job, g = self.jobs[b][j], self.gpus[b][j]
        return ("none",) if job is None else (job.name, tuple(g.tolist()))

    def _flat_index(self, b: int, ui: int) -> int:
        return int(self._unit_offset[b] + ui)

    def _build_slot_maps(self) -> None:
        """slot_conn (batch, slots): global connection id of each action slot (-1 if none)."""
        sim = self.sim
        assert sim is not None
        slot_conn = np.full((self.batch, self.n_slots), -1, dtype=np.int64)
        for b in range(self.batch):
            for j, ui in enumerate(self.slot_units[b]):
                if ui < 0:
                    continue
                fu = self._flat_index(b, ui)
                n = sim.flat_units[fu].conn_src.shape[0]
                o = self.slot_offset[j]
                slot_conn[b, o : o + n] = sim.conn_off[fu] + np.arange(n)
        self.slot_conn = slot_conn
        has = slot_conn >= 0
        npaths = np.where(has, sim.conn_npaths[np.maximum(slot_conn, 0)], 0)
        self.slot_npaths = npaths  # (batch, slots)
        self.slot_mask = npaths > 1  # controllable slots

    # ------------------------------------------------------------------ dynamics
    def _apply_step_dynamics(self, mask: np.ndarray, first: bool = False) -> None:
        """Failures, repairs, churn and background on/off at the start of an interval."""
        dyn = self.scenario.dynamics
        lf = dyn.link_failures
        rebuild = False
        eligible = self._failure_eligible
        # repairs, over the batch
        repaired = (self.fail_until >= 0) & (self.fail_until <= self.step_count[:, None]) & mask[:, None]
        self.cap_factor[repaired] = 1.0
        self.fail_until[repaired] = -1
        # per-instance draws (each instance has its own generator) only where something is random
        random_failures = lf.rate_per_step > 0 and eligible.size > 0
        drawn = np.flatnonzero(mask) if random_failures or (self.churn and not first) else ()
        for b in drawn:
            step = int(self.step_count[b])
            rng = self.rngs[b]
            # random failures (both directions of a duplex link)
            if random_failures and rng.random() < lf.rate_per_step:
                lk = int(rng.choice(eligible))
                pair = self._duplex_of(lk)
                self.cap_factor[b, pair] = 0.0
                self.fail_until[b, pair] = step + lf.repair_steps
            # churn: departures then arrivals
            if self.churn and not first:
                ch = dyn.job_churn
                for j in range(len(self.scenario.jobs), self.n_job_slots):
                    if self.jobs[b][j] is not None and rng.random() < 1.0 / ch.mean_steps:
                        self.jobs[b][j] = None
                        self.gpus[b][j] = None
                        rebuild = True
                for _ in range(rng.poisson(ch.arrival_rate)):
                    tmpl = self.templates[int(rng.integers(len(self.templates)))]
                    free = np.ones(self.fabric.n_gpus, dtype=bool)
                    for g in self.gpus[b]:
                        if g is not None:
                            free[g] = False
                    slots = [
                        j
                        for j in range(len(self.scenario.jobs), self.n_job_slots)
                        if self.jobs[b][j] is None and self.slot_width[j] >= self._n_conns_cached(tmpl)
                    ]
                    if free.sum() < tmpl.gpus or not slots:
                        self.dropped_arrivals[b] += 1
                        continue
                    place = tmpl if isinstance(tmpl.placement, str) else replace(tmpl, placement="contiguous")
                    g = self._place(place, free, rng)
                    self.jobs[b][slots[0]] = replace(place, name=f"{tmpl.name}@{step}", start_ms=0.0)
                    self.gpus[b][slots[0]] = g
                    rebuild = True
        # scheduled failures / degradations (after the random ones, which they override)
        for sf in lf.scheduled:
            hit = mask & (self.step_count == sf.at_step)
            if hit.any():
                ids = self.fabric.link_ids(sf.link)
                self.cap_factor[np.ix_(hit, ids)] = sf.factor
                self.fail_until[np.ix_(hit, ids)] = sf.until_step if sf.until_step is not None else 2**62
        # AllToAll rotation: recompile the rotated jobs
        steps = self.step_count[mask]
        for c in (c for jb in self.scenario.jobs for c in jb.collectives):
            periodic = c.op == "alltoall" and c.skew > 0 and c.skew_period_steps
            if periodic and ((steps > 0) & (steps % max(c.skew_period_steps, 1) == 0)).any():
                rebuild = True
        if rebuild:
            self._rebuild()
        assert self.sim is not None
        self.sim.capacity_bytes_per_s = self.fabric.capacity_bytes_per_s[None, :] * self.cap_factor
        # background on/off this interval, from each instance's step count
        on = np.zeros(self.sim.n_units, dtype=bool)
        step = self.step_count[:, None]  # (batch, 1)
        for i, bg in enumerate(self.scenario.background):  # loop over background sources, not flows
            if bg.pattern == "constant":
                active = np.ones((self.batch, 1), dtype=bool)
            else:
                phase = step - self.bg_offset[:, i : i + 1]
                active = (phase >= 0) & (phase % bg.period_steps < bg.duration_steps)
            on[self.bg_unit[:, i]] = active[:, 0]
        self.sim.bg_on = on

    def _n_conns_cached(self, job: JobSpec) -> int:
        cache = self.__dict__.setdefault("_nconn_cache", {})
        if job.name not in cache:
            cache[job.name] = self._n_conns(job)
        return cache[job.name]

    def _duplex_of(self, link: int) -> np.ndarray:
        f = self.fabric
        rev = np.flatnonzero((f.link_src == f.link_dst[link]) & (f.link_dst == f.link_src[link]))
        return np.array([link, int(rev[0])]) if rev.size else np.array([link])

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
        dead = sim.capacity_bytes_per_s <= 0
        # valid while the connections (the same conn_key array), the hash seeds and the dead links are
        key = (self.hash_seed.tobytes(), dead.tobytes() if dead.any() else b"")
        cached = getattr(self, "_default_cache", None)
        if cached is not None and cached[0] is sim.conn_key and cached[1] == key:
            return cached[2].copy() if copy else cached[2]
        seed = self.hash_seed[sim.unit_inst[sim.conn_unit]] if sim.n_conns else 0
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
        self._default_cache = (sim.conn_key, key, split)
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
        if not (sim.capacity_bytes_per_s <= 0).any():
            return split
        kept = np.where(self.live_paths(), split, 0.0)
        tot = kept.sum(axis=1, keepdims=True)
        return np.where(tot > 0, kept / np.where(tot > 0, tot, 1.0), split)

    def live_paths(self) -> np.ndarray:
        """(connections, max_paths) bool: candidate paths whose links all have capacity > 0."""
        sim = self.sim
        assert sim is not None
        valid = np.arange(self.max_paths)[None, :] < sim.conn_npaths[:, None]
        dead = sim.capacity_bytes_per_s.reshape(-1) <= 0
        if not dead.any():
            return valid
        dead = np.concatenate([dead, [False]])
        return valid & ~dead[sim.conn_paths_global].any(axis=2)

    def step(self, split: np.ndarray, active: np.ndarray | None = None, windows: int = 1) -> StepResult:
        """Run one decision interval with ``split`` (connections, max_paths) in the ``active`` instances
        (all by default); inactive ones stand still (zero duration).

        ``windows > 1`` runs the interval as that many equal windows (the same fluid model, with window
        boundaries as extra events) and reports ``link_peak_utilization``, the largest window mean of each
        link, as a counter polled ``windows`` times per interval would see it.
        """
        sim = self.sim
        assert sim is not None
        if not isinstance(windows, int | np.integer) or windows < 1:
            raise ValueError(f"windows = {windows!r}: must be an integer >= 1")
        active = np.ones(self.batch, dtype=bool) if active is None else np.asarray(active, dtype=bool)
        sim.set_split(split)
        rem0 = sim.rem.copy()
        duration = np.where(active, self.decision_interval_s, 0.0)
        parts = [sim.run_interval(duration / windows) for _ in range(windows)]
        m = parts[0] if windows == 1 else _merge_metrics(parts)
        res = self._result(m)
        res.capacity_bytes_per_s = sim.capacity_bytes_per_s.copy()
        f = self.fabric
        gpu_nics = f.gpu_uplinks
        with np.errstate(invalid="ignore", divide="ignore"):
            res.throughput_gbps = np.where(
                m.duration_s > 0,
                m.link_bytes[:, gpu_nics].sum(axis=1) / m.duration_s * BYTES_PER_S_TO_GBPS,
                0.0,
            )
            if windows > 1:
                cap = np.where(sim.capacity_bytes_per_s > 0, sim.capacity_bytes_per_s, np.inf)
                window_s = (duration / windows)[:, None]
                peak = np.max([p.link_bytes for p in parts], axis=0) / (
                    cap * np.where(window_s > 0, window_s, 1)
                )
                res.link_peak_utilization = np.where(window_s > 0, peak, 0.0)
            # a job flow moves its bytes once per completed iteration; rem is reset when one completes
            moved = rem0 + m.iterations[sim.flow_unit] * sim.flow_bytes - sim.rem
        moved = np.where(sim.flow_bg, np.nan, moved)
        res.conn_bytes = np.bincount(sim.member_conn, weights=moved[sim.member_flow], minlength=sim.n_conns)
        has = self.slot_conn >= 0
        res.slot_bytes = np.where(has, res.conn_bytes[np.maximum(self.slot_conn, 0)], 0.0)
        res.connections = ConnectionTable(
            job_unit=self.job_unit.copy(),
            conn_off=sim.conn_off,
            n_conns=sim.unit_nconns,
            src=sim.conn_src,
            dst=sim.conn_dst,
            paths=sim.conn_paths,
            npaths=sim.conn_npaths,
            split=np.array(sim.split, copy=True),
            bytes=res.conn_bytes,
        )
        self.step_count += active
        self._apply_step_dynamics(active)
        return res

    def _result(self, m: IntervalMetrics) -> StepResult:
        sim = self.sim
        assert sim is not None
        B = self.batch
        fu = self.job_unit  # (batch, jobs) flat unit of each job slot, -1 if empty
        alive = fu >= 0
        ngpu = np.where(alive, sim.unit_ngpus[np.maximum(fu, 0)], 0)
        idx = np.maximum(fu, 0)
        iters = np.where(alive, m.iterations[idx], 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            step_t = np.where(alive & (iters > 0), m.step_time_sum_s[idx] / np.maximum(iters, 1), np.nan)
            comm_t = np.where(alive & (iters > 0), m.comm_time_sum_s[idx] / np.maximum(iters, 1), np.nan)
            act = np.where(alive, m.active_time_s[idx], 0.0)
            util = np.where(act > 0, m.compute_time_s[idx] / np.where(act > 0, act, 1.0), np.nan)
            # efficiency: ideal / actual; with no completed iteration the actual step is at least the
            # time spent in the current one
            since = np.where(alive, sim.time_s[:, None] - sim.iter_start[idx], np.nan)
            actual = np.where(iters > 0, step_t, np.maximum(since, m.duration_s[:, None]))
            eff = np.where(act > 0, np.minimum(self._ideal / actual, 1.0), np.nan)
        cap = sim.capacity_bytes_per_s
        dur = m.duration_s[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            lu = np.where((cap > 0) & (dur > 0), m.link_bytes / (cap * np.where(dur > 0, dur, 1.0)), 0.0)
        maxu = lu[:, self.network_links].max(axis=1) if self.network_links.size else np.zeros(B)
        # (batch, tiers); sums, not a matmul: a threaded BLAS gemm leaves threads spinning on the cores the
        # compiled kernel's threads need (B = 256: env steps 2.3x slower)
        tier_bytes = np.stack([m.link_bytes[:, ix].sum(axis=1) for ix in self._tier_links], axis=1)
        return StepResult(
            duration_s=m.duration_s,
            job_alive=alive,
            job_gpus=ngpu,
            iterations=iters,
            step_time_s=step_t,
            comm_time_s=comm_t,
            ideal_step_s=np.where(alive, self._ideal, np.nan),
            gpu_utilization=util,
            efficiency=eff,
            link_bytes=m.link_bytes,
            link_utilization=lu,
            max_link_utilization=maxu,
            tier_bytes=tier_bytes,
            stalled_transfers=m.stalled_flows,
            failed_links=((cap <= 0) & self.fabric.network_links[None, :]).sum(axis=1),
            events=m.events,
            job_names=[n.copy() for n in self._names],  # the jobs change only with a restack
            compute_s=np.where(alive, sim.unit_compute[idx], np.nan),
        )

    def job_names(self, b: int) -> list[str | None]:
        return [None if j is None else j.name for j in self.jobs[b]]


def _merge_metrics(parts: list[IntervalMetrics]) -> IntervalMetrics:
    """One interval's metrics from the metrics of its consecutive windows."""
    total = {k: sum(getattr(p, k) for p in parts) for k in ("duration_s", "iterations", "step_time_sum_s",
             "comm_time_sum_s", "compute_time_s", "active_time_s", "link_bytes", "events", "solver_iterations")}  # fmt: skip
    return IntervalMetrics(stalled_flows=np.max([p.stalled_flows for p in parts], axis=0), **total)
