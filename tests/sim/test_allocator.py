"""Tests of the max-min fair allocator (ainet_gym.sim.allocator) against hand-computed textbook answers,
a pure-Python progressive-filling reference, and the defining invariants of max-min fairness."""

from __future__ import annotations

import re

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ainet_gym.sim.allocator import max_min_fair, max_min_fair_batched, solve_coo
from ainet_gym.sim.reference import max_min_fair_global_min, max_min_fair_reference

INF = np.inf
RTOL = 1e-9
ATOL = 1e-12


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------


def assert_rates_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(np.isinf(actual), np.isinf(expected))
    fin = np.isfinite(expected)
    np.testing.assert_allclose(actual[fin], expected[fin], rtol=RTOL, atol=ATOL)


def check_invariants(inc, capacity, rates, demand=None, weights=None) -> None:
    """Feasibility, demand caps and the bottleneck property that characterises max-min fairness."""
    inc = np.asarray(inc.toarray() if sp.issparse(inc) else inc, dtype=float)
    cap = np.asarray(capacity, dtype=float)
    n_flows, _ = inc.shape
    dem = np.full(n_flows, INF) if demand is None else np.asarray(demand, dtype=float)
    w = np.ones(n_flows) if weights is None else np.asarray(weights, dtype=float)
    assert rates.dtype == np.float64 and rates.shape == (n_flows,)
    assert not np.isnan(rates).any()
    assert (rates >= 0).all(), "negative rate"
    assert (rates <= dem).all(), "rate above demand"
    crosses = inc > 0
    unconstrained = np.isinf(rates)
    # an infinite rate only for flows without a demand whose links are all infinite
    assert np.isinf(dem[unconstrained]).all()
    assert np.isinf(cap[crosses[unconstrained].any(axis=0)]).all()
    finite_rates = np.where(unconstrained, 0.0, rates)
    load = inc.T @ finite_rates
    fin_cap = np.isfinite(cap)
    assert (load[fin_cap] <= cap[fin_cap] * (1 + RTOL) + ATOL).all(), "link above capacity"
    saturated = fin_cap & (load >= cap * (1 - RTOL) - ATOL)
    level = finite_rates / w
    # per link, the largest level among the flows crossing it
    max_level = np.where(crosses, level[:, None], -INF).max(axis=0, initial=-INF)
    for f in np.flatnonzero(~unconstrained & (rates < dem * (1 - RTOL) - ATOL)):
        ok = crosses[f] & saturated & (level[f] >= max_level * (1 - RTOL) - ATOL)
        assert ok.any(), f"flow {f} (rate {rates[f]}) has no bottleneck link"


def to_coo(inc: np.ndarray):
    f, lk = np.nonzero(inc)
    return f, lk, inc[f, lk]


def random_instance(rng: np.random.Generator, n_flows: int, n_links: int, per_flow: int):
    """A random sparse instance: each flow crosses `per_flow` distinct links, some coefficients 2 or 1/2."""
    ef = np.repeat(np.arange(n_flows), per_flow)
    el = np.argsort(rng.random((n_flows, n_links)), axis=1)[:, :per_flow].ravel()
    ec = rng.choice([1.0, 1.0, 1.0, 2.0, 0.5], ef.size)
    cap = rng.choice([10.0, 40.0, 100.0], n_links) * rng.choice([1.0, 1.0, 0.5], n_links)
    cap[rng.random(n_links) < 0.02] = 0.0
    return ef, el, ec, cap


# ----------------------------------------------------------------------------------------------------------
# textbook examples (answers computed by hand)
# ----------------------------------------------------------------------------------------------------------


