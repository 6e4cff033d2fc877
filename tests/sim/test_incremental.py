"""The compiled backend's incremental exact allocator (exact event mode): rates re-filled from the restart
level on, equal to a full re-solve at every event (to 1e-9 relative, the backends' contract), on random
scenarios, splits and event sequences; and to the numpy reference (a full re-solve per event)."""

from __future__ import annotations

import numpy as np
import pytest
from _strategies import event_scenarios, random_splits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ainet_gym import load_scenario
from ainet_gym.checks.parity import max_rel_diff
from ainet_gym.sim.backends.numba import fill, incremental
from ainet_gym.sim.backends.numba import lazy as nb_lazy
from ainet_gym.sim.backends.numba import repair as nb_repair
from ainet_gym.sim.backends.numba import settings as nb_settings
from ainet_gym.sim.backends.numba.jit import njit
from ainet_gym.sim.world import FabricWorld

RTOL = 1e-9
FIELDS = ("iterations", "step_time_s", "comm_time_s", "link_bytes", "stalled_transfers", "gpu_utilization")


def run(
    scenario: dict, backend: str, inc_min: int, seed: int, steps: int, splits: list, par: tuple | None = None
) -> list:
    w = FabricWorld(load_scenario(scenario), 1, backend=backend)
    w.reset(seeds=[seed])
    w.sim.incremental_min_flows = inc_min
    if (
        par is not None
    ):  # (parallel_share, parallel_max_rounds[, lazy_switch, lazy_cost_ratio, lazy_handoff_solves])
        w.sim.parallel_share, w.sim.parallel_max_rounds = par[:2]
        if len(par) > 2:
            w.sim.lazy_switch, w.sim.lazy_cost_ratio, w.sim.lazy_handoff_solves = par[2:]
    out = []
    for k in range(steps):
        r = w.step(splits[k] if splits[k] is not None else w.default_split())
        out.append({f: np.asarray(getattr(r, f), dtype=float) for f in FIELDS})
    return out


# the lazy kernel's solves: heap fills only (sparse completion-heap updates); every solve by the parallel
# rule for 2 rounds, the rest by the heap (the completion heap rebuilt at every solve); and the switch
# between the full path and the lazy kernel by its cost model: the lazy work weighted 1e9 with hand-offs
# free (the full path at every event with something to re-fill, the lazy kernel at the others: the most
# hand-offs both ways), weighted 1 with hand-offs free, and the defaults
LAZY_MODES = [
    (1.0, 8, False, 1.0, 1.0),
    (0.0, 2, False, 1.0, 1.0),
    (1.0, 8, True, 1e9, 0.0),
    (0.0, 2, True, 1.0, 0.0),
    (0.25, 8, True, nb_settings.LAZY_COST_RATIO, nb_settings.LAZY_HANDOFF_SOLVES),
]


@pytest.mark.parametrize("par", LAZY_MODES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_scenarios(), st.integers(0, 3), st.integers(0, 2**31 - 1))
def test_incremental_equals_full_resolve_on_random_event_sequences(par, scenario, seed, split_seed):
    # every completion and every phase start is an event that changes the active flows; the incremental
    # fills (inc_min 0: from the first flow on) must give what a full parallel-rule re-solve per event gives
    splits = random_splits(load_scenario(scenario), seed, split_seed)
    inc = run(scenario, "numba", 0, seed, 4, splits, par)
    full = run(scenario, "numba", -1, seed, 4, splits)
    for a, b in zip(inc, full, strict=True):
        for f in FIELDS:
            assert max_rel_diff(a[f], b[f]) <= RTOL, f


def _worlds(sc: object, settings: tuple[tuple[str, int], ...], seeds: tuple[int, ...] = (0,)) -> list:
    """One world of ``sc`` per (backend, ``incremental_min_flows``) of ``settings`` (0: the lazy kernel,
    -1: the full re-solve per event), each reset on ``seeds``: the worlds the equality tests step side by
    side."""
    worlds = []
    for backend, inc_min in settings:
        w = FabricWorld(sc, len(seeds), backend=backend)
        w.reset(seeds=list(seeds))
        w.sim.incremental_min_flows = inc_min
        worlds.append(w)
    return worlds


@pytest.mark.parametrize("name", ["moe-alltoall-skewed", "multi-tenant-churn", "storage-checkpoint"])
def test_incremental_matches_the_numpy_reference(name):
    sc = load_scenario(name)
    worlds = _worlds(sc, (("numba", 0), ("numpy", -1)), seeds=(0, 1))
    for _ in range(6):
        a, b = (w.step(w.default_split()) for w in worlds)
        for f in FIELDS:
            assert max_rel_diff(getattr(a, f), getattr(b, f)) <= RTOL, f


def _alltoall_refills(steps: int) -> tuple[int, int, int, list, tuple[int, int, int]]:
    """Incremental solves, flows re-filled and flows active at them over ``steps`` intervals of ``ALLTOALL``
    with the lazy kernel from the first flow on, each interval's link bytes, and the departure repair's
    counters (repairs made, declined, flows read)."""
    w = FabricWorld(load_scenario(ALLTOALL), 1, backend="numba")
    w.reset(seeds=[0])
    w.sim.incremental_min_flows = 0
    solves = touched = active = 0
    rep = np.zeros(3, dtype=np.int64)
    out = []
    for _ in range(steps):
        w.sim.set_split(w.default_split())
        m = w.sim.run_interval(w.decision_interval_s)
        solves, touched, active = (
            solves + m.incremental_solves,
            touched + m.flows_refilled,
            active + m.flows_active,
        )
        out.append(np.array(m.link_bytes, copy=True))
        rep += (m.repairs, m.repairs_declined, m.flows_checked)
        assert m.flows_touched == m.flows_refilled + m.flows_checked
    assert m.full_fills >= 1
    return solves, touched, active, out, tuple(int(x) for x in rep)


def test_incremental_solves_refill_few_flows_on_an_alltoall(monkeypatch):
    # 4 AllToAll jobs of 16 GPUs: most events are single completions, re-filling a part of the flows; the
    # departure repair re-fills fewer (a completion re-fills only the flows that lost every bottleneck) with
    # the same link bytes
    solves, touched, active, with_repair, (made, declined, read) = _alltoall_refills(3)
    _repair_off(monkeypatch)
    solves_off, touched_off, active_off, without, counters_off = _alltoall_refills(3)
    # the repair's counters reach IntervalMetrics: it takes part of the incremental solves (those at which
    # flows only left), reads flows there, and none of it without the repair
    assert made > 0 and made + declined < solves and read > 0
    assert counters_off == (0, 0, 0)
    assert solves > 100 and (solves, active) == (solves_off, active_off)
    assert touched_off < active  # a restart never re-fills more than the active flows, and here far fewer
    assert (
        touched < 0.95 * touched_off
    )  # (41,225 against 45,579 when written; 28,951 at REPAIR_MAX_SHARE 0.5)
    for a, b in zip(with_repair, without, strict=True):
        assert max_rel_diff(a, b) <= RTOL


ALLTOALL = {
    "name": "a2a",
    "fabric": {
        "topology": "spine_leaf",
        "leaves": 4,
        "spines": 2,
        "hosts_per_leaf": 2,
        "gpus_per_host": 8,
        "nic_gbps": 400,
        "uplink_gbps": 400,
    },
    "workload": {
        "jobs": [
            {
                "name": f"j{j}",
                "gpus": 16,
                "placement": "spread",
                "compute_ms": 5.0 + j,
                "collectives": [{"op": "alltoall", "bytes": 1e8}],
            }
            for j in range(4)
        ]
    },
    "dynamics": {"decision_interval_ms": 20.0},
}


