"""The RL action-slot layout: which connection of which job each slot of a fixed-size action routes.

Every job slot ``j`` owns ``width[j]`` consecutive action slots, one per connection of the job (a
connection is a (source GPU, destination GPU) pair its collectives use); the width is that of the widest
job that may occupy the slot (the scenario's job, or under churn any template). A slot is
*controllable* when its connection has more than one candidate path; other slots are masked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ainet_gym.fabric.topology import Fabric
from ainet_gym.scenario.spec import JobSpec
from ainet_gym.sim.engine import BatchSim, compile_job

__all__ = ["SlotLayout", "SlotMaps", "job_connections"]


def job_connections(fabric: Fabric, job: JobSpec) -> int:
    """Connections of ``job`` (placed on the first GPUs of ``fabric``; the count depends only on the
    job's size and collectives)."""
    if not job.collectives:
        return 0
    return int(compile_job(fabric, job, np.arange(job.gpus) % fabric.n_gpus).conn_src.shape[0])


@dataclass(frozen=True)
class SlotMaps:
    """Where the action slots point in the current stack of units."""

    conn: np.ndarray  # (batch, slots) global connection id of each slot, -1 if none
    npaths: np.ndarray  # (batch, slots) candidate paths of the slot's connection, 0 if none
    mask: np.ndarray  # (batch, slots) bool, controllable slots (npaths > 1)


class SlotLayout:
    """Fixed slot widths of ``n_job_slots`` job slots: ``jobs`` (the initial jobs, slots 0..) and, when
    ``templates`` may arrive (churn), any template in any slot."""

    def __init__(
        self, fabric: Fabric, jobs: tuple[JobSpec, ...], templates: tuple[JobSpec, ...], n_job_slots: int
    ):
        widths = [job_connections(fabric, j) for j in jobs]
        #: (templates,) connections of each template that may arrive
        self.template_width = tuple(job_connections(fabric, t) for t in templates)
        tmpl_w = max(self.template_width, default=0)
        self.width = np.array(
            [max(widths[j] if j < len(widths) else 0, tmpl_w) for j in range(n_job_slots)], dtype=np.int64
        )  # (job slots,)
        self.offset = np.concatenate([[0], np.cumsum(self.width)])[:-1].astype(np.int64)  # (job slots,)
        self.n_slots = int(self.width.sum())

    def maps(self, sim: BatchSim, job_unit: np.ndarray) -> SlotMaps:
        """The slots' connections in ``sim``, whose flat unit of each job slot is ``job_unit`` (batch,
        job slots; -1: empty)."""
        B = job_unit.shape[0]
        conn = np.full((B, self.n_slots), -1, dtype=np.int64)
        for b, j in zip(*np.nonzero(job_unit >= 0)):  # loop over jobs, not over connections
            fu = job_unit[b, j]
            n = sim.unit_nconns[fu]
            o = self.offset[j]
            conn[b, o : o + n] = sim.conn_off[fu] + np.arange(n)
        has = conn >= 0
        npaths = np.where(has, sim.conn_npaths[np.maximum(conn, 0)], 0)
        return SlotMaps(conn=conn, npaths=npaths, mask=npaths > 1)
