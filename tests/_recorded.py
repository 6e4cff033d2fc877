"""What the characterisation tests share: values recorded from one tree, compared with another's."""

from __future__ import annotations

from typing import Any

import pytest


def approx_tree(expected: Any, rtol: float = 1e-9, atol: float = 1e-12) -> Any:
    """``expected`` (dicts, lists and tuples of numbers, strings and None, as JSON holds them) with every float
    compared to ``rtol`` relative, ``atol`` absolute tolerance, and every tuple compared as a list."""
    if isinstance(expected, dict):
        return {k: approx_tree(v, rtol, atol) for k, v in expected.items()}
    if isinstance(expected, list | tuple):
        return [approx_tree(v, rtol, atol) for v in expected]
    if isinstance(expected, float):
        return pytest.approx(expected, rel=rtol, abs=atol)
    return expected
