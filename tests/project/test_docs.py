"""Every code block of the documentation runs (README.md and every page under docs/).

The convention, for everyone who writes a page:

- A fenced ``python`` block runs in the test process; the python blocks of one page run in order in one
  namespace (a later block sees the names of an earlier one).
- A fenced ``bash`` block runs through ``bash -e -o pipefail``, with ``ainet-gym`` meaning the project's CLI
  of the test's interpreter (and ``python``/``python3`` that interpreter), in a temporary working directory
  that has the repository's ``scenarios/`` and ``examples/`` in it. Blocks of a page run in the page's order,
  python and bash alike, in the same directory (a bash block can read what a python block wrote).
- A block that must not run (a long training run, a command that needs an extra with a venv of its own)
  is marked by an HTML comment line right before it: ``<!-- not-run: the reason -->``. At most 10% of all
  blocks may be marked so (:func:`test_at_most_a_tenth_of_the_blocks_are_skipped` asserts it).
- A python block that imports an optional module (:data:`EXTRAS`) that is not installed is skipped with the rest
  of its page; the summary counts these apart, and the make target that installs the module runs the page
  (:data:`EXTRA_TARGETS`; :func:`test_blocks_skipped_for_an_extra_run_in_its_make_target` asserts it).
- Output is shown in ``text`` blocks, which are not run. A block marked ``<!-- check-output -->`` right
  before it runs and its standard output must match the ``text`` block that follows it (blank lines between
  are allowed), as doctest compares: whitespace runs are equal, and ``...`` matches any text.
- Other languages (``yaml``, ``toml``, ``json``, ``text``, a fence without a language) are not run. The
  aliases ``sh``, ``shell``, ``console``, ``py``, ``python3`` and ``pycon`` are refused: they look runnable
  but would not run; write ``bash`` or ``python`` (or ``text`` for output).

The generated pages of the site (one per env id, the scenario gallery, the API and CLI references) are made
by ``docs/_scripts/gen_pages.py`` at build time from the code and hold no runnable blocks.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import importlib.util
import io
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ("python", "bash")
REFUSED = ("sh", "shell", "console", "py", "python3", "pycon", "zsh")
MAX_SKIPPED_FRACTION = 0.10
#: optional modules whose absence skips a page's python blocks (pettingzoo and supersuit are installed by
#: `make check`; ray by the rllib venv; tyro, rl_zoo3 and tianshou by the extra `examples`)
EXTRAS = ("pettingzoo", "supersuit", "ray", "ns", "tyro", "rl_zoo3", "tianshou")
#: optional module -> the make target that installs it and runs the doc pages whose blocks import it (``check``
#: runs the whole suite; the others run ``tests/project/test_docs.py`` on those pages, see
#: :func:`test_blocks_skipped_for_an_extra_run_in_its_make_target`)
EXTRA_TARGETS = {
    "pettingzoo": "check",
    "supersuit": "check",
    "tyro": "check-examples",
    "rl_zoo3": "check-examples",
    "tianshou": "check-examples",
    "ray": "check-rllib",
}
BASH_TIMEOUT_S = 600

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>\S.*?)\s*-->\s*$")
_CHECK = re.compile(r"^\s*<!--\s*check-output\s*-->\s*$")


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    end: int  # 1-based line of the closing fence
    lang: str
    code: str
    not_run: str | None  # the reason, when marked not-run
    check: bool  # marked check-output
    expected: str | None = None  # the text block after a check-output block


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/ (not the hook's folder)."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_scripts" not in p.parts)
    return [ROOT / "README.md", *docs]


def parse(path: Path, root: Path = ROOT) -> list[Block]:
    """The fenced blocks of a page, in order, with their markers."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = str(path.relative_to(root))
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group("indent"), m.group("fence"), m.group("info").lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not re.match(
            rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[i]
        ):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i == len(lines):
            raise AssertionError(f"{rel}:{start + 1}: a code fence that is never closed")
        i += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        nr = _NOT_RUN.match(prev)
        reason = nr.group("reason") if nr else None
        blocks.append(
            Block(rel, start + 1, i, lang, "\n".join(body) + "\n", reason, bool(_CHECK.match(prev)))
        )
    for k, b in enumerate(blocks):
        if b.lang in REFUSED:
            raise AssertionError(
                f"{rel}:{b.line}: a ```{b.lang} block: write ```bash or ```python (```text for output)"
            )
        if b.check:
            nxt = blocks[k + 1] if k + 1 < len(blocks) else None
            between = lines[b.end : nxt.line - 1] if nxt else []
            if b.lang not in RUN or b.not_run is not None:
                raise AssertionError(f"{rel}:{b.line}: check-output marks a block that does not run")
            if nxt is None or nxt.lang != "text" or any(ln.strip() for ln in between):
                raise AssertionError(
                    f"{rel}:{b.line}: check-output needs a ```text block right after the block"
                )
            b.expected = nxt.code
        if b.not_run is not None and b.lang not in RUN:
            raise AssertionError(
                f"{rel}:{b.line}: not-run marks a ```{b.lang or 'plain'} block, which never runs"
            )
    return blocks


