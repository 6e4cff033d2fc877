"""Compiled (numba) decision interval: the event loop and the exact max-min allocator in one call.

This is the ``"numba"`` backend of :class:`ainet_gym.sim.engine.BatchSim`; the numpy code in
:mod:`ainet_gym.sim.engine` and :func:`ainet_gym.sim.allocator.solve_coo` is the reference backend, and the two
agree to round-off (``tests/test_backends.py`` checks every observation, reward and info value to 1e-9
relative). The kernel walks each instance of the batch on its own (instances are independent): Python is
entered once per interval, and an instance's allocation is re-solved only when its set of active flows
changed since its last solve (capacities and the split are fixed within an interval).

Layout (flat arrays, as :class:`~ainet_gym.sim.engine.BatchSim` stacks them): units, flows and incidence
entries of instance ``b`` are contiguous (``inst_unit``, ``inst_flow``, ``inst_entry`` hold the
boundaries); entries are sorted by flow; link ids are global (``b * links + l``); the flows of phase
``p`` of a unit are the contiguous range ``phase_flow_lo[p] .. phase_flow_lo[p] + phase_flow_n[p]``.
Phases form a graph per unit (``phase_npred`` predecessors; successors ``phase_succ[phase_succ_off[p]:
phase_succ_off[p + 1]]``, global ids): a phase runs once all its predecessors are done (a chain for
unchunked collectives; a pipeline grid of chunks x stages for chunked ones).

The allocator is the parallel local-bottleneck rule of :mod:`ainet_gym.sim.allocator` (weights 1, demand
caps), with the same order of floating-point sums, so rates agree bit for bit with ``solve_coo``.
"""

from __future__ import annotations

import numpy as np

try:  # numba is a core dependency; the import guard keeps the numpy backend usable without it
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    HAVE_NUMBA = False

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        def wrap(fn):
            return fn

        return wrap


__all__ = ["HAVE_NUMBA", "merge_entries", "run_interval_numba"]

WAITING = -2  # engine.WAITING
PRE_COMM = -1  # engine.PRE_COMM
IDLE, RUNNING, DONE = 0, 1, 2  # engine.IDLE, engine.RUNNING, engine.DONE
ERR_NONE, ERR_ZERO_STEP, ERR_SETTLE, ERR_EVENTS, ERR_SOLVER = 0, 1, 2, 3, 4


@njit(cache=True, nogil=True)
def merge_entries(cand_seg, cand_gather, split_flat, seg_flow, seg_link, n_seg):  # pragma: no cover
    """Incidence entries of a split: the candidate (member, path, hop) coefficients summed per merged
    (flow, link) segment in candidate order (as ``np.bincount`` does), zero ones dropped.

    Returns ``(e_flow, e_link, e_coef)``, sorted by flow as the segments are.
    """
    coef = np.zeros(n_seg)
    for i in range(cand_seg.shape[0]):
        coef[cand_seg[i]] += split_flat[cand_gather[i]]
    n = 0
    for j in range(n_seg):
        if coef[j] > 0:
            n += 1
    e_flow = np.empty(n, dtype=np.int64)
    e_link = np.empty(n, dtype=np.int64)
    e_coef = np.empty(n)
    k = 0
    for j in range(n_seg):
        if coef[j] > 0:
            e_flow[k] = seg_flow[j]
            e_link[k] = seg_link[j]
            e_coef[k] = coef[j]
            k += 1
    return e_flow, e_link, e_coef


