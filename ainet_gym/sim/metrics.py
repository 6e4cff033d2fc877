"""What an interval measured: per-job and per-link figures of a :class:`StepResult`, from the engine's
:class:`~ainet_gym.sim.engine.IntervalMetrics` and the simulation state the interval ran in."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ainet_gym.fabric.topology import TIERS, Fabric
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
    # the job connections as they were during the interval (churn may restack them after it); this,
    # conn_bytes and slot_bytes are None when the step skipped them (FabricWorld.step(connections=False),
    # what EnvCore does unless its "flows" info key is asked for)
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

    def measure(
        self,
        sim: BatchSim,
        parts: list[IntervalMetrics],
        rem0: np.ndarray,
        job_unit: np.ndarray,
        ideal_step_s: np.ndarray,
        job_names: list[list[str | None]],
        connections: bool = True,
    ) -> StepResult:
        """The :class:`StepResult` of an interval run as the consecutive windows ``parts`` (one or more),
        from ``rem0`` (flows,), the bytes left before it, the flat unit of each job slot ``job_unit``
        (batch, jobs; -1: empty), the jobs' ideal step times (batch, jobs) s and their names.

        ``connections=False`` skips the per-connection figures (``conn_bytes`` and ``connections`` stay
        None)."""
        windows = len(parts)
        m = parts[0] if windows == 1 else merge_metrics(parts)
        res = self.result(sim, m, job_unit, ideal_step_s, job_names)
        res.capacity_bytes_per_s = sim.capacity_bytes_per_s.copy()
        with np.errstate(invalid="ignore", divide="ignore"):
            res.throughput_gbps = np.where(
                m.duration_s > 0,
                m.link_bytes[:, self.fabric.gpu_uplinks].sum(axis=1) / m.duration_s * BYTES_PER_S_TO_GBPS,
                0.0,
            )
            if windows > 1:
                cap = np.where(sim.capacity_bytes_per_s > 0, sim.capacity_bytes_per_s, np.inf)
                window_s = parts[0].duration_s[:, None]
                peak = np.max([p.link_bytes for p in parts], axis=0) / (
                    cap * np.where(window_s > 0, window_s, 1)
                )
                res.link_peak_utilization = np.where(window_s > 0, peak, 0.0)
        if not connections:
            return res
        with np.errstate(invalid="ignore", divide="ignore"):
            # a job flow moves its bytes once per completed iteration; rem is reset when one completes
            moved = rem0 + m.iterations[sim.flow_unit] * sim.flow_bytes - sim.rem
        moved = np.where(sim.flow_bg, np.nan, moved)
        res.conn_bytes = np.bincount(sim.member_conn, weights=moved[sim.member_flow], minlength=sim.n_conns)
        res.connections = ConnectionTable(
            job_unit=job_unit.copy(),
            conn_off=sim.conn_off,
            n_conns=sim.unit_nconns,
            src=sim.conn_src,
            dst=sim.conn_dst,
            paths=sim.conn_paths,
            npaths=sim.conn_npaths,
            split=np.array(sim.split, copy=True),
            bytes=res.conn_bytes,
        )
        return res

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
            util = np.where(act > 0, m.compute_time_s[idx] / np.where(act > 0, act, 1.0), np.nan)
            # efficiency: ideal / actual; with no completed iteration the actual step is at least the
            # time spent in the current one
            since = np.where(alive, sim.time_s[:, None] - sim.iter_start[idx], np.nan)
            actual = np.where(iters > 0, step_t, np.maximum(since, m.duration_s[:, None]))
            eff = np.where(act > 0, np.minimum(ideal_step_s / actual, 1.0), np.nan)
        cap = sim.capacity_bytes_per_s
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
            job_names=[n.copy() for n in job_names],  # the jobs change only with a restack
            compute_s=np.where(alive, sim.unit_compute[idx], np.nan),
        )


def merge_metrics(parts: list[IntervalMetrics]) -> IntervalMetrics:
    """One interval's metrics from the metrics of its consecutive windows."""
    total = {k: sum(getattr(p, k) for p in parts) for k in ("duration_s", "iterations", "step_time_sum_s",
             "comm_time_sum_s", "compute_time_s", "active_time_s", "link_bytes", "events", "solver_iterations")}  # fmt: skip
    return IntervalMetrics(stalled_flows=np.max([p.stalled_flows for p in parts], axis=0), **total)
