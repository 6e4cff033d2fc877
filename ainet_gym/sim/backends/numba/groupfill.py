"""Progressive filling over groups of flows (issue-28zm): :func:`fill_levels`' max-min fill, with the flows
that held one level at the last solve taken as one unit per link they cross.

A fill raises the level of every unfrozen flow at once; the next link to fill freezes the unfrozen flows on
it. Any partition of the flows into groups gives the same fill, provided a link that fills freezes exactly
its own flows: a group whose unfrozen members all cross it freezes whole, with one update per (group, link)
pair of the group (the link's residual less the pair's sum of coefficient x weight times the level), and a
group of which only some members cross it is split, the members that cross it (the pair's list) frozen one
by one (each entry updated, as :func:`fill_levels` does; the rest stay a group). So the rates are max-min fair for any
grouping (the sums in another order: equal to round-off); the grouping only decides the cost. The lazy
kernel groups the flows it re-fills by their previous level (bitwise): 99.6% of the rate changes of
8 AllToAll x 128 GPUs' interval 5 keep their bottleneck group (docs/engine-alltoall.md, issue-28zd), so a
group usually rises and freezes whole.
"""

from __future__ import annotations

import numpy as np

from ainet_gym.sim.backends.numba.fill import link_row, push_link_rows, row_offsets
from ainet_gym.sim.backends.numba.heaps import heap_pop, heap_push
from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit

__all__ = ["GROUP_STATS", "KEEP_STATS", "group_fill", "group_fill_kept", "group_store_reset"]

