"""A module's command line (``python -m ainet_gym.agents.*``, ``ainet_gym.checks.*``, ...) as ``ainet-gym`` runs
its own: one-line errors, ``PROG: error: ...`` and exit 2, from the parser (:class:`OneLineParser`) and from the
command (:func:`run_module_cli`). The output rule on the file such a command writes is
:mod:`ainet_gym.agents.outputs`' (:func:`~ainet_gym.agents.outputs.run_writing_module_cli`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

__all__ = [
    "OneLineParser",
    "run_module_cli",
]


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``PROG: error: ... (see PROG --help)``, exit 2, without
    argparse's usage block: the parser of ``ainet-gym`` (``ainet_gym.cli.args.Parser``) and of the module
    command lines (``python -m ainet_gym.agents.*``, ``ainet_gym.checks.*``); its subcommands' parsers are of
    this class too (``add_subparsers`` makes them of the parent's class). ``--help`` prints the full help."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def run_module_cli(prog: str, body: Callable[[], int]) -> int:
    """Run the command ``body`` of a module's command line (``python -m ...``) as ``ainet-gym`` runs its
    own: the project's errors (a bad scenario, argument, model or output path: ``ValueError``, ``OSError``,
    ``ImportError``, ``RuntimeError``, ``gymnasium.error.Error``) print one line, ``PROG: error: ...``, to
    stderr and return 2 instead of a traceback; ``AINET_GYM_DEBUG=1`` in the environment shows the traceback."""
    import sys

    from gymnasium import error as gym_error

    try:
        return int(body() or 0)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, ImportError, RuntimeError, gym_error.Error) as e:
        if os.environ.get("AINET_GYM_DEBUG", "") not in ("", "0"):
            raise
        text = " ".join(str(e).split()) or type(e).__name__
        print(f"{prog}: error: {text}", file=sys.stderr)
        return 2
