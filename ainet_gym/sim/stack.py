"""The structure of a batched simulation: the compiled units of every instance stacked into flat tables.

:func:`stack_units` builds a :class:`UnitStack` once per restack (a job arrives or leaves, an AllToAll
rotates); the decision intervals only read it. Global ids: units, phases, flows and connections of all
instances are numbered consecutively, instance by instance; link ids in ``conn_paths_global`` are
``instance * links + link``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ainet_gym.fabric.topology import Fabric

__all__ = ["UnitStack", "stack_units"]


@dataclass(frozen=True, eq=False)
class UnitStack:
    """The compiled units of ``batch`` instances as flat tables (read-only between restacks)."""

    units: list  # (batch,) lists of CompiledUnit, each instance's units (jobs in slot order, then background)
    flat_units: list  # (units,) CompiledUnit, the same units in global order
    n_units: int
    n_flows: int
    n_conns: int
    # per unit
    unit_inst: np.ndarray  # (units,) int64 instance of each unit
    unit_bg: np.ndarray  # (units,) bool, a background source (not a job)
    unit_compute: np.ndarray  # (units,) s, compute time of one iteration
    unit_overlap: np.ndarray  # (units,) fraction of compute communication may hide behind
    unit_start: np.ndarray  # (units,) s, start time after a (re)stack's clock
    unit_ngpus: np.ndarray  # (units,) int64 GPUs of the job (0: background)
    unit_nphases: np.ndarray  # (units,) int64 phases
    unit_nflows: np.ndarray  # (units,) int64 flows
    unit_nconns: np.ndarray  # (units,) int64 connections
    # (units,) routing.reroute_held_bytes: the bytes a path part of the unit keeps on its old path at a split
    # change in flight (0: none)
    unit_held_bytes: np.ndarray
    # (units,) bool routing.reroute_held_weight part: the unit's held parts take their part's fraction (else 1)
    unit_held_part: np.ndarray
    # (units,) bool routing.part_share per_part: the unit's part flows weigh 1 and carry their fraction's bytes
    unit_part_one: np.ndarray
    # (units,) bool routing.reroute_held_parts queued: the unit's parts hold bytes only where queued at the boundary
    unit_held_queued: np.ndarray
    # (units,) routing.ring_window_bytes: the NCCL window of the unit's rings' sub-flows, bytes per hop (0: none)
    unit_ring_window: np.ndarray
    # (units,) routing.ring_window_chunk_bytes: the window's upstream bound in whole chunks of this many bytes (0: not)
    unit_ring_chunk: np.ndarray
    phase_off: np.ndarray  # (units,) int64 first phase of each unit
    flow_off: np.ndarray  # (units,) int64 first flow of each unit
    conn_off: np.ndarray  # (units,) int64 first connection of each unit
    # per phase (global ids)
    phase_latency: np.ndarray  # (phases,) s of latency paid before its bytes flow
    phase_unit: np.ndarray  # (phases,) int64 unit
    phase_inst: np.ndarray  # (phases,) int64 instance
    phase_npred: np.ndarray  # (phases,) int64 phases it waits for
    phase_succ_off: np.ndarray  # (phases+1,) int64 CSR offsets into phase_succ
    phase_succ: np.ndarray  # (edges,) int64 phases waiting for each phase
    phase_edge_src: np.ndarray  # (edges,) int64 phase each edge leaves
    phase_flow_lo: np.ndarray  # (phases,) int64 first flow of the phase (its flows are contiguous)
    phase_flow_n: np.ndarray  # (phases,) int64 flows of the phase
    # (phases,) int64 routing.ring_run_ahead_bytes: segments of the ring phase a phase is one of (1: not cut)
    phase_segments: np.ndarray
    # (phases,) int64 routing.ring_window_bytes: the alpha steps of each phase of a unit with a ring window (1
    # elsewhere)
    phase_steps: np.ndarray
    # per flow
    flow_unit: np.ndarray  # (flows,) int64 unit
    flow_inst: np.ndarray  # (flows,) int64 instance
    flow_phase: np.ndarray  # (flows,) int64 phase within its unit
    flow_gphase: np.ndarray  # (flows,) int64 global phase, -1 for background flows
    flow_bg: np.ndarray  # (flows,) bool, a background flow
    flow_bytes: np.ndarray  # (flows,) bytes each member moves per iteration (inf: background)
    flow_demand: np.ndarray  # (flows,) bytes/s rate cap (inf: job flows)
    # (flows,) bytes against which a flow's remainder rounds to 0 (flow_bytes; a carry flow's: its parent's)
    flow_scale: np.ndarray
    # (flows,) int64 routing.reroute new_transfers: the flow whose transfer in flight a carry flow takes over
    # at a decision boundary (global id), -1 for every other flow
    flow_parent: np.ndarray
    # (flows,) int64 routing.split_flows independent: the flow a part flow carries a share of (global id), -1
    # for every other flow
    flow_part_of: np.ndarray
    job_flows: np.ndarray  # (job flows,) int64 ids of the job (non-background) flows
    # per member (a flow's transfer on one connection) and per connection
    member_flow: np.ndarray  # (members,) int64 flow
    member_conn: np.ndarray  # (members,) int64 connection
    # (members,) int64 the one candidate path a member takes (-1: every candidate, engine.NO_PATH: none)
    member_path: np.ndarray
    conn_unit: np.ndarray  # (conns,) int64 unit
    conn_key: np.ndarray  # (conns,) int64 stable id for ECMP hashing
    conn_src: np.ndarray  # (conns,) int64 source endpoint
    conn_dst: np.ndarray  # (conns,) int64 destination endpoint
    conn_npaths: np.ndarray  # (conns,) int64 candidate paths
    conn_paths: np.ndarray  # (conns, max_paths, max_hops) int64 link ids, -1 padded
    conn_paths_global: np.ndarray  # (conns, max_paths, max_hops) int64 instance * links + link, -1 padded
    # per instance: contiguous ranges (for the compiled backend)
    inst_unit: np.ndarray  # (batch+1,) int64 units of instance b: inst_unit[b]:inst_unit[b+1]
    inst_flow: np.ndarray  # (batch+1,) int64 flows of each instance
    inst_phase: np.ndarray  # (batch+1,) int64 phases of each instance


def _optional_ids(flat: list, attr: str, counts: np.ndarray, fill: int) -> np.ndarray:
    """The units' optional int64 arrays ``attr`` (``counts[i]`` items for unit ``i``) concatenated, ``fill``
    for each unit without one: one array of ``fill`` when no unit has any (the shipped scenarios' common case,
    built without an array per unit)."""
    arrs = [getattr(u, attr) for u in flat]
    if all(a is None for a in arrs):
        return np.full(int(counts.sum()), fill, dtype=np.int64)
    return np.concatenate(
        [np.full(n, fill) if a is None else a for a, n in zip(arrs, counts, strict=True)]
    ).astype(np.int64)


def stack_units(fabric: Fabric, units: list[list]) -> UnitStack:
    """Stack the compiled units of each instance (``units[b]``, a list of CompiledUnit) on ``fabric``.

    The fields by concern: per unit with the offsets most fields share (:func:`_unit_fields`), the phase graph
    (:func:`_phase_fields`), per flow (:func:`_flow_fields`), the flow range of each phase
    (:func:`_phase_flow_ranges`), per member and connection (:func:`_conn_fields`); the instance ranges here.
    """
    B = len(units)
    flat = [u for inst in units for u in inst]
    unit_inst = np.asarray([b for b, inst in enumerate(units) for _ in inst], dtype=np.int64)
    per_unit = _unit_fields(flat, unit_inst)
    phases = _phase_fields(flat, per_unit)
    flows = _flow_fields(flat, per_unit)
    phases.update(_phase_flow_ranges(flows["flow_gphase"], flows["job_flows"], phases["phase_unit"].shape[0]))
    return UnitStack(
        units=units,
        flat_units=flat,
        n_units=len(flat),
        n_flows=int(per_unit["unit_nflows"].sum()),
        n_conns=int(per_unit["unit_nconns"].sum()),
        **per_unit,
        **phases,
        **flows,
        **_conn_fields(fabric, flat, per_unit),
        inst_unit=np.searchsorted(unit_inst, np.arange(B + 1)).astype(np.int64),
        inst_flow=np.searchsorted(flows["flow_inst"], np.arange(B + 1)).astype(np.int64),
        inst_phase=np.searchsorted(phases["phase_inst"], np.arange(B + 1)).astype(np.int64),
    )


def _cat(flat: list, attr: str, dtype: type = np.float64) -> np.ndarray:
    """The units' arrays ``attr`` concatenated, as ``dtype``."""
    arrs = [getattr(u, attr) for u in flat]
    return np.concatenate(arrs).astype(dtype) if arrs else np.zeros(0, dtype=dtype)


