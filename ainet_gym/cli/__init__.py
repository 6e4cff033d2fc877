"""The ``ainet-gym`` command line: scenarios, simulate, train, evaluate, bench, demo, leaderboard.

Each subcommand's arguments sit next to its handler, in a module of one concern: ``scenarios`` (scenarios,
simulate, export-fabric), ``learning`` (train, convert-rllib, evaluate, sweep, demo, leaderboard) and
``checks`` (bench, crosscheck, soak); ``args`` holds the checked argument types they share.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ainet_gym.cli import checks, learning, scenarios
from ainet_gym.cli.args import TRUST, Parser

__all__ = ["TRUST", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``ainet-gym``: every subcommand, in the order ``--help`` lists them."""
    p = Parser(prog="ainet-gym", description=__doc__.split("\n")[0])
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in (
        scenarios.add_scenarios,
        scenarios.add_simulate,
        scenarios.add_export_fabric,
        learning.add_train,
        learning.add_convert_rllib,
        learning.add_evaluate,
        learning.add_sweep,
        checks.add_bench,
        checks.add_crosscheck,
        learning.add_demo,
        checks.add_soak,
        learning.add_leaderboard,
    ):
        add(sub)
    for s in sub.choices.values():  # --debug also after the command (default: the top-level value)
        s.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of an error"
        )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ainet-gym`` console script.

    The project's own errors (a bad scenario, argument, action, model or output path: ``ValueError``,
    ``OSError``, ``ImportError``, ``RuntimeError``, ``gymnasium.error.Error``) print one line,
    ``ainet-gym COMMAND: error: ...``, and exit with status 2; ``--debug`` shows the traceback instead. A
    reader that closes the pipe early (``ainet-gym scenarios | head -3``) ends the command quietly with
    status 141 (128 + SIGPIPE, as shell tools do).
    """
    from gymnasium import error as gym_error

    from ainet_gym.scenario.loader import ScenarioError

    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # block-buffered output (a pipe) is written here, where a closed pipe is caught
        return code
    except KeyboardInterrupt:
        print(f"ainet-gym {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader is gone: point stdout at /dev/null so the interpreter's final flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (ScenarioError, ValueError, OSError, ImportError, RuntimeError, gym_error.Error) as e:
        if args.debug:
            raise
        text = " ".join(str(e).split()) or type(e).__name__
        print(f"ainet-gym {args.command}: error: {text}", file=sys.stderr)
        return 2