def extras_imported(b: Block) -> list[str]:
    """The optional modules (:data:`EXTRAS`) a python block imports by name (``import x``, ``from x import``)."""
    if b.lang != "python":
        return []
    try:
        tree = ast.parse(b.code)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    tops = [n.split(".")[0] for n in names]
    return [t for t in dict.fromkeys(tops) if t in EXTRAS]


def counts() -> tuple[int, int, list[str], list[str]]:
    """(blocks that run here, blocks marked not-run, 'page:line: reason' of each one marked not-run,
    'page:line: module' of each block skipped here because an optional module it imports is not
    installed) over every page. A skip ends its page (:func:`test_page_blocks_run`), so the blocks after
    it on the page count as skipped too."""
    run, skipped, missing = 0, [], []
    for p in pages():
        gone = None  # the missing module that ended this page
        for b in parse(p):
            if b.lang not in RUN:
                continue
            if b.not_run is not None:
                skipped.append(f"{b.page}:{b.line}: {b.not_run}")
                continue
            if gone is None:
                gone = next((m for m in extras_imported(b) if importlib.util.find_spec(m) is None), None)
            if gone is not None:
                missing.append(f"{b.page}:{b.line}: {gone} (make {EXTRA_TARGETS.get(gone, '?')} runs it)")
            else:
                run += 1
    return run, len(skipped), skipped, missing


def _bin_dir(tmp: Path) -> Path:
    """``ainet-gym``, ``python`` and ``python3`` of the test's interpreter, for the bash blocks' PATH."""
    d = tmp / ".doc-bin"
    d.mkdir()
    for name, cmd in (
        ("ainet-gym", f'exec "{sys.executable}" -m ainet_gym.cli "$@"'),
        ("python", f'exec "{sys.executable}" "$@"'),
        ("python3", f'exec "{sys.executable}" "$@"'),
    ):
        f = d / name
        f.write_text(f"#!/bin/sh\n{cmd}\n")
        f.chmod(0o755)
    return d


def _compare(b: Block, got: str) -> None:
    checker = doctest.OutputChecker()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    assert b.expected is not None
    if not checker.check_output(b.expected, got, flags):
        pytest.fail(
            f"{b.page}:{b.line}: the output differs from the text block after it\n--- expected\n"
            f"{b.expected}--- got\n{got}"
        )


def _run_python(b: Block, ns: dict) -> None:
    out = io.StringIO()
    try:
        code = compile(b.code, f"{b.page}:{b.line}", "exec")
        with contextlib.redirect_stdout(out):
            exec(code, ns)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] in EXTRAS or (e.name or "").startswith("ns"):
            pytest.skip(f"{b.page}:{b.line}: the optional module {e.name} is not installed")
        raise
    if b.check:
        _compare(b, out.getvalue())


def _run_bash(b: Block, cwd: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", b.code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BASH_TIMEOUT_S,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{b.page}:{b.line}: the bash block exits with {proc.returncode}\n{b.code}--- stdout\n"
            f"{proc.stdout[-4000:]}--- stderr\n{proc.stderr[-4000:]}"
        )
    if b.check:
        _compare(b, proc.stdout)


def _runnable_pages() -> list[str]:
    return [
        str(p.relative_to(ROOT))
        for p in pages()
        if any(b.lang in RUN and b.not_run is None for b in parse(p))
    ]


@pytest.mark.parametrize("page", _runnable_pages())
def test_page_blocks_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [b for b in parse(ROOT / page) if b.lang in RUN and b.not_run is None]
    for name in ("scenarios", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = dict(os.environ)
    env["PATH"] = f"{_bin_dir(tmp_path)}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    env.pop("PYTEST_CURRENT_TEST", None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ns: dict = {"__name__": "__doc_page__"}
    from ainet_gym.agents.registry import AGENTS, available_policies

    available_policies()  # the built-in agents registered, so that the snapshot holds them
    agents = dict(AGENTS)  # a page may register agents of its own: leave the registry as it was
    t0 = time.perf_counter()
    try:
        for b in blocks:
            if b.lang == "python":
                _run_python(b, ns)
            else:
                _run_bash(b, tmp_path, env)
    finally:
        for name in set(AGENTS) - set(agents):
            del AGENTS[name]
        AGENTS.update(agents)
    print(f"{page}: {len(blocks)} blocks in {time.perf_counter() - t0:.1f} s")


def summary() -> list[str]:
    """The lines the doc-block runner prints: blocks run here, marked not-run, skipped here for an extra."""
    run, skipped, where, missing = counts()
    total = run + skipped + len(missing)
    lines = [
        f"doc blocks (README.md, docs/): {run} run, {skipped + len(missing)} skipped of {total}: "
        f"{skipped} marked not-run ({skipped / total:.1%}; at most {MAX_SKIPPED_FRACTION:.0%}), {len(missing)} "
        "for an optional module not installed here (their make targets run them)"
    ]
    lines += [f"  not-run {w}" for w in where]
    lines += [f"  no extra {w}" for w in missing]
    return lines


def test_at_most_a_tenth_of_the_blocks_are_skipped() -> None:
    """At most a tenth of the blocks is marked not-run (runs nowhere); the blocks skipped here for an
    optional module run in that module's make target (the next test)."""
    run, skipped, where, missing = counts()
    total = run + skipped + len(missing)
    print("\n".join(summary()))
    assert total > 0
    assert skipped <= MAX_SKIPPED_FRACTION * total, (
        f"{skipped} of {total} doc blocks are marked not-run, more than {MAX_SKIPPED_FRACTION:.0%}:\n"
        + "\n".join(where)
    )


def _recipe(makefile: str, target: str) -> str:
    """The recipe lines of ``target`` in the Makefile's text (tab-indented lines after ``target:``)."""
    m = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)*)", makefile, re.M)
    assert m, f"Makefile: no target {target}"
    return m.group(1)