def _offsets(counts: np.ndarray) -> np.ndarray:
    """The first global id of each unit's items, ``counts[i]`` items for unit ``i``."""
    return np.concatenate([[0], np.cumsum(counts)])[:-1]


def _unit_fields(flat: list, unit_inst: np.ndarray) -> dict[str, Any]:
    """The per-unit fields of :class:`UnitStack`: the units' own figures, their counts of phases, flows and
    connections, and the offsets of these."""
    n_ph = np.asarray([u.n_phases for u in flat], dtype=np.int64)
    n_fl = np.asarray([u.flow_bytes.shape[0] for u in flat], dtype=np.int64)
    n_cn = np.asarray([u.conn_src.shape[0] for u in flat], dtype=np.int64)
    return {
        "unit_inst": unit_inst,
        "unit_bg": np.asarray([u.is_background for u in flat], dtype=bool),
        "unit_compute": np.asarray([u.compute_s for u in flat]),
        "unit_overlap": np.asarray([u.overlap for u in flat]),
        "unit_start": np.asarray([u.start_s for u in flat]),
        "unit_ngpus": np.asarray([0 if u.is_background else len(u.gpus) for u in flat], dtype=np.int64),
        "unit_nphases": n_ph,
        "unit_nflows": n_fl,
        "unit_nconns": n_cn,
        "unit_held_bytes": np.asarray([u.held_bytes for u in flat], dtype=np.float64),
        "unit_held_part": np.asarray([u.held_weight == "part" for u in flat], dtype=bool),
        "unit_part_one": np.asarray([u.part_share == "per_part" for u in flat], dtype=bool),
        "unit_held_queued": np.asarray([u.held_parts == "queued" for u in flat], dtype=bool),
        "unit_ring_window": np.asarray([u.ring_window_bytes for u in flat], dtype=np.float64),
        "unit_ring_chunk": np.asarray([u.ring_window_chunk_bytes for u in flat], dtype=np.float64),
        "phase_off": _offsets(n_ph),
        "flow_off": _offsets(n_fl),
        "conn_off": _offsets(n_cn),
    }


