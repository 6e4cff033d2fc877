"""The incremental solve of the lazy kernel: the flows a change can move, re-filled.

:func:`resolve_incremental` is the max-min allocation of :func:`run_interval_lazy` after an event, from the
last solve's. Its arguments, its rule and what it returns:

``act`` (flows,) bool: the new active set, listed in ``act_list[:n_act]``; ``gone[:n_gone]``: the flows
that left it since the last solve; ``came[:n_came]``: those that joined it (a flow may be in both: it
completed and started again); ``arr_mark[f] == mark`` marks a flow that joined since the last solve.
``rate`` holds the last solve's rates (read for the flows of the log, written for the re-filled ones).
``rstate`` (int64, 14): the freeze-log length (-1: none, the solve is a full fill), the incremental solves
since the last full fill, the link-generation, union-find and fill stamps, the parallel-rule solves,
the component rule's back-off (solves left to skip it, the last skip; :data:`COMPONENT_BACKOFF_MAX`),
the entries of the active flows, the work the solve counted (the switch's cost model), whether
``rp``'s link index holds the instance's entries (0: built at the next repair; set 0 when the entries
change), the solves the departure repair made and declined and the active flows it read. ``log_flow`` /
``log_level``: the freeze log (flows by level, nondecreasing). ``load`` / ``csum`` (the instance's
links, row ``link - lo``): the active flows' bytes/s and sums of coefficient x share weight per link,
valid where ``link_gen`` is ``rstate[2]``. The other arrays are scratch (``fs``: a :class:`FillScratch`).

Levels are weighted: flow ``f``'s level is ``rate[f] / unit_weight[f]`` (its share weight, 1 unweighted;
docs/model.md, "Share weights"), and every rule below (the restart level, the freeze log, the kept
flows, the departure repair, both fills) is in levels. ``weighted``: whether a weight differs from 1 (the
parallel rule then takes ``unit_weight``; False: its unweighted rule, bit for bit as before weights).

A full fill (no log yet, or :data:`FULL_FILL_EVERY` incremental solves since the last one) fills every
active flow on the capacities. Otherwise an event that removes flows (lowest old level ``L_d``) or adds
flows (each at a level of at least ``min(demand / weight, min over its links of capacity / sum of
coefficient x weight)``, lowest ``L_a``) changes no level below ``L = min(L_d, L_a) (1 -
RESTART_MARGIN)``: below it the progressive
filling of the new flow set is the old one step for step (a departed flow crosses no link that
saturated below its level, an arrival none that saturates below its bound). The flows at levels
``>= L`` on the capacities the lower ones leave make a max-min problem of their own, which decomposes
over the connected components of their flow-link graph: only the components of a departed or an
arrived flow are filled again.

With ``flow_order`` (:data:`REFILL_FLOW_ORDER`, issue-28zj) a solve that fills by the heap takes its flows
in flow order (:func:`_inc_sort_flows`), as a dense solve does: the fill, the loads and the caller's
per-flow progress then walk their entries in memory order, not by level. The switch's count, the
components and the selection walk the log's flows from the restart level in flow order too
(:func:`_inc_log_sorted`, :func:`_inc_select_sorted`, issue-28zk): the residuals they restore are summed
in another order.

``one_walk`` (issue-28zo; bit for bit either way, False: the walks of issue-28zk): while the component rule
backs off, the components' stamps and the selection's give-back are one walk over the log's flows
(:func:`_inc_walk_all`), and after a heap fill by :func:`fill_levels` the loads reset each of the fill's
link rows once and offer only the saturated rows' flows (:func:`_inc_loads_rows`), instead of walking every
filled flow's entries.

The flows to fill are filled by :func:`fill_levels` (a heap), or, when they are more than ``par_share``
of the active flows, by :func:`fill_parallel` (the parallel rule, at most ``par_rounds`` rounds, the
flows it leaves unfrozen then by :func:`fill_levels`): both are exact fills of the same max-min problem
(:data:`PARALLEL_SHARE`). ``rstate[5]`` counts the solves that took the parallel rule.

With ``rep_on``, an incremental solve at which flows only left is first tried by
:func:`repair_departures` (``rp``: its :class:`RepairScratch`, whose ``sat`` every solve keeps up to date
when ``rep_on``; ``f0:f1``: the instance's flows, for its link index): it re-fills only the flows that
lost every bottleneck, and the freeze log is then patched (those flows and the departed ones out, the
re-filled ones in at their new levels). When it declines, the solve re-fills from the restart level.
With ``rep_heap`` (:data:`REPAIR_LEVEL_HEAPS`, issue-28zi) every solve keeps a max-heap of the levels of
each link's active flows once the link index is built (built anew after a full fill; the departed flows
out, the filled ones keyed anew otherwise), the repair reads them instead of whole links and never
declines on its share (``REPAIR_MAX_SHARE`` does not apply), and its read counter counts a flow once per
solve, not when it is re-filled. ``rep_heap`` ``None`` (what the lazy kernel passes by default,
:data:`LEVEL_HEAPS`): off, with the heaps' code left out of the compiled solve and repair (issue-31zf2).

Returns ``(n_re, full)``: the flows filled (``refill[:n_re]``, their previous rates in
``old_rate[:n_re]``, 0 for arrivals) and whether it was a full fill; ``(-1, False)``, nothing solved,
when ``sw_on`` and the switch's cost model (:data:`LAZY_SWITCH`; ``cost``: the instance's row of
:data:`N_SWITCH` columns) finds that the predicted savings of the full path since the last hand-off
exceed ``sw_handoff`` predicted full solves: the lazy re-fill is predicted as ``sw_ratio x rho_l x`` the
entries at or above the restart level, the full solve as ``rho_f x`` the active entries ``+ n_inst +
n_act`` (the flows a full-path event scans). The caller re-solves in full, and the state here is then
stale (the next call must be a full fill, ``rstate[0] = -1``). ``rstate[9]`` receives the work the solve
counted (entries walked, the parallel rule's live entries over its rounds, a heap fill's entries and
pops, the loads and the log rewritten), and an incremental solve's work per entry at or above the level
enters ``rho_l`` (``cost[1]``).

The steps, in order on one set of scratch arrays (:func:`resolve_incremental` is their order and its two
ways out; issue-31zf2 split it): the full set (:func:`_inc_full_start`, :func:`_inc_full_set`) or the
restart level (:func:`_inc_restart_level`), the departure repair (:func:`_inc_repair`) and its log patch
(:func:`_inc_patch_log`), the log in flow order (:func:`_inc_log_sorted`) and the switch (:func:`_inc_declines`),
the components and the flows to fill (:func:`_inc_walk_log`, :func:`_inc_backoff`), the fill
(:func:`_inc_order_old`, :func:`_inc_fill`; ``grp_fill`` 1: over groups of flows at one previous level,
:func:`group_fill`, :data:`GROUP_FILL`; 2: kept, :data:`GROUP_KEEP`; ``None``: not compiled, issue-31ze2) and
the new log (:func:`merge_by_level`), the loads and the level heaps (:func:`_inc_settle`: :func:`_inc_loads`,
:func:`_inc_heaps`; ``rep_heap`` ``None``: not compiled, issue-31zf2). Those that allocate nothing are compiled
into the solve (``forceinline``); the others (:func:`_inc_log_sorted`, :func:`_inc_order_old`, :func:`_inc_fill`,
:func:`_distinct_levels`) are calls from the solve itself, as before the split: wrapped into a ``forceinline``
step, LLVM inlined them and the fill's heap (:func:`fill_levels`) into the solve, and the bench's AllToAll
intervals took about 6% more CPU (the median of 5 pairs; docs/development.md, issue-31zf2).
"""

