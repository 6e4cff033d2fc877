"""Independent split parts (``routing.split_flows: independent``): a compiled unit whose every (flow, member,
candidate path) is a part flow of its own (:func:`split_parts`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ainet_gym.scenario.spec import PART_SHARES, REROUTE_HELD_PARTS, REROUTE_HELD_WEIGHTS
from ainet_gym.sim.unit import NO_PATH, CompiledUnit

__all__ = ["split_parts"]


def split_parts(
    unit: CompiledUnit,
    held_bytes: float = 0.0,
    held_weight: str = "one",
    part_share: str = "fraction",
    held_parts: str = "all",
) -> CompiledUnit:
    """``unit`` with independent split parts (``routing.split_flows: independent``): after each phase's
    flows, one *part flow* per (flow, member, candidate path) of the phase, whose one member takes that path
    only. A part carries the flow's bytes on its connection's share of that path (its coefficient on the
    path's links is the connection's split fraction, as the flow's is), so it moves ``fraction x bytes`` in
    the max-min allocation at its own rate; the flow itself keeps its bytes for the books (policies,
    observations) but takes no path and moves nothing (:meth:`BatchSim.set_split` hands its bytes to its
    parts). The phase, and so the transfer, ends when its last part does.

    ``held_bytes`` > 0 (``routing.reroute_held_bytes``): after the parts, one *held part* per part (the same
    flow, member and path, in the same order), whose member_path is ``max_paths`` + the path: it takes that
    path at coefficient 1, whatever the split, and carries the bytes its part keeps on its old path at a
    split change in flight (:meth:`BatchSim.set_split <ainet_gym.sim.batch_split.BatchSplit.set_split>`).
    ``held_weight`` (``routing.reroute_held_weight``): ``"one"`` keeps that coefficient at 1; ``"part"`` makes it
    the fraction the part had before the change (the engine's ``EngineState.held_weight``).
    ``part_share`` (``routing.part_share``): ``"fraction"`` (a part weighs its path's fraction f and carries all
    the flow's bytes) or ``"per_part"`` (it weighs 1 where f > 0 and carries f of them; held parts at ``"one"``).
    ``held_parts`` (``routing.reroute_held_parts``): ``"all"`` (every part that loses share holds bytes) or
    ``"queued"`` (only a part bottlenecked on a saturated switch link of its old path at the boundary,
    :meth:`BatchSplit._queued_parts <ainet_gym.sim.batch_split.BatchSplit._queued_parts>`)."""
    _check_part_args(held_bytes, held_weight, part_share, held_parts)
    P = int(unit.conn_paths.shape[1])
    fp, fb = unit.flow_phase, unit.flow_bytes
    mf, mc, npaths = unit.member_flow, unit.member_conn, unit.conn_npaths
    mem_lo = np.searchsorted(mf, np.arange(fb.shape[0] + 1))
    flow_phase: list[int] = []
    flow_bytes: list[float] = []
    part_of: list[int] = []
    member_flow: list[int] = []
    member_conn: list[int] = []
    member_path: list[int] = []
    for k in range(unit.n_phases):
        flows = np.flatnonzero(fp == k)
        new_id = {}
        for f in flows:  # the phase's flows: their bytes, no path
            new_id[f] = nf = len(flow_bytes)
            flow_phase.append(k)
            flow_bytes.append(float(fb[f]))
            part_of.append(-1)
            for m in range(mem_lo[f], mem_lo[f + 1]):
                member_flow.append(nf)
                member_conn.append(int(mc[m]))
                member_path.append(NO_PATH)
        # then their parts: one per member and candidate path; then a held part per part, in the same order
        for path_base in (0, P) if held_bytes > 0 else (0,):
            for f in flows:
                for m in range(mem_lo[f], mem_lo[f + 1]):
                    c = int(mc[m])
                    for q in range(int(npaths[c])):
                        member_flow.append(len(flow_bytes))
                        member_conn.append(c)
                        member_path.append(path_base + q)
                        flow_phase.append(k)
                        flow_bytes.append(0.0)
                        part_of.append(new_id[f])
    n = len(flow_bytes)
    return replace(
        unit,
        flow_phase=np.asarray(flow_phase, dtype=np.int64),
        flow_bytes=np.asarray(flow_bytes, dtype=np.float64),
        flow_demand_bytes_per_s=np.full(n, np.inf),
        member_flow=np.asarray(member_flow, dtype=np.int64),
        member_conn=np.asarray(member_conn, dtype=np.int64),
        member_path=np.asarray(member_path, dtype=np.int64),
        flow_part_of=np.asarray(part_of, dtype=np.int64),
        held_bytes=float(held_bytes),
        held_weight=held_weight,
        part_share=part_share,
        held_parts=held_parts,
    )


def _check_part_args(held_bytes: float, held_weight: str, part_share: str, held_parts: str = "all") -> None:
    """The routing fields :func:`split_parts` takes, each checked by name (and the one pair refused together)."""
    if held_parts not in REROUTE_HELD_PARTS:
        raise ValueError(
            f"routing.reroute_held_parts = {held_parts!r}: allowed: {', '.join(REROUTE_HELD_PARTS)}"
        )
    if part_share not in PART_SHARES:
        raise ValueError(f"routing.part_share = {part_share!r}: allowed: {', '.join(PART_SHARES)}")
    if part_share != "fraction" and held_bytes != 0 and held_weight != "one":
        raise ValueError(
            f"routing.part_share = {part_share!r} with routing.reroute_held_weight = {held_weight!r}: "
            "allowed: part_share fraction, or reroute_held_weight one"
        )
    if not (np.isfinite(held_bytes) and held_bytes >= 0):
        raise ValueError(
            f"routing.reroute_held_bytes = {held_bytes!r}: allowed: a finite number of bytes >= 0"
        )
    if held_weight not in REROUTE_HELD_WEIGHTS:
        raise ValueError(
            f"routing.reroute_held_weight = {held_weight!r}: allowed: {', '.join(REROUTE_HELD_WEIGHTS)}"
        )
