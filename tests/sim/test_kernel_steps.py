"""The event steps the two compiled interval kernels share (``kernels.settle_units`` and the others).

References are hand computations on a one-unit, two-phase job; the property that both kernels' ways of
knowing a phase's bytes left (a scan of ``rem``, or the lazy kernel's counts ``pend``) settle alike.
"""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

from ainet_gym.sim.backends.numba import fill as nb_fill
from ainet_gym.sim.backends.numba import incremental, jit, parallel, settings, steps
from ainet_gym.sim.state import DONE, IDLE, RUNNING, WAITING


def _module_of(name: str) -> object:
    """The module of the compiled backend that defines ``name``."""
    import importlib
    import pkgutil

    import ainet_gym.sim.backends.numba as pkg

    for m in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"{pkg.__name__}.{m.name}")
        if name in vars(mod) and getattr(vars(mod)[name], "__module__", mod.__name__) == mod.__name__:
            return mod
    raise AttributeError(name)


pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="numba is not installed")

#: the steps issue-31ze split out of the kernels (compiled without reference counts, nor Python wrappers)
SPLIT_STEPS = ("begin_event", "end_event", "full_instance_start", "active_set", "hand_to_lazy",
          "next_flow_event", "full_solve", "advance_flows", "lazy_instance_start", "lazy_arrivals",
          "lazy_write_rates", "rebuild_heap", "next_completion", "complete_flows", "lazy_count_solve",
          "lazy_instance_end", "full_instance_end", "_repair_start", "_repair_commit",
          "_rule_start", "_rule_shares", "_rule_path_minima", "_rule_group", "_rule_freeze",
          "_rule_take_off", "_fill_rows", "_fill_share", "_fill_freeze", "link_row", "row_offsets", "push_link_rows",
          "_repair_queue", "_repair_scan", "_repair_residuals", "_repair_link_max", "_repair_check",
          "_inc_full_set", "_inc_restart_level", "_inc_patch_log", "_inc_declines", "_inc_components", "_inc_select",
          "_inc_select_sorted", "_inc_walk_log", "_inc_walk_all", "_inc_full_start", "_inc_sort_work", "_inc_stamp", "_inc_backoff", "_inc_loads", "_inc_loads_rows",
          "_inc_link_reset", "_inc_link_offer", "lazy_progress", "lazy_next", "lazy_complete", "group_reset", "group_write_rates",
          "group_complete_flows", "group_end", "_gf_keys", "_gf_pairs", "_gf_lists", "_gf_share", "_gf_freeze_flow",
          "_gf_freeze_group", "_gf_split", "_gf_link", "_gf_members", "_gf_order", "_gk_slot", "_gk_count",
          "_gk_intact", "_gk_rebuild", "_gk_intact_rows", "_gk_new_group", "_gk_lists", "_gk_share",
          "_gk_freeze_flow", "_gk_freeze_group", "_gk_link", "_gk_groups", "_gk_heap", "_gk_leave", "_walk_next",
          "_walk_children", "_refill_link_max")  # fmt: skip
SHARED = ("settle_units", "end_phases", "end_iteration", "next_unit_event", "advance_units", "advance_flow",
          "exclusive_caps", "add_link_bytes", "join_flow", "lazy_stats", "parallel_rule", "reset_instance_flows",
          "zero_completed", "retire_flow", "group_store_reset", *SPLIT_STEPS)  # fmt: skip


