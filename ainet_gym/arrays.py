"""Small array idioms shared by the engine, the envs and the agents (numpy only)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["safe_divide"]


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
