"""The full-path interval kernel (:func:`run_interval_numba`): every event re-solves its instance.

**Arguments.** The kernel takes its arrays in three compiled records (:mod:`ainet_gym.sim.records`):
``structure`` (the :class:`~ainet_gym.sim.records.IntervalStructure` fields), ``state`` (the engine's
``flow_bytes`` and ``capacity``, then the :class:`~ainet_gym.sim.state.SimState` fields) and ``outputs`` (the
:class:`~ainet_gym.sim.records.IntervalOutputs` fields), and its scalars in two plain tuples, ``settings``
(:class:`~ainet_gym.sim.records.IntervalSettings`) and ``switch`` (:class:`~ainet_gym.sim.records.LazySwitch`);
below, each array and scalar is named by its field (the kernel reads each into a local once per call).

Instance ``b``'s incidence entries of ``e_flow`` / ``e_link`` / ``e_coef`` are as :func:`merge_range`
writes them: those on links that two or more of its flows may cross at ``inst_seg[b]:ent_hi[b]``,
flow ``f``'s at ``fe_lo[f]:fe_hi[f]``, and those on the links that no two of its flows cross (one
entry at most each) at ``ex_lo[b]:inst_seg[b + 1]``. State arrays are updated in place;
per-interval outputs (``iters`` .. ``stalled``) are accumulated into their instance's part, which
the kernel zeroes first (so they may come uninitialised, as :meth:`IntervalMetrics.empty` makes them).
``stats`` receives (events, solver iterations, error code, error unit; the other :data:`N_STATS`
columns are :func:`run_interval_lazy`'s); ``go`` are the kernel threads' flags (:func:`go_flags`), announced
first. Every array an instance writes is its own (its units, flows, phases, segments and links), so disjoint
ranges of the batch can run on different threads at once, each with its own ``stats``, and give the same
result as one call.

**An event**: the units settle (:func:`begin_event`, the frame both kernels share), the active set
(:func:`active_set`), perhaps a hand-off to the lazy kernel (:func:`hand_to_lazy`), a solve when the
set changed, the time to the next flow event (:func:`next_flow_event`), then the step
(:func:`end_event`) and the bytes moved. Allocation: the parallel local-bottleneck rule of
:func:`ainet_gym.sim.allocator.solve_coo` (:func:`parallel_rule`), bit for bit as the numpy backend,
re-solving every active flow when the active set changed; ``flow_w``: each flow's share weight (the
level ``rate / weight`` max-min fair), empty when every weight is 1.

**The switch.** The instances that :func:`run_interval_lazy` takes (exact event mode, at least ``inc_min``
flows; see :func:`lazy_instance`) start here and are handed to that kernel (the engine calls it on the same
range after this one, and this one again while an instance was handed back): with the switch off (``on``
false) before the first event; with it on (:data:`LAZY_SWITCH`), an interval starts on the path the
instance was on (``cost[b, 3]``: 0 lazy, 1 here) and goes over when :func:`hand_to_lazy` says so
(``ratio``, ``handoff``: its cost model). ``cost[b]`` (:data:`N_SWITCH` columns) holds the
running means of the measured work per entry of both paths, the savings and the path. ``mode[b]``
(such instances only): 0 at the start of the interval (this kernel zeroes the outputs), 1 handed back
by the lazy kernel (this kernel resumes), 2 handed to the lazy kernel, 3 done; at a hand-off
``ev[b]`` holds the events run and ``t[b]`` the s of the interval left, and each kernel adds the
link bytes of its part. ``stats[13]`` adds the work counted on this path for such instances (per event
the flows scanned and the active flows, per solve the entries of the live flows in every round).

**The steps** are compiled helpers without reference counting (``_nrt=False``, the note above
:func:`settle_units`), which take the arrays as named tuples (passed for free); the loops take no views
(``x[b]``, ``x[lo:hi]``): numba counts array references atomically, a call to a counted function increfs
and decrefs every array it passes, and two threads doing that to the same arrays fight over the
counts' cache lines.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ainet_gym.sim.backends.numba.crew import announce
from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit
from ainet_gym.sim.backends.numba.parallel import ParallelLinks, ParallelRows, parallel_rule
from ainet_gym.sim.backends.numba.settings import ERR_SOLVER, RESTART_MARGIN, SWITCH_MEAN_WEIGHT
from ainet_gym.sim.backends.numba.steps import (
    FRAME_CAP,
    FRAME_END,
    FRAME_RUN,
    IterationTallies,
    JobParams,
    PhaseGraph,
    UnitClock,
    UnitTable,
    add_link_bytes,
    advance_flow,
    begin_event,
    end_event,
    reset_instance_flows,
    zero_completed,
)
from ainet_gym.sim.state import RUNNING

__all__ = ["lazy_instance", "run_interval_numba"]


@njit(nogil=True, _nrt=False, inline="always")
def _flow_level(rate, weight, f):  # pragma: no cover - compiled
    """Flow ``f``'s level, ``rate[f] / weight[f]`` (its share weight; ``weight`` empty: every weight 1, the
    rate itself)."""
    return rate[f] / weight[f] if weight.shape[0] > 0 else rate[f]


class FullScratch(NamedTuple):
    """:func:`run_interval_numba`'s scratch (:func:`full_scratch`), indexed by global flow / phase id: only
    the flows and phases of the range are initialised and touched."""

    act: np.ndarray  # (flows,) bool active at the last event
    rate: np.ndarray  # (flows,) float64 bytes/s of the last solve
    moved: np.ndarray  # (flows,) float64 bytes moved in the interval
    t_phase: np.ndarray  # (phases,) float64 s to the last completion of each phase (phase mode)
    act_flows: np.ndarray  # (flows,) int64 the active flows, in flow order
    dcap: np.ndarray  # (flows,) float64 demand capped by the flow's exclusive links, bytes/s
    came_f: np.ndarray  # (flows,) bool an active flow joined the set at this event
    no_pend: np.ndarray  # (0,) int64, (0,) bool: settle_units' counts are run_interval_lazy's
    no_joined: np.ndarray


@njit(nogil=True, **COMPILED_ONLY)
def full_scratch(b_lo, b_hi, inst_flow, n_flows, n_phases, n_links):  # pragma: no cover - compiled
    """:func:`run_interval_numba`'s scratch for the instances ``b_lo:b_hi``: :class:`FullScratch`, and the
    solver's (:func:`parallel_rule`): :class:`ParallelRows` for the most flows of one instance, and
    :class:`ParallelLinks` reused by the instances in turn, initialised lazily by stamps."""
    f_max = 0  # most flows of one instance in the range
    for b in range(b_lo, b_hi):
        if inst_flow[b + 1] - inst_flow[b] > f_max:
            f_max = inst_flow[b + 1] - inst_flow[b]
    i64 = np.int64
    scr = FullScratch(
        np.empty(n_flows, dtype=np.bool_), np.empty(n_flows), np.empty(n_flows), np.empty(n_phases),
        np.empty(n_flows, dtype=i64), np.empty(n_flows), np.empty(n_flows, dtype=np.bool_), np.empty(0, dtype=i64),
        np.empty(0, dtype=np.bool_),
    )  # fmt: skip
    rows = ParallelRows(np.empty((f_max, 3), dtype=i64), np.empty((f_max, 2)), np.empty((f_max, 2), dtype=i64),
                        np.empty(f_max), np.empty((0, 2), dtype=i64), np.empty(0))  # fmt: skip
    links = ParallelLinks(
        np.empty(n_links), np.empty(n_links), np.empty(n_links), np.empty(n_links), np.empty(n_links),
        np.full(n_links, -1, dtype=i64), np.full(n_links, -1, dtype=i64), np.empty(n_links, dtype=i64),
        np.empty(0, dtype=i64), np.empty(0, dtype=i64),
    )  # fmt: skip
    return scr, rows, links


@njit(nogil=True, **COMPILED_ONLY)
def unit_records(structure, state, outputs):  # pragma: no cover - compiled
    """The unit steps' records (:class:`UnitTable`, :class:`UnitClock`, :class:`JobParams`,
    :class:`PhaseGraph`, :class:`IterationTallies`) of :func:`run_interval_numba`'s compiled records."""
    units = UnitTable(
        structure.unit_alive, structure.unit_bg, structure.unit_nphases, structure.phase_off,
        structure.phase_flow_lo, structure.phase_flow_n,
    )  # fmt: skip
    clock = UnitClock(
        state.phase_cur, state.t_start_left, state.t_compute_left, state.t_comm_start_left, state.phase_state,
        state.phase_wait, state.phase_lat_left, state.iter_start, state.comm_start, state.comm_end,
    )  # fmt: skip
    job = JobParams(structure.unit_compute, structure.unit_overlap, state.flow_bytes)
    graph = PhaseGraph(
        structure.phase_latency, structure.phase_npred, structure.phase_succ_off, structure.phase_succ,
    )  # fmt: skip
    tallies = IterationTallies(
        state.iterations_total, state.last_step_s, state.last_comm_s, outputs.iters, outputs.step_sum,
        outputs.comm_sum,
    )  # fmt: skip
    return units, clock, job, graph, tallies


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def full_instance_start(
    b, u0, u1, lo, n_links, cand, resumed, sw_on, sw_mode, sw_ev, sw_t, sw_cost, t_left, link_bytes, tallies,
    compute_t, active_t, stalled,
):  # fmt: skip  # pragma: no cover - compiled
    """Instance ``b`` at the start of its interval in :func:`run_interval_numba` (not ``resumed`` from the
    lazy kernel): its part of the outputs zeroed, here, on its thread (links ``lo:lo + n_links``, units
    ``u0:u1``). A lazy-kernel instance (``cand``) with the switch off, or last on the lazy path, is handed
    to it before its first event (``sw_mode[b] = 2``; the switch's columns ``sw_cost[b]``); True if so."""
    if not resumed:
        for k in range(lo, lo + n_links):
            link_bytes[k] = 0.0
        for u in range(u0, u1):
            tallies.iters[u] = 0
            tallies.step_sum[u] = 0.0
            tallies.comm_sum[u] = 0.0
            compute_t[u] = 0.0
            active_t[u] = 0.0
        stalled[b] = 0
    if cand and not resumed:
        sw_cost[b, 2] = 0.0  # the predicted savings of the other path since the last hand-off
        if not sw_on or sw_cost[b, 3] == 0.0:  # the lazy kernel from the start
            sw_cost[b, 3] = 0.0
            sw_mode[b] = 2
            sw_ev[b] = 0
            sw_t[b] = t_left
            return True
    if cand:
        sw_cost[b, 3] = 1.0  # on this path
    return False


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def active_set(
    f0, f1, eps_t, cand, scr, flow_w, flow_unit, flow_phase, flow_bg, unit_alive, bg_on, phase_off,
    phase_state, phase_lat_left, rem,
):  # fmt: skip  # pragma: no cover - compiled
    """The active flows of ``f0:f1`` at this event (:class:`FullScratch` ``scr``: ``act``, and
    ``act_flows`` in flow order, ``came_f`` marking the arrivals): a flow of an alive unit whose phase runs
    with its latency paid and bytes left, or a background flow switched on. ``(whether the set changed,
    active flows, the least last level rate / weight of the flows that left (lazy-kernel instances, cand;
    else inf), arrivals)``."""
    act, act_flows, came_f, rate = scr.act, scr.act_flows, scr.came_f, scr.rate
    changed = False
    n_act = np.int64(0)
    lev = np.inf
    n_came = 0
    for f in range(f0, f1):
        u = flow_unit[f]
        if not unit_alive[u]:
            a = False
        elif flow_bg[f]:
            a = bg_on[u]
        else:
            p = phase_off[u] + flow_phase[f]
            a = phase_state[p] == RUNNING and phase_lat_left[p] <= eps_t and rem[f] > 0
        arrived = False
        if a != act[f]:
            changed = True
            act[f] = a
            if a:
                n_came += 1
                arrived = True
            elif cand:
                lev = min(lev, _flow_level(rate, flow_w, f))
        if a:
            came_f[f] = arrived
            act_flows[n_act] = f
            n_act += 1
    return changed, n_act, lev, n_came


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def hand_to_lazy(
    b, f0, f1, n_act, n_came, lev, scr, flow_w, fe_lo, fe_hi, sw_ratio, sw_handoff, ev, t_left, sw_mode, sw_ev, sw_t,
    sw_cost,
):  # fmt: skip  # pragma: no cover - compiled
    """Whether :func:`run_interval_numba` hands lazy-kernel instance ``b`` to that kernel at this event (the
    active set changed after a solve; :data:`LAZY_SWITCH` on). The lazy kernel's re-fill is predicted as the
    entries of the active flows at or above its restart level (the flows that arrive, here all flows at an
    event with arrivals, and those whose last level, ``rate / weight``, is at least ``lev``, the least last
    level of the flows that left, less :data:`RESTART_MARGIN`): an upper bound, which also leaves out the
    connected components the event does not touch; a full solve as the running mean of its work per entry
    (``sw_cost[b, 0]``) x the active entries, plus the flows scanned and advanced. The predicted savings of
    the lazy kernel (its work weighted by ``sw_ratio``, :data:`LAZY_COST_RATIO`) accumulate in
    ``sw_cost[b, 2]`` (never below 0); the hand-off comes when they exceed ``sw_handoff`` predicted full
    solves (:data:`LAZY_HANDOFF_SOLVES`): then the hand-off is written (``sw_mode[b] = 2``, ``ev`` events run,
    ``t_left`` s left; the savings and the path reset)."""
    act_flows, came_f, rate = scr.act_flows, scr.came_f, scr.rate
    lev = lev * (1.0 - RESTART_MARGIN) if n_came == 0 else -np.inf
    e_act = 0
    e_above = 0
    for k in range(n_act):
        f = act_flows[k]
        ne = fe_hi[f] - fe_lo[f]
        e_act += ne
        if came_f[f] or _flow_level(rate, flow_w, f) >= lev:
            e_above += ne
    p_full = sw_cost[b, 0] * e_act + (f1 - f0) + n_act
    p_lazy = sw_ratio * sw_cost[b, 1] * e_above
    acc = sw_cost[b, 2] + p_full - p_lazy
    sw_cost[b, 2] = acc if acc > 0.0 else 0.0
    if acc > sw_handoff * p_full:
        sw_mode[b], sw_ev[b], sw_t[b], sw_cost[b, 2], sw_cost[b, 3] = 2, ev, t_left, 0.0, 0.0
        return True
    return False


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def next_flow_event(
    b, n_act, t_phase, act_flows, rate, rem, flow_bg, flow_unit, flow_phase, phase_off, inst_phase, phase_mode,
    quantum, stalled,
):  # fmt: skip  # pragma: no cover - compiled
    """The time (s) to the next flow event of instance ``b`` in :func:`run_interval_numba` (inf: none;
    ``stalled[b]``: the most active job flows at rate 0 at an event of the interval): the first flow completion, or (``phase_mode``: only the last flow of a
    phase is an event, earlier finishers keep their rate) the first phase whose last flow completes; with
    ``quantum`` > 0, completions up to ``quantum`` after the first are one event, at the last of them (the
    flows that finish earlier idle until then: their bandwidth is re-allocated late)."""
    inf = np.inf
    dt_fl = inf
    n_stalled = 0
    if phase_mode:
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
        elif tf < dt_fl:
            dt_fl = tf
    if phase_mode:
        for i in range(n_act):
            f = act_flows[i]
            if not flow_bg[f]:
                tf = t_phase[phase_off[flow_unit[f]] + flow_phase[f]]
                if tf < dt_fl:
                    dt_fl = tf
    if quantum > 0.0 and dt_fl < inf:
        t_q = dt_fl + quantum
        for i in range(n_act):
            f = act_flows[i]
            if flow_bg[f]:
                continue
            if phase_mode:
                tf = t_phase[phase_off[flow_unit[f]] + flow_phase[f]]
            else:
                r = rate[f]
                tf = rem[f] / r if r > 0 else inf
            if tf > dt_fl and tf <= t_q:
                dt_fl = tf
    stalled[b] = max(stalled[b], n_stalled)  # (as the lazy kernel's)
    return dt_fl


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def full_solve(
    b, cand, n_act, scr, fe_lo, fe_hi, e_link, e_coef, capacity, lo, rows, links, tick, flow_w, sw_cost,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`run_interval_numba`'s solve of instance ``b``'s active flows (:class:`FullScratch` ``scr``) by
    :func:`parallel_rule` into ``scr.rate``; for a lazy-kernel instance (``cand``) the running mean of the
    work per entry of this path (``sw_cost[b, 0]``) is updated. ``(rounds, -1 on NaN input; the work, cand's
    only, else 0; tick)``."""
    it, _, _, _, wk, wk0, tick = parallel_rule(
        n_act, scr.act_flows, fe_lo, fe_hi, e_link, e_coef, capacity, lo, scr.dcap, scr.rate, rows, links, tick,
        n_act, False, flow_w,
    )  # fmt: skip
    if not cand:
        return it, 0, tick
    if it >= 0 and wk0 > 0:
        sw_cost[b, 0] += SWITCH_MEAN_WEIGHT * (wk / wk0 - sw_cost[b, 0])
    return it, wk, tick


@njit(nogil=True, _nrt=False, **COMPILED_ONLY)
def advance_flows(n_act, act_flows, rate, dt, flow_bg, rem, moved):  # pragma: no cover - compiled
    """The active flows ``act_flows[:n_act]`` move ``rate x dt`` bytes each (:func:`advance_flow`)."""
    for i in range(n_act):
        f = act_flows[i]
        advance_flow(f, rate[f] * dt, flow_bg, rem, moved)


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def full_instance_end(
    b, cand, handed, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef, moved, link_bytes, sw_mode,
):  # fmt: skip  # pragma: no cover - compiled
    """Instance ``b`` leaves :func:`run_interval_numba`: the link bytes of its part (:func:`add_link_bytes`)
    and, for a lazy-kernel instance (``cand``) not ``handed`` to the lazy kernel, done (``sw_mode[b] = 3``:
    the rest of its interval ran here)."""
    add_link_bytes(b, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef, moved, link_bytes)
    if cand and not handed:
        sw_mode[b] = 3


@njit(cache=True, nogil=True)
def run_interval_numba(b_lo, b_hi, settings, structure, state, outputs, stats, go, switch):
    """Advance the instances ``b_lo:b_hi`` by ``duration[b]`` seconds, event to event: the module docstring
    says what ``settings`` (:class:`~ainet_gym.sim.records.IntervalSettings`), the three records, ``stats``,
    ``go`` and ``switch`` (:class:`~ainet_gym.sim.records.LazySwitch`) hold, what an event does and how the
    lazy-kernel instances are handed over."""
    announce(go)
    duration, phase_mode, quantum, inc_min, max_events, n_links, max_rounds, eps_t, eps_b, flow_w = settings
    sw_on, sw_ratio, sw_handoff, sw_mode, sw_ev, sw_t, sw_cost = switch
    units, clock, job, graph, tallies = unit_records(structure, state, outputs)  # (read once a call)
    st = structure
    inst_seg, ent_hi, ex_lo, fe_lo, fe_hi, e_flow, e_link, e_coef = st.inst_seg, st.ent_hi, st.ex_lo, st.fe_lo, st.fe_hi, st.e_flow, st.e_link, st.e_coef  # fmt: skip
    inst_unit, inst_flow, inst_phase, flow_unit, flow_phase, flow_bg, flow_scale, flow_demand = (
        st.inst_unit, st.inst_flow, st.inst_phase, st.flow_unit, st.flow_phase, st.flow_bg, st.flow_scale, st.flow_demand,
    )  # fmt: skip
    capacity, rem, bg_on, time_s, stalled = state.capacity, state.rem, state.bg_on, state.time_s, outputs.stalled  # fmt: skip
    unit_alive, phase_off, phase_state, phase_lat_left = units.unit_alive, units.phase_off, clock.phase_state, clock.phase_lat_left  # fmt: skip
    compute_t, active_t, link_bytes = outputs.compute_t, outputs.active_t, outputs.link_bytes
    scr, rows, links = full_scratch(b_lo, b_hi, inst_flow, flow_unit.shape[0], phase_state.shape[0], n_links)
    act, rate, moved, act_flows, dcap, t_phase, no_pend, no_joined = scr.act, scr.rate, scr.moved, scr.act_flows, scr.dcap, scr.t_phase, scr.no_pend, scr.no_joined  # fmt: skip
    tick = np.int64(0)  # int64 from the start (a literal 0 here and in n_act compiled parallel_rule twice)
    events, solver_iters = stats[0], stats[1]  # (it runs again on the ranges the lazy kernel hands back)
    full_events = switches = full_work = 0  # lazy-kernel instances: events run here, hand-offs, work counted
    for b in range(b_lo, b_hi):
        cand = lazy_instance(inst_flow, b, inc_min, phase_mode, quantum)  # the lazy kernel's (at some event)
        if cand and sw_mode[b] >= 2:  # the lazy kernel's, or done
            continue
        resumed = cand and sw_mode[b] == 1
        u0, u1, f0, f1, lo = inst_unit[b], inst_unit[b + 1], inst_flow[b], inst_flow[b + 1], b * n_links
        t_left = sw_t[b] if resumed else duration[b]
        if full_instance_start(b, u0, u1, lo, n_links, cand, resumed, sw_on, sw_mode, sw_ev, sw_t, sw_cost, t_left,
                               link_bytes, tallies, compute_t, active_t, stalled):  # fmt: skip
            continue
        reset_instance_flows(b, f0, f1, act, moved, dcap, flow_demand, ex_lo, inst_seg, e_flow, e_link, e_coef,
                             capacity)  # fmt: skip
        solved = handed = False
        ev = ev_in = sw_ev[b] if resumed else 0
        while True:
            zero_completed(f0, f1, eps_b, flow_bg, flow_scale, rem)  # (completions first: then settle)
            code, ev = begin_event(u0, u1, time_s[b], t_left, ev, max_events, max_rounds, eps_t, False, no_pend,
                                   no_joined, units, clock, rem, job, graph, tallies, stats)  # fmt: skip
            if code == FRAME_END:
                break
            if code != FRAME_RUN:
                if code == FRAME_CAP:
                    stats[11] += full_events + (ev - ev_in if cand else 0)
                    stats[13] += full_work
                return
            changed, n_act, lev, n_came = active_set(f0, f1, eps_t, cand, scr, flow_w, flow_unit, flow_phase, flow_bg,
                                                     unit_alive, bg_on, phase_off, phase_state, phase_lat_left, rem)  # fmt: skip
            changed = changed or not solved  # re-solve only when the active set changed
            if cand:
                full_work += (f1 - f0) + n_act  # the flows scanned, the active flows advanced
            if cand and sw_on and solved and changed and hand_to_lazy(
                b, f0, f1, n_act, n_came, lev, scr, flow_w, fe_lo, fe_hi, sw_ratio, sw_handoff, ev - 1, t_left,
                sw_mode, sw_ev, sw_t, sw_cost,
            ):  # fmt: skip  # handed to the lazy kernel at this event (which it runs again)
                ev, handed = ev - 1, True
                break
            if changed:
                it, wk, tick = full_solve(b, cand, n_act, scr, fe_lo, fe_hi, e_link, e_coef, capacity, lo, rows, links,
                                          tick, flow_w, sw_cost)  # fmt: skip
                if it < 0:
                    stats[2], stats[3] = ERR_SOLVER, -1
                    return
                solver_iters += it
                full_work += wk
                solved = True
            dt_fl = next_flow_event(b, n_act, t_phase, act_flows, rate, rem, flow_bg, flow_unit, flow_phase,
                                    phase_off, inst_phase, phase_mode, quantum, stalled)  # fmt: skip
            dt, _ = end_event(b, u0, u1, dt_fl if dt_fl < t_left else t_left, eps_t, units, clock, active_t,
                              compute_t, time_s)  # fmt: skip
            advance_flows(n_act, act_flows, rate, dt, flow_bg, rem, moved)
            t_left -= dt
        full_instance_end(b, cand, handed, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef, moved, link_bytes,
                          sw_mode)  # fmt: skip
        events = max(events, ev)
        if cand:
            full_events, switches = full_events + ev - ev_in, switches + handed
    stats[0], stats[1], stats[11], stats[12], stats[13] = events, solver_iters, stats[11] + full_events, stats[12] + switches, stats[13] + full_work  # fmt: skip


# ----------------------------------------------------------------------------------------------------------
# the lazy exact event loop: incremental fills, per-flow progress kept from the flow's last rate change
# ----------------------------------------------------------------------------------------------------------


@njit(nogil=True, inline="always")
def lazy_instance(inst_flow, b, inc_min, phase_mode, quantum):  # pragma: no cover - compiled
    """Whether instance ``b`` runs in :func:`run_interval_lazy` (exact event mode, at least ``inc_min >= 0``
    flows) rather than in :func:`run_interval_numba` (the parallel rule, bit for bit as the numpy backend)."""
    return inc_min >= 0 and not phase_mode and quantum == 0.0 and inst_flow[b + 1] - inst_flow[b] >= inc_min
