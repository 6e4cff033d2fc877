"""The compiled read of a CSR incidence for :func:`ainet_gym.sim.allocator.max_min_fair`'s checks (issue-28zr):
one pass that checks the structure and the values and gives the entries the solvers take, in place of some ten
numpy passes (:func:`ainet_gym.sim.allocator_checks._csr_entries`, which calls it when numba imports)."""

from __future__ import annotations

import numpy as np

from ainet_gym.sim.backends.numba.jit import njit

__all__ = ["CSR_BAD_VALUE", "CSR_NOT_CANONICAL", "CSR_OK", "csr_entries"]

#: :func:`csr_entries`' status: the entries are valid; the structure is not canonical (the caller takes the COO
#: path); a coefficient is NaN, negative or infinite (the caller names it)
CSR_OK, CSR_NOT_CANONICAL, CSR_BAD_VALUE = 0, 1, 2


@njit(cache=True, nogil=True)
def csr_entries(indptr, indices, data, n_links):  # pragma: no cover - compiled
    """``(status, flow, link, coef)`` of the CSR arrays of a (flows, ``n_links``) incidence, ``flows =
    len(indptr) - 1``, ``indptr[0] == 0`` and ``indptr[-1] <= len(indices), len(data)`` (the caller checks
    those).

    Status :data:`CSR_OK`: the entries of coefficient > 0 in row order, then column (explicit zeros dropped),
    those the COO path of :func:`~ainet_gym.sim.allocator_checks.incidence_to_coo` gives. :data:`CSR_NOT_CANONICAL`
    (no entries): a row's range decreasing or past ``indptr[-1]``, a column outside ``[0, n_links)`` or not
    strictly increasing within its row (unsorted or duplicated). :data:`CSR_BAD_VALUE` (no entries): the
    structure is canonical and a coefficient is NaN, negative or infinite."""
    n = indptr.shape[0] - 1
    nnz = indptr[n]
    flow = np.empty(nnz, dtype=np.int64)
    link = np.empty(nnz, dtype=np.int64)
    coef = np.empty(nnz)
    k = 0
    bad = False
    for f in range(n):
        lo = indptr[f]
        hi = indptr[f + 1]
        if hi < lo or hi > nnz:
            return CSR_NOT_CANONICAL, flow[:0], link[:0], coef[:0]
        prev = -1
        for e in range(lo, hi):
            c = indices[e]
            if c <= prev or c >= n_links:
                return CSR_NOT_CANONICAL, flow[:0], link[:0], coef[:0]
            prev = c
            v = data[e]
            if not (v >= 0.0 and v < np.inf):  # NaN fails both
                bad = True
            elif v > 0.0:
                flow[k] = f
                link[k] = c
                coef[k] = v
                k += 1
    if bad:
        return CSR_BAD_VALUE, flow[:0], link[:0], coef[:0]
    return CSR_OK, flow[:k], link[:k], coef[:k]
