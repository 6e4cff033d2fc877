"""The lazy exact interval kernel (:func:`run_interval_lazy`) of large instances in exact event mode.

**Arguments.** :func:`run_interval_numba`'s (its module docstring), then the scratch of the fills and of the
departure repair, ``fs`` / ``rp`` (:func:`lazy_scratch`: allocated once by the caller and reused from call to
call, so that an interval does not fault in some 130 MB of fresh pages on the 1,024-GPU AllToAll; a scratch
smaller than the range needs is replaced by a fresh one), and ``options``
(:class:`~ainet_gym.sim.records.LazyOptions`, a plain tuple): :func:`resolve_incremental`'s ``par_share`` and
``par_rounds``, ``rep_on``, the departure repair (:data:`REPAIR_DEPARTURES`), ``grp_on``, progress on group
clocks (:data:`PROGRESS_GROUPS`), and ``grp_fill``, :func:`resolve_incremental`'s: 1 (:data:`GROUP_FILL`), the
solves' heap fills over groups of flows (issue-28zm), 2 (:data:`GROUP_KEEP`), over groups kept from solve to
solve (issue-28zn; the store voided at each call, :func:`lazy_reuse_scratch`), or ``None``, flow by flow: then
the group fills are not compiled into the kernel (numba prunes the branches that test ``grp_fill is not None``
on a ``None``-typed argument; issue-31ze2), and turning them on compiles a second signature of the kernel.

The kernel takes the instances of ``b_lo:b_hi`` that :func:`lazy_instance` selects from where
:func:`run_interval_numba` handed them over (``mode[b] = 2``; ``ev[b]`` events run, ``t[b]`` s of the interval
left; that kernel zeroed the outputs and added the link bytes of its part). With the switch on (``on``,
:data:`LAZY_SWITCH`), an instance whose solve :func:`resolve_incremental` declines (the full path predicted
cheaper by the switch's cost model) is handed back at that event (``mode[b] = 1``, progress and link bytes
brought up to date) and the engine runs :func:`run_interval_numba` on the range again. In exact event mode
with work per event proportional to the flows whose rate changes, not to the flows of the instance
(docs/engine-alltoall.md).

**Allocation**: progressive filling (:func:`fill_levels`), incremental from event to event. A fill keeps its
freeze order (flows by level); an event that removes flows (lowest old level ``L_d``) or adds flows (each
at least ``min(demand, min over its links of capacity / sum of coefficients)``, lowest ``L_a``) re-fills
only the flows at levels ``>= L = min(L_d, L_a) (1 - RESTART_MARGIN)`` on the capacities the lower ones
leave: below ``L`` the progressive filling of the new flow set is the old one step for step, so those
rates are unchanged (exact, not a heuristic). Above ``L`` it re-fills only the connected components
(flows joined by shared links) of the departed and arrived flows: a max-min problem decomposes over
them. An event at which flows only left is first repaired (:func:`repair_departures`): only the flows
that lost every bottleneck (a saturated link where no flow is above them) are re-filled. Every
:data:`FULL_FILL_EVERY` incremental solves a full fill refreshes the link loads.

**Progress**: a flow's bytes left (``rem``) and bytes moved are brought up to date only when its rate
changes, when it completes and at the end of the interval (``t_upd``: the time they hold for); its
completion time ``t_end = t_upd + rem / rate`` sits in an indexed min-heap keyed by the time its bytes
left reach the completion tolerance ``eps_b x flow_scale`` (the flows the reference completes at an
event are those with that key <= the event time). Phases count their flows with bytes left (a phase
ends when the count is 0 and its latency is paid); a phase's flows join the active set when its latency
is paid. So an event costs the flows it completes, starts or re-fills, plus the units and phases of the
instance, not a pass over every flow. With ``grp_on`` (:mod:`~ainet_gym.sim.backends.numba.progress`) the
flows at one rate share a clock and the heap holds groups: a solve that gives every flow of a group one
new rate moves the group's clock and key, and only the flows that change group are brought up to date.
The event rules are :func:`run_interval_numba`'s (its module docstring); rates and times agree with it and
with the numpy backend to round-off (1e-9 relative).

``stats`` (accumulated into what :func:`run_interval_numba` wrote): events (max), fills, -, -,
incremental solves, flows they re-filled, flows active at them, full fills, rates written (bitwise
changes, arrivals included), rates that moved by more than 1e-12 relative, solves by the parallel rule,
-, -, -, the work counted (:func:`resolve_incremental`'s, plus the active flows of a completion heap
rebuilt), the departure repairs made and declined and the active flows they read.

**An event**: the units settle (:func:`begin_event`, the frame both kernels share, with the phases' counts
``pend`` in place of a pass over their flows), the arrivals (:func:`lazy_arrivals`), a solve when the
set changed (:func:`resolve_incremental`, then :func:`lazy_progress`), the least
completion time (:func:`lazy_next`), the step (:func:`end_event`) and the completions
(:func:`lazy_complete`); the steps are compiled without reference counting, as :func:`run_interval_numba`'s.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ainet_gym.sim.backends.numba.crew import announce
from ainet_gym.sim.backends.numba.fill import FillScratch, fill_scratch
from ainet_gym.sim.backends.numba.groupfill import group_store_reset
from ainet_gym.sim.backends.numba.heaps import heap_set, sift_down
from ainet_gym.sim.backends.numba.incremental import LEVEL_HEAPS, resolve_incremental
from ainet_gym.sim.backends.numba.interval import lazy_instance, unit_records
from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit
from ainet_gym.sim.backends.numba.progress import (
    group_complete_flows,
    group_end,
    group_reset,
    group_scratch,
    group_write_rates,
)
from ainet_gym.sim.backends.numba.repair import RepairScratch, repair_scratch
from ainet_gym.sim.backends.numba.settings import (
    ERR_NONE,
    GROUP_KEEP,
    PARALLEL_MAX_LEVELS,
    REFILL_FLOW_ORDER,
    REPAIR_ONLY_TOP,
)
from ainet_gym.sim.backends.numba.steps import (
    FRAME_CAP,
    FRAME_END,
    FRAME_RUN,
    add_link_bytes,
    advance_flow,
    begin_event,
    end_event,
    reset_instance_flows,
    retire_flow,
    zero_completed,
)
from ainet_gym.sim.state import RUNNING

__all__ = ["lazy_scratch", "run_interval_lazy"]


def lazy_scratch(n_links: int, n_flows: int, f_max: int, e_max: int) -> tuple[FillScratch, RepairScratch]:
    """The scratch :func:`run_interval_lazy` takes (``fs``, ``rp``) for instances of at most ``n_links`` links,
    ``f_max`` flows and ``e_max`` shared entries, flows indexed by global id below ``n_flows``: allocated once
    and passed to every call (the numba backend keeps one per instance range, :class:`BatchSim`'s
    ``backend_scratch``)."""
    return fill_scratch(n_links, f_max, e_max, n_flows if GROUP_KEEP else 0), repair_scratch(
        n_links, n_flows, e_max
    )


@njit(cache=True, nogil=True, _nrt=False)
def join_flow(f, n_act, n_came, now, n_fills, act, apos, act_list, t_upd, arr_mark, came):  # pragma: no cover
    """Flow ``f`` joins the lazy kernel's active set at ``now`` (s since the interval start): the
    ``n_act``-th active flow (``act``, ``apos``, ``act_list``) and the ``n_came``-th arrival since the last
    solve (``came``), marked with the solve count ``n_fills``; its rate keeps its last solved value (the
    log's). The caller counts both up."""
    act[f] = True
    apos[f] = n_act
    act_list[n_act] = f
    t_upd[f] = now
    arr_mark[f] = n_fills
    came[n_came] = f


@njit(cache=True, nogil=True, _nrt=False)
def lazy_stats(stats, events, cnt, rstate):  # pragma: no cover - compiled
    """The lazy kernel's counters into ``stats`` (its columns, :func:`run_interval_lazy`): the events
    (``stats[0]`` set), then added: from ``cnt`` (:func:`lazy_count_solve`, :func:`lazy_write_rates`) the
    fills, the incremental solves, the flows they re-filled and those active at them, the full fills, the
    rates written and moved, the work; the parallel-rule solves (``rstate[5]``) and the departure repair's
    three counts (``rstate[11:14]``)."""
    stats[0] = events
    stats[1] += cnt[0]
    stats[4] += cnt[1]
    stats[5] += cnt[2]
    stats[6] += cnt[3]
    stats[7] += cnt[6]
    stats[8] += cnt[4]
    stats[9] += cnt[5]
    stats[10] += rstate[5]
    stats[14] += cnt[7]
    for k in range(3):  # the departure repair's counts
        stats[15 + k] += rstate[11 + k]


class LazyFlows(NamedTuple):
    """:func:`run_interval_lazy`'s scratch per flow (:func:`lazy_flow_scratch`), indexed by global flow id:
    only the lazy instances' flows are initialised and touched."""

    act: np.ndarray  # (flows,) bool in the active set
    rate: np.ndarray  # (flows,) float64 bytes/s since t_upd
    moved: np.ndarray  # (flows,) float64 bytes moved in the interval up to t_upd
    t_upd: np.ndarray  # (flows,) float64 s since the interval start that rem and moved hold for
    t_end: np.ndarray  # (flows,) float64 s, completion time at the current rate (inf: none)
    hpos: np.ndarray  # (flows,) int64 slot in the completion heap, -1: not in it
    zero: np.ndarray  # (flows,) bool an active job flow at rate <= 0 (stalled)
    arr_mark: np.ndarray  # (flows,) int64 the solve count when it last joined the set
    apos: np.ndarray  # (flows,) int64 slot in the active list
    dcap: np.ndarray  # (flows,) float64 demand capped by the flow's exclusive links, bytes/s
    weight: np.ndarray  # (flows,) float64 share weights (levels rate / weight; all 1 when none are given)


class LazyRows(NamedTuple):
    """:func:`run_interval_lazy`'s scratch per instance: one row per flow of the largest lazy instance of the
    range (:func:`lazy_flow_scratch`)."""

    act_list: np.ndarray  # int64 the active flows, unordered
    hk: np.ndarray  # float64 completion heap: keys (s)
    hf: np.ndarray  # int64 and flows
    dfs: np.ndarray  # int64 heap slots to visit (the least completion time)
    log_flow: np.ndarray  # int64 flows of the last fill, in freeze order
    log_level: np.ndarray  # float64 their levels (nondecreasing)
    out_flow: np.ndarray  # int64
    out_level: np.ndarray  # float64
    refill: np.ndarray  # int64 the flows an incremental solve fills again
    old_rate: np.ndarray  # float64 their rates before it
    gone: np.ndarray  # int64 flows that left the active set since the last solve
    came: np.ndarray  # int64 flows that joined it
    keep_flow: np.ndarray  # int64 flows at levels >= the restart level an event leaves alone
    keep_level: np.ndarray  # float64 their levels


class LazyLinks(NamedTuple):
    """:func:`resolve_incremental`'s scratch per link (:func:`lazy_flow_scratch`)."""

    uf: np.ndarray  # (links,) int64 union-find parents (components of a re-fill)
    seed: np.ndarray  # (links,) int64 tick of the solve whose changed flows' root it is
    resid: np.ndarray  # (links,) float64 residual capacity of a fill
    rstamp: np.ndarray  # (links,) int64
    load: np.ndarray  # (links,) float64 bytes/s the active flows put on each link
    csum: np.ndarray  # (links,) float64 sum of the coefficients of the active flows on each link
    link_gen: np.ndarray  # (links,) int64 load and csum are valid where this is gen


@njit(nogil=True, **COMPILED_ONLY)
def lazy_sizes(b_lo, b_hi, inst_flow, inst_seg, ent_hi, inc_min, phase_mode, quantum):  # pragma: no cover
    """The most flows and the most shared entries of one lazy instance (:func:`lazy_instance`) of
    ``b_lo:b_hi`` (0, 0: none)."""
    f_max = 0
    e_max = 0
    for b in range(b_lo, b_hi):
        if lazy_instance(inst_flow, b, inc_min, phase_mode, quantum):
            if inst_flow[b + 1] - inst_flow[b] > f_max:
                f_max = inst_flow[b + 1] - inst_flow[b]
            if ent_hi[b] - inst_seg[b] > e_max:
                e_max = ent_hi[b] - inst_seg[b]
    return f_max, e_max


@njit(nogil=True, **COMPILED_ONLY)
def lazy_flow_scratch(n_flows, n_phases, n_links, f_max, flow_w, grp_on):  # pragma: no cover - compiled
    """:func:`run_interval_lazy`'s fresh scratch: :class:`LazyFlows`, :class:`LazyRows` (``f_max`` rows),
    :class:`LazyLinks`, the phases' counts of flows with bytes left (``pend``) and whether their flows
    joined the active set (``joined``), :func:`resolve_incremental`'s state (``rstate``: log length,
    solves since a full fill, stamps, parallel-rule solves, back-off, active entries, the work of the last
    solve, the departure repair's counts), the counters, and the group clocks (``grp_on``,
    :func:`group_scratch`; empty without)."""
    i64 = np.int64
    weight = flow_w if flow_w.shape[0] > 0 else np.ones(n_flows)
    fl = LazyFlows(
        np.empty(n_flows, dtype=np.bool_), np.empty(n_flows), np.empty(n_flows), np.empty(n_flows), np.empty(n_flows),
        np.empty(n_flows, dtype=i64), np.empty(n_flows, dtype=np.bool_), np.empty(n_flows, dtype=i64),
        np.empty(n_flows, dtype=i64), np.empty(n_flows), weight,
    )  # fmt: skip
    rw = LazyRows(
        np.empty(f_max, dtype=i64), np.empty(f_max), np.empty(f_max, dtype=i64), np.empty(f_max, dtype=i64),
        np.empty(f_max, dtype=i64), np.empty(f_max), np.empty(f_max, dtype=i64), np.empty(f_max),
        np.empty(f_max, dtype=i64), np.empty(f_max), np.empty(f_max, dtype=i64), np.empty(f_max, dtype=i64),
        np.empty(f_max, dtype=i64), np.empty(f_max),
    )  # fmt: skip
    lk = LazyLinks(
        np.empty(n_links, dtype=i64), np.full(n_links, -1, dtype=i64), np.empty(n_links),
        np.full(n_links, -1, dtype=i64), np.zeros(n_links), np.zeros(n_links), np.full(n_links, -1, dtype=i64),
    )  # fmt: skip
    pend = np.empty(n_phases, dtype=i64)
    joined = np.empty(n_phases, dtype=np.bool_)
    gc = group_scratch(n_flows, f_max) if grp_on else group_scratch(0, 0)
    return fl, rw, lk, pend, joined, np.zeros(14, dtype=i64), np.zeros(8, dtype=i64), gc


@njit(nogil=True, **COMPILED_ONLY)
def lazy_reuse_scratch(fs, rp, n_links, n_flows, f_max, e_max, grp_fill):  # pragma: no cover - compiled
    """The caller's fill and repair scratch (:func:`lazy_scratch`, reused from call to call), reset as
    :func:`fill_scratch` / :func:`repair_scratch` initialise them; a fresh one where it is too small (with
    ``grp_fill`` 2, the kept-group fill's, its store for ``n_flows`` flows). The kept-group store is voided
    (:func:`group_store_reset`): the flows' entries are this call's, fixed within it."""
    keep = False
    if grp_fill is not None:  # (pruned when None, as resolve_incremental's)
        keep = grp_fill == 2
    if (
        fs.link_stamp.shape[0] < n_links or fs.flow_off.shape[0] < f_max + 1 or fs.slot_flows.shape[0] < e_max
        or fs.heap_key.shape[0] < n_links + f_max + e_max + 1 or (keep and fs.keep.fgrp.shape[0] < n_flows)
    ):  # fmt: skip
        fs = fill_scratch(n_links, f_max, e_max, n_flows if keep else 0)
    else:  # (the stamps restart with this call's ticks)
        fs.link_stamp[:n_links] = -1
    group_store_reset(fs.keep)
    if rp.sat.shape[0] < n_links or rp.fmark.shape[0] < n_flows or rp.adj_flow.shape[0] < e_max:
        rp = repair_scratch(n_links, n_flows, e_max)
    else:
        rp.sat[:n_links] = -1.0
        rp.top_n[:n_links] = -1
        rp.lstamp[:n_links] = -1
        rp.fmark[:n_flows] = -1
        rp.rmark[:n_flows] = -1
    return fs, rp


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def lazy_instance_start(
    b, f0, f1, eps_b, fl, pend, joined, flow_demand, flow_bg, flow_scale, rem, ex_lo, inst_seg, e_flow, e_link,
    e_coef, capacity, inst_phase, phase_flow_lo, phase_flow_n, rstate, gc, grp_on,
):  # fmt: skip  # pragma: no cover - compiled
    """Lazy instance ``b`` (flows ``f0:f1``) as :func:`run_interval_lazy` takes it over: its flows reset
    (:func:`reset_instance_flows`; no rate, not in the heap, none stalled; with ``grp_on`` in no group and
    every group clock free, :func:`group_reset`) and the completions due at the start made
    (:func:`zero_completed`); its phases count their flows with bytes left (``pend``), none joined;
    :func:`resolve_incremental`'s state (``rstate``) without a valid log (the next fill is a full one)."""
    reset_instance_flows(b, f0, f1, fl.act, fl.moved, fl.dcap, flow_demand, ex_lo, inst_seg, e_flow, e_link, e_coef,
                         capacity)  # fmt: skip
    for f in range(f0, f1):
        fl.rate[f] = 0.0
        fl.arr_mark[f] = -1
        fl.hpos[f] = -1
        fl.zero[f] = False
    if grp_on:
        group_reset(gc, f0, f1)
    zero_completed(f0, f1, eps_b, flow_bg, flow_scale, rem)
    for p in range(inst_phase[b], inst_phase[b + 1]):
        joined[p] = False
        c = 0
        for f in range(phase_flow_lo[p], phase_flow_lo[p] + phase_flow_n[p]):
            if rem[f] > 0:
                c += 1
        pend[p] = c
    rstate[0] = -1  # flows in the freeze log (-1: no valid log, the next fill is a full one)
    rstate[1] = 0
    rstate[6] = 0  # the component rule's back-off
    rstate[7] = 0
    rstate[10] = 0  # the link-major index of the instance's entries (built by the first repair)


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def lazy_arrivals(
    u0, u1, f0, f1, first, now, n_fills, n_act, n_came, eps_t, units, clock, joined, bg_on, flow_unit, rem, fl,
    act_list, came,
):  # fmt: skip  # pragma: no cover - compiled
    """The flows that join :func:`run_interval_lazy`'s active set at this event (:func:`join_flow`): the
    flows with bytes left of the phases of units ``u0:u1`` whose latency was paid since the last event, and
    the background flows switched on (at the ``first`` event of the instance here). ``(active flows,
    arrivals since the last solve)``."""
    act, apos, t_upd, arr_mark = fl.act, fl.apos, fl.t_upd, fl.arr_mark
    for u in range(u0, u1):
        if not units.unit_alive[u]:
            continue
        if units.unit_bg[u]:
            if first and bg_on[u]:
                for f in range(f0, f1):  # background flows are few: found by their unit
                    if flow_unit[f] == u:
                        join_flow(f, n_act, n_came, now, n_fills, act, apos, act_list, t_upd, arr_mark, came)
                        n_act += 1
                        n_came += 1
            continue
        pc = clock.phase_cur[u]
        nph = units.unit_nphases[u]
        if pc < 0 or pc >= nph:
            continue
        for p in range(units.phase_off[u], units.phase_off[u] + nph):
            if joined[p] or clock.phase_state[p] != RUNNING or clock.phase_lat_left[p] > eps_t:
                continue
            joined[p] = True
            for f in range(units.phase_flow_lo[p], units.phase_flow_lo[p] + units.phase_flow_n[p]):
                if rem[f] > 0 and not act[f]:
                    join_flow(f, n_act, n_came, now, n_fills, act, apos, act_list, t_upd, arr_mark, came)
                    n_act += 1
                    n_came += 1
    return n_act, n_came


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def lazy_write_rates(
    n_re, n_act, par_share, now, hn, n_zero, eps_b, fl, rw, flow_bg, flow_scale, rem, cnt,
):  # fmt: skip  # pragma: no cover - compiled
    """After a solve of :func:`run_interval_lazy`, the ``n_re`` flows it re-filled (``rw.refill``, their old
    rates ``rw.old_rate``) whose rate changed: progress up to ``now`` at the old rate (:func:`advance_flow`),
    their stalled marks (``n_zero`` counted), and their completion keys (the time their bytes left reach
    the tolerance ``eps_b x flow_scale``) in the heap (``hn`` flows): sifted per flow (O(log heap) each), or,
    when many flows were re-filled (more than ``par_share x n_act``, as many as the parallel rule takes),
    set in place and the heap rebuilt once (:func:`rebuild_heap`, O(heap); its flows counted as work,
    ``cnt[7]``). Counts the rates written and moved by more than 1e-12
    relative (``cnt[4]``, ``cnt[5]``). ``(hn, n_zero)``."""
    inf = np.inf
    rate, t_upd, zero, t_end, hpos, moved = fl.rate, fl.t_upd, fl.zero, fl.t_end, fl.hpos, fl.moved
    hk, hf, refill, old_rate = rw.hk, rw.hf, rw.refill, rw.old_rate
    dense = n_re > par_share * n_act
    for k in range(n_re):
        f = refill[k]
        r = rate[f]
        r0 = old_rate[k]
        if r == r0 and t_upd[f] < now:  # unchanged (an arrival's old rate is 0 at t_upd = now)
            continue
        cnt[4] += 1
        if abs(r - r0) > 1e-12 * max(abs(r), abs(r0)):
            cnt[5] += 1
        dtu = now - t_upd[f]
        if dtu > 0.0:
            advance_flow(f, r0 * dtu, flow_bg, rem, moved)
        t_upd[f] = now
        if flow_bg[f]:
            continue
        z = not r > 0
        if z != zero[f]:
            zero[f] = z
            n_zero += 1 if z else -1
        if r > 0:
            t_end[f] = now + rem[f] / r
            key = now + (rem[f] - eps_b * flow_scale[f]) / r
        else:
            t_end[f] = inf
            key = inf
        if not dense:
            hn = heap_set(hk, hf, hpos, hn, f, key)
        elif hpos[f] >= 0:
            hk[hpos[f]] = key  # (inf: dropped by rebuild_heap)
        elif key < inf:
            hk[hn] = key
            hf[hn] = f
            hpos[f] = hn
            hn += 1
    if dense:
        cnt[7] += hn
        hn = rebuild_heap(hk, hf, hpos, hn)
    return hn, n_zero


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def rebuild_heap(hk, hf, hpos, hn):  # pragma: no cover - compiled
    """The completion heap's ``hn`` slots with their keys set in place (:func:`lazy_write_rates`):
    the flows at rate 0 (key inf) dropped, then heapified bottom-up. The flows left."""
    hm = 0
    for i in range(hn):
        f = hf[i]
        if hk[i] < np.inf:
            hk[hm] = hk[i]
            hf[hm] = f
            hpos[f] = hm
            hm += 1
        else:
            hpos[f] = -1
    for i in range(hm // 2 - 1, -1, -1):
        sift_down(hk, hf, hpos, hm, i)
    return hm


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def next_completion(hn, hk, hf, dfs, t_end, now, dt):  # pragma: no cover - compiled
    """The least of ``dt`` and the time to the least completion time of the heap's flows, and that flow (-1:
    ``dt`` came first). The heap is keyed by the time a flow's bytes left reach the tolerance, which
    precedes its completion time by that tolerance over its rate: the least completion time is among the
    keys up to the first flow's completion time."""
    f_min = -1
    if hn > 0:
        thr = t_end[hf[0]]
        best = np.inf
        sp = 1
        dfs[0] = 0
        while sp > 0:
            sp -= 1
            i = dfs[sp]
            f = hf[i]
            if t_end[f] < best:
                best = t_end[f]
                f_min = f
            c = 2 * i + 1
            if c < hn and hk[c] <= thr:
                dfs[sp] = c
                sp += 1
            if c + 1 < hn and hk[c + 1] <= thr:
                dfs[sp] = c + 1
                sp += 1
        if best - now < dt:
            dt = best - now
        else:
            f_min = -1
    return dt, f_min


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def complete_flows(
    hn, f_min, now, n_act, n_zero, n_gone, fl, rw, rem, pend, phase_off, flow_unit, flow_phase,
):  # fmt: skip  # pragma: no cover - compiled
    """Complete the flows whose bytes left reached the tolerance by ``now`` (the heap's keys), and ``f_min``
    (the flow that set the step, in any case): their bytes moved, none left, out of the active set (the last
    active flow takes the slot), their phase's count ``pend`` down, each in ``rw.gone``. ``(hn, n_act,
    n_zero, n_gone)``."""
    hk, hf, act_list, gone = rw.hk, rw.hf, rw.act_list, rw.gone
    rate, t_upd, moved, act, apos, zero, hpos = fl.rate, fl.t_upd, fl.moved, fl.act, fl.apos, fl.zero, fl.hpos
    while hn > 0 and (hk[0] <= now or f_min >= 0):
        f = hf[0] if hk[0] <= now else f_min
        if f == f_min:
            f_min = -1
        hn = heap_set(hk, hf, hpos, hn, f, np.inf)
        slot = phase_off[flow_unit[f]] + flow_phase[f]
        x = rate[f] * (now - t_upd[f])
        n_act, n_gone = retire_flow(
            f, x, now, rem, moved, t_upd, act, apos, act_list, n_act, pend, slot, gone, n_gone
        )
        if zero[f]:
            zero[f] = False
            n_zero -= 1
    return hn, n_act, n_zero, n_gone


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def lazy_progress(
    grp_on, n_re, full, n_act, par_share, now, hn, n_zero, eps_b, fl, rw, gc, flow_bg, flow_scale, rem, cnt, rstate,
):  # fmt: skip  # pragma: no cover - compiled
    """A solve (``n_re`` flows re-filled, ``full``: a full fill) counted (:func:`lazy_count_solve`), then its
    new rates into the progress: per flow (:func:`lazy_write_rates`) or, with ``grp_on``
    (:data:`PROGRESS_GROUPS`), on group clocks (:func:`group_write_rates`; the solve's tick is ``cnt[0]``,
    its count). ``(hn, n_zero)``."""
    lazy_count_solve(cnt, n_re, full, n_act, rstate)
    if grp_on:
        return group_write_rates(
            n_re, now, cnt[0], hn, n_zero, eps_b, fl, rw, gc, flow_bg, flow_scale, rem, cnt
        )
    return lazy_write_rates(
        n_re, n_act, par_share, now, hn, n_zero, eps_b, fl, rw, flow_bg, flow_scale, rem, cnt
    )


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def lazy_next(grp_on, hn, rw, fl, gc, now, dt):  # pragma: no cover - compiled
    """:func:`next_completion` over the heap of flows, or (``grp_on``) of groups, whose least completion
    time is ``g_tend``: then the flow is the group's of the least tag. ``(dt, f_min)``."""
    if not grp_on:
        return next_completion(hn, rw.hk, rw.hf, rw.dfs, fl.t_end, now, dt)
    dt, g = next_completion(hn, rw.hk, rw.hf, rw.dfs, gc.g_tend, now, dt)
    return dt, gc.g_min[g] if g >= 0 else -1


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def lazy_complete(
    grp_on, hn, f_min, now, n_act, n_zero, n_gone, fl, rw, gc, rem, pend, phase_off, flow_unit, flow_phase,
    flow_bg, eps_b, flow_scale,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`complete_flows`, or (``grp_on``) :func:`group_complete_flows` (a completing flow has a rate
    > 0: ``n_zero`` unchanged). ``(hn, n_act, n_zero, n_gone)``."""
    if not grp_on:
        return complete_flows(hn, f_min, now, n_act, n_zero, n_gone, fl, rw, rem, pend, phase_off, flow_unit,
                              flow_phase)  # fmt: skip
    hn, n_act, n_gone = group_complete_flows(hn, f_min, now, n_act, n_gone, fl, rw, gc, rem, pend, phase_off,
                                             flow_unit, flow_phase, flow_bg, eps_b, flow_scale)  # fmt: skip
    return hn, n_act, n_zero, n_gone


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def lazy_count_solve(cnt, n_re, full, n_act, rstate):  # pragma: no cover - compiled
    """A solve of :func:`run_interval_lazy` in its counters ``cnt`` (:func:`lazy_stats`' columns): a fill,
    full or incremental (with the flows it re-filled and those active), and its work (``rstate[9]``)."""
    cnt[7] += rstate[9]
    if full:
        cnt[6] += 1
    else:
        cnt[1] += 1
        cnt[2] += n_re
        cnt[3] += n_act
    cnt[0] += 1


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def lazy_instance_end(
    b, n_act, now, back, ev, t_left, fl, act_list, flow_bg, rem, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef,
    link_bytes, sw_mode, sw_ev, sw_t, sw_cost, gc, grp_on,
):  # fmt: skip  # pragma: no cover - compiled
    """Lazy instance ``b`` leaves :func:`run_interval_lazy`: the progress of its flows still active up to
    ``now`` (:func:`advance_flow`), the link bytes of its part (:func:`add_link_bytes`), and where it goes:
    done (``sw_mode[b] = 3``) or, ``back``, to :func:`run_interval_numba`, which takes this event again (its
    transitions are done: they re-settle at once; ``sw_mode[b] = 1``, ``ev - 1`` events run, ``t_left``
    s left). With ``grp_on`` the flows' progress comes from their group clocks first (:func:`group_end`).
    The events run."""
    if grp_on:
        group_end(n_act, now, act_list, fl, gc, flow_bg, rem)
    rate, t_upd, moved = fl.rate, fl.t_upd, fl.moved
    for k in range(n_act):
        f = act_list[k]
        advance_flow(f, rate[f] * (now - t_upd[f]), flow_bg, rem, moved)
    add_link_bytes(b, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef, moved, link_bytes)
    if back:
        ev -= 1
        sw_mode[b], sw_ev[b], sw_t[b], sw_cost[b, 3] = 1, ev, t_left, 1.0
    else:
        sw_mode[b] = 3
    return ev


@njit(cache=True, nogil=True)
def run_interval_lazy(b_lo, b_hi, settings, structure, state, outputs, stats, go, switch, fs, rp, options):
    """:func:`run_interval_numba` (its arguments) for the instances of ``b_lo:b_hi`` that :func:`lazy_instance`
    selects, with the scratch ``fs`` / ``rp`` and ``options`` (:class:`~ainet_gym.sim.records.LazyOptions`): the
    module docstring says what each holds, the allocation, the progress and what an event does."""
    announce(go)
    if stats[2] != ERR_NONE:
        return
    duration, phase_mode, quantum, inc_min, max_events, n_links, max_rounds, eps_t, eps_b, flow_w = settings
    st = structure
    f_max, e_max = lazy_sizes(b_lo, b_hi, st.inst_flow, st.inst_seg, st.ent_hi, inc_min, phase_mode, quantum)
    if f_max == 0:
        return
    sw_on, sw_ratio, sw_handoff, sw_mode, sw_ev, sw_t, sw_cost = switch
    par_share, par_rounds, rep_on, grp_on, grp_fill = options
    n_flows, n_phases = st.flow_unit.shape[0], state.phase_state.shape[0]
    fl, rw, lk, pend, joined, rstate, cnt, gc = lazy_flow_scratch(n_flows, n_phases, n_links, f_max, flow_w, grp_on)  # fmt: skip
    fs, rp = lazy_reuse_scratch(fs, rp, n_links, n_flows, f_max, e_max, grp_fill)
    units, clock, job, graph, tallies = unit_records(structure, state, outputs)  # (read once a call)
    inst_seg, ent_hi, ex_lo, fe_lo, fe_hi, e_flow, e_link, e_coef = st.inst_seg, st.ent_hi, st.ex_lo, st.fe_lo, st.fe_hi, st.e_flow, st.e_link, st.e_coef  # fmt: skip
    inst_unit, inst_flow, inst_phase, phase_off, phase_flow_lo, phase_flow_n = st.inst_unit, st.inst_flow, st.inst_phase, st.phase_off, st.phase_flow_lo, st.phase_flow_n  # fmt: skip
    flow_unit, flow_phase, flow_bg, flow_scale, flow_demand = st.flow_unit, st.flow_phase, st.flow_bg, st.flow_scale, st.flow_demand  # fmt: skip
    capacity, rem, bg_on, time_s, compute_t, active_t, link_bytes, stalled = state.capacity, state.rem, state.bg_on, state.time_s, outputs.compute_t, outputs.active_t, outputs.link_bytes, outputs.stalled  # fmt: skip
    act, arr_mark, rate, dcap, weight = fl.act, fl.arr_mark, fl.rate, fl.dcap, fl.weight
    act_list, gone, came, old_rate, refill, keep_flow, keep_level = rw.act_list, rw.gone, rw.came, rw.old_rate, rw.refill, rw.keep_flow, rw.keep_level  # fmt: skip
    log_flow, log_level, out_flow, out_level = rw.log_flow, rw.log_level, rw.out_flow, rw.out_level
    uf, seed, resid, rstamp, load, csum, link_gen = lk.uf, lk.seed, lk.resid, lk.rstamp, lk.load, lk.csum, lk.link_gen  # fmt: skip
    events = stats[0]
    for b in range(b_lo, b_hi):
        if not lazy_instance(inst_flow, b, inc_min, phase_mode, quantum) or sw_mode[b] != 2:
            continue  # (not handed over by run_interval_numba, which zeroed the outputs and added its link bytes)
        u0, u1, f0, f1, lo, t_left = inst_unit[b], inst_unit[b + 1], inst_flow[b], inst_flow[b + 1], b * n_links, sw_t[b]  # fmt: skip
        lazy_instance_start(b, f0, f1, eps_b, fl, pend, joined, flow_demand, flow_bg, flow_scale, rem, ex_lo, inst_seg,
                            e_flow, e_link, e_coef, capacity, inst_phase, phase_flow_lo, phase_flow_n, rstate, gc, grp_on)  # fmt: skip
        now = 0.0  # s since the interval start (time_s[b] is the clock, advanced by the same steps)
        hn = n_act = n_zero = n_gone = n_came = 0  # heap, active, at rate 0, left and came since a solve
        solved = back = False
        ev = ev0 = sw_ev[b]  # events run by run_interval_numba before the hand-off
        sw_cost[b, 3] = 0.0  # on this path
        while True:
            code, ev = begin_event(u0, u1, time_s[b], t_left, ev, max_events, max_rounds, eps_t, True, pend, joined,
                                   units, clock, rem, job, graph, tallies, stats)  # fmt: skip
            if code == FRAME_END:
                break
            if code != FRAME_RUN:
                if code == FRAME_CAP:  # the counters so far (a capped interval is measured up to here)
                    lazy_stats(stats, ev, cnt, rstate)
                return
            n_act, n_came = lazy_arrivals(u0, u1, f0, f1, ev == ev0 + 1, now, cnt[0], n_act, n_came, eps_t, units,
                                          clock, joined, bg_on, flow_unit, rem, fl, act_list, came)  # fmt: skip
            if not solved or n_came > 0 or n_gone > 0:
                n_re, full = resolve_incremental(
                    act, arr_mark, cnt[0], act_list, n_act, gone, n_gone, came, n_came, fe_lo, fe_hi, e_link,
                    e_coef, capacity, lo, dcap, weight, rate, old_rate, refill, keep_flow, keep_level,
                    log_flow, log_level, out_flow, out_level, fs, uf, seed, resid, rstamp, load, csum,
                    link_gen, rstate, par_share, par_rounds, sw_on, sw_ratio, sw_handoff, f1 - f0, sw_cost[b], rp,
                    f0, f1, rep_on, REPAIR_ONLY_TOP, PARALLEL_MAX_LEVELS, flow_w.shape[0] > 0, LEVEL_HEAPS,
                    REFILL_FLOW_ORDER, grp_fill,  # (2: kept, 1: group fill, None: flow by flow)
                )  # fmt: skip
                if n_re < 0:  # the full path predicted cheaper: back to run_interval_numba at this event
                    back = True
                    break
                hn, n_zero = lazy_progress(grp_on, n_re, full, n_act, par_share, now, hn, n_zero, eps_b, fl, rw, gc,
                                           flow_bg, flow_scale, rem, cnt, rstate)  # fmt: skip
                solved, n_came, n_gone = True, 0, 0
            stalled[b] = max(stalled[b], n_zero)
            # the step: the least completion time, a unit's timer (then no flow completes) or the interval's end
            dt, f_min = lazy_next(grp_on, hn, rw, fl, gc, now, t_left)
            dt, unit_first = end_event(b, u0, u1, dt, eps_t, units, clock, active_t, compute_t, time_s)
            f_min, now, t_left = -1 if unit_first else f_min, now + dt, t_left - dt
            hn, n_act, n_zero, n_gone = lazy_complete(grp_on, hn, f_min, now, n_act, n_zero, n_gone, fl, rw, gc, rem, pend,
                                                      phase_off, flow_unit, flow_phase, flow_bg, eps_b, flow_scale)  # fmt: skip
        ev = lazy_instance_end(b, n_act, now, back, ev, t_left, fl, act_list, flow_bg, rem, inst_seg, ent_hi, ex_lo,
                               e_flow, e_link, e_coef, link_bytes, sw_mode, sw_ev, sw_t, sw_cost, gc, grp_on)  # fmt: skip
        events = max(events, ev)
    lazy_stats(stats, events, cnt, rstate)
