"""What every subcommand's parser shares: the one-line-error parser, the checked argument types, the bounds.

An argument type here refuses a bad value with a message that names the value and what is allowed; argparse
adds the flag (``ainet-gym train: error: argument --seed: -1 is out of range; allowed: ...``). Nothing is
clipped.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

from ainet_gym.agents.arg_types import (
    SEED_MAX,
    TRAIN_SEED_MAX,
    add_episode_steps_arg,
    add_seed_steps_args,
    float_arg,
    int_arg,
    unit_interval_arg,
)
from ainet_gym.agents.arg_types import shown_text as _shown
from ainet_gym.agents.module_cli import OneLineParser

__all__ = [
    "SCENARIO",
    "SEED_MAX",
    "TRAIN_SEED_MAX",
    "TRUST",
    "Parser",
    "Subparsers",
    "add_episode_steps_arg",
    "add_output",
    "add_seed_steps_args",
    "deferred",
    "float_arg",
    "int_arg",
    "seconds_arg",
    "seeds_arg",
    "text_arg",
    "unit_interval_arg",
]

#: The object ``add_subparsers`` returns, which every ``add_*`` function of the subcommand modules fills.
Subparsers = argparse._SubParsersAction

#: Shown in the ``--help`` of every command that loads a model file.
TRUST = (
    "Model files hold pickled Python objects and unpickling a crafted file can run code: the loader checks "
    "that a file is a model of the expected algorithm and unpickles it with an allowlist of classes, but "
    "load only model files you trust."
)


#: An ArgumentParser whose errors are one line (``ainet-gym CMD: error: ...``, exit 2); the module command
#: lines share it from the light ``ainet_gym.agents.module_cli`` (no import of this package).
Parser = OneLineParser


def text_arg(what: str) -> type:
    """An argparse type: any text that is not blank (``what`` names it in the message)."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"empty; expected {what}")
        return text

    parse.__name__ = what
    return parse  # type: ignore[return-value]


def seeds_arg(text: str) -> str:
    """An argparse type: a seed list as ``evaluate`` takes it (``1,2,3`` or ``1-10``), checked, kept as text."""
    from ainet_gym.agents.evaluate import parse_seeds

    try:
        parse_seeds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def seconds_arg(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (below 1e9)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)!r} is not a number") from None
    if not 0 < v < 1e9:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is out of range; allowed: a number of seconds in (0, 1e9)"
        )
    return v


#: A scenario argument: a shipped scenario name or a YAML path (the loader checks it; blank is refused here).
SCENARIO = text_arg("a shipped scenario name or a YAML path")


def deferred(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The subcommand ``module.name(args)``, its module (agents, torch, the bench) imported only when it runs."""

    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), name)(args)

    return run


def add_output(s: argparse.ArgumentParser, what: str, out_help: str, overwrite_help: str) -> None:
    """The output rule's two flags: ``--out`` (``what``: a directory, or a model path) and ``--overwrite``
    (without it, a command never replaces an existing file: ``ainet_gym.agents.outputs``)."""
    s.add_argument("--out", type=text_arg(what), default=None, help=out_help)
    s.add_argument("--overwrite", action="store_true", help=overwrite_help)
