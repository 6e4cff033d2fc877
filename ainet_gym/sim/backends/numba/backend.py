"""The ``numba`` backend: the whole decision interval of every instance in one compiled call.

The Python side of the compiled path: it calls the kernels of :mod:`ainet_gym.sim.backends.numba` (the interval,
the lazy exact kernel, the merge of a split) and :func:`ainet_gym.sim.backends.numba.figures.interval_figures`, one hand-off
to the kernel threads per interval (:func:`ainet_gym.sim.backends.numba.threads.run_ranges`). The stages are those of
:class:`~ainet_gym.sim.backends.base.SimBackend`; the numpy reference (:mod:`ainet_gym.sim.backends.numpy_ref`)
is the oracle they agree with.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.sim import records as _records_mod
from ainet_gym.sim.backends.base import AfterFigures, Pending, Then, run_windows
from ainet_gym.sim.backends.numba import interval as _interval
from ainet_gym.sim.backends.numba import merge as _merge
from ainet_gym.sim.backends.numba import records as _nb_records
from ainet_gym.sim.backends.numba import settings as _nb_settings
from ainet_gym.sim.backends.numba import threads as _threads
from ainet_gym.sim.backends.numba.figures import interval_figures
from ainet_gym.sim.engine import EPS_B, EPS_T, IntervalMetrics, TooManyEvents

if TYPE_CHECKING:
    from types import ModuleType

    from ainet_gym.sim.engine import BatchSim, EntryTable
    from ainet_gym.sim.metrics import IntervalMeter, NumbaFigures, StepResult

__all__ = ["NumbaBackend", "run_interval"]


# The lazy exact kernel (:mod:`.lazy`, with :mod:`.incremental`, :mod:`.repair`, :mod:`.progress`, :mod:`.heaps`)
# and the compiled filling (:mod:`.fill`) are imported on first use: a simulation without a lazy instance
# never calls them, and importing them made some 100 compiled functions' dispatchers (each with its on-disk
# cache locator) in every process that builds a numba env (docs/development.md, "issue-31zy").
def _lazy_kernels() -> ModuleType:
    """:mod:`ainet_gym.sim.backends.numba.lazy`, imported on first use."""
    from ainet_gym.sim.backends.numba import lazy

    return lazy


def _fill_kernels() -> ModuleType:
    """:mod:`ainet_gym.sim.backends.numba.fill`, imported on first use."""
    from ainet_gym.sim.backends.numba import fill

    return fill


class NumbaBackend:
    """The compiled backend (:class:`~ainet_gym.sim.backends.base.SimBackend`)."""

    name = "numba"
    reference = False
    fused_split = True
    figures_on_kernel_threads = True
    #: routing.ring_window_bytes is not compiled: refused (BatchSplit._bind_window)
    ring_window = False
    # workload.background[].upstream demand is not compiled (ainet_gym.sim.upstream): refused at set_units
    background_upstream = ("share",)

    def merge_split(
        self, table: EntryTable, split: np.ndarray
    ) -> tuple[tuple[np.ndarray, ...] | None, Pending | None]:
        """Deferred: each instance merged on its kernel thread (:func:`ainet_gym.sim.backends.numba.merge.merge_range`)
        when the entries are next needed."""
        flat = np.ascontiguousarray(split, dtype=np.float64).reshape(-1)
        record, go = table.merge_record(), _threads.go_flags()

        def args_of(lo: int, hi: int) -> tuple:
            return (lo, hi, flat, record, go)

        return None, (_merge.merge_range, args_of)

    def run_interval(
        self, sim: BatchSim, duration_s: np.ndarray | float, max_events: int, then: Then | None
    ) -> IntervalMetrics:
        """:func:`run_interval`."""
        return run_interval(sim, duration_s, max_events, then)

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
        """One window: the interval, its figures and ``after_figures`` on the kernel threads, one hand-off;
        more windows: one interval per window (the figures follow, :meth:`interval_result`)."""
        if windows != 1:
            return run_windows(sim, duration_s, windows, max_events), None
        fig = meter.figures(sim, job_unit, ideal_step_s, job_names)
        then = fig.then
        if after_figures is not None:
            later = after_figures(fig)

            def then(m: IntervalMetrics) -> Pending:
                (k1, a1), (k2, a2) = fig.then(m), later

                def both(lo: int, hi: int) -> None:
                    k1(*a1(lo, hi))
                    k2(*a2(lo, hi))

                return both, lambda lo, hi: (lo, hi)

        return [sim.run_interval(duration_s, max_events, then=then)], fig

    def interval_result(
        self,
        meter: IntervalMeter,
        sim: BatchSim,
        m: IntervalMetrics,
        job_unit: np.ndarray,
        ideal_step_s: np.ndarray,
        job_names: list[list[str | None]],
    ) -> StepResult:
        """One compiled pass (:func:`~ainet_gym.sim.backends.numba.figures.interval_figures`), the same operations as the
        numpy reference."""
        fig = meter.figures(sim, job_unit, ideal_step_s, job_names)
        interval_figures(*fig.args(m), 0, job_unit.shape[0])
        return fig.result(m)

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
        """Compiled progressive filling (:func:`ainet_gym.sim.backends.numba.fill.solve_fill`), each stacked instance on
        its own with ``blocks`` (:func:`ainet_gym.sim.backends.numba.fill.solve_fill_blocks`).

        Entries already sorted by flow (what :func:`~ainet_gym.sim.allocator.max_min_fair`'s checks give) are
        passed as they are: the stable sort would leave them in the same order (issue-28zr)."""
        w = np.ones(n_flows) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
        d = np.full(n_flows, np.inf) if demand is None else np.ascontiguousarray(demand, dtype=np.float64)
        if flow.shape[0] > 1 and not (flow[1:] >= flow[:-1]).all():
            order = np.argsort(flow, kind="stable")
            flow, link, coef = flow[order], link[order], coef[order]
        args = (
            np.ascontiguousarray(flow, dtype=np.int64),
            np.ascontiguousarray(link, dtype=np.int64),
            np.ascontiguousarray(coef, dtype=np.float64),
            np.ascontiguousarray(cap, dtype=np.float64),
        )
        if blocks is not None:
            fb, lb = (np.ascontiguousarray(x, dtype=np.int64) for x in blocks)
            return _fill_kernels().solve_fill_blocks(*args, w, d, fb, lb)  # type: ignore[no-any-return]
        rates, _ = _fill_kernels().solve_fill(*args, int(n_flows), w, d)
        return rates  # type: ignore[no-any-return]


def run_interval(
    sim: BatchSim, duration_s: np.ndarray | float, max_events: int, then: Then | None = None
) -> IntervalMetrics:
    """:meth:`BatchSim.run_interval <ainet_gym.sim.engine.BatchSim.run_interval>` in one compiled call
    (:func:`ainet_gym.sim.backends.numba.interval.run_interval_numba`): each instance range, on its kernel thread, merges a
    deferred split (:meth:`BatchSim.set_split_fused <ainet_gym.sim.engine.BatchSim.set_split_fused>`), runs
    its interval, then the ``then`` pass."""
    par, (sw_on, sw_ratio, sw_handoff) = _settings(sim)  # checked before any change
    B, U, L = sim.batch, sim.n_units, sim.n_links
    dur = np.empty(B)
    dur[...] = duration_s  # (batch,) s, a scalar broadcast
    m = IntervalMetrics.empty(dur, U, L)  # each range zeroes its instances' part, then adds into it
    structure, state = _records(sim)
    outputs = _nb_records.outputs_record(m.iterations, m.step_time_sum_s, m.comm_time_sum_s, m.compute_time_s,
                                         m.active_time_s, m.link_bytes.reshape(-1), m.stalled_flows)  # fmt: skip
    ranges = sim.table.ranges
    stats_of = np.zeros((len(ranges), _nb_settings.N_STATS), dtype=np.int64)  # one row per thread's range
    go = _threads.go_flags()  # where each range announces its start (the crew's hand-off)
    # one hand-off to the kernel threads: each range merges a deferred split, runs its interval, then
    # the ``then`` kernel
    pending = sim.take_pending()
    merge, merge_args = pending if pending is not None else (None, None)
    after, after_args = then(m) if then is not None else (None, None)
    # the kernels' scalars, built by field name and passed as plain tuples (numba unboxes those in C);
    # share weights (BatchSim.set_share_weights): every flow's (empty: all 1), for both kernels (the lazy one
    # fills in weighted levels, docs/engine-alltoall.md)
    settings = tuple(_records_mod.IntervalSettings(
        duration=dur, phase_mode=sim.rate_updates == "phase", quantum=sim.rate_quantum_s,
        inc_min=sim.incremental_min_flows, max_events=max_events, n_links=L, max_rounds=_max_rounds(sim),
        eps_t=EPS_T, eps_b=EPS_B, flow_w=_flow_weights(sim),
    ))  # fmt: skip
    # which kernel has each lazy-kernel instance (0 start, 1 full path, 2 lazy, 3 done), events and s left
    sw_mode = np.zeros(B, dtype=np.int64)
    switch = tuple(_records_mod.LazySwitch(
        on=sw_on, ratio=sw_ratio, handoff=sw_handoff, mode=sw_mode, ev=np.zeros(B, dtype=np.int64),
        t=np.zeros(B), cost=sim.engine_state.switch_cost,
    ))  # fmt: skip
    # the lazy exact kernel, if an instance takes it (compiled on first use only), with its options (every
    # one passed: no omitted default, issue-31zb2) and its scratch
    lazy = _lazy_kernels().run_interval_lazy if sim.any_lazy() else None
    options = None if lazy is None else tuple(_records_mod.LazyOptions(
        *par, rep_on=_nb_settings.REPAIR_DEPARTURES, grp_on=_nb_settings.PROGRESS_GROUPS,
        grp_fill=2 if _nb_settings.GROUP_KEEP else 1 if _nb_settings.GROUP_FILL else None,  # (None: not compiled)
    ))  # fmt: skip
    scratch = _lazy_scratch(sim) if lazy is not None else None

    def kernel(lo: int, hi: int, stats: np.ndarray) -> None:
        if merge is not None:
            merge(*merge_args(lo, hi))
        while True:  # the two kernels take turns while the lazy one hands instances back
            _interval.run_interval_numba(lo, hi, settings, structure, state, outputs, stats, go, switch)
            if lazy is None:
                break
            fs, rp = scratch()  # type: ignore[misc]
            lazy(lo, hi, settings, structure, state, outputs, stats, go, switch, fs, rp, options)
            if stats[2] != _nb_settings.ERR_NONE or not (sw_mode[lo:hi] == 1).any():
                break
        if after is not None:
            after(*after_args(lo, hi))

    _threads.run_ranges(kernel, ranges, lambda lo, hi: (lo, hi, stats_of[ranges.index((lo, hi))]))
    _gather_stats(sim, m, stats_of.tolist(), lazy is not None, max_events)
    return m


_NO_WEIGHTS = np.empty(0)  # every share weight 1 (the kernels' unweighted rule)


def _flow_weights(sim: BatchSim) -> np.ndarray:
    """(flows,) each flow's share weight (its unit's, ``engine_state.unit_weight``), or an empty array when
    every weight is 1; kept in ``sim.backend_scratch`` with the weights and the structure it was built from."""
    uw = sim.engine_state.unit_weight
    if uw is None:
        return _NO_WEIGHTS
    held = sim.backend_scratch.get("flow_weight")
    if held is not None and held[0] is uw and held[1] is sim.stack:
        return held[2]  # type: ignore[no-any-return]
    fw = np.ascontiguousarray(uw[sim.flow_unit], dtype=np.float64)
    sim.backend_scratch["flow_weight"] = (uw, sim.stack, fw)
    return fw


def _records(sim: BatchSim) -> tuple[object, object]:
    """The compiled structure and state records of ``sim`` (:mod:`ainet_gym.sim.records`), kept as
    :func:`~ainet_gym.sim.records.kept_records` keeps them (a record built at every call would cost what the
    positional call did)."""
    return _records_mod.kept_records(
        sim,
        "records",
        lambda s, st: (_nb_records.compiled_record("structure", s), _nb_records.compiled_record("state", st)),
    )


def _max_rounds(sim: BatchSim) -> int:
    """The kernel's bound on the settle rounds of an event (4 per phase of the longest unit, plus 8), kept in
    ``sim.backend_scratch`` with the :class:`~ainet_gym.sim.stack.UnitStack` it was computed from (its
    phase counts are fixed until the next restack; a reduction over them at every interval cost more)."""
    held = sim.backend_scratch.get("max_rounds")
    if held is not None and held[0] is sim.stack:
        return held[1]  # type: ignore[no-any-return]
    n = 4 * int(sim.unit_nphases.max(initial=0)) + 8
    sim.backend_scratch["max_rounds"] = (sim.stack, n)
    return n


def _lazy_scratch(sim: BatchSim) -> Callable[[], tuple]:
    """The lazy kernel's scratch (:func:`ainet_gym.sim.backends.numba.lazy.lazy_scratch`) of the calling kernel thread: one
    per thread, kept in ``sim.backend_scratch`` from interval to interval and sized to the largest instance of
    the simulation, allocated again only when an instance outgrows it (fresh scratch at every call cost page
    faults: some 130 MB of them per interval on the 1,024-GPU AllToAll; docs/engine-alltoall.md)."""
    t = sim.table
    need = (
        int(sim.n_links),
        int(np.asarray(sim.flow_unit).shape[0]),
        int(np.diff(np.asarray(sim.inst_flow)).max(initial=0)),
        int(np.diff(np.asarray(t.inst_seg)).max(initial=0)),  # (the segments bound the shared entries)
    )
    held = sim.backend_scratch.get("lazy")
    if held is None or any(n > h for n, h in zip(need, held[0], strict=True)):
        sizes = need if held is None else tuple(max(n, h) for n, h in zip(need, held[0], strict=True))
        held = sim.backend_scratch["lazy"] = (sizes, {})
    sizes, per_thread = held

    def mine() -> tuple:
        key = threading.get_ident()  # (each thread its own: the ranges of one interval run concurrently)
        sc = per_thread.get(key)
        if sc is None:
            sc = per_thread[key] = _lazy_kernels().lazy_scratch(*sizes)
        return sc  # type: ignore[no-any-return]

    return mine


def _gather_stats(
    sim: BatchSim, m: IntervalMetrics, per_range: list[list[int]], lazy: bool, max_events: int
) -> None:
    """The kernel threads' counters (one row per instance range; a few rows: plain Python is quicker than
    numpy calls here) summed into ``m``, and the first range's error raised."""
    # the first range that failed, if any
    err, unit = next(
        ((r[2], r[3]) for r in per_range if r[2] != _nb_settings.ERR_NONE), (_nb_settings.ERR_NONE, -1)
    )
    if err == _nb_settings.ERR_ZERO_STEP:
        raise RuntimeError(f"job {sim.flat_units[unit].name!r}: an iteration takes no time")
    if err == _nb_settings.ERR_SETTLE:
        raise RuntimeError("event processing did not settle")
    if err == _nb_settings.ERR_SOLVER:
        raise ValueError("max-min solve made no progress: NaN in the capacities or demands?")
    # one range (one kernel thread): its row as it is; more: events the most of any range, the rest summed
    tot = per_range[0] if len(per_range) == 1 else [sum(col) for col in zip(*per_range, strict=True)]
    m.events = tot[0] if len(per_range) == 1 else max(r[0] for r in per_range)
    m.solver_iterations = tot[1]
    m.full_path_events, m.lazy_switches, m.full_path_work, m.lazy_work = tot[11:15]
    m.repairs, m.repairs_declined, m.flows_checked = tot[15:18]
    if lazy:
        (m.incremental_solves, m.flows_refilled, m.flows_active, m.full_fills, m.rates_written,
         m.rates_moved, m.parallel_solves) = tot[4:11]  # fmt: skip
    if err == _nb_settings.ERR_EVENTS:
        raise TooManyEvents(f"run_interval: more than {max_events} events in one interval", metrics=m)


