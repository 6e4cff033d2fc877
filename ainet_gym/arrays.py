"""Small array idioms shared by the engine, the envs and the agents (numpy only)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["any_true", "nan_to_zero", "safe_divide"]


def safe_divide(num: npt.ArrayLike, den: npt.ArrayLike, fill: npt.ArrayLike = 0.0) -> np.ndarray:
    """``num / den`` where ``den > 0``, else ``fill`` (all three broadcast), without a division by zero.

    Bit for bit ``np.where(den > 0, num / np.where(den > 0, den, 1.0), fill)``: a zero, negative or NaN
    denominator gives ``fill``, and no warning is raised for it.

    Examples
    --------
    >>> safe_divide(np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 0.0, -1.0, np.nan]), fill=np.inf).tolist()
    [0.5, inf, inf, inf]
    >>> safe_divide(1.0, np.array([4.0, 0.0])).tolist()
    [0.25, 0.0]
    """
    den = np.asarray(den)
    ok = den > 0
    return np.where(ok, num / np.where(ok, den, 1.0), fill)


def any_true(x: np.ndarray) -> bool:
    """``x.any()`` of an array, as ``np.count_nonzero(x) > 0``: the same answer (NaN counts as true in both), in C.

    ``ndarray.any`` goes through numpy's Python-level ``_methods._any``; on the small arrays of the numpy
    backend's event loop, which tests a mask some 150 times a step, it cost about four times as much
    (docs/development.md, "issue-31zv2").

    Examples
    --------
    >>> any_true(np.array([False, True])), any_true(np.zeros(3)), any_true(np.array([np.nan]))
    (True, False, True)
    """
    return bool(np.count_nonzero(x) > 0)


def nan_to_zero(v: np.ndarray) -> np.ndarray:
    """``np.nan_to_num(v, nan=0.0)`` (a new array; NaN to 0, +-inf to the largest finite numbers) in one
    or two array passes where ``v`` holds no infinity, the case of every info and observation value.

    Examples
    --------
    >>> nan_to_zero(np.array([1.0, np.nan])).tolist()
    [1.0, 0.0]
    """
    finite = np.isfinite(v)
    if np.count_nonzero(finite) == finite.size:  # (finite.all(): a reduction, 2x the time on small arrays)
        return v.copy()
    if np.isinf(v).any():
        return np.nan_to_num(v, nan=0.0)
    return np.where(finite, v, 0.0)