def _steps_equal_recording_metrics(worlds: list, steps: int) -> list:
    """Step both worlds ``steps`` intervals under their default split, asserting every figure of the first
    equal to the second's to :data:`RTOL`; returns the first world's interval metrics, one per solve call."""
    last: list = []
    run_interval = worlds[0].sim.run_interval

    def counted(*args, **kw):
        m = run_interval(*args, **kw)
        last.append(m)
        return m

    worlds[0].sim.run_interval = counted
    for _ in range(steps):
        a, b = (w.step(w.default_split()) for w in worlds)
        for f in FIELDS:
            assert max_rel_diff(getattr(a, f), getattr(b, f)) <= RTOL, f
    return last


def _repair_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lazy kernel without the departure repair (``rep_on=False``) in the simulations stepped meanwhile."""
    lazy = nb_lazy.run_interval_lazy
    # (options, the last argument: LazyOptions; rep_on its third field)
    monkeypatch.setattr(
        nb_lazy, "run_interval_lazy", lambda *a: lazy(*a[:-1], (*a[-1][:2], False, *a[-1][3:]))
    )


@pytest.mark.parametrize("par", [(0.0, 1), (0.0, 1_000_000), (1.0, 8)])
def test_parallel_fallback_matches_the_numpy_reference(par, monkeypatch):
    # the lazy kernel with every solve by the parallel rule (handing the rest to the heap fill after 1
    # round, or never) and with none: the numpy backend's full re-solve per event to 1e-9, and the counter
    # says which path ran (without the departure repair, which fills by the heap)
    _repair_off(monkeypatch)
    sc = load_scenario("moe-alltoall-skewed")
    worlds = _worlds(sc, (("numba", 0), ("numpy", -1)))
    worlds[0].sim.parallel_share, worlds[0].sim.parallel_max_rounds = par
    last = _steps_equal_recording_metrics(worlds, 4)
    solves = sum(m.incremental_solves + m.full_fills for m in last)
    par_solves = sum(m.parallel_solves for m in last)
    assert solves > 20
    if par[0] == 0.0:
        assert par_solves > solves // 2  # (a solve that re-fills no flow takes neither path)
    else:
        assert par_solves == 0


def _lazy_kernel_with_level_heaps() -> object:
    """The lazy kernel as ``REPAIR_LEVEL_HEAPS = True`` compiles it: it passes ``LEVEL_HEAPS`` (None when the
    flag is off: the heaps not compiled, issue-31zf2) to every solve, a global numba reads when it compiles, so
    a copy of the kernel's function with that global True, compiled anew (not cached)."""
    import types

    from numba import njit as nb_njit

    f = nb_lazy.run_interval_lazy.py_func
    g = types.FunctionType(f.__code__, {**f.__globals__, "LEVEL_HEAPS": True}, f.__name__, f.__defaults__)
    return nb_njit(nogil=True)(g)


def test_the_lazy_kernel_with_the_level_heaps_matches_it_without(monkeypatch):
    # REPAIR_LEVEL_HEAPS on (issue-28zi): the lazy kernel's solves keep per-link level heaps and its departure
    # repair reads them; off (the default) the kernel is compiled without them (issue-31zf2). Both, stepped side
    # by side, give the numpy reference's figures (a full re-solve per event) to 1e-9; the heaps were kept
    # (a link's heap holds its flows) and the repair was made with them, and only in the heaps kernel
    assert nb_settings.REPAIR_LEVEL_HEAPS is False and incremental.LEVEL_HEAPS is None  # (the default)
    kernels = {True: _lazy_kernel_with_level_heaps(), False: nb_lazy.run_interval_lazy}
    mode = {"heaps": False}
    scratch: dict[bool, object] = {}

    def lazy(*a):
        scratch[mode["heaps"]] = a[10]  # (rp: the repair's scratch, RepairScratch)
        return kernels[mode["heaps"]](*a)

    monkeypatch.setattr(nb_lazy, "run_interval_lazy", lazy)
    sc = load_scenario("moe-alltoall-skewed")
    heaps, plain, ref = _worlds(sc, (("numba", 0), ("numba", 0), ("numpy", -1)))
    metrics = []  # the heaps world's interval metrics, one per kernel call
    run_interval = heaps.sim.run_interval

    def counted(*args, **kw):
        metrics.append(run_interval(*args, **kw))
        return metrics[-1]

    heaps.sim.run_interval = counted
    for _ in range(4):
        res = {}
        for on, w in ((True, heaps), (False, plain)):
            mode["heaps"] = on
            res[on] = w.step(w.default_split())
        r_ref = ref.step(ref.default_split())
        for f in FIELDS:
            assert max_rel_diff(getattr(res[True], f), getattr(r_ref, f)) <= RTOL, f
            assert max_rel_diff(getattr(res[False], f), getattr(r_ref, f)) <= RTOL, f
    assert sum(m.repairs for m in metrics) > 0  # the departure repair made solves (reading the heaps)
    assert (scratch[True].hn > 0).any()  # heaps kept (built at a full fill, updated since)
    assert not (scratch[False].hn > 0).any()  # none without the flag


def test_restart_constants_are_documented_values():
    assert 0 < nb_settings.RESTART_MARGIN <= 1e-9
    assert nb_settings.FULL_FILL_EVERY >= 1
    assert 0.0 <= nb_settings.PARALLEL_SHARE <= 1.0 and nb_settings.PARALLEL_MAX_ROUNDS >= 1
    assert isinstance(nb_settings.LAZY_SWITCH, bool) and 0.0 < nb_settings.LAZY_COST_RATIO < np.inf
    assert 0.0 <= nb_settings.LAZY_HANDOFF_SOLVES < np.inf and nb_settings.N_SWITCH == 4
    assert nb_settings.FULL_WORK_PER_ENTRY > 0 and nb_settings.LAZY_WORK_PER_ENTRY > 0
    assert 0.0 < nb_settings.SWITCH_MEAN_WEIGHT <= 1.0 and nb_settings.COMPONENT_BACKOFF_MAX >= 0


SWITCH_SETTINGS = [  # (lazy_switch, lazy_cost_ratio, lazy_handoff_solves)
    (False, 1.0, 1.0),  # off: the lazy kernel from the start to the end
    (True, 1e-9, 0.0),  # lazy work ~free: the full path for the first solve, then the lazy kernel
    (True, 1e9, 0.0),  # lazy work ~inf, hand-offs free: the lazy kernel only where it re-fills nothing
    (True, 1e9, 1e9),  # the full path throughout (no hand-off ever pays)
    (True, 1.0, 0.0),  # per event, unweighted
    (True, nb_settings.LAZY_COST_RATIO, nb_settings.LAZY_HANDOFF_SOLVES),  # the defaults
]


@pytest.mark.parametrize(("switch", "ratio", "handoff"), SWITCH_SETTINGS)
def test_switch_between_the_full_path_and_the_lazy_kernel_is_exact(switch, ratio, handoff):
    # 4 AllToAll jobs of 16 GPUs, the switch's cost model at its extremes and in between: the full re-solve
    # per event (incremental_min_flows -1) to 1e-9 at every interval, and the counters say which paths ran
    # (both, and hand-offs both ways, where the settings make them)
    sc = load_scenario(ALLTOALL)
    worlds = _worlds(sc, (("numba", 0), ("numba", -1)))
    sim = worlds[0].sim
    sim.lazy_switch, sim.lazy_cost_ratio, sim.lazy_handoff_solves = switch, ratio, handoff
    last = _steps_equal_recording_metrics(worlds, 3)
    events = sum(m.events for m in last)
    full_path = sum(m.full_path_events for m in last)
    switches = sum(m.lazy_switches for m in last)
    lazy_solves = sum(m.incremental_solves + m.full_fills for m in last)
    full_work = sum(m.full_path_work for m in last)
    lazy_work = sum(m.lazy_work for m in last)
    assert events > 100
    if not switch:
        assert full_path == 0 and switches == 0 and full_work == 0 and lazy_solves > 100 and lazy_work > 0
    elif ratio < 1e-6:  # handed to the lazy kernel at the first prediction, and kept there
        assert switches == 1 and 0 < full_path < 5 and lazy_solves > 100
    elif handoff > 1e6:  # never handed over
        assert switches == 0 and full_path == events and lazy_solves == 0 and lazy_work == 0
    elif ratio > 1e6:  # back and forth
        assert switches > 20 and full_path > 20 and lazy_solves > 20 and full_work > 0 and lazy_work > 0
    else:
        assert full_path > 0 and lazy_solves > 0 and full_work > 0 and lazy_work > 0
    assert np.all(sim.engine_state.switch_cost[:, :2] > 0)  # the running means of the work per entry


