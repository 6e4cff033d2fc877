"""``read_yaml`` parses a scenario file once (the nesting limit checked as the document is composed) and
returns, or raises, what the two passes of before did: ``_yaml_depth_ok`` over the whole stream, then the
load (issue-31zu2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ainet_gym.scenario import files
from ainet_gym.scenario.files import _Loader, _yaml_depth_ok, read_yaml, scenarios_dir
from ainet_gym.scenario.rules import LIMITS, ScenarioError


def _two_passes(path: Path) -> object:
    """What ``read_yaml`` returned or raised before the single pass (its body, with the two passes)."""
    text = path.read_text(encoding="utf-8")
    source = str(path)
    try:
        _yaml_depth_ok(text, source, path)
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ScenarioError(
            source,
            "",
            f"YAML syntax error{where}: {problem}",
            f"a YAML mapping with keys {', '.join(files.TOP_KEYS)}",
            source,
        ) from None


def _outcome(fn, path: Path) -> tuple[str, str]:
    """("value", its repr) or (the exception's type name, its message)."""
    try:
        return "value", repr(fn(path) if fn is _two_passes else fn(path, str(path)))
    except Exception as e:
        return type(e).__name__, str(e)


def _nest(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


_LIMIT = int(LIMITS["yaml_depth"])
_TEXTS = {
    "at-the-limit": f"name: x\nv: {_nest(_LIMIT - 1)}\n",
    "one-too-deep": f"name: x\nv: {_nest(_LIMIT)}\n",
    "block-too-deep": "name: x\n"
    + "".join("  " * i + f"k{i}:\n" for i in range(_LIMIT + 1))
    + "  " * (_LIMIT + 1)
    + "v: 1\n",
    "too-deep-then-syntax-error": f"name: x\nv: {_nest(_LIMIT + 3)}\nw: {{a: 1\n",
    "syntax-error-then-too-deep": f"name: x\nw: {{a: 1\nv: {_nest(_LIMIT + 3)}\n",
    "too-deep-in-second-document": f"name: x\n---\nv: {_nest(_LIMIT + 3)}\n",
    "second-document": "name: x\n---\nname: y\n",
    "duplicate-key": "name: x\nfabric: {}\nfabric: {}\n",
    "duplicate-key-and-too-deep": f"name: x\nname: y\nv: {_nest(_LIMIT + 1)}\n",
    "long-number": "name: x\nv: " + "9" * 40 + "\n",
    "merge-and-anchor": "a: &base {x: 1, y: [1, 2]}\nb: {<<: *base, y: 3}\nc: *base\n",
    "undefined-alias": "a: *nope\n",
    "float-without-dot": "a: 1e9\nb: 2.5e-3\nc: 7\n",
    "empty": "",
    "top-level-list": "- 1\n- 2\n",
}


@pytest.mark.parametrize("name", sorted(_TEXTS))
def test_one_pass_returns_or_raises_what_two_passes_did(tmp_path, name):
    p = tmp_path / "s.yaml"
    p.write_text(_TEXTS[name])
    assert _outcome(read_yaml, p) == _outcome(_two_passes, p)


def test_the_nesting_error_is_still_named(tmp_path):
    p = tmp_path / "deep.yaml"
    p.write_text(_TEXTS["one-too-deep"])
    with pytest.raises(ScenarioError, match=rf"nested more than {_LIMIT} deep at line 2, column "):
        read_yaml(p, str(p))


def test_a_lowered_limit_applies_to_the_single_pass(tmp_path, monkeypatch):
    monkeypatch.setitem(LIMITS, "yaml_depth", 3)
    p = tmp_path / "s.yaml"
    p.write_text("a: {b: [1, {c: 2}]}\n")  # four levels
    assert _outcome(read_yaml, p)[0] == "ScenarioError"
    assert _outcome(read_yaml, p) == _outcome(_two_passes, p)
    p.write_text("a: {b: [1, 2]}\n")
    assert read_yaml(p, str(p)) == {"a": {"b": [1, 2]}}


def test_every_shipped_scenario_reads_the_same():
    paths = sorted(scenarios_dir().glob("*.yaml"))
    assert paths
    for p in paths:
        assert repr(read_yaml(p, str(p))) == repr(_two_passes(p)), p.name
