"""Doctests of the package (`make test` runs `pytest --doctest-modules ainet_gym agents`): modules of optional
extras that are not installed are not collected (their import raises an error naming the extra)."""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("ray") is None:
    collect_ignore.append("ainet_gym/rllib.py")
