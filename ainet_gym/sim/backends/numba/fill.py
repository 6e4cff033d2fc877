"""Sequential progressive filling by levels (exact max-min fair rates), and its parallel start."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ainet_gym.sim.backends.numba.heaps import heap_pop, heap_push
from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit
from ainet_gym.sim.backends.numba.parallel import ParallelLinks, ParallelRows, parallel_rule

__all__ = [
    "FillScratch",
    "GroupStore",
    "fill_levels",
    "fill_parallel",
    "fill_scratch",
    "solve_fill",
    "solve_fill_blocks",
]

# ----------------------------------------------------------------------------------------------------------
# progressive filling on a subset of flows (the compiled allocator; the event loop's incremental re-solve)
# ----------------------------------------------------------------------------------------------------------


class GroupStore(NamedTuple):
    """The kept-group fill's store (issue-28zn, :func:`~ainet_gym.sim.backends.numba.groupfill.group_fill_kept`):
    groups of flows, their (group, link) pairs and the pairs' member lists, kept from fill to fill. Group
    ids run from ``st[0]`` (the store's base: older ids are void) to ``st[1]``; group ``id`` sits at
    ``id - st[0]``. Pairs and lists are bump-allocated (``st[2]``, ``st[3]``) and the store starts over
    (base moved past every id) when they run out or the flows' entries may have changed
    (:func:`~ainet_gym.sim.backends.numba.groupfill.group_store_reset`)."""

    st: np.ndarray  # (16,) int64 base id, next id, pair top, pool top, then counters (groupfill.KEEP_STATS)
    fgrp: np.ndarray  # (flows,) int64 each flow's group id (-1: none)
    fpl: np.ndarray  # (flows,) int64 where its entries' pairs start in ``pool``
    fa: np.ndarray  # (flows,) int64 its local index in the fill running (-1: not in it)
    gplo: np.ndarray  # (flows+1,) int64 each group's first pair
    gphi: np.ndarray  # (flows+1,) int64 one past its last pair
    gmlo: np.ndarray  # (flows+1,) int64 where its members start in ``pool``
    gsz: np.ndarray  # (flows+1,) int64 its members (-1: void, never intact again)
    gcnt: np.ndarray  # (flows+1,) int64 its members in the fill running
    gstp: np.ndarray  # (flows+1,) int64 the fill that last counted it
    gloc: np.ndarray  # (flows+1,) int64 its local group in that fill (-1: not checked, -2: not intact)
    plink: np.ndarray  # (pairs,) int64 each pair's link (row of ``resid``)
    pg: np.ndarray  # (pairs,) int64 its group (index ``id - base``)
    pm0: np.ndarray  # (pairs,) int64 its members
    poff: np.ndarray  # (pairs,) int64 where its member list starts in ``pool``
    pn0: np.ndarray  # (pairs,) float64 its members' sum of coefficient x weight
    pm: np.ndarray  # (pairs,) int64 its unfrozen members in the fill running
    pn: np.ndarray  # (pairs,) float64 their sum
    prow: np.ndarray  # (pairs,) int64 its link's row in the fill running
    pool: np.ndarray  # (ints,) int64 member lists of groups and pairs, each member's entries' pairs
    fk: np.ndarray  # (flows+1,) float64 the rebuilt flows' keys
    glen: np.ndarray  # (flows+1,) int64 the length of each group's member list (members that left stay in it)
    plen: np.ndarray  # (pairs,) int64 the length of each pair's member list (likewise)


@njit(cache=True, nogil=True)
def group_store(n_flows, n_entries):  # pragma: no cover - compiled (callable from Python too)
    """A :class:`GroupStore` for flows with ids below ``n_flows`` and fills of at most ``n_entries`` entries
    (room for two fills' pairs and lists before it starts over); only the per-flow maps initialised."""
    i64 = np.int64
    g, p, q = n_flows + 1, 2 * n_entries + 64, 6 * n_entries + 2 * n_flows + 64
    return GroupStore(
        np.zeros(16, dtype=i64), np.full(n_flows, -1, dtype=i64), np.empty(n_flows, dtype=i64),
        np.full(n_flows, -1, dtype=i64), np.empty(g, dtype=i64), np.empty(g, dtype=i64), np.empty(g, dtype=i64),
        np.empty(g, dtype=i64), np.empty(g, dtype=i64), np.full(g, -1, dtype=i64), np.empty(g, dtype=i64),
        np.empty(p, dtype=i64), np.empty(p, dtype=i64), np.empty(p, dtype=i64), np.empty(p, dtype=i64),
        np.empty(p), np.empty(p, dtype=i64), np.empty(p), np.empty(p, dtype=i64), np.empty(q, dtype=i64),
        np.empty(g), np.empty(g, dtype=i64), np.empty(p, dtype=i64),
    )  # fmt: skip


class FillScratch(NamedTuple):
    """Scratch of :func:`fill_levels`, sized once for ``links`` links, ``flows`` flows and ``entries``
    incidence entries (:func:`fill_scratch`). ``tick`` stamps (one per fill) mark the links a fill uses, so
    nothing is cleared between fills. A fill gives each of its links a local row ``j`` and each entry of
    its flows (local flow ``a``) that row (``ent_slot``); the coefficients are read in place from the
    global entries, which a flow's ``flow_off`` run follows one for one (issue-28zk: no copy of them)."""

    link_stamp: np.ndarray  # (links,) int64 the fill that last used the link
    link_slot: np.ndarray  # (links,) int64 the link's row in the fill
    slot_link: np.ndarray  # (links,) int64 link of each row
    slot_resid: np.ndarray  # (links,) float64 residual capacity of each row
    slot_denom: np.ndarray  # (links,) float64 sum of coef * weight of the unfrozen flows on it
    slot_count: np.ndarray  # (links,) int64 unfrozen flows on it
    slot_off: np.ndarray  # (links+1,) int64 CSR offsets of its flows in slot_flows
    slot_fill: np.ndarray  # (links,) int64 fill cursor
    slot_flows: np.ndarray  # (entries,) int64 the (local) flows of every row
    flow_off: np.ndarray  # (flows+1,) int64 CSR offsets of each local flow's entries
    flow_frozen: np.ndarray  # (flows,) bool
    ent_slot: np.ndarray  # (entries,) int64 row of each local entry (in order of the flow's global entries)
    heap_key: np.ndarray  # (links + flows + entries + 1,) float64 level of each heap item
    heap_item: np.ndarray  # (same,) int64 row (>= 0) or -1 - local flow (a demand level)
    grp_stat: np.ndarray  # (8,) int64 counters of the group fill (groupfill.GROUP_STATS), never reset
    grp_i: np.ndarray  # (15 flows + 7 entries + 140,) int64 the group fill's scratch (groupfill.group_fill)
    grp_f: np.ndarray  # (flows + entries + 2,) float64 the group fill's keys and pair sums
    grp_b: np.ndarray  # (flows + 1,) bool the group fill's frozen groups
    n_rows: np.ndarray  # (1,) int64 the link rows of the last fill_levels (rows, lists valid until the next)
    flow_w: np.ndarray  # (flows,) float64 each local flow's share weight (issue-28zp: read by the freezes)
    flow_e0: np.ndarray  # (flows,) int64 its first global entry less its first local one (fe_lo - flow_off)
    flow_dem: np.ndarray  # (flows,) float64 its demand
    keep: (
        GroupStore  # the kept-group fill's store (issue-28zn; empty unless ``fill_scratch``'s ``keep_flows``)
    )


@njit(cache=True, nogil=True)
def fill_scratch(
    n_links, n_flows, n_entries, keep_flows=0
):  # pragma: no cover - compiled (callable from Python too)
    """A :class:`FillScratch` for fills over at most these many links, flows and entries (``keep_flows`` > 0:
    with a :class:`GroupStore` for flow ids below it, else an empty one).

    Only the link stamps are initialised (-1: no fill used the link): a fill writes every other row it
    reads first (:func:`fill_levels`), so the rest is left uninitialised. Zeroing them cost more than the
    fills of a short interval: some 50 ms for the 114 MB of 8 AllToAll x 128 GPUs (2.3 M entries), at every
    call of the lazy kernel, hand-offs of the switch included (docs/engine-alltoall.md)."""
    i64 = np.int64
    h = n_links + n_flows + n_entries + 1
    e = max(n_entries, 1)
    return FillScratch(
        np.full(n_links, -1, dtype=i64), np.empty(n_links, dtype=i64), np.empty(n_links, dtype=i64),
        np.empty(n_links), np.empty(n_links), np.empty(n_links, dtype=i64), np.empty(n_links + 1, dtype=i64),
        np.empty(n_links, dtype=i64), np.empty(e, dtype=i64), np.empty(n_flows + 1, dtype=i64),
        np.empty(n_flows, dtype=np.bool_), np.empty(e, dtype=i64), np.empty(h), np.empty(h, dtype=i64),
        np.zeros(8, dtype=i64), np.empty(15 * n_flows + 7 * e + 140, dtype=i64), np.empty(n_flows + e + 2),
        np.empty(n_flows + 1, dtype=np.bool_), np.zeros(1, dtype=i64), np.empty(n_flows), np.empty(n_flows, dtype=i64),
        np.empty(n_flows), group_store(keep_flows, e if keep_flows > 0 else 0),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def merge_by_level(a_flow, a_level, n_a, b_flow, b_level, n_b, out_flow, out_level,
                   start):  # fmt: skip  # pragma: no cover - compiled
    """Merge two freeze orders, each sorted by level, into ``out_*[start : start + n_a + n_b]`` (ties: ``a``
    first, so a merge keeps the order of equal levels)."""
    i = 0
    j = 0
    for k in range(start, start + n_a + n_b):
        if j >= n_b or (i < n_a and a_level[i] <= b_level[j]):
            out_flow[k] = a_flow[i]
            out_level[k] = a_level[i]
            i += 1
        else:
            out_flow[k] = b_flow[j]
            out_level[k] = b_level[j]
            j += 1


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def link_row(lk, s, resid, tick, nl):  # pragma: no cover - compiled
    """Link ``lk``'s row in a fill's local rows (:class:`FillScratch` ``s``, stamp ``tick``, ``nl`` rows so
    far): the row it has at this stamp, else a new row ``nl`` with the link's residual ``resid[lk]``, a zero sum
    of coef x weight and no members. ``(row, rows now)``: the row is new when the count grew. Shared by
    :func:`fill_levels` and the group fill (:mod:`~ainet_gym.sim.backends.numba.groupfill`)."""
    if s.link_stamp[lk] != tick:
        s.link_stamp[lk] = tick
        s.link_slot[lk] = nl
        s.slot_link[nl] = lk
        s.slot_resid[nl] = resid[lk]
        s.slot_denom[nl] = 0.0
        s.slot_count[nl] = 0
        nl += 1
    return s.link_slot[lk], nl


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def row_offsets(s, nl):  # pragma: no cover - compiled
    """The offsets of the link-major lists of rows ``0 .. nl - 1`` (:class:`FillScratch` ``s``): row ``j``'s
    members go to ``s.slot_flows[s.slot_off[j] : s.slot_off[j + 1]]`` (``s.slot_count[j]`` of them), each list's
    write cursor ``s.slot_fill[j]`` at its start. Shared by :func:`fill_levels` and the group fill."""
    m = 0
    for j in range(nl):
        s.slot_off[j] = m
        s.slot_fill[j] = m
        m += s.slot_count[j]
    s.slot_off[nl] = m


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def push_link_rows(s, nl):  # pragma: no cover - compiled
    """Push rows ``0 .. nl - 1`` of a fill's local rows (:class:`FillScratch` ``s``) on its empty heap, each at
    its share (residual over the sum of coef x weight, inf without one). The heap's size. Shared by
    :func:`fill_levels` and the group fills."""
    hn = 0
    for j in range(nl):
        hn = heap_push(
            s.heap_key,
            s.heap_item,
            hn,
            s.slot_resid[j] / s.slot_denom[j] if s.slot_denom[j] > 0 else np.inf,
            j,
        )
    return hn


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _fill_rows(
    flows, n, fe_lo, fe_hi, e_link, e_coef, weight, demand, resid, s, tick, lo
):  # pragma: no cover - compiled
    """:func:`fill_levels`' local rows (:class:`FillScratch` ``s``, stamp ``tick``): the link row of each
    entry of ``flows[:n]``, flow by flow (local flow ``a``, link row ``j``: its residual, the sum of coef x
    weight and the count of its flows; the flow's weight, entry offset and demand kept by local flow,
    issue-28zp), then the link-major lists of the local flows. The link rows."""
    den, cnt, fill, adj = s.slot_denom, s.slot_count, s.slot_fill, s.slot_flows
    foff, frozen, eslot = s.flow_off, s.flow_frozen, s.ent_slot
    nl = 0
    m = 0
    for a in range(n):  # each entry's link row; the links' denominators and counts
        f = flows[a]
        frozen[a] = False
        foff[a] = m
        w = weight[f]
        s.flow_w[a] = w
        s.flow_e0[a] = fe_lo[f] - m
        s.flow_dem[a] = demand[f]
        for e in range(fe_lo[f], fe_hi[f]):
            j, nl = link_row(e_link[e] - lo, s, resid, tick, nl)
            eslot[m] = j
            den[j] += e_coef[e] * w
            cnt[j] += 1
            m += 1
    foff[n] = m
    row_offsets(s, nl)  # link-major lists of the local flows
    for a in range(n):
        for q in range(foff[a], foff[a + 1]):
            j = eslot[q]
            adj[fill[j]] = a
            fill[j] += 1
    return nl


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _fill_share(j, s, e_coef):  # pragma: no cover - compiled
    """Link row ``j``'s share now (:func:`fill_levels`, :class:`FillScratch` ``s``): residual over the sum of
    its unfrozen flows' coef x weight (inf: none), that sum first summed again if round-off ate it."""
    den, sres = s.slot_denom, s.slot_resid
    if den[j] <= 0.0:
        d = 0.0
        for q in range(s.slot_off[j], s.slot_off[j + 1]):
            a = s.slot_flows[q]
            if not s.flow_frozen[a]:
                e0 = s.flow_e0[a]
                for x in range(s.flow_off[a], s.flow_off[a + 1]):
                    if s.ent_slot[x] == j:
                        d += e_coef[e0 + x] * s.flow_w[a]
        den[j] = d
    return sres[j] / den[j] if den[j] > 0 else np.inf


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _fill_freeze(q0, q1, it, k, flows, e_coef, rate, out_flow, out_level, n_out, s):  # pragma: no cover
    """Freeze at level ``k`` the unfrozen local flows of :func:`fill_levels`' link row (its list
    ``s.slot_flows[q0:q1]``), or (``q0 < 0``) the one local flow ``-1 - it`` at its demand: each flow's rate
    (``weight x k``, or its demand), its place in the freeze order (``out_flow``, ``out_level``, from
    ``n_out``), its traffic off its links' residuals and its coef x weight off their sums (coefficients
    read in place, ``e_coef`` from the flow's ``fe_lo``; weight, entry offset and demand from the local
    copies :func:`_fill_rows` made, issue-28zp). The freeze order's length."""
    frozen, adj, foff, eslot = s.flow_frozen, s.slot_flows, s.flow_off, s.ent_slot
    sres, den, cnt = s.slot_resid, s.slot_denom, s.slot_count
    for q in range(q0, q1):
        a = adj[q] if q >= 0 else -1 - it
        if frozen[a]:
            continue
        f = flows[a]
        w = s.flow_w[a]
        r = s.flow_dem[a] if q < 0 else w * k
        frozen[a] = True
        rate[f] = r
        out_flow[n_out] = f
        out_level[n_out] = k
        n_out += 1
        e0 = s.flow_e0[a]
        for x in range(foff[a], foff[a + 1]):  # off its links
            j2 = eslot[x]
            c = e_coef[e0 + x]
            use = c * r
            if np.isfinite(use):  # inf only for unconstrained flows, whose links are all inf
                y = sres[j2] - use
                sres[j2] = y if y > 0.0 else 0.0
            den[j2] -= c * w
            cnt[j2] -= 1
    return n_out


@njit(cache=True, nogil=True)
def fill_levels(flows, n, fe_lo, fe_hi, e_link, e_coef, weight, demand, resid, rate, out_flow, out_level,
                s, tick, lo):  # fmt: skip  # pragma: no cover - compiled
    """Weighted max-min fair rates of ``flows[:n]`` by progressive filling, on the residual capacities
    ``resid`` of their links (updated in place: what the flows leave). Link ``e_link[e]`` is row
    ``e_link[e] - lo`` of ``resid`` (``lo``: the instance's first link, 0 for one instance).

    Flow ``f`` puts ``e_coef[e]`` on link ``e_link[e]`` per unit of rate for ``e`` in ``fe_lo[f]:fe_hi[f]``;
    its level is ``rate / weight[f]``, capped at ``demand[f] / weight[f]`` (inf: none). The level rises for
    every unfrozen flow at once; the next link to fill (least ``resid / sum coef * weight`` over its
    unfrozen flows, a binary heap, each link's key refreshed lazily when popped: a freeze never lowers a
    share) or the next demand level freezes its flows. Each flow is frozen once and each of its entries
    updated once: O(entries log links) for a fill, against O(entries x rounds) for the parallel rule of
    :func:`ainet_gym.sim.allocator.solve_coo` (the numpy reference); rates agree to round-off.

    Writes ``rate[f]`` and the freeze order (``out_flow[:n]``, ``out_level[:n]``, levels nondecreasing).
    ``s``: a :class:`FillScratch`, whose local rows (``s.n_rows[0]`` of them: link ``s.slot_link[j]``, local flows
    ``s.slot_flows[s.slot_off[j] : s.slot_off[j + 1]]`` in the order of ``flows``) stay valid until the next fill
    with it (read by :func:`~ainet_gym.sim.backends.numba.incremental.resolve_incremental`'s loads, issue-28zo); ``tick``: a stamp no earlier fill with this scratch used. Returns the
    heap pops. A flow on a link of capacity 0 gets 0; a flow that no finite capacity or demand limits,
    ``inf``.

    The steps: the local rows (:func:`_fill_rows`), the heap of link shares and demand levels (its push and
    pop, :func:`heap_push`, :func:`heap_pop`; a popped link's share refreshed, :func:`_fill_share`), and
    the freeze of a level's flows (:func:`_fill_freeze`), each compiled into the fill (``forceinline``).
    """
    inf = np.inf
    hkey, hitem, sres, cnt, off = s.heap_key, s.heap_item, s.slot_resid, s.slot_count, s.slot_off
    foff, frozen, slot_link = s.flow_off, s.flow_frozen, s.slot_link
    fdem, fw = s.flow_dem, s.flow_w
    nl = _fill_rows(flows, n, fe_lo, fe_hi, e_link, e_coef, weight, demand, resid, s, tick, lo)
    s.n_rows[0] = nl
    hn = push_link_rows(s, nl)
    for a in range(n):
        if fdem[a] < inf or foff[a + 1] == foff[a]:
            hn = heap_push(hkey, hitem, hn, fdem[a] / fw[a], -1 - a)
    n_out = 0
    pops = 0
    # Kept apart (issue-31zo2): this freeze loop (pop the smallest level; a link with no unfrozen flows
    # skipped; a link whose share moved pushed again; else its flows frozen; a demand level freezes its flow
    # unless frozen) stands again in ``groupfill.group_fill`` and ``groupfill._gk_heap`` over their own layouts
    # (groups of flows by pair rows; the kept groups). What each step does is a helper already, one per layout
    # (:func:`_fill_share` / ``_gf_share`` / ``_gk_share``, :func:`_fill_freeze` / ``_gf_link`` +
    # ``_gf_freeze_flow`` / ``_gk_link`` + ``_gk_freeze_flow``); the loop around them is about ten lines. One
    # loop for the three would take the steps as first-class functions (numba calls them through a pointer:
    # not inlined, their arguments spilled at every pop, the fill's inner loop) or a layout flag with the
    # union of their arguments (over 40, past the 30 a call passes without ``*args``), and every fill would
    # compile the three layouts' branches. A pop and a stale-share push of their own as steps leave the same
    # skeleton (the share and the freeze must run between them).
    while hn > 0 and n_out < n:
        k = hkey[0]
        it = hitem[0]
        hn = heap_pop(hkey, hitem, hn)
        pops += 1
        if it >= 0:  # a link: fill it, unless its share moved since it was pushed
            j = it
            if cnt[j] <= 0:
                continue
            sh = _fill_share(j, s, e_coef)
            if sh != k:
                hn = heap_push(hkey, hitem, hn, sh, j)
                continue
            q0, q1 = off[j], off[j + 1]
        else:  # a demand level: that one flow
            if frozen[-1 - it]:
                continue
            q0, q1 = -1, 0
        n_out = _fill_freeze(q0, q1, it, k, flows, e_coef, rate, out_flow, out_level, n_out, s)
    for j in range(nl):
        resid[slot_link[j]] = sres[j]
    return pops


@njit(cache=True, nogil=True)
def fill_parallel(
    flows, n, fe_lo, fe_hi, e_link, e_coef, demand, resid, rate, max_rounds, lo, out_flow, out_level, weight
):  # pragma: no cover - compiled (callable from Python too)
    """Weighted max-min fair rates of ``flows[:n]`` with demands ``demand`` on the residual capacities
    ``resid`` (row ``e_link[e] - lo``, updated in place: what the flows leave) by :func:`parallel_rule` (the
    full solve's rule, with ``order``), at most ``max_rounds`` rounds. ``weight``: (flows,) each flow's share
    weight (the level ``rate / weight`` is made max-min fair, as :func:`fill_levels`); empty: every weight 1,
    bit for bit the unweighted rule. Writes ``rate`` for the flows it freezes, and those flows in freeze order
    (by level, nondecreasing) to ``out_flow`` / ``out_level``.

    Stops after ``max_rounds`` rounds (or at a round that freezes nothing: NaN input) and returns ``(n_done,
    n_rest, rest, work)`` (``work``: the entries of the live flows summed over the rounds): ``n_done``
    flows frozen (``out_flow[:n_done]``); the flows still unfrozen are ``rest[:n_rest]``, and on the
    capacities ``resid`` now holds they are a max-min problem of their own (the frozen ones are frozen at
    their max-min rates), so :func:`fill_levels` of them finishes the allocation exactly.

    The freeze order is not a sort of the flows: the flows a link freezes in a round share its share
    bitwise, so they form one group; the groups (one per link and round, one per flow frozen at its demand)
    are sorted by level and the flows placed by a counting sort: O(flows + groups log groups).
    """
    nlk = resid.shape[0]
    m1 = max(n, 1)
    i64 = np.int64
    rows = ParallelRows(np.empty((m1, 3), dtype=i64), np.empty((m1, 2)), np.empty((m1, 2), dtype=i64),
                        np.empty(m1), np.empty((m1, 2), dtype=i64), np.empty(m1))  # fmt: skip
    links = ParallelLinks(
        resid, np.empty(nlk), np.empty(nlk), np.empty(nlk), np.empty(nlk), np.full(nlk, -1, dtype=i64),
        np.full(nlk, -1, dtype=i64), np.empty(nlk, dtype=i64), np.full(nlk, -1, dtype=i64), np.empty(nlk, dtype=i64),
    )  # fmt: skip
    _, n_live, n_done, n_grp, work, _, _ = parallel_rule(
        n, flows, fe_lo, fe_hi, e_link, e_coef, resid, lo, demand, rate, rows, links, 0, max_rounds, True, weight,
    )  # fmt: skip
    froz_g, glev = rows.froz_g, rows.glev
    # the frozen flows by level: the groups sorted, the flows placed by group (counting sort)
    order = np.argsort(glev[:n_grp])
    pos = np.zeros(n_grp + 1, dtype=i64)  # start of each group (by rank) in the output
    rank = np.empty(n_grp, dtype=i64)
    for k in range(n_grp):
        rank[order[k]] = k
    for i in range(n_done):
        pos[rank[froz_g[i, 1]] + 1] += 1
    for k in range(n_grp):
        pos[k + 1] += pos[k]
    for i in range(n_done):
        g = froz_g[i, 1]
        k = rank[g]
        out_flow[pos[k]] = froz_g[i, 0]
        out_level[pos[k]] = glev[g]
        pos[k] += 1
    rest = np.empty(m1, dtype=i64)
    for i in range(n_live):
        rest[i] = rows.live_i[i, 0]
    return n_done, n_live, rest, work


@njit(cache=True, nogil=True)
def solve_fill(entry_flow, entry_link, entry_coef, capacity, n_flows, weight, demand):  # pragma: no cover
    """:func:`fill_levels` over every flow of flow-sorted COO entries (coefficients > 0): the rates and the
    heap pops. The compiled backend of :func:`ainet_gym.sim.allocator.max_min_fair`."""
    n_links = capacity.shape[0]
    fe_lo = np.zeros(n_flows, dtype=np.int64)
    fe_hi = np.zeros(n_flows, dtype=np.int64)
    for e in range(entry_flow.shape[0]):
        f = entry_flow[e]
        if fe_hi[f] == 0:
            fe_lo[f] = e
        fe_hi[f] = e + 1
    for f in range(n_flows):
        if fe_hi[f] == 0:
            fe_lo[f] = 0
    flows = np.arange(n_flows)
    resid = capacity.copy()
    rate = np.zeros(n_flows)
    out_flow = np.empty(n_flows, dtype=np.int64)
    out_level = np.empty(n_flows)
    s = fill_scratch(n_links, n_flows, entry_flow.shape[0])
    pops = fill_levels(flows, n_flows, fe_lo, fe_hi, entry_link, entry_coef, weight, demand, resid, rate,
                       out_flow, out_level, s, 0, 0)  # fmt: skip
    return rate, pops


@njit(cache=True, nogil=True)
def solve_fill_blocks(
    entry_flow, entry_link, entry_coef, capacity, weight, demand, flow_bounds, link_bounds
):  # pragma: no cover
    """:func:`solve_fill` on each independent instance of a batch, one after the other in one compiled call:
    instance ``i`` owns flows ``flow_bounds[i]:flow_bounds[i + 1]`` and links ``link_bounds[i]:link_bounds[i +
    1]`` (entries flow-sorted, so each instance's entries are contiguous). Each instance gets its own fill,
    heap and residuals, so its rates equal a :func:`solve_fill` of that instance alone bit for bit (one fill
    over the stacked instances would break ties between equal keys across instances in another order, which
    can move a rate by an ulp)."""
    n_inst = flow_bounds.shape[0] - 1
    rate = np.zeros(flow_bounds[n_inst])
    e0 = 0
    for i in range(n_inst):
        f0, f1, l0, l1 = flow_bounds[i], flow_bounds[i + 1], link_bounds[i], link_bounds[i + 1]
        e1 = e0
        while e1 < entry_flow.shape[0] and entry_flow[e1] < f1:
            e1 += 1
        r, _ = solve_fill(entry_flow[e0:e1] - f0, entry_link[e0:e1] - l0, entry_coef[e0:e1],
                          capacity[l0:l1].copy(), f1 - f0, weight[f0:f1].copy(), demand[f0:f1].copy())  # fmt: skip
        rate[f0:f1] = r
        e0 = e1
    return rate