from __future__ import annotations

import numpy as np

from ainet_gym.sim.backends.numba.fill import fill_levels, fill_parallel, merge_by_level
from ainet_gym.sim.backends.numba.groupfill import group_fill, group_fill_kept
from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit, trailing_zeros
from ainet_gym.sim.backends.numba.repair import (
    heaps_build,
    heaps_update,
    link_index,
    repair_departures,
    top_add,
)
from ainet_gym.sim.backends.numba.settings import (
    COMPONENT_BACKOFF_MAX,
    FULL_FILL_EVERY,
    PARALLEL_MAX_LEVELS,
    REFILL_FLOW_ORDER,
    REPAIR_LEVEL_HEAPS,
    REPAIR_MAX_SHARE,
    REPAIR_ONLY_TOP,
    REPAIR_RTOL,
    RESTART_MARGIN,
    SWITCH_MEAN_WEIGHT,
)

__all__ = ["LEVEL_HEAPS", "resolve_incremental"]

#: :func:`resolve_incremental`'s ``rep_heap`` as the lazy kernel passes it: ``None`` when
#: :data:`REPAIR_LEVEL_HEAPS` is off (the default: then the level heaps are not compiled into the kernel, as numba
#: prunes a branch on ``arg is not None`` for a ``None``-typed argument before typing, issue-31zf2), else True
LEVEL_HEAPS: bool | None = True if REPAIR_LEVEL_HEAPS else None


@njit(nogil=True, inline="always")
def _uf_find(uf, x):  # pragma: no cover - compiled
    """Root of ``x`` in the union-find forest ``uf`` (path halving)."""
    while uf[x] != x:
        uf[x] = uf[uf[x]]
        x = uf[x]
    return x


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_stamp(lk, tick, rstamp, uf, capacity, lo, load, resid):  # fmt: skip  # pragma: no cover - compiled
    """Link ``lk`` (local to ``lo``) at its first visit of solve ``tick``: stamped, its own union-find root,
    its residual at capacity less load (an infinite capacity stays infinite). Later visits change nothing."""
    if rstamp[lk] != tick:
        rstamp[lk] = tick
        uf[lk] = lk
        c = capacity[lo + lk]
        resid[lk] = c - load[lk] if c < np.inf else np.inf


@njit(cache=True, nogil=True)
def _distinct_levels(level, k0, k1, cap):  # pragma: no cover - compiled
    """The distinct levels of the nondecreasing ``level[k0:k1]`` (equal within 1e-12 relative: the fills'
    round-off), counted up to ``cap + 1``."""
    n = 0
    last = -1.0
    for k in range(k0, k1):
        x = level[k]
        if n == 0 or x > last * (1.0 + 1e-12):
            n += 1
            if n > cap:
                return n
            last = x
    return n