def test_incremental_matches_full_resolve_under_the_greedy_split():
    # the greedy placement reads the last interval's link bytes, which the fills and the parallel rule give
    # equal only to round-off: on this scenario's symmetric links the path scores tie up to 1e-16, and an
    # exact comparison let the round-off pick the path (a 3% difference in link bytes from interval 2 on)
    from ainet_gym.routing.policies import get_policy

    sc = load_scenario("moe-alltoall-skewed")
    worlds = _worlds(sc, (("numba", 0), ("numba", -1)))
    pol, last = get_policy("greedy"), [None, None]
    for _ in range(3):
        res = []
        for k, w in enumerate(worlds):
            last[k] = w.step(pol(w, last[k]))
            res.append(last[k])
        assert max_rel_diff(res[0].link_bytes, res[1].link_bytes) <= RTOL


@st.composite
def event_sequences(draw):
    """A random flow-link instance (flows split over 1-3 paths of 1-3 links: one path, as the greedy split
    places a connection, equal or random fractions) with demands and share weights (half the instances all 1,
    the others from a small set, many ties, or uniform; issue-28zc), and events that remove and add flows
    (a flow may leave and join again at the same event: it completed and its next iteration started)."""
    tied = draw(st.booleans())  # capacities and fractions from small sets: many equal levels
    L = draw(st.integers(2, 10))
    F = draw(st.integers(1, 24))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    cap = rng.choice([1e9, 2e9, 4e9], L) if tied else rng.uniform(0.5e9, 5e9, L)
    cap[rng.random(L) < 0.1] = np.inf
    cap[rng.random(L) < 0.05] = 0.0  # a failed link
    inc = np.zeros((F, L))
    for f in range(F):
        k = int(rng.integers(1, 4))
        frac = {0: np.eye(k)[0], 1: np.full(k, 1.0 / k), 2: rng.dirichlet(np.ones(k))}[
            int(rng.integers(0, 3))
        ]
        for p in range(k):
            links = rng.choice(L, size=int(rng.integers(1, min(3, L) + 1)), replace=False)
            inc[f, links] += frac[p]
    demand = np.where(
        rng.random(F) < 0.3, rng.choice([0.3e9, 1e9], F) if tied else rng.uniform(0.1e9, 3e9, F), np.inf
    )
    weight = {0: np.ones(F), 1: rng.choice([0.5, 1.0, 2.0, 3.0], F), 2: rng.uniform(0.2, 8.0, F)}[
        draw(st.sampled_from([0, 0, 1, 2]))
    ]
    events = []
    active = np.zeros(F, dtype=bool)
    # a third of the sequences: every flow joins at the first event, then one or two leave at each (the
    # departure repair's case: events at which flows only leave)
    drain = draw(st.integers(0, 2)) == 0
    for i in range(draw(st.integers(1, 30))):
        if drain:
            on = np.flatnonzero(active)
            gone = rng.choice(on, size=min(on.size, int(rng.integers(1, 3))), replace=False) if i else on[:0]
            came = np.flatnonzero(~active) if i == 0 else gone[:0]
            active[gone] = False
            active[came] = True
            events.append((np.sort(gone), came))
            continue
        gone = np.flatnonzero(active & (rng.random(F) < 0.25))
        back = gone[rng.random(gone.size) < 0.3]  # left and joined again
        came = np.concatenate([np.flatnonzero(~active & (rng.random(F) < 0.25)), back])
        active[gone] = False
        active[came] = True
        events.append((gone, came))
    return cap, inc, demand, weight, events


# how a solve fills its flows: (par_share, par_rounds, par_levels). The heap fill only; the parallel rule for
# every solve, handing the flows left after 1 or 2 rounds to the heap fill; the parallel rule to the end; and
# the parallel rule only where the flows re-filled held one level at the last solve (else the heap fill:
# PARALLEL_MAX_LEVELS)
NO_GATE = 10**9
FILL_MODES = [(1.0, 8, NO_GATE), (0.0, 1, NO_GATE), (0.0, 2, NO_GATE), (0.0, 1_000_000, NO_GATE), (0.0, 2, 1)]


# the departure repair: checking only the flows at each changed link's largest level (the default,
# REPAIR_ONLY_TOP), checking every flow on it (item 9's repair), and off; "order": "top" with the heap fills'
# flows in flow order (REFILL_FLOW_ORDER, issue-28zj)
# heap: the per-link level heaps (issue-28zi, rep_heap); group: flow order and the heap fills over groups of
# flows (issue-28zm, grp_fill); keep: the same with the groups kept from fill to fill (issue-28zn, grp_fill 2)
REPAIR_MODES = ["top", "all", "off", "heap", "order", "group", "keep"]


