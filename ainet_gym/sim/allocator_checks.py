"""The input checks of :mod:`ainet_gym.sim.allocator`'s public functions: values (:func:`check_values`:
NaN, negative, inf where not allowed; the message names the argument, the first bad index and value and the
rule), arrays of numbers (:func:`as_float_array`), a dense or scipy.sparse incidence as validated COO entries
(:func:`incidence_to_coo`; :func:`issparse` without importing scipy) and one vector per flow or link
(:func:`checked_vector`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ainet_gym.sim.backends.numba.jit import HAVE_NUMBA as _HAVE_NUMBA

__all__ = [
    "CAPACITY_HINT",
    "DEMAND_HINT",
    "PreparedIncidence",
    "as_float_array",
    "check_values",
    "checked_vector",
    "incidence_to_coo",
    "issparse",
    "prepare_incidence",
]


def _format_index(name: str, index: tuple[int, ...] | tuple[Any, ...]) -> str:
    return f"{name}[{', '.join(str(int(i)) for i in index)}]"


def check_values(
    values: np.ndarray,
    name: str,
    *,
    allow_inf: bool,
    positive: bool = False,
    indices: Sequence[np.ndarray] | None = None,
    hint: str = "",
) -> None:
    """Raise ValueError naming the first bad value of `values` (NaN, negative, inf if not allowed).

    Valid values cost one or two reductions (``min``, which a NaN propagates, and ``max`` when inf is not
    allowed); only an array holding a bad value pays the element-wise search that names it."""
    if values.size == 0:
        return
    lo = values.min()
    if (lo > 0 if positive else lo >= 0) and (allow_inf or values.max() < np.inf):
        return
    with np.errstate(invalid="ignore"):
        bad = np.isnan(values) | ((values <= 0) if positive else (values < 0))
        if not allow_inf:
            bad |= np.isinf(values)
    if not bad.any():
        return
    where = np.argwhere(bad)
    first = tuple(where[0])
    value = float(values[first])
    if indices is not None:  # values are the data of a sparse matrix: report (row, col)
        first = tuple(idx[first[0]] for idx in indices)
    rule = ("finite and " if not allow_inf else "") + ("> 0" if positive else ">= 0")
    more = f" (and {len(where) - 1} more bad values)" if len(where) > 1 else ""
    raise ValueError(f"{_format_index(name, first)} = {value!r}: must be {rule}{hint}{more}")


def as_float_array(x: Any, name: str) -> np.ndarray:
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of numbers: {exc}") from None


def issparse(x: Any) -> bool:
    """``scipy.sparse.issparse(x)`` without importing scipy: a sparse matrix exists only once its
    module is loaded (this keeps scipy off the import path of the envs and the engine)."""
    mod = sys.modules.get("scipy.sparse")
    return mod is not None and bool(mod.issparse(x))


def incidence_to_coo(incidence: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """Validated (flow, link, coef) entries (coef > 0, sorted by flow, then link) and the shape of a dense or
    sparse incidence, or of a :class:`PreparedIncidence` (validated when it was made: returned as it is).

    A CSR matrix in canonical form (indices sorted within each row, no duplicates: what scipy builds) is
    read in place (:func:`_csr_entries`); any other sparse matrix is converted to COO with its duplicates
    summed, as before."""
    if type(incidence) is PreparedIncidence:
        return incidence.entries()
    if issparse(incidence):
        if len(incidence.shape) != 2:
            raise ValueError(f"{name} must be 2-D (flows, links); got shape {incidence.shape}")
        if incidence.format == "csr":
            entries = _csr_entries(incidence, name)
            if entries is not None:
                return entries
        coo = incidence.tocoo(copy=True)
        coo.sum_duplicates()
        data = np.asarray(coo.data, dtype=np.float64)
        rows = np.asarray(coo.row, dtype=np.intp)
        cols = np.asarray(coo.col, dtype=np.intp)
        check_values(data, name, allow_inf=False, indices=(rows, cols))
        keep = data > 0
        return rows[keep], cols[keep], data[keep], (int(coo.shape[0]), int(coo.shape[1]))
    arr = as_float_array(incidence, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (flows, links); got shape {arr.shape}")
    check_values(arr, name, allow_inf=False)
    rows, cols = np.nonzero(arr)
    return rows, cols, arr[rows, cols], (arr.shape[0], arr.shape[1])


def _csr_entries(a: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]] | None:
    """:func:`incidence_to_coo` of a CSR matrix read in place, or None when it is not in canonical form
    (indices strictly increasing within each row: sorted, no duplicates) or its arrays are not consistent
    (``indptr`` not ``(flows + 1,)`` nondecreasing from 0, an index outside ``[0, links)``): the caller then
    takes the COO path, whose checks and messages are scipy's and the ones before this path.

    The entries are those the COO path gives (its ``sum_duplicates`` sorts by row, then column, and sums
    nothing), bit for bit, without its copies, sort and the COO matrix's construction. Canonical form is
    checked on the arrays (columns strictly increasing within each row), not taken from scipy's cached
    ``has_canonical_format`` flag, which arrays changed in place can leave stale. Where numba imports, one
    compiled pass reads and checks it (:func:`ainet_gym.sim.backends.numba.csr.csr_entries`); without numba,
    or to name a bad value, the numpy passes below (the same decisions, entries and messages)."""
    n, m = int(a.shape[0]), int(a.shape[1])
    indptr = np.asarray(a.indptr)
    if indptr.shape != (n + 1,) or indptr[0] != 0 or indptr.dtype.kind not in "iu":
        return None
    nnz = int(indptr[-1])
    indices = np.asarray(a.indices)
    if nnz > indices.shape[0] or nnz > a.data.shape[0] or indices.dtype.kind not in "iu":
        return None
    data = np.asarray(a.data[:nnz], dtype=np.float64)
    if _HAVE_NUMBA:
        from ainet_gym.sim.backends.numba import csr

        status, rows, cols, coef = csr.csr_entries(indptr, indices, data, m)
        if status == csr.CSR_NOT_CANONICAL:
            return None
        if status == csr.CSR_OK:
            return rows, cols, coef, (n, m)
        # a bad value: named below
    counts = indptr[1:] - indptr[:-1]
    if n and counts.min() < 0:
        return None
    rows = np.repeat(np.arange(n, dtype=np.intp), counts)
    cols = np.asarray(indices[:nnz], dtype=np.intp)
    if nnz == 0:
        return rows, cols, data, (n, m)
    if cols.min() < 0 or cols.max() >= m:
        return None
    if nnz > 1:
        key = rows * m + cols
        if not (key[1:] > key[:-1]).all():
            return None
    lo = data.min()  # a NaN propagates
    if not (lo >= 0 and data.max() < np.inf):
        check_values(data, name, allow_inf=False, indices=(rows, cols))  # raises, naming the first bad value
    if not lo > 0:  # explicit zeros: dropped, as the COO path drops them
        keep = data > 0
        rows, cols, data = rows[keep], cols[keep], data[keep]
    return rows, cols, data, (n, m)


class PreparedIncidence:
    """A (flows, links) incidence validated once, for solving it (or subsets of its flows) many times.

    Made by :func:`prepare_incidence`; :func:`~ainet_gym.sim.allocator.max_min_fair` (and the list form of
    :func:`~ainet_gym.sim.allocator.max_min_fair_batched`) take it in place of ``incidence`` and skip the
    incidence's checks and conversion: its entries were checked when it was made (the same checks and
    messages as a matrix passed directly) and are kept in the form the solvers read (flow-sorted COO entries
    with coefficient > 0 and each flow's range of them). :meth:`rows` selects flows without a new check,
    as the makespan loop of ``python -m ainet_gym.bench.vs_simgrid`` does at every completion.

    The solve of a prepared incidence equals the solve of the matrix it was made from bit for bit (and
    ``prepared.rows(idx)`` the solve of ``matrix[idx]``). It is immutable by contract: its arrays are its own
    copies, handed only to the solvers (:meth:`entries`), which do not write them (capacities, demands and
    weights are still checked at every call).

    Attributes
    ----------
    shape : tuple of int
        ``(flows, links)``.
    nnz : int
        The entries kept (coefficients > 0; duplicates of a sparse matrix summed).
    """

    __slots__ = ("_coef", "_flow", "_link", "_ptr", "shape")

    def __init__(
        self, flow: np.ndarray, link: np.ndarray, coef: np.ndarray, ptr: np.ndarray, shape: tuple[int, int]
    ) -> None:
        """Internal: use :func:`prepare_incidence` (the entries are trusted here, not checked)."""
        self._flow, self._link, self._coef, self._ptr = flow, link, coef, ptr
        self.shape = shape

    @property
    def nnz(self) -> int:
        return int(self._coef.shape[0])

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
        """The (flow, link, coef) entries (coef > 0, sorted by flow, then link) and the shape, as
        :func:`incidence_to_coo` gives them: the solvers' input, not to be written."""
        return self._flow, self._link, self._coef, self.shape

    def __repr__(self) -> str:
        return f"PreparedIncidence(flows={self.shape[0]}, links={self.shape[1]}, nnz={self.nnz})"

    def rows(self, flows: Any) -> PreparedIncidence:
        """The incidence of the flows ``flows`` (in that order; a flow may repeat), as ``matrix[flows]``
        would give, without a new check of its entries.

        Parameters
        ----------
        flows : array_like of int, shape (k,), or of bool, shape (flows,)
            Flow (row) indices in ``[0, flows)``, or a boolean mask over the flows.

        Raises
        ------
        ValueError
            If ``flows`` is not 1-D integers or a (flows,) boolean mask, or an index is outside
            ``[0, flows)``; the message names the index and its value, e.g. ``flows[2] = 9: must be a flow
            index in [0, 8)``.
        """
        n = self.shape[0]
        idx = np.asarray(flows)
        if idx.dtype == np.bool_:
            if idx.shape != (n,):
                raise ValueError(
                    f"flows: a boolean mask must have shape ({n},) (one per flow); got {idx.shape}"
                )
            idx = np.flatnonzero(idx)
        elif idx.ndim != 1 or not (np.issubdtype(idx.dtype, np.integer) or idx.size == 0):
            raise ValueError(
                f"flows must be 1-D flow indices (integers) or a ({n},) boolean mask; "
                f"got dtype {idx.dtype}, shape {idx.shape}"
            )
        idx = idx.astype(np.intp, copy=False)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            i = int(np.flatnonzero((idx < 0) | (idx >= n))[0])
            raise ValueError(f"flows[{i}] = {int(idx[i])}: must be a flow index in [0, {n})")
        lo = self._ptr[idx]
        counts = self._ptr[idx + 1] - lo
        ptr = np.zeros(idx.shape[0] + 1, dtype=np.intp)
        np.cumsum(counts, out=ptr[1:])
        src = np.repeat(lo - ptr[:-1], counts) + np.arange(ptr[-1], dtype=np.intp)
        flow = np.repeat(np.arange(idx.shape[0], dtype=np.intp), counts)
        return PreparedIncidence(
            flow, self._link[src], self._coef[src], ptr, (int(idx.shape[0]), self.shape[1])
        )


def prepare_incidence(incidence: Any, name: str = "incidence") -> PreparedIncidence:
    """``incidence`` (dense or scipy.sparse, shape (flows, links); the rules of
    :func:`~ainet_gym.sim.allocator.max_min_fair`) checked and converted once, for many solves.

    Raises
    ------
    ValueError
        As :func:`~ainet_gym.sim.allocator.max_min_fair` for a bad ``incidence`` (the message names ``name``,
        the offending index and value and what is allowed).

    Examples
    --------
    >>> import numpy as np
    >>> from ainet_gym.sim.allocator import max_min_fair, prepare_incidence
    >>> inc = prepare_incidence([[1, 0], [1, 1], [0, 1]])
    >>> max_min_fair(inc, [2.0, 4.0]).tolist(), max_min_fair(inc.rows([1, 2]), [2.0, 4.0]).tolist()
    ([1.0, 1.0, 3.0], [2.0, 2.0])
    """
    if type(incidence) is PreparedIncidence:
        return incidence
    flow, link, coef, shape = incidence_to_coo(incidence, name)
    flow, link = flow.astype(np.intp, copy=True), link.astype(np.intp, copy=True)
    coef = np.array(coef, dtype=np.float64)  # copies: later changes to the matrix do not reach it
    ptr = np.zeros(shape[0] + 1, dtype=np.intp)
    np.cumsum(np.bincount(flow, minlength=shape[0]), out=ptr[1:])
    return PreparedIncidence(flow, link, coef, ptr, (int(shape[0]), int(shape[1])))


CAPACITY_HINT = " (0 = failed link, inf = unconstrained)"
DEMAND_HINT = " (inf = no cap)"


def checked_vector(
    x: Any, name: str, n: int, what: str, *, allow_inf: bool, positive: bool = False, hint: str = ""
) -> np.ndarray:
    arr = as_float_array(x, name)
    if arr.shape != (n,):
        raise ValueError(f"{name} has shape {arr.shape}; expected ({n},): one value per {what}")
    check_values(arr, name, allow_inf=allow_inf, positive=positive, hint=hint)
    return arr
