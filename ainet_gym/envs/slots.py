"""The RL action-slot layout: which connection of which job each slot of a fixed-size action routes.

Every job slot ``j`` owns ``width[j]`` consecutive action slots, one per connection of the job (a
connection is a (source GPU, destination GPU) pair its collectives use); the width is that of the widest
job that may occupy the slot (the scenario's job, or under churn any template). A slot is
*controllable* when its connection has more than one candidate path; other slots are masked.

With ``background`` widths (the ``split_bg`` action mode), background source ``i`` owns
``background[i]`` more slots after the job slots' (``bg_offset[i]`` on), one per connection of the
source (a storage host's flow to a GPU): every connection of the fabric then has a slot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ainet_gym.fabric.topology import Fabric
from ainet_gym.scenario.spec import BackgroundSpec, JobSpec
from ainet_gym.sim.engine import BatchSim, compile_background, compile_job

__all__ = ["SlotLayout", "SlotMaps", "background_connections", "job_connections"]


def job_connections(fabric: Fabric, job: JobSpec) -> int:
    """Connections of ``job`` (placed on the first GPUs of ``fabric``; the count depends only on the
    job's size and collectives)."""
    if not job.collectives:
        return 0
    return int(compile_job(fabric, job, np.arange(job.gpus) % fabric.n_gpus).conn_src.shape[0])


def background_connections(fabric: Fabric, bg: BackgroundSpec) -> int:
    """Connections of background source ``bg`` (one per storage host and flow; the count does not depend
    on the GPUs it serves)."""
    return int(compile_background(fabric, bg, np.arange(max(fabric.n_gpus, 1)), 0).conn_src.shape[0])


@dataclass(frozen=True)
class SlotMaps:
    """Where the action slots point in the current stack of units."""

    conn: np.ndarray  # (batch, slots) global connection id of each slot, -1 if none
    npaths: np.ndarray  # (batch, slots) candidate paths of the slot's connection, 0 if none
    mask: np.ndarray  # (batch, slots) bool, controllable slots (npaths > 1)


class SlotLayout:
    """Fixed slot widths of ``n_job_slots`` job slots: ``jobs`` (the initial jobs, slots 0..) and, when
    ``templates`` may arrive (churn), any template in any slot; then, with ``background`` (connections of
    each background source, :func:`background_connections`), one slot per background connection."""

    def __init__(
        self,
        fabric: Fabric,
        jobs: tuple[JobSpec, ...],
        templates: tuple[JobSpec, ...],
        n_job_slots: int,
        background: tuple[int, ...] = (),
    ):
        widths = [job_connections(fabric, j) for j in jobs]
        #: (templates,) connections of each template that may arrive
        self.template_width = tuple(job_connections(fabric, t) for t in templates)
        tmpl_w = max(self.template_width, default=0)
        self.width = np.array(
            [max(widths[j] if j < len(widths) else 0, tmpl_w) for j in range(n_job_slots)], dtype=np.int64
        )  # (job slots,)
        self.offset = np.concatenate([[0], np.cumsum(self.width)])[:-1].astype(np.int64)  # (job slots,)
        self.n_job_slot_slots = int(self.width.sum())  # the slots of the job slots (the first ones)
        #: (background sources,) slots of each background source and the first of them
        self.bg_width = np.asarray(background, dtype=np.int64).reshape(-1)
        self.bg_offset = (
            self.n_job_slot_slots + np.concatenate([[0], np.cumsum(self.bg_width)])[:-1]
        ).astype(np.int64)
        self.n_slots = self.n_job_slot_slots + int(self.bg_width.sum())

    def maps(self, sim: BatchSim, job_unit: np.ndarray, bg_unit: np.ndarray | None = None) -> SlotMaps:
        """The slots' connections in ``sim``, whose flat unit of each job slot is ``job_unit`` (batch,
        job slots; -1: empty) and of each background source ``bg_unit`` (batch, sources; needed when the
        layout has background slots)."""
        B = job_unit.shape[0]
        conn = np.full((B, self.n_slots), -1, dtype=np.int64)
        for b, j in zip(*np.nonzero(job_unit >= 0)):  # loop over jobs, not over connections
            fu = job_unit[b, j]
            n = sim.unit_nconns[fu]
            o = self.offset[j]
            conn[b, o : o + n] = sim.conn_off[fu] + np.arange(n)
        if self.bg_width.size:
            if bg_unit is None:
                raise ValueError("SlotLayout.maps: the layout has background slots; pass bg_unit")
            for i, (w, o) in enumerate(zip(self.bg_width.tolist(), self.bg_offset.tolist())):
                fu = bg_unit[:, i]  # (batch,) the source's unit in each instance; a loop over sources
                assert (sim.unit_nconns[fu] == w).all(), "a background source's connections changed"
                conn[:, o : o + w] = sim.conn_off[fu][:, None] + np.arange(w)[None, :]
        has = conn >= 0
        npaths = np.where(has, sim.conn_npaths[np.maximum(conn, 0)], 0)
        return SlotMaps(conn=conn, npaths=npaths, mask=npaths > 1)
