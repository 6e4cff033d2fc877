"""A job's collectives as lists of phases, flows, members and connections (:func:`job_tables`, in the order
:func:`~ainet_gym.sim.compile_unit.compile_job` numbers them): the collectives' rank groups
(:func:`collective_groups`), their phases run in every group at once, the carry flows of ``routing.reroute:
new_transfers``, and the rotations after which a job with a skewed AllToAll repeats (:func:`rotation_period`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ainet_gym.fabric.topology import Fabric
from ainet_gym.scenario.collectives import CollectivePhase, Flow, decompose
from ainet_gym.scenario.spec import CollectiveSpec, JobSpec
from ainet_gym.sim.workload import segment_rings

__all__ = ["JobTables", "collective_groups", "job_tables", "rotation_period"]


def collective_groups(coll: CollectiveSpec, p: int) -> list[list[int]]:
    """The rank groups a collective of a ``p``-rank job runs in (``coll.group_size``, ``coll.group_stride``;
    one group of every rank when no size is given): group ``k`` of block ``b`` holds the ranks
    ``b * size * stride + k + stride * i``, ``i < size``."""
    size, stride = coll.group_size, coll.group_stride
    if size is None:
        return [list(range(p))]
    block = size * stride
    return [
        [b * block + k + stride * i for i in range(size)] for b in range(p // block) for k in range(stride)
    ]


def _grouped_phases(
    coll: CollectiveSpec, p: int, host_of_rank: list[int], rotation: int
) -> list[CollectivePhase]:
    """The phases of ``coll`` on a ``p``-rank job: in every rank group at once (phase ``k`` of each group
    together, as one phase whose latency is the largest), ranks mapped back to the job's."""
    groups = collective_groups(coll, p)
    if len(groups) == 1 and groups[0] == list(range(p)):
        return decompose(coll, p, host_of_rank, rotation)
    per_group = [decompose(coll, len(g), [host_of_rank[r] for r in g], rotation) for g in groups]
    out = []
    for k, phases in enumerate(zip(*per_group, strict=True)):
        flows = tuple(
            Flow(fl.bytes, tuple((g[s], g[d]) for s, d in fl.members))
            for g, ph in zip(groups, phases, strict=True)
            for fl in ph.flows
        )
        out.append(CollectivePhase(max(ph.steps for ph in phases), flows, phases[0].after))
        assert all(ph.after == phases[0].after for ph in phases), k
    return out


def rotation_period(job: JobSpec, n_ranks: int) -> int:
    """Rotations after which :func:`compile_job` of ``job`` on ``n_ranks`` ranks repeats: the least common
    multiple of the rank-group sizes of its skewed AllToAlls (a rotation ``r`` weighs rank ``j`` of a
    group of ``g`` by ``(j - r) mod g``); 1 without one."""
    period = 1
    for c in job.collectives:
        if c.op == "alltoall" and c.skew > 0:
            period = math.lcm(period, int(c.group_size or n_ranks))
    return period


def _add_carry_flows(
    k: int,
    first: int,
    mem_lo: int,
    flow_phase: list[int],
    flow_bytes: list[float],
    flow_parent: list[int],
    member_flow: list[int],
    member_conn: list[int],
) -> None:
    """Append to phase ``k`` (its flows from ``first``, its members from ``mem_lo``) one carry flow per flow:
    the same members, no bytes of its own, its parent the flow (``routing.reroute: new_transfers``)."""
    n_flows = len(flow_bytes) - first
    for f, c in list(zip(member_flow[mem_lo:], member_conn[mem_lo:])):  # the phase's members, in flow order
        member_flow.append(f + n_flows)
        member_conn.append(c)
    for f in range(first, first + n_flows):
        flow_phase.append(k)
        flow_bytes.append(0.0)
        flow_parent.append(f)


def _phase_pred(after: tuple[int, ...] | None, k: int, base: int) -> tuple[int, ...]:
    """The phases (job-local ids) phase ``k`` of a collective starting at phase ``base`` waits for:
    :attr:`CollectivePhase.after` ``None`` is the previous phase, ``()`` the job's previous collective's
    end, else the collective's phases it names."""
    if after is None:
        return (k - 1,) if k > 0 else ()
    if not after:
        return (base - 1,) if base > 0 else ()
    return tuple(base + j for j in after)


@dataclass
class JobTables:
    """A job's phases, flows and members as lists, in the order :func:`compile_job` numbers them."""

    phase_steps: list[int] = field(default_factory=list)
    phase_segs: list[int] = field(default_factory=list)  # (phases,) segments of the ring phase each is one of
    phase_pred: list[tuple[int, ...]] = field(default_factory=list)  # (phases,) the phases each waits for
    flow_phase: list[int] = field(default_factory=list)
    flow_bytes: list[float] = field(default_factory=list)
    flow_parent: list[int] = field(default_factory=list)
    member_flow: list[int] = field(default_factory=list)
    member_conn: list[int] = field(default_factory=list)
    conn_index: dict[tuple[int, int], int] = field(default_factory=dict)  # (src, dst) GPU -> connection


def job_tables(
    fabric: Fabric,
    job: JobSpec,
    gpus: np.ndarray,
    rotation: int,
    carry: bool,
    ring_run_ahead_bytes: float | None,
) -> JobTables:
    """The phases (rings cut into segments), flows, members and connections of ``job``'s collectives on
    ``gpus``, collective after collective (each starts when the job's previous phase ends); with ``carry``,
    each phase's carry flows after its flows (:func:`_add_carry_flows`)."""
    host_of_rank = fabric.gpu_host[gpus].tolist()
    t = JobTables()
    for coll in job.collectives:
        base = len(t.phase_steps)  # the collective starts when the job's previous phase (base - 1) ends
        phases = _grouped_phases(coll, len(gpus), host_of_rank, rotation)
        for ph, n_seg in segment_rings(phases, ring_run_ahead_bytes, with_counts=True):
            k = len(t.phase_steps)
            t.phase_steps.append(ph.steps)
            t.phase_segs.append(n_seg)
            t.phase_pred.append(_phase_pred(ph.after, k, base))
            first, mem_lo = len(t.flow_bytes), len(t.member_flow)
            for fl in ph.flows:
                f = len(t.flow_bytes)
                t.flow_phase.append(k)
                t.flow_bytes.append(fl.bytes)
                t.flow_parent.append(-1)
                for sr, dr in fl.members:
                    key = (int(gpus[sr]), int(gpus[dr]))
                    c = t.conn_index.setdefault(key, len(t.conn_index))
                    t.member_flow.append(f)
                    t.member_conn.append(c)
            if carry:  # the phase's carry flows follow its flows (a phase's flows stay contiguous)
                _add_carry_flows(
                    k, first, mem_lo, t.flow_phase, t.flow_bytes, t.flow_parent, t.member_flow, t.member_conn
                )
    return t