@njit(cache=True, nogil=True)
def _solve_instance(
    n_act, act_flows, fe_lo, fe_hi, e_link, e_coef, lo, flow_demand, cap, rate,
    remaining, rstamp, denom, share, linkmin, sub, stamp, sstamp, act_list, frozen, m, tick,
):  # fmt: skip
    """Max-min rates of the active flows ``act_flows[:n_act]`` (increasing) of one instance, written to
    ``rate``. Flow ``f`` owns the entries ``fe_lo[f]:fe_hi[f]`` of ``e_link`` / ``e_coef``; ``lo`` is the
    instance's first link id. Link scratch is initialised lazily by stamps (``tick`` is a counter unique
    over the kernel call), so a solve costs O(active entries x iterations), not O(links).

    Returns ``(iterations, tick)``; iterations is -1 when an iteration freezes no flow (NaN input)."""
    inf = np.inf
    solve_id = tick
    tick += 1
    n_live = 0
    for k in range(n_act):
        f = act_flows[k]
        if fe_hi[f] > fe_lo[f]:
            act_list[n_live] = k
            n_live += 1
        else:
            rate[f] = flow_demand[f]  # crosses no link: limited by its demand only
    it = 0
    while n_live > 0:
        cur = tick
        tick += 1
        # 1. fair share level of every link touched by an active flow (sums in entry order)
        for i in range(n_live):
            f = act_flows[act_list[i]]
            for e in range(fe_lo[f], fe_hi[f]):
                lk = e_link[e] - lo
                if rstamp[lk] != solve_id:
                    rstamp[lk] = solve_id
                    remaining[lk] = cap[lk]
                if stamp[lk] != cur:
                    stamp[lk] = cur
                    denom[lk] = 0.0
                    linkmin[lk] = inf
                    sub[lk] = 0.0
                denom[lk] += e_coef[e]
        # 2. path minimum of every active flow, and the smallest one at each link
        for i in range(n_live):
            k = act_list[i]
            f = act_flows[k]
            mk = inf
            for e in range(fe_lo[f], fe_hi[f]):
                lk = e_link[e] - lo
                sh = remaining[lk] / denom[lk] if denom[lk] > 0 else inf
                share[lk] = sh
                if sh < mk:
                    mk = sh
            d = flow_demand[f]
            if d < mk:
                mk = d
            m[k] = mk
            for e in range(fe_lo[f], fe_hi[f]):
                lk = e_link[e] - lo
                if mk < linkmin[lk]:
                    linkmin[lk] = mk
        # 3. ready flows (a ready link, or at demand); 4. freeze them and take their traffic off
        n_keep = 0
        n_frozen = 0
        for i in range(n_live):
            k = act_list[i]
            f = act_flows[k]
            mk = m[k]
            d = flow_demand[f]
            at_demand = mk >= d  # never >: equality, exact
            ready = at_demand
            if not ready:
                for e in range(fe_lo[f], fe_hi[f]):
                    lk = e_link[e] - lo
                    if linkmin[lk] >= share[lk]:  # never >: equality, exact
                        ready = True
                        break
            if ready:
                rate[f] = d if at_demand else mk
                for e in range(fe_lo[f], fe_hi[f]):
                    use = e_coef[e] * mk
                    if np.isfinite(use):  # inf only for unconstrained flows, whose links are all inf
                        sub[e_link[e] - lo] += use
                frozen[n_frozen] = k
                n_frozen += 1
            else:
                act_list[n_keep] = k
                n_keep += 1
        if n_frozen == 0:
            return -1, tick
        # take the summed traffic off each link once (as remaining - bincount(...) does)
        for i in range(n_frozen):
            f = act_flows[frozen[i]]
            for e in range(fe_lo[f], fe_hi[f]):
                lk = e_link[e] - lo
                if sstamp[lk] != cur:
                    sstamp[lk] = cur
                    r = remaining[lk] - sub[lk]
                    remaining[lk] = r if r > 0.0 else 0.0
        it += 1
        n_live = n_keep
    return it, tick


