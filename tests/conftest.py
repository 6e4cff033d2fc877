"""Test-session hooks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """After a run that included tests/project/test_docs.py: how many doc blocks ran, how many are marked not-run and how
    many were skipped for an optional module not installed here."""
    reports = [r for key in ("passed", "failed", "skipped") for r in terminalreporter.stats.get(key, [])]
    if not any(getattr(r, "nodeid", "").startswith("tests/project/test_docs.py") for r in reports):
        return
    path = Path(__file__).parent / "project" / "test_docs.py"
    spec = importlib.util.spec_from_file_location("_doc_block_counts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    for line in module.summary():
        terminalreporter.write_line(line)
