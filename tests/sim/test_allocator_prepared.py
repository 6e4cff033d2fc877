"""issue-28zr: the allocator's cheaper per-call path. A CSR incidence read in place (compiled pass, or numpy
passes without numba) must give the entries, rates and refusals of the COO path it replaces; a
:class:`PreparedIncidence` must solve bit for bit as the matrix it was made from (and ``rows(idx)`` as
``matrix[idx]``), and refuse what the matrix would be refused for."""

from __future__ import annotations

import re

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ainet_gym.sim import allocator_checks as ac
from ainet_gym.sim.allocator import PreparedIncidence, max_min_fair, max_min_fair_batched, prepare_incidence
from ainet_gym.sim.backends.numba import jit
from ainet_gym.sim.reference import max_min_fair_reference

INF = np.inf
COEFS = st.sampled_from([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 0.5, 1.5])
CAPS = st.one_of(st.sampled_from([0.0, 1.0, 2.0, 10.0, INF]), st.floats(0.01, 100.0))
READERS = ["compiled", "numpy"] if jit.HAVE_NUMBA else ["numpy"]


@pytest.fixture(params=READERS)
def reader(request, monkeypatch):
    """The CSR reader of allocator_checks: the compiled pass, or the numpy passes (numba absent)."""
    monkeypatch.setattr(ac, "_HAVE_NUMBA", request.param == "compiled")
    return request.param


@st.composite
def matrices(draw, max_flows: int = 20, max_links: int = 12):
    n_flows = draw(st.integers(0, max_flows))
    n_links = draw(st.integers(1, max_links))
    inc = draw(hnp.arrays(np.float64, (n_flows, n_links), elements=COEFS))
    cap = draw(hnp.arrays(np.float64, (n_links,), elements=CAPS))
    return inc, cap


def _coo_path(m):
    """The COO path's entries (what every sparse matrix took before issue-28zr)."""
    return ac.incidence_to_coo(m.tocoo(), "incidence")


def _same_entries(a, b):
    for x, y in zip(a[:3], b[:3], strict=True):
        assert x.dtype.kind == y.dtype.kind
        np.testing.assert_array_equal(x, y)
    assert a[3] == b[3]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(matrices(), st.randoms(use_true_random=False))
def test_csr_read_in_place_gives_the_coo_paths_entries(reader, mc, rnd):
    inc, _ = mc
    m = sp.csr_matrix(inc)
    m.data[m.data == 1.5] = 0.0  # explicit zeros kept in the structure: dropped as the COO path drops them
    _same_entries(ac.incidence_to_coo(m, "incidence"), _coo_path(m))
    assert ac._csr_entries(m, "incidence") is not None  # canonical: read in place
    # not canonical (a row's indices reversed, a duplicate): the COO path, duplicates summed
    if m.nnz >= 2:
        r = int(np.argmax(np.diff(m.indptr)))
        lo, hi = m.indptr[r], m.indptr[r + 1]
        if hi - lo >= 2:
            m2 = m.copy()
            m2.indices[lo:hi] = m2.indices[lo:hi][::-1].copy()
            m2.data[lo:hi] = m2.data[lo:hi][::-1].copy()
            assert ac._csr_entries(m2, "incidence") is None
            _same_entries(ac.incidence_to_coo(m2, "incidence"), _coo_path(m))
        e = rnd.randrange(m.nnz)
        row = int(np.searchsorted(m.indptr, e, side="right") - 1)
        dup = sp.csr_matrix(
            (np.append(m.data, 1.0), np.insert(m.indices, m.indptr[row + 1], m.indices[e]),
             m.indptr + (np.arange(m.shape[0] + 1) > row)), shape=m.shape,
        )  # fmt: skip
        assert ac._csr_entries(dup, "incidence") is None
        _same_entries(ac.incidence_to_coo(dup, "incidence"), _coo_path(dup))


