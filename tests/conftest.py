"""Test-session hooks, and the fixtures tests of several folders share.

Fixtures here are what a test takes as given: a scenario built the same way every time (``collision``,
``four_spines``, ``small_spine_leaf_scenario``: ``small_spine_leaf()`` with its defaults) or a check bound to another
fixture (``one_line`` reads ``capsys``). A test that takes one of these scenarios as its setup takes the fixture;
the builders stay plain functions in ``tests/_scenarios.py`` too, because they are also called with arguments
(``small_spine_leaf(steps, **dynamics)``, ``one_job(fabric, job, interval_ms)``, ...), at collection time (module
constants, ``parametrize`` lists and their lambdas) and by helpers that are not tests (``_ppo_zip``,
``_two_fabrics``): a fixture takes no arguments at the call and does not exist at collection. ``tests/_states.py``'s
``episode_arrays(state)`` and ``assert_states_equal(a, b)`` take the states under test, so they stay functions.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _scenarios import collision_scenario, four_spines_two_rings, small_spine_leaf


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


@pytest.fixture
def collision() -> dict:
    """The two-job collision case (``tests/_scenarios.py:collision_scenario``): on one spine the two symmetric
    jobs collide and run at half rate; a fresh dict for each test."""
    return collision_scenario()


@pytest.fixture
def four_spines() -> dict:
    """The isolating plans' fabric (``tests/_scenarios.py:four_spines_two_rings``): 4 leaves x 4 spines at 1:1,
    two 8-GPU rings spread 2 GPUs per leaf; a fresh dict for each test."""
    return four_spines_two_rings()


@pytest.fixture
def small_spine_leaf_scenario() -> dict:
    """``tests/_scenarios.py:small_spine_leaf()`` with its defaults: 16 GPUs on 4 leaves x 2 spines (2:1), two ring
    jobs, a periodic storage background, 12 steps, named ``small``; a fresh dict for each test."""
    return small_spine_leaf()


@pytest.fixture
def one_line(capsys: pytest.CaptureFixture[str]) -> Callable[..., str]:
    """``one_line(*must)``: the single line on stderr since the last read, checked to contain every string of
    ``must`` (a refused command prints one line)."""

    def check(*must: str) -> str:
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        for m in must:
            assert m in err[0], err[0]
        return err[0]

    return check
