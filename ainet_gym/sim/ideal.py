"""Ideal step times: a job alone on a non-blocking fabric with the same hosts, cached by content.

The ideal step time is the denominator of the efficiency metric and of the ``step_time`` reward, and
the default decision interval; the ideal communication time sets the peak demand of the ``lp`` policy.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ainet_gym.fabric.topology import Fabric, nonblocking_fabric
from ainet_gym.scenario.spec import JobSpec
from ainet_gym.sim.engine import BatchSim, compile_job

__all__ = ["IdealTimes"]


class IdealTimes:
    """Ideal (step, communication) times of jobs on ``fabric``, each simulated once and cached.

    The cache key is the job's content (compute time, overlap, collectives) and its GPUs and their
    hosts: the same job on the same GPUs is simulated once, whatever its name or start time.
    """

    def __init__(self, fabric: Fabric, max_paths: int, backend: str) -> None:
        self.fabric = fabric
        self.max_paths = max_paths
        self.backend = backend
        self._nonblocking: Fabric | None = None  # built on first use
        self._cache: dict[tuple, tuple[float, float]] = {}  # key -> (step s, comm s)

    def times(self, job: JobSpec, gpus: np.ndarray) -> tuple[float, float]:
        """(step time, communication time) in s of one iteration of ``job`` on ``gpus``, alone on the
        non-blocking fabric.

        Raises
        ------
        RuntimeError
            If no iteration completes within 60 doublings of the horizon.
        """
        hosts = tuple(self.fabric.gpu_host[gpus].tolist())
        key = (job.compute_ms, job.overlap, job.collectives, tuple(gpus.tolist()), hosts)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if self._nonblocking is None:
            self._nonblocking = nonblocking_fabric(self.fabric)
        nb = self._nonblocking
        solo = replace(job, start_ms=0.0)
        sim = BatchSim(nb, [[compile_job(nb, solo, gpus)]], backend=self.backend)
        if nb.endpoint_ports is not None:  # multi-port NICs: every port, evenly
            n = sim.conn_npaths[:, None]
            sim.set_split((np.arange(self.max_paths)[None, :] < n) / np.maximum(n, 1))
        horizon = max(solo.compute_ms * 1e-3, 1e-3)
        for _ in range(60):
            sim.run_interval(horizon)
            if sim.state.iterations_total[0] >= 1:
                break
            horizon *= 2
        else:
            raise RuntimeError(f"job {job.name!r}: no iteration completes on a non-blocking fabric")
        self._cache[key] = (float(sim.state.last_step_s[0]), float(sim.state.last_comm_s[0]))
        return self._cache[key]

    def tables(
        self, jobs: list[list[JobSpec | None]], gpus: list[list[np.ndarray | None]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(step, comm) times (batch, job slots) in s of the jobs in each slot; nan where a slot is empty."""
        shape = (len(jobs), len(jobs[0]) if jobs else 0)
        step, comm = np.full(shape, np.nan), np.full(shape, np.nan)
        for b, row in enumerate(jobs):
            for j, job in enumerate(row):
                if job is not None:
                    step[b, j], comm[b, j] = self.times(job, gpus[b][j])
        return step, comm
