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

__all__ = [
    "CAPACITY_HINT",
    "DEMAND_HINT",
    "as_float_array",
    "check_values",
    "checked_vector",
    "incidence_to_coo",
    "issparse",
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
    """Raise ValueError naming the first bad value of `values` (NaN, negative, inf if not allowed)."""
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
    """Validated (flow, link, coef) entries (coef > 0) and the shape of a dense or sparse incidence."""
    if issparse(incidence):
        if len(incidence.shape) != 2:
            raise ValueError(f"{name} must be 2-D (flows, links); got shape {incidence.shape}")
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
