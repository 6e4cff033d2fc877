"""No call from Python to a compiled (numba) function leaves out a defaulted argument (issue-31zd2).

numba types an argument left to its default as ``OmittedArg(value)``, and its C dispatcher fingerprints that
by the Python type of the value only, in one cache for the whole process: the first omitted ``bool`` seen
(say ``True``) fixes the type every later omitted ``bool`` is given, of any compiled function. A call that
omits ``False`` then matches none of its function's compiled signatures and falls to the dispatcher's Python
path at every call (``_compile_for_args``: every argument typed in Python; ~1 ms a call for the lazy kernel,
docs/development.md, issue-31zb2). The same holds for two omitted ``int`` defaults of different values. Calls
between compiled functions are typed at compile time and are not affected; only calls from Python are.

The check is static, over the package, the tests and the examples: the compiled functions are the ones
decorated ``@njit``/``@jit``; a call from Python code (outside those functions' bodies) to one that has
defaulted parameters, by its name, an attribute of that name or a local name bound to either, must pass
every defaulted parameter, positionally or by keyword. A call with ``*args`` is read as passing them when
it spells out at least as many arguments after its last ``*args`` as the function has defaulted parameters;
``**kwargs`` fails. Not seen: a compiled function reached by ``getattr`` with
a string, or passed to other code as a value and called there; :func:`test_the_check_reads_omissions` plants
each case the check must find."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("ainet_gym", "tests", "examples")
COMPILERS = {"njit", "jit"}


@dataclass(frozen=True)
class Compiled:
    where: str  # path:line of its def
    params: tuple[str, ...]  # positional parameters, in order
    defaulted: tuple[str, ...]  # those with a default (positional ones, then keyword-only ones)


def _is_compiled(node: ast.FunctionDef) -> bool:
    for dec in node.decorator_list:
        d = dec.func if isinstance(dec, ast.Call) else dec
        name = d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", None)
        if name in COMPILERS:
            return True
    return False


def _files(roots: list[Path]) -> list[Path]:
    return sorted(p for r in roots for p in ([r] if r.is_file() else r.rglob("*.py")))


def compiled_with_defaults(roots: list[Path]) -> dict[str, Compiled]:
    """Every compiled function under ``roots`` that has a defaulted parameter, by name."""
    out: dict[str, Compiled] = {}
    for path in _files(roots):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef) or not _is_compiled(node):
                continue
            a = node.args
            pos = tuple(x.arg for x in a.posonlyargs + a.args)
            kw = tuple(x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None)
            defaulted = pos[len(pos) - len(a.defaults) :] + kw
            if defaulted:
                where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{node.lineno}"
                assert node.name not in out, (
                    f"two compiled functions named {node.name}: {out[node.name].where}, {where}"
                )
                out[node.name] = Compiled(where, pos + kw, defaulted)
    return out


def _name(node: ast.AST) -> str | None:
    """The name a callee or a bound value refers to: ``f``, ``m.f``, ``x.f if c else None``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.IfExp):
        return _name(node.body) or _name(node.orelse)
    return None


class _Calls(ast.NodeVisitor):
    """The calls from Python code of one file to the compiled functions ``targets`` that leave out a
    defaulted parameter, as ``path:line: message``."""

    def __init__(self, path: str, targets: dict[str, Compiled]) -> None:
        self.path, self.targets = path, targets
        self.alias: dict[str, str] = {}  # a local name bound to a target -> the target's name
        self.found: list[str] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if not _is_compiled(node):  # (compiled callers are typed at compile time: not checked)
            self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        name = _name(node.value)
        for t in node.targets:
            if isinstance(t, ast.Name) and name in self.targets:
                self.alias[t.id] = name
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        callee = _name(node.func)
        fn = self.alias.get(callee, callee) if isinstance(node.func, ast.Name) else callee
        if fn in self.targets:
            msg = self._missing(self.targets[fn], node)
            if msg:
                self.found.append(f"{self.path}:{node.lineno}: {fn} ({self.targets[fn].where}) {msg}")
        self.generic_visit(node)

    def _missing(self, fn: Compiled, call: ast.Call) -> str:
        if any(k.arg is None for k in call.keywords):
            return "called with **kwargs: its defaulted parameters cannot be checked"
        starred = [i for i, a in enumerate(call.args) if isinstance(a, ast.Starred)]
        if starred:
            after = len(call.args) - starred[-1] - 1 + len(call.keywords)
            if after >= len(fn.defaulted):
                return ""
            return (
                f"called with *args and {after} arguments after them: pass its {len(fn.defaulted)} defaulted "
                f"parameters {fn.defaulted} explicitly"
            )
        given = set(fn.params[: len(call.args)]) | {k.arg for k in call.keywords}
        left = [p for p in fn.defaulted if p not in given]
        return f"leaves out {left}: pass them explicitly (numba's cache of omitted defaults)" if left else ""


def omitted_defaults(roots: list[Path], targets: dict[str, Compiled]) -> list[str]:
    """Every call from Python under ``roots`` to one of ``targets`` that leaves out a defaulted parameter."""
    found = []
    for path in _files(roots):
        v = _Calls(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path), targets)
        v.visit(ast.parse(path.read_text(), str(path)))
        found += v.found
    return found


def test_no_call_from_python_leaves_out_a_compiled_functions_default() -> None:
    roots = [ROOT / r for r in SCANNED]
    targets = compiled_with_defaults([ROOT / "ainet_gym"])
    # the kernel and its steps that have defaults today (the check reads them from the source; a wrong
    # decorator match would find none)
    # (run_interval_lazy had four until issue-31zc2 put its flags in a tuple)
    assert {"resolve_incremental", "fill_scratch"} <= set(targets)
    assert omitted_defaults(roots, targets) == []


PLANTED = """
from numba import njit
import numba
from ainet_gym.sim.backends.numba import lazy as nb_lazy

@njit(cache=True)
def f(a, b, c=True, d=0):
    return a

@numba.njit
def g(a, *, k=1.5):
    return a

@njit
def inner(a):
    return f(a, 1)  # compiled caller: not checked

def user(x, args):
    f(x, 1, True, 0)            # fine
    f(x, 1, c=False, d=2)       # fine
    f(x, 1)                     # omits: leaves out c, d
    f(x, 1, True)               # omits: leaves out d
    g(x)                        # omits: leaves out k
    g(x, k=2.0)                 # fine
    h = nb_lazy.f if x else None
    h(x, 1, False)              # omits: by its local name, leaves out d
    f(*args)                    # omits: *args alone
    f(*args, True, 0)           # fine: two after *args
    f(x, *args, c=True, d=0)    # fine: two after *args, by keyword
    f(x, **args)                # omits: **kwargs
    lam = lambda *a: f(*a, 1)   # omits: one after *args
"""


def test_the_check_reads_omissions(tmp_path: Path) -> None:
    p = tmp_path / "planted.py"
    p.write_text(PLANTED)
    targets = compiled_with_defaults([p])
    assert set(targets) == {"f", "g"}
    assert targets["f"].defaulted == ("c", "d") and targets["g"].defaulted == ("k",)
    want = [i + 1 for i, line in enumerate(PLANTED.splitlines()) if "# omits" in line]
    got = [int(m.split(":")[1]) for m in omitted_defaults([p], targets)]
    assert len(want) == 7 and got == want