@njit(cache=True, nogil=True, _nrt=False)
def first_at_least(level, n, x):  # pragma: no cover - compiled
    """The first index ``k`` of the nondecreasing ``level[:n]`` with ``level[k] >= x`` (``n`` if none): a
    binary search, as ``np.searchsorted(level[:n], x)`` finds it."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if level[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_full_set(
    n_act, act_list, fe_lo, fe_hi, e_link, e_coef, capacity, lo, unit_weight, refill, resid, csum, link_gen, gen,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s full fill: every active flow to fill (``refill``), on its links'
    capacities (``resid``), their sums of coefficient x weight (``csum``) counted anew (``link_gen`` =
    ``gen``). The active entries."""
    e_act = 0
    for k in range(n_act):
        f = act_list[k]
        e_act += fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            if link_gen[lk] != gen:
                link_gen[lk] = gen
                resid[lk] = capacity[lo + lk]
                csum[lk] = 0.0
            csum[lk] += e_coef[e] * unit_weight[f]
        refill[k] = f
    return e_act


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_restart_level(
    n_gone, gone, n_came, came, rate, unit_weight, dcap, fe_lo, fe_hi, e_link, e_coef, capacity, lo, csum, load,
    link_gen, gen, rstate,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s restart level ``L`` (a level, rate / weight), below which no rate
    changes: the least old level of the departed flows and the least bound of the arrivals (its least equal
    share level, or its demand's), less :data:`RESTART_MARGIN`; the links' sums of coefficient x weight
    (``csum``) and the active entries (``rstate[8]``) follow the departures and arrivals. ``(L, the
    arrivals' entries)``."""
    lev = np.inf
    e_came = 0
    for k in range(n_gone):
        f = gone[k]
        lev = min(lev, rate[f] / unit_weight[f])
        rstate[8] -= fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            csum[e_link[e] - lo] -= e_coef[e] * unit_weight[f]
    for k in range(n_came):
        f = came[k]
        rstate[8] += fe_hi[f] - fe_lo[f]
        e_came += fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            if link_gen[lk] != gen:  # a link no active flow crossed since the full fill
                link_gen[lk] = gen
                csum[lk] = 0.0
                load[lk] = 0.0
            csum[lk] += e_coef[e] * unit_weight[f]
    for k in range(n_came):  # a flow's level is at least its least equal share level (or its demand's)
        f = came[k]
        x = dcap[f] / unit_weight[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            y = capacity[lo + lk] / csum[lk] if csum[lk] > 0 else np.inf
            if y < x:
                x = y
        if x < lev:
            lev = x
    return lev * (1.0 - RESTART_MARGIN), e_came


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_patch_log(
    n_r, lev, n_log, act, old_rate, refill, out_flow, out_level, unit_weight, log_flow, log_level, keep_flow,
    keep_level, rp, rstate, work,
):  # fmt: skip  # pragma: no cover - compiled
    """After a departure repair of :func:`resolve_incremental` that re-filled ``n_r`` flows: the freeze log
    patched (the departed and re-filled flows out, the re-filled ones in at their new levels, from the
    least level either had, less :data:`RESTART_MARGIN`), and the solve's state (``rstate``: log length,
    solves since a full fill, the work)."""
    tick = rstate[3]
    m = lev
    for k in range(n_r):
        x = min(old_rate[k] / unit_weight[refill[k]], out_level[k]) * (1.0 - RESTART_MARGIN)
        if x < m:
            m = x
    kk = first_at_least(log_level, n_log, m)
    n_keep = 0
    for k in range(kk, n_log):
        f = log_flow[k]
        if act[f] and rp.fmark[f] != tick:
            keep_flow[n_keep] = f
            keep_level[n_keep] = log_level[k]
            n_keep += 1
    merge_by_level(keep_flow, keep_level, n_keep, out_flow, out_level, n_r, log_flow, log_level, kk)
    rstate[0] = kk + n_keep + n_r
    rstate[1] += 1
    rstate[9] = work + n_log - kk + n_r


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_declines(
    k0, n_log, log_flow, log_level, fe_lo, fe_hi, e_above, par_levels, sw_on, cost, rstate, n_inst, n_act,
    sw_ratio, sw_handoff,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s switch (:data:`LAZY_SWITCH`): the entries at or above the restart level
    (the log from ``k0``, the departed flows' all there, plus the arrivals' ``e_above``) as the lazy
    re-fill against a full solve; the full path's savings summed in ``cost[2]``, and above ``sw_handoff``
    predicted full solves it declines. ``(entries above, distinct levels above (0: not counted), declines)``."""
    for k in range(k0, n_log):
        f = log_flow[k]
        e_above += fe_hi[f] - fe_lo[f]
    n_lev = 0
    if par_levels < n_log - k0:
        n_lev = _distinct_levels(log_level, k0, n_log, par_levels)
    if sw_on:
        p_full = cost[0] * rstate[8] + n_inst + n_act
        acc = cost[2] + sw_ratio * cost[1] * e_above - p_full
        cost[2] = acc if acc > 0.0 else 0.0
        if acc > sw_handoff * p_full:
            cost[2] = 0.0
            return e_above, n_lev, True
    return e_above, n_lev, False


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_components(
    k0, n_log, n_came, log_flow, came, act, arr_mark, mark, fe_lo, fe_hi, e_link, capacity, lo, load, resid, uf,
    seed, rstamp, tick, use_cc,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`: the links of the flows at or above the restart level (the log from
    ``k0``, departed ones included, and the arrivals) stamped ``tick`` with their residuals at capacity less
    load; with ``use_cc``, their connected components (union-find ``uf`` over the links) and the roots of
    the components of a departed or an arrived flow (``seed`` = ``tick``): only those change. ``log_flow``
    may be those flows in any order (with ``flow_order``, in flow order: :func:`_inc_log_sorted`); the
    components and the stamped links do not depend on it."""
    for k in range(k0, n_log + n_came):
        f = log_flow[k] if k < n_log else came[k - n_log]
        r0 = -1
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            _inc_stamp(lk, tick, rstamp, uf, capacity, lo, load, resid)
            if not use_cc:
                continue
            if r0 < 0:
                r0 = _uf_find(uf, lk)
            else:
                r1 = _uf_find(uf, lk)
                if r1 != r0:
                    uf[r1] = r0
    if use_cc:
        for k in range(k0, n_log + n_came):  # the components of the departed and arrived flows
            f = log_flow[k] if k < n_log else came[k - n_log]
            if (k >= n_log or not act[f] or arr_mark[f] == mark) and fe_hi[f] > fe_lo[f]:
                seed[_uf_find(uf, e_link[fe_lo[f]] - lo)] = tick


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_give_back(
    f, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link, e_coef, lo, resid, uf, seed, tick, use_cc
):  # fmt: skip  # pragma: no cover - compiled
    """One log flow ``f`` of :func:`_inc_select` / :func:`_inc_select_sorted`: hit (its component was seeded at
    ``tick``, or every flow while ``use_cc`` is false) or gone (departed, or re-arrived as a came flow); a hit
    or gone flow's use goes back on the residuals (its entries in memory order). ``(hit, gone)``."""
    hit = not use_cc or (fe_hi[f] > fe_lo[f] and seed[_uf_find(uf, e_link[fe_lo[f]] - lo)] == tick)
    gone_f = not act[f] or arr_mark[f] == mark  # (re-arrived: a came flow)
    if hit or gone_f:
        r = rate[f]
        for e in range(fe_lo[f], fe_hi[f]):
            use = e_coef[e] * r
            if np.isfinite(use):
                resid[e_link[e] - lo] += use
    return hit, gone_f


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_select(
    k0, n_log, n_came, log_flow, log_level, came, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link, e_coef, lo,
    resid, uf, seed, tick, use_cc, refill, keep_flow, keep_level,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`: the flows of the log from ``k0`` in a changed component (every one while
    the component rule backs off, ``use_cc`` false) and the arrivals are filled again (``refill``) on the
    residuals plus what they and the departed flows used; the others keep their rates and levels
    (``keep_flow``, ``keep_level``). ``(to fill, kept)``."""
    n_re = 0
    n_keep = 0
    for k in range(k0, n_log):
        f = log_flow[k]
        hit, gone_f = _inc_give_back(
            f, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link, e_coef, lo, resid, uf, seed, tick, use_cc
        )
        if gone_f:
            continue
        if hit:
            refill[n_re] = f
            n_re += 1
        else:
            keep_flow[n_keep] = f
            keep_level[n_keep] = log_level[k]
            n_keep += 1
    for k in range(n_came):
        refill[n_re] = came[k]
        n_re += 1
    return n_re, n_keep


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_select_sorted(
    n_s, srt, k0, n_log, n_came, log_flow, log_level, came, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link, e_coef,
    lo, resid, uf, seed, tick, use_cc, refill, keep_flow, keep_level, fmark, old_rate,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`_inc_select` with the log's flows from ``k0`` walked in flow order (``srt[:n_s]``,
    :func:`_inc_log_sorted`; :data:`REFILL_FLOW_ORDER`, issue-28zk): what the flows to fill and the departed
    ones used goes back on the residuals in flow order (their entries in memory order), the flows to fill
    are stamped ``fmark = tick``, and the kept flows are then read off the log in level order by that stamp.
    The same flows to fill (in flow order, then the arrivals) and kept flows (in level order) as
    :func:`_inc_select`; the residuals summed in another order. Each flow to fill's previous rate goes to
    ``old_rate`` (0 for the arrivals; issue-28zp). ``(to fill, kept)``."""
    n_re = 0
    for k in range(n_s):
        f = srt[k]
        hit, gone_f = _inc_give_back(
            f, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link, e_coef, lo, resid, uf, seed, tick, use_cc
        )
        if hit and not gone_f:
            refill[n_re] = f
            old_rate[n_re] = rate[f]
            fmark[f] = tick
            n_re += 1
    n_keep = 0
    if use_cc:
        for k in range(k0, n_log):
            f = log_flow[k]
            if act[f] and arr_mark[f] != mark and fmark[f] != tick:
                keep_flow[n_keep] = f
                keep_level[n_keep] = log_level[k]
                n_keep += 1
    for k in range(n_came):
        refill[n_re] = came[k]
        old_rate[n_re] = 0.0
        n_re += 1
    return n_re, n_keep


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_walk_all(
    n_s, srt, n_came, came, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link, e_coef, capacity, lo, load, resid, uf,
    rstamp, tick, refill, fmark, old_rate,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`_inc_walk_log` in flow order while the component rule backs off (issue-28zo): every flow of the
    log from the restart level is filled again, so :func:`_inc_components`' stamps and
    :func:`_inc_select_sorted`'s give-back are one walk over ``srt[:n_s]``'s entries, not two. A link is
    stamped ``tick`` with its residual at capacity less load at its first visit, before any flow's use goes
    back on it, and the uses go back in the same order (flow order, entries in memory order): the residuals,
    stamps, flows to fill and their ``fmark`` are bit for bit those of the two walks. Each flow to fill's
    previous rate goes to ``old_rate`` (0 for the arrivals; issue-28zp). ``(to fill, 0)``."""
    n_re = 0
    for k in range(n_s + n_came):
        f = srt[k] if k < n_s else came[k - n_s]
        r = rate[f]
        give = k < n_s  # (a log flow: its use goes back; an arrival's links are only stamped)
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            _inc_stamp(lk, tick, rstamp, uf, capacity, lo, load, resid)
            if give:
                use = e_coef[e] * r
                if np.isfinite(use):
                    resid[lk] += use
        if not give:
            refill[n_re] = f
            old_rate[n_re] = 0.0
            n_re += 1
        elif act[f] and arr_mark[f] != mark:  # (not departed, not re-arrived as a came flow)
            refill[n_re] = f
            old_rate[n_re] = r
            fmark[f] = tick
            n_re += 1
    return n_re, 0


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_walk_log(
    flow_order, one_walk, k0, n_log, n_came, log_flow, log_level, came, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link, e_coef,
    capacity, lo, load, resid, uf, seed, rstamp, tick, use_cc, refill, keep_flow, keep_level, srt, fmark, old_rate,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s components (:func:`_inc_components`) and flows to fill: with
    ``flow_order``, the log's flows from ``k0`` walked in flow order (``srt``, :func:`_inc_log_sorted`;
    :func:`_inc_select_sorted`), else in level order (:func:`_inc_select`). ``(to fill, kept)``."""
    if flow_order:
        n_s = n_log - k0
        if one_walk and not use_cc:  # (every log flow from k0 filled again: one walk, issue-28zo)
            return _inc_walk_all(n_s, srt, n_came, came, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link, e_coef,
                                 capacity, lo, load, resid, uf, rstamp, tick, refill, fmark, old_rate)  # fmt: skip
        _inc_components(0, n_s, n_came, srt, came, act, arr_mark, mark, fe_lo, fe_hi, e_link, capacity, lo, load,
                        resid, uf, seed, rstamp, tick, use_cc)  # fmt: skip
        return _inc_select_sorted(n_s, srt, k0, n_log, n_came, log_flow, log_level, came, act, arr_mark, mark, rate,
                                  fe_lo, fe_hi, e_link, e_coef, lo, resid, uf, seed, tick, use_cc, refill, keep_flow,
                                  keep_level, fmark, old_rate)  # fmt: skip
    _inc_components(k0, n_log, n_came, log_flow, came, act, arr_mark, mark, fe_lo, fe_hi, e_link, capacity, lo, load,
                    resid, uf, seed, rstamp, tick, use_cc)  # fmt: skip
    return _inc_select(k0, n_log, n_came, log_flow, log_level, came, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link,
                       e_coef, lo, resid, uf, seed, tick, use_cc, refill, keep_flow, keep_level)  # fmt: skip


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_backoff(use_cc, n_keep, rstate):  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s back-off of the component rule (``rstate[6]``: solves left to skip it,
    ``rstate[7]``: the last skip): a solve that skipped it counts down; one that used it and kept no flow
    skips it for the next 1, 2, 4, ... solves (at most :data:`COMPONENT_BACKOFF_MAX`)."""
    if not use_cc:
        rstate[6] -= 1
    elif n_keep == 0:
        rstate[7] = min(2 * rstate[7] + 1, COMPONENT_BACKOFF_MAX)
        rstate[6] = rstate[7]
    else:
        rstate[7] = 0


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _id_range(refill, n_re):  # pragma: no cover - compiled
    """The smallest and the largest flow id of ``refill[:n_re]`` (``n_re >= 1``)."""
    f_lo = refill[0]
    f_hi = refill[0]
    for k in range(n_re):
        f = refill[k]
        if f < f_lo:
            f_lo = f
        if f > f_hi:
            f_hi = f
    return f_lo, f_hi


@njit(nogil=True, **COMPILED_ONLY)
def _inc_flow_order(refill, n_re):  # pragma: no cover - compiled
    """``refill[:n_re]`` in flow order (their entries in memory order), for the parallel rule. The work
    counted: the flow range walked and the rule's rows allocated."""
    f_lo, f_hi = _id_range(refill, n_re)
    pick = np.zeros(f_hi - f_lo + 1, dtype=np.bool_)
    for k in range(n_re):
        pick[refill[k] - f_lo] = True
    k = 0
    for f in range(f_lo, f_hi + 1):
        if pick[f - f_lo]:
            refill[k] = f
            k += 1
    return f_hi - f_lo + 1 + 7 * n_re


@njit(nogil=True, **COMPILED_ONLY)
def _inc_sort_flows(refill, n_re):  # pragma: no cover - compiled
    """``refill[:n_re]`` (distinct flows) in flow order, by a bit set over their id range: O(n_re + range /
    64), for the heap fill of a restart solve (:data:`REFILL_FLOW_ORDER`). The work counted: the words
    scanned and the flows placed."""
    f_lo, f_hi = _id_range(refill, n_re)
    nw = ((f_hi - f_lo) >> 6) + 1
    bits = np.zeros(nw, dtype=np.uint64)
    one = np.uint64(1)
    for k in range(n_re):
        d = refill[k] - f_lo
        bits[d >> 6] |= one << np.uint64(d & 63)
    k = 0
    for w in range(nw):
        x = bits[w]
        while x != 0:
            refill[k] = f_lo + (w << 6) + trailing_zeros(x)
            k += 1
            x &= x - one
    return nw + 2 * n_re


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_sort_work(dense, refill, n_re):  # pragma: no cover - compiled
    """The work :func:`_inc_flow_order` (``dense``) or :func:`_inc_sort_flows` counts for ``refill[:n_re]``
    (``n_re >= 1``) when those flows are already in flow order: their id range from the first and the last."""
    d = refill[n_re - 1] - refill[0]
    return d + 1 + 7 * n_re if dense else (d >> 6) + 1 + 2 * n_re


@njit(nogil=True, **COMPILED_ONLY)
def _inc_order_old(dense, in_order, flow_order, refill, n_re, arr_mark, mark, rate, old_rate):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s flows to fill ``refill[:n_re]`` in flow order (``dense``:
    :func:`_inc_flow_order`; else with ``flow_order``, :func:`_inc_sort_flows`, issue-28zj) and their previous
    rates in ``old_rate`` (0 for the arrivals). ``in_order`` (issue-28zp): a restart solve in flow order at
    which nothing arrived, whose walk (:func:`_inc_walk_all`, :func:`_inc_select_sorted`) gave the flows in
    flow order with their previous rates: neither is done again, the sort's work is counted as if it ran
    (the same order, so bit for bit). The work."""
    if in_order:
        return _inc_sort_work(dense, refill, n_re) if n_re > 1 else 0
    work = 0
    if dense and n_re > 1:  # many flows: in flow order (their entries in memory order), not by level
        work += _inc_flow_order(refill, n_re)
    elif flow_order and n_re > 1:  # the heap fill, the loads and progress in flow order too (issue-28zj)
        work += _inc_sort_flows(refill, n_re)
    for k in range(n_re):
        f = refill[k]
        old_rate[k] = 0.0 if arr_mark[f] == mark else rate[f]  # arrivals: from 0
    return work


@njit(nogil=True, **COMPILED_ONLY)
def _inc_log_sorted(log_flow, k0, n_log, srt):  # pragma: no cover - compiled
    """The flows of the freeze log from ``k0`` (``log_flow[k0:n_log]``, distinct) in flow order into
    ``srt[: n_log - k0]`` (:func:`_inc_sort_flows`). The work counted."""
    n_s = n_log - k0
    for k in range(n_s):
        srt[k] = log_flow[k0 + k]
    return _inc_sort_flows(srt, n_s) if n_s > 1 else n_s


@njit(nogil=True, **COMPILED_ONLY)
def _inc_fill(
    dense, refill, n_re, fe_lo, fe_hi, e_link, e_coef, dcap, resid, rate, par_rounds, lo, out_flow, out_level,
    unit_weight, weighted, fs, rstate, grp_fill, old_rate,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s fill of ``refill[:n_re]`` on ``resid``: by the heap
    (:func:`fill_levels`; ``grp_fill`` 1 or True: over the groups of the flows at one previous level
    ``old_rate``, :func:`group_fill`, issue-28zm; 2: over groups kept from fill to fill, :func:`group_fill_kept`,
    issue-28zn; ``None`` or 0: flow by flow), or, ``dense``, the parallel rule's first rounds
    (:func:`fill_parallel`) and the rest by the heap, its freeze order merged with the rule's (``out_flow``,
    ``out_level``). The work. ``grp_fill`` ``None`` (its type, not its value) leaves the group fills out of the
    compiled code: numba prunes the branch ``grp_fill is not None`` on a ``None``-typed argument before typing
    (issue-31ze2: they cost the lazy path's cold start 23 s of compiling with both off)."""
    work = 0
    if dense:
        rstate[5] += 1
        n_done, n_rest, rest, pw = fill_parallel(refill, n_re, fe_lo, fe_hi, e_link, e_coef, dcap, resid, rate, par_rounds,
                                                 lo, out_flow, out_level, unit_weight if weighted else unit_weight[:0])  # fmt: skip
        work += pw
        if n_rest > 0:
            h_flow = np.empty(n_rest, dtype=np.int64)
            h_level = np.empty(n_rest)
            work += fill_levels(rest, n_rest, fe_lo, fe_hi, e_link, e_coef, unit_weight, dcap, resid, rate,
                                h_flow, h_level, fs, rstate[4], lo)  # fmt: skip
            for k in range(n_rest):
                work += fe_hi[rest[k]] - fe_lo[rest[k]]
            rstate[4] += 1
            p_flow = out_flow[:n_done].copy()
            p_level = out_level[:n_done].copy()
            merge_by_level(p_flow, p_level, n_done, h_flow, h_level, n_rest, out_flow, out_level, 0)
    else:
        grouped = False
        if grp_fill is not None:  # (pruned when None: the group fills not compiled)
            grouped = grp_fill != 0
            if grp_fill == 2:  # (issue-28zn: the groups kept from fill to fill)
                work += group_fill_kept(refill, n_re, old_rate, fe_lo, fe_hi, e_link, e_coef, unit_weight, dcap,
                                        resid, rate, out_flow, out_level, fs, rstate[4], lo)  # fmt: skip
            elif grp_fill:
                work += group_fill(refill, n_re, old_rate, fe_lo, fe_hi, e_link, e_coef, unit_weight, dcap, resid,
                                   rate, out_flow, out_level, fs, rstate[4], lo)  # fmt: skip
        if grouped:
            for k in range(n_re):
                work += fe_hi[refill[k]] - fe_lo[refill[k]]
        else:
            work += fill_levels(refill, n_re, fe_lo, fe_hi, e_link, e_coef, unit_weight, dcap, resid, rate,
                                out_flow, out_level, fs, rstate[4], lo)  # fmt: skip
            work += fs.flow_off[n_re]  # (the filled flows' entries, which fill_levels counted; issue-28zp)
        rstate[4] += 1
    return work


@njit(nogil=True, forceinline=True, **COMPILED_ONLY)
def _inc_heaps(
    full, rp, n_links, n_gone, gone, n_re, refill, act, rate, unit_weight, fe_lo, fe_hi, e_link, lo, capacity, load
):  # fmt: skip  # pragma: no cover - compiled
    """After a solve with ``rep_heap`` (:data:`REPAIR_LEVEL_HEAPS`): the per-link level heaps built anew after
    a full fill (:func:`heaps_build`), else updated for the departed flows ``gone[:n_gone]`` and the filled
    ones ``refill[:n_re]`` (:func:`heaps_update`). The work counted."""
    if full:
        return heaps_build(rp, n_links, act, rate, unit_weight, True)
    return heaps_update(
        rp, n_gone, gone, n_re, refill, act, rate, unit_weight, fe_lo, fe_hi, e_link, lo, capacity, load
    )


@njit(nogil=True, forceinline=True, **COMPILED_ONLY)
def _inc_repair(
    act, rate, gone, n_gone, fe_lo, fe_hi, e_link, e_coef, capacity, lo, dcap, unit_weight, resid, rstamp, load,
    rstate, refill, old_rate, out_flow, out_level, fs, rp, f0, f1, n_act, n_above, rep_top, rep_heap,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s departure repair: the link-major index of the instance's entries (once
    per interval, ``rstate[10]``), :func:`repair_departures` (re-filling at most :data:`REPAIR_MAX_SHARE` of
    the ``n_above`` flows of the log at or above the restart level; with the level heaps any number), and with
    ``rep_heap`` the level heaps after a repair made (:func:`_inc_heaps`; ``rep_heap`` ``None``: the heaps not
    compiled, issue-31zf2). Returns ``(n_r, work)``: the flows re-filled (-1: declined)."""
    work = 0
    limit = int(REPAIR_MAX_SHARE * n_above)
    if rep_heap is not None and rep_heap:  # (pruned when None)
        limit = n_act + 1
    if rstate[10] == 0:
        work += link_index(
            rp, f0, f1, fe_lo, fe_hi, e_link, lo, resid.shape[0], act, rate, unit_weight, rep_heap
        )
        rstate[10] = 1
    n_r, rw = repair_departures(
        act, rate, gone, n_gone, fe_lo, fe_hi, e_link, e_coef, capacity, lo, dcap, unit_weight, resid, rstamp, load,
        rstate, refill, old_rate, out_flow, out_level, fs, rp, limit, rep_top, rep_heap,
    )  # fmt: skip
    work += rw
    # (pruned when None; the index is built: the level heaps follow the departures and re-fills)
    if rep_heap is not None and rep_heap and n_r >= 0:
        work += _inc_heaps(False, rp, resid.shape[0], n_gone, gone, n_r, refill, act, rate, unit_weight, fe_lo, fe_hi,
                           e_link, lo, capacity, load)  # fmt: skip
    return n_r, work


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_link_reset(lk, lo, capacity, resid, load, sat, top_n):  # pragma: no cover - compiled
    """:func:`_inc_loads`: link row ``lk``'s load after a fill (capacity less residual; 0 on an unlimited
    link), its ``sat`` not known (-1) and its list empty."""
    c = capacity[lo + lk]
    load[lk] = c - resid[lk] if c < np.inf else 0.0
    sat[lk] = -1.0
    top_n[lk] = 0


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_link_offer(lk, f, lv, lo, capacity, resid, rp, listed):  # pragma: no cover - compiled
    """:func:`_inc_loads`: filled flow ``f`` at level ``lv`` offered to link row ``lk`` when the link is
    saturated: its ``sat`` the largest level so far and, ``listed``, the flows at it (:func:`top_add`)."""
    c = capacity[lo + lk]
    if c < np.inf and resid[lk] <= REPAIR_RTOL * c:
        if listed:
            nt, m = top_add(rp.top_flow, rp.adj_off[lk], rp.top_n[lk], f, lv, rp.sat[lk])
            rp.top_n[lk] = nt
            rp.sat[lk] = m
        elif lv > rp.sat[lk]:
            rp.sat[lk] = lv


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_loads_rows(
    n_re, refill, rate, unit_weight, fe_lo, fe_hi, capacity, lo, resid, load, rp, listed, lev, fs
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`_inc_loads` of a restart solve that filled by :func:`fill_levels` (issue-28zo), after the departed
    flows' links were reset: the fill's local rows (``fs``) are the links of the filled flows, each once, so
    each is reset once (not at each entry), and only the saturated rows' lists (the filled flows on the row,
    in ``refill`` order, as the walk over the flows offered them) are offered. Each link sees the same resets
    and offers in the same order as in the walk over every filled flow's entries: ``load``, ``sat`` and the
    lists are bit for bit the same. The work counted as there (the filled flows' entries twice)."""
    sat, top_n = rp.sat, rp.top_n
    nl = fs.n_rows[0]
    slot_link, off, adj = fs.slot_link, fs.slot_off, fs.slot_flows
    work = 0
    for j in range(nl):
        _inc_link_reset(slot_link[j], lo, capacity, resid, load, sat, top_n)
    low = np.inf  # the lowest level filled
    for k in range(n_re):
        f = refill[k]
        low = min(low, rate[f] / unit_weight[f])
        work += 2 * (fe_hi[f] - fe_lo[f])
    for j in range(nl):
        lk = slot_link[j]
        c = capacity[lo + lk]
        if c < np.inf and resid[lk] <= REPAIR_RTOL * c:
            for q in range(off[j], off[j + 1]):
                f = refill[adj[q]]
                _inc_link_offer(lk, f, rate[f] / unit_weight[f], lo, capacity, resid, rp, listed)
    near = lev * (1.0 + REPAIR_RTOL)
    if listed and low * (1.0 - REPAIR_RTOL) <= near:  # a link's level may be within round-off of lev
        for j in range(nl):
            lk = slot_link[j]
            if sat[lk] >= 0.0 and sat[lk] * (1.0 - REPAIR_RTOL) <= near:
                top_n[lk] = -1
    return work


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_loads(
    full, rep_on, n_act, act_list, n_re, refill, n_gone, gone, rate, unit_weight, fe_lo, fe_hi, e_link, capacity,
    lo, resid, load, rp, listed, lev, rstamp, tick, fs, by_rows,
):  # fmt: skip  # pragma: no cover - compiled
    """After :func:`resolve_incremental`'s fill: the loads of the links the solve touched (every active
    flow's after a full fill; else the filled and departed flows'), their ``sat`` reset, then (``rep_on``)
    the saturated links of the filled flows set to the largest level among them (:class:`RepairScratch`)
    and, when the link index is built (``listed``), the filled flows at that level listed (``rp.top_*``).
    The other active flows on such a link are below the restart level ``lev`` (-inf after a full fill):
    the list holds every flow at the link's level unless that level is within round-off of ``lev`` (then
    not known, -1). The work (the entries of the filled flows counted twice, as when they were walked twice).

    A restart solve (``tick >= 0``: its component step stamped every link of the filled flows ``tick`` in
    ``rstamp``) walks the filled flows' entries once (issue-28zj): the departed flows' links are reset
    first, then each link of a filled flow at its first visit (``rstamp`` set to -1: reset), before the
    flow is offered to it. Every link is reset before any flow is offered to it and the flows are offered
    in the same order as in two walks (all resets, then the offers), so ``sat`` and the lists are bit for
    bit the same; the loads are read from the residuals, which the walk does not change. ``by_rows``: such a
    solve filled by :func:`fill_levels` alone, whose rows ``fs`` holds (:func:`_inc_loads_rows`, issue-28zo)."""
    sat, top_n = rp.sat, rp.top_n
    work = 0
    one = rep_on and not full and tick >= 0
    n = n_act if full else (n_gone if one else n_re + n_gone)
    for k in range(n):
        if full:
            f = act_list[k]
        else:
            f = gone[k] if one else (refill[k] if k < n_re else gone[k - n_re])
            work += fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            _inc_link_reset(e_link[e] - lo, lo, capacity, resid, load, sat, top_n)
    if one and by_rows:
        return work + _inc_loads_rows(n_re, refill, rate, unit_weight, fe_lo, fe_hi, capacity, lo, resid, load, rp,
                                      listed, lev, fs)  # fmt: skip
    if rep_on:
        low = np.inf  # the lowest level filled
        for k in range(n_re):
            f = refill[k]
            lv = rate[f] / unit_weight[f]
            low = min(low, lv)
            work += (2 if one else 1) * (fe_hi[f] - fe_lo[f])
            for e in range(fe_lo[f], fe_hi[f]):
                lk = e_link[e] - lo
                if one and rstamp[lk] == tick:  # (its first visit: reset)
                    rstamp[lk] = -1
                    _inc_link_reset(lk, lo, capacity, resid, load, sat, top_n)
                _inc_link_offer(lk, f, lv, lo, capacity, resid, rp, listed)
        near = lev * (1.0 + REPAIR_RTOL)
        if listed and low * (1.0 - REPAIR_RTOL) <= near:  # a link's level may be within round-off of lev
            for k in range(n_re):
                f = refill[k]
                for e in range(fe_lo[f], fe_hi[f]):
                    lk = e_link[e] - lo
                    if sat[lk] >= 0.0 and sat[lk] * (1.0 - REPAIR_RTOL) <= near:
                        top_n[lk] = -1
    return work


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _inc_full_start(
    n_log, log_level, par_levels, n_act, act_list, fe_lo, fe_hi, e_link, e_coef, capacity, lo, unit_weight, refill,
    resid, csum, link_gen, rstate,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s full fill set up: a new link generation (``rstate[2]``), the distinct levels
    of the last solve's log when it is a periodic full fill (0: not known, a first fill), every active flow to
    fill on the capacities (:func:`_inc_full_set`; ``rstate[8]``: the active entries). ``(levels, work)``."""
    rstate[2] += 1
    n_lev = 0
    if n_log >= 0 and par_levels < n_log:  # a periodic full fill: the levels of the last solve's log
        n_lev = _distinct_levels(log_level, 0, n_log, par_levels)
    rstate[8] = _inc_full_set(n_act, act_list, fe_lo, fe_hi, e_link, e_coef, capacity, lo, unit_weight, refill,
                              resid, csum, link_gen, rstate[2])  # fmt: skip
    return n_lev, rstate[8]


@njit(nogil=True, forceinline=True, **COMPILED_ONLY)
def _inc_settle(
    full, rows, rep_on, rep_heap, n_act, act_list, n_re, refill, n_gone, gone, act, rate, unit_weight, fe_lo, fe_hi,
    e_link, capacity, lo, resid, load, rp, lev, rstamp, fs, rstate, cost, e_above, work,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental` after the fill: the loads (:func:`_inc_loads`; ``rows``: by the fill's link
    rows), with ``rep_heap`` the level heaps (:func:`_inc_heaps`; ``None``: not compiled, issue-31zf2), the
    solves since a full fill (``rstate[1]``), an incremental solve's work per entry at or above the restart
    level into ``cost[1]`` and the solve's work into ``rstate[9]``."""
    work += _inc_loads(full, rep_on, n_act, act_list, n_re, refill, n_gone, gone, rate, unit_weight, fe_lo, fe_hi,
                       e_link, capacity, lo, resid, load, rp, rstate[10] == 1, lev, rstamp, -1 if full else rstate[3], fs,
                       rows)  # fmt: skip
    # (pruned when None) the level heaps: built anew after a full fill, else updated
    if rep_heap is not None and rep_heap and rep_on and rstate[10] == 1:
        work += _inc_heaps(full, rp, resid.shape[0], n_gone, gone, n_re, refill, act, rate, unit_weight, fe_lo, fe_hi,
                           e_link, lo, capacity, load)  # fmt: skip
    rstate[1] = 0 if full else rstate[1] + 1
    if not full and e_above > 0:
        cost[1] += SWITCH_MEAN_WEIGHT * (work / e_above - cost[1])
    rstate[9] = work


@njit(cache=True, nogil=True)
def resolve_incremental(
    act, arr_mark, mark, act_list, n_act, gone, n_gone, came, n_came, fe_lo, fe_hi, e_link, e_coef, capacity,
    lo, dcap, unit_weight, rate, old_rate, refill, keep_flow, keep_level, log_flow, log_level, out_flow,
    out_level, fs, uf, seed, resid, rstamp, load, csum, link_gen, rstate, par_share, par_rounds, sw_on,
    sw_ratio, sw_handoff, n_inst, cost, rp, f0, f1, rep_on, rep_top=REPAIR_ONLY_TOP, par_levels=PARALLEL_MAX_LEVELS, weighted=False,
    rep_heap=LEVEL_HEAPS, flow_order=REFILL_FLOW_ORDER, grp_fill=None, one_walk=True,
):  # fmt: skip  # pragma: no cover - compiled (callable from Python too: tests/sim/test_incremental.py)
    """The max-min rates of the active flows after an event, from the last solve's: the allocation of
    :func:`run_interval_lazy` (a function of its own, so that tests drive it event by event). The module
    docstring says what the arguments hold, why the solve is exact and what each rule does; this is the order
    of its steps: the full set (:func:`_inc_full_start`) or the restart level (:func:`_inc_restart_level`), the
    departure repair (:func:`_inc_repair`) and its log patch (:func:`_inc_patch_log`), the log in flow order
    (:func:`_inc_log_sorted`) and the switch (:func:`_inc_declines`), the components and the flows to fill
    (:func:`_inc_walk_log`, :func:`_inc_backoff`), the fill (:func:`_inc_order_old`, :func:`_inc_fill`) and the
    log (:func:`merge_by_level`), the loads and the level heaps (:func:`_inc_settle`).

    Returns ``(n_re, full)``: the flows filled (``refill[:n_re]``, their previous rates in ``old_rate[:n_re]``,
    0 for arrivals) and whether it was a full fill; ``(-1, False)``, nothing solved, when the switch declines
    (the caller re-solves in full; the next call must be a full fill, ``rstate[0] = -1``)."""
    n_log = rstate[0]
    full = n_log < 0 or rstate[1] >= FULL_FILL_EVERY
    lev = -np.inf  # the restart level (a full fill: none)
    if full:
        n_lev, work = _inc_full_start(n_log, log_level, par_levels, n_act, act_list, fe_lo, fe_hi, e_link, e_coef,
                                      capacity, lo, unit_weight, refill, resid, csum, link_gen, rstate)  # fmt: skip
        n_re, n_keep, k0, e_above = n_act, 0, 0, 0
    else:
        lev, e_above = _inc_restart_level(n_gone, gone, n_came, came, rate, unit_weight, dcap, fe_lo, fe_hi, e_link,
                                          e_coef, capacity, lo, csum, load, link_gen, rstate[2], rstate)  # fmt: skip
        k0 = first_at_least(log_level, n_log, lev)  # the first flow of the log at a level >= lev
        work = 0
        if rep_on and n_came == 0 and n_gone > 0:  # flows only left: re-fill those that lost every bottleneck
            n_r, work = _inc_repair(act, rate, gone, n_gone, fe_lo, fe_hi, e_link, e_coef, capacity, lo, dcap,
                                    unit_weight, resid, rstamp, load, rstate, refill, old_rate, out_flow, out_level, fs,
                                    rp, f0, f1, n_act, n_log - k0, rep_top, rep_heap)  # fmt: skip
            if n_r >= 0:
                _inc_patch_log(n_r, lev, n_log, act, old_rate, refill, out_flow, out_level, unit_weight, log_flow,
                               log_level, keep_flow, keep_level, rp, rstate, work)  # fmt: skip
                return n_r, False
        if flow_order:  # the log from k0 in flow order (out_flow: scratch until the fill), walked below
            work += _inc_log_sorted(log_flow, k0, n_log, out_flow)
        s0 = 0 if flow_order else k0
        e_above, n_lev, declines = _inc_declines(s0, s0 + n_log - k0, out_flow if flow_order else log_flow,
                                                 log_level[k0 - s0 :], fe_lo, fe_hi, e_above, par_levels, sw_on, cost,
                                                 rstate, n_inst, n_act, sw_ratio, sw_handoff)  # fmt: skip
        if declines:
            return -1, False
        work += e_above
        rstate[3] += 1
        use_cc = rstate[6] <= 0  # the component rule, unless it is backing off (_inc_backoff)
        n_re, n_keep = _inc_walk_log(flow_order, one_walk, k0, n_log, n_came, log_flow, log_level, came, act, arr_mark,
                                     mark, rate, fe_lo, fe_hi, e_link, e_coef, capacity, lo, load, resid, uf, seed, rstamp,
                                     rstate[3], use_cc, refill, keep_flow, keep_level, out_flow, rp.fmark, old_rate)  # fmt: skip
        _inc_backoff(use_cc, n_keep, rstate)
    # (many distinct levels: the parallel rule would freeze few flows per round, the heap fill is cheaper)
    dense = n_re > par_share * n_act and n_lev <= par_levels
    work += _inc_order_old(dense, flow_order and not full and n_came == 0, flow_order, refill, n_re, arr_mark, mark,
                           rate, old_rate)  # fmt: skip
    work += _inc_fill(dense, refill, n_re, fe_lo, fe_hi, e_link, e_coef, dcap, resid, rate, par_rounds, lo, out_flow,
                      out_level, unit_weight, weighted, fs, rstate, grp_fill, old_rate)  # fmt: skip
    # the freeze log from k0 on: the kept flows and the new fill's, merged by level
    merge_by_level(keep_flow, keep_level, n_keep, out_flow, out_level, n_re, log_flow, log_level, k0)
    rstate[0] = k0 + n_keep + n_re
    work += n_keep + 2 * n_re  # the log rewritten, the rates written
    rows = one_walk and not dense  # (the loads by the fill's link rows: after fill_levels only)
    if grp_fill is not None:  # (pruned when None, as in _inc_fill)
        rows = rows and grp_fill == 0
    _inc_settle(full, rows, rep_on, rep_heap, n_act, act_list, n_re, refill, n_gone, gone, act, rate, unit_weight,
                fe_lo, fe_hi, e_link, capacity, lo, resid, load, rp, lev, rstamp, fs, rstate, cost, e_above, work)  # fmt: skip
    return n_re, full
