"""The "value outside a set of names" error, written once (``ainet_gym/errors.py``, issue 31s): its form, and no
module writing it again by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ainet_gym.errors import check_choice, choice_message, names_message

PKG = Path(__file__).resolve().parents[2] / "ainet_gym"


def test_the_form_names_field_value_problem_and_allowed() -> None:
    assert (
        choice_message("agents", "spine", ("leaf", "all")) == "agents = 'spine': unknown; allowed: leaf, all"
    )
    assert (
        choice_message("action_mode", "path", {"choose": 1}, problem="not a choose mode")
        == "action_mode = 'path': not a choose mode; allowed: choose"
    )
    assert choice_message("policy", "x@y", []) == "policy = 'x@y': unknown; allowed: none"
    assert choice_message("r", 3, ("a",), more=" or a number") == "r = 3: unknown; allowed: a or a number"


def test_a_long_value_is_cut_with_its_length() -> None:
    msg = choice_message("act", "x" * 500, ("relu",))
    assert msg == f"act = {repr('x' * 500)[:40]}... (502 characters): unknown; allowed: relu"


def test_a_list_of_names_shows_the_list_and_the_unknown_ones() -> None:
    assert (
        names_message("info_keys", ("links", "link", "flow"), ("links", "flows"))
        == "info_keys = ('links', 'link', 'flow'): unknown 'link', 'flow'; allowed: links, flows"
    )


@pytest.mark.parametrize("value", ["pth", ["path"], None, 1.5])
def test_check_choice_refuses_with_the_error_asked(value: object) -> None:
    class MyError(ValueError):
        pass

    with pytest.raises(MyError, match=r"^mode = .*: unknown; allowed: path, split$"):
        check_choice("mode", value, {"path": 0, "split": 1}, error=MyError)
    check_choice("mode", "split", {"path": 0, "split": 1})  # allowed: no error


#: hand-written forms of the message the helper writes, as they were before it (issue 31s)
_HAND_WRITTEN = re.compile(r"""(: unknown; allowed: \{|is not known; allowed|is not a known \w+; allowed|"""
                           r"""unknown (variant|algorithm) \{.*; allowed)""")  # fmt: skip


def test_no_module_writes_the_message_by_hand() -> None:
    found = [
        f"{path.relative_to(PKG)}:{i}"
        for path in sorted(PKG.rglob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if _HAND_WRITTEN.search(line)
    ]
    assert not found, found


@pytest.mark.parametrize(
    ("line", "hand_written"),
    [
        ('raise ValueError(f"algo = {algo!r}: unknown; allowed: {", ".join(ALGO_MODES)}")', True),
        ('raise ValueError(f"policy {name!r} is not known; allowed: {x}")', True),
        ('_fail(f"{name}: tier {tier!r} is not a known tier; allowed: {t}")', True),
        ('check_choice("algo", algo, ALGO_MODES)', False),
    ],
)
def test_the_hand_written_check_finds_what_it_must(line: str, hand_written: bool) -> None:
    assert bool(_HAND_WRITTEN.search(line)) is hand_written