def test_blocks_skipped_for_an_extra_run_in_its_make_target() -> None:
    """A block that imports an optional module (skipped where it is not installed) runs in the make target
    that installs it: ``check`` runs every test; ``check-examples`` and ``check-rllib`` must run
    tests/project/test_docs.py on the pages of their modules (fails on the old code: the pages
    docs/research-code.md and docs/cluster.md ran in no target, their blocks skipped everywhere)."""
    makefile = (ROOT / "Makefile").read_text()
    need: dict[str, set[str]] = {}
    for p in pages():
        for b in parse(p):
            if b.lang in RUN and b.not_run is None:
                for m in extras_imported(b):
                    assert m in EXTRA_TARGETS, f"{b.page}:{b.line}: imports {m}: add it to EXTRA_TARGETS"
                    need.setdefault(EXTRA_TARGETS[m], set()).add(b.page)
    assert need, "no doc block imports an optional module: this test checks nothing"
    for target, pages_ in need.items():
        if target == "check":
            assert "pytest" in _recipe(makefile, "test") and "tests" in _recipe(makefile, "test")
            continue
        docs_lines = [
            ln for ln in _recipe(makefile, target).splitlines() if "tests/project/test_docs.py" in ln
        ]
        for page in sorted(pages_):
            assert any(page in ln for ln in docs_lines), (
                f"make {target} does not run tests/project/test_docs.py on {page}, whose blocks need its extra"
            )


def test_the_parser_sees_markers_and_refuses_aliases(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "<!-- not-run: too long -->\n```bash\nsleep 1000\n```\n\n<!-- check-output -->\n```python\nprint(1)\n```\n"
        "\n```text\n1\n```\n\n```yaml\na: 1\n```\n"
    )
    blocks = parse(page, tmp_path)
    assert [(b.lang, b.not_run, b.check) for b in blocks] == [
        ("bash", "too long", False),
        ("python", None, True),
        ("text", None, False),
        ("yaml", None, False),
    ]
    assert blocks[1].expected == "1\n"
    page.write_text("```sh\nls\n```\n")
    with pytest.raises(AssertionError, match="write ```bash"):
        parse(page, tmp_path)
    page.write_text("<!-- check-output -->\n```python\nprint(1)\n```\n")
    with pytest.raises(AssertionError, match="needs a ```text block"):
        parse(page, tmp_path)


def test_a_wrong_output_fails() -> None:
    b = Block("p.md", 1, 3, "python", "print(2)\n", None, True, "1\n")
    with pytest.raises(pytest.fail.Exception, match="differs"):
        _run_python(b, {})
    b.expected = "...2...\n"
    _run_python(b, {})


def test_the_readme_stays_short_and_lists_every_base_id() -> None:
    """The README is what a newcomer reads (at most 250 lines; the rest lives in docs/), and its id table has
    a row for every base id ``ainet_gym/<Name>-v0`` of the registry."""
    import gymnasium as gym

    import ainet_gym  # noqa: F401  (registers the ids)

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    base = [i for i in gym.registry if re.fullmatch(r"ainet_gym/[A-Za-z0-9]+-v\d+", i)]
    assert base
    rows = {m.group(1) for m in re.finditer(r"^\| `(ainet_gym/[^`]+)` \|", text, re.M)}
    assert set(base) <= rows, f"README.md's id table misses {sorted(set(base) - rows)}"


def test_every_name_of_all_gets_an_api_page_under_its_own_name() -> None:
    """The docs hook makes ``api/<name>.md`` for every name of ``ainet_gym.__all__`` (fails on the old code:
    ``__version__``'s page was ``api/version.md``, so a check of ``api/__version__/`` found none)."""
    import ainet_gym

    spec = importlib.util.spec_from_file_location("_gen_pages", ROOT / "docs" / "_scripts" / "gen_pages.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen._api_pages()
    missing = [n for n in ainet_gym.__all__ if f"api/{n}.md" not in gen._pages]
    assert not missing, f"no API page for {missing}"
    assert all("::: " in gen._pages[f"api/{n}.md"] for n in ainet_gym.__all__)
