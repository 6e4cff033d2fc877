"""The wording of one error written once: a value outside a set of names.

Every such message reads ``<field> = <value>: <problem>; allowed: <name>, <name>, ...[<more>]``, the problem
``unknown`` unless the value is a name of another set (``not a choose mode``, ``not registered``). The caller
picks the exception (``ValueError``, a ``ModelFileError``, ``SystemExit`` for a script) and may put its
context in ``field`` (``"model 'x.zip': algo"``). Nothing of the package is imported here, so every room may
use it. The scenario loader has its own structured error (:class:`ainet_gym.scenario.ScenarioError`, with a
"did you mean" hint), which ends in the same ``; allowed: ...``.

>>> choice_message("action_mode", "pth", ("path", "split"))
"action_mode = 'pth': unknown; allowed: path, split"
>>> choice_message("reward", "x", ("shared", "local"), more=" or a number in [0, 1]")
"reward = 'x': unknown; allowed: shared, local or a number in [0, 1]"
>>> names_message("sections", ["engine", "bogus"], ("engine", "env"))
"sections = ['engine', 'bogus']: unknown 'bogus'; allowed: engine, env"
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["check_choice", "choice_message", "names_message"]

#: a value longer than this (its repr) is shown cut, with its length
_SHOWN_MAX = 60


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_MAX else f"{text[:40]}... ({len(text):,} characters)"


def choice_message(
    field: str, value: Any, allowed: Iterable[Any], problem: str = "unknown", more: str = ""
) -> str:
    """``"<field> = <value>: <problem>; allowed: <allowed, comma-separated><more>"`` (``none`` when
    ``allowed`` is empty; a long value is cut, with its length)."""
    names = ", ".join(map(str, allowed)) or "none"
    return f"{field} = {_shown(value)}: {problem}; allowed: {names}{more}"


def names_message(field: str, given: Sequence[Any], allowed: Iterable[Any], more: str = "") -> str:
    """The message for a list of names ``given`` of which some are not in ``allowed``: the list as given,
    then the unknown ones (``"sections = ['a', 'x']: unknown 'x'; allowed: a, b"``)."""
    names = list(allowed)
    bad = ", ".join(repr(g) for g in given if g not in names)
    return choice_message(field, given, names, f"unknown {bad}", more)


def check_choice(
    field: str,
    value: Any,
    allowed: Iterable[Any],
    problem: str = "unknown",
    more: str = "",
    error: type[Exception] = ValueError,
) -> None:
    """Raise ``error(choice_message(...))`` unless ``value`` is one of ``allowed`` (a mapping: its keys; an
    unhashable value is refused, not a ``TypeError``).

    >>> check_choice("vote", "label", ("label", "value"))
    >>> check_choice("vote", ["label"], {"label": 1, "value": 2})
    Traceback (most recent call last):
    ...
    ValueError: vote = ['label']: unknown; allowed: label, value
    """
    names = list(allowed)  # compared with ==: no TypeError for an unhashable value
    if value not in names:
        raise error(choice_message(field, value, names, problem, more))
