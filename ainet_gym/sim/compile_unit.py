"""Jobs and background sources compiled on a fabric into units (:func:`compile_job`, :func:`compile_background`):
the phases with their predecessor graph and alpha terms, the flows, members and connections, the connections'
candidate paths and ECMP keys."""

from __future__ import annotations

import zlib

import numpy as np

from ainet_gym.fabric.topology import Fabric
from ainet_gym.scenario.spec import SPLIT_FLOWS_MODES, BackgroundSpec, JobSpec
from ainet_gym.sim.conn_tables import conn_tables, max_hops
from ainet_gym.sim.job_tables import JobTables, job_tables
from ainet_gym.sim.split_parts import split_parts
from ainet_gym.sim.unit import CompiledUnit
from ainet_gym.units import GBPS_TO_BYTES_PER_S

__all__ = ["compile_background", "compile_job"]


#: :func:`job_tables` by what they are made of (the collectives, the GPUs and their hosts, the rotation, the carry
#: flows, the ring run-ahead; not the fabric object or the job's other fields). An env's construction compiles a
#: job placed from GPU 0 three times on the same GPUs: for its slot width
#: (:func:`ainet_gym.envs.slots.job_connections`), its ideal step time (on the non-blocking copy of the fabric,
#: the same hosts) and the world's reset; the tables are the same each time (docs/development.md,
#: "issue-31zi2"). Read only: :func:`compile_job` copies what it takes into the unit's arrays. The last
#: ``_JOB_TABLES_KEPT`` keys are kept (emptied when full, as :func:`~ainet_gym.sim.conn_tables.conn_tables`).
_JOB_TABLES: dict[tuple, JobTables] = {}
_JOB_TABLES_KEPT = 8


def _shared_job_tables(
    fabric: Fabric,
    job: JobSpec,
    gpus: np.ndarray,
    rotation: int,
    carry: bool,
    ring_run_ahead_bytes: float | None,
) -> JobTables:
    """:func:`job_tables`, computed once per key of :data:`_JOB_TABLES` (the last few kept)."""
    hosts = fabric.gpu_host[gpus]
    key = (
        job.collectives,
        gpus.tobytes(),
        hosts.tobytes(),
        str(hosts.dtype),
        rotation,
        carry,
        ring_run_ahead_bytes,
    )
    t = _JOB_TABLES.get(key)
    if t is None:
        if len(_JOB_TABLES) >= _JOB_TABLES_KEPT:
            _JOB_TABLES.clear()
        t = _JOB_TABLES[key] = job_tables(fabric, job, gpus, rotation, carry, ring_run_ahead_bytes)
    return t


