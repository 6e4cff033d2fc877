"""The examples in the package's docstrings run (``ainet_gym`` and ``ainet_gym.agents``).

Modules are imported under their package names (``ainet_gym.agents.registry``, not the repository path
``ainet_gym/agents/registry.py``); a module whose optional extra is not installed (its import raises an ImportError
naming the extra, e.g. RLlib's ``ray``) is skipped with that reason.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
import tomllib
from pathlib import Path

import pytest

import ainet_gym
import ainet_gym.agents


def _modules() -> list[str]:
    names = ["ainet_gym", "ainet_gym.agents"]
    for pkg in (ainet_gym, ainet_gym.agents):
        for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
            if pkg is ainet_gym and info.name.startswith(("ainet_gym.scenarios", "ainet_gym.pretrained")):
                continue  # data folders
            names.append(info.name)
    return sorted(set(names))


MODULES = _modules()
#: the optional extras of pyproject.toml: a module that needs one raises an ImportError naming it
EXTRAS = set(
    tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
)


def _missing_extra(e: ImportError) -> str | None:
    """The optional extra an ImportError names ("... the optional extra 'rllib' ..."), if it names one."""
    m = re.search(r"optional extra '([\w-]+)'", str(e))
    return m.group(1) if m and m.group(1) in EXTRAS else None


_FINDER = doctest.DocTestFinder(exclude_empty=True)


def _with_examples() -> list[str]:
    """Modules with docstring examples; a module whose optional extra is missing is kept (it skips)."""
    out = []
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            out.append(name)
            continue
        if any(t.examples for t in _FINDER.find(module, name)):
            out.append(name)
    return out


def test_the_walk_finds_every_room() -> None:
    for room in (
        "ainet_gym.sim.allocator",
        "ainet_gym.fabric.topology",
        "ainet_gym.envs.env",
        "ainet_gym.agents.registry",
    ):
        assert room in MODULES


@pytest.mark.parametrize("name", _with_examples())
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as e:
        if _missing_extra(e) is None:
            raise  # a broken import of the package itself fails, only a missing optional extra skips
        pytest.skip(f"{name}: {e}")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in _FINDER.find(module, name) if t.examples]
    for t in tests:
        runner.run(t, out=lambda s: None)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} fail"


def test_only_a_missing_optional_extra_skips() -> None:
    named = ImportError("ainet_gym.envs.rllib needs Ray RLlib, the optional extra 'rllib': pip install ...")
    assert _missing_extra(named) == "rllib"
    assert _missing_extra(ImportError("No module named 'ainet_gym.sim.kernelz'")) is None
    assert _missing_extra(ImportError("needs the optional extra 'nonsense'")) is None
