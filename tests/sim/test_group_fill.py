"""The fill over groups of flows (issue-28zm, ``settings.GROUP_FILL``, :mod:`~ainet_gym.sim.backends.numba.
groupfill`): for any grouping of the flows it is the progressive fill of :func:`fill_levels` (rates to
1e-9 relative), and the lazy kernel with it gives what it gives without it over random event sequences."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from _strategies import event_scenarios, random_splits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ainet_gym import load_scenario
from ainet_gym.checks.parity import max_rel_diff
from ainet_gym.sim.backends.numba import fill, groupfill, jit
from ainet_gym.sim.backends.numba import lazy as nb_lazy
from ainet_gym.sim.backends.numba import settings as nb_settings
from ainet_gym.sim.world import FabricWorld

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="numba is not installed")

RTOL = 1e-9
FIELDS = ("iterations", "step_time_s", "comm_time_s", "link_bytes", "stalled_transfers", "gpu_utilization")


@st.composite
def grouped_instances(draw):
    """Flows on links (a few entries each, coefficients 0.5-2, some flows without entries), capacities,
    weights, demands (finite for some) and previous levels drawn from a few values (ties: groups), in a
    random order."""
    n_f, n_l = draw(st.integers(1, 40)), draw(st.integers(1, 10))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    fe_lo, fe_hi, el, ec = np.zeros(n_f, np.int64), np.zeros(n_f, np.int64), [], []
    for f in range(n_f):
        fe_lo[f] = len(el)
        k = int(rng.integers(0 if rng.random() < 0.05 else 1, min(n_l, 4) + 1))
        for lk in rng.choice(n_l, size=k, replace=False):
            el.append(int(lk))
            ec.append(float(rng.choice([1.0, 0.5, 2.0])))
        fe_hi[f] = len(el)
    cap = rng.choice([1.0, 2.0, 3.0, 10.0, np.inf], size=n_l, p=[0.3, 0.3, 0.2, 0.15, 0.05])
    w = rng.choice([1.0, 2.0, 0.5, 7.5], size=n_f) if draw(st.booleans()) else np.ones(n_f)
    demand = np.where(rng.random(n_f) < 0.2, rng.choice([0.1, 0.5, 1.0], size=n_f), np.inf)
    flows = rng.permutation(n_f).astype(np.int64)
    old = rng.choice([0.0, 0.25, 0.5, 1.0], size=n_f) * w[flows]
    return flows, old, fe_lo, fe_hi, np.array(el, np.int64), np.array(ec), cap, w, demand


def _fill(fn, flows, extra, fe_lo, fe_hi, el, ec, cap, w, demand):
    n_f = fe_lo.size
    s = fill.fill_scratch(cap.size, n_f, max(el.size, 1), 0)
    rate, resid = np.zeros(n_f), cap.copy()
    out_f, out_l = np.empty(n_f, np.int64), np.empty(n_f)
    fn(flows, n_f, *extra, fe_lo, fe_hi, el, ec, w, demand, resid, rate, out_f, out_l, s, 0, 0)
    return rate, resid, out_f, out_l, s


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grouped_instances())
def test_group_fill_equals_the_flow_by_flow_fill(case):
    flows, old, fe_lo, fe_hi, el, ec, cap, w, demand = case
    r1, res1, _, _, _ = _fill(fill.fill_levels, flows, (), fe_lo, fe_hi, el, ec, cap, w, demand)
    r2, res2, of2, ol2, s = _fill(groupfill.group_fill, flows, (old,), fe_lo, fe_hi, el, ec, cap, w, demand)
    assert np.array_equal(np.isinf(r1), np.isinf(r2))
    assert max_rel_diff(r1, r2) <= RTOL
    assert np.array_equal(np.isinf(res1), np.isinf(res2))
    fin = np.isfinite(res1)
    tol = 1e-12 * max(1.0, float(np.nanmax(cap[np.isfinite(cap)], initial=1.0)))
    np.testing.assert_allclose(res2[fin], res1[fin], rtol=RTOL, atol=tol)
    assert np.array_equal(np.sort(of2), np.arange(fe_lo.size))  # every flow frozen once
    lv = ol2[np.isfinite(ol2)]
    assert np.all(lv[1:] >= lv[:-1] * (1 - 1e-12))  # by level (round-off between equal levels)
    st_ = dict(zip(groupfill.GROUP_STATS, s.grp_stat, strict=True))
    assert st_["fills"] == 1 and st_["groups"] <= fe_lo.size and st_["entries"] == el.size


def test_a_group_splits_where_only_some_members_cross_the_link_that_fills():
    # one group of 3 flows at the previous level 1: flows 0 and 1 cross link 0 (capacity 1), flow 2 does not;
    # all three cross link 1 (capacity 10): link 0 fills at 0.5 and freezes 0 and 1 (a split), flow 2 rises to
    # 9 on link 1
    fe_lo, fe_hi = np.array([0, 2, 4], np.int64), np.array([2, 4, 5], np.int64)
    el, ec = np.array([0, 1, 0, 1, 1], np.int64), np.ones(5)
    cap, w, demand = np.array([1.0, 10.0]), np.ones(3), np.full(3, np.inf)
    flows = np.arange(3, dtype=np.int64)
    old = np.ones(3)
    rate, resid, _, _, s = _fill(groupfill.group_fill, flows, (old,), fe_lo, fe_hi, el, ec, cap, w, demand)
    np.testing.assert_allclose(rate, [0.5, 0.5, 9.0])
    np.testing.assert_allclose(resid, [0.0, 0.0], atol=1e-12)
    st_ = dict(zip(groupfill.GROUP_STATS, s.grp_stat, strict=True))
    assert (st_["groups"], st_["pairs"], st_["splits"], st_["split_flows"], st_["whole"]) == (1, 2, 1, 2, 1)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grouped_instances(), st.integers(0, 2**31 - 1), st.integers(2, 6))
def test_kept_group_fill_equals_the_flow_by_flow_fill_over_a_sequence_of_fills(case, seed, n_fills):
    # issue-28zn: one store kept over several fills of random subsets of the flows (each fill's previous
    # levels the last rates, as the lazy kernel's restart fills see them; sometimes random ones), each fill
    # against fill_levels of the same flows on the same capacities
    _, old, fe_lo, fe_hi, el, ec, cap, w, demand = case
    n_f = fe_lo.size
    rng = np.random.default_rng(seed)
    s = fill.fill_scratch(cap.size, n_f, max(el.size, 1), n_f)
    last = old.copy()
    for t in range(n_fills):
        flows = np.flatnonzero(rng.random(n_f) < (1.0 if t % 3 == 0 else 0.7)).astype(np.int64)
        if flows.size == 0:
            continue
        prev = last[flows] if rng.random() < 0.8 else rng.choice([0.0, 0.25, 0.5], size=flows.size) * w[flows]
        scale = rng.choice([0.5, 1.0, 1.0, 2.0])  # capacities that move: levels and bottlenecks change
        r1, r2 = np.zeros(n_f), np.zeros(n_f)
        res1, res2 = cap * scale, cap * scale
        o1, o2 = (np.empty(flows.size, np.int64), np.empty(flows.size)), (np.empty(flows.size, np.int64), np.empty(flows.size))  # fmt: skip
        fill.fill_levels(flows, flows.size, fe_lo, fe_hi, el, ec, w, demand, res1, r1, *o1, s, 2 * t, 0)
        groupfill.group_fill_kept(flows, flows.size, prev, fe_lo, fe_hi, el, ec, w, demand, res2, r2, *o2, s,
                                  2 * t + 1, 0)  # fmt: skip
        assert np.array_equal(np.isinf(r1[flows]), np.isinf(r2[flows]))
        assert max_rel_diff(r1[flows], r2[flows]) <= RTOL
        fin = np.isfinite(res1)
        tol = 1e-12 * max(1.0, float(np.nanmax(cap[np.isfinite(cap)], initial=1.0)))
        np.testing.assert_allclose(res2[fin], res1[fin], rtol=RTOL, atol=tol)
        assert np.array_equal(np.sort(o2[0]), flows)  # every flow frozen once
        assert np.all(s.keep.fa[flows] == -1)
        last[flows] = r2[flows]
    st_ = dict(zip(groupfill.KEEP_STATS, s.keep.st[4:14], strict=True))
    assert st_["fallbacks"] == 0


def test_kept_groups_are_taken_whole_at_the_next_fill():
    # three flows at one level on one link (capacity 3) and each on a link of its own (capacity 10): the first
    # fill builds one group of 3 (levels 1, bitwise equal), the second takes it from the store intact
    fe_lo, fe_hi = np.array([0, 2, 4], np.int64), np.array([2, 4, 6], np.int64)
    el, ec = np.array([0, 1, 0, 2, 0, 3], np.int64), np.ones(6)
    cap, w, demand = np.array([3.0, 10.0, 10.0, 10.0]), np.ones(3), np.full(3, np.inf)
    flows = np.arange(3, dtype=np.int64)
    s = fill.fill_scratch(4, 3, 6, 3)
    out = (np.empty(3, np.int64), np.empty(3))
    for t in range(2):
        rate, resid = np.zeros(3), cap.copy()
        groupfill.group_fill_kept(
            flows, 3, np.ones(3), fe_lo, fe_hi, el, ec, w, demand, resid, rate, *out, s, t, 0
        )
        np.testing.assert_allclose(rate, [1.0, 1.0, 1.0])
    st_ = dict(zip(groupfill.KEEP_STATS, s.keep.st[4:14], strict=True))
    assert (st_["fills"], st_["intact"], st_["intact_pairs"], st_["rebuilt"], st_["built"]) == (2, 1, 4, 3, 1)


@contextlib.contextmanager
def group_fill_mode() -> Iterator[dict]:
    """The lazy kernel with its heap fills over groups or flow by flow as ``mode["groups"]`` says at each call
    (the departure repair and the progress at their defaults)."""
    lazy = nb_lazy.run_interval_lazy
    mode = {"groups": False, "keep": False}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            nb_lazy,
            "run_interval_lazy",
            # (options, the last argument: LazyOptions; grp_fill its last field: 2 kept, 1 groups, None off,
            # each a signature of its own: None compiles the kernel without the group fills, issue-31ze2)
            lambda *a: lazy(*a[:-1], (*a[-1][:4], 2 if mode["keep"] else 1 if mode["groups"] else None)),
        )
        yield mode


def _world(sc: object, seeds: list[int]) -> FabricWorld:
    w = FabricWorld(sc, len(seeds), backend="numba")
    w.reset(seeds=seeds)
    w.sim.incremental_min_flows = 0  # the lazy kernel from the first flow on
    w.sim.parallel_share = 1.0  # every solve a heap fill: the path the group fill replaces
    return w


def assert_same_run(sc: object, seeds: list[int], splits: list, keep: bool = False) -> None:
    """Step a flow-by-flow world, a group-fill world (``keep``: with its groups kept from solve to solve,
    issue-28zn) and the numpy reference through ``splits`` (None: the default split) and compare the figures
    after every interval."""
    ref = FabricWorld(sc, len(seeds), backend="numpy")
    ref.reset(seeds=seeds)
    with group_fill_mode() as mode:
        worlds = [_world(sc, seeds), _world(sc, seeds)]
        for s in splits:
            res = []
            for groups, w in zip((False, True), worlds, strict=True):
                mode["groups"], mode["keep"] = groups, groups and keep
                res.append(w.step(w.default_split() if s is None else s))
            r_ref = ref.step(ref.default_split() if s is None else s)
            for f in FIELDS:
                assert max_rel_diff(getattr(res[0], f), getattr(res[1], f)) <= RTOL, f
                assert max_rel_diff(getattr(r_ref, f), getattr(res[1], f)) <= RTOL, f
            assert max_rel_diff(worlds[0].sim.state.rem, worlds[1].sim.state.rem) <= RTOL, "bytes left"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    event_scenarios(name="random-gfill", weights=(0.25, 1.0, 2.0, 7.5), storage=True),
    st.integers(0, 3),
    st.integers(0, 2**31 - 1),
)
def test_group_fill_equals_the_flow_fill_on_random_event_sequences(scenario, seed, split_seed):
    sc = load_scenario(scenario)
    assert_same_run(sc, [seed], random_splits(sc, seed, split_seed))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    event_scenarios(name="random-gkeep", weights=(0.25, 1.0, 2.0, 7.5), storage=True),
    st.integers(0, 3),
    st.integers(0, 2**31 - 1),
)
def test_kept_group_fill_equals_the_flow_fill_on_random_event_sequences(scenario, seed, split_seed):
    sc = load_scenario(scenario)
    assert_same_run(sc, [seed], random_splits(sc, seed, split_seed), keep=True)


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("name", ["moe-alltoall-skewed", "multi-tenant-churn", "storage-checkpoint"])
def test_group_fill_equals_the_flow_fill_on_named_scenarios(name, keep):
    assert_same_run(load_scenario(name), [0, 1], [None] * 4, keep=keep)


def test_group_fill_settings_are_bools():
    assert isinstance(nb_settings.GROUP_FILL, bool)
    assert isinstance(nb_settings.GROUP_KEEP, bool)


def _globals_numba_types(fn: object, **arg_types: object) -> set[str]:
    """The global names left in the IR of compiled ``fn`` after numba's dead-branch pruning (which runs before
    typing: what is pruned is never typed, compiled or cached) for these argument types (int64 the rest)."""
    import inspect

    from numba import types
    from numba.core import ir
    from numba.core.analysis import dead_branch_prune
    from numba.core.compiler import run_frontend

    py = fn.py_func  # type: ignore[attr-defined]
    func_ir = run_frontend(py)
    params = inspect.signature(py).parameters
    dead_branch_prune(func_ir, [arg_types.get(n, types.int64) for n in params])
    stmts = (s for b in func_ir.blocks.values() for s in b.body)
    return {s.value.name for s in stmts if isinstance(s, ir.Assign) and isinstance(s.value, ir.Global)}


def test_the_group_fills_are_not_compiled_when_off():
    # issue-31ze2: grp_fill None (what the backend passes with GROUP_FILL and GROUP_KEEP off) leaves the group
    # fills out of the solve's fill before typing; an int (the run-time value 0, 1 or 2 alike) keeps both in
    from numba import types

    from ainet_gym.sim.backends.numba import incremental

    fills = {"group_fill", "group_fill_kept"}
    assert not fills & _globals_numba_types(incremental._inc_fill, grp_fill=types.none)
    assert fills <= _globals_numba_types(incremental._inc_fill, grp_fill=types.int64)
    assert "fill_levels" in _globals_numba_types(incremental._inc_fill, grp_fill=types.none)


def test_the_backend_passes_no_group_fill_by_default():
    # the lazy kernel's options as the backend builds them at the defaults: grp_fill None (the kernel without
    # the group fills), 1 with GROUP_FILL, 2 with GROUP_KEEP (which takes precedence)
    seen = []
    lazy = nb_lazy.run_interval_lazy
    sc = load_scenario("moe-alltoall-skewed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nb_lazy, "run_interval_lazy", lambda *a: (seen.append(a[-1][-1]), lazy(*a))[1])
        for gfill, gkeep in ((False, False), (True, False), (True, True), (False, True)):
            mp.setattr(nb_settings, "GROUP_FILL", gfill)
            mp.setattr(nb_settings, "GROUP_KEEP", gkeep)
            n = len(seen)
            w = _world(sc, [0])
            w.step(w.default_split())
            assert len(seen) > n and set(seen[n:]) == {2 if gkeep else 1 if gfill else None}, (gfill, gkeep)