def _phase_graph(pred: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predecessor counts and successor lists (CSR: ``succ[succ_off[k]:succ_off[k + 1]]``) of phases
    whose predecessors are ``pred``."""
    n = len(pred)
    npred = np.asarray([len(x) for x in pred], dtype=np.int64)
    src = np.asarray([j for x in pred for j in x], dtype=np.int64)
    dst = np.repeat(np.arange(n, dtype=np.int64), npred)
    order = np.argsort(src, kind="stable")
    succ_off = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).astype(np.int64)
    return npred, succ_off, dst[order]


def _phase_latency_s(
    fabric: Fabric,
    steps: np.ndarray,
    member_phase: np.ndarray,
    member_hops: np.ndarray,
    member_lat: np.ndarray,
) -> np.ndarray:
    """Each phase's alpha term: its steps times the longest path latency among its members (hops times
    the fabric's hop latency, or a graph fabric's per-link latencies summed over the path; plus, with
    ``fabric.store_and_forward_bytes``, a packet's serialisation on every link: ``Fabric.path_latency_s``)."""
    lat = np.zeros(len(steps))
    if not member_phase.size:
        return lat
    if fabric.link_latency_s is not None or fabric.spec.store_and_forward_bytes > 0:  # per-path: the slowest
        np.maximum.at(lat, member_phase, member_lat)
        return steps * lat
    np.maximum.at(lat, member_phase, member_hops)
    return steps * lat * fabric.hop_latency_s


def _job_conn_key(name: str, src: list[int], dst: list[int]) -> np.ndarray:
    """(conns,) int64 stable ids of a job's connections for ECMP hashing: the job name's CRC32, source and
    destination endpoint."""
    jk = zlib.crc32(name.encode())
    return (
        (np.int64(jk) << np.int64(32))
        ^ (np.asarray(src, dtype=np.int64) << np.int64(16))
        ^ np.asarray(dst, dtype=np.int64)
    )


def _check_split_flows(
    split_flows: str,
    carry: bool,
    reroute_held_bytes: float = 0.0,
    part_share: str = "fraction",
    ring_window_bytes: float | None = None,
) -> None:
    """Refuse a ``routing.split_flows`` value :func:`compile_job` does not know, independent parts with the
    carry flows of ``routing.reroute: new_transfers``, and held bytes, a part share or a ring window without
    independent parts (or a ring window that is not a finite number of bytes > 0)."""
    w = ring_window_bytes
    if w is not None and not (split_flows == "independent" and isinstance(w, int | float) and 0 < w < np.inf):
        raise ValueError(
            f"routing.ring_window_bytes = {w!r} with routing.split_flows = {split_flows!r}: "
            "allowed: None, or a finite number of bytes > 0 with split_flows independent"
        )
    if split_flows not in SPLIT_FLOWS_MODES:
        allowed = ", ".join(SPLIT_FLOWS_MODES)
        raise ValueError(f"routing.split_flows = {split_flows!r}: allowed: {allowed}")
    if carry and split_flows == "independent":
        raise ValueError(
            "routing.split_flows = 'independent' with routing.reroute = 'new_transfers': allowed: "
            "split_flows coupled, or reroute in_flight"
        )
    if reroute_held_bytes != 0 and split_flows != "independent":
        raise ValueError(
            f"routing.reroute_held_bytes = {reroute_held_bytes!r} with routing.split_flows = {split_flows!r}: "
            "allowed: 0, or split_flows independent"
        )
    if part_share != "fraction" and split_flows != "independent":
        raise ValueError(
            f"routing.part_share = {part_share!r} with routing.split_flows = {split_flows!r}: "
            "allowed: fraction, or split_flows independent"
        )


def _window_fields(
    ring_window_bytes: float | None, phase_steps: list[int], chunk_bytes: float | None = None
) -> dict:
    """The :class:`CompiledUnit` fields of ``routing.ring_window_bytes`` (with ``split_flows="independent"``): the
    NCCL window of the unit's rings' sub-flows (:mod:`ainet_gym.sim.ring_window`), 0 for none, its phases' alpha
    steps (a ring step is a hop's bytes over them), None without a window, and ``routing.ring_window_chunk_bytes``
    (0: the upstream bound is not rounded to chunks)."""
    if chunk_bytes is not None and not (ring_window_bytes is not None and 0 < chunk_bytes < np.inf):
        raise ValueError(
            f"routing.ring_window_chunk_bytes = {chunk_bytes!r} with routing.ring_window_bytes = "
            f"{ring_window_bytes!r}: allowed: None, or a finite number of bytes > 0 with a ring window"
        )
    if ring_window_bytes is None:
        return {"ring_window_bytes": 0.0, "phase_steps": None}
    return {
        "ring_window_bytes": float(ring_window_bytes),
        "phase_steps": np.asarray(phase_steps, dtype=np.int64),
        "ring_window_chunk_bytes": 0.0 if chunk_bytes is None else float(chunk_bytes),
    }


def compile_job(
    fabric: Fabric,
    job: JobSpec,
    gpus: np.ndarray,
    rotation: int = 0,
    carry: bool = False,
    split_flows: str = "coupled",
    ring_run_ahead_bytes: float | None = None,
    reroute_held_bytes: float = 0.0,
    reroute_held_weight: str = "one",
    part_share: str = "fraction",
    reroute_held_parts: str = "all",
    ring_window_bytes: float | None = None,
    ring_window_chunk_bytes: float | None = None,
) -> CompiledUnit:
    """Compile ``job`` placed on ``gpus`` into phases, flows, members and candidate paths.

    ``carry`` (``routing.reroute: new_transfers``): each flow gets a *carry flow* in its phase, with the
    same members and no bytes of its own, which takes over the flow's transfer in flight at a decision
    boundary and carries it on the split it started with (:meth:`BatchSim.carry_over`).

    ``split_flows`` (``routing.split_flows``): ``"coupled"`` (a flow moves at one rate over all its members
    and paths) or ``"independent"`` (each member's share of each candidate path is a part flow of its own,
    :func:`split_parts`; not with ``carry``).

    ``ring_run_ahead_bytes`` (``routing.ring_run_ahead_bytes``): every ring phase is cut into sequential
    segments of at most this many bytes per hop (:func:`~ainet_gym.sim.workload.segment_rings`), so that
    independent hops run apart by at most one segment; ``None``: rings uncut.

    ``reroute_held_bytes`` (``routing.reroute_held_bytes``, with ``split_flows="independent"`` only): each part
    that loses share at a split change in flight keeps up to this many bytes on its old path, as a held part
    (:func:`split_parts`); 0: no held parts. ``reroute_held_weight`` (``routing.reroute_held_weight``): a held
    part's coefficient, ``"one"`` (1) or ``"part"`` (its part's fraction before the change). ``part_share``
    (``routing.part_share``, ``"per_part"`` with ``split_flows="independent"`` only): how a part shares a link.
    ``reroute_held_parts`` (``routing.reroute_held_parts``): which parts hold bytes, ``"all"`` that lose share or
    only the ``"queued"`` ones (bottlenecked on a saturated switch link of their old path at the boundary).
    ``ring_window_bytes``, ``ring_window_chunk_bytes``: the rings' sub-flows' NCCL window (:func:`_window_fields`).
    Long because it documents each routing option it compiles, one paragraph each.
    """
    _check_split_flows(split_flows, carry, reroute_held_bytes, part_share, ring_window_bytes)
    gpus = np.asarray(gpus, dtype=np.int64)
    t = _shared_job_tables(fabric, job, gpus, rotation, carry, ring_run_ahead_bytes)
    src = [s for s, _ in t.conn_index]
    dst = [d for _, d in t.conn_index]
    H = max_hops(fabric)
    paths, npaths, hops, path_lat = conn_tables(fabric, src, dst, H)
    conn_key = _job_conn_key(job.name, src, dst)
    mf = np.asarray(t.member_flow, dtype=np.int64)
    mc = np.asarray(t.member_conn, dtype=np.int64)
    fp = np.asarray(t.flow_phase, dtype=np.int64)
    lat = _phase_latency_s(fabric, np.asarray(t.phase_steps), fp[mf], hops[mc], path_lat[mc])
    npred, succ_off, succ = _phase_graph(t.phase_pred)
    unit = CompiledUnit(
        name=job.name,
        is_background=False,
        gpus=gpus,
        compute_s=job.compute_ms * 1e-3,
        overlap=job.overlap,
        start_s=job.start_ms * 1e-3,
        phase_latency_s=lat,
        phase_npred=npred,
        phase_succ_off=succ_off,
        phase_succ=succ,
        flow_phase=fp,
        flow_bytes=np.asarray(t.flow_bytes, dtype=np.float64),
        flow_demand_bytes_per_s=np.full(len(t.flow_bytes), np.inf),
        member_flow=mf,
        member_conn=mc,
        conn_src=np.asarray(src, dtype=np.int64),
        conn_dst=np.asarray(dst, dtype=np.int64),
        conn_key=conn_key,
        conn_paths=paths,
        conn_npaths=npaths,
        flow_parent=np.asarray(t.flow_parent, dtype=np.int64) if carry else None,
        phase_segments=np.asarray(t.phase_segs, dtype=np.int64) if ring_run_ahead_bytes is not None else None,
        share_weight=float(job.share_weight),
        **_window_fields(ring_window_bytes, t.phase_steps, ring_window_chunk_bytes),
    )
    return (
        split_parts(unit, reroute_held_bytes, reroute_held_weight, part_share, reroute_held_parts)
        if split_flows == "independent"
        else unit
    )


def compile_background(fabric: Fabric, bg: BackgroundSpec, gpus: np.ndarray, index: int) -> CompiledUnit:
    """Background traffic between the storage hosts and ``gpus`` as demand-capped endless flows."""
    storage = fabric.n_gpus + np.arange(fabric.n_storage)
    n = len(storage) * bg.flows_per_host
    targets = np.asarray(gpus, dtype=np.int64)[np.arange(n) % len(gpus)]
    hosts = np.repeat(storage, bg.flows_per_host)
    src, dst = (hosts, targets) if bg.kind == "storage" else (targets, hosts)
    paths, npaths, _, _ = conn_tables(fabric, src.tolist(), dst.tolist(), max_hops(fabric))
    key = (np.int64(0x5BD1E995 + index) << np.int64(32)) ^ (src << np.int64(16)) ^ dst
    return CompiledUnit(
        name=f"background{index}:{bg.kind}",
        is_background=True,
        gpus=np.asarray(gpus, dtype=np.int64),
        compute_s=0.0,
        overlap=0.0,
        start_s=0.0,
        phase_latency_s=np.zeros(0),
        phase_npred=np.zeros(0, dtype=np.int64),
        phase_succ_off=np.zeros(1, dtype=np.int64),
        phase_succ=np.zeros(0, dtype=np.int64),
        flow_phase=np.zeros(n, dtype=np.int64),
        flow_bytes=np.full(n, np.inf),
        flow_demand_bytes_per_s=np.full(n, bg.gbps * GBPS_TO_BYTES_PER_S / n),
        member_flow=np.arange(n, dtype=np.int64),
        member_conn=np.arange(n, dtype=np.int64),
        conn_src=src.astype(np.int64),
        conn_dst=dst.astype(np.int64),
        conn_key=key.astype(np.int64),
        conn_paths=paths,
        conn_npaths=npaths,
        bg_spec=bg,
    )
