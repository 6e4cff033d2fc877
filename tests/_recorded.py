"""What the characterisation tests share: values recorded from one tree (a JSON file beside the test, written by
its module's ``record()``), compared with another's."""

from __future__ import annotations

import json
from pathlib import Path
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


def load_recorded(test_file: str) -> Any:
    """The values recorded for the test module ``test_file`` (its ``__file__``): the JSON file beside it named
    as the module without its ``test_`` prefix, ``test_x_recorded.py`` -> ``x_recorded.json``."""
    p = Path(test_file)
    return json.loads(p.with_name(p.stem.removeprefix("test_") + ".json").read_text())