def test_bertsekas_gallager_series_links():
    # Bertsekas & Gallager, Data Networks, max-min flow control: 3 links of capacity 1 in series.
    # Flow 0 crosses all three; flows 1, 2, 3 cross one link each. Every link has 2 flows, so each
    # link's fair share is 1/2 and every flow gets 1/2.
    inc = [[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    rates = max_min_fair(inc, [1.0, 1.0, 1.0])
    assert_rates_equal(rates, [0.5, 0.5, 0.5, 0.5])
    check_invariants(np.array(inc), [1.0, 1.0, 1.0], rates)


def test_bertsekas_gallager_unequal_capacities():
    # Same topology, capacities 1, 2, 3. Shares: link 0: 1/2, link 1: 2/2 = 1, link 2: 3/2.
    # Link 0 is the bottleneck: flows 0 and 1 get 1/2. Link 1 then has 2 - 1/2 = 3/2 left for flow 2,
    # link 2 has 3 - 1/2 = 5/2 left for flow 3.
    inc = [[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    rates = max_min_fair(inc, [1.0, 2.0, 3.0])
    assert_rates_equal(rates, [0.5, 0.5, 1.5, 2.5])


def test_bertsekas_gallager_two_levels():
    # Sessions 0, 1, 2 share link A (capacity 1); sessions 0 and 3 share link B (capacity 1); session 4
    # is alone on link C (capacity 1). Shares: A 1/3, B 1/2, C 1. A is the bottleneck of sessions
    # 0, 1, 2 (1/3 each); B then has 1 - 1/3 = 2/3 left for session 3; session 4 gets all of C.
    inc = [[1, 1, 0], [1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    rates = max_min_fair(inc, [1.0, 1.0, 1.0])
    assert_rates_equal(rates, [1 / 3, 1 / 3, 1 / 3, 2 / 3, 1.0])
    check_invariants(np.array(inc), [1.0, 1.0, 1.0], rates)


def test_keshav_single_link_demands():
    # Keshav, An Engineering Approach to Computer Networking: capacity 10, demands 2, 2.6, 4, 5.
    # Fair share 10/4 = 2.5 >= 2: flow 0 gets 2. Left 8 over 3 = 2.67 >= 2.6: flow 1 gets 2.6.
    # Left 5.4 over 2 = 2.7 < 4, 5: flows 2 and 3 get 2.7.
    rates = max_min_fair(np.ones((4, 1)), [10.0], demand=[2.0, 2.6, 4.0, 5.0])
    assert_rates_equal(rates, [2.0, 2.6, 2.7, 2.7])
    check_invariants(np.ones((4, 1)), [10.0], rates, demand=[2.0, 2.6, 4.0, 5.0])


def test_demand_equal_to_fair_share():
    # capacity 4, demands 2 and inf: the share 2 equals the first demand; both get 2.
    assert_rates_equal(max_min_fair([[1], [1]], [4.0], demand=[2.0, INF]), [2.0, 2.0])


def test_weighted_single_link():
    # weights 1, 2, 3 on capacity 6: level 6 / (1 + 2 + 3) = 1, rates = weights.
    rates = max_min_fair(np.ones((3, 1)), [6.0], weights=[1.0, 2.0, 3.0])
    assert_rates_equal(rates, [1.0, 2.0, 3.0])


def test_weighted_multi_link():
    # Link A (cap 6): flow 0 (w 1), flow 1 (w 2). Link B (cap 4): flow 1 (w 2), flow 2 (w 1).
    # Levels: A 6/3 = 2, B 4/3. B is the bottleneck: flow 1 rate 2 * 4/3 = 8/3, flow 2 rate 4/3.
    # A has 6 - 8/3 = 10/3 left for flow 0 (level 10/3 > 4/3).
    inc = [[1, 0], [1, 1], [0, 1]]
    w = [1.0, 2.0, 1.0]
    rates = max_min_fair(inc, [6.0, 4.0], weights=w)
    assert_rates_equal(rates, [10 / 3, 8 / 3, 4 / 3])
    check_invariants(np.array(inc), [6.0, 4.0], rates, weights=w)


def test_weighted_with_demand():
    # Capacity 12, weights 1, 1, 2, demand of flow 2 = 3 (level 1.5). Level 12/4 = 3 > 1.5, so flow 2
    # gets its demand 3; the rest 9 is split by flows 0 and 1: 4.5 each.
    rates = max_min_fair(np.ones((3, 1)), [12.0], demand=[INF, INF, 3.0], weights=[1.0, 1.0, 2.0])
    assert_rates_equal(rates, [4.5, 4.5, 3.0])


def test_coefficient_two_crosses_link_twice():
    # Link 0 (cap 6): flow 0 crosses it twice (coef 2), flow 1 once. Level t: 2t + t = 6, t = 2.
    assert_rates_equal(max_min_fair([[2.0], [1.0]], [6.0]), [2.0, 2.0])
    # Link 0 (cap 4): flow 0 coef 2, flow 1 coef 1; flow 1 also crosses link 1 (cap 1).
    # Shares: link 0 4/3, link 1 1: flow 1 = 1, then flow 0 = (4 - 1) / 2 = 1.5.
    rates = max_min_fair([[2.0, 0.0], [1.0, 1.0]], [4.0, 1.0])
    assert_rates_equal(rates, [1.5, 1.0])


def test_fractional_split_flow():
    # Flow 0 is split evenly over links 0 and 1 (coef 1/2 each), flow 1 uses link 0 only; capacity 3 each.
    # Shares: link 0: 3 / 1.5 = 2, link 1: 3 / 0.5 = 6. Link 0 is the bottleneck: both get 2.
    assert_rates_equal(max_min_fair([[0.5, 0.5], [1.0, 0.0]], [3.0, 3.0]), [2.0, 2.0])


def test_failed_link():
    # Link 0 has failed (capacity 0): flow 0, which crosses it, gets 0; flow 1 takes all of link 1.
    inc = [[1, 1], [0, 1]]
    rates = max_min_fair(inc, [0.0, 10.0])
    assert_rates_equal(rates, [0.0, 10.0])
    check_invariants(np.array(inc), [0.0, 10.0], rates)


def test_unconstrained_flows():
    # A flow with no link and no demand is unconstrained (inf); with a demand it gets the demand.
    # Infinite-capacity links do not constrain either.
    inc = [[0, 0], [0, 0], [0, 1], [0, 1], [1, 0]]
    rates = max_min_fair(inc, [4.0, INF], demand=[INF, 3.0, 5.0, INF, INF])
    assert_rates_equal(rates, [INF, 3.0, 5.0, INF, 4.0])
    check_invariants(np.array(inc), [4.0, INF], rates, demand=[INF, 3.0, 5.0, INF, INF])


def test_zero_demand():
    assert_rates_equal(max_min_fair([[1], [1]], [4.0], demand=[0.0, INF]), [0.0, 4.0])


def test_empty_inputs():
    assert max_min_fair(np.zeros((0, 0)), np.zeros(0)).shape == (0,)
    assert max_min_fair(np.zeros((0, 3)), [1.0, 2.0, 3.0]).shape == (0,)
    assert_rates_equal(max_min_fair(np.zeros((2, 0)), np.zeros(0), demand=[1.0, INF]), [1.0, INF])
    rates, its = solve_coo([], [], [], [], 0, return_iterations=True)
    assert rates.shape == (0,) and its == 0


def test_result_is_float64_and_inputs_untouched():
    cap = np.array([2.0, 2.0])
    inc = np.array([[1, 1], [1, 0]], dtype=np.int64)
    rates = max_min_fair(inc, cap)
    assert rates.dtype == np.float64
    np.testing.assert_array_equal(cap, [2.0, 2.0])


# ----------------------------------------------------------------------------------------------------------
# property tests against the pure-Python reference
# ----------------------------------------------------------------------------------------------------------

COEFS = st.sampled_from([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 0.5, 0.25, 1.5])
CAPS = st.one_of(st.sampled_from([0.0, 1.0, 2.0, 3.0, 10.0, INF]), st.floats(0.01, 100.0))
DEMANDS = st.one_of(st.sampled_from([INF, INF, 0.0, 0.5, 1.0, 2.0]), st.floats(0.0, 50.0))
WEIGHTS = st.one_of(st.sampled_from([1.0, 2.0, 3.0, 0.5]), st.floats(0.1, 10.0))


@st.composite
def instances(draw, max_flows: int = 30, max_links: int = 15):
    n_flows = draw(st.integers(0, max_flows))
    n_links = draw(st.integers(0, max_links))
    inc = draw(hnp.arrays(np.float64, (n_flows, n_links), elements=COEFS))
    cap = draw(hnp.arrays(np.float64, (n_links,), elements=CAPS))
    demand = draw(st.none() | hnp.arrays(np.float64, (n_flows,), elements=DEMANDS))
    weights = draw(st.none() | hnp.arrays(np.float64, (n_flows,), elements=WEIGHTS))
    return inc, cap, demand, weights


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_agrees_with_reference_and_invariants(backend, instance):
    # both solvers: the compiled progressive filling (numba) and the numpy parallel rule
    inc, cap, demand, weights = instance
    rates = max_min_fair(inc, cap, demand=demand, weights=weights, backend=backend)
    assert_rates_equal(rates, max_min_fair_reference(inc, cap, demand=demand, weights=weights))
    check_invariants(inc, cap, rates, demand=demand, weights=weights)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_compiled_fill_equals_numpy_on_larger_instances(seed):
    # fabric-like sizes (hundreds of flows, many ties of equal shares): the two solvers agree to 1e-9
    rng = np.random.default_rng(seed)
    ef, el, ec, cap = random_instance(rng, int(rng.integers(50, 400)), int(rng.integers(5, 60)), 3)
    n = int(ef.max()) + 1
    inc = sp.coo_matrix((ec, (ef, el)), shape=(n, cap.size))
    demand = np.where(rng.random(n) < 0.2, rng.uniform(0.0, 20.0, n), INF)
    weights = rng.choice([1.0, 2.0, 0.5], n)
    a = max_min_fair(inc, cap, demand=demand, weights=weights, backend="numba")
    b = max_min_fair(inc, cap, demand=demand, weights=weights, backend="numpy")
    assert_rates_equal(a, b)


def test_backend_keyword_and_variable(monkeypatch):
    inc, cap = [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]], [1.0, 3.0]
    expected = [0.5, 0.5, 2.5]
    for be in ("numba", "numpy"):
        assert max_min_fair(inc, cap, backend=be).tolist() == expected
        monkeypatch.setenv("AINET_GYM_BACKEND", be)
        assert max_min_fair_batched([np.asarray(inc)], [cap])[0].tolist() == expected
    with pytest.raises(ValueError, match="backend = 'cuda': unknown backend; allowed: numba, numpy"):
        max_min_fair(inc, cap, backend="cuda")


@settings(max_examples=100, deadline=None)
@given(instances())
def test_global_min_agrees_with_solve_coo(instance):
    inc, cap, demand, weights = instance
    f, lk, c = to_coo(inc)
    fast, its_fast = solve_coo(f, lk, c, cap, inc.shape[0], weights, demand, return_iterations=True)
    slow, its_slow = max_min_fair_global_min(f, lk, c, cap, inc.shape[0], weights, demand, True)
    assert_rates_equal(fast, slow)
    assert its_fast <= max(its_slow, 1)


@settings(max_examples=100, deadline=None)
@given(instances())
def test_sparse_equals_dense(instance):
    inc, cap, demand, weights = instance
    dense = max_min_fair(inc, cap, demand=demand, weights=weights)
    for matrix in (sp.csr_matrix(inc), sp.csc_array(inc), sp.coo_matrix(inc)):
        np.testing.assert_array_equal(max_min_fair(matrix, cap, demand=demand, weights=weights), dense)


@settings(max_examples=100, deadline=None)
@given(instances(), st.randoms(use_true_random=False))
def test_solve_coo_duplicates_and_order(instance, rnd):
    # Splitting each coefficient into duplicated entries and shuffling them must not change the result.
    inc, cap, demand, weights = instance
    f, lk, c = to_coo(inc)
    expected = solve_coo(f, lk, c, cap, inc.shape[0], weights, demand)
    parts = np.array([rnd.choice([1, 1, 2, 3]) for _ in range(c.size)], dtype=np.intp)
    f2, lk2 = np.repeat(f, parts), np.repeat(lk, parts)
    c2 = np.repeat(c / parts, parts)
    order = np.array(rnd.sample(range(c2.size), c2.size), dtype=np.intp)
    got = solve_coo(f2[order], lk2[order], c2[order], cap, inc.shape[0], weights, demand)
    assert_rates_equal(got, expected)


def test_sparse_duplicates_and_explicit_zeros():
    # a COO matrix with duplicate entries means their sum; explicit zeros mean "does not cross"
    m = sp.coo_matrix(([1.0, 1.0, 1.0, 0.0], ([0, 0, 1, 1], [0, 0, 0, 1])), shape=(2, 2))
    # flow 0 has coefficient 2 on link 0: 2t + t = 6, t = 2; flow 1 also "on" link 1 with a 0 entry
    assert_rates_equal(max_min_fair(m, [6.0, 0.0]), [2.0, 2.0])


def test_larger_instance_against_global_min():
    rng = np.random.default_rng(7)
    ef, el, ec, cap = random_instance(rng, 3000, 400, 5)
    weights = rng.choice([1.0, 2.0, 4.0], 3000)
    demand = np.where(rng.random(3000) < 0.2, rng.uniform(0.1, 3.0, 3000), INF)
    fast, its_fast = solve_coo(ef, el, ec, cap, 3000, weights, demand, return_iterations=True)
    slow, its_slow = max_min_fair_global_min(ef, el, ec, cap, 3000, weights, demand, return_iterations=True)
    assert_rates_equal(fast, slow)
    assert its_fast < its_slow / 5
    inc = sp.coo_matrix((ec, (ef, el)), shape=(3000, 400))
    check_invariants(inc, cap, fast, demand=demand, weights=weights)


# ----------------------------------------------------------------------------------------------------------
# batched form
# ----------------------------------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 5), st.integers(0, 8), st.integers(0, 5), st.data())
def test_batched_stacked_equals_loop(batch, n_flows, n_links, data):
    inc = data.draw(hnp.arrays(np.float64, (batch, n_flows, n_links), elements=COEFS))
    cap = data.draw(hnp.arrays(np.float64, (batch, n_links), elements=CAPS))
    demand = data.draw(st.none() | hnp.arrays(np.float64, (batch, n_flows), elements=DEMANDS))
    weights = data.draw(st.none() | hnp.arrays(np.float64, (batch, n_flows), elements=WEIGHTS))
    rates = max_min_fair_batched(inc, cap, demand=demand, weights=weights)
    assert isinstance(rates, np.ndarray) and rates.shape == (batch, n_flows)
    for b in range(batch):
        single = max_min_fair(
            inc[b],
            cap[b],
            demand=None if demand is None else demand[b],
            weights=None if weights is None else weights[b],
        )
        np.testing.assert_array_equal(rates[b], single)


def test_batched_stacked_shared_capacity():
    inc = np.array([[[1.0, 0.0], [1.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]])
    rates = max_min_fair_batched(inc, [2.0, 3.0], demand=[INF, 0.5])
    # instance 0: link 0 (cap 2) shared, flow 1 capped at 0.5 -> flow 0 gets 1.5
    # instance 1: link 1 (cap 3) shared, flow 1 capped at 0.5 -> flow 0 gets 2.5
    np.testing.assert_allclose(rates, [[1.5, 0.5], [2.5, 0.5]])


@settings(max_examples=50, deadline=None)
@given(st.lists(instances(max_flows=8, max_links=5), max_size=5), st.data())
def test_batched_list_equals_loop(items, data):
    incs = [inc if data.draw(st.booleans()) else sp.csr_matrix(inc) for inc, _, _, _ in items]
    caps = [cap for _, cap, _, _ in items]
    demands = [d for _, _, d, _ in items]
    weights = [w for _, _, _, w in items]
    rates = max_min_fair_batched(incs, caps, demand=demands, weights=weights)
    assert isinstance(rates, list) and len(rates) == len(items)
    for inc, cap, d, w, r in zip(incs, caps, demands, weights, rates):
        np.testing.assert_array_equal(r, max_min_fair(inc, cap, demand=d, weights=w))


def test_batched_iterations_are_the_max_not_the_sum():
    rng = np.random.default_rng(3)
    parts, its = [], []
    for _ in range(4):
        ef, el, ec, cap = random_instance(rng, 300, 60, 4)
        parts.append((ef, el, ec, cap))
        its.append(solve_coo(ef, el, ec, cap, 300, return_iterations=True)[1])
    ef = np.concatenate([p[0] + 300 * i for i, p in enumerate(parts)])
    el = np.concatenate([p[1] + 60 * i for i, p in enumerate(parts)])
    ec = np.concatenate([p[2] for p in parts])
    cap = np.concatenate([p[3] for p in parts])
    rates, its_all = solve_coo(ef, el, ec, cap, 1200, return_iterations=True)
    assert its_all == max(its)
    for i, (ef_i, el_i, ec_i, cap_i) in enumerate(parts):
        np.testing.assert_array_equal(rates[300 * i : 300 * (i + 1)], solve_coo(ef_i, el_i, ec_i, cap_i, 300))


# ----------------------------------------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": [1.0, 1.0, 1.0, -1.0]}, "capacity[3] = -1.0: must be >= 0"),
        ({"capacity": [1.0, np.nan, 1.0, 1.0]}, "capacity[1] = nan: must be >= 0"),
        ({"capacity": [1.0, 1.0, 1.0]}, "capacity has shape (3,); expected (4,): one value per link"),
        ({"incidence": [[1, 0, 0, 0], [np.nan, 1, 0, 0]]}, "incidence[1, 0] = nan: must be finite and >= 0"),
        ({"incidence": [[1, 0, 0, -2.0], [0, 1, 0, 0]]}, "incidence[0, 3] = -2.0: must be finite and >= 0"),
        ({"incidence": [[1, 0, 0, INF], [0, 1, 0, 0]]}, "incidence[0, 3] = inf: must be finite and >= 0"),
        ({"incidence": [1.0, 0.0, 1.0, 1.0]}, "incidence must be 2-D (flows, links); got shape (4,)"),
        ({"weights": [1.0, 0.0]}, "weights[1] = 0.0: must be finite and > 0"),
        ({"weights": [-1.0, 1.0]}, "weights[0] = -1.0: must be finite and > 0"),
        ({"weights": [1.0, 1.0, 1.0]}, "weights has shape (3,); expected (2,): one value per flow"),
        ({"demand": [1.0, -0.5]}, "demand[1] = -0.5: must be >= 0 (inf = no cap)"),
        ({"demand": [np.nan, 1.0]}, "demand[0] = nan: must be >= 0"),
        ({"demand": [[1.0, 1.0]]}, "demand has shape (1, 2); expected (2,): one value per flow"),
    ],
)
def test_bad_input_messages(kwargs, message):
    args = {"incidence": [[1, 0, 0, 0], [0, 1, 0, 1]], "capacity": [1.0, 1.0, 1.0, 1.0]} | kwargs
    with pytest.raises(ValueError, match=re.escape(message)):
        max_min_fair(**args)


def test_bad_sparse_input_names_row_and_column():
    m = sp.csr_matrix(([1.0, np.nan], ([0, 1], [0, 2])), shape=(2, 3))
    with pytest.raises(ValueError, match=re.escape("incidence[1, 2] = nan: must be finite and >= 0")):
        max_min_fair(m, [1.0, 1.0, 1.0])


def test_bad_batched_input_messages():
    inc = np.ones((2, 2, 1))
    with pytest.raises(ValueError, match=re.escape("capacity[1, 0] = -1.0: must be >= 0")):
        max_min_fair_batched(inc, [[1.0], [-1.0]])
    with pytest.raises(ValueError, match=re.escape("capacity has shape (3, 1); expected (2, 1)")):
        max_min_fair_batched(inc, np.ones((3, 1)))
    with pytest.raises(ValueError, match=re.escape("weights[0, 1] = 0.0: must be finite and > 0")):
        max_min_fair_batched(inc, [[1.0], [1.0]], weights=[[1.0, 0.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match=re.escape("incidence must be 3-D")):
        max_min_fair_batched(np.ones((2, 2)), [1.0, 1.0])
    with pytest.raises(ValueError, match=re.escape("capacity[1][0] = -1.0: must be >= 0")):
        max_min_fair_batched([np.ones((1, 1)), np.ones((2, 1))], [[1.0], [-1.0]])
    with pytest.raises(ValueError, match=re.escape("incidence[1][0, 0] = nan")):
        max_min_fair_batched([np.ones((1, 1)), np.full((2, 1), np.nan)], [[1.0], [1.0]])
    with pytest.raises(ValueError, match=re.escape("capacity has 1 entries; expected 2")):
        max_min_fair_batched([np.ones((1, 1)), np.ones((2, 1))], [[1.0]])