def _job(rem: list[float], phase_cur: int, t_start: float, t_compute: float, now_iter: float) -> dict:
    """One unit (compute 1 s, fully overlapped), phases 0 -> 1 (no latency), one flow each of 5 bytes."""
    f64, i64 = np.float64, np.int64
    return dict(
        units=steps.UnitTable(
            np.ones(1, np.bool_), np.zeros(1, np.bool_), np.array([2], i64), np.array([0], i64),
            np.array([0, 1], i64), np.array([1, 1], i64),
        ),
        clock=steps.UnitClock(
            phase_cur=np.array([phase_cur], i64), t_start_left=np.array([t_start], f64),
            t_compute_left=np.array([t_compute], f64), t_comm_start_left=np.zeros(1, f64),
            phase_state=np.array([RUNNING, RUNNING] if phase_cur == 1 else [0, 0], i64),
            phase_wait=np.zeros(2, i64), phase_lat_left=np.zeros(2, f64), iter_start=np.array([now_iter], f64),
            comm_start=np.array([now_iter], f64), comm_end=np.zeros(1, f64),
        ),
        rem=np.array(rem, f64),
        job=steps.JobParams(np.array([1.0]), np.array([1.0]), np.array([5.0, 5.0])),
        graph=steps.PhaseGraph(np.zeros(2), np.array([0, 1], i64), np.array([0, 1, 1], i64), np.array([1], i64)),
        tallies=steps.IterationTallies(np.zeros(1, i64), np.full(1, np.nan), np.full(1, np.nan),
                                         np.zeros(1, i64), np.zeros(1, f64), np.zeros(1, f64)),
        stats=np.zeros(settings.N_STATS, i64),
    )  # fmt: skip


def _settle(a: dict, now: float, counted: bool) -> tuple[bool, np.ndarray, np.ndarray]:
    pend = np.array([int(r > 0) for r in a["rem"]], dtype=np.int64)  # one flow per phase
    joined = np.ones(2, dtype=np.bool_)
    ok = jit.from_python(steps.settle_units)(0, 1, now, 16, 1e-12, counted, pend, joined, **a)
    return ok, pend, joined


@pytest.mark.parametrize("counted", [False, True])
def test_a_job_starts_and_runs_its_first_phase_through(counted: bool) -> None:
    """At t = 2 s a waiting job starts, its communication starts at once (overlap 1), phase 0 (no bytes
    left) ends and phase 1 (5 bytes left) runs: cursor 1, compute 1 s left, both starts at 2 s."""
    a = _job([0.0, 5.0], WAITING, 0.0, 0.0, 0.0)
    ok, _, joined = _settle(a, 2.0, counted)
    assert ok
    assert a["clock"].phase_cur[0] == 1
    assert list(a["clock"].phase_state) == [DONE, RUNNING]
    assert a["clock"].iter_start[0] == a["clock"].comm_start[0] == 2.0
    assert a["clock"].t_compute_left[0] == 1.0
    assert a["tallies"].iters[0] == 0
    assert list(joined) == ([False, False] if counted else [True, True])  # started phases join anew


@pytest.mark.parametrize("counted", [False, True])
def test_an_iteration_ends_when_its_last_phase_and_compute_end(counted: bool) -> None:
    """Phase 1's bytes are done and compute is done at t = 3.5 s for an iteration begun at 1 s: step 2.5 s,
    communication 3.5 - 1 = 2.5 s, then the next iteration: compute 1 s, bytes 5 again (both phases counted
    with bytes left), and its communication at once (overlap 1): cursor 0, phase 0 running, phase 1 idle."""
    a = _job([0.0, 0.0], 1, 0.0, 0.0, 1.0)
    a["clock"].phase_state[:] = [DONE, RUNNING]
    ok, pend, _ = _settle(a, 3.5, counted)
    assert ok
    t = a["tallies"]
    assert (t.iters[0], t.iterations_total[0]) == (1, 1)
    assert t.step_sum[0] == t.last_step_s[0] == 2.5
    assert t.comm_sum[0] == t.last_comm_s[0] == 2.5
    assert a["clock"].comm_end[0] == 3.5 and a["clock"].iter_start[0] == 3.5
    assert a["clock"].t_compute_left[0] == 1.0
    assert a["clock"].phase_cur[0] == 0 and a["clock"].comm_start[0] == 3.5
    assert list(a["clock"].phase_state) == [RUNNING, IDLE]
    assert list(a["rem"]) == [5.0, 5.0]
    if counted:
        assert list(pend) == [1, 1]


def test_a_step_of_zero_time_is_an_error_naming_the_unit() -> None:
    a = _job([0.0, 0.0], 1, 0.0, 0.0, 3.5)
    a["clock"].phase_state[:] = [DONE, RUNNING]
    ok, _, _ = _settle(a, 3.5, False)
    assert not ok
    assert (a["stats"][2], a["stats"][3]) == (settings.ERR_ZERO_STEP, 0)


