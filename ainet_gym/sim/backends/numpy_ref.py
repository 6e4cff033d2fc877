"""The ``numpy`` backend: the readable reference of a decision interval, each event vectorised over the batch.

This is the oracle: the compiled kernels (:mod:`ainet_gym.sim.backends.numba`) follow its floating-point
operations and agree with it bit for bit on the shipped scenarios (``python -m ainet_gym.checks.parity``).
The stages are those of :class:`~ainet_gym.sim.backends.base.SimBackend`.

:func:`run_interval` reads the records the compiled interval takes (:mod:`ainet_gym.sim.records`: one
definition of the structure and the state feeds both backends, built by
:func:`~ainet_gym.sim.records.interval_records`), with two things of its own: the merged entries of the
split as one list (:class:`MergedEntries`; the kernels keep theirs per instance in the structure record's
buffers) and the index maps it derives from the structure record (:class:`IndexMaps`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ainet_gym.arrays import any_true, safe_divide
from ainet_gym.sim.backends.base import AfterFigures, Pending, Then, run_windows
from ainet_gym.sim.engine import EPS_B, EPS_T, IntervalMetrics, TooManyEvents
from ainet_gym.sim.records import IntervalState, IntervalStructure, kept_records
from ainet_gym.sim.ring_window import WindowSolve, window_bounds, window_event_dt, window_rates
from ainet_gym.sim.state import DONE, IDLE, PRE_COMM, RUNNING, WAITING
from ainet_gym.sim.upstream import UpstreamPlan, demand_sources, upstream_plan, upstream_rates
from ainet_gym.sim.water_filling import solve_coo
from ainet_gym.units import BYTES_PER_S_TO_GBPS

if TYPE_CHECKING:
    from ainet_gym.sim.engine import BatchSim, EntryTable
    from ainet_gym.sim.metrics import IntervalMeter, NumbaFigures, StepResult

__all__ = ["IndexMaps", "MergedEntries", "NumpyBackend", "index_maps", "run_interval"]


class NumpyBackend:
    """The numpy reference (:class:`~ainet_gym.sim.backends.base.SimBackend`)."""

    name = "numpy"
    reference = True
    fused_split = False
    figures_on_kernel_threads = False
    ring_window = True
    background_upstream = ("share", "demand")

    def merge_split(
        self, table: EntryTable, split: np.ndarray
    ) -> tuple[tuple[np.ndarray, ...] | None, Pending | None]:
        """The merged entries now: one weighted bincount over the candidate segments."""
        t = table
        coef = np.bincount(t.cand_seg, weights=split.reshape(-1)[t.cand_gather], minlength=t.n_seg)
        keep = coef > 0
        return (t.seg_flow[keep], t.seg_link[keep], coef[keep], keep), None

    def run_interval(
        self, sim: BatchSim, duration_s: np.ndarray | float, max_events: int, then: Then | None
    ) -> IntervalMetrics:
        """:func:`run_interval`; ``then`` (a pass on the kernel threads) is refused."""
        if then is not None:
            raise ValueError(f"run_interval(then=...): backend {self.name!r}; needs 'numba'")
        structure, state, ix, demand = _records(sim)
        entries = MergedEntries(sim.e_flow, sim.e_link, sim.e_coef, sim.e_lperm)
        uw = sim.engine_state.unit_weight
        rw = sim.ring_window  # routing.ring_window_bytes (None: none)
        ws = None
        if rw is not None:
            share = WindowSolve.shares(rw, sim.engine_state.split)
            ws = WindowSolve(
                rw, share, np.full(rw.part.shape[0], np.inf), scale=WindowSolve.scales(rw, share)
            )
        m = run_interval(
            structure, state, entries, duration_s, max_events, sim.rate_updates == "phase", sim.rate_quantum_s,
            sim.n_links, lambda u: sim.flat_units[u].name,
            None if uw is None else uw[structure.flow_unit], upstream_plan(sim, demand) if demand.any() else None,
            ws, ix,
        )  # fmt: skip
        if ws is not None:
            sim.note_window(ws)
        return m

    def run_step(
        self,
        sim: BatchSim,
        meter: IntervalMeter,
        duration_s: np.ndarray,
        windows: int,
        max_events: int,
        job_unit: np.ndarray,
        ideal_step_s: np.ndarray,
        job_names: list[list[str | None]],
        after_figures: AfterFigures | None,
    ) -> tuple[list[IntervalMetrics], NumbaFigures | None]:
        """One :func:`run_interval` per window; the figures follow (:meth:`interval_result`)."""
        return run_windows(sim, duration_s, windows, max_events), None

    def interval_result(
        self,
        meter: IntervalMeter,
        sim: BatchSim,
        m: IntervalMetrics,
        job_unit: np.ndarray,
        ideal_step_s: np.ndarray,
        job_names: list[list[str | None]],
    ) -> StepResult:
        """:meth:`IntervalMeter.result <ainet_gym.sim.metrics.IntervalMeter.result>` and the capacities and
        NIC throughput of the interval, in numpy."""
        res = meter.result(sim, m, job_unit, ideal_step_s, job_names)
        res.capacity_bytes_per_s = sim.engine_state.capacity_bytes_per_s.copy()
        with np.errstate(invalid="ignore", divide="ignore"):
            res.throughput_gbps = np.where(
                m.duration_s > 0,
                m.link_bytes[:, meter.fabric.gpu_uplinks].sum(axis=1) / m.duration_s * BYTES_PER_S_TO_GBPS,
                0.0,
            )
        return res

    def solve_entries(
        self,
        flow: np.ndarray,
        link: np.ndarray,
        coef: np.ndarray,
        cap: np.ndarray,
        n_flows: int,
        weights: np.ndarray | None,
        demand: np.ndarray | None,
        blocks: tuple[np.ndarray, np.ndarray] | None,
    ) -> np.ndarray:
        """The numpy parallel rule (:func:`~ainet_gym.sim.allocator.solve_coo`); stacked instances are
        independent, so ``blocks`` needs no special case."""
        return solve_coo(flow, link, coef, cap, n_flows, weights=weights, demand=demand)  # type: ignore[return-value]


def _records(sim: BatchSim) -> tuple[IntervalStructure, IntervalState, IndexMaps, np.ndarray]:
    """The records of ``sim``, their :func:`index_maps` and the units that are ``upstream: demand`` sources
    (:func:`~ainet_gym.sim.upstream.demand_sources`), kept as :func:`~ainet_gym.sim.records.kept_records`
    keeps them."""
    return kept_records(sim, "numpy_records", lambda s, st: (s, st, index_maps(s), demand_sources(sim)))


class IndexMaps(NamedTuple):
    """What the reference derives from the structure record (:func:`index_maps`): where each unit, phase and
    flow belongs, for its vectorised gathers and scatters."""

    unit_inst: np.ndarray  # (units,) int64 instance of each unit
    phase_unit: np.ndarray  # (phases,) int64 unit of each phase
    phase_inst: np.ndarray  # (phases,) int64 instance of each phase
    flow_inst: np.ndarray  # (flows,) int64 instance of each flow
    flow_gphase: np.ndarray  # (flows,) int64 global phase of each flow, -1 for background flows
    job_flows: np.ndarray  # (job flows,) int64 the flows that are not background
    phase_edge_src: np.ndarray  # (successor entries,) int64 the phase each successor entry leaves


def index_maps(s: IntervalStructure) -> IndexMaps:
    """The :class:`IndexMaps` of the structure record ``s`` (its per-instance offsets and per-unit counts
    expanded)."""
    B = s.inst_unit.shape[0] - 1
    inst = np.arange(B, dtype=np.int64)
    return IndexMaps(
        unit_inst=np.repeat(inst, np.diff(s.inst_unit)),
        phase_unit=np.repeat(np.arange(s.unit_bg.shape[0], dtype=np.int64), s.unit_nphases),
        phase_inst=np.repeat(inst, np.diff(s.inst_phase)),
        flow_inst=np.repeat(inst, np.diff(s.inst_flow)),
        flow_gphase=np.where(s.flow_bg, -1, s.phase_off[s.flow_unit] + s.flow_phase).astype(np.int64),
        job_flows=np.flatnonzero(~s.flow_bg),
        phase_edge_src=np.repeat(
            np.arange(s.phase_npred.shape[0], dtype=np.int64), np.diff(s.phase_succ_off)
        ),
    )


class MergedEntries(NamedTuple):
    """The nonzero incidence entries of the split, merged by (flow, link) (:meth:`NumpyBackend.merge_split`;
    the numba kernels read theirs, per instance, from the structure record's entry buffers)."""

    flow: np.ndarray  # (entries,) int64 flow of each entry, sorted (so by instance)
    link: np.ndarray  # (entries,) int64 global link (instance * links + link)
    coef: np.ndarray  # (entries,) float64 > 0, bytes on the link per byte of the flow
    lperm: np.ndarray  # (entries,) int64 the entries in link order (the allocator's)


def run_interval(
    s: IntervalStructure,
    st: IntervalState,
    e: MergedEntries,
    duration_s: np.ndarray | float,
    max_events: int,
    phase_mode: bool,
    quantum_s: float,
    n_links: int,
    unit_name: Callable[[int], str],
    flow_weight: np.ndarray | None = None,
    upstream: UpstreamPlan | None = None,
    window: WindowSolve | None = None,
    ix: IndexMaps | None = None,
) -> IntervalMetrics:
    """:meth:`BatchSim.run_interval <ainet_gym.sim.engine.BatchSim.run_interval>` on the records the compiled
    kernels take (:func:`ainet_gym.sim.records.interval_records`: the structure ``s``, the state ``st``, whose
    arrays it writes in place), vectorised over the batch event by event (the reference the compiled kernels
    follow operation for operation). ``e``: the merged entries of the split; ``phase_mode``: rates change
    only when a phase ends (``rate_updates: phase``); ``quantum_s``: the rate quantum (0: none);
    ``unit_name(u)``: the name of unit ``u``, for the error of an iteration that takes no time;
    ``flow_weight``: (flows,) each flow's share weight (None: every weight 1); ``upstream``: the hops of the
    background flows of ``upstream: demand`` sources (:func:`ainet_gym.sim.upstream.upstream_plan`; None: none);
    ``window``: the NCCL window of the rings' sub-flows (``routing.ring_window_bytes``,
    :mod:`ainet_gym.sim.ring_window`; None: none), whose fixed point replaces the rates and whose bounds are
    events too (not with ``upstream``: refused when the units are stacked); ``ix``: the :func:`index_maps`
    of ``s`` (None: made here).

    Each event takes the steps of the model's interval in the order docs/model.md gives them: the rates
    (:class:`_Rates`), the time to the next event (:func:`_flow_event_dt`, :func:`_timer_event_dt`),
    advancing bytes and timers (:func:`_advance`), and the transitions that are due (:func:`_process_events`).
    """
    B, U, L = s.inst_unit.shape[0] - 1, s.unit_bg.shape[0], n_links
    ix = index_maps(s) if ix is None else ix
    t_left = np.broadcast_to(np.asarray(duration_s, dtype=np.float64), (B,)).copy()
    m = IntervalMetrics.zeros(t_left.copy(), U, L)
    stalled = m.stalled_flows
    flow_moved = np.zeros(s.flow_unit.shape[0])  # (flows,) bytes each flow moved in the interval
    solver = _Rates(s, e, st.capacity, flow_weight, upstream, window)
    extra_bytes = None if upstream is None else np.zeros(B * L)  # upstream: demand, beyond flow_moved
    events = 0
    _process_events(s, ix, st, m, unit_name)
    while True:
        running = t_left > EPS_T
        if not any_true(running):
            break
        events += 1
        if events > max_events:
            raise TooManyEvents(f"run_interval: more than {max_events} events in one interval")
        active = _active_flows(s, ix, st, running)
        act_idx = active.nonzero()[0]  # (np.flatnonzero of the 1-D mask, without its Python wrappers)
        rates = solver.rates(active, act_idx, st.rem)
        job_flow = ~s.flow_bg[act_idx]
        fi = ix.flow_inst[act_idx]  # (active flows,) instance of each
        dt = _flow_event_dt(s, ix, st, act_idx, rates, job_flow, fi, t_left.copy(), phase_mode, quantum_s)
        if window is not None:  # a free part's lead reaching a bound is an event
            window_event_dt(window, *solver.window_now, rates, dt)
        stalled_now = np.bincount(fi, weights=(rates <= 0) & job_flow, minlength=B).astype(np.int64)
        stalled = np.maximum(stalled, stalled_now)
        alive = ~s.unit_bg & running[ix.unit_inst]
        ph_live = alive[ix.phase_unit] & (st.phase_state == RUNNING)  # phases paying their latency
        _timer_event_dt(ix, st, alive, ph_live, dt)
        dt = np.where(running, np.maximum(dt, 0.0), 0.0)
        _advance(ix, st, m, act_idx, rates, job_flow, fi, alive, ph_live, dt, flow_moved)
        if solver.extra is not None and extra_bytes is not None:  # upstream: demand, a charged flow's excess
            xl, xr = solver.extra
            extra_bytes += np.bincount(xl, weights=xr * dt[xl // L], minlength=B * L)
        t_left -= dt
        _process_events(s, ix, st, m, unit_name)
    # link bytes: the split is fixed within the interval, so sum per flow first, then over entries
    link_bytes = np.bincount(e.link, weights=e.coef * flow_moved[e.flow], minlength=B * L)
    if extra_bytes is not None:
        link_bytes = link_bytes + extra_bytes
    return replace(
        m,
        link_bytes=link_bytes.reshape(B, L),
        stalled_flows=stalled,
        events=events,
        solver_iterations=solver.iterations,
    )


class _Rates:
    """The max-min rates of the active flows, event by event: solved again only when the set of active flows
    changed (same flows, same capacities: the same rates). With a ring window (``window``), the window's fixed
    point (:func:`~ainet_gym.sim.ring_window.window_rates`), solved again when the active flows or the parts at
    a bound changed."""

    def __init__(
        self,
        s: IntervalStructure,
        e: MergedEntries,
        cap: np.ndarray,
        weight: np.ndarray | None = None,
        upstream: UpstreamPlan | None = None,
        window: WindowSolve | None = None,
    ) -> None:
        self.s, self.e, self.cap = s, e, cap
        self.weight = weight  # (flows,) share weights, None: all 1
        self.upstream = upstream  # background upstream: demand (None: no such source)
        # the charged flows' upstream excess of the last rates: (global links, bytes/s), None: none
        self.extra: tuple[np.ndarray, np.ndarray] | None = None
        self.window = window  # routing.ring_window_bytes (None: none)
        self.prev_active: np.ndarray | None = None
        self.prev_bound: np.ndarray | None = None
        self.prev_rates = np.zeros(0)
        self.iterations = 0  # the solver's rounds, summed over the interval
        # with a window, after rates(): (pos, bound by the feeding hop, by the fed hop, lead over each), (K,) each
        self.window_now: tuple[np.ndarray, ...] = ()

    def rates(self, active: np.ndarray, act_idx: np.ndarray, rem: np.ndarray | None = None) -> np.ndarray:
        """``(active flows,)`` the rates of the flows ``act_idx`` (``active``: the mask of them; ``rem``: the
        flows' remainders, which a window's bounds read)."""
        e = self.e
        rates = np.zeros(act_idx.shape[0])
        prev = self.prev_active
        same = prev is not None and prev.shape == active.shape and not any_true(active != prev)
        bound = None
        if self.window is not None:
            assert rem is not None
            bu, bd, lead_up, lead_dn, to_next = window_bounds(
                self.window.window, self.window.share, rem, active, self.window.scale
            )
            pos = np.where(
                active[self.window.window.part], (np.cumsum(active) - 1)[self.window.window.part], -1
            )
            self.window_now = (pos, bu, bd, lead_up, lead_dn, to_next)
            bound = np.concatenate([bu, bd])
            same = same and self.prev_bound is not None and np.array_equal(bound, self.prev_bound)
        if same:
            rates = self.prev_rates
        elif act_idx.size:
            e_sel = active[e.flow]
            ef, el, ec = e.flow[e_sel], e.link[e_sel], e.coef[e_sel]
            compact = active.cumsum() - 1
            new_entry = e_sel.cumsum() - 1
            lperm = new_entry[e.lperm[e_sel[e.lperm]]]  # link order of the selection
            w = None if self.weight is None else self.weight[act_idx]

            def solve(demand: np.ndarray) -> np.ndarray:
                r, it = solve_coo(
                    compact[ef], el, ec, self.cap, act_idx.shape[0], weights=w, demand=demand,
                    return_iterations=True, link_order=lperm,
                )  # fmt: skip
                self.iterations += it
                return r

            demand = self.s.flow_demand[act_idx]
            self.extra = None
            if self.window is not None and bound is not None and bound.any():
                pos, bu, bd = self.window_now[:3]
                rates = window_rates(self.window, pos, bu, bd, demand, solve)
            else:
                rates = solve(demand)
            if self.upstream is not None:
                up = upstream_rates(
                    self.upstream, act_idx, compact[ef], el, ec, self.cap, rates, demand, w,
                )  # fmt: skip
                if up is not None:
                    rates, self.extra = up.rates, (up.extra_link, up.extra_rate)
        elif act_idx.size == 0:
            self.extra = None
        self.prev_active, self.prev_rates, self.prev_bound = active, rates, bound
        return rates


def _flow_event_dt(
    s: IntervalStructure,
    ix: IndexMaps,
    st: IntervalState,
    act_idx: np.ndarray,
    rates: np.ndarray,
    job_flow: np.ndarray,
    fi: np.ndarray,
    dt: np.ndarray,
    phase_mode: bool,
    quantum_s: float,
) -> np.ndarray:
    """``dt`` (per instance, the time left) lowered to the instance's next flow completion that is an event:
    in phase mode only the last flow of a phase; with a rate quantum the last completion within the quantum
    after the first."""
    with np.errstate(divide="ignore"):
        t_fin = safe_divide(st.rem[act_idx], rates, np.inf)
    t_fin = np.where(job_flow, t_fin, np.inf)
    if phase_mode:
        # only the last flow of a phase is an event: earlier finishers keep their rate
        t_phase = np.zeros(st.phase_state.shape[0] + 1)  # the last slot takes background flows
        gp = ix.flow_gphase[act_idx]
        np.maximum.at(t_phase, gp, np.where(job_flow, t_fin, 0.0))
        t_fin = np.where(job_flow, t_phase[gp], np.inf)
    if quantum_s > 0.0:
        # completions up to the quantum after an instance's first are one event, at the last of them
        t_first = np.full(dt.shape[0], np.inf)
        np.minimum.at(t_first, fi, t_fin)
        t_q = t_first + quantum_s
        in_q = t_fin <= t_q[fi]
        t_last = t_first.copy()
        np.maximum.at(t_last, fi[in_q], t_fin[in_q])
        dt = np.minimum(dt, t_last)
    else:
        np.minimum.at(dt, fi, t_fin)
    return dt


def _timer_event_dt(
    ix: IndexMaps, st: IntervalState, alive: np.ndarray, ph_live: np.ndarray, dt: np.ndarray
) -> None:
    """Lower ``dt`` (per instance, in place) to the next timer of its live units (job start, compute end,
    communication start) and the next latency paid by a running phase."""
    pc = st.phase_cur
    timers = np.where(pc == WAITING, st.t_start_left, np.inf)
    timers = np.minimum(timers, np.where(st.t_compute_left > EPS_T, st.t_compute_left, np.inf))
    timers = np.minimum(timers, np.where(pc == PRE_COMM, st.t_comm_start_left, np.inf))
    timers = np.where(alive, timers, np.inf)
    np.minimum.at(dt, ix.unit_inst, timers)
    lat = st.phase_lat_left
    np.minimum.at(dt, ix.phase_inst, np.where(ph_live & (lat > EPS_T), lat, np.inf))


def _advance(
    ix: IndexMaps,
    st: IntervalState,
    m: IntervalMetrics,
    act_idx: np.ndarray,
    rates: np.ndarray,
    job_flow: np.ndarray,
    fi: np.ndarray,
    alive: np.ndarray,
    ph_live: np.ndarray,
    dt: np.ndarray,
    flow_moved: np.ndarray,
) -> None:
    """Advance by ``dt`` (per instance): the bytes of the active flows (``flow_moved`` adds them), the units'
    timers and active and compute times (``m``), the phases' latencies and the clock."""
    dtf = dt[fi]
    moved = np.minimum(rates * dtf, st.rem[act_idx])  # phase mode: early finishers stop at 0
    st.rem[act_idx] = np.where(job_flow, st.rem[act_idx] - moved, st.rem[act_idx])
    flow_moved[act_idx] += np.where(job_flow, moved, rates * dtf)
    dtu = dt[ix.unit_inst]
    pc = st.phase_cur
    started = alive & (pc != WAITING)
    m.active_time_s[...] += np.where(started, dtu, 0.0)
    m.compute_time_s[...] += np.where(started, np.minimum(st.t_compute_left, dtu), 0.0)
    st.t_compute_left[...] = np.where(alive, np.maximum(st.t_compute_left - dtu, 0.0), st.t_compute_left)
    st.t_start_left[...] = np.where(alive & (pc == WAITING), st.t_start_left - dtu, st.t_start_left)
    st.t_comm_start_left[...] = np.where(
        alive & (pc == PRE_COMM), st.t_comm_start_left - dtu, st.t_comm_start_left
    )
    lat = st.phase_lat_left
    st.phase_lat_left[...] = np.where(ph_live, np.maximum(lat - dt[ix.phase_inst], 0.0), lat)
    st.time_s[...] += dt


_FALSE = np.zeros(1, dtype=bool)  # the background flows' phase slot in _active_flows (never ready)


def _active_flows(s: IntervalStructure, ix: IndexMaps, st: IntervalState, running: np.ndarray) -> np.ndarray:
    # a flow moves when its phase runs and has paid its latency; index -1 (background) is False
    ready = np.concatenate(((st.phase_state == RUNNING) & (st.phase_lat_left <= EPS_T), _FALSE))
    job_active = ready[ix.flow_gphase] & (st.rem > 0)
    bg_active = s.flow_bg & st.bg_on[s.flow_unit]
    return (job_active | bg_active) & running[ix.flow_inst]


def _process_events(
    s: IntervalStructure,
    ix: IndexMaps,
    st: IntervalState,
    m: IntervalMetrics,
    unit_name: Callable[[int], str],
) -> None:
    """Apply every transition that is due now, until none is (vectorised over units): a job starts
    (:func:`_start_jobs`), communication starts (:func:`_start_comm`), phases end (:func:`_end_phases`),
    iterations end (:func:`_end_iterations`; their figures go to ``m``), in this order, as the compiled
    kernels apply them inline. Each step says whether it changed a unit (a bool: or-ing their masks and
    reducing cost more, on a loop that runs some 20 times a step)."""
    U = s.unit_bg.shape[0]
    now = st.time_s[ix.unit_inst] if U else np.zeros(0)
    done_flow = (~s.flow_bg) & (st.rem <= EPS_B * s.flow_scale)
    st.rem[...] = np.where(done_flow, 0.0, st.rem)
    alive = ~s.unit_bg
    # compute that ends within eps_t has ended: no sliver of it is carried into the next event (so two
    # backends whose event times differ in the last bits count the same compute time)
    st.t_compute_left[...] = np.where(alive & (st.t_compute_left <= EPS_T), 0.0, st.t_compute_left)
    for _ in range(4 * int(s.unit_nphases.max(initial=0)) + 8):
        changed = _start_jobs(s, st, alive, now)
        changed |= _start_comm(s, ix, st, alive, now)  # (|= on bools: every step runs, none is skipped)
        changed |= _end_phases(s, ix, st, alive, now)
        changed |= _end_iterations(s, st, m, alive, now, unit_name)
        if not changed:
            return
    raise RuntimeError("event processing did not settle")


def _start_jobs(s: IntervalStructure, st: IntervalState, alive: np.ndarray, now: np.ndarray) -> bool:
    """The units whose start time has come begin their first iteration (compute first); whether any did."""
    go = alive & (st.phase_cur == WAITING) & (st.t_start_left <= EPS_T)
    if not any_true(go):
        return False
    st.phase_cur[...] = np.where(go, PRE_COMM, st.phase_cur)
    st.t_compute_left[...] = np.where(go, s.unit_compute, st.t_compute_left)
    st.t_comm_start_left[...] = np.where(go, (1 - s.unit_overlap) * s.unit_compute, st.t_comm_start_left)
    st.iter_start[...] = np.where(go, now, st.iter_start)
    return True


def _start_comm(
    s: IntervalStructure, ix: IndexMaps, st: IntervalState, alive: np.ndarray, now: np.ndarray
) -> bool:
    """The units whose communication is due start it (:func:`_start_phases`); whether any did."""
    go = alive & (st.phase_cur == PRE_COMM) & (st.t_comm_start_left <= EPS_T)
    if not any_true(go):
        return False
    st.phase_cur[...] = np.where(go, 0, st.phase_cur)
    st.comm_start[...] = np.where(go, now, st.comm_start)
    _start_phases(s, ix, st, go)
    return True


def _end_phases(
    s: IntervalStructure, ix: IndexMaps, st: IntervalState, alive: np.ndarray, now: np.ndarray
) -> bool:
    """A phase ends when its latency is paid and none of its flows has bytes left; the phases that wait for it
    start when it was the last they waited for; the cursor counts the phases done. Whether a phase ended."""
    U = s.unit_bg.shape[0]
    pc = st.phase_cur
    n_ph = st.phase_state.shape[0]
    jf = ix.job_flows
    pending = np.bincount(ix.flow_gphase[jf], weights=st.rem[jf] > 0, minlength=n_ph)
    done = alive[ix.phase_unit] & (st.phase_state == RUNNING) & (st.phase_lat_left <= EPS_T) & (pending == 0)
    if not any_true(done):
        return False
    st.phase_state[...] = np.where(done, DONE, st.phase_state)
    n_done = np.bincount(ix.phase_unit[done], minlength=U)
    go = n_done > 0
    st.phase_cur[...] = pc + n_done
    dec = np.bincount(s.phase_succ, weights=done[ix.phase_edge_src], minlength=n_ph)
    st.phase_wait[...] = st.phase_wait - dec.astype(np.int64)
    enter = (dec > 0) & (st.phase_wait == 0)
    st.phase_state[...] = np.where(enter, RUNNING, st.phase_state)
    st.phase_lat_left[...] = np.where(enter, s.phase_latency, st.phase_lat_left)
    fin = go & (st.phase_cur == s.unit_nphases)
    st.comm_end[...] = np.where(fin, now, st.comm_end)
    return True


def _end_iterations(
    s: IntervalStructure,
    st: IntervalState,
    m: IntervalMetrics,
    alive: np.ndarray,
    now: np.ndarray,
    unit_name: Callable[[int], str],
) -> bool:
    """An iteration ends when compute and communication are both done: its step and communication times go
    to ``m`` and the state, and the next iteration begins (compute first, the flows' bytes reset). Whether
    an iteration ended."""
    go = alive & (st.phase_cur == s.unit_nphases) & (st.t_compute_left <= EPS_T)
    if not any_true(go):
        return False
    step_t = now - st.iter_start
    m.iterations[...] += go
    m.step_time_sum_s[...] += np.where(go, step_t, 0.0)
    m.comm_time_sum_s[...] += np.where(go, st.comm_end - st.comm_start, 0.0)
    st.iterations_total[...] += go
    st.last_step_s[...] = np.where(go, step_t, st.last_step_s)
    st.last_comm_s[...] = np.where(go, st.comm_end - st.comm_start, st.last_comm_s)
    if any_true(go & (step_t <= 0)):
        u = int(np.flatnonzero(go & (step_t <= 0))[0])
        raise RuntimeError(f"job {unit_name(u)!r}: an iteration takes no time")
    st.iter_start[...] = np.where(go, now, st.iter_start)
    st.phase_cur[...] = np.where(go, PRE_COMM, st.phase_cur)
    st.t_compute_left[...] = np.where(go, s.unit_compute, st.t_compute_left)
    st.t_comm_start_left[...] = np.where(go, (1 - s.unit_overlap) * s.unit_compute, st.t_comm_start_left)
    reset = go[s.flow_unit] & ~s.flow_bg
    st.rem[...] = np.where(reset, st.flow_bytes, st.rem)
    return True


def _start_phases(s: IntervalStructure, ix: IndexMaps, st: IntervalState, mask: np.ndarray) -> None:
    """The communication of the units in ``mask`` starts: phases that wait for none run, paying their
    latency first; the others wait for all their predecessors."""
    m = mask[ix.phase_unit]
    root = m & (s.phase_npred == 0)
    st.phase_wait[...] = np.where(m, s.phase_npred, st.phase_wait)
    st.phase_state[...] = np.where(m, np.where(root, RUNNING, IDLE), st.phase_state)
    st.phase_lat_left[...] = np.where(root, s.phase_latency, st.phase_lat_left)