def _phase_fields(flat: list, pu: dict[str, Any]) -> dict[str, Any]:
    """The phase graph in global phase ids (``pu``: :func:`_unit_fields`): predecessor counts, successor
    lists (CSR), unit and instance of each phase."""
    U, n_ph, phase_off = len(flat), pu["unit_nphases"], pu["phase_off"]
    n_gph = int(n_ph.sum())
    phase_unit = np.repeat(np.arange(U), n_ph)
    n_edge = np.asarray([u.phase_succ.shape[0] for u in flat], dtype=np.int64)
    edge_off = np.concatenate([[0], np.cumsum(n_edge)])
    phase_succ_off = np.concatenate(
        [u.phase_succ_off[:-1] + edge_off[i] for i, u in enumerate(flat)] + [edge_off[-1:]]
    ).astype(np.int64)
    return {
        "phase_latency": _cat(flat, "phase_latency_s"),
        "phase_unit": phase_unit,
        "phase_inst": pu["unit_inst"][phase_unit] if U else np.zeros(0, dtype=np.int64),
        "phase_npred": _cat(flat, "phase_npred", np.int64),
        "phase_succ_off": phase_succ_off,
        "phase_succ": _cat(flat, "phase_succ", np.int64) + np.repeat(phase_off, n_edge).astype(np.int64),
        "phase_edge_src": np.repeat(np.arange(n_gph), np.diff(phase_succ_off)),
        "phase_segments": _optional_ids(flat, "phase_segments", n_ph, 1),
        "phase_steps": _optional_ids(flat, "phase_steps", n_ph, 1),
    }