@njit(cache=True, nogil=True)
def _process_events(
    b, now, u0, u1, f0, f1, unit_alive, unit_bg, unit_nphases, unit_compute, unit_overlap, phase_off,
    phase_latency, phase_flow_lo, phase_flow_n, phase_npred, phase_succ_off, phase_succ, flow_bg,
    flow_bytes, rem, phase_cur, t_start_left, t_compute_left, t_comm_start_left, phase_state, phase_wait,
    phase_lat_left, iter_start, comm_start, comm_end, iterations_total, last_step_s, last_comm_s, iters,
    step_sum, comm_sum, max_rounds, eps_t, eps_b,
):  # fmt: skip
    """Every transition of instance ``b``'s units that is due now; returns (error code, unit)."""
    for f in range(f0, f1):
        if not flow_bg[f] and rem[f] <= eps_b * flow_bytes[f]:
            rem[f] = 0.0
    for u in range(u0, u1):
        if not unit_alive[u] or unit_bg[u]:
            continue
        nph = unit_nphases[u]
        p0 = phase_off[u]
        settled = False
        for _ in range(max_rounds):
            changed = False
            if phase_cur[u] == WAITING and t_start_left[u] <= eps_t:  # the job starts
                phase_cur[u] = PRE_COMM
                t_compute_left[u] = unit_compute[u]
                t_comm_start_left[u] = (1 - unit_overlap[u]) * unit_compute[u]
                iter_start[u] = now
                changed = True
            if phase_cur[u] == PRE_COMM and t_comm_start_left[u] <= eps_t:  # communication starts
                phase_cur[u] = 0
                comm_start[u] = now
                for p in range(p0, p0 + nph):  # phases that wait for none run, paying their latency
                    phase_wait[p] = phase_npred[p]
                    if phase_npred[p] == 0:
                        phase_state[p] = RUNNING
                        phase_lat_left[p] = phase_latency[p]
                    else:
                        phase_state[p] = IDLE
                changed = True
            pc = phase_cur[u]
            if pc >= 0 and pc < nph:  # a phase ends when its latency is paid and no bytes are left
                ended = False
                for p in range(p0, p0 + nph):
                    if phase_state[p] != RUNNING or phase_lat_left[p] > eps_t:
                        continue
                    pending = False
                    for f in range(phase_flow_lo[p], phase_flow_lo[p] + phase_flow_n[p]):
                        if rem[f] > 0:
                            pending = True
                            break
                    if pending:
                        continue
                    phase_state[p] = DONE
                    phase_cur[u] += 1
                    for e in range(phase_succ_off[p], phase_succ_off[p + 1]):  # its successors may start
                        q = phase_succ[e]
                        phase_wait[q] -= 1
                        if phase_wait[q] == 0:
                            phase_state[q] = RUNNING
                            phase_lat_left[q] = phase_latency[q]
                    ended = True
                if ended:
                    if phase_cur[u] == nph:
                        comm_end[u] = now
                    changed = True
            if phase_cur[u] == nph and t_compute_left[u] <= eps_t:  # the iteration ends
                st = now - iter_start[u]
                iters[u] += 1
                step_sum[u] += st
                comm_sum[u] += comm_end[u] - comm_start[u]
                iterations_total[u] += 1
                last_step_s[u] = st
                last_comm_s[u] = comm_end[u] - comm_start[u]
                if st <= 0:
                    return ERR_ZERO_STEP, u
                iter_start[u] = now
                phase_cur[u] = PRE_COMM
                t_compute_left[u] = unit_compute[u]
                t_comm_start_left[u] = (1 - unit_overlap[u]) * unit_compute[u]
                for p in range(phase_off[u], phase_off[u] + nph):
                    for f in range(phase_flow_lo[p], phase_flow_lo[p] + phase_flow_n[p]):
                        rem[f] = flow_bytes[f]
                changed = True
            if not changed:
                settled = True
                break
        if not settled:
            return ERR_SETTLE, u
    return ERR_NONE, -1


