"""Functions of one job (issue 31 item 3): no function of the package is over 80 lines of code (its
docstring not counted) unless it is listed in :data:`LONG_ON_PURPOSE`, no longer than listed, and its
docstring says why, with the words "Long on purpose"."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "ainet_gym"
MAX_LINES = 80

#: every function over MAX_LINES lines of code, with its lines of code when it was last measured
#: (2026-12-05, issue-31za): one may get shorter (then lower its figure here, or drop it once it is not over
#: MAX_LINES), none may grow; a new long function fails until it is listed here with its reason. Only
#: compiled kernels are left: the solver's repair and fills (the two interval kernels' event loops were
#: split into steps by issue-31ze, docs/development.md).
LONG_ON_PURPOSE: dict[str, int] = {}


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The function's lines, less its docstring's."""
    n = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        n -= first.end_lineno - first.lineno + 1
    return n


def long_functions(root: Path = PKG, limit: int = MAX_LINES) -> list[tuple[str, int, bool]]:
    """``(module:function, code lines, says why)`` of every function over ``limit`` code lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _code_lines(node) > limit:
                why = "long on purpose" in (ast.get_docstring(node) or "").lower()
                out.append((f"{path.relative_to(ROOT)}:{node.name}", _code_lines(node), why))
    return out


def test_the_counter_counts_code_not_docstrings() -> None:
    src = 'def f():\n    """One\n    two\n    three."""\n    a = 1\n    return a\n'
    node = ast.parse(src).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert _code_lines(node) == 3  # the def line and two statements


def test_no_long_function_without_its_reason() -> None:
    unexplained = [(name, n) for name, n, why in long_functions() if not why]
    assert not unexplained, (
        f"functions over {MAX_LINES} lines of code without 'Long on purpose: ...' in their docstring: "
        f"{unexplained}"
    )


def test_long_functions_are_the_listed_ones_and_none_grew() -> None:
    found = {name: n for name, n, _ in long_functions()}
    unlisted = {name: n for name, n in found.items() if name not in LONG_ON_PURPOSE}
    assert not unlisted, f"functions over {MAX_LINES} lines of code, not in LONG_ON_PURPOSE: {unlisted}"
    grew = {name: (LONG_ON_PURPOSE[name], n) for name, n in found.items() if n > LONG_ON_PURPOSE[name]}
    assert not grew, f"functions longer than LONG_ON_PURPOSE allows (listed, now): {grew}"
    gone = sorted(set(LONG_ON_PURPOSE) - set(found))
    assert not gone, f"listed in LONG_ON_PURPOSE but no longer over {MAX_LINES} lines (drop them): {gone}"