@pytest.mark.parametrize("repair_mode", REPAIR_MODES)
@pytest.mark.parametrize("par_share, par_rounds, par_levels", FILL_MODES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_sequences())
def test_resolve_incremental_equals_a_full_resolve_at_every_event(
    par_share, par_rounds, par_levels, repair_mode, case
):
    # the compiled incremental re-solve of the lazy event loop, driven event by event, against the numpy
    # reference (the parallel rule, a full re-solve of the active flows) after every event, with each way
    # of filling the flows above the restart level and of the departure repair; weighted or not (levels
    # rate / weight)
    from ainet_gym.sim.allocator import max_min_fair

    repair = repair_mode != "off"

    cap, inc, demand, weight, events = case
    weighted = bool((weight != 1.0).any())
    F, L = inc.shape
    fe, le = np.nonzero(inc)  # flow-sorted entries
    coef = inc[fe, le]
    fe_lo = np.searchsorted(fe, np.arange(F)).astype(np.int64)
    fe_hi = np.searchsorted(fe, np.arange(F), side="right").astype(np.int64)
    i64 = np.int64
    act = np.zeros(F, dtype=bool)
    arr_mark = np.full(F, -1, dtype=i64)
    rate = np.zeros(F)
    scratch = [np.empty(F, dtype=i64) for _ in range(3)]  # act_list, gone, came
    per_flow = dict(old_rate=np.empty(F), refill=np.empty(F, dtype=i64), keep_flow=np.empty(F, dtype=i64),
                    keep_level=np.empty(F), log_flow=np.empty(F, dtype=i64), log_level=np.empty(F),
                    out_flow=np.empty(F, dtype=i64), out_level=np.empty(F))  # fmt: skip
    fs = fill.fill_scratch(L, F, fe.size, F if repair_mode == "keep" else 0)
    links = dict(uf=np.empty(L, dtype=i64), seed=np.full(L, -1, dtype=i64), resid=np.empty(L),
                 rstamp=np.full(L, -1, dtype=i64), load=np.zeros(L), csum=np.zeros(L),
                 link_gen=np.full(L, -1, dtype=i64))  # fmt: skip
    rstate = np.array([-1] + [0] * 13, dtype=i64)
    rp = nb_repair.repair_scratch(L, F, fe.size)
    n_inc = 0
    n_rep = 0  # solves the departure repair made
    n_filled = 0  # solves that filled at least one flow
    n_made0 = 0  # repairs made with nothing re-filled (RepairScratch.outcome[5])
    for mark, (gone, came) in enumerate(events):
        act[gone] = False
        act[came] = True
        arr_mark[came] = mark
        act_list, g, c = scratch
        a = np.flatnonzero(act)
        act_list[: a.size], g[: gone.size], c[: came.size] = a, gone, came
        prev = rate.copy()
        n_re, full = incremental.resolve_incremental(
            act, arr_mark, mark, act_list, a.size, g, gone.size, c, came.size, fe_lo, fe_hi, le.astype(i64),
            coef, cap, 0, demand, weight, rate, per_flow["old_rate"], per_flow["refill"],
            per_flow["keep_flow"], per_flow["keep_level"], per_flow["log_flow"], per_flow["log_level"],
            per_flow["out_flow"], per_flow["out_level"], fs, links["uf"], links["seed"], links["resid"],
            links["rstamp"], links["load"], links["csum"], links["link_gen"], rstate, par_share, par_rounds, False, 1.0,
            1.0, F, np.array([4.0, 8.0, 0.0, 0.0]), rp, 0, F, repair, repair_mode in ("top", "heap", "order", "group", "keep"),
            par_levels, weighted, repair_mode == "heap", repair_mode in ("order", "group", "keep"),
            {"keep": 2, "group": 1}.get(repair_mode), True,  # (grp_fill None: the group fills not compiled)
        )  # fmt: skip
        n_inc += not full
        repaired = rstate[11] > n_rep
        n_rep = rstate[11]
        assert not repaired or (repair and came.size == 0)  # the repair takes events at which flows only left
        if repair_mode == "order" and not repaired:  # (every fill's flows in flow order)
            assert np.all(np.diff(per_flow["refill"][:n_re]) > 0)
        filled = per_flow["refill"][:n_re]  # their previous rates, 0 for arrivals (issue-28zp)
        want_old = np.where(arr_mark[filled] == mark, 0.0, prev[filled])
        assert per_flow["old_rate"][:n_re].tobytes() == want_old.tobytes(), mark
        n_filled += n_re > 0 and not repaired  # (a repair fills by the heap)
        want = max_min_fair(inc[a], cap, demand[a], weights=weight[a], backend="numpy")
        got = rate[a]
        assert rstate[0] == a.size  # the freeze log holds the active flows
        assert np.array_equal(np.sort(per_flow["log_flow"][: a.size]), a)
        lv = per_flow["log_level"][: a.size]
        # nondecreasing (inf: unconstrained flows, last) up to round-off between equal levels: links that fill at
        # one level compute it from different sums (a clean-venv run logged 2.857142857e8 an ulp lower after it)
        assert np.all(lv[1:] >= lv[:-1] * (1 - 1e-12))
        lf = per_flow["log_flow"][: a.size]  # the log holds levels: rate / weight
        np.testing.assert_allclose(lv, rate[lf] / weight[lf], rtol=1e-12, atol=0.0)
        assert np.array_equal(np.isinf(got), np.isinf(want)), mark
        fin = np.isfinite(want)
        err = np.abs(got[fin] - want[fin]) / np.maximum(np.abs(want[fin]), 1e-300)
        assert np.all((err <= RTOL) | (np.abs(got[fin] - want[fin]) <= 1e-9)), (mark, err.max())
        if repair:  # the lists of the flows at each saturated link's largest level (what the repair reads)
            _assert_top_lists(rp, rstate, act, rate, weight, inc)
        # every repair counted once by its outcome (issue-28zq): declined (the first five) or made; a repair
        # made with nothing re-filled exactly when it filled no flow; no limit to reach with the level heaps
        out = rp.outcome
        assert out[:5].sum() == rstate[12] and out[5:].sum() == rstate[11], (out, rstate[11:13])
        if repaired:
            assert (n_re == 0) == (out[5] > n_made0), (n_re, out)
        n_made0 = out[5]
        if repair_mode == "heap":
            assert out[:3].sum() == 0, out
        if repair_mode == "heap":  # the level heaps: every link's active flows at their levels, heap-ordered
            _assert_level_heaps(rp, rstate, act, rate, weight, inc)
    assert n_inc == len(events) - 1  # after the first (full) fill, every solve was incremental
    # the solves the parallel rule took: every one that filled a flow, or, gated by the levels, at most those
    if par_levels == NO_GATE:
        assert rstate[5] == (n_filled if par_share == 0.0 else 0)
    else:
        assert rstate[5] <= n_filled


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("parallel_share", 1.5),
        ("parallel_share", float("nan")),
        ("parallel_share", "0.3"),
        ("parallel_max_rounds", -1),
        ("lazy_switch", 1),
        ("lazy_switch", "yes"),
        ("lazy_cost_ratio", 0.0),
        ("lazy_cost_ratio", float("inf")),
        ("lazy_cost_ratio", True),
        ("lazy_handoff_solves", -1.0),
        ("lazy_handoff_solves", float("nan")),
    ],
)
def test_bad_parallel_settings_are_refused_naming_the_field(field, value):
    # the fallback's settings are plain attributes: a bad one is refused at the next step, with its name
    w = FabricWorld(load_scenario("moe-alltoall-skewed"), 1, backend="numba")
    w.reset(seeds=[0])
    before = w.sim.state.arrays()
    before = [np.array(a, copy=True) for a in before]
    setattr(w.sim, field, value)
    with pytest.raises(ValueError, match=rf"^{field} = .*allowed"):
        w.step(w.default_split())
    for a, b in zip(before, w.sim.state.arrays(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [("lazy_switch", True, 1), ("lazy_cost_ratio", 2.0, True), ("parallel_max_rounds", 8, -1)],
)
def test_a_setting_changed_after_a_step_is_checked_again(field, good, bad):
    # the numba backend keeps the settings it checked and checks them again when one is assigned (an equal
    # value of another type too: 1 == True, True == 1.0): the checks are not skipped after the first step
    w = FabricWorld(load_scenario("moe-alltoall-skewed"), 1, backend="numba")
    w.reset(seeds=[0])
    setattr(w.sim, field, good)
    w.step(w.default_split())
    setattr(w.sim, field, bad)
    with pytest.raises(ValueError, match=rf"^{field} = .*allowed"):
        w.step(w.default_split())
    setattr(w.sim, field, good)
    w.step(w.default_split())  # the good value again: accepted


def _drive(
    cap: np.ndarray, inc: np.ndarray, demand: np.ndarray, events: list, repair: bool, top: bool = True,
    works: list | None = None, par: tuple = (1.0, 8, NO_GATE), heap: bool = False, outcomes: list | None = None,
) -> list:  # fmt: skip
    """:func:`kernels.resolve_incremental` driven through ``events`` ((gone, came) flow arrays); per event the
    rates of every flow (0 when inactive), the flows the solve filled, whether the repair made it and the
    active flows the repair read (``rstate[13]``'s increase). ``top``: the repair checks only the flows at a
    changed link's largest level (:data:`kernels.REPAIR_ONLY_TOP`); ``works`` receives each solve's counted
    work (``rstate[9]``) and the parallel-rule solves so far (``rstate[5]``); ``par``: ``(par_share,
    par_rounds, par_levels)``; ``outcomes`` receives the repair's outcome counts after each solve
    (``RepairScratch.outcome``, :data:`nb_repair.REPAIR_OUTCOMES`)."""
    F, L = inc.shape
    fe, le = np.nonzero(inc)
    i64 = np.int64
    fe_lo = np.searchsorted(fe, np.arange(F)).astype(i64)
    fe_hi = np.searchsorted(fe, np.arange(F), side="right").astype(i64)
    act, arr_mark, rate = np.zeros(F, dtype=bool), np.full(F, -1, dtype=i64), np.zeros(F)
    act_list, g, c = (np.empty(F, dtype=i64) for _ in range(3))
    per_flow = [np.empty(F), *(np.empty(F, dtype=i64) for _ in range(2)), np.empty(F), np.empty(F, dtype=i64),
                np.empty(F), np.empty(F, dtype=i64), np.empty(F)]  # fmt: skip
    links = [np.empty(L, dtype=i64), np.full(L, -1, dtype=i64), np.empty(L), np.full(L, -1, dtype=i64),
             np.zeros(L), np.zeros(L), np.full(L, -1, dtype=i64)]  # fmt: skip
    rstate = np.array([-1] + [0] * 13, dtype=i64)
    fs, rp = fill.fill_scratch(L, F, fe.size, 0), nb_repair.repair_scratch(L, F, fe.size)
    out = []
    for mark, (gone, came) in enumerate(events):
        gone, came = np.asarray(gone, dtype=i64), np.asarray(came, dtype=i64)
        act[gone] = False
        act[came] = True
        arr_mark[came] = mark
        a = np.flatnonzero(act)
        act_list[: a.size], g[: gone.size], c[: came.size] = a, gone, came
        reps, seen = rstate[11], rstate[13]
        n_re, _ = incremental.resolve_incremental(
            act, arr_mark, mark, act_list, a.size, g, gone.size, c, came.size, fe_lo, fe_hi, le.astype(i64),
            inc[fe, le], cap, 0, demand, np.ones(F), rate, *per_flow, fs, *links, rstate, par[0], par[1], False, 1.0, 1.0, F, np.array([4.0, 8.0, 0.0, 0.0]),
            rp, 0, F, repair, top, par[2], False, heap,
        )  # fmt: skip
        if works is not None:
            works.append((int(rstate[9]), int(rstate[5])))
        if outcomes is not None:
            outcomes.append(rp.outcome.tolist())
        out.append((np.where(act, rate, 0.0), n_re, rstate[11] > reps, int(rstate[13] - seen)))
    return out


def test_departure_repair_keeps_a_tied_alltoall_without_refilling():
    # an AllToAll of 6 GPUs (NIC up and down links of equal capacity): every flow at one level, bottlenecked
    # at both of its NICs. A completion there frees capacity at two NICs, but every flow on them still has
    # its other NIC as a bottleneck: no rate changes, and the repair re-fills nothing (the restart rule
    # re-fills every flow at that level). Then flows 0 -> 1 and 0 -> 4 leave: the flows of source 0 and
    # into 1 and 4 keep a bottleneck at their other NIC, except 1 -> 4 and 0 -> 3, whose other NIC the first
    # completion left with spare capacity: those two (and only those) are re-filled, and their rates rise.
    # Against the numpy reference at every event.
    from ainet_gym.sim.allocator import max_min_fair

    n = 6
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    inc = np.zeros((len(pairs), 2 * n))
    for f, (i, j) in enumerate(pairs):
        inc[f, i] = inc[f, n + j] = 1.0
    cap, demand = np.full(2 * n, 5e10), np.full(len(pairs), np.inf)
    events = [(np.arange(0), np.arange(len(pairs))), ([7], []), ([0, 3], [])]
    for repair in (True, False):
        res = _drive(cap, inc, demand, events, repair)
        active = np.ones(len(pairs), dtype=bool)
        for (gone, _), (got, *_) in zip(events, res, strict=True):
            active[gone] = False
            want = np.zeros(len(pairs))
            want[active] = max_min_fair(inc[active], cap, backend="numpy")
            np.testing.assert_allclose(got, want, rtol=1e-12)
        assert [r[2] for r in res] == [False, repair, repair]
        if repair:
            assert [r[1] for r in res[1:]] == [0, 2]
            assert res[2][0][pairs.index((1, 4))] > res[1][0][pairs.index((1, 4))]
        else:
            assert res[1][1] >= n - 2  # the restart rule re-fills the tied flows


@pytest.mark.parametrize("heap", [False, True])
def test_departure_repair_refills_a_kept_flow_that_outranks_a_refilled_one(heap):
    # links D (5), l (10), W (12); flows d: D; g: D, l; h: l, W; k: W. Before: d = g = 2.5 (D), h = k = 6 (W),
    # l not saturated. d leaves: g loses its bottleneck and is re-filled on what h leaves at l (4), but h is
    # above it there, so g has no bottleneck: h must come down, so the repair fills again with h, and with k
    # (h's link W changed): max-min g = h = 5 at l, k = 7. Without the check after the fill, g = 4 and h = 6.
    # 16 more flows share a link X (160) apart: above the restart level, so the restart rule counts them
    # (the repair re-fills at most REPAIR_MAX_SHARE of what it would)
    cap = np.array([5.0, 10.0, 12.0, 160.0])
    inc = np.zeros((20, 4))
    for f, links in enumerate([[0], [0, 1], [1, 2], [2], *[[3]] * 16]):
        inc[f, links] = 1.0
    assert int(nb_settings.REPAIR_MAX_SHARE * 20) >= 3
    events = [(np.arange(0), np.arange(20)), ([0], [])]
    # (with the level heaps, issue-28zi, h is found in l's heap above g's level, not by reading l's flows)
    (r0, *_), (r1, n_re, repaired, _) = _drive(cap, inc, np.full(20, np.inf), events, True, heap=heap)
    np.testing.assert_allclose(r0, [2.5, 2.5, 6.0, 6.0] + [10.0] * 16, rtol=1e-12)
    np.testing.assert_allclose(r1, [0.0, 5.0, 5.0, 7.0] + [10.0] * 16, rtol=1e-12)
    assert repaired and n_re == 3


@pytest.mark.parametrize("heap", [False, True])
@pytest.mark.parametrize("n", [4, 6, 9])
def test_departure_repair_counts_the_flows_it_reads(n, heap):
    # the tied AllToAll of n GPUs above: one completion (1 -> 2) changes two saturated links, the NICs of 1
    # (up) and 2 (down); the repair reads the n - 2 other active flows on each, finds a witness for every one
    # (its other NIC, unchanged) and re-fills none: 2 (n - 2) flows read, 0 re-filled. A second completion
    # (1 -> 3): 1's up link now has spare capacity (no flow's bottleneck: not read), so only 3's down link
    # is read (n - 2 flows, each with a witness at its source). Without the repair nothing is read.
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    inc = np.zeros((len(pairs), 2 * n))
    for f, (i, j) in enumerate(pairs):
        inc[f, i] = inc[f, n + j] = 1.0
    cap, demand = np.full(2 * n, 5e10), np.full(len(pairs), np.inf)
    events = [(np.arange(0), np.arange(len(pairs))), ([pairs.index((1, 2))], []), ([pairs.index((1, 3))], [])]
    # (with the level heaps, issue-28zi, each flow read counts once per solve: the same here, none is read twice)
    res = _drive(cap, inc, demand, events, True, heap=heap)
    assert [r[1:] for r in res] == [(len(pairs), False, 0), (0, True, 2 * (n - 2)), (0, True, n - 2)]
    assert [r[3] for r in _drive(cap, inc, demand, events, False)] == [0, 0, 0]


def _why_case(kind: str) -> tuple:
    """Instances whose first departure the repair declines for a known reason (issue-28zq). ``scan``: flows
    0..8 share link A (9) alone at level 1; flow 0 leaves; the 8 others lose their only bottleneck and have no
    other link, so the witness scan would re-fill all 8, more than the limit (int(0.25 x 9) = 2): declined in
    the first round. ``check``: d (0): D (5); g (1): D, l (26.5); h1..h6 (2-7): l and their own W_i (4). Before:
    d = g = 2.5 (D), h_i = 4 (l and W_i tied, so each has W_i as a witness and the scan keeps them). d leaves:
    the scan re-fills g only; g fills to 2.5 on l's residual but the six h_i are above it there, so the check
    must add them, more than the limit (int(0.25 x 8) = 2): declined in the check. ``later``: the same with
    three h_i on l (14.5) and a flow k_i beside each on W_i (8; h_i = k_i = 4), and 16 flows on a link X (160)
    apart at 10 (above the restart level: the limit is int(0.25 x 24) = 6): the scan re-fills g, the check adds
    the three h_i (4 flows), then the next round's scan finds the k_i without a witness (W_i now changed) and
    would re-fill more than 6: declined by the scan in a later round. Max-min after the departure: 8 x 9 / 8;
    seven flows at 26.5 / 7; g = h_i = 3.625 (l) and k_i = 4.375. ``(cap, inc, events)``."""
    if kind == "scan":
        cap, flows = np.array([9.0]), [[0]] * 9
    elif kind == "check":
        cap = np.array([5.0, 26.5] + [4.0] * 6)
        flows = [[0], [0, 1], *[[1, 2 + i] for i in range(6)]]
    else:
        cap = np.array([5.0, 14.5, 8.0, 8.0, 8.0, 160.0])
        flows = [[0], [0, 1], *[[1, 2 + i] for i in range(3)], *[[2 + i] for i in range(3)], *[[5]] * 16]
    inc = np.zeros((len(flows), cap.size))
    for f, links in enumerate(flows):
        inc[f, links] = 1.0
    return cap, inc, [(np.arange(0), np.arange(len(flows))), ([0], [])]


@pytest.mark.parametrize("heap", [False, True])
@pytest.mark.parametrize(("kind", "col"), [("scan", 0), ("check", 2), ("later", 1)])
def test_departure_repair_counts_why_it_declines(kind, col, heap):
    # each instance of _why_case declines for its reason under the share limit (REPAIR_MAX_SHARE 0.25, the
    # default; the limits above assume it): that outcome counted once, nothing else, and the restart re-fill
    # that follows gives the max-min rates; with the level heaps (no share limit, issue-28zi) the same
    # departures are repaired, exactly, in one fill (scan: the 8 flows) or more (check, later: g, then the
    # flows the check added). A repair that counted another outcome, or none, fails; so would one that kept the
    # rates of the flows the limit cut off (the rates are checked against the numpy reference)
    from ainet_gym.sim.allocator import max_min_fair

    assert nb_settings.REPAIR_MAX_SHARE == 0.25
    cap, inc, events = _why_case(kind)
    F = inc.shape[0]
    outcomes: list = []
    res = _drive(cap, inc, np.full(F, np.inf), events, True, heap=heap, outcomes=outcomes)
    active = np.ones(F, dtype=bool)
    active[0] = False
    want = np.zeros(F)
    want[active] = max_min_fair(inc[active], cap, backend="numpy")
    np.testing.assert_allclose(res[1][0], want, rtol=1e-12)
    assert outcomes[0] == [0] * 8  # (the first solve is a full fill: no repair)
    expect = [0] * 8
    expect[(6 if kind == "scan" else 7) if heap else col] = 1
    assert outcomes[1] == expect, (kind, heap, outcomes[1], nb_repair.REPAIR_OUTCOMES)
    assert res[1][2] == heap  # made (heaps) or declined


def test_the_lazy_kernels_scratch_is_kept_and_gives_what_fresh_scratch_gives() -> None:
    # the fill and repair scratch is allocated once per simulation and reused from interval to interval (its
    # stamps restart with every call's ticks, so the kernel re-initialises them): every figure bit for bit
    # that of a world whose scratch is allocated afresh at every interval, although the kept scratch is
    # overwritten before every interval with small stamps and levels (what an earlier call may leave: on
    # this periodic AllToAll a call's stale stamps alone happen to match the next call's fills)
    sc = load_scenario(ALLTOALL)
    kept, fresh = (FabricWorld(sc, 2, backend="numba") for _ in range(2))
    held = []
    for w in (kept, fresh):
        w.reset(seeds=[0, 1])
        w.sim.incremental_min_flows = 0
    for _ in range(6):
        fresh.sim.backend_scratch.clear()
        for fs_rp in kept.sim.backend_scratch.get("lazy", (None, {}))[1].values():
            for x in (*fs_rp[0][:-1], *fs_rp[0].keep, *fs_rp[1]):  # (keep: the kept-group store, issue-28zn)
                x[...] = np.arange(x.size) % 5  # stale: stamps of this call's first ticks, levels 0-4
        a, b = (w.step(w.default_split()) for w in (kept, fresh))
        for f in FIELDS:
            x, y = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
            assert np.array_equal(x, y, equal_nan=True), f
        per_thread = kept.sim.backend_scratch["lazy"][1]
        held.extend(id(v[0].slot_flows) for v in per_thread.values())
    # the same arrays at every interval (one per kernel thread that ran a range)
    assert 1 <= len(set(held)) == len(kept.sim.backend_scratch["lazy"][1])


def test_the_lazy_kernel_is_called_on_numbas_fast_path(monkeypatch) -> None:
    # issue-31zb2: after its first call the lazy kernel is called without numba's Python-level dispatch
    # (_compile_for_args, which types every argument in Python, ~1 ms a call): an omitted default reached the
    # dispatcher as an OmittedArg, whose C fingerprint is that of its value's Python type, so OmittedArg(False)
    # took the cached type of OmittedArg(True) and no compiled signature matched at any call
    from numba.core import dispatcher as nb_dispatcher

    w = FabricWorld(load_scenario(ALLTOALL), 1, backend="numba")
    w.reset(seeds=[0])
    w.sim.incremental_min_flows = 0
    w.step(w.default_split())  # (compiles)
    slow = []
    original = nb_dispatcher._DispatcherBase._compile_for_args

    def spy(self, *args, **kws):
        slow.append(self.py_func.__name__)
        return original(self, *args, **kws)

    monkeypatch.setattr(nb_dispatcher._DispatcherBase, "_compile_for_args", spy)
    for _ in range(3):
        w.step(w.default_split())
    assert "lazy" in w.sim.backend_scratch  # the lazy kernel ran
    assert slow == []


def test_departure_repair_checks_only_the_flows_at_a_changed_links_largest_level():
    # links A (12), B (2), C (2); flows d: A; f1: A, B; f2: A, C; g: A. Max-min: f1 = f2 = 2 (B, C), d = g =
    # 4 (A, its largest level). d leaves: of the flows on A, f1 and f2 are below A's largest level (A is not
    # their bottleneck, B and C are, unchanged): only g is checked for a witness, finds none and is
    # re-filled (8). Checking every flow on A reads the same three and walks f1's and f2's links too: more
    # work, the same re-fill and rates; both against the numpy reference
    from ainet_gym.sim.allocator import max_min_fair

    # 16 more flows share a link X (160) apart: above the restart level, so that the repair may re-fill one
    cap = np.array([12.0, 2.0, 2.0, 160.0])
    inc = np.zeros((20, 4))
    for f, links in enumerate([[0], [0, 1], [0, 2], [0], *[[3]] * 16]):
        inc[f, links] = 1.0
    events = [(np.arange(0), np.arange(20)), ([0], [])]
    want = np.zeros(20)
    want[1:] = max_min_fair(inc[1:], cap, backend="numpy")
    res, work = {}, {}
    for top in (True, False):
        work[top] = []
        res[top] = _drive(cap, inc, np.full(20, np.inf), events, True, top, work[top])
        np.testing.assert_allclose(res[top][0][0], [4.0, 2.0, 2.0, 4.0] + [10.0] * 16, rtol=1e-12)
        np.testing.assert_allclose(res[top][1][0], want, rtol=1e-12)
        # g re-filled by the repair; read before the fill by the check: only g, the flow listed at A's largest
        # level (``rp.top_*``), or all three; after it, A's new largest level is g's (8, above A's old 4: taken
        # from the list and g's new level, nothing read), or f1, f2 and g are scanned for it
        assert res[top][1][1:] == (1, True, 1 if top else 6)
    assert work[True][1][0] < work[False][1][0]


def _assert_level_heaps(rp, rstate, act, rate, weight, inc) -> None:
    """Once the link index is built, every link's level heap (issue-28zi) holds exactly its active flows, each
    keyed at its current level ``rate / weight`` bit for bit (a stale key, a departed flow left in, or a
    re-filled one not moved fails), in max-heap order, with consistent positions."""
    if rstate[10] != 1:
        return
    off = rp.adj_off
    for lk in range(inc.shape[1]):
        b, n = off[lk], rp.hn[lk]
        if n < 0:  # not kept (a link not saturated: built again when a repair reads it)
            continue
        slots = rp.hx[b : b + n]
        flows = rp.adj_flow[slots]
        on = np.flatnonzero((inc[:, lk] != 0) & act)
        assert np.array_equal(np.sort(flows), on), (lk, flows, on)
        np.testing.assert_array_equal(rp.hk[b : b + n], rate[flows] / weight[flows])
        i = np.arange(1, n)
        assert (rp.hk[b + (i - 1) // 2] >= rp.hk[b + i]).all(), lk  # parent >= child
        assert np.array_equal(rp.hpos[slots], b + np.arange(n)), lk
        out = np.setdiff1d(np.arange(off[lk], off[lk + 1]), slots)
        assert (rp.hpos[out] == -1).all(), lk


def _assert_top_lists(rp, rstate, act, rate, weight, inc) -> None:
    """Every link with a known largest level (``rp.sat >= 0``) and a list (``rp.top_n >= 0``, link index built)
    lists every active flow on it at that level (``rate / weight >= sat (1 - REPAIR_RTOL)``), and besides them
    only flows on the link within round-off below it (:func:`kernels.top_add`)."""
    if rstate[10] != 1:
        return
    off, tol = rp.adj_off, nb_settings.REPAIR_RTOL
    for lk in range(inc.shape[1]):
        if rp.sat[lk] < 0.0 or rp.top_n[lk] < 0:
            continue
        on = np.flatnonzero((inc[:, lk] != 0) & act)
        want = on[rate[on] / weight[on] >= rp.sat[lk] * (1.0 - tol)]
        got = rp.top_flow[off[lk] : off[lk] + rp.top_n[lk]]
        assert np.isin(want, got).all(), (lk, got, want)
        assert (inc[got, lk] != 0).all() and np.unique(got).size == got.size, (lk, got)
        a = got[act[got]]
        assert (rate[a] / weight[a] >= rp.sat[lk] * (1.0 - 1e-9)).all(), (lk, got, want)


@pytest.mark.parametrize("n", [4, 6, 9])
def test_departure_repair_reads_only_the_listed_flows_at_a_links_top_level(n):
    # the tied AllToAll of n GPUs above, plus one slow flow per GPU k on k's up and down NIC links and a
    # shared link H of capacity 1 (n slow flows at 1 / n, bottlenecked at H, far below the AllToAll's level).
    # A completion 1 -> 2 changes 1's up and 2's down NIC: on each, the repair checks the n - 2 other
    # AllToAll flows at the link's largest level (each has a witness at its other NIC) and reads only them,
    # from the link's list of the flows at that level, not the slow flow below it: 2 (n - 2) reads, none
    # re-filled. A second completion 1 -> 3 reads 3's down NIC's list: n - 2. Without the lists (every flow
    # on the link read) each count has the slow flows too. A wrong list changes the count.
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    n_f = len(pairs) + n
    inc = np.zeros((n_f, 2 * n + 1))
    for f, (i, j) in enumerate(pairs):
        inc[f, [i, n + j]] = 1.0
    for k in range(n):
        inc[len(pairs) + k, [k, n + k, 2 * n]] = 1.0
    cap = np.full(2 * n + 1, 5e10)
    cap[2 * n] = 1.0
    demand = np.full(n_f, np.inf)
    events = [(np.arange(0), np.arange(n_f)), ([pairs.index((1, 2))], []), ([pairs.index((1, 3))], [])]
    res = _drive(cap, inc, demand, events, True)
    np.testing.assert_allclose(res[0][0][len(pairs) :], 1.0 / n, rtol=1e-12)
    assert [r[1:] for r in res] == [(n_f, False, 0), (0, True, 2 * (n - 2)), (0, True, n - 2)]
    every = _drive(cap, inc, demand, events, True, top=False)
    assert [r[1:] for r in every] == [(n_f, False, 0), (0, True, 2 * (n - 1)), (0, True, n - 1)]
    for (got, *_), (want, *_) in zip(res, every, strict=True):
        assert np.array_equal(got, want)


def _drive_both_against_reference(cap: np.ndarray, inc: np.ndarray, events: list) -> dict[bool, list]:
    """``_drive`` with the repair on, reading the listed top-level flows (True) and every flow on a changed link
    (False); every event's rates of both checked against the numpy reference solver (1e-12 relative)."""
    from ainet_gym.sim.allocator import max_min_fair

    n = inc.shape[0]
    res = {top: _drive(cap, inc, np.full(n, np.inf), events, True, top) for top in (True, False)}
    active = np.ones(n, dtype=bool)
    for i, (gone, _) in enumerate(events):
        active[gone] = False
        want = np.zeros(n)
        want[active] = max_min_fair(inc[active], cap, backend="numpy")
        for top in (True, False):
            np.testing.assert_allclose(res[top][i][0], want, rtol=1e-12)
    return res


def test_departure_repair_takes_a_links_new_largest_level_from_its_list():
    # links A (13), W (8), S (1); flows k: A, W; w: W; r: A; d: A; s: A, S. Max-min: s = 1 (S), k = w = r = d =
    # 4 (A and W saturate together): A's list holds k, r, d. d leaves: r loses its bottleneck and is re-filled
    # (8, A saturated again); k keeps its witness W, so the repair takes A's new largest level from A's list
    # (k, still at 4) and r's new level: 8, with r alone listed, reading 1 flow instead of A's 3 (k, r, s).
    # The kept flow is not the top after the fill: had the repair kept A's old level (4), k would find A a
    # witness when w leaves next and keep 4, where max-min has k = r = 6 (A shared by k, r, s; W left to k).
    # Against the numpy reference, and the repair that reads every flow on a changed link.
    # (16 more flows share a link X (160) apart: above the restart level, so that the repair may re-fill two)
    cap = np.array([13.0, 8.0, 1.0, 160.0])
    inc = np.zeros((21, 4))
    for f, links in enumerate([[0, 1], [1], [0], [0], [0, 2], *[[3]] * 16]):  # k, w, r, d, s, X's
        inc[f, links] = 1.0
    events = [(np.arange(0), np.arange(21)), ([3], []), ([1], [])]
    res = _drive_both_against_reference(cap, inc, events)
    np.testing.assert_allclose(res[True][1][0][:5], [4.0, 4.0, 8.0, 0.0, 1.0], rtol=1e-12)
    np.testing.assert_allclose(res[True][2][0][:5], [6.0, 0.0, 6.0, 0.0, 1.0], rtol=1e-12)
    # the flows re-filled, the repair made, the active flows read: event 1 reads k and r before the fill and
    # k after it (A's list); event 2 re-fills k and r, so A's list keeps no flow and all of A is read
    assert [r[1:] for r in res[True]] == [(21, False, 0), (1, True, 3), (2, True, 5)]
    assert [r[1:] for r in res[False]] == [(21, False, 0), (1, True, 6), (2, True, 6)]


def test_departure_repair_takes_the_level_from_the_list_when_it_keeps_no_flow():
    # links A (13), S (1); flows r, d: A; s: A, S. Max-min: s = 1, r = d = 6 (A's list: r, d). d leaves: r is
    # re-filled (12), and A's list keeps no flow; r's new level is above A's old one, so every kept flow on A
    # (s, not listed: below the old level) is below it, and A's level is r's without reading A: 1 flow read
    # (r, before the fill), against 3 when every flow on A is read before and after it (r, s; s, r). Then s
    # leaves: r again (13). Against the numpy reference.
    # (16 more flows share a link X (160) apart: above the restart level, so that the repair may re-fill one)
    cap = np.array([13.0, 1.0, 160.0])
    inc = np.zeros((19, 3))
    for f, links in enumerate([[0], [0], [0, 1], *[[2]] * 16]):  # r, d, s, X's
        inc[f, links] = 1.0
    events = [(np.arange(0), np.arange(19)), ([1], []), ([2], [])]
    res = _drive_both_against_reference(cap, inc, events)
    np.testing.assert_allclose(res[True][1][0][:3], [12.0, 0.0, 1.0], rtol=1e-12)
    assert [r[1:] for r in res[True]] == [(19, False, 0), (1, True, 1), (1, True, 1)]
    assert [r[1:] for r in res[False]] == [(19, False, 0), (1, True, 4), (1, True, 2)]


def test_parallel_fill_only_where_the_refilled_flows_held_few_levels():
    # 6 flows, each alone on a link of its own capacity (6 distinct levels), one more link shared by all with
    # spare capacity; every solve dense (par_share 0). The lowest flow leaves: the restart rule re-fills the
    # 5 above it; the log at or above the restart level holds 6 distinct levels (the departed flow's too):
    # the parallel rule takes that solve only when par_levels >= 6, else the heap fill does; the first fill
    # (levels not known) is always the rule's. Same rates
    cap = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0])
    inc = np.zeros((6, 7))
    for f in range(6):
        inc[f, [f, 6]] = 1.0
    events = [(np.arange(0), np.arange(6)), ([0], [])]
    got = {}
    for levels in (5, 6, NO_GATE):
        rec = []
        res = _drive(cap, inc, np.full(6, np.inf), events, False, works=rec, par=(0.0, 2, levels))
        got[levels] = [r[1] for r in rec]
        np.testing.assert_allclose(res[1][0], [0.0, 2.0, 3.0, 4.0, 5.0, 6.0], rtol=1e-12)
        assert res[1][1] == 5
    assert got == {5: [1, 1], 6: [1, 2], NO_GATE: [1, 2]}


def _walk_snapshots(case: tuple, one_walk: bool, par_share: float, par_levels: int) -> list[tuple]:
    """Drive :func:`incremental.resolve_incremental` (the repair on, reading the lists; flow order) through
    ``case``'s events (:func:`event_sequences`) with ``one_walk`` on or off, every scratch array zeroed at the
    start; after each solve a snapshot of what it returns and leaves: the flows filled, the rates, the freeze
    log, the links' residuals, loads and union-find rows, the repair's ``sat`` and top lists, and whether the
    component rule was backing off at that solve (then the one walk applies)."""
    cap, inc, demand, weight, events = case
    F, L = inc.shape
    fe, le = np.nonzero(inc)
    coef = inc[fe, le]
    fe_lo = np.searchsorted(fe, np.arange(F)).astype(np.int64)
    fe_hi = np.searchsorted(fe, np.arange(F), side="right").astype(np.int64)
    i64 = np.int64
    act, arr_mark, rate = np.zeros(F, dtype=bool), np.full(F, -1, dtype=i64), np.zeros(F)
    act_list, g, c = (np.zeros(F, dtype=i64) for _ in range(3))
    per_flow = [np.zeros(F, dtype=dt) for dt in (float, i64, i64, float, i64, float, i64, float)]
    fs = fill.fill_scratch(L, F, fe.size, 0)
    uf, seed, resid, rstamp = (
        np.zeros(L, dtype=i64),
        np.full(L, -1, dtype=i64),
        np.zeros(L),
        np.full(L, -1, dtype=i64),
    )
    load, csum, link_gen = np.zeros(L), np.zeros(L), np.full(L, -1, dtype=i64)
    rstate = np.array([-1] + [0] * 13, dtype=i64)
    rp = nb_repair.repair_scratch(L, F, fe.size)
    out = []
    for mark, (gone, came) in enumerate(events):
        act[gone] = False
        act[came] = True
        arr_mark[came] = mark
        a = np.flatnonzero(act)
        act_list[: a.size], g[: gone.size], c[: came.size] = a, gone, came
        backing_off = rstate[0] >= 0 and rstate[6] > 0
        n_re, full = incremental.resolve_incremental(
            act, arr_mark, mark, act_list, a.size, g, gone.size, c, came.size, fe_lo, fe_hi, le.astype(i64), coef,
            cap, 0, demand, weight, rate, *per_flow, fs, uf, seed, resid, rstamp, load, csum, link_gen, rstate,
            par_share, 8, False, 1.0, 1.0, F, np.array([4.0, 8.0, 0.0, 0.0]), rp, 0, F, True, True, par_levels,
            bool((weight != 1.0).any()), False, True, None, one_walk,
        )  # fmt: skip
        tops = [
            rp.top_flow[rp.adj_off[lk] : rp.adj_off[lk] + max(rp.top_n[lk], 0)].tolist() for lk in range(L)
        ]
        n_log = rstate[0]
        out.append((n_re, full, backing_off, per_flow[1][:n_re].tolist(), rate.tobytes(), per_flow[4][:n_log].tolist(),
                    per_flow[5][:n_log].tobytes(), resid.tobytes(), load.tobytes(), uf.tobytes(), rp.sat.tobytes(),
                    rp.top_n.tolist(), tops, rstate[3]))  # fmt: skip
    return out


@pytest.mark.parametrize("par_share, par_levels", [(1.0, NO_GATE), (0.0, 1)])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_sequences())
def test_one_walk_is_bit_for_bit_the_two_walks(par_share, par_levels, case):
    # issue-28zo: the components and the give-back in one walk while the component rule backs off, and the
    # loads from the heap fill's link rows, leave every rate, the log, the residuals, loads, sat and top lists
    # bit for bit as the walks of issue-28zk do, at every event (heap fills only; and the parallel rule where
    # the flows held one level, after which the loads walk the flows as before)
    one = _walk_snapshots(case, True, par_share, par_levels)
    two = _walk_snapshots(case, False, par_share, par_levels)
    assert len(one) == len(two)
    for k, (x, y) in enumerate(zip(one, two, strict=True)):
        assert x == y, k


