"""The departure repair of the lazy kernel: rates kept where a departure frees no bottleneck.

**Why it is exact** (:func:`repair_departures`): by the bottleneck characterisation of max-min fairness
(Bertsekas and Gallager, Data Networks, section 6.5.2, with coefficients and demands): a feasible allocation
is THE max-min fair one iff every flow is at its demand or crosses a saturated link on which no flow has a
higher level. The old rates were max-min fair for the old flows. A link is *changed* when a departed or a
re-filled flow crosses it; the others keep their flows and loads. A flow that crosses no changed link keeps a
bottleneck (its old one: unchanged). A flow on a changed link keeps its rate when it is at its demand or has a
witness: an unchanged link with ``rp.sat`` >= 0 (saturated, no flow above that level) at which its level is
that level; otherwise it is re-filled, its links become changed, and the flows on them are checked again (a
witness may have become changed). Only the changed links that were saturated before the event are scanned: no
other is a flow's bottleneck, and a flow whose bottleneck changed is found on that link. When no flow is left
without one, the re-filled flows are filled (:func:`fill_levels`) on what the others leave, and each must then
be at its demand or at the largest level of a saturated link it crosses (its flows scanned through
``rp.adj_*``). A re-filled flow that is not has a kept flow above it on every saturated link it crosses; in
the max-min allocation those come down, so they join the re-fill (their links changed, the flows on them
checked again) and the repair fills again from the old rates, at most :data:`REPAIR_MAX_ROUNDS` times (then,
or when no flow is found to add, it declines). Comparisons allow :data:`REPAIR_RTOL` (round-off). On an
AllToAll whose flows tie at one level, bottlenecked at both NICs, a completion at that level changes nothing:
every flow of the departed flow's NICs has a witness at its other NIC.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ainet_gym.sim.backends.numba.fill import fill_levels
from ainet_gym.sim.backends.numba.heaps import lh_down, lh_remove, lh_set
from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit
from ainet_gym.sim.backends.numba.settings import REPAIR_MAX_ROUNDS, REPAIR_RTOL

__all__ = [
    "REPAIR_OUTCOMES",
    "RepairScratch",
    "heaps_build",
    "heaps_update",
    "repair_departures",
    "repair_scratch",
]

#: the outcomes :func:`repair_departures` counts in ``RepairScratch.outcome`` (issue-28zq), by column: declined
#: because the witness scan would re-fill more than its limit (``limit``: the share
#: :data:`~ainet_gym.sim.backends.numba.settings.REPAIR_MAX_SHARE` of the restart re-fill) in the first round
#: or in a later one (after a check added flows), because the check after a fill would, because a check found
#: a re-filled flow without a bottleneck but no kept flow to add (round-off beyond ``REPAIR_RTOL``), because
#: :data:`REPAIR_MAX_ROUNDS` fills left one; made with no flow re-filled, with one fill, with more than one
REPAIR_OUTCOMES = (
    "declined_scan_limit_first_round",
    "declined_scan_limit_later_round",
    "declined_check_limit",
    "declined_nothing_to_add",
    "declined_out_of_rounds",
    "made_nothing_refilled",
    "made_one_fill",
    "made_more_fills",
)
N_REPAIR_OUTCOMES = len(REPAIR_OUTCOMES)  # (a module int: a constant to the compiled code)


class RepairScratch(NamedTuple):
    """State and scratch of :func:`repair_departures` for one instance of the lazy kernel
    (:func:`repair_scratch`). ``sat`` is kept from solve to solve: where it is >= 0, the link is saturated
    and no active flow on it has a level above ``sat`` (so a flow on it at that level has the link as a
    bottleneck); -1: not known saturated. Every solve of :func:`resolve_incremental` keeps that true: a fill
    sets it on the saturated links of the flows it filled (the largest level among them: the other flows on
    such a link are below the restart level, so lower), and -1 on the other links of those flows and of the
    departed ones; the links no solve touched keep their flows and rates. Where ``sat`` is set, the flows at
    that level are listed (``top_*``: those the repair's scan reads; a fill lists its flows at the level, a
    repair the flows its scan for ``lmax`` found there, :func:`link_index` every link's from ``sat``)."""

    sat: np.ndarray  # (links,) float64 the largest level on a saturated link, -1: not known saturated
    lmax: np.ndarray  # (links,) float64 the largest level of the active flows on a link (a repair's scan)
    lstamp: np.ndarray  # (links,) int64 the repair whose scan lmax holds
    adj_off: np.ndarray  # (links+1,) int64 CSR offsets of each link's flows (every flow of the instance)
    adj_flow: np.ndarray  # (entries,) int64 the flows on each link
    fmark: np.ndarray  # (flows,) int64 the repair that re-fills the flow
    queue: np.ndarray  # (links,) int64 the links a repair changed, in the order it found them
    # the active flows at each known-saturated link's largest level (``sat``): ``top_flow[adj_off[l] :
    # adj_off[l] + top_n[l]]``, valid where ``sat >= 0``, ``top_n >= 0`` and the link index is built (the
    # repair's scan reads only them, :data:`REPAIR_ONLY_TOP`; with them possibly flows a few ulps below,
    # :func:`top_add`); -1: not known (the scan reads every flow)
    top_n: np.ndarray  # (links,) int64
    top_flow: np.ndarray  # (entries,) int64
    ptop_n: np.ndarray  # (links,) int64 the same for ``lmax`` (a repair's fill), into ``top_*`` when the
    ptop_flow: np.ndarray  # (entries,) int64 repair is made
    # the per-link level heaps (issue-28zi, ``rep_heap``): each link's active flows as a max-heap of their levels
    # in the link's segment of the index (``hk[adj_off[l] : adj_off[l] + hn[l]]`` levels, ``hx`` the slots, their
    # flows ``adj_flow[slot]``; ``hpos`` slot -> position, -1: not in the heap), kept by every solve once the index
    # is built; ``fslot[foff[f] + e - fe_lo[f]]``: flow ``f``'s slot for its entry ``e``
    hk: np.ndarray  # (entries,) float64
    hx: np.ndarray  # (entries,) int64
    hpos: np.ndarray  # (entries,) int64
    hn: np.ndarray  # (links,) int64
    fslot: np.ndarray  # (entries,) int64
    foff: np.ndarray  # (flows,) int64
    rmark: np.ndarray  # (flows,) int64 the repair that read the flow (its reads counted once per solve)
    stk: np.ndarray  # (entries,) int64 the heap walks' stack (a link's segment)
    # (N_REPAIR_OUTCOMES,) int64 the repairs by outcome (:data:`REPAIR_OUTCOMES`), counted over the scratch's life
    outcome: np.ndarray


@njit(cache=True, nogil=True)
def repair_scratch(n_links, n_flows, n_entries):  # pragma: no cover - compiled (callable from Python too)
    """A :class:`RepairScratch` for instances of at most these many links and entries, flows indexed by
    global id below ``n_flows``."""
    i64 = np.int64
    return RepairScratch(
        np.full(n_links, -1.0), np.empty(n_links), np.full(n_links, -1, dtype=i64), np.zeros(n_links + 1, dtype=i64),
        np.empty(max(n_entries, 1), dtype=i64), np.full(n_flows, -1, dtype=i64), np.empty(n_links, dtype=i64),
        np.full(n_links, -1, dtype=i64), np.empty(max(n_entries, 1), dtype=i64), np.full(n_links, -1, dtype=i64),
        np.empty(max(n_entries, 1), dtype=i64), np.empty(max(n_entries, 1)), np.empty(max(n_entries, 1), dtype=i64),
        np.full(max(n_entries, 1), -1, dtype=i64), np.zeros(n_links, dtype=i64), np.empty(max(n_entries, 1), dtype=i64),
        np.zeros(n_flows, dtype=i64), np.full(n_flows, -1, dtype=i64), np.empty(max(n_entries, 1), dtype=i64),
        np.zeros(N_REPAIR_OUTCOMES, dtype=i64),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def link_index(
    rp, f0, f1, fe_lo, fe_hi, e_link, lo, n_links, act, rate, weight, heaps=False
):  # pragma: no cover - compiled
    """The link-major index of the entries of flows ``f0:f1`` (active or not) into ``rp.adj_off`` /
    ``rp.adj_flow`` (links ``lo .. lo + n_links``), and the lists of the active flows at each link's ``rp.sat``
    level (``rp.top_*``: the flows at levels ``rate / weight >= sat (1 - REPAIR_RTOL)``); the entries
    indexed. With ``heaps``, each flow's slots (``rp.fslot`` / ``rp.foff``) and every link's level heap
    (:func:`heaps_build`) too (``None``: the heaps not compiled, as False at run time: issue-31zf2). O(entries)."""
    off = rp.adj_off
    cur = rp.queue
    for j in range(n_links + 1):
        off[j] = 0
    for f in range(f0, f1):
        for e in range(fe_lo[f], fe_hi[f]):
            off[e_link[e] - lo + 1] += 1
    for j in range(n_links):
        off[j + 1] += off[j]
        cur[j] = off[j]
    k = 0
    for f in range(f0, f1):
        rp.foff[f] = k
        for e in range(fe_lo[f], fe_hi[f]):
            j = e_link[e] - lo
            rp.adj_flow[cur[j]] = f
            rp.fslot[k] = cur[j]
            k += 1
            cur[j] += 1
    if heaps is not None and heaps:  # (pruned when None: the level heaps not compiled)
        heaps_build(rp, n_links, act, rate, weight)
    for j in range(n_links):
        if rp.sat[j] < 0.0:
            rp.top_n[j] = -1
            continue
        top = rp.sat[j] * (1.0 - REPAIR_RTOL)
        n = 0
        for x in range(off[j], off[j + 1]):
            g = rp.adj_flow[x]
            if act[g] and rate[g] / weight[g] >= top:
                rp.top_flow[off[j] + n] = g
                n += 1
        rp.top_n[j] = n
    return 2 * off[n_links]


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def heap_build(rp, j, act, rate, weight):  # pragma: no cover - compiled
    """Link ``j``'s level heap (:class:`RepairScratch` ``hk`` ...) built anew from the active flows on it at
    their levels ``rate / weight`` (the link index built). The slots read."""
    off, adj, hk, hx, hpos = rp.adj_off, rp.adj_flow, rp.hk, rp.hx, rp.hpos
    b = off[j]
    n = 0
    for x in range(b, off[j + 1]):
        g = adj[x]
        if act[g]:
            hk[b + n] = rate[g] / weight[g]
            hx[b + n] = x
            hpos[x] = b + n
            n += 1
        else:
            hpos[x] = -1
    for i in range(n // 2 - 1, -1, -1):
        lh_down(hk, hx, hpos, b, n, i)
    rp.hn[j] = n
    return off[j + 1] - b


@njit(cache=True, nogil=True)
def heaps_build(rp, n_links, act, rate, weight, kept_only=False):  # pragma: no cover - compiled
    """Every link's level heap built anew (:func:`heap_build`), or with ``kept_only`` those kept now
    (``rp.hn >= 0``; the others stay not kept, -1). The slots read."""
    work = 0
    for j in range(n_links):
        if not kept_only or rp.hn[j] >= 0:
            work += heap_build(rp, j, act, rate, weight)
    return work


@njit(cache=True, nogil=True)
def heaps_update(
    rp, n_gone, gone, n_re, refill, act, rate, weight, fe_lo, fe_hi, e_link, lo, capacity, load
):  # pragma: no cover - compiled
    """The level heaps after a solve: the departed flows ``gone[:n_gone]`` out of their links' kept heaps,
    then the filled flows ``refill[:n_re]`` (re-filled or arrived; a flow that left and joined again is in
    both) keyed at their new levels. Only the heaps of saturated links are kept (the repair reads no other):
    a link these flows cross that is not saturated now (``load``) drops its heap (``rp.hn`` -1; built again,
    its flows read, when a repair reads it: :func:`_kept_max`). The levels read (work)."""
    off, hk, hx, hpos, hn, fslot, foff = rp.adj_off, rp.hk, rp.hx, rp.hpos, rp.hn, rp.fslot, rp.foff
    tol = REPAIR_RTOL
    work = 0
    for k in range(n_gone + n_re):
        f = gone[k] if k < n_gone else refill[k - n_gone]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            if hn[lk] >= 0:
                c = capacity[lo + lk]
                if not (c < np.inf and c - load[lk] <= tol * c):
                    hn[lk] = -1
    for k in range(n_gone):
        f = gone[k]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            if hn[lk] >= 0:
                hn[lk], w = lh_remove(hk, hx, hpos, off[lk], hn[lk], fslot[foff[f] + e - fe_lo[f]])
                work += w
    for k in range(n_re):
        f = refill[k]
        if not act[f]:
            continue
        lv = rate[f] / weight[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            if hn[lk] >= 0:
                hn[lk], w = lh_set(hk, hx, hpos, off[lk], hn[lk], fslot[foff[f] + e - fe_lo[f]], lv)
                work += w
    return work


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def top_add(tf, base, n, g, lv, m):  # pragma: no cover - compiled
    """Flow ``g`` at level ``lv`` offered to a link's list of the flows at its largest level ``m`` so far
    (``tf[base : base + n]``): appended when ``lv >= m (1 - REPAIR_RTOL)``; when ``lv (1 - REPAIR_RTOL)``
    exceeds ``m``, every listed flow (at most ``m``) is below the new level and the list restarts with ``g``,
    unread. A rise within round-off keeps the list (flows a few ulps below the new level stay listed: the
    scan checks each listed flow's level). ``(n, m)``."""
    if lv > m:
        if lv * (1.0 - REPAIR_RTOL) > m:
            n = 0
        tf[base + n] = g
        return n + 1, lv
    if lv >= m * (1.0 - REPAIR_RTOL):
        tf[base + n] = g
        return n + 1, m
    return n, m


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _repair_queue(f, tick, fe_lo, fe_hi, e_link, lo, rstamp, q, qn):  # pragma: no cover - compiled
    """:func:`repair_departures`: flow ``f``'s links are changed (stamped ``tick`` in ``rstamp``, queued once
    in ``q`` after its ``qn``). The queue's length."""
    for e in range(fe_lo[f], fe_hi[f]):
        lk = e_link[e] - lo
        if rstamp[lk] != tick:
            rstamp[lk] = tick
            q[qn] = lk
            qn += 1
    return qn


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _repair_scan(
    qi, qn, n_r, work, seen, tick, limit, only_top, act, rate, fe_lo, fe_hi, e_link, capacity, lo, dcap, weight,
    rstamp, load, refill, old_rate, rp, once,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`repair_departures`' scan of the changed links queued from ``qi`` on: on each that was saturated
    before the event, every active flow not yet re-filled keeps its rate when it is at its demand or has a
    witness (an unchanged link with ``rp.sat`` >= 0 at whose level it is); otherwise it is re-filled
    (``refill``, ``old_rate``, ``rp.fmark``) and its links queued. ``(qi, qn, n_r, work, seen, within
    limit)``: False when more than ``limit`` flows would be re-filled (the repair declines). ``once``: a flow's
    reads counted once per solve (:func:`_count_read`), and not when it is re-filled."""
    tol = REPAIR_RTOL
    q, off, adj, sat, fmark = rp.queue, rp.adj_off, rp.adj_flow, rp.sat, rp.fmark
    top_n, top_flow = rp.top_n, rp.top_flow
    while qi < qn:
        lk = q[qi]
        qi += 1
        c = capacity[lo + lk]
        if not (
            c < np.inf and c - load[lk] <= tol * c
        ):  # not saturated before the event: no flow's bottleneck
            continue
        # the link's largest level before the event, if known: only the flows at it have the link as a
        # bottleneck (:data:`REPAIR_ONLY_TOP`); a flow below it has another bottleneck, and if that one changed
        # too, the flow is found when that link is scanned (it is queued: every changed link is)
        top = sat[lk] * (1.0 - tol) if only_top and sat[lk] >= 0.0 else -np.inf
        # (where the flows at that level are listed, only they are read: the others would be skipped below)
        lst, x0, x1 = adj, off[lk], off[lk + 1]
        if only_top and sat[lk] >= 0.0 and top_n[lk] >= 0:
            lst, x1 = top_flow, x0 + top_n[lk]
        for x in range(x0, x1):
            g = lst[x]
            work += 1
            if not act[g] or fmark[g] == tick:
                continue
            seen += _count_read(rp, g, tick, once)
            r = rate[g]
            lv = r / weight[g]
            if lv < top:
                continue
            ok = r >= dcap[g] * (1.0 - tol)
            if not ok:
                for e in range(fe_lo[g], fe_hi[g]):
                    l2 = e_link[e] - lo
                    if rstamp[l2] == tick:
                        continue
                    s2 = sat[l2]
                    if s2 >= 0.0 and lv >= s2 * (1.0 - tol):
                        ok = True
                        break
                work += fe_hi[g] - fe_lo[g]
            if ok:
                continue
            if n_r >= limit:
                return qi, qn, n_r, work, seen, False
            if once:  # (counted as re-filled)
                seen -= 1
            fmark[g] = tick
            refill[n_r] = g
            old_rate[n_r] = r
            n_r += 1
            qn = _repair_queue(g, tick, fe_lo, fe_hi, e_link, lo, rstamp, q, qn)
    return qi, qn, n_r, work, seen, True


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _repair_residuals(
    qn, n_gone, n_r, gone, refill, old_rate, rate, fe_lo, fe_hi, e_link, e_coef, capacity, lo, load, resid, q,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`repair_departures`: the residuals of the changed links ``q[:qn]`` that the re-filled flows are
    filled on: their capacity less their loads, plus what the departed flows (at ``rate``) and the
    ``n_r`` re-filled ones (at ``old_rate``) used. The entries read (work)."""
    work = 0
    for k in range(qn):
        lk = q[k]
        c = capacity[lo + lk]
        resid[lk] = c - load[lk] if c < np.inf else np.inf
    for k in range(n_gone + n_r):
        f = gone[k] if k < n_gone else refill[k - n_gone]
        r = rate[f] if k < n_gone else old_rate[k - n_gone]
        work += fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            use = e_coef[e] * r
            if np.isfinite(use):
                resid[e_link[e] - lo] += use
    return work


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _repair_link_scan(lk, act, rate, weight, rp):  # pragma: no cover - compiled
    """:func:`_repair_link_max` on link ``lk`` the long way: every active flow on it read, its largest level
    into ``rp.lmax`` and the flows at it into ``rp.ptop_*``. The active flows read."""
    off, adj = rp.adj_off, rp.adj_flow
    m = -np.inf
    n = 0
    seen = 0
    for x in range(off[lk], off[lk + 1]):
        g = adj[x]
        if act[g]:
            seen += 1
            n, m = top_add(rp.ptop_flow, off[lk], n, g, rate[g] / weight[g], m)
    rp.ptop_n[lk] = n
    rp.lmax[lk] = m
    return seen


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _sort_ids(a, base, n):  # pragma: no cover - compiled
    """``a[base : base + n]`` sorted in place (insertion sort: the lists are short and nearly sorted). The
    moves made."""
    moves = 0
    for i in range(base + 1, base + n):
        x = a[i]
        j = i - 1
        while j >= base and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
            moves += 1
        a[j + 1] = x
    return moves


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _refill_link_max(
    n_r, refill, rate, weight, fe_lo, fe_hi, e_link, lo, ltick, listed, rp
):  # pragma: no cover - compiled
    """The re-filled flows ``refill[:n_r]`` at their new levels on the links stamped ``ltick`` (``rp.lstamp``):
    each link's largest level ``rp.lmax`` raised to theirs; with ``listed`` (a constant at each call: the
    branch folds away once inlined) the flows at it listed in ``rp.ptop_*`` too (:func:`top_add`). The
    entries read."""
    off, lmax, lstamp = rp.adj_off, rp.lmax, rp.lstamp
    work = 0
    for k in range(n_r):
        g = refill[k]
        lv = rate[g] / weight[g]
        work += fe_hi[g] - fe_lo[g]
        for e in range(fe_lo[g], fe_hi[g]):
            lk = e_link[e] - lo
            if lstamp[lk] != ltick:
                continue
            if listed:
                rp.ptop_n[lk], lmax[lk] = top_add(rp.ptop_flow, off[lk], rp.ptop_n[lk], g, lv, lmax[lk])
            elif lv > lmax[lk]:
                lmax[lk] = lv
    return work


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _repair_link_max(
    qn, tick, ltick, only_top, n_r, refill, act, rate, weight, fe_lo, fe_hi, e_link, capacity, lo, resid, rp,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`repair_departures` after a fill: the largest level on each saturated changed link into
    ``rp.lmax``, stamped ``ltick``, and the flows at it into ``rp.ptop_*``. ``(work, active flows read)``.

    With ``only_top``, a link with a list (``rp.top_*``: before the event, every active flow on it at or
    above ``rp.sat (1 - REPAIR_RTOL)`` is listed) takes its level from the list's kept flows (rates unchanged)
    and the re-filled flows on it at their new levels (:func:`top_add`, as the long scan would): when the
    largest of those is at least the old ``sat``, the kept flows not listed (below ``sat (1 - REPAIR_RTOL)``)
    are below it beyond round-off, so it is the link's largest level and every flow at it is listed.
    Otherwise (a kept flow not listed may be within round-off of the level), and on a link without a list,
    every active flow on the link is read (:func:`_repair_link_scan`). A list so taken is sorted by flow id,
    the order of the long scan (the link-major index): the next scan re-fills in list order, and the order
    of the re-filled flows is the order of the fill's sums, so the rates stay bit for bit the long scan's."""
    tol = REPAIR_RTOL
    q, off, lmax, lstamp, fmark = rp.queue, rp.adj_off, rp.lmax, rp.lstamp, rp.fmark
    work = 0
    seen = 0
    for k in range(qn):  # the listed kept flows (their links stamped ltick; the others scanned below)
        lk = q[k]
        c = capacity[lo + lk]
        if not (only_top and c < np.inf and resid[lk] <= tol * c and rp.sat[lk] >= 0.0 and rp.top_n[lk] >= 0):
            continue
        m = -np.inf
        n = 0
        for x in range(off[lk], off[lk] + rp.top_n[lk]):
            g = rp.top_flow[x]
            if act[g] and fmark[g] != tick:
                seen += 1
                n, m = top_add(rp.ptop_flow, off[lk], n, g, rate[g] / weight[g], m)
        work += rp.top_n[lk]
        rp.ptop_n[lk] = n
        lmax[lk] = m
        lstamp[lk] = ltick
    work += _refill_link_max(n_r, refill, rate, weight, fe_lo, fe_hi, e_link, lo, ltick, True, rp)
    for k in range(qn):
        lk = q[k]
        c = capacity[lo + lk]
        if c < np.inf and resid[lk] <= tol * c:
            if lstamp[lk] != ltick or lmax[lk] < rp.sat[lk]:
                seen += _repair_link_scan(lk, act, rate, weight, rp)
                work += off[lk + 1] - off[lk]
            else:
                work += _sort_ids(rp.ptop_flow, off[lk], rp.ptop_n[lk])
            lstamp[lk] = ltick
    return work, seen


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _count_read(rp, g, tick, once):  # pragma: no cover - compiled
    """1 when the repair's read of active flow ``g`` (not re-filled) counts: every read, or with ``once`` the
    first of the solve (``rp.rmark``)."""
    if not once:
        return 1
    if rp.rmark[g] == tick:
        return 0
    rp.rmark[g] = tick
    return 1


# The three walks of a link's level heap (:func:`_kept_max`, :func:`_heap_above`, :func:`_check_link_heap`) are one
# pruned depth-first walk: the stack ``rp.stk[b:]`` (b the link's row), a node popped, skipped with its subtree
# below a level (a node's subtree is at most its own level), else visited and its children pushed
# (:func:`_walk_children`). The pop with its prune (:func:`_walk_next`) and the push are these shared steps; what
# differs is the visit and its prune level (a running maximum that rises as the walk goes; a fixed level, strict or
# not; a fixed level whose visit re-fills the flow and may end the walk with a rollback), written in each walk: one
# walk with a visit by flag would pass the union of the three visits' arguments (17 for :func:`_check_link_heap`
# alone) and branch at every node, or take the visit as a first-class function, which numba calls through a pointer
# and does not inline (issue-31zo2).
@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _walk_next(stk, b, sp, hk, hx, adj, t, strict):  # pragma: no cover - compiled
    """The next node of a walk of a level heap (keys ``hk[b:]``, flows ``adj[hx[b:]]``) whose stack is
    ``stk[b : b + sp]`` (the root alone at the start: ``sp`` 1, ``stk[b]`` 0): the nodes popped below level
    ``t`` (at ``t`` too when ``strict``) skipped with their subtrees. ``(sp, slot, flow, nodes popped)``;
    slot and flow -1 when the stack ran out."""
    v = 0
    while sp > 0:
        sp -= 1
        i = stk[b + sp]
        v += 1
        k = hk[b + i]
        if k < t or (strict and k == t):
            continue
        return sp, i, adj[hx[b + i]], v
    return sp, -1, -1, v


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _walk_children(stk, b, sp, i, n):  # pragma: no cover - compiled
    """Push the children of node ``i`` of a heap of ``n`` nodes (``2i+1``, then ``2i+2``: the right one is
    visited first) on the walk's stack ``stk[b : b + sp]``; the new depth."""
    c = 2 * i + 1
    if c < n:
        stk[b + sp] = c
        sp += 1
        if c + 1 < n:
            stk[b + sp] = c + 1
            sp += 1
    return sp


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _kept_max(lk, tick, act, rate, weight, rp):  # pragma: no cover - compiled
    """The largest level of the kept active flows on link ``lk`` (not re-filled: ``rp.fmark != tick``) from
    its level heap: a walk from the root that stops at the first kept flow of each path (the levels below it
    are at most its own) and at nodes at most the largest found; the departed and re-filled flows (still at
    their old levels) are passed through; a heap not kept (``rp.hn`` -1) is built first. ``(level, heap nodes
    visited, flows read: counted once per solve)``."""
    b = rp.adj_off[lk]
    hk, hx, adj, stk, fmark = rp.hk, rp.hx, rp.adj_flow, rp.stk, rp.fmark
    m = -np.inf
    vis = 0
    reads = 0
    if rp.hn[lk] < 0:  # not kept: built from the link's flows (each active one read; the re-filled ones at
        # their new levels, any key will do for them: the walks pass them through)
        vis += heap_build(rp, lk, act, rate, weight)
        for x in range(b, b + rp.hn[lk]):
            g = adj[hx[x]]
            if fmark[g] != tick:
                reads += _count_read(rp, g, tick, True)
    n = rp.hn[lk]
    if n == 0:
        return m, vis, reads
    stk[b] = 0
    sp = 1
    while True:
        sp, i, g, v = _walk_next(stk, b, sp, hk, hx, adj, m, True)
        vis += v
        if i < 0:
            break
        if act[g] and fmark[g] != tick:
            m = hk[b + i]
            continue
        sp = _walk_children(stk, b, sp, i, n)
    return m, vis, reads


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _heap_above(lk, t, strict, rp, out, base, n_out):  # pragma: no cover - compiled
    """The slots of the heap nodes of link ``lk`` at levels ``>= t`` (``> t`` when ``strict``), appended to
    ``out[base + n_out :]`` as their flows (every kind: the caller picks). ``(n_out, nodes visited)``."""
    b, n = rp.adj_off[lk], rp.hn[lk]
    hk, hx, adj, stk = rp.hk, rp.hx, rp.adj_flow, rp.stk
    if n == 0:
        return n_out, 0
    stk[b] = 0
    sp = 1
    vis = 0
    while True:
        sp, i, g, v = _walk_next(stk, b, sp, hk, hx, adj, t, strict)
        vis += v
        if i < 0:
            break
        out[base + n_out] = g
        n_out += 1
        sp = _walk_children(stk, b, sp, i, n)
    return n_out, vis


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _repair_link_max_heap(
    qn, tick, ltick, n_r, refill, act, rate, weight, fe_lo, fe_hi, e_link, capacity, lo, resid, rp,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`_repair_link_max` from the level heaps (``rep_heap``): on each saturated changed link, the
    largest level of its kept flows (:func:`_kept_max`) and of the re-filled ones at their new levels into
    ``rp.lmax`` (stamped ``ltick``), then every flow at or above ``lmax (1 - REPAIR_RTOL)`` listed in
    ``rp.ptop_*`` (the kept ones from the heap, :func:`_heap_above`, in the walk's order: not sorted, the rates
    are exact in any order and the long scan's bits are not kept anyway). Only the kept flows at the level are
    read. ``(work, kept flows read, counted once per solve)``."""
    tol = REPAIR_RTOL
    q, off, lmax, lstamp, fmark = rp.queue, rp.adj_off, rp.lmax, rp.lstamp, rp.fmark
    work = 0
    seen = 0
    for k in range(qn):
        lk = q[k]
        c = capacity[lo + lk]
        if c < np.inf and resid[lk] <= tol * c:
            lmax[lk], vis, rd = _kept_max(lk, tick, act, rate, weight, rp)
            work += vis
            seen += rd
            lstamp[lk] = ltick
    work += _refill_link_max(n_r, refill, rate, weight, fe_lo, fe_hi, e_link, lo, ltick, False, rp)
    for k in range(qn):  # the kept flows at the level
        lk = q[k]
        if lstamp[lk] != ltick:
            continue
        b = off[lk]
        n_all, vis = _heap_above(lk, lmax[lk] * (1.0 - tol), False, rp, rp.ptop_flow, b, 0)
        work += vis
        n = 0
        for x in range(b, b + n_all):
            g = rp.ptop_flow[x]
            if act[g] and fmark[g] != tick:
                seen += _count_read(rp, g, tick, True)
                rp.ptop_flow[b + n] = g
                n += 1
        rp.ptop_n[lk] = n
    for k in range(n_r):  # and the re-filled ones
        g = refill[k]
        lv = rate[g] / weight[g]
        for e in range(fe_lo[g], fe_hi[g]):
            lk = e_link[e] - lo
            if lstamp[lk] == ltick and lv >= lmax[lk] * (1.0 - tol):
                rp.ptop_flow[off[lk] + rp.ptop_n[lk]] = g
                rp.ptop_n[lk] += 1
    return work, seen


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _check_link_heap(
    l2, t, n_r, n_r0, qn, tick, limit, act, rate, fe_lo, fe_hi, e_link, lo, rstamp, refill, old_rate, rp,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`_repair_check` on link ``l2`` from its level heap: every kept active flow above level ``t``
    joins the re-fill (its links queued); the walk stops below ``t`` (the levels under a node are at most its
    own; the re-filled and departed flows are at their old levels, passed through). ``(n_r, qn, nodes
    visited, the change of the read count, within limit)``: within limit False when more than ``limit``
    flows would be re-filled (the old rates of the first ``n_r0`` put back)."""
    b, n = rp.adj_off[l2], rp.hn[l2]
    hk, hx, adj, stk, fmark = rp.hk, rp.hx, rp.adj_flow, rp.stk, rp.fmark
    if n == 0:
        return n_r, qn, 0, 0, True
    stk[b] = 0
    sp = 1
    vis = 0
    dseen = 0
    while True:
        sp, i, h, v = _walk_next(stk, b, sp, hk, hx, adj, t, True)
        vis += v
        if i < 0:
            break
        if act[h] and fmark[h] != tick:
            if n_r >= limit:
                for j in range(n_r0):
                    rate[refill[j]] = old_rate[j]
                return n_r, qn, vis, dseen, False
            if rp.rmark[h] == tick:  # (read before, counted: now counted as re-filled)
                dseen -= 1
            fmark[h] = tick
            refill[n_r] = h
            old_rate[n_r] = rate[h]
            n_r += 1
            qn = _repair_queue(h, tick, fe_lo, fe_hi, e_link, lo, rstamp, rp.queue, qn)
        sp = _walk_children(stk, b, sp, i, n)
    return n_r, qn, vis, dseen, True


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _repair_check(
    n_r, qn, work, seen, tick, ltick, limit, act, rate, fe_lo, fe_hi, e_link, lo, dcap, weight, rstamp, refill,
    old_rate, rp, heap,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`repair_departures`' check after a fill: every re-filled flow must be at its demand or at the
    largest level of a saturated link it crosses (``rp.lmax`` stamped ``ltick``). A flow that is not has a
    kept flow above it on every such link: those must come down, so they join the re-fill (their links
    queued). ``(flows without a bottleneck, n_r, qn, work, seen, within limit)``: False when more than
    ``limit`` flows would be re-filled (the old rates put back; the repair declines). ``heap``: each such
    link's kept flows above the level found in its level heap (:func:`_check_link_heap`), not by a scan
    (``None``: the heaps not compiled, as False at run time: issue-31zf2)."""
    tol = REPAIR_RTOL
    q, off, adj, fmark, lmax, lstamp = rp.queue, rp.adj_off, rp.adj_flow, rp.fmark, rp.lmax, rp.lstamp
    n_bad = 0
    n_r0 = n_r
    for k in range(n_r0):
        g = refill[k]
        r = rate[g]
        work += fe_hi[g] - fe_lo[g]
        if r >= dcap[g] * (1.0 - tol):
            continue
        lv = r / weight[g]
        ok = False
        for e in range(fe_lo[g], fe_hi[g]):
            l2 = e_link[e] - lo
            if lstamp[l2] == ltick and lv >= lmax[l2] * (1.0 - tol):
                ok = True
                break
        if ok:
            continue
        n_bad += 1
        for e in range(fe_lo[g], fe_hi[g]):
            l2 = e_link[e] - lo
            if lstamp[l2] != ltick:
                continue
            if heap is not None and heap:  # the kept flows above lv from its level heap (pruned when None)
                n_r, qn, vis, ds, ok = _check_link_heap(l2, lv * (1.0 + tol), n_r, n_r0, qn, tick, limit, act, rate,
                                                    fe_lo, fe_hi, e_link, lo, rstamp, refill, old_rate, rp)  # fmt: skip
                work += vis
                seen += ds
                if not ok:
                    return n_bad, n_r, qn, work, seen, False
                continue
            for x in range(off[l2], off[l2 + 1]):
                h = adj[x]
                if not act[h]:
                    continue
                seen += 1
                if fmark[h] == tick or rate[h] / weight[h] <= lv * (1.0 + tol):
                    continue
                if n_r >= limit:
                    for j in range(n_r0):
                        rate[refill[j]] = old_rate[j]
                    return n_bad, n_r, qn, work, seen, False
                fmark[h] = tick
                refill[n_r] = h
                old_rate[n_r] = rate[h]
                n_r += 1
                qn = _repair_queue(h, tick, fe_lo, fe_hi, e_link, lo, rstamp, q, qn)
            work += off[l2 + 1] - off[l2]
    return n_bad, n_r, qn, work, seen, True


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _repair_start(gone, n_gone, tick, fe_lo, fe_hi, e_link, lo, rstamp, q):  # pragma: no cover - compiled
    """The links of the departed flows ``gone[:n_gone]`` queued as changed (:func:`_repair_queue`, stamp
    ``tick``). ``(links queued, work: the departed flows' entries)``."""
    qn = 0
    work = 0
    for k in range(n_gone):
        f = gone[k]
        work += fe_hi[f] - fe_lo[f]
        qn = _repair_queue(f, tick, fe_lo, fe_hi, e_link, lo, rstamp, q, qn)
    return qn, work


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _repair_commit(qn, n_r, ltick, capacity, lo, resid, load, rp):  # pragma: no cover - compiled
    """A repair made: the loads and bottleneck levels of the ``qn`` changed links (``rp.queue``) from the
    residuals of the fill (``ltick``: its scan's stamp; ``n_r`` flows re-filled, 0: none, every one of them
    left unsaturated), and the flows at each saturated link's level listed. The work (the flows listed)."""
    q, sat, lmax, lstamp = rp.queue, rp.sat, rp.lmax, rp.lstamp
    work = 0
    for k in range(qn):
        lk = q[k]
        c = capacity[lo + lk]
        load[lk] = c - resid[lk] if c < np.inf else 0.0
        sat[lk] = lmax[lk] if n_r > 0 and lstamp[lk] == ltick else -1.0
        if sat[lk] >= 0.0:  # (the flows at that level, listed after the fill)
            n = rp.ptop_n[lk]
            b = rp.adj_off[lk]
            for i in range(b, b + n):  # (a loop: a slice is a view, which takes reference counts)
                rp.top_flow[i] = rp.ptop_flow[i]
            rp.top_n[lk] = n
            work += n
    return work


@njit(cache=True, nogil=True)
def repair_departures(
    act, rate, gone, n_gone, fe_lo, fe_hi, e_link, e_coef, capacity, lo, dcap, weight, resid, rstamp, load,
    rstate, refill, old_rate, out_flow, out_level, fs, rp, limit, only_top=True, heap=False,
):  # fmt: skip  # pragma: no cover - compiled
    """The max-min rates after an event at which flows only left (``gone[:n_gone]``), by re-filling only the
    flows that lost every bottleneck, if they are at most ``limit`` (exact: the module docstring);
    ``(n_r, work)`` with ``n_r`` the flows re-filled (``refill[:n_r]``, previous rates ``old_rate[:n_r]``, new
    freeze order ``out_flow[:n_r]`` / ``out_level[:n_r]``), or ``n_r = -1``: declined, ``rate``, ``load`` and
    ``rp.sat`` as they were (the caller re-fills from the restart level). ``rstate[3]`` (the solve's stamp)
    is advanced; ``rp.fmark == rstate[3]`` marks the re-filled flows; ``rstate[11]`` / ``rstate[12]`` count
    the repairs made / declined, ``rstate[13]`` the active flows they read (visits: the flows on the changed
    saturated links checked for a witness, and those scanned for a link's largest level after the fill);
    ``rp.outcome`` counts each repair by outcome, why it declined or how it was made (:data:`REPAIR_OUTCOMES`).

    The steps, in order on one set of scratch arrays (each compiled into the repair, ``forceinline``): the
    changed links queued (:func:`_repair_start`), the scan of the changed links (:func:`_repair_scan`), the
    residuals to fill on (:func:`_repair_residuals`), the fill, the saturated links' largest levels
    (:func:`_repair_link_max`), the check after the fill (:func:`_repair_check`; any of these may decline)
    and the changed links' loads and levels (:func:`_repair_commit`). ``heap`` (issue-28zi): the largest
    levels and the check read the per-link level heaps (``rp.hk`` ..., kept by the caller:
    :func:`heaps_update`) instead of every flow on a link (:func:`_repair_link_max_heap`,
    :func:`_check_link_heap`), and ``rstate[13]`` counts each flow read once per solve and not at all when it
    is re-filled (it counts as re-filled). ``heap`` ``None`` (the lazy kernel's default,
    :data:`~ainet_gym.sim.backends.numba.incremental.LEVEL_HEAPS`): as False at run time, and the heaps' steps are
    not compiled: numba prunes each branch on ``heap is not None`` for a ``None``-typed argument before typing
    (issue-31zf2).

    Long because its rounds share one repair's state (the queue, the counts, the outcome) in locals: every
    step is a helper above, what is left here is their order and the ways out.
    """
    q = rp.queue
    once = heap is not None and heap  # (a flow's reads counted once per solve: with the level heaps)
    rstate[3] += 1
    tick = rstate[3]
    qn, work = _repair_start(gone, n_gone, tick, fe_lo, fe_hi, e_link, lo, rstamp, q)
    seen = 0  # active flows read (visits; rstate[13])
    n_r = 0
    qi = 0
    ltick = -1
    ok = True
    why = 0  # the outcome's column (REPAIR_OUTCOMES)
    n_fills = 0
    for rnd in range(REPAIR_MAX_ROUNDS + 1):
        qi, qn, n_r, work, seen, ok = _repair_scan(qi, qn, n_r, work, seen, tick, limit, only_top, act, rate, fe_lo,
                                                   fe_hi, e_link, capacity, lo, dcap, weight, rstamp, load, refill,
                                                   old_rate, rp, once)  # fmt: skip
        if not ok:
            why = 0 if rnd == 0 else 1
            break
        if n_r == 0:
            break
        # the re-filled flows on what the others leave
        work += _repair_residuals(qn, n_gone, n_r, gone, refill, old_rate, rate, fe_lo, fe_hi, e_link, e_coef, capacity,
                                  lo, load, resid, q)  # fmt: skip
        work += fill_levels(refill, n_r, fe_lo, fe_hi, e_link, e_coef, weight, dcap, resid, rate, out_flow,
                            out_level, fs, rstate[4], lo)  # fmt: skip
        rstate[4] += 1
        n_fills += 1
        ltick = tick * (REPAIR_MAX_ROUNDS + 1) + rnd
        if heap is not None and heap:  # (pruned when None)
            w2, s2 = _repair_link_max_heap(qn, tick, ltick, n_r, refill, act, rate, weight, fe_lo, fe_hi, e_link,
                                           capacity, lo, resid, rp)  # fmt: skip
        else:
            w2, s2 = _repair_link_max(qn, tick, ltick, only_top, n_r, refill, act, rate, weight, fe_lo, fe_hi, e_link,
                                      capacity, lo, resid, rp)  # fmt: skip
        work += w2
        seen += s2
        n_r0 = n_r
        n_bad, n_r, qn, work, seen, ok = _repair_check(n_r, qn, work, seen, tick, ltick, limit, act, rate, fe_lo,
                                                       fe_hi, e_link, lo, dcap, weight, rstamp, refill, old_rate, rp,
                                                       heap)  # fmt: skip
        if not ok:
            why = 2
            break
        if n_bad == 0:
            break
        for j in range(n_r0):  # the old rates back: the next round fills the larger set from them
            rate[refill[j]] = old_rate[j]
        if n_r == n_r0 or rnd == REPAIR_MAX_ROUNDS:  # (nothing to add: round-off beyond REPAIR_RTOL)
            why = 3 if n_r == n_r0 else 4
            ok = False
            break
    if not ok:  # declined: the rates as they were (the caller re-fills from the restart level)
        if heap is not None and heap:  # (a heap built meanwhile keyed re-filled flows at levels now undone)
            for k in range(qn):
                rp.hn[q[k]] = -1
        rstate[12] += 1
        rstate[13] += seen
        rp.outcome[why] += 1
        return -1, work
    if n_r == 0:  # nothing re-filled: the changed links' residuals are the departed flows' uses back
        _repair_residuals(qn, n_gone, 0, gone, refill, old_rate, rate, fe_lo, fe_hi, e_link, e_coef, capacity, lo,
                          load, resid, q)  # fmt: skip
    work += _repair_commit(qn, n_r, ltick, capacity, lo, resid, load, rp) + qn
    rstate[11] += 1
    rstate[13] += seen
    rp.outcome[5 if n_r == 0 else (6 if n_fills == 1 else 7)] += 1
    return n_r, work