def test_both_kernels_call_the_shared_steps_compiled_without_reference_counts() -> None:
    """The event loop's frame is one implementation: both kernels call ``begin_event`` (the units settle, the
    interval's end, the event cap) and ``end_event`` (the units' next timer, the step), and neither writes
    the frame's steps again; the steps are compiled with ``_nrt=False`` (numba's ``inline="always"`` would
    copy every array argument into a counted local at every event)."""
    # each kernel with the steps that start and end its instances
    for name, parts in (
        ("run_interval_numba", ("full_instance_end",)),
        ("run_interval_lazy", ("lazy_instance_start", "lazy_instance_end")),
    ):
        src = inspect.getsource(getattr(_module_of(name), name).py_func)
        with_parts = src + "".join(inspect.getsource(getattr(_module_of(p), p).py_func) for p in parts)
        for step in ("begin_event(", "end_event(", "reset_instance_flows(", "add_link_bytes("):
            assert step in with_parts, (name, step)
        for inline in (
            "settle_units(",
            "next_unit_event(",
            "advance_units(",
            "phase_succ_off[p + 1]",
            "ERR_EVENTS",
        ):
            assert inline not in src, (name, inline)  # the frame's: begin_event's, end_event's, end_phases'
    for step in ("settle_units(", "ERR_EVENTS"):
        assert step in inspect.getsource(steps.begin_event.py_func), step
    for step in ("next_unit_event(", "advance_units("):
        assert step in inspect.getsource(steps.end_event.py_func), step
    for step in SHARED:
        assert getattr(_module_of(step), step).targetoptions.get("_nrt") is False, step
    # the steps only compiled code calls are compiled without Python-callable wrappers (cold start)
    for step in ("exclusive_caps", "end_phases", "end_iteration", "next_unit_event", "advance_units",
                 "advance_flow", "add_link_bytes", "reset_instance_flows", "zero_completed", "advance_flows",
                 *SPLIT_STEPS, "full_scratch", "unit_records", "lazy_sizes", "lazy_flow_scratch",
                 "lazy_reuse_scratch", "_inc_flow_order", "_inc_log_sorted", "_inc_fill", "_inc_order_old", "group_scratch",
                 "_inc_settle", "_inc_repair"):  # fmt: skip
        assert getattr(_module_of(step), step).targetoptions.get("no_cpython_wrapper") is True, step


def _dispatchers() -> list[tuple[str, object]]:
    """Every compiled function (numba dispatcher) defined in the compiled backend's modules, by qualified name."""
    import importlib
    import pkgutil

    from numba.core.dispatcher import Dispatcher

    import ainet_gym.sim.backends.numba as pkg

    found = []
    for m in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"{pkg.__name__}.{m.name}")
        for name, obj in vars(mod).items():
            if isinstance(obj, Dispatcher) and obj.py_func.__module__ == mod.__name__:
                found.append((f"{m.name}.{name}", obj))
    return found


def test_only_functions_python_calls_are_cached_on_disk() -> None:
    """issue-31zg2: a function only compiled code reaches (no Python wrappers, or inlined by numba) has no
    on-disk cache of its own (its callers' cached code holds it; a cache locator per function cost every
    import), and every function Python can call keeps one (a cold start per process otherwise). A rule that
    dropped every cache, or none, fails here; so does a planted function of each kind."""
    from numba.core.caching import FunctionCache, NullCache

    def f(x):  # pragma: no cover - compiled
        return x + 1

    def compiled_only(d: object) -> bool:
        opts = d.targetoptions  # type: ignore[attr-defined]
        return bool(
            (opts.get("no_cpython_wrapper") and opts.get("no_cfunc_wrapper"))
            or opts.get("inline") == "always"
        )

    planted = [("planted.callable", jit.njit(cache=True, nogil=True)(f)),
               ("planted.compiled_only", jit.njit(cache=True, nogil=True, **jit.COMPILED_ONLY)(f)),
               ("planted.inlined", jit.njit(cache=True, inline="always")(f))]  # fmt: skip
    found = _dispatchers()
    assert sum(compiled_only(d) for _, d in found) >= 100, "the compiled-only steps were not found"
    assert sum(not compiled_only(d) for _, d in found) >= 20, "the Python-callable kernels were not found"
    for name, d in found + planted:
        cache = d._cache  # type: ignore[attr-defined]
        want = NullCache if compiled_only(d) else FunctionCache
        assert isinstance(cache, want), (name, type(cache).__name__)


