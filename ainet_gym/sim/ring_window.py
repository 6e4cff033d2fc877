"""The NCCL window of a ring's sub-flows (``routing.ring_window_bytes`` W, ``routing.ring_window_side: nccl_part``;
with ``routing.split_flows: independent``, ``part_share: fraction`` or ``per_part``): each path part of a ring hop
may lead the summed progress of the hop feeding it by at most one ring step and that of the hop it feeds by at most
W. The replay's rule (``Allow`` and ``Distribute`` in ``ainet_gym/checks/ns3_driver.cc``): a sub-flow of fraction f
may have sent f x (what the feeding hop delivered + one step) and f x (what the fed hop has sent + W); the replay
rounds the first to whole chunks, the fluid only with ``routing.ring_window_chunk_bytes`` (docs/model.md, "A sliding
window for ring hops"; docs/fidelity-learning.md, issue-27zzq and issue-27zzr).

Definitions (:class:`RingWindow`). A *ring* is a flow of more than one member (connection) whose members' sources
are exactly their destinations; a *hop* is the ring's part flows on one member; the hop *feeding* hop h is the one
whose connection ends where h's starts, the hop h *feeds* the one starting where h's ends. With ``B`` a hop's
bytes, ``rem_j`` a part's remainder in connection bytes and ``b_j`` its fraction of its connection (normalised
over the hop's paths). Under ``fraction`` a part's remainder counts its connection's bytes, so ``rem_j`` is it;
under ``part_share: per_part`` (issue-27zzy) it counts the part's own bytes on its path, so ``rem_j`` is that
remainder / ``b_j``, and a part's rate in the same units is its rate / ``b_j`` (its cap: the reference rate x
``b_j``), which is the replay's rule for one TCP connection per path (:attr:`WindowSolve.scale`):

- a part's progress ``p_k = B - rem_k`` and a hop's summed progress ``P_h = B - sum_j b_j rem_j``, in hop bytes;
- part k of hop h is *at a bound* when ``p_k - P_feeding >= S`` (S = the hop's bytes / its phase's alpha steps,
  one ring step) or ``p_k - P_fed >= W``, to ``EPS_B x B`` bytes;
- a part at a bound moves at most at the summed rate ``R = sum_j b_j r_j`` of the hop it is bound by (the lower of
  the two when both bind); a part behind its bounds keeps its max-min rate. The hop's sum is not bounded.
- with ``routing.ring_window_chunk_bytes`` C (the replay's rounding, issue-27zzu): the upstream bound reads the
  feeding hop's progress in whole chunks of ``c = min(C, S)``, ``floor(P_feeding / c) x c`` (not rounded once the
  feeding hop is done), and a part at it waits (rate 0) until the feeding hop completes its next chunk, an event.

The rates are the fixed point of :func:`window_rates`: max-min fair given a rate cap on each part at a bound,
each cap equal to its reference hop's summed rate at those rates, or above it where links hold the part lower.
A free part's lead reaching a bound is an event (:func:`window_event_dt`), so between events the set of parts at a
bound, and so the rates, are constant: the event loop stays exact for these semantics, to the fixed point's
tolerance :data:`WINDOW_RTOL`. Only the numpy backend runs it (``SimBackend.ring_window``); the compiled one
refuses the field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ainet_gym.sim.interval import EPS_B

__all__ = [
    "WINDOW_MAX_SOLVES",
    "WINDOW_RTOL",
    "RingWindow",
    "WindowSolve",
    "build_ring_window",
    "window_bounds",
    "window_event_dt",
    "window_rates",
]

#: the fixed point is settled when no part at a bound moves faster than its reference hop's summed rate, and no
#: part held at its cap has a cap below that rate, by more than this fraction of the larger rate
WINDOW_RTOL = 1e-9
#: solves per event before the fixed point gives up (the event keeps its last solve; counted and warned)
WINDOW_MAX_SOLVES = 400


@dataclass(frozen=True)
class RingWindow:
    """The ring hops of the units with a window and their parts (:func:`build_ring_window`); K parts, H hops."""

    part: np.ndarray  # (K,) int64 global flow id of each windowed part
    conn: np.ndarray  # (K,) int64 its connection
    path: np.ndarray  # (K,) int64 its path (the column of its connection's split row)
    hop: np.ndarray  # (K,) int64 its hop (0..H-1)
    inst: np.ndarray  # (K,) int64 its instance
    up: np.ndarray  # (H,) int64 the hop feeding each hop
    down: np.ndarray  # (H,) int64 the hop each hop feeds
    hop_bytes: np.ndarray  # (H,) bytes of each hop per iteration (its flow's bytes)
    step_bytes: np.ndarray  # (H,) one ring step: the hop's bytes / its phase's alpha steps
    window_bytes: np.ndarray  # (H,) W of its unit
    # (H,) routing.ring_window_chunk_bytes: the chunk c = min(C, step) the upstream bound rounds the feeding hop's
    # progress to (0: not rounded)
    chunk_bytes: np.ndarray | None = None
    # (K,) routing.part_share per_part: the parts whose remainder counts their own bytes on their path, not their
    # connection's (None: none, every part under fraction)
    per_part: np.ndarray | None = None

    @property
    def n_hops(self) -> int:
        return int(self.hop_bytes.shape[0])


def build_ring_window(
    unit_window: np.ndarray,
    flow_unit: np.ndarray,
    flow_inst: np.ndarray,
    flow_gphase: np.ndarray,
    flow_bytes: np.ndarray,
    phase_steps: np.ndarray,
    conn_src: np.ndarray,
    conn_dst: np.ndarray,
    parts: np.ndarray,
    part_parent: np.ndarray,
    part_conn: np.ndarray,
    part_path: np.ndarray,
    unit_chunk: np.ndarray | None = None,
    unit_per_part: np.ndarray | None = None,
) -> RingWindow | None:
    """The :class:`RingWindow` of the part flows ``parts`` (their flows ``part_parent``, connections ``part_conn``
    and paths ``part_path``, a flow's parts on one connection contiguous) whose unit has a window
    (``unit_window`` > 0) and whose flow is a ring; None when there are none. Per-unit and per-flow arrays are
    the :class:`~ainet_gym.sim.stack.UnitStack`'s; ``unit_chunk`` (units,): ``routing.ring_window_chunk_bytes``
    (0 or None: not rounded); ``unit_per_part`` (units,) bool: ``routing.part_share: per_part`` (None: none)."""
    if not parts.size:
        return None
    sel = unit_window[flow_unit[part_parent]] > 0
    if not sel.any():
        return None
    # the (flow, connection) hops of the windowed units, in order of first appearance
    keys = np.stack([part_parent[sel], part_conn[sel]], axis=1)
    uniq, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    hops = uniq[order]  # (groups, 2) flow, connection
    group_of = rank[inverse.reshape(-1)]
    up = np.full(hops.shape[0], -1, dtype=np.int64)
    down = np.full(hops.shape[0], -1, dtype=np.int64)
    flows, lo = np.unique(hops[:, 0], return_index=True)
    bounds = np.append(lo, hops.shape[0])
    ring = np.zeros(hops.shape[0], dtype=bool)
    for i in range(flows.shape[0]):  # a ring: sources are exactly the destinations, each once
        g = np.arange(bounds[i], bounds[i + 1])
        src, dst = conn_src[hops[g, 1]], conn_dst[hops[g, 1]]
        if g.size < 2 or np.unique(src).size != g.size or not np.array_equal(np.sort(src), np.sort(dst)):
            continue
        by_dst = {int(d): int(k) for k, d in zip(g, dst, strict=True)}
        by_src = {int(s): int(k) for k, s in zip(g, src, strict=True)}
        for k, s, d in zip(g, src, dst, strict=True):
            up[k], down[k] = by_dst[int(s)], by_src[int(d)]
        ring[g] = True
    if not ring.any():
        return None
    new_id = np.cumsum(ring) - 1
    keep = ring[group_of]
    part_ids = np.flatnonzero(sel)[keep]
    f = hops[ring, 0]
    hop_bytes = flow_bytes[f].astype(np.float64)
    step = hop_bytes / np.maximum(phase_steps[flow_gphase[f]], 1)
    chunk = None
    if unit_chunk is not None and (unit_chunk[flow_unit[f]] > 0).any():
        chunk = np.where(unit_chunk[flow_unit[f]] > 0, np.minimum(unit_chunk[flow_unit[f]], step), 0.0)
    per_part = None
    if unit_per_part is not None:
        one = np.asarray(unit_per_part, dtype=bool)[flow_unit[part_parent[part_ids]]]
        per_part = one if one.any() else None
    return RingWindow(
        part=parts[part_ids].astype(np.int64),
        conn=part_conn[part_ids].astype(np.int64),
        path=part_path[part_ids].astype(np.int64),
        hop=new_id[group_of[keep]].astype(np.int64),
        inst=flow_inst[parts[part_ids]].astype(np.int64),
        up=new_id[up[ring]].astype(np.int64),
        down=new_id[down[ring]].astype(np.int64),
        hop_bytes=hop_bytes,
        step_bytes=step,
        window_bytes=unit_window[flow_unit[f]].astype(np.float64),
        chunk_bytes=chunk,
        per_part=per_part,
    )


def window_bounds(
    w: RingWindow, share: np.ndarray, rem: np.ndarray, active: np.ndarray, scale: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """At the current remainders ``rem`` (flows,): (bound by the feeding hop, bound by the fed hop) (K,) masks of
    the active parts (``active`` (flows,)) at a bound, their leads over the feeding hop (its progress in whole
    chunks where :attr:`RingWindow.chunk_bytes` is set) and the fed hop (K,), in hop bytes, and (K,) the bytes
    the feeding hop has left to its next chunk (inf: not rounded, or the feeding hop done). ``share`` (K,): each
    part's fraction of its hop (normalised, :meth:`WindowSolve.shares`); ``scale`` (K,): a part's remainder to
    connection bytes (:attr:`WindowSolve.scale`; None: 1, every part under ``fraction``)."""
    rk = rem[w.part] if scale is None else rem[w.part] * scale
    P = w.hop_bytes - np.bincount(w.hop, weights=share * rk, minlength=w.n_hops)
    p = w.hop_bytes[w.hop] - rk
    up = w.up[w.hop]
    Pu = P[up]
    to_next = np.full(p.shape[0], np.inf)
    if w.chunk_bytes is not None:  # the replay's rounding: the feeding hop's progress in whole chunks
        c, tol_u = w.chunk_bytes[up], EPS_B * w.hop_bytes[up]
        rounded = (c > 0) & (Pu < w.hop_bytes[up] - tol_u)
        safe = np.where(rounded, c, 1.0)
        floor = np.floor((Pu + tol_u) / safe) * safe
        to_next = np.where(rounded, np.minimum(floor + safe, w.hop_bytes[up]) - Pu, np.inf)
        Pu = np.where(rounded, np.minimum(floor, Pu), Pu)
    lead_up = p - Pu
    lead_dn = p - P[w.down[w.hop]]
    tol = EPS_B * w.hop_bytes[w.hop]
    on = active[w.part]
    bu = on & (lead_up >= w.step_bytes[w.hop] - tol)
    bd = on & (lead_dn >= w.window_bytes[w.hop] - tol)
    return bu, bd, lead_up, lead_dn, to_next


def _targets(
    w: RingWindow, share: np.ndarray, rk: np.ndarray, bu: np.ndarray, bd: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(K,) the rate each part at a bound may not exceed (inf: none) given the parts' rates ``rk`` (K,), and (H,)
    the hops' summed rates."""
    R = np.bincount(w.hop, weights=share * rk, minlength=w.n_hops)
    up_tgt = R[w.up[w.hop]]
    if w.chunk_bytes is not None:  # in chunks: at the bound a part waits for the feeding hop's next chunk
        up_tgt = np.where(w.chunk_bytes[w.up[w.hop]] > 0, 0.0, up_tgt)
    tgt = np.minimum(np.where(bu, up_tgt, np.inf), np.where(bd, R[w.down[w.hop]], np.inf))
    return tgt, R


@dataclass
class WindowSolve:
    """One interval's window state (:func:`window_rates`): the parts' shares of their hops under the interval's
    split, the caps of the last event's fixed point (kept for inspection; each event starts without caps), and the
    counters."""

    window: RingWindow
    share: np.ndarray  # (K,) each part's fraction of its hop, normalised over the hop's paths
    caps: np.ndarray  # (K,) the last event's caps (inf: none)
    solves: int = 0  # max-min solves the fixed points took, summed over the interval
    unsettled: int = 0  # events whose fixed point did not settle in WINDOW_MAX_SOLVES solves
    worst: float = 0.0  # the largest relative residual an unsettled event kept
    # (K,) routing.part_share per_part: a part's remainder and rate to connection bytes, 1 / its share (0 where
    # the share is 0: no bytes) for a per_part part, 1 for a fraction one (None: every part under fraction)
    scale: np.ndarray | None = None

    @staticmethod
    def scales(w: RingWindow, share: np.ndarray) -> np.ndarray | None:
        """(K,) :attr:`scale` for the parts' ``share`` (:meth:`shares`), or None when no part is ``per_part``."""
        if w.per_part is None:
            return None
        inv = np.divide(1.0, share, out=np.zeros_like(share), where=share > 0)
        return np.where(w.per_part, inv, 1.0)

    @staticmethod
    def shares(w: RingWindow, split: np.ndarray) -> np.ndarray:
        """(K,) each part's fraction of its hop under ``split`` (connections, paths): its path's fraction over
        the hop's paths' sum (1 / paths where the row is empty)."""
        f = np.asarray(split, dtype=np.float64)[w.conn, w.path]
        tot = np.bincount(w.hop, weights=f, minlength=w.n_hops)[w.hop]
        n = np.bincount(w.hop, minlength=w.n_hops)[w.hop]
        return np.where(tot > 0, f / np.where(tot > 0, tot, 1.0), 1.0 / n)


def window_rates(
    ws: WindowSolve,
    pos: np.ndarray,
    bu: np.ndarray,
    bd: np.ndarray,
    demand: np.ndarray,
    solve: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """The rates (active flows,) at the window's fixed point: ``solve(demand)`` gives the max-min rates of the
    active flows under per-flow caps ``demand`` (active flows,); ``pos`` (K,) each windowed part's index among the
    active flows (-1: inactive); ``bu``, ``bd`` (K,) the parts at a bound (:func:`window_bounds`).

    Each event starts without caps. Each round solves with the current caps, then: if a part at a bound moves
    faster than its reference hop's summed rate, every such part is capped at that rate (cuts first); otherwise,
    a part held at its cap below its reference's rate has the cap raised to that rate. Cutting before raising
    keeps a ring whose hops are all at a bound from passing a wave of caps round it (27zzk's simultaneous, damped
    moves did). Settled when no part is off by more than :data:`WINDOW_RTOL` of its rate; after
    :data:`WINDOW_MAX_SOLVES` solves the event keeps its solve of smallest residual and counts as unsettled
    (:attr:`WindowSolve.unsettled`, :attr:`WindowSolve.worst`)."""
    w = ws.window
    bound = bu | bd
    caps = np.full(bound.shape[0], np.inf)
    ap = np.flatnonzero(pos >= 0)
    g = ws.scale  # per_part: rates and caps in connection bytes per second (None: 1)

    def run(c: np.ndarray) -> np.ndarray:
        d = demand.copy()
        ca = (
            c[ap] if g is None else np.divide(c[ap], g[ap], out=np.full(ap.shape[0], np.inf), where=g[ap] > 0)
        )
        np.minimum.at(d, pos[ap], ca)
        ws.solves += 1
        return solve(d)

    rates = run(caps)
    best = (np.inf, rates, caps)  # the solve with the smallest residual so far, kept if none settles
    for _ in range(WINDOW_MAX_SOLVES - 1):
        rk = np.where(pos >= 0, rates[np.maximum(pos, 0)], 0.0)
        if g is not None:
            rk = rk * g
        tgt, _ = _targets(w, ws.share, rk, bu, bd)
        big = np.maximum(rk, np.where(np.isfinite(tgt), tgt, 0.0))
        tol = WINDOW_RTOL * big + 1e-300
        fast = bound & (rk > tgt + tol)
        held = bound & np.isfinite(caps) & (rk >= caps - tol) & (caps < tgt - tol)
        if not (fast | held).any():
            ws.caps = caps
            return rates
        move = fast if fast.any() else held  # cuts first; raise held caps only once nothing is too fast
        resid = float(np.max(np.where(fast | held, np.abs(rk - tgt), 0.0) / np.maximum(big, 1e-300)))
        if resid < best[0]:
            best = (resid, rates, caps)
        caps = np.where(move, tgt, caps)
        rates = run(caps)
    resid, rates, caps = best
    ws.unsettled += 1
    ws.worst = max(ws.worst, resid)
    ws.caps = caps
    return rates


def window_event_dt(
    ws: WindowSolve,
    pos: np.ndarray,
    bu: np.ndarray,
    bd: np.ndarray,
    lead_up: np.ndarray,
    lead_dn: np.ndarray,
    to_next: np.ndarray,
    rates: np.ndarray,
    dt: np.ndarray,
) -> None:
    """Lower ``dt`` (per instance, in place) to the time at which a free active part's lead reaches a bound:
    (bound - lead) / (its rate - its reference hop's summed rate), where it gains. Where the upstream bound is
    rounded to chunks (``to_next`` finite, :func:`window_bounds`) that bound stands still until the feeding hop's
    next chunk: a free part reaches it in (bound - lead) / its rate, and a part waiting at it is freed when the
    feeding hop has moved ``to_next`` bytes."""
    w = ws.window
    on = pos >= 0
    if not on.any():
        return
    rk = np.where(on, rates[np.maximum(pos, 0)], 0.0)
    if ws.scale is not None:  # per_part: in connection bytes per second
        rk = rk * ws.scale
    R = np.bincount(w.hop, weights=ws.share * rk, minlength=w.n_hops)
    h = w.hop
    Ru = R[w.up[h]]
    rounded = np.isfinite(to_next)
    with np.errstate(divide="ignore", invalid="ignore"):
        for free, gap, lead in (
            (on & ~bu, np.where(rounded, rk, rk - Ru), w.step_bytes[h] - lead_up),
            (on & ~bd, rk - R[w.down[h]], w.window_bytes[h] - lead_dn),
            (on & bu & rounded, Ru, to_next),  # a waiting part freed by the feeding hop's next chunk
        ):
            t = np.where(free & (gap > 0), np.maximum(lead, 0.0) / gap, np.inf)
            np.minimum.at(dt, w.inst, t)