def test_a_stale_canonical_flag_is_not_trusted(reader):
    m = sp.csr_matrix(np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 1.0]]))
    assert m.has_canonical_format  # computed and cached by scipy
    m.indices[:2] = m.indices[:2][::-1].copy()  # unsorted now; scipy's cached flag still says canonical
    m.data[:2] = m.data[:2][::-1].copy()
    assert ac._csr_entries(m, "incidence") is None
    np.testing.assert_array_equal(
        max_min_fair(m, [3.0, 2.0, 1.0]), max_min_fair(m.toarray(), [3.0, 2.0, 1.0])
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1.0, np.nan, 1.0], "incidence[0, 2] = nan: must be finite and >= 0"),
        ([1.0, 1.0, -2.0], "incidence[1, 1] = -2.0: must be finite and >= 0"),
        ([INF, 1.0, -2.0], "incidence[0, 0] = inf: must be finite and >= 0 (and 1 more bad values)"),
    ],
)
def test_bad_csr_values_are_named_as_before(reader, data, message):
    m = sp.csr_matrix((np.array(data), np.array([0, 2, 1]), np.array([0, 2, 3])), shape=(2, 3))
    for inc in (m, m.tocoo(), m.toarray() if np.isfinite(data).all() else None):
        if inc is None:
            continue
        with pytest.raises(ValueError, match=re.escape(message)):
            max_min_fair(inc, [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=re.escape(message)):
        prepare_incidence(m)


def test_inconsistent_csr_arrays_are_refused(reader):
    m = sp.csr_matrix(np.array([[1.0, 1.0], [0.0, 1.0]]))
    m.indices[1] = 5  # outside the 2 links: refused (scipy's own check on the COO path)
    with pytest.raises(ValueError):
        max_min_fair(m, [1.0, 1.0])
    m = sp.csr_matrix(np.array([[1.0, 1.0], [0.0, 1.0]]))
    m.indices[0] = -1
    with pytest.raises(ValueError):
        max_min_fair(m, [1.0, 1.0])


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@settings(max_examples=100, deadline=None)
@given(matrices(), st.data())
def test_prepared_solves_bit_for_bit_as_its_matrix(backend, mc, data):
    inc, cap = mc
    for matrix in (inc, sp.csr_matrix(inc), sp.coo_matrix(inc)):
        prep = prepare_incidence(matrix)
        assert isinstance(prep, PreparedIncidence) and prep.shape == inc.shape
        assert prep.nnz == np.count_nonzero(inc)
        np.testing.assert_array_equal(
            max_min_fair(prep, cap, backend=backend), max_min_fair(matrix, cap, backend=backend)
        )
    idx = np.array(data.draw(st.lists(st.integers(0, max(inc.shape[0] - 1, 0)), max_size=25)) if inc.shape[0] else [],
                   dtype=np.int64)  # fmt: skip
    csr = sp.csr_matrix(inc)
    got = max_min_fair(prep.rows(idx), cap, backend=backend)
    np.testing.assert_array_equal(got, max_min_fair(csr[idx], cap, backend=backend))
    # and the exact answer (the pure-Python reference) to 1e-9
    want = max_min_fair_reference(inc[idx], cap)
    fin = np.isfinite(want)
    np.testing.assert_array_equal(np.isinf(got), ~fin)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-9, atol=1e-12)
    mask = np.zeros(inc.shape[0], dtype=bool)
    mask[idx] = True
    np.testing.assert_array_equal(
        max_min_fair(prep.rows(mask), cap, backend=backend), max_min_fair(csr[mask], cap, backend=backend)
    )


def test_prepared_is_a_copy_and_in_the_batched_list_form():
    inc = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    cap = np.array([2.0, 4.0])
    prep = prepare_incidence(inc)
    inc[0, 0] = -1.0  # a later change to the matrix does not reach the prepared one
    np.testing.assert_array_equal(max_min_fair(prep, cap), [1.0, 1.0, 3.0])
    assert prepare_incidence(prep) is prep
    a, b = max_min_fair_batched([prep, prep.rows([1, 2])], [cap, cap])
    np.testing.assert_array_equal(a, [1.0, 1.0, 3.0])
    np.testing.assert_array_equal(b, [2.0, 2.0])
    with pytest.raises(ValueError, match=re.escape("capacity[1] = -1.0: must be >= 0")):
        max_min_fair(prep, [1.0, -1.0])  # the vectors are still checked at every call
    with pytest.raises(ValueError, match=re.escape("capacity has shape (3,); expected (2,)")):
        max_min_fair(prep, [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=re.escape("a single PreparedIncidence is one instance")):
        max_min_fair_batched(prep, cap)
    assert repr(prep) == "PreparedIncidence(flows=3, links=2, nnz=4)"


@pytest.mark.parametrize(
    ("flows", "message"),
    [
        ([0, 3], "flows[1] = 3: must be a flow index in [0, 3)"),
        ([-1], "flows[0] = -1: must be a flow index in [0, 3)"),
        ([0.5], "flows must be 1-D flow indices (integers) or a (3,) boolean mask; got dtype float64"),
        (
            [[0]],
            "flows must be 1-D flow indices (integers) or a (3,) boolean mask; got dtype int64, shape (1, 1)",
        ),
        ([True, False], "flows: a boolean mask must have shape (3,) (one per flow); got (2,)"),
    ],
)
def test_bad_row_selections_are_refused(flows, message):
    prep = prepare_incidence(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=re.escape(message)):
        prep.rows(flows)


def test_prepare_refuses_what_max_min_fair_refuses():
    with pytest.raises(ValueError, match=re.escape("incidence must be 2-D (flows, links); got shape (4,)")):
        prepare_incidence([1.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=re.escape("incidence[1, 0] = nan: must be finite and >= 0")):
        prepare_incidence([[1.0, 0.0], [np.nan, 1.0]])