def test_a_compiled_only_step_has_no_machine_code_of_its_own() -> None:
    """issue-31zj2: a ``COMPILED_ONLY`` step's code library is linked into its callers and makes no machine code
    of its own (numba's engine holds no symbol of it), while its caller's does; the caller still runs the step
    (called at two sites: the values through it, and an error raised in it). Every compiled-only dispatcher of
    the backend has the link-only pipeline and no Python-callable one has. numba's own library fails here."""

    def step(x, i):  # pragma: no cover - compiled
        if i < 0:
            raise ValueError("i below 0")
        return x[i] * 2.0

    c_step = jit.njit(nogil=True, _nrt=False, **jit.COMPILED_ONLY)(step)

    def caller(x):  # pragma: no cover - compiled
        s = 0.0
        for i in range(x.shape[0]):
            s += c_step(x, i) + c_step(x, x.shape[0] - 1 - i)
        return s + c_step(x, -1 if x[0] < 0 else 0)

    c_caller = jit.njit(nogil=True)(caller)
    x = np.array([1.5, 2.0, 3.25])
    assert c_caller(x) == (1.5 + 2.0 + 3.25) * 4.0 + 3.0
    with pytest.raises(ValueError, match="i below 0"):
        c_caller(-x)
    (cres,) = c_step.overloads.values()
    (cres_caller,) = c_caller.overloads.values()
    engine = cres.library.codegen._engine
    if (
        jit._LINKED_ONLY_PIPELINE is None
    ):  # another numba release (jit.LINKED_ONLY_NUMBA): numba's own library
        assert type(cres.library).__name__ == "JITCodeLibrary"
        return
    assert type(cres.library).__name__ == "_LinkedOnlyLibrary"
    assert not engine.is_symbol_defined(cres.fndesc.mangled_name)
    assert engine.is_symbol_defined(cres_caller.fndesc.mangled_name)
    found = _dispatchers()
    n_only = 0
    for name, d in found:
        opts = d.targetoptions  # type: ignore[attr-defined]
        only = bool(opts.get("no_cpython_wrapper") and opts.get("no_cfunc_wrapper"))
        n_only += only
        assert (d._compiler.pipeline_class is jit._LINKED_ONLY_PIPELINE) == only, name  # type: ignore[attr-defined]
    assert n_only >= 100, "the compiled-only steps were not found"


def test_first_at_least_is_numpys_left_search_sorted() -> None:
    """The log's binary search (``first_at_least``) against ``np.searchsorted(..., side="left")`` on sorted
    levels with ties, at the ends and between them (a search that stopped at the last tie, or searched the
    whole buffer instead of its first ``n``, would differ)."""
    level = np.array([0.5, 1.0, 1.0, 1.0, 2.0, 3.0, 3.0, 9.0, -1.0, -1.0])  # the last two: beyond n
    n = 8
    for x in (-np.inf, 0.0, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 9.0, 10.0, np.inf):
        assert incremental.first_at_least(level, n, x) == np.searchsorted(level[:n], x, side="left"), x


