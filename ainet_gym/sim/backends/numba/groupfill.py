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

from ainet_gym.sim.backends.numba.fill import link_row, row_offsets
from ainet_gym.sim.backends.numba.heaps import heap_pop, heap_push
from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit

__all__ = ["GROUP_STATS", "group_fill"]

#: the columns of ``FillScratch.grp_stat`` (counted over the scratch's life, never reset): fills, groups,
#: (group, link) pairs, whole-group freezes, splits, flows frozen by a split (one by one), their entries, the
#: fills' entries
GROUP_STATS = ("fills", "groups", "pairs", "whole", "splits", "split_flows", "split_entries", "entries")


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
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


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
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


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
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


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _gf_lists(npair, nl, pair_row, s):  # pragma: no cover - compiled
    """The link-major lists of the pairs: row ``j``'s pairs ``s.slot_flows[s.slot_off[j] : s.slot_off[j + 1]]``
    (its pairs counted in ``s.slot_count``)."""
    fill, adj = s.slot_fill, s.slot_flows
    row_offsets(s, nl)
    for p in range(npair):
        j = pair_row[p]
        adj[fill[j]] = p
        fill[j] += 1


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
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


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
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


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
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


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
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


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
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


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
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
    hkey, hitem, sres, den, cnt = s.heap_key, s.heap_item, s.slot_resid, s.slot_denom, s.slot_count
    hn = 0
    for j in range(nl):
        hn = heap_push(hkey, hitem, hn, sres[j] / den[j] if den[j] > 0 else np.inf, j)
    for g in range(ng):  # a flow alone with a demand, or without entries: its demand level
        a = order[glo[g]]
        f = flows[a]
        if glo[g + 1] - glo[g] == 1 and (demand[f] < np.inf or fe_hi[f] == fe_lo[f]):
            hn = heap_push(hkey, hitem, hn, demand[f] / weight[f], -1 - g)
    n_out = 0
    pops = 0
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