#: the columns of ``FillScratch.grp_stat`` (counted over the scratch's life, never reset): fills, groups,
#: (group, link) pairs, whole-group freezes, splits, flows frozen by a split (one by one), their entries, the
#: fills' entries
GROUP_STATS = ("fills", "groups", "pairs", "whole", "splits", "split_flows", "split_entries", "entries")


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_keys(flows, n, old_rate, weight, demand, fe_lo, fe_hi, kk):  # pragma: no cover - compiled
    """Each local flow's group key into ``kk[:n]``: its previous level ``old_rate / weight`` when positive
    and finite and the flow has entries and no finite demand, else ``-1 - a`` (a group of its own). The
    entries of the flows."""
    m = 0
    for a in range(n):
        f = flows[a]
        m += fe_hi[f] - fe_lo[f]
        x = old_rate[a] / weight[f]
        if x > 0.0 and np.isfinite(x) and demand[f] == np.inf and fe_hi[f] > fe_lo[f]:
            kk[a] = x
        else:
            kk[a] = -1.0 - a
    return m


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_order(kk, n, order, tab, gid, gcnt):  # pragma: no cover - compiled
    """The local flows into ``order[:n]`` with equal keys ``kk`` together (groups in the order of their first
    member, members in the caller's order): a hash of the keys' bits (``tab``: (2 x slots,) int64, -1 where
    free, slots a power of two of at least ``2 n``), then a counting sort by group. O(n); no sort by level."""
    bits = kk.view(np.int64)
    size = tab.shape[0] >> 1
    mask = np.uint64(size - 1)
    ng = 0
    for a in range(n):
        g = -1
        if kk[a] >= 0.0:
            h = (np.uint64(bits[a]) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(17)
            while True:
                i = np.int64(h & mask)
                if tab[2 * i + 1] < 0:
                    tab[2 * i] = bits[a]
                    tab[2 * i + 1] = ng
                    break
                if tab[2 * i] == bits[a]:
                    g = tab[2 * i + 1]
                    break
                h += np.uint64(1)
        if g < 0:
            g = ng
            gcnt[g] = 0
            ng += 1
        gid[a] = g
        gcnt[g] += 1
    m = 0
    for g in range(ng):
        c = gcnt[g]
        gcnt[g] = m
        m += c
    for a in range(n):
        g = gid[a]
        order[gcnt[g]] = a
        gcnt[g] += 1


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_pairs(
    flows, order, n, kk, fe_lo, fe_hi, e_link, e_coef, weight, resid, s, tick, lo, glo, gp_lo, gsize, xoff,
    pair_n, pair_m, pair_g, pair_row, rp_stamp, rp_pair,
):  # fmt: skip  # pragma: no cover - compiled
    """The groups (runs of equal keys in ``order``, :func:`_gf_order`: members ``order[glo[g]:glo[g + 1]]``), their (group, link)
    pairs (``gp_lo[g]:gp_lo[g + 1]``: the pair's sum of coefficient x weight ``pair_n``, members crossing
    ``pair_m``, group ``pair_g`` and link row ``pair_row``), the link rows of the fill (:class:`FillScratch`
    ``s``, stamp ``tick``: residual, sum of coefficient x weight, live pairs in ``slot_count``) and each local
    entry's pair (``s.ent_slot[xoff[a] + i]``). ``(groups, pairs, rows)``."""
    den, cnt, frozen, epair = s.slot_denom, s.slot_count, s.flow_frozen, s.ent_slot
    ng = 0
    npair = 0
    nl = 0
    x = 0
    for i in range(n):
        a = order[i]
        if i == 0 or kk[a] != kk[order[i - 1]]:  # a new group
            glo[ng] = i
            gp_lo[ng] = npair
            gsize[ng] = 0
            ng += 1
        g = ng - 1
        gsize[g] += 1
        f = flows[a]
        frozen[a] = False
        xoff[a] = x
        w = weight[f]
        for e in range(fe_lo[f], fe_hi[f]):
            j, nl_now = link_row(e_link[e] - lo, s, resid, tick, nl)
            if nl_now != nl:  # a new row: no group's pair on it yet
                rp_stamp[j] = -1
                nl = nl_now
            if rp_stamp[j] != g:  # the group's first member on the link: a new pair
                rp_stamp[j] = g
                rp_pair[j] = npair
                pair_n[npair] = 0.0
                pair_m[npair] = 0
                pair_g[npair] = g
                pair_row[npair] = j
                cnt[j] += 1
                npair += 1
            p = rp_pair[j]
            cw = e_coef[e] * w
            pair_n[p] += cw
            pair_m[p] += 1
            den[j] += cw
            epair[x] = p
            x += 1
    glo[ng] = n
    gp_lo[ng] = npair
    return ng, npair, nl


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_lists(npair, nl, pair_row, s):  # pragma: no cover - compiled
    """The link-major lists of the pairs: row ``j``'s pairs ``s.slot_flows[s.slot_off[j] : s.slot_off[j + 1]]``
    (its pairs counted in ``s.slot_count``)."""
    fill, adj = s.slot_fill, s.slot_flows
    row_offsets(s, nl)
    for p in range(npair):
        j = pair_row[p]
        adj[fill[j]] = p
        fill[j] += 1


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_members(
    order, n, npair, xoff, flows, fe_lo, fe_hi, pair_m, pair_off, pair_mem, s
):  # pragma: no cover
    """Each pair's members (``pair_mem[pair_off[p] : pair_off[p + 1]]``, local flows in group order): what a
    split of the pair's group at the pair's link freezes, read without scanning the other members."""
    m = 0
    for p in range(npair):
        pair_off[p] = m
        m += pair_m[p]
    pair_off[npair] = m
    for i in range(n):
        a = order[i]
        f = flows[a]
        for x in range(xoff[a], xoff[a] + fe_hi[f] - fe_lo[f]):
            p = s.ent_slot[x]
            pair_mem[pair_off[p]] = a
            pair_off[p] += 1
    for p in range(npair):  # (the cursors back to the starts)
        pair_off[p] -= pair_m[p]


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_share(j, s, pair_n, pair_m, pair_g, gfrozen):  # pragma: no cover - compiled
    """Link row ``j``'s share now: residual over the sum of its live pairs' coefficient x weight (inf: none),
    that sum first summed again from the pairs if round-off ate it."""
    den = s.slot_denom
    if den[j] <= 0.0:
        d = 0.0
        for q in range(s.slot_off[j], s.slot_off[j + 1]):
            p = s.slot_flows[q]
            if pair_m[p] > 0 and not gfrozen[pair_g[p]]:
                d += pair_n[p]
        den[j] = d
    return s.slot_resid[j] / den[j] if den[j] > 0 else np.inf


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_freeze_flow(
    a, r, k, flows, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level, n_out, s, xoff, pair_n, pair_m, pair_row,
):  # fmt: skip  # pragma: no cover - compiled
    """Freeze local flow ``a`` alone at rate ``r`` (level ``k``): its rate, its place in the freeze order, its
    traffic off its links' residuals and its coefficient x weight off their sums and its group's pairs (as
    :func:`fill_levels` freezes a flow; a pair left without members leaves its link's count). The freeze
    order's length."""
    sres, den, cnt = s.slot_resid, s.slot_denom, s.slot_count
    f = flows[a]
    s.flow_frozen[a] = True
    rate[f] = r
    out_flow[n_out] = f
    out_level[n_out] = k
    w = weight[f]
    x0 = xoff[a]
    for i in range(fe_hi[f] - fe_lo[f]):
        p = s.ent_slot[x0 + i]
        j = pair_row[p]
        c = e_coef[fe_lo[f] + i]
        use = c * r
        if np.isfinite(use):  # inf only for unconstrained flows, whose links are all inf
            y = sres[j] - use
            sres[j] = y if y > 0.0 else 0.0
        den[j] -= c * w
        pair_m[p] -= 1
        if pair_m[p] == 0:
            pair_n[p] = 0.0
            cnt[j] -= 1
        else:
            pair_n[p] -= c * w
    return n_out + 1


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_freeze_group(
    g, k, flows, order, glo, gp_lo, weight, rate, out_flow, out_level, n_out, s, pair_n, pair_m, pair_row, gfrozen,
):  # fmt: skip  # pragma: no cover - compiled
    """Freeze every unfrozen member of group ``g`` at level ``k``: their rates and places in the freeze order,
    then one update per live pair of the group (the link's residual less the pair's coefficient x weight
    times ``k``, its sum less the pair's). The freeze order's length."""
    sres, den, cnt, frozen = s.slot_resid, s.slot_denom, s.slot_count, s.flow_frozen
    gfrozen[g] = True
    for i in range(glo[g], glo[g + 1]):
        a = order[i]
        if frozen[a]:
            continue
        frozen[a] = True
        f = flows[a]
        rate[f] = weight[f] * k
        out_flow[n_out] = f
        out_level[n_out] = k
        n_out += 1
    for p in range(gp_lo[g], gp_lo[g + 1]):
        if pair_m[p] == 0:
            continue
        j = pair_row[p]
        use = pair_n[p] * k
        if np.isfinite(use):
            y = sres[j] - use
            sres[j] = y if y > 0.0 else 0.0
        den[j] -= pair_n[p]
        cnt[j] -= 1
    return n_out


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_split(
    g, p, k, flows, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level, n_out, s, xoff, pair_n, pair_m,
    pair_row, pair_off, pair_mem, gsize, gfrozen, st,
):  # fmt: skip  # pragma: no cover - compiled
    """Group ``g``, of which only some unfrozen members cross the link of its pair ``p``, which fills at level
    ``k``: the pair's unfrozen members (its list, :func:`_gf_members`) frozen one by one
    (:func:`_gf_freeze_flow`), the rest left a group (counted in ``st``: splits, flows frozen, their entries).
    The freeze order's length."""
    frozen = s.flow_frozen
    st[4] += 1
    for q in range(pair_off[p], pair_off[p + 1]):
        a = pair_mem[q]
        if frozen[a]:
            continue
        f = flows[a]
        st[5] += 1
        st[6] += fe_hi[f] - fe_lo[f]
        n_out = _gf_freeze_flow(a, weight[f] * k, k, flows, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level,
                                n_out, s, xoff, pair_n, pair_m, pair_row)  # fmt: skip
        gsize[g] -= 1
    if gsize[g] == 0:
        gfrozen[g] = True
    return n_out


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_link(
    j, k, flows, order, glo, gp_lo, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level, n_out, s, xoff, pair_n,
    pair_m, pair_g, pair_row, pair_off, pair_mem, gsize, gfrozen, st,
):  # fmt: skip  # pragma: no cover - compiled
    """Link row ``j`` fills at level ``k``: each live group on it frozen whole when all its unfrozen members
    cross it (:func:`_gf_freeze_group`), else split (:func:`_gf_split`). The freeze order's length."""
    for q in range(s.slot_off[j], s.slot_off[j + 1]):
        p = s.slot_flows[q]
        g = pair_g[p]
        if gfrozen[g] or pair_m[p] == 0:
            continue
        if pair_m[p] == gsize[g]:
            st[3] += 1
            n_out = _gf_freeze_group(g, k, flows, order, glo, gp_lo, weight, rate, out_flow, out_level, n_out, s,
                                     pair_n, pair_m, pair_row, gfrozen)  # fmt: skip
        else:
            n_out = _gf_split(g, p, k, flows, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level, n_out, s, xoff,
                              pair_n, pair_m, pair_row, pair_off, pair_mem, gsize, gfrozen, st)  # fmt: skip
    return n_out


@njit(cache=True, nogil=True)
def group_fill(flows, n, old_rate, fe_lo, fe_hi, e_link, e_coef, weight, demand, resid, rate, out_flow, out_level,
               s, tick, lo):  # fmt: skip  # pragma: no cover - compiled
    """:func:`ainet_gym.sim.backends.numba.fill.fill_levels` of ``flows[:n]`` over groups: the same arguments
    and results (rates, freeze order with nondecreasing levels, ``resid`` updated to what the flows leave, the
    heap pops returned), plus ``old_rate[:n]``, each flow's previous rate, which groups them (the flows at one
    previous level, bitwise, one group; a flow at 0, with a finite demand or without entries alone). The
    counters of ``s.grp_stat`` (:data:`GROUP_STATS`) are added to. Rates equal :func:`fill_levels`' to
    round-off (module docstring)."""
    st = s.grp_stat
    m = 0
    for a in range(n):
        m += fe_hi[flows[a]] - fe_lo[flows[a]]
    size = 64
    while size < 2 * n:
        size <<= 1
    m1, n1 = max(m, 1), n + 1
    ib, gf, gfrozen = s.grp_i, s.grp_f, s.grp_b  # (the scratch's, sized by fill_scratch; fresh if too small)
    if (
        ib.shape[0] < 2 * size + 3 * n + 7 * m1 + 4 * n1 + 2
        or gf.shape[0] < n + m1 + 1
        or gfrozen.shape[0] < n1
    ):
        ib, gf = np.empty(2 * size + 3 * n + 7 * m1 + 4 * n1 + 2, dtype=np.int64), np.empty(n + m1 + 1)
        gfrozen = np.empty(n1, dtype=np.bool_)
    kk = gf[: max(n, 1)]
    _gf_keys(flows, n, old_rate, weight, demand, fe_lo, fe_hi, kk)
    ib[: 2 * size] = -1
    order, gid, gcnt = ib[2 * size : 2 * size + n], ib[2 * size + n : 2 * size + 2 * n], ib[2 * size + 2 * n : 2 * size + 3 * n + 1]  # fmt: skip
    _gf_order(kk, n, order, ib[: 2 * size], gid, gcnt)
    o = 2 * size + 3 * n + 1
    pair_m, pair_g, pair_row, rp_stamp, rp_pair = ib[o : o + m1], ib[o + m1 : o + 2 * m1], ib[o + 2 * m1 : o + 3 * m1], ib[o + 3 * m1 : o + 4 * m1], ib[o + 4 * m1 : o + 5 * m1]  # fmt: skip
    o += 5 * m1
    gp_lo, glo, gsize, xoff = ib[o : o + n1], ib[o + n1 : o + 2 * n1], ib[o + 2 * n1 : o + 3 * n1], ib[o + 3 * n1 : o + 4 * n1]  # fmt: skip
    o += 4 * n1
    pair_off, pair_mem = ib[o : o + m1 + 1], ib[o + m1 + 1 : o + 2 * m1 + 1]
    pair_n = gf[max(n, 1) : max(n, 1) + m1]
    gfrozen[:n1] = False
    ng, npair, nl = _gf_pairs(flows, order, n, kk, fe_lo, fe_hi, e_link, e_coef, weight, resid, s, tick, lo, glo, gp_lo,
                              gsize, xoff, pair_n, pair_m, pair_g, pair_row, rp_stamp, rp_pair)  # fmt: skip
    _gf_lists(npair, nl, pair_row, s)
    _gf_members(order, n, npair, xoff, flows, fe_lo, fe_hi, pair_m, pair_off, pair_mem, s)
    st[0] += 1
    st[1] += ng
    st[2] += npair
    st[7] += m
    hkey, hitem, sres, cnt = s.heap_key, s.heap_item, s.slot_resid, s.slot_count
    hn = push_link_rows(s, nl)
    for g in range(ng):  # a flow alone with a demand, or without entries: its demand level
        a = order[glo[g]]
        f = flows[a]
        if glo[g + 1] - glo[g] == 1 and (demand[f] < np.inf or fe_hi[f] == fe_lo[f]):
            hn = heap_push(hkey, hitem, hn, demand[f] / weight[f], -1 - g)
    n_out = 0
    pops = 0
    # Kept apart: fill_levels' freeze loop over this layout's steps (the reason beside ``fill.fill_levels``'s loop)
    while hn > 0 and n_out < n:
        k = hkey[0]
        it = hitem[0]
        hn = heap_pop(hkey, hitem, hn)
        pops += 1
        if it >= 0:  # a link: fill it, unless its share moved since it was pushed
            if cnt[it] <= 0:
                continue
            sh = _gf_share(it, s, pair_n, pair_m, pair_g, gfrozen)
            if sh != k:
                hn = heap_push(hkey, hitem, hn, sh, it)
                continue
            n_out = _gf_link(it, k, flows, order, glo, gp_lo, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level,
                             n_out, s, xoff, pair_n, pair_m, pair_g, pair_row, pair_off, pair_mem, gsize, gfrozen,
                             st)  # fmt: skip
        elif not gfrozen[-1 - it]:  # a demand level: that one flow
            g = -1 - it
            a = order[glo[g]]
            gfrozen[g] = True
            n_out = _gf_freeze_flow(a, demand[flows[a]], k, flows, fe_lo, fe_hi, e_coef, weight, rate, out_flow,
                                    out_level, n_out, s, xoff, pair_n, pair_m, pair_row)  # fmt: skip
    for j in range(nl):
        resid[s.slot_link[j]] = sres[j]
    return pops


# ----------------------------------------------------------------------------------------------------------
# kept groups (issue-28zn): the groups, their pairs and member lists persist from fill to fill
# ----------------------------------------------------------------------------------------------------------

#: the counters of ``GroupStore.st[4:]`` (never reset): fills, intact groups taken from the store, their
#: pairs, flows rebuilt from their entries, their entries, groups built, intact groups dissolved into a
#: rebuilt level, store restarts, splits, fills handed to :func:`group_fill` (the store too small)
KEEP_STATS = ("fills", "intact", "intact_pairs", "rebuilt", "rebuilt_entries", "built", "dissolved", "restarts",
              "splits", "fallbacks")  # fmt: skip


@njit(cache=True, nogil=True, _nrt=False)
def group_store_reset(ks):  # pragma: no cover - compiled
    """Void every group of the kept-group store ``ks`` (:class:`~ainet_gym.sim.backends.numba.fill.GroupStore`):
    the next fill rebuilds its groups from the entries (the flows' entries may have changed since)."""
    ks.st[0] = ks.st[1]
    ks.st[2] = 0
    ks.st[3] = 0


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_slot(tab, mask, b):  # pragma: no cover - compiled
    """The slot of key bits ``b`` in the open-addressing hash ``tab`` (pairs: bits, used flag): its own, or
    the free one where it would go."""
    h = (np.uint64(b) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(17)
    while True:
        i = np.int64(h & mask)
        if tab[2 * i + 1] < 0 or tab[2 * i] == b:
            return i
        h += np.uint64(1)


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_count(flows, n, ks, tick, frozen):  # pragma: no cover - compiled
    """Each local flow's index in ``ks.fa``, and the flows of this fill in each live group (``gcnt``, stamped
    ``tick``; ``gloc`` -1: not checked yet)."""
    base, nxt = ks.st[0], ks.st[1]
    for a in range(n):
        f = flows[a]
        ks.fa[f] = a
        frozen[a] = False
        g = ks.fgrp[f]
        if base <= g < nxt:
            gi = g - base
            if ks.gstp[gi] != tick:
                ks.gstp[gi] = tick
                ks.gcnt[gi] = 0
                ks.gloc[gi] = -1
            ks.gcnt[gi] += 1


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_intact(flows, n, kk, ks, lg, gsize):  # pragma: no cover - compiled
    """The kept groups that are intact in this fill: more than one member, every member in the fill, still in
    the group and at the group's key ``kk`` (one previous level). Each gets a local group (``lg``, its
    unfrozen members ``gsize``; ``gloc`` its local index, -2 for a group that is not intact). Their count."""
    base, nxt = ks.st[0], ks.st[1]
    nk = 0
    for a in range(n):
        g = ks.fgrp[flows[a]]
        if g < base or g >= nxt or ks.gloc[g - base] != -1:
            continue
        gi = g - base
        ok = ks.gsz[gi] > 1 and ks.gcnt[gi] == ks.gsz[gi] and kk[a] >= 0.0
        m0 = ks.gmlo[gi]
        for i in range(ks.glen[gi] if ok else 0):
            f2 = ks.pool[m0 + i]
            if ks.fgrp[f2] != g:  # (left the group: still listed)
                continue
            a2 = ks.fa[f2]
            if a2 < 0 or kk[a2] != kk[a]:
                ok = False
                break
        if ok:
            ks.gloc[gi] = nk
            lg[nk] = gi
            gsize[nk] = ks.gsz[gi]
            nk += 1
        else:
            ks.gloc[gi] = -2
    return nk


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_rebuild(flows, n, kk, ks, lg, gsize, nk, rb, fk, tab):  # pragma: no cover - compiled
    """The local flows to rebuild (``rb``, their keys ``fk``): those not in an intact group, and the members
    of an intact group at a key one of them has (the group dissolved, so that one level makes one group).
    ``tab``: room for a hash of at least ``2 n`` slots (left used). ``(flows to rebuild, intact groups left)``."""
    base, nxt = ks.st[0], ks.st[1]
    nrb = 0
    for a in range(n):
        g = ks.fgrp[flows[a]]
        if base <= g < nxt and ks.gloc[g - base] >= 0:
            continue
        rb[nrb] = a
        fk[nrb] = kk[a]
        nrb += 1
    if nrb == 0 or nk == 0:
        return nrb, nk
    size = 64
    while size < 2 * nrb:
        size <<= 1
    tab[: 2 * size] = -1
    bits = fk.view(np.int64)
    mask = np.uint64(size - 1)
    for i in range(nrb):
        if fk[i] >= 0.0:
            h = _gk_slot(tab, mask, bits[i])
            tab[2 * h] = bits[i]
            tab[2 * h + 1] = 0
    kb = kk.view(np.int64)
    k2 = 0
    for k in range(nk):
        gi = lg[k]
        g = gi + base
        i0 = ks.gmlo[gi]
        while ks.fgrp[ks.pool[i0]] != g:  # (its first member still in it)
            i0 += 1
        if (
            tab[2 * _gk_slot(tab, mask, kb[ks.fa[ks.pool[i0]]]) + 1] >= 0
        ):  # a rebuilt flow at its level: dissolve it
            ks.st[10] += 1
            ks.gloc[gi] = -2
            for i in range(i0, ks.gmlo[gi] + ks.glen[gi]):
                if ks.fgrp[ks.pool[i]] == g:
                    rb[nrb] = ks.fa[ks.pool[i]]
                    fk[nrb] = kk[rb[nrb]]
                    nrb += 1
        else:
            ks.gloc[gi] = k2
            lg[k2] = gi
            gsize[k2] = gsize[k]
            k2 += 1
    return nrb, k2


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_intact_rows(lg, nk, ks, s, resid, tick, rp_stamp):  # pragma: no cover - compiled
    """The fill's link rows of the intact groups' pairs (each pair's row ``prow``, its unfrozen members and
    sum from the kept ones; the rows' sums and live pairs). ``(rows, pairs)``."""
    den, cnt = s.slot_denom, s.slot_count
    nl = 0
    npair = 0
    for k in range(nk):
        gi = lg[k]
        for p in range(ks.gplo[gi], ks.gphi[gi]):
            ks.pm[p] = ks.pm0[p]
            if ks.pm0[p] == 0:  # (every member that crossed its link left the group)
                continue
            j, nl_now = link_row(ks.plink[p], s, resid, tick, nl)
            if nl_now != nl:
                rp_stamp[j] = -1
                nl = nl_now
            ks.prow[p] = j
            ks.pn[p] = ks.pn0[p]
            den[j] += ks.pn0[p]
            cnt[j] += 1
            npair += 1
    return nl, npair


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_new_group(flows, rb, order, i0, i1, fe_lo, fe_hi, e_link, e_coef, weight, resid, s, tick, lo, nl, ks, kl,
                  rp_stamp, rp_pair):  # fmt: skip  # pragma: no cover - compiled
    """A new kept group (local group ``kl``) of the rebuilt flows ``rb[order[i0:i1]]``: its members, its pairs
    from their entries (sum of coefficient x weight, members; the rows' sums and live pairs), each member's
    entries' pairs and each pair's member list, in the store's pools. The rows now."""
    den, cnt, st, pool = s.slot_denom, s.slot_count, ks.st, ks.pool
    gid = st[1]
    st[1] += 1
    gi = gid - st[0]
    ptop, qtop = st[2], st[3]
    ks.gsz[gi], ks.gmlo[gi], ks.gplo[gi], ks.gloc[gi] = i1 - i0, qtop, ptop, kl
    ks.gstp[gi] = -1  # (a stale stamp of a void group at this index must not count this fill's flows)
    ks.gcnt[gi] = 0
    qtop += i1 - i0
    for t in range(i0, i1):
        f = flows[rb[order[t]]]
        pool[ks.gmlo[gi] + t - i0] = f
        ks.fgrp[f] = gid
        ks.fpl[f] = qtop
        qtop += fe_hi[f] - fe_lo[f]
        w = weight[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            j, nl_now = link_row(lk, s, resid, tick, nl)
            if nl_now != nl:
                rp_stamp[j] = -1
                nl = nl_now
            if rp_stamp[j] != kl:  # the group's first member on the link: a new pair
                rp_stamp[j] = kl
                rp_pair[j] = ptop
                ks.plink[ptop], ks.pg[ptop], ks.pn0[ptop], ks.pm0[ptop], ks.prow[ptop] = lk, gi, 0.0, 0, j
                cnt[j] += 1
                ptop += 1
            p = rp_pair[j]
            cw = e_coef[e] * w
            ks.pn0[p] += cw
            ks.pm0[p] += 1
            den[j] += cw
            pool[ks.fpl[f] + e - fe_lo[f]] = p
    ks.gphi[gi] = ptop
    for p in range(ks.gplo[gi], ptop):  # the pairs' member lists
        ks.poff[p] = qtop
        ks.pm[p] = 0
        qtop += ks.pm0[p]
    for t in range(i0, i1):
        f = flows[rb[order[t]]]
        for x in range(ks.fpl[f], ks.fpl[f] + fe_hi[f] - fe_lo[f]):
            p = pool[x]
            pool[ks.poff[p] + ks.pm[p]] = f
            ks.pm[p] += 1
    for p in range(ks.gplo[gi], ptop):
        ks.pn[p] = ks.pn0[p]
        ks.plen[p] = ks.pm0[p]
    ks.glen[gi] = i1 - i0
    st[2], st[3] = ptop, qtop
    return nl


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_lists(lg, nk, nl, ks, s):  # pragma: no cover - compiled
    """The link-major lists of the fill's pairs: row ``j``'s pairs ``s.slot_flows[s.slot_off[j] :
    s.slot_off[j + 1]]``."""
    fill, adj = s.slot_fill, s.slot_flows
    row_offsets(s, nl)
    for k in range(nk):
        gi = lg[k]
        for p in range(ks.gplo[gi], ks.gphi[gi]):
            if ks.pm0[p] > 0:
                j = ks.prow[p]
                adj[fill[j]] = p
                fill[j] += 1


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_share(j, s, ks, gfrozen):  # pragma: no cover - compiled
    """:func:`_gf_share` over kept pairs."""
    den = s.slot_denom
    if den[j] <= 0.0:
        d = 0.0
        for q in range(s.slot_off[j], s.slot_off[j + 1]):
            p = s.slot_flows[q]
            if ks.pm[p] > 0 and not gfrozen[ks.gloc[ks.pg[p]]]:
                d += ks.pn[p]
        den[j] = d
    return s.slot_resid[j] / den[j] if den[j] > 0 else np.inf


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_freeze_flow(f, r, k, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level, n_out, s,
                    ks):  # fmt: skip  # pragma: no cover - compiled
    """:func:`_gf_freeze_flow` of flow ``f`` over kept pairs (its entries' pairs from ``ks.fpl``)."""
    sres, den, cnt = s.slot_resid, s.slot_denom, s.slot_count
    s.flow_frozen[ks.fa[f]] = True
    rate[f] = r
    out_flow[n_out] = f
    out_level[n_out] = k
    w = weight[f]
    x0 = ks.fpl[f]
    for i in range(fe_hi[f] - fe_lo[f]):
        p = ks.pool[x0 + i]
        j = ks.prow[p]
        c = e_coef[fe_lo[f] + i]
        use = c * r
        if np.isfinite(use):
            y = sres[j] - use
            sres[j] = y if y > 0.0 else 0.0
        den[j] -= c * w
        ks.pm[p] -= 1
        if ks.pm[p] == 0:
            ks.pn[p] = 0.0
            cnt[j] -= 1
        else:
            ks.pn[p] -= c * w
    return n_out + 1


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_freeze_group(kl, k, weight, rate, out_flow, out_level, n_out, s, ks, lg,
                     gfrozen):  # fmt: skip  # pragma: no cover - compiled
    """:func:`_gf_freeze_group` of local group ``kl`` over kept pairs."""
    sres, den, cnt, frozen = s.slot_resid, s.slot_denom, s.slot_count, s.flow_frozen
    gfrozen[kl] = True
    gi = lg[kl]
    g = gi + ks.st[0]
    for i in range(ks.gmlo[gi], ks.gmlo[gi] + ks.glen[gi]):
        f = ks.pool[i]
        if ks.fgrp[f] != g:  # (left the group: still listed)
            continue
        a = ks.fa[f]
        if frozen[a]:
            continue
        frozen[a] = True
        rate[f] = weight[f] * k
        out_flow[n_out] = f
        out_level[n_out] = k
        n_out += 1
    for p in range(ks.gplo[gi], ks.gphi[gi]):
        if ks.pm[p] == 0:
            continue
        j = ks.prow[p]
        use = ks.pn[p] * k
        if np.isfinite(use):
            y = sres[j] - use
            sres[j] = y if y > 0.0 else 0.0
        den[j] -= ks.pn[p]
        cnt[j] -= 1
    return n_out


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_link(j, k, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level, n_out, s, ks, lg, gsize, gfrozen,
             rm):  # fmt: skip  # pragma: no cover - compiled
    """:func:`_gf_link` over kept pairs: the members a split freezes are listed in ``rm`` (``ks.st[14]`` of
    them): they leave their group after the fill (:func:`_gk_leave`)."""
    frozen = s.flow_frozen
    for q in range(s.slot_off[j], s.slot_off[j + 1]):
        p = s.slot_flows[q]
        gi = ks.pg[p]
        kl = ks.gloc[gi]
        if gfrozen[kl] or ks.pm[p] == 0:
            continue
        if ks.pm[p] == gsize[kl]:
            n_out = _gk_freeze_group(kl, k, weight, rate, out_flow, out_level, n_out, s, ks, lg, gfrozen)
            continue
        ks.st[12] += 1
        g = gi + ks.st[0]
        for x in range(ks.poff[p], ks.poff[p] + ks.plen[p]):
            f = ks.pool[x]
            if ks.fgrp[f] != g or frozen[ks.fa[f]]:
                continue
            n_out = _gk_freeze_flow(f, weight[f] * k, k, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level,
                                    n_out, s, ks)  # fmt: skip
            gsize[kl] -= 1
            rm[ks.st[14]] = f  # (it leaves the group after the fill, _gk_leave)
            ks.st[14] += 1
        if gsize[kl] == 0:
            gfrozen[kl] = True
    return n_out


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_groups(flows, n, m, kk, fe_lo, fe_hi, e_link, e_coef, weight, resid, s, tick, lo, ib,
               size):  # fmt: skip  # pragma: no cover - compiled
    """The fill's groups: the intact kept groups as they are (their pairs' rows only), the other flows
    rebuilt into new kept groups by key (a hash of the keys' bits, :func:`_gf_order`), the store started over
    first when its pools cannot take them (then every flow is rebuilt); then the rows' lists of pairs.
    ``(local groups, rows)``; the local groups' store indices and unfrozen members are in ``ib``."""
    ks, st = s.keep, s.keep.st
    n1, m1 = n + 1, max(m, 1)
    tab, o = ib[: 2 * size], 2 * size
    order, gid, gcnt, rb = ib[o : o + n], ib[o + n : o + 2 * n], ib[o + 2 * n : o + 3 * n + 1], ib[o + 3 * n + 1 : o + 4 * n + 1]  # fmt: skip
    o += 4 * n + 1
    lg, gsize, rp_stamp, rp_pair = ib[o : o + n1], ib[o + n1 : o + 2 * n1], ib[o + 2 * n1 : o + 2 * n1 + m1], ib[o + 2 * n1 + m1 : o + 2 * n1 + 2 * m1]  # fmt: skip
    _gk_count(flows, n, ks, tick, s.flow_frozen)
    nk = _gk_intact(flows, n, kk, ks, lg, gsize)
    nrb, nk = _gk_rebuild(flows, n, kk, ks, lg, gsize, nk, rb, ks.fk, tab)
    mr = 0
    for i in range(nrb):
        mr += fe_hi[flows[rb[i]]] - fe_lo[flows[rb[i]]]
    if (
        st[2] + mr > ks.plink.shape[0]
        or st[3] + 2 * mr + nrb > ks.pool.shape[0]
        or st[1] - st[0] + nrb > ks.gsz.shape[0]
    ):
        group_store_reset(ks)  # (every id void: the whole fill rebuilt)
        st[11] += 1
        nk = 0
        for a in range(n):
            rb[a] = a
            ks.fk[a] = kk[a]
        nrb, mr = n, m
    st[7] += nrb
    st[8] += mr
    size = 64
    while size < 2 * nrb:
        size <<= 1
    tab[: 2 * size] = -1
    _gf_order(ks.fk, nrb, order, tab[: 2 * size], gid, gcnt)
    nl, npair = _gk_intact_rows(lg, nk, ks, s, resid, tick, rp_stamp)
    st[5] += nk
    st[6] += npair
    i = 0
    while i < nrb:
        i1 = i + 1
        while i1 < nrb and ks.fk[order[i1]] == ks.fk[order[i]]:  # (keys below 0 are distinct: one flow)
            i1 += 1
        nl = _gk_new_group(flows, rb, order, i, i1, fe_lo, fe_hi, e_link, e_coef, weight, resid, s, tick, lo, nl,
                           ks, nk, rp_stamp, rp_pair)  # fmt: skip
        lg[nk] = st[1] - 1 - st[0]
        gsize[nk] = i1 - i
        nk += 1
        st[9] += 1
        i = i1
    _gk_lists(lg, nk, nl, ks, s)
    return nk, nl


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_heap(n, nk, nl, lg, gsize, gfrozen, fe_lo, fe_hi, e_coef, weight, demand, rate, out_flow, out_level, s,
             ks, rm):  # fmt: skip  # pragma: no cover - compiled
    """:func:`group_fill`'s heap loop over the kept groups (links by share, a lone flow's demand level). The
    heap pops."""
    hkey, hitem, cnt = s.heap_key, s.heap_item, s.slot_count
    hn = push_link_rows(s, nl)
    for kl in range(nk):  # a flow alone with a demand, or without entries: its demand level
        gi = lg[kl]
        f = ks.pool[ks.gmlo[gi]]
        if ks.gsz[gi] == 1 and (demand[f] < np.inf or fe_hi[f] == fe_lo[f]):
            hn = heap_push(hkey, hitem, hn, demand[f] / weight[f], -1 - kl)
    n_out = 0
    pops = 0
    # Kept apart: fill_levels' freeze loop over this layout's steps (the reason beside ``fill.fill_levels``'s loop)
    while hn > 0 and n_out < n:
        k = hkey[0]
        it = hitem[0]
        hn = heap_pop(hkey, hitem, hn)
        pops += 1
        if it >= 0:  # a link: fill it, unless its share moved since it was pushed
            if cnt[it] <= 0:
                continue
            sh = _gk_share(it, s, ks, gfrozen)
            if sh != k:
                hn = heap_push(hkey, hitem, hn, sh, it)
                continue
            n_out = _gk_link(it, k, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level, n_out, s, ks, lg, gsize,
                             gfrozen, rm)  # fmt: skip
        elif not gfrozen[-1 - it]:  # a demand level: that one flow
            gfrozen[-1 - it] = True
            f = ks.pool[ks.gmlo[lg[-1 - it]]]
            n_out = _gk_freeze_flow(f, demand[f], k, fe_lo, fe_hi, e_coef, weight, rate, out_flow, out_level, n_out,
                                    s, ks)  # fmt: skip
    return pops


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gk_leave(rm, n_rm, fe_lo, fe_hi, e_coef, weight, ks):  # pragma: no cover - compiled
    """The flows a split froze (``rm[:n_rm]``) leave their kept groups: each entry's pair loses a member and its
    coefficient x weight (a pair left without members: sum 0, skipped from then on), the group a member (one
    or none left: void); the flow is in no group (rebuilt at its next fill, by its new level). The lists keep
    it (a reader skips a listed flow whose group is another)."""
    base = ks.st[0]
    for i in range(n_rm):
        f = rm[i]
        gi = ks.fgrp[f] - base
        w = weight[f]
        x0 = ks.fpl[f]
        for t in range(fe_hi[f] - fe_lo[f]):
            p = ks.pool[x0 + t]
            ks.pm0[p] -= 1
            ks.pn0[p] = 0.0 if ks.pm0[p] == 0 else ks.pn0[p] - e_coef[fe_lo[f] + t] * w
        ks.gsz[gi] -= 1
        if ks.gsz[gi] <= 1:
            ks.gsz[gi] = -1
        ks.fgrp[f] = -1


@njit(cache=True, nogil=True)
def group_fill_kept(flows, n, old_rate, fe_lo, fe_hi, e_link, e_coef, weight, demand, resid, rate, out_flow,
                    out_level, s, tick, lo):  # fmt: skip  # pragma: no cover - compiled
    """:func:`group_fill` with its groups kept from fill to fill (issue-28zn) in ``s.keep`` (a
    :class:`~ainet_gym.sim.backends.numba.fill.GroupStore`, :func:`fill_scratch`'s ``keep_flows``): a kept
    group whose members are all in this fill, still its own and at one previous level takes its pairs and
    their member lists as they are (one row update per pair, no pass over its entries); the other flows are
    grouped by previous level and rebuilt from their entries into new kept groups (an intact group at a
    rebuilt flow's level dissolved into it); a group split by a link is void after the fill. The same
    arguments and results as :func:`group_fill` (rates equal :func:`fill_levels`' to round-off: any grouping
    is the same progressive fill); a store too small for the fill hands it to :func:`group_fill`. The store's
    counters (:data:`KEEP_STATS`) are added to. Precondition: a flow's entries do not change while its group
    is kept (:func:`group_store_reset` when they may)."""
    ks = s.keep
    m = 0
    fits = n + 1 <= ks.gsz.shape[0]
    for a in range(n):
        f = flows[a]
        m += fe_hi[f] - fe_lo[f]
        fits = fits and f < ks.fgrp.shape[0]
    size = 64
    while size < 2 * n:
        size <<= 1
    m1, ib = max(m, 1), s.grp_i
    if (
        not fits or m1 + 1 > ks.plink.shape[0] or 3 * m1 + n + 1 > ks.pool.shape[0] or s.grp_f.shape[0] < n + 1
        or ib.shape[0] < 2 * size + 6 * n + 3 + 2 * m1 or s.grp_b.shape[0] < n + 1
    ):  # fmt: skip
        ks.st[13] += 1
        return group_fill(flows, n, old_rate, fe_lo, fe_hi, e_link, e_coef, weight, demand, resid, rate, out_flow,
                          out_level, s, tick, lo)  # fmt: skip
    kk = s.grp_f[: max(n, 1)]
    _gf_keys(flows, n, old_rate, weight, demand, fe_lo, fe_hi, kk)
    nk, nl = _gk_groups(flows, n, m, kk, fe_lo, fe_hi, e_link, e_coef, weight, resid, s, tick, lo, ib, size)
    ks.st[4] += 1
    o = 2 * size + 4 * n + 1
    lg, gsize, gfrozen = ib[o : o + n + 1], ib[o + n + 1 : o + 2 * n + 2], s.grp_b
    gfrozen[:nk] = False
    rm = ib[2 * size + 3 * n + 1 : 2 * size + 4 * n + 1]  # (the flows to rebuild: free after _gk_groups)
    ks.st[14] = 0
    pops = _gk_heap(n, nk, nl, lg, gsize, gfrozen, fe_lo, fe_hi, e_coef, weight, demand, rate, out_flow, out_level, s,
                    ks, rm)  # fmt: skip
    for j in range(nl):
        resid[s.slot_link[j]] = s.slot_resid[j]
    _gk_leave(rm, ks.st[14], fe_lo, fe_hi, e_coef, weight, ks)
    for a in range(n):
        ks.fa[flows[a]] = -1
    return pops
