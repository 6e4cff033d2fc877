"""The parallel local-bottleneck rule (the reference's allocator), compiled."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit


class ParallelRows(NamedTuple):
    """:func:`parallel_rule`'s scratch per flow of a solve (rows: the most flows of one)."""

    live_i: np.ndarray  # (rows, 3) int64 flow, first entry, end entry of the flows still unfrozen
    live_x: np.ndarray  # (rows, 2) float64 their demand and path minimum
    froz_i: np.ndarray  # (rows, 2) int64 first and end entry of the frozen flows, in the order they froze
    froz_x: np.ndarray  # (rows,) float64 their rate
    froz_g: np.ndarray  # (rows, 2) int64 their flow and group (``order`` only; the three below may be empty
    # otherwise)
    glev: np.ndarray  # (rows,) float64 the level of each group


class ParallelLinks(NamedTuple):
    """:func:`parallel_rule`'s scratch per link of an instance, valid where a stamp says so."""

    remaining: np.ndarray  # (links,) float64 capacity the frozen flows leave
    denom: np.ndarray  # (links,) float64 sum of the live flows' coefficients
    share: np.ndarray  # (links,) float64 remaining / denom
    linkmin: np.ndarray  # (links,) float64 least path minimum of its live flows
    sub: np.ndarray  # (links,) float64 the frozen flows' traffic, to take off
    stamp: np.ndarray  # (links,) int64 the round that last touched the link (-1: none)
    sstamp: np.ndarray  # (links,) int64 the round that last took traffic off it
    touched: np.ndarray  # (links,) int64 the links touched in a round
    gstamp: np.ndarray  # (links,) int64 the round in which the link last froze a group (``order`` only)
    gid: np.ndarray  # (links,) int64 that group (``order`` only; both may be empty otherwise)


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _rule_start(
    n_act, act_flows, fe_lo, fe_hi, dcap, rate, rows, order, weight
):  # pragma: no cover - compiled
    """:func:`parallel_rule`'s start: the flows ``act_flows[:n_act]`` that cross a shared link are live
    (``rows.live_i``: flow, first and end entry; ``rows.live_x[:, 0]``: demand level); the others are at their
    demand (``order``: each a frozen group of its own). ``(live, frozen, groups)``."""
    live_i, live_x, froz_i, froz_x, froz_g, glev = rows.live_i, rows.live_x, rows.froz_i, rows.froz_x, rows.froz_g, rows.glev  # fmt: skip
    wtd = weight.shape[0] > 0  # (a weight of 1 multiplies exactly: the unweighted rule bit for bit)
    n_live = n_done = n_grp = 0
    for k in range(n_act):
        f = act_flows[k]
        if fe_hi[f] > fe_lo[f]:
            live_i[n_live, 0] = f
            live_i[n_live, 1] = fe_lo[f]
            live_i[n_live, 2] = fe_hi[f]
            live_x[n_live, 0] = dcap[f] / weight[f] if wtd else dcap[f]  # its demand level
            n_live += 1
        else:
            rate[f] = dcap[f]  # crosses no shared link: limited by its demand only
            if order:  # a group of its own, at its demand level
                froz_i[n_done, 0] = 0
                froz_i[n_done, 1] = 0
                froz_g[n_done, 0] = f
                froz_g[n_done, 1] = n_grp
                froz_x[n_done] = dcap[f]
                glev[n_grp] = dcap[f] / weight[f] if wtd else dcap[f]
                n_grp += 1
                n_done += 1
    return n_live, n_done, n_grp


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _rule_shares(n_live, cur, first, e_link, e_coef, capacity, lo, rows, links, weight):  # pragma: no cover
    """Step 1 of a round of :func:`parallel_rule` (round stamp ``cur``): the fair share level ``remaining /
    sum coef x weight`` of every link a live flow crosses (sums in entry order; ``first``: the remaining
    capacities start as ``capacity[lo + l]``). The live flows' entries (the cost model's work)."""
    live_i = rows.live_i
    remaining, denom, share, linkmin, sub, stamp, touched = (
        links.remaining, links.denom, links.share, links.linkmin, links.sub, links.stamp, links.touched,
    )  # fmt: skip
    wtd = weight.shape[0] > 0
    wk = 0
    n_touched = 0
    for i in range(n_live):
        wk += live_i[i, 2] - live_i[i, 1]
        w = weight[live_i[i, 0]] if wtd else 1.0
        for e in range(live_i[i, 1], live_i[i, 2]):
            lk = e_link[e] - lo
            if stamp[lk] != cur:
                stamp[lk] = cur
                if first:  # a later round's links were all touched in the first
                    remaining[lk] = capacity[lo + lk]
                denom[lk] = 0.0
                linkmin[lk] = np.inf
                sub[lk] = 0.0
                touched[n_touched] = lk
                n_touched += 1
            denom[lk] += e_coef[e] * w
    for t in range(n_touched):  # each touched link's level: one division per link
        lk = touched[t]
        share[lk] = remaining[lk] / denom[lk] if denom[lk] > 0 else np.inf
    return wk


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _rule_path_minima(n_live, e_link, lo, rows, links):  # pragma: no cover - compiled
    """Step 2 of a round of :func:`parallel_rule`: the path minimum of every live flow (the least share on its
    links, or its demand level; ``rows.live_x[:, 1]``), and the smallest one at each link
    (``links.linkmin``; a flow alone is ready as it is: at its demand, or at the level of its min link)."""
    live_i, live_x, share, linkmin = rows.live_i, rows.live_x, links.share, links.linkmin
    for i in range(n_live):
        e0, e1 = live_i[i, 1], live_i[i, 2]
        mk = np.inf
        for e in range(e0, e1):
            sh = share[e_link[e] - lo]
            if sh < mk:
                mk = sh
        d = live_x[i, 0]
        if d < mk:
            mk = d
        live_x[i, 1] = mk
        if n_live == 1:
            break
        for e in range(e0, e1):
            lk = e_link[e] - lo
            if mk < linkmin[lk]:
                linkmin[lk] = mk


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _rule_group(f, e0, e1, mk, r, at_demand, cur, n_grp, e_link, lo, rows, links):  # pragma: no cover
    """The freeze-order group (``order``) of flow ``f`` frozen at level ``r`` in round ``cur`` of
    :func:`parallel_rule`: the group its first link at the path minimum ``mk`` froze in this round (as it was
    found: the least share, first), a new one if it is the first such flow, or (at its demand) a group of its
    own. ``(group, groups)``."""
    share, gstamp, gid, glev = links.share, links.gstamp, links.gid, rows.glev
    bl = -1
    if not at_demand:
        for e in range(e0, e1):
            if share[e_link[e] - lo] == mk:
                bl = e_link[e] - lo
                break
    if bl < 0:  # at its demand: a group of its own
        g = n_grp
        glev[g] = r
        n_grp += 1
    elif gstamp[bl] != cur:  # the first flow its link freezes in this round
        gstamp[bl] = cur
        g = n_grp
        gid[bl] = g
        glev[g] = r
        n_grp += 1
    else:
        g = gid[bl]
    return g, n_grp


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _rule_freeze(
    n_live, n_done, n_grp, cur, e_link, lo, dcap, rate, rows, links, order, weight
):  # pragma: no cover
    """Step 3 of a round of :func:`parallel_rule`: the ready flows (a link of theirs ready, its least path
    minimum at its share, or at their demand) freeze at their level (``rate``; ``rows.froz_*`` in freeze
    order, with ``order`` their groups, :func:`_rule_group`); the others stay live, compacted.
    ``(live, frozen in all, groups, frozen in this round)``."""
    live_i, live_x, froz_i, froz_x, froz_g = rows.live_i, rows.live_x, rows.froz_i, rows.froz_x, rows.froz_g
    share, linkmin = links.share, links.linkmin
    wtd = weight.shape[0] > 0
    n_keep = 0
    n_frozen = 0
    for i in range(n_live):
        mk = live_x[i, 1]
        d = live_x[i, 0]
        e0, e1 = live_i[i, 1], live_i[i, 2]
        at_demand = mk >= d  # never >: equality, exact
        ready = at_demand or n_live == 1
        if not ready:
            for e in range(e0, e1):
                lk = e_link[e] - lo
                if linkmin[lk] >= share[lk]:  # never >: equality, exact
                    ready = True
                    break
        if ready:
            r = d if at_demand else mk  # the level
            f = live_i[i, 0]
            rate[f] = (dcap[f] if at_demand else weight[f] * mk) if wtd else r
            froz_i[n_done, 0] = e0
            froz_i[n_done, 1] = e1
            froz_x[n_done] = rate[f]
            if order:
                froz_g[n_done, 0] = f
                froz_g[n_done, 1], n_grp = _rule_group(
                    f, e0, e1, mk, r, at_demand, cur, n_grp, e_link, lo, rows, links
                )
            n_done += 1
            n_frozen += 1
        else:
            if n_keep != i:
                live_i[n_keep, 0] = live_i[i, 0]
                live_i[n_keep, 1] = e0
                live_i[n_keep, 2] = e1
                live_x[n_keep, 0] = d
            n_keep += 1
    return n_keep, n_done, n_grp, n_frozen


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _rule_take_off(n_done, n_frozen, cur, e_link, e_coef, lo, rows, links):  # pragma: no cover - compiled
    """Step 4 of a round of :func:`parallel_rule`: the traffic of the ``n_frozen`` flows frozen last
    (``rows.froz_i``, ``rows.froz_x``) taken off their links' remaining capacities, summed per link in entry
    order and then off each link once (as ``remaining - bincount(...)`` does; never below 0)."""
    froz_i, froz_x = rows.froz_i, rows.froz_x
    remaining, sub, sstamp = links.remaining, links.sub, links.sstamp
    for i in range(n_done - n_frozen, n_done):
        r = froz_x[i]
        for e in range(froz_i[i, 0], froz_i[i, 1]):
            use = e_coef[e] * r
            # inf only for unconstrained flows, whose links are all inf
            if np.isfinite(use):
                sub[e_link[e] - lo] += use
    for i in range(n_done - n_frozen, n_done):
        for e in range(froz_i[i, 0], froz_i[i, 1]):
            lk = e_link[e] - lo
            if sstamp[lk] != cur:
                sstamp[lk] = cur
                y = remaining[lk] - sub[lk]
                remaining[lk] = y if y > 0.0 else 0.0


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def parallel_rule(
    n_act, act_flows, fe_lo, fe_hi, e_link, e_coef, capacity, lo, dcap, rate, rows, links, tick, max_rounds,
    order, weight,
):  # fmt: skip  # pragma: no cover - compiled
    """Max-min rates of the flows ``act_flows[:n_act]`` of one instance (its links are rows ``e_link[e] -
    lo`` of the link scratch) by the parallel local-bottleneck rule of
    :func:`ainet_gym.sim.allocator.solve_coo`, bit for bit as the numpy backend, written to ``rate``: in each
    round, every link whose share ``remaining / sum coef`` is the least among the path minima of its live
    flows, and every flow at its demand, freezes its flows at that level. Flow ``f`` owns the shared entries
    ``fe_lo[f]:fe_hi[f]``; its demand is ``dcap[f]`` (the full solve: already capped by its exclusive links,
    :func:`exclusive_caps`). The one rule of both solves that use it: :func:`run_interval_numba`'s
    (``order`` false: the remaining capacities start as ``capacity[lo + l]``, the solve runs to the end) and
    :func:`fill_parallel`'s (``order`` true: ``links.remaining`` is the caller's residuals, read and left as
    the frozen flows leave them; the frozen flows keep their groups for the freeze order; at most
    ``max_rounds`` rounds). ``weight``: (flows,) each flow's share weight (the level ``rate / weight`` is made
    max-min fair, as ``solve_coo(weights=)``, to round-off: the traffic taken off a link is coefficient x rate,
    not (coefficient x weight) x level; with ``order`` the groups' levels are levels, ``rate / weight``);
    empty: every weight 1, bit for bit.

    Scratch: ``rows`` (:class:`ParallelRows`, one row per flow) keeps the flows still unfrozen compacted
    (``live_i``: flow, first entry, end entry; ``live_x``: demand, path minimum) and the frozen ones in
    freeze order (``froz_i`` / ``froz_x``, with ``order`` ``froz_g``); ``links`` (:class:`ParallelLinks`, one row per
    link) is initialised lazily by stamps: ``tick`` is a counter unique over the scratch's life, one per
    round, so a solve costs O(active entries x rounds), not O(links). Returns ``(rounds, live, frozen,
    groups, work, work of the first round, tick)``: the flows still unfrozen are ``live_i[:live, 0]``
    (``max_rounds`` reached, or a round that froze no flow: NaN input, rounds ``-1``), the frozen ones
    ``froz_g[:frozen, 0]``, their groups ``froz_g[:frozen, 1]`` and the groups' levels ``glev[:groups]`` (``order``: the flows a link freezes in a
    round share its share bitwise, so they are one group; a flow frozen at its demand, or crossing no link,
    is a group of its own); work: the entries of the live flows summed over the rounds (the switch's cost
    model).

    The rule's four steps per round over one set of scratch rows, the compiled twin of ``solve_coo``'s
    numbered steps: :func:`_rule_shares`, :func:`_rule_path_minima`, :func:`_rule_freeze` (ready flows,
    their groups :func:`_rule_group`) and :func:`_rule_take_off` (traffic off the links), after
    :func:`_rule_start`; each compiled into the rule (``forceinline``).
    """
    n_live, n_done, n_grp = _rule_start(n_act, act_flows, fe_lo, fe_hi, dcap, rate, rows, order, weight)
    it = 0
    wk = 0  # entries of the live flows, summed over the rounds (the cost model's work)
    wk0 = 0  # in the first round
    while n_live > 0 and it < max_rounds:
        cur = tick
        tick += 1
        wk += _rule_shares(
            n_live, cur, it == 0 and not order, e_link, e_coef, capacity, lo, rows, links, weight
        )
        _rule_path_minima(n_live, e_link, lo, rows, links)
        n_keep, n_done, n_grp, n_frozen = _rule_freeze(
            n_live, n_done, n_grp, cur, e_link, lo, dcap, rate, rows, links, order, weight
        )  # fmt: skip
        if n_frozen == 0:
            return -1, n_live, n_done, n_grp, wk, wk0, tick
        if n_keep > 0 or order:  # (the full solve: not needed after the last round)
            _rule_take_off(n_done, n_frozen, cur, e_link, e_coef, lo, rows, links)
        if it == 0:
            wk0 = wk
        it += 1
        n_live = n_keep
    return it, n_live, n_done, n_grp, wk, wk0, tick