def _settings(sim: BatchSim) -> tuple[tuple[float, int], tuple[bool, float, float]]:
    """:func:`_parallel_settings` and :func:`_switch_settings` of ``sim``, checked again only when one of the
    five attributes was assigned since the last check: the objects last checked are kept in
    ``sim.backend_scratch`` and compared by identity (an equal value of another type, ``1`` for ``True``, is
    checked anew), which costs less than the checks at every interval."""
    raw = (sim.parallel_share, sim.parallel_max_rounds, sim.lazy_switch, sim.lazy_cost_ratio,
           sim.lazy_handoff_solves)  # fmt: skip
    held = sim.backend_scratch.get("settings")
    if held is not None:
        k = held[0]
        if k[0] is raw[0] and k[1] is raw[1] and k[2] is raw[2] and k[3] is raw[3] and k[4] is raw[4]:
            return held[1]  # type: ignore[no-any-return]
    checked = (_parallel_settings(raw[0], raw[1]), _switch_settings(raw[2], raw[3], raw[4]))
    sim.backend_scratch["settings"] = (raw, checked)
    return checked


def _share(name: str, x: object) -> float:
    """A share of the active flows in [0, 1] (a plain attribute of :class:`BatchSim`), checked by name."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} = {x!r}: allowed: a share of the active flows in [0, 1]")
    return float(x)


def _parallel_settings(share: object, rounds: object) -> tuple[float, int]:
    """The lazy kernel's fallback settings, checked (they are plain attributes of :class:`BatchSim`)."""
    share = _share("parallel_share", share)
    if isinstance(rounds, bool) or not isinstance(rounds, int | np.integer) or rounds < 0:
        raise ValueError(f"parallel_max_rounds = {rounds!r}: allowed: an integer >= 0")
    return share, int(rounds)


def _switch_settings(on: object, ratio: object, handoff: object) -> tuple[bool, float, float]:
    """:attr:`BatchSim.lazy_switch`, :attr:`BatchSim.lazy_cost_ratio` and :attr:`BatchSim.lazy_handoff_solves`,
    checked (plain attributes)."""
    if not isinstance(on, bool | np.bool_):
        raise ValueError(f"lazy_switch = {on!r}: allowed: True or False")
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0.0 < ratio < np.inf:
        raise ValueError(f"lazy_cost_ratio = {ratio!r}: allowed: a finite number > 0")
    if isinstance(handoff, bool) or not isinstance(handoff, int | float) or not 0.0 <= handoff < np.inf:
        raise ValueError(f"lazy_handoff_solves = {handoff!r}: allowed: a finite number >= 0")
    return bool(on), float(ratio), float(handoff)
