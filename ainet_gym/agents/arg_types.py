"""The checked argument types and the flags several command lines share: a value outside its range is
refused with a message that names it and what is allowed, nothing is clipped (:func:`int_arg`, :func:`float_arg`,
:func:`unit_interval_arg`; the bounds :data:`SEED_MAX`, :data:`TRAIN_SEED_MAX`; ``--seed``/``--steps``:
:func:`add_seed_steps_args`, :func:`add_episode_steps_arg`). Light (the standard library only): ``ainet-gym``'s
parsers (:mod:`ainet_gym.cli.args`) and the module command lines (``python -m ...``) share it."""

from __future__ import annotations

import argparse
import math

__all__ = [
    "SEED_MAX",
    "TRAIN_SEED_MAX",
    "add_episode_steps_arg",
    "add_seed_steps_args",
    "float_arg",
    "int_arg",
    "shown_text",
    "unit_interval_arg",
]


#: Largest episode seed (numpy's ``SeedSequence`` takes any non-negative integer; 63 bits keep it an int64).
SEED_MAX = 2**63 - 1
#: Largest training seed: torch and numpy's legacy seeding take 32-bit seeds (plus the episode offset).
TRAIN_SEED_MAX = 2**31 - 1


def shown_text(text: str) -> str:
    """``text`` as an error message shows it: whole up to 40 characters, else its start and its length."""
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text):,} characters)"


def int_arg(lo: int, hi: int | None = None) -> type:
    """An argparse type: an integer in [lo, hi] (no upper bound if ``hi`` is None)."""

    def parse(text: str) -> int:
        rng = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
        shown = shown_text(text)
        if len(text.strip()) > 100:  # Python refuses integers above 4,300 digits; none fits a flag
            raise argparse.ArgumentTypeError(f"{shown} is out of range; allowed: {rng}")
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown!r} is not an integer") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{shown} is out of range; allowed: {rng}")
        return v

    parse.__name__ = "integer"
    return parse  # type: ignore[return-value]


def add_seed_steps_args(parser: argparse.ArgumentParser, steps_help: str) -> None:
    """``--seed`` (an episode seed in [0, SEED_MAX], default 0) and ``--steps`` (decision intervals in [1,
    1e7], default None): the pair of the two crosscheck command lines (``ainet-gym crosscheck`` and ``python -m
    ainet_gym.checks.crosscheck``), declared once so that their ranges stay the same."""
    parser.add_argument("--seed", type=int_arg(0, SEED_MAX), default=0)
    parser.add_argument("--steps", type=int_arg(1, 10_000_000), default=None, help=steps_help)


def add_episode_steps_arg(parser: argparse.ArgumentParser) -> None:
    """``--steps``, the intervals of each episode (an integer >= 1; default None: the scenario's
    ``episode_steps``), as the commands that play episodes of several policies take it (``ainet-gym
    leaderboard``, ``python -m ainet_gym.agents.twin sweep``, ``python -m ainet_gym.checks.reroute``)."""
    parser.add_argument(
        "--steps", type=int_arg(1), default=None, help="intervals per episode (default: the scenario's)"
    )


def float_arg(what: str, *, zero_ok: bool = False, negative_ok: bool = False, inf_ok: bool = False) -> type:
    """An argparse type: a finite number > 0 (>= 0 with ``zero_ok``; any finite number with ``negative_ok``;
    ``inf`` too with ``inf_ok``; ``what`` names it in the message). NaN is always refused."""
    bound = "" if negative_ok else (" >= 0" if zero_ok else " > 0")
    kind = "a number (inf allowed)" if inf_ok else "a finite number"

    def parse(text: str) -> float:
        shown = shown_text(text)
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown!r} is not a number; expected {what}{bound}") from None
        bad_sign = not negative_ok and (v < 0 or (v == 0 and not zero_ok))
        if math.isnan(v) or (math.isinf(v) and not inf_ok) or bad_sign:
            raise argparse.ArgumentTypeError(f"{shown} is out of range; allowed: {what}, {kind}{bound}")
        return v

    parse.__name__ = what
    return parse  # type: ignore[return-value]


def unit_interval_arg(what: str) -> type:
    """An argparse type: a number in (0, 1] (a discount factor, a share)."""

    def parse(text: str) -> float:
        shown = shown_text(text)
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{shown!r} is not a number; expected {what} in (0, 1]"
            ) from None
        if not 0 < v <= 1:  # also refuses nan
            raise argparse.ArgumentTypeError(f"{shown} is out of range; allowed: {what}, a number in (0, 1]")
        return v

    parse.__name__ = what
    return parse  # type: ignore[return-value]