def _problem(seed: int) -> dict:
    """A random max-min problem with ties (integer capacities, coefficients 1 or 2, shared links), flow-sorted
    entries on links ``lo .. lo + links`` (an instance's rows), some flows on no link, some capped, some links
    unconstrained."""
    rng = np.random.default_rng(seed)
    n_f, n_l, lo = int(rng.integers(2, 40)), int(rng.integers(1, 12)), int(rng.integers(0, 3))
    e_flow, e_link, e_coef = [], [], []
    for f in range(n_f):
        for lk in rng.choice(n_l, size=int(rng.integers(0, min(4, n_l) + 1)), replace=False):
            e_flow.append(f)
            e_link.append(int(lk))
            e_coef.append(float(rng.choice([1.0, 1.0, 2.0])))
    e_flow_a = np.array(e_flow, np.int64)
    fe_lo = np.searchsorted(e_flow_a, np.arange(n_f), side="left").astype(np.int64)
    fe_hi = np.searchsorted(e_flow_a, np.arange(n_f), side="right").astype(np.int64)
    return dict(
        n_f=n_f, lo=lo, e_flow=e_flow_a, e_link=np.array(e_link, np.int64), e_coef=np.array(e_coef),
        fe_lo=fe_lo, fe_hi=fe_hi, cap=rng.choice([1.0, 2.0, 3.0, 6.0, np.inf], size=n_l),
        demand=rng.choice([0.5, 1.0, np.inf, np.inf], size=n_f),
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(40))
def test_both_solves_of_the_parallel_rule_are_solve_coos_bit_for_bit(seed: int) -> None:
    """One rule, two modes: the full solve (``parallel_rule``, no order, capacities from ``capacity[lo:]``)
    and ``fill_parallel`` (its residuals in place, the freeze order kept) give ``solve_coo``'s rates bit for
    bit; ``fill_parallel``'s freeze order holds every flow once, levels nondecreasing, each its flow's rate,
    and its residuals are the capacities less the frozen flows' traffic. With one round, the heap fill of the
    flows it leaves finishes the same allocation (to round-off)."""
    from ainet_gym.sim.allocator import solve_coo

    p = _problem(seed)
    n_f, lo, e_link, e_coef, fe_lo, fe_hi = (
        p["n_f"],
        p["lo"],
        p["e_link"],
        p["e_coef"],
        p["fe_lo"],
        p["fe_hi"],
    )
    ref = solve_coo(p["e_flow"], e_link, e_coef, p["cap"], n_f, demand=p["demand"])
    flows = np.arange(n_f, dtype=np.int64)
    i64, n_l = np.int64, p["cap"].shape[0]
    # the full solve: links as rows lo .. lo + n_l of the kernel's capacities
    rate = np.full(n_f, -1.0)
    capacity = np.concatenate([np.zeros(lo), p["cap"]])
    rows = parallel.ParallelRows(np.empty((n_f, 3), i64), np.empty((n_f, 2)), np.empty((n_f, 2), i64),
                                np.empty(n_f), np.empty((0, 2), i64), np.empty(0))  # fmt: skip
    links = parallel.ParallelLinks(*(np.empty(n_l) for _ in range(5)), np.full(n_l, -1, i64), np.full(n_l, -1, i64),
                                  np.empty(n_l, i64), np.empty(0, i64), np.empty(0, i64))  # fmt: skip
    it, n_live, *_ = jit.from_python(parallel.parallel_rule)(n_f, flows, fe_lo, fe_hi, e_link + lo, e_coef, capacity, lo,
                                           p["demand"], rate, rows, links, 5, n_f, False, np.empty(0))  # fmt: skip
    assert it >= 1 and n_live == 0
    np.testing.assert_array_equal(rate, ref)
    # fill_parallel: every round
    rate = np.full(n_f, -1.0)
    resid = p["cap"].copy()
    out_f, out_l = np.full(n_f, -1, i64), np.full(n_f, np.nan)
    n_done, n_rest, _, _ = nb_fill.fill_parallel(flows, n_f, fe_lo, fe_hi, e_link + lo, e_coef, p["demand"],
                                                 resid, rate, n_f, lo, out_f, out_l, np.empty(0))  # fmt: skip
    assert (n_done, n_rest) == (n_f, 0)
    np.testing.assert_array_equal(rate, ref)
    assert sorted(out_f) == list(range(n_f))
    assert np.all(out_l[1:] >= out_l[:-1])
    np.testing.assert_array_equal(out_l, rate[out_f])
    used = np.bincount(
        e_link, weights=e_coef * np.where(np.isfinite(rate), rate, 0)[p["e_flow"]], minlength=n_l
    )
    fin = np.isfinite(p["cap"])
    np.testing.assert_allclose(resid[fin], np.maximum(p["cap"] - used, 0)[fin], rtol=1e-12, atol=1e-12)
    # one round, then the heap fill of the rest
    rate = np.full(n_f, -1.0)
    resid = p["cap"].copy()
    n_done, n_rest, rest, _ = nb_fill.fill_parallel(flows, n_f, fe_lo, fe_hi, e_link + lo, e_coef, p["demand"],
                                                    resid, rate, 1, lo, out_f, out_l, np.empty(0))  # fmt: skip
    assert n_done + n_rest == n_f
    if n_rest:
        s = nb_fill.fill_scratch(n_l, n_f, e_link.shape[0], 0)
        nb_fill.fill_levels(rest, n_rest, fe_lo, fe_hi, e_link + lo, e_coef, np.ones(n_f), p["demand"], resid, rate,
                            np.empty(n_rest, i64), np.empty(n_rest), s, 0, lo)  # fmt: skip
    np.testing.assert_allclose(rate, ref, rtol=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_the_parallel_fill_is_weighted_in_levels(seed: int) -> None:
    """``fill_parallel`` with share weights (the lazy kernel's dense solves, issue-28zc): rates equal
    ``solve_coo(weights=)`` to round-off, whether the rule runs to the end or one round and the heap fill
    finishes; the freeze order holds levels (``rate / weight``), nondecreasing, and weights 1 give the
    unweighted rule bit for bit."""
    from ainet_gym.sim.allocator import solve_coo

    p = _problem(seed)
    n_f, lo, e_link, e_coef, fe_lo, fe_hi = (
        p[k] for k in ("n_f", "lo", "e_link", "e_coef", "fe_lo", "fe_hi")
    )
    w = np.random.default_rng(1000 + seed).choice([0.25, 1.0, 2.0, 3.0, 7.5], n_f)
    ref = solve_coo(p["e_flow"], e_link, e_coef, p["cap"], n_f, weights=w, demand=p["demand"])
    flows, i64, n_l = np.arange(n_f, dtype=np.int64), np.int64, p["cap"].shape[0]

    def fill(weight: np.ndarray, rounds: int) -> tuple:
        rate, resid = np.full(n_f, -1.0), p["cap"].copy()
        out_f, out_l = np.full(n_f, -1, i64), np.full(n_f, np.nan)
        n_done, n_rest, rest, _ = nb_fill.fill_parallel(flows, n_f, fe_lo, fe_hi, e_link + lo, e_coef, p["demand"],
                                                        resid, rate, rounds, lo, out_f, out_l, weight)  # fmt: skip
        return rate, resid, out_f[:n_done], out_l[:n_done], rest[:n_rest]

    rate, _, out_f, out_l, rest = fill(w, n_f)
    assert rest.size == 0 and sorted(out_f) == list(range(n_f))
    np.testing.assert_allclose(rate, ref, rtol=1e-12)
    assert np.all(out_l[1:] >= out_l[:-1])
    np.testing.assert_allclose(out_l, rate[out_f] / w[out_f], rtol=1e-12)
    rate, resid, _, _, rest = fill(w, 1)
    if rest.size:
        s = nb_fill.fill_scratch(n_l, n_f, e_link.shape[0], 0)
        nb_fill.fill_levels(rest, rest.size, fe_lo, fe_hi, e_link + lo, e_coef, w, p["demand"], resid, rate,
                            np.empty(rest.size, i64), np.empty(rest.size), s, 0, lo)  # fmt: skip
    np.testing.assert_allclose(rate, ref, rtol=1e-12)
    for a, b in zip(fill(np.ones(n_f), n_f), fill(np.empty(0), n_f), strict=True):
        np.testing.assert_array_equal(a, b)


def test_linked_only_libraries_are_off_by_the_environment_switch() -> None:
    """issue-31zj2: ``AINET_GYM_LINKED_ONLY=0`` gives numba's own code library to compiled-only steps (the way back
    if a numba release misbehaves with :class:`_LinkedOnlyLibrary`); unset, the checked release uses it."""
    import subprocess
    import sys

    probe = "from ainet_gym.sim.backends.numba import jit; print(jit._LINKED_ONLY_PIPELINE is None)"
    off = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "AINET_GYM_LINKED_ONLY": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert off.stdout.strip() == "True"
    on = subprocess.run(
        [sys.executable, "-c", probe],
        env={k: v for k, v in os.environ.items() if k != "AINET_GYM_LINKED_ONLY"},
        capture_output=True,
        text=True,
        check=True,
    )
    import numba

    checked = tuple(int(v) for v in numba.__version__.split(".")[:2]) in jit.LINKED_ONLY_NUMBA
    assert on.stdout.strip() == str(not checked)