def _flow_fields(flat: list, pu: dict[str, Any]) -> dict[str, Any]:
    """The per-flow fields (``pu``: :func:`_unit_fields`): unit, instance, phase, bytes, and the flow a carry
    flow (routing.reroute new_transfers) or a part flow (split_flows independent) takes its bytes from."""
    U, n_fl, flow_off = len(flat), pu["unit_nflows"], pu["flow_off"]
    flow_unit = np.repeat(np.arange(U), n_fl)
    flow_phase = _cat(flat, "flow_phase", np.int64)
    flow_bg = pu["unit_bg"][flow_unit] if U else np.zeros(0, dtype=bool)
    flow_gphase = (
        np.where(flow_bg, -1, pu["phase_off"][flow_unit] + flow_phase).astype(np.int64)
        if U
        else np.zeros(0, dtype=np.int64)
    )
    flow_bytes = _cat(flat, "flow_bytes")
    flow_scale = flow_bytes.copy()
    # the flow a carry flow or a part flow takes its bytes from, as a global flow id (-1: none); its
    # remainder rounds against that flow's bytes
    flow_parent, flow_part_of = (
        _optional_ids(flat, name, n_fl, -1) for name in ("flow_parent", "flow_part_of")
    )
    for of in (flow_parent, flow_part_of):
        has = of >= 0
        if has.any():
            of[has] += flow_off[flow_unit[has]]
            of[~has] = -1
            flow_scale[has] = flow_bytes[of[has]]
    return {
        "flow_unit": flow_unit,
        "flow_inst": pu["unit_inst"][flow_unit] if U else np.zeros(0, dtype=np.int64),
        "flow_phase": flow_phase,
        "flow_gphase": flow_gphase,
        "flow_bg": flow_bg,
        "flow_bytes": flow_bytes,
        "flow_demand": _cat(flat, "flow_demand_bytes_per_s"),
        "flow_scale": flow_scale,
        "flow_parent": flow_parent,
        "flow_part_of": flow_part_of,
        "job_flows": np.flatnonzero(~flow_bg),
    }


def _phase_flow_ranges(flow_gphase: np.ndarray, job: np.ndarray, n_gph: int) -> dict[str, Any]:
    """The contiguous flow range of each phase, for the compiled backend: first flow and count."""
    gphase = flow_gphase[job]  # nondecreasing along job
    phase_flow_n = np.bincount(gphase, minlength=n_gph).astype(np.int64)
    first = np.searchsorted(gphase, np.arange(n_gph))
    phase_flow_lo = np.where(
        phase_flow_n > 0, job[np.minimum(first, max(job.size - 1, 0))] if job.size else 0, 0
    ).astype(np.int64)
    return {"phase_flow_lo": phase_flow_lo, "phase_flow_n": phase_flow_n}


def _conn_fields(fabric: Fabric, flat: list, pu: dict[str, Any]) -> dict[str, Any]:
    """The per-member and per-connection fields (``pu``: :func:`_unit_fields`), the candidate paths in the
    fabric's link ids and in global ones (``instance * links + link``)."""
    U, n_cn, flow_off, conn_off = len(flat), pu["unit_nconns"], pu["flow_off"], pu["conn_off"]
    n_mem = np.asarray([u.member_flow.shape[0] for u in flat], dtype=np.int64)
    mem_unit = np.repeat(np.arange(U), n_mem)
    conn_unit = np.repeat(np.arange(U), n_cn)
    P, H, L = fabric.max_paths, fabric.max_hops, fabric.n_links
    paths = [u.conn_paths for u in flat]
    conn_paths = np.concatenate(paths) if paths else np.zeros((0, P, H), dtype=np.int64)
    inst_of_conn = pu["unit_inst"][conn_unit] if U else np.zeros(0, dtype=np.int64)
    return {
        "member_flow": _cat(flat, "member_flow", np.int64) + (flow_off[mem_unit] if U else 0),
        "member_conn": _cat(flat, "member_conn", np.int64) + (conn_off[mem_unit] if U else 0),
        "member_path": _optional_ids(flat, "member_path", n_mem, -1),
        "conn_unit": conn_unit,
        "conn_key": _cat(flat, "conn_key", np.int64),
        "conn_src": _cat(flat, "conn_src", np.int64),
        "conn_dst": _cat(flat, "conn_dst", np.int64),
        "conn_npaths": _cat(flat, "conn_npaths", np.int64),
        "conn_paths": conn_paths,
        "conn_paths_global": np.where(conn_paths >= 0, conn_paths + (inst_of_conn * L)[:, None, None], -1),
    }
