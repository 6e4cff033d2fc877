"""Functions of one job (issue 31 item 3): no function of the package is over 80 lines of code (its
docstring not counted) unless its docstring says why, with the words "Long on purpose"."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "ainet_gym"
MAX_LINES = 80


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