@njit(cache=True, nogil=True)
def run_interval_numba(
    duration, phase_mode, max_events, n_links, max_rounds, eps_t, eps_b,
    inst_unit, inst_flow, inst_entry,
    unit_alive, unit_bg, unit_nphases, unit_compute, unit_overlap, phase_off, phase_latency,
    phase_flow_lo, phase_flow_n, inst_phase, phase_npred, phase_succ_off, phase_succ,
    flow_unit, flow_phase, flow_bg, flow_bytes, flow_demand,
    e_flow, e_link, e_coef, capacity,
    rem, phase_cur, t_start_left, t_compute_left, t_comm_start_left, phase_state, phase_wait, phase_lat_left,
    iter_start, comm_start, comm_end, iterations_total, last_step_s, last_comm_s, bg_on, time_s,
    iters, step_sum, comm_sum, compute_t, active_t, link_bytes, stalled, stats,
):  # fmt: skip
    """Advance every instance by ``duration[b]`` seconds, event to event (see the module docstring).

    State arrays are updated in place; per-interval outputs (``iters`` .. ``stalled``) are accumulated
    into zeroed arrays. ``stats`` receives (events, solver iterations, error code, error unit).
    """
    inf = np.inf
    n_batch = duration.shape[0]
    n_flows = flow_unit.shape[0]
    n_phases = phase_state.shape[0]
    # scratch; link arrays are per instance and initialised lazily by stamps
    act = np.zeros(n_flows, dtype=np.bool_)
    rate = np.zeros(n_flows)
    moved = np.zeros(n_flows)  # (flows,) bytes moved in the interval
    t_phase = np.zeros(n_phases)
    fe_lo = np.zeros(n_flows, dtype=np.int64)  # (flows,) first entry of each flow
    fe_hi = np.zeros(n_flows, dtype=np.int64)  # (flows,) one past its last entry
    act_flows = np.empty(n_flows, dtype=np.int64)
    act_list = np.empty(n_flows, dtype=np.int64)
    frozen = np.empty(n_flows, dtype=np.int64)
    m = np.empty(n_flows)
    remaining = np.empty(n_links)
    denom = np.empty(n_links)
    share = np.empty(n_links)
    linkmin = np.empty(n_links)
    sub = np.empty(n_links)
    rstamp = np.full(n_links, -1, dtype=np.int64)
    stamp = np.full(n_links, -1, dtype=np.int64)
    sstamp = np.full(n_links, -1, dtype=np.int64)
    tick = 0
    events = 0
    solver_iters = 0
    for b in range(n_batch):
        u0, u1 = inst_unit[b], inst_unit[b + 1]
        f0, f1 = inst_flow[b], inst_flow[b + 1]
        e0, e1 = inst_entry[b], inst_entry[b + 1]
        lo = b * n_links
        cap = capacity[lo : lo + n_links]
        t_left = duration[b]
        for e in range(e0, e1):  # entries are sorted by flow
            f = e_flow[e]
            if fe_hi[f] == 0 or fe_hi[f] <= e0:
                fe_lo[f] = e
            fe_hi[f] = e + 1
        err, eu = _process_events(
            b, time_s[b], u0, u1, f0, f1, unit_alive, unit_bg, unit_nphases, unit_compute, unit_overlap,
            phase_off, phase_latency, phase_flow_lo, phase_flow_n, phase_npred, phase_succ_off, phase_succ,
            flow_bg, flow_bytes, rem, phase_cur, t_start_left, t_compute_left, t_comm_start_left,
            phase_state, phase_wait, phase_lat_left, iter_start, comm_start, comm_end, iterations_total,
            last_step_s, last_comm_s, iters, step_sum, comm_sum, max_rounds, eps_t, eps_b,
        )  # fmt: skip
        if err != ERR_NONE:
            stats[2], stats[3] = err, eu
            return
        solved = False
        ev = 0
        while t_left > eps_t:
            ev += 1
            if ev > max_events:
                stats[2], stats[3] = ERR_EVENTS, -1
                return
            # active flows; re-solve only when the set changed
            changed = not solved
            n_act = 0
            for f in range(f0, f1):
                u = flow_unit[f]
                if not unit_alive[u]:
                    a = False
                elif flow_bg[f]:
                    a = bg_on[u]
                else:
                    p = phase_off[u] + flow_phase[f]
                    a = phase_state[p] == RUNNING and phase_lat_left[p] <= eps_t and rem[f] > 0
                if a != act[f]:
                    changed = True
                    act[f] = a
                if a:
                    act_flows[n_act] = f
                    n_act += 1
            if changed:
                it, tick = _solve_instance(
                    n_act, act_flows, fe_lo, fe_hi, e_link, e_coef, lo, flow_demand, cap, rate,
                    remaining, rstamp, denom, share, linkmin, sub, stamp, sstamp, act_list, frozen, m, tick,
                )  # fmt: skip
                if it < 0:
                    stats[2], stats[3] = ERR_SOLVER, -1
                    return
                solver_iters += it
                solved = True
            # time to the next event
            dt = t_left
            n_stalled = 0
            if phase_mode:  # only the last flow of a phase is an event: earlier finishers keep their rate
                for p in range(inst_phase[b], inst_phase[b + 1]):
                    t_phase[p] = 0.0
            for i in range(n_act):
                f = act_flows[i]
                if flow_bg[f]:
                    continue
                r = rate[f]
                if r <= 0:
                    n_stalled += 1
                tf = rem[f] / r if r > 0 else inf
                if phase_mode:
                    p = phase_off[flow_unit[f]] + flow_phase[f]
                    if tf > t_phase[p]:
                        t_phase[p] = tf
                elif tf < dt:
                    dt = tf
            if phase_mode:
                for i in range(n_act):
                    f = act_flows[i]
                    if not flow_bg[f]:
                        tf = t_phase[phase_off[flow_unit[f]] + flow_phase[f]]
                        if tf < dt:
                            dt = tf
            if n_stalled > stalled[b]:
                stalled[b] = n_stalled
            for u in range(u0, u1):
                if not unit_alive[u] or unit_bg[u]:
                    continue
                pc = phase_cur[u]
                tm = t_start_left[u] if pc == WAITING else inf
                if t_compute_left[u] > eps_t and t_compute_left[u] < tm:
                    tm = t_compute_left[u]
                if pc == PRE_COMM and t_comm_start_left[u] < tm:
                    tm = t_comm_start_left[u]
                if pc >= 0 and pc < unit_nphases[u]:
                    for p in range(phase_off[u], phase_off[u] + unit_nphases[u]):
                        lt = phase_lat_left[p]
                        if phase_state[p] == RUNNING and lt > eps_t and lt < tm:
                            tm = lt
                if tm < dt:
                    dt = tm
            if dt < 0.0:
                dt = 0.0
            # advance bytes and link bytes
            for i in range(n_act):
                f = act_flows[i]
                x = rate[f] * dt
                if not flow_bg[f]:
                    if rem[f] < x:
                        x = rem[f]
                    rem[f] = rem[f] - x
                moved[f] += x
            # advance timers
            for u in range(u0, u1):
                if not unit_alive[u] or unit_bg[u]:
                    continue
                pc = phase_cur[u]
                if pc != WAITING:
                    active_t[u] += dt
                    compute_t[u] += min(t_compute_left[u], dt)
                t_compute_left[u] = max(t_compute_left[u] - dt, 0.0)
                if pc == WAITING:
                    t_start_left[u] = t_start_left[u] - dt
                elif pc == PRE_COMM:
                    t_comm_start_left[u] = t_comm_start_left[u] - dt
                elif pc < unit_nphases[u]:
                    for p in range(phase_off[u], phase_off[u] + unit_nphases[u]):
                        if phase_state[p] == RUNNING:
                            phase_lat_left[p] = max(phase_lat_left[p] - dt, 0.0)
            time_s[b] += dt
            t_left -= dt
            err, eu = _process_events(
                b, time_s[b], u0, u1, f0, f1, unit_alive, unit_bg, unit_nphases, unit_compute,
                unit_overlap, phase_off, phase_latency, phase_flow_lo, phase_flow_n, phase_npred,
                phase_succ_off, phase_succ, flow_bg, flow_bytes, rem, phase_cur, t_start_left,
                t_compute_left, t_comm_start_left, phase_state, phase_wait, phase_lat_left, iter_start,
                comm_start, comm_end, iterations_total, last_step_s, last_comm_s, iters, step_sum,
                comm_sum, max_rounds, eps_t, eps_b,
            )  # fmt: skip
            if err != ERR_NONE:
                stats[2], stats[3] = err, eu
                return
        # link bytes: the split is fixed within the interval, so bytes per flow first, then per entry
        # (in entry order from zero, as np.bincount sums)
        for e in range(e0, e1):
            link_bytes[e_link[e]] += e_coef[e] * moved[e_flow[e]]
        for f in range(f0, f1):
            act[f] = False
        if ev > events:
            events = ev
    stats[0] = events
    stats[1] = solver_iters