def test_one_walk_runs_where_the_component_rule_backs_off():
    # six flows through one shared link (one component: the rule keeps no flow and backs off), each also on
    # its own NIC link; flows leave and come back at every event (restart solves, not repairs). The one walk
    # is taken at the solves made while the rule backs off, and every snapshot equals the two walks' and the
    # rates a full numpy re-solve's
    from ainet_gym.sim.allocator import max_min_fair

    F, L = 6, 7
    inc = np.zeros((F, L))
    inc[:, 0] = 1.0
    inc[np.arange(F), 1 + np.arange(F)] = 1.0
    cap = np.array([6e9, 0.5e9, 1e9, 2e9, 3e9, 4e9, 5e9])
    demand, weight = np.full(F, np.inf), np.ones(F)
    events = [(np.zeros(0, dtype=np.int64), np.arange(F))]
    for i in range(12):
        f = np.array([i % F])
        events.append((f, f))  # completed and started again: a restart solve
    case = (cap, inc, demand, weight, events)
    one = _walk_snapshots(case, True, 1.0, NO_GATE)
    assert one == _walk_snapshots(case, False, 1.0, NO_GATE)
    assert sum(s[2] for s in one) >= 3  # solves made while the rule backed off: the one walk ran
    rate = np.frombuffer(one[-1][4])
    want = max_min_fair(inc, cap, demand, backend="numpy")
    assert max_rel_diff(rate, want) <= RTOL


@njit
def _sort_work_both(refill, dense):  # pragma: no cover - compiled
    """:func:`incremental._inc_sort_work` of ``refill`` (in flow order) and the work the sort it stands for
    counts, with the sort's output (compiled: the steps have no Python wrappers)."""
    n = refill.shape[0]
    skip = incremental._inc_sort_work(dense, refill, n)
    out = refill.copy()
    ran = incremental._inc_flow_order(out, n) if dense else incremental._inc_sort_flows(out, n)
    return skip, ran, out


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(0, 5000), min_size=2, max_size=300), st.booleans())
def test_a_restart_solve_in_flow_order_counts_the_sort_it_skips(ids, dense):
    # issue-28zp: a restart solve at which nothing arrived gets its flows from the walk in flow order and does
    # not sort them again, but counts the work the sort (or, dense, the parallel rule's flow order) would have
    # counted, so the switch's cost model and the lazy_work counter are unchanged: on sorted distinct ids the
    # count from the first and the last id equals the sort's, and the sort leaves them as they were
    refill = np.array(sorted(ids), dtype=np.int64)
    skip, ran, out = _sort_work_both(refill, dense)
    assert skip == ran
    assert np.array_equal(out, refill)
