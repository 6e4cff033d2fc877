"""What an interval measured: per-job and per-link figures of a :class:`StepResult`, from the engine's
:class:`~ainet_gym.sim.engine.IntervalMetrics` and the simulation state the interval ran in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ainet_gym.arrays import safe_divide
from ainet_gym.fabric.topology import TIERS, Fabric
from ainet_gym.sim.backends.numba.figures import interval_figures
from ainet_gym.sim.engine import BatchSim, IntervalMetrics
from ainet_gym.units import BYTES_PER_S_TO_GBPS

__all__ = ["ConnectionTable", "IntervalMeter", "StepResult", "merge_metrics"]


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
    # the job connections as they were during the interval (churn may restack them after it); this and
    # conn_bytes are None when the step skipped them (FabricWorld.step(connections=False), what EnvCore
    # does unless its "flows" info key is asked for)
    connections: ConnectionTable | None = None


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


class IntervalMeter:
    """Turns the engine's metrics of an interval into a :class:`StepResult` (tables of ``fabric``
    precomputed once)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.network_links = np.flatnonzero(fabric.network_links)  # (net_links,) link ids
        # link ids of each tier: tier bytes as sums, not a (batch, links) @ (links, tiers) matmul: a threaded
        # BLAS gemm leaves threads spinning on the cores the compiled kernel's threads need (B = 256: env
        # steps 2.3x slower)
        self.tier_links = [np.flatnonzero(fabric.link_tier == i) for i in range(len(TIERS))]
        # the compiled backend's tables: the tiers' links as one CSR, the network links as a mask
        self.tier_off = np.concatenate([[0], np.cumsum([ix.size for ix in self.tier_links])]).astype(np.int64)
        self.tier_idx = np.concatenate(self.tier_links).astype(np.int64)
        self.net_mask = np.ascontiguousarray(fabric.network_links, dtype=np.bool_)
        self.gpu_uplinks = np.ascontiguousarray(fabric.gpu_uplinks, dtype=np.int64)

    def measure(
        self,
        sim: BatchSim,
        parts: list[IntervalMetrics],
        rem0: np.ndarray,
        job_unit: np.ndarray,
        ideal_step_s: np.ndarray,
        job_names: list[list[str | None]],
        connections: bool = True,
        figures: NumbaFigures | None = None,
    ) -> StepResult:
        """The :class:`StepResult` of an interval run as the consecutive windows ``parts`` (one or more),
        from ``rem0`` (flows,), the bytes left before it, the flat unit of each job slot ``job_unit``
        (batch, jobs; -1: empty), the jobs' ideal step times (batch, jobs) s and their names.

        ``connections=False`` skips the per-connection figures (``conn_bytes`` and ``connections`` stay
        None). ``figures``: the compiled figures of the single window, already computed by
        :meth:`BatchSim.run_interval` (``then=figures.then``)."""
        windows = len(parts)
        m = parts[0] if windows == 1 else merge_metrics(parts)
        if figures is not None:  # computed by the interval's kernel threads (windows == 1)
            res = figures.result(m)
        else:  # the backend's pass: compiled (numba) or numpy, the same operations
            res = sim.strategy.interval_result(self, sim, m, job_unit, ideal_step_s, job_names)
        if windows > 1:
            with np.errstate(invalid="ignore", divide="ignore"):
                cap = np.where(
                    sim.engine_state.capacity_bytes_per_s > 0, sim.engine_state.capacity_bytes_per_s, np.inf
                )
                window_s = parts[0].duration_s[:, None]
                peak = np.max([p.link_bytes for p in parts], axis=0) / (
                    cap * np.where(window_s > 0, window_s, 1)
                )
                res.link_peak_utilization = np.where(window_s > 0, peak, 0.0)
        if not connections:
            return res
        with np.errstate(invalid="ignore", divide="ignore"):
            # a job flow moves its bytes once per completed iteration; rem is reset when one completes
            moved = rem0 + m.iterations[sim.flow_unit] * sim.engine_state.flow_reset - sim.state.rem
        moved = np.where(sim.flow_bg, np.nan, moved)
        per_member = moved[sim.member_flow]
        share = sim.member_share()  # routing.split_flows independent: a part carries its path's fraction
        if share is not None:
            per_member = per_member * share
        res.conn_bytes = np.bincount(sim.member_conn, weights=per_member, minlength=sim.n_conns)
        res.connections = ConnectionTable(
            job_unit=job_unit.copy(),
            conn_off=sim.conn_off,
            n_conns=sim.unit_nconns,
            src=sim.conn_src,
            dst=sim.conn_dst,
            paths=sim.conn_paths,
            npaths=sim.conn_npaths,
            split=np.array(sim.engine_state.split, copy=True),
            bytes=res.conn_bytes,
        )
        return res

    def figures(
        self, sim: BatchSim, job_unit: np.ndarray, ideal_step_s: np.ndarray, job_names: list[list[str | None]]
    ) -> NumbaFigures:
        """The compiled figures of the next interval of ``sim`` (numba backend), for
        :meth:`BatchSim.run_interval` to compute on each range's thread right after its interval (``then``)
        and for :meth:`measure` to return (``figures``)."""
        return NumbaFigures(self, sim, job_unit, ideal_step_s, job_names)

    def result(
        self,
        sim: BatchSim,
        m: IntervalMetrics,
        job_unit: np.ndarray,
        ideal_step_s: np.ndarray,
        job_names: list[list[str | None]],
    ) -> StepResult:
        """The per-job and per-link figures of the interval ``m`` (see :meth:`measure`)."""
        B = sim.batch
        fu = job_unit  # (batch, jobs) flat unit of each job slot, -1 if empty
        alive = fu >= 0
        ngpu = np.where(alive, sim.unit_ngpus[np.maximum(fu, 0)], 0)
        idx = np.maximum(fu, 0)
        iters = np.where(alive, m.iterations[idx], 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            step_t = np.where(alive & (iters > 0), m.step_time_sum_s[idx] / np.maximum(iters, 1), np.nan)
            comm_t = np.where(alive & (iters > 0), m.comm_time_sum_s[idx] / np.maximum(iters, 1), np.nan)
            act = np.where(alive, m.active_time_s[idx], 0.0)
            util = safe_divide(m.compute_time_s[idx], act, np.nan)
            # efficiency: ideal / actual; with no completed iteration the actual step is at least the
            # time spent in the current one
            since = np.where(alive, sim.state.time_s[:, None] - sim.state.iter_start[idx], np.nan)
            actual = np.where(iters > 0, step_t, np.maximum(since, m.duration_s[:, None]))
            eff = np.where(act > 0, np.minimum(ideal_step_s / actual, 1.0), np.nan)
        cap = sim.engine_state.capacity_bytes_per_s
        dur = m.duration_s[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            lu = np.where((cap > 0) & (dur > 0), m.link_bytes / (cap * np.where(dur > 0, dur, 1.0)), 0.0)
        net = self.network_links
        maxu = lu[:, net].max(axis=1) if net.size else np.zeros(B)
        return StepResult(
            duration_s=m.duration_s,
            job_alive=alive,
            job_gpus=ngpu,
            iterations=iters,
            step_time_s=step_t,
            comm_time_s=comm_t,
            ideal_step_s=np.where(alive, ideal_step_s, np.nan),
            gpu_utilization=util,
            efficiency=eff,
            link_bytes=m.link_bytes,
            link_utilization=lu,
            max_link_utilization=maxu,
            tier_bytes=np.stack([m.link_bytes[:, ix].sum(axis=1) for ix in self.tier_links], axis=1),
            stalled_transfers=m.stalled_flows,
            failed_links=((cap <= 0) & self.fabric.network_links[None, :]).sum(axis=1),
            events=m.events,
            job_names=job_names,  # the world's list: a restack replaces it, nothing mutates it
            compute_s=np.where(alive, sim.unit_compute[idx], np.nan),
        )


class NumbaFigures:
    """The outputs of :func:`interval_figures` for one interval, allocated before it runs, so that each
    instance range's figures can be computed on its kernel thread right after its interval (no second
    hand-off to the threads, see :meth:`BatchSim.run_interval`), or all at once afterwards."""

    def __init__(
        self,
        meter: IntervalMeter,
        sim: BatchSim,
        job_unit: np.ndarray,
        ideal_step_s: np.ndarray,
        job_names: list[list[str | None]],
    ) -> None:
        B, J = job_unit.shape
        L = meter.fabric.n_links
        f64 = np.float64
        self.meter, self.sim, self.job_names = meter, sim, job_names
        self.job_unit = np.ascontiguousarray(job_unit, dtype=np.int64)
        self.ideal_step_s = np.ascontiguousarray(ideal_step_s, dtype=f64)
        self.cap = np.ascontiguousarray(
            sim.engine_state.capacity_bytes_per_s, dtype=f64
        )  # (B, L) during the interval
        self.lu, self.cap_copy = np.empty((B, L)), np.empty((B, L))
        self.maxu, self.thr, self.failed = np.empty(B), np.empty(B), np.empty(B, dtype=np.int64)
        self.tier_bytes = np.empty((B, len(TIERS)))
        self.alive = np.empty((B, J), dtype=np.bool_)
        self.ngpu = np.empty((B, J), dtype=sim.unit_ngpus.dtype)
        self.iters = np.empty((B, J), dtype=np.int64)
        self.step_t, self.comm_t, self.util, self.eff, self.ideal, self.compute_s = (
            np.empty((B, J)) for _ in range(6)
        )

    def args(self, m: IntervalMetrics) -> tuple:
        """The arguments of :func:`interval_figures` but the instance range, for the interval ``m``."""
        me, sim = self.meter, self.sim
        f64 = np.float64
        return (
            np.ascontiguousarray(m.link_bytes, dtype=f64), self.cap, np.ascontiguousarray(m.duration_s, dtype=f64),
            me.network_links, me.net_mask, me.gpu_uplinks, me.tier_off, me.tier_idx, BYTES_PER_S_TO_GBPS,
            self.job_unit, sim.unit_ngpus, m.iterations, m.step_time_sum_s, m.comm_time_sum_s,
            m.active_time_s, m.compute_time_s, sim.state.time_s, sim.state.iter_start, sim.unit_compute, self.ideal_step_s,
            self.lu, self.maxu, self.tier_bytes, self.failed, self.thr, self.cap_copy,
            self.alive, self.ngpu, self.iters, self.step_t, self.comm_t, self.util, self.eff, self.ideal,
            self.compute_s,
        )  # fmt: skip

    def then(self, m: IntervalMetrics) -> tuple[Callable[..., object], Callable[[int, int], tuple]]:
        """(kernel, arguments of a range): the figures of the instances ``lo:hi`` of the interval ``m``."""
        args = self.args(m)
        return interval_figures, lambda lo, hi: (*args, lo, hi)

    def result(self, m: IntervalMetrics) -> StepResult:
        """The :class:`StepResult` of the interval ``m`` once its figures are computed."""
        return StepResult(
            duration_s=m.duration_s,
            job_alive=self.alive,
            job_gpus=self.ngpu,
            iterations=self.iters,
            step_time_s=self.step_t,
            comm_time_s=self.comm_t,
            ideal_step_s=self.ideal,
            gpu_utilization=self.util,
            efficiency=self.eff,
            link_bytes=m.link_bytes,
            link_utilization=self.lu,
            max_link_utilization=self.maxu,
            tier_bytes=self.tier_bytes,
            stalled_transfers=m.stalled_flows,
            failed_links=self.failed,
            events=m.events,
            job_names=self.job_names,  # the world's list: a restack replaces it, nothing mutates it
            compute_s=self.compute_s,
            capacity_bytes_per_s=self.cap_copy,
            throughput_gbps=self.thr,
        )


def merge_metrics(parts: list[IntervalMetrics]) -> IntervalMetrics:
    """One interval's metrics from the metrics of its consecutive windows."""
    total = {k: sum(getattr(p, k) for p in parts) for k in ("duration_s", "iterations", "step_time_sum_s",
             "comm_time_sum_s", "compute_time_s", "active_time_s", "link_bytes", "events", "solver_iterations")}  # fmt: skip
    return IntervalMetrics(stalled_flows=np.max([p.stalled_flows for p in parts], axis=0), **total)
