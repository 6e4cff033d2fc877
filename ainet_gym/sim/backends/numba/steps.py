"""The event steps both interval kernels are made of: the units' clock and the frame of an event."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit
from ainet_gym.sim.backends.numba.settings import ERR_EVENTS, ERR_SETTLE, ERR_ZERO_STEP
from ainet_gym.sim.state import DONE, IDLE, PRE_COMM, RUNNING, WAITING


class JobParams(NamedTuple):
    """Per-unit job parameters and per-flow bytes that :func:`settle_units` reads at a job's start and at the
    end of an iteration (the kernels' arguments of those names)."""

    unit_compute: np.ndarray  # (units,) float64 s of compute per iteration
    unit_overlap: np.ndarray  # (units,) float64 fraction of the compute that overlaps communication
    flow_bytes: np.ndarray  # (flows,) float64 bytes a flow starts an iteration with (flow_reset)


class PhaseGraph(NamedTuple):
    """The phases' latency and dependency graph, read when a unit's communication starts and when a phase
    ends (:func:`settle_units`; the kernels' arguments of those names)."""

    phase_latency: np.ndarray  # (phases,) float64 s
    phase_npred: np.ndarray  # (phases,) int64 predecessors
    phase_succ_off: np.ndarray  # (phases + 1,) int64 CSR offsets of the successors
    phase_succ: np.ndarray  # (successor entries,) int64 global phase ids


class IterationTallies(NamedTuple):
    """What the end of an iteration counts (:func:`settle_units`): the state's totals and last times, and
    the interval's outputs per unit (the kernels' arguments of those names)."""

    iterations_total: np.ndarray  # (units,) int64
    last_step_s: np.ndarray  # (units,) float64 s
    last_comm_s: np.ndarray  # (units,) float64 s
    iters: np.ndarray  # (units,) int64 iterations completed in the interval
    step_sum: np.ndarray  # (units,) float64 s, their step times summed
    comm_sum: np.ndarray  # (units,) float64 s, their communication times summed


class UnitTable(NamedTuple):
    """The stacked units' and phases' tables every unit step reads (the structure record's fields of those
    names, :class:`~ainet_gym.sim.records.IntervalStructure`)."""

    unit_alive: np.ndarray  # (units,) bool
    unit_bg: np.ndarray  # (units,) bool, a background source
    unit_nphases: np.ndarray  # (units,) int64
    phase_off: np.ndarray  # (units,) int64 first phase of each unit
    phase_flow_lo: np.ndarray  # (phases,) int64 first flow of each phase
    phase_flow_n: np.ndarray  # (phases,) int64 its flows


class UnitClock(NamedTuple):
    """The units' and phases' cursors and timers the unit steps advance (the
    :class:`~ainet_gym.sim.state.SimState` fields of those names, updated in place)."""

    phase_cur: np.ndarray  # (units,) int64 the running phase (WAITING, PRE_COMM, 0 .. nphases)
    t_start_left: np.ndarray  # (units,) float64 s to the job's start
    t_compute_left: np.ndarray  # (units,) float64 s of compute left in the iteration
    t_comm_start_left: np.ndarray  # (units,) float64 s to the start of its communication
    phase_state: np.ndarray  # (phases,) int64 IDLE / RUNNING / DONE
    phase_wait: np.ndarray  # (phases,) int64 predecessors not yet done
    phase_lat_left: np.ndarray  # (phases,) float64 s of latency left
    iter_start: np.ndarray  # (units,) float64 s, the iteration's start
    comm_start: np.ndarray  # (units,) float64 s, its communication's start
    comm_end: np.ndarray  # (units,) float64 s, its end


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def exclusive_caps(b, ex_lo, inst_seg, e_flow, e_link, e_coef, capacity, dcap):  # pragma: no cover - compiled
    """Cap ``dcap`` (the flows' demands, bytes/s) of instance ``b`` by its exclusive links' shares.

    A link only one flow crosses keeps its share cap / coef through the solve (nothing else is taken off
    it), so it acts on the flow exactly as a demand cap would: the solver sees the flow's demand capped by
    the least of those shares (the same rates, bit for bit; the parallel rule freezes the same flows in the
    same rounds) and only the shared links, often half the entries. The merge wrote the exclusive entries
    apart (``ex_lo[b]:inst_seg[b + 1]``, :func:`merge_range`) and the shared ones per flow.
    """
    for e in range(ex_lo[b], inst_seg[b + 1]):
        f = e_flow[e]
        x = capacity[e_link[e]] / e_coef[e]  # the link's share in every round (coef > 0)
        if x < dcap[f]:
            dcap[f] = x


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def end_phases(u, p0, nph, eps_t, counted, pend, joined, units, clock, rem, graph):  # pragma: no cover
    """End every running phase ``p0:p0 + nph`` of unit ``u`` whose latency is paid (within ``eps_t``) and
    whose flows have no bytes left (``pend``, or a scan of ``rem``: :func:`settle_units`' ``counted``),
    advancing the unit's cursor (:class:`UnitClock` ``clock``); its successors that wait for no other phase
    start (:class:`PhaseGraph` ``graph``). Whether a phase ended."""
    phase_flow_lo, phase_flow_n = units.phase_flow_lo, units.phase_flow_n
    phase_cur, phase_state, phase_wait, phase_lat_left = (
        clock.phase_cur, clock.phase_state, clock.phase_wait, clock.phase_lat_left,
    )  # fmt: skip
    ended = False
    for p in range(p0, p0 + nph):
        if phase_state[p] != RUNNING or phase_lat_left[p] > eps_t:
            continue
        if counted:
            pending = pend[p] > 0
        else:
            pending = False
            for f in range(phase_flow_lo[p], phase_flow_lo[p] + phase_flow_n[p]):
                if rem[f] > 0:
                    pending = True
                    break
        if pending:
            continue
        phase_state[p] = DONE
        phase_cur[u] += 1
        # its successors may start
        for e in range(graph.phase_succ_off[p], graph.phase_succ_off[p + 1]):
            q = graph.phase_succ[e]
            phase_wait[q] -= 1
            if phase_wait[q] == 0:
                phase_state[q] = RUNNING
                phase_lat_left[q] = graph.phase_latency[q]
                if counted:
                    joined[q] = False
        ended = True
    return ended


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def end_iteration(u, now, p0, nph, counted, pend, units, clock, rem, job, tallies, stats):  # pragma: no cover
    """Unit ``u``'s iteration ends at ``now`` (s): its step and communication times counted
    (:class:`IterationTallies` ``tallies``), the next iteration started (compute, the bytes of its phases
    ``p0:p0 + nph`` reset from :class:`JobParams` ``job``, and their counts in ``pend`` where ``counted``).
    False, with ``stats[2]``, ``stats[3]`` set, for a step of zero time."""
    phase_flow_lo, phase_flow_n = units.phase_flow_lo, units.phase_flow_n
    iter_start, comm_start, comm_end = clock.iter_start, clock.comm_start, clock.comm_end
    st = now - iter_start[u]
    tallies.iters[u] += 1
    tallies.step_sum[u] += st
    tallies.comm_sum[u] += comm_end[u] - comm_start[u]
    tallies.iterations_total[u] += 1
    tallies.last_step_s[u] = st
    tallies.last_comm_s[u] = comm_end[u] - comm_start[u]
    if st <= 0:
        stats[2], stats[3] = ERR_ZERO_STEP, u
        return False
    iter_start[u] = now
    clock.phase_cur[u] = PRE_COMM
    clock.t_compute_left[u] = job.unit_compute[u]
    clock.t_comm_start_left[u] = (1 - job.unit_overlap[u]) * job.unit_compute[u]
    for p in range(p0, p0 + nph):
        c = 0
        for f in range(phase_flow_lo[p], phase_flow_lo[p] + phase_flow_n[p]):
            rem[f] = job.flow_bytes[f]
            if rem[f] > 0:
                c += 1
        if counted:
            pend[p] = c
    return True


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def settle_units(
    u0, u1, now, max_rounds, eps_t, counted, pend, joined, units, clock, rem, job, graph, tallies, stats,
):  # fmt: skip  # pragma: no cover - compiled
    """Every transition of units ``u0:u1`` that is due at time ``now`` (s), repeated until none is (at most
    ``max_rounds`` rounds per unit): a job starts, its communication starts (the phases that wait for none
    run, paying their latency), a phase ends (latency paid, no bytes left: its successors may start), an
    iteration ends (its step and communication times counted into ``iters`` / ``step_sum`` /
    ``comm_sum`` and the state's totals; the next iteration's bytes reset). Compute that ends within
    ``eps_t`` has ended (no sliver carried).

    The arrays come as records: the units' tables (:class:`UnitTable` ``units``) and their timers
    (:class:`UnitClock` ``clock``), and those of the rarer transitions (:class:`JobParams` ``job``,
    :class:`PhaseGraph` ``graph``, :class:`IterationTallies` ``tallies``); below each array is named by
    its field.

    ``counted`` (:func:`run_interval_lazy`): a phase's flows with bytes left are counted in ``pend``
    (kept here when an iteration resets them) and ``joined[p]`` is cleared when phase ``p`` starts;
    otherwise (:func:`run_interval_numba`, which passes empty arrays for both) a phase's flows are scanned
    for bytes left. False on an error (``stats[2]``, ``stats[3]``: the code and the unit).
    """
    unit_alive, unit_bg, unit_nphases, phase_off = (
        units.unit_alive, units.unit_bg, units.unit_nphases, units.phase_off,
    )  # fmt: skip
    phase_cur, t_start_left, t_compute_left, t_comm_start_left = (
        clock.phase_cur, clock.t_start_left, clock.t_compute_left, clock.t_comm_start_left,
    )  # fmt: skip
    phase_state, phase_wait, phase_lat_left = clock.phase_state, clock.phase_wait, clock.phase_lat_left
    iter_start, comm_start, comm_end = clock.iter_start, clock.comm_start, clock.comm_end
    for u in range(u0, u1):
        if not unit_alive[u] or unit_bg[u]:
            continue
        nph = unit_nphases[u]
        p0 = phase_off[u]
        if t_compute_left[u] <= eps_t:  # compute that ends within eps_t has ended (no sliver carried)
            t_compute_left[u] = 0.0
        settled = False
        for _ in range(max_rounds):
            changed = False
            if phase_cur[u] == WAITING and t_start_left[u] <= eps_t:  # the job starts
                phase_cur[u] = PRE_COMM
                t_compute_left[u] = job.unit_compute[u]
                t_comm_start_left[u] = (1 - job.unit_overlap[u]) * job.unit_compute[u]
                iter_start[u] = now
                changed = True
            if phase_cur[u] == PRE_COMM and t_comm_start_left[u] <= eps_t:  # communication starts
                phase_cur[u] = 0
                comm_start[u] = now
                for p in range(p0, p0 + nph):  # phases that wait for none run, paying their latency
                    phase_wait[p] = graph.phase_npred[p]
                    if graph.phase_npred[p] == 0:
                        phase_state[p] = RUNNING
                        phase_lat_left[p] = graph.phase_latency[p]
                        if counted:
                            joined[p] = False
                    else:
                        phase_state[p] = IDLE
                changed = True
            pc = phase_cur[u]
            # a phase ends when its latency is paid and no bytes are left
            if pc >= 0 and pc < nph and end_phases(
                u, p0, nph, eps_t, counted, pend, joined, units, clock, rem, graph
            ):  # fmt: skip
                if phase_cur[u] == nph:
                    comm_end[u] = now
                changed = True
            if phase_cur[u] == nph and t_compute_left[u] <= eps_t:  # the iteration ends
                if not end_iteration(u, now, p0, nph, counted, pend, units, clock, rem, job, tallies, stats):
                    return False
                changed = True
            if not changed:
                settled = True
                break
        if not settled:
            stats[2], stats[3] = ERR_SETTLE, u
            return False
    return True


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def next_unit_event(u0, u1, dt, eps_t, units, clock):  # pragma: no cover - compiled
    """The least of ``dt`` and the time (s) to the next timer of units ``u0:u1`` (:class:`UnitTable`
    ``units``, :class:`UnitClock` ``clock``): a start, the end of compute (above ``eps_t``), the start of
    communication, the end of a running phase's latency."""
    inf = np.inf
    c = clock
    for u in range(u0, u1):
        if not units.unit_alive[u] or units.unit_bg[u]:
            continue
        pc = c.phase_cur[u]
        tm = c.t_start_left[u] if pc == WAITING else inf
        if c.t_compute_left[u] > eps_t and c.t_compute_left[u] < tm:
            tm = c.t_compute_left[u]
        if pc == PRE_COMM and c.t_comm_start_left[u] < tm:
            tm = c.t_comm_start_left[u]
        p0, nph = units.phase_off[u], units.unit_nphases[u]
        if pc >= 0 and pc < nph:
            for p in range(p0, p0 + nph):
                lt = c.phase_lat_left[p]
                if c.phase_state[p] == RUNNING and lt > eps_t and lt < tm:
                    tm = lt
        if tm < dt:
            dt = tm
    return dt


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def advance_units(u0, u1, dt, units, clock, active_t, compute_t):  # pragma: no cover - compiled
    """Advance the timers of units ``u0:u1`` (:class:`UnitTable` ``units``, :class:`UnitClock` ``clock``)
    by ``dt`` s, adding it to their active and compute times."""
    c = clock
    for u in range(u0, u1):
        if not units.unit_alive[u] or units.unit_bg[u]:
            continue
        pc = c.phase_cur[u]
        if pc != WAITING:
            active_t[u] += dt
            compute_t[u] += min(c.t_compute_left[u], dt)
        c.t_compute_left[u] = max(c.t_compute_left[u] - dt, 0.0)
        p0, nph = units.phase_off[u], units.unit_nphases[u]
        if pc == WAITING:
            c.t_start_left[u] = c.t_start_left[u] - dt
        elif pc == PRE_COMM:
            c.t_comm_start_left[u] = c.t_comm_start_left[u] - dt
        elif pc < nph:
            for p in range(p0, p0 + nph):
                if c.phase_state[p] == RUNNING:
                    c.phase_lat_left[p] = max(c.phase_lat_left[p] - dt, 0.0)


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def advance_flow(f, x, flow_bg, rem, moved):  # pragma: no cover - compiled
    """Flow ``f`` moves ``x`` bytes (a job flow at most its bytes left, ``rem``; a background flow has no
    end), added to ``moved``."""
    if not flow_bg[f]:
        if rem[f] < x:
            x = rem[f]
        rem[f] = rem[f] - x
    moved[f] += x


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def retire_flow(
    f, x, now, rem, moved, t_upd, act, apos, act_list, n_act, pend, slot, gone, n_gone
):  # pragma: no cover
    """Job flow ``f`` completes at ``now`` after moving ``x`` bytes since its last update (at most its bytes
    left, ``rem``): its bytes moved, none left, out of the active set (the last active flow takes its slot), its
    phase's count ``pend[slot]`` down, listed in ``gone``; the lazy kernel's per-flow and group-clock completions
    both. ``(n_act, n_gone)``."""
    if rem[f] < x:
        x = rem[f]
    moved[f] += x
    rem[f] = 0.0
    t_upd[f] = now
    act[f] = False
    n_act -= 1
    h = act_list[n_act]  # the last active flow takes its slot
    act_list[apos[f]] = h
    apos[h] = apos[f]
    pend[slot] -= 1
    gone[n_gone] = f
    return n_act, n_gone + 1


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def add_link_bytes(b, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef, moved, link_bytes):  # pragma: no cover
    """Add the bytes instance ``b``'s flows moved (``moved``) to its links' ``link_bytes``: the split is
    fixed within the interval, so bytes per flow first, then per entry (each link's entries in entry order
    from zero, as ``np.bincount`` sums: an exclusive link has one)."""
    for e in range(inst_seg[b], ent_hi[b]):
        link_bytes[e_link[e]] += e_coef[e] * moved[e_flow[e]]
    for e in range(ex_lo[b], inst_seg[b + 1]):
        link_bytes[e_link[e]] += e_coef[e] * moved[e_flow[e]]


# the event loop's frame, one implementation for both interval kernels: begin_event (the units settle, the
# interval's end, the event cap) and end_event (the units' next timer, their timers and the instance's clock
# advanced); each kernel's own allocation and completions go between the two

#: :func:`begin_event`'s codes: run the event; the interval is over; an error (in ``stats``); the event cap
FRAME_RUN, FRAME_END, FRAME_ERROR, FRAME_CAP = 0, 1, 2, 3


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def begin_event(
    u0, u1, now_s, t_left, ev, max_events, max_rounds, eps_t, counted, pend, joined, units, clock, rem, job, graph,
    tallies, stats,
):  # fmt: skip  # pragma: no cover - compiled
    """The top of an event of both interval kernels: every transition of units ``u0:u1`` due at ``now_s``
    (:func:`settle_units`, its arguments), then the interval's end (``t_left`` s left, no more than
    ``eps_t``) and the event count ``ev`` against ``max_events``. ``(code, ev)``: :data:`FRAME_RUN` (event
    ``ev``, counted up, runs), :data:`FRAME_END`, :data:`FRAME_ERROR` (a unit's error in ``stats``) or
    :data:`FRAME_CAP` (``ERR_EVENTS`` in ``stats``; the caller adds its counters so far)."""
    if not settle_units(
        u0, u1, now_s, max_rounds, eps_t, counted, pend, joined, units, clock, rem, job, graph, tallies, stats
    ):  # fmt: skip
        return FRAME_ERROR, ev
    if not t_left > eps_t:
        return FRAME_END, ev
    ev += 1
    if ev > max_events:
        stats[2], stats[3] = ERR_EVENTS, -1
        return FRAME_CAP, ev
    return FRAME_RUN, ev


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def end_event(b, u0, u1, dt, eps_t, units, clock, active_t, compute_t, time_s):  # pragma: no cover - compiled
    """The bottom of an event of both interval kernels: the step is the least of ``dt`` (the flows' next
    event, or the interval's end) and the next timer of units ``u0:u1`` (:func:`next_unit_event`), never
    below 0; the units' timers (:func:`advance_units`) and instance ``b``'s clock ``time_s[b]`` advance by
    it. ``(step, whether a unit's timer came first)``."""
    dt_u = next_unit_event(u0, u1, dt, eps_t, units, clock)
    unit_first = dt_u < dt
    if dt_u < 0.0:
        dt_u = 0.0
    advance_units(u0, u1, dt_u, units, clock, active_t, compute_t)
    time_s[b] += dt_u
    return dt_u, unit_first


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def reset_instance_flows(
    b, f0, f1, act, moved, dcap, flow_demand, ex_lo, inst_seg, e_flow, e_link, e_coef, capacity,
):  # fmt: skip  # pragma: no cover - compiled
    """Instance ``b``'s flows ``f0:f1`` at the start of its part of an interval (both kernels): none active,
    no bytes moved, demands capped by the exclusive links (:func:`exclusive_caps`)."""
    for f in range(f0, f1):
        act[f] = False
        moved[f] = 0.0
        dcap[f] = flow_demand[f]
    exclusive_caps(b, ex_lo, inst_seg, e_flow, e_link, e_coef, capacity, dcap)


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def zero_completed(f0, f1, eps_b, flow_bg, flow_scale, rem):  # pragma: no cover - compiled
    """Job flows of ``f0:f1`` whose bytes left are within the completion tolerance ``eps_b x flow_scale``
    have none (``rem`` 0)."""
    for f in range(f0, f1):
        if not flow_bg[f] and rem[f] <= eps_b * flow_scale[f]:
            rem[f] = 0.0
