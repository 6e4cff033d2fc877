"""The options of a ``reset``: the envs take none (:func:`check_reset_options` for the Gymnasium envs,
:func:`reset_options_problem` for the PettingZoo env's warning).
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_reset_options", "reset_options_problem"]


def reset_options_problem(options: Any) -> str | None:
    """What is wrong with the ``options`` of a ``reset``, or None when they are ``None`` or an empty mapping
    (the envs take no reset options). The Gymnasium envs raise it (:func:`check_reset_options`); the PettingZoo
    env warns with it for PettingZoo's API-test probe and refuses every other option naming keys and values
    (:func:`ainet_gym.envs.multiagent.check_parallel_reset_options`)."""
    if options is None or (isinstance(options, dict) and not options):
        return None
    shown = sorted(map(str, options)) if isinstance(options, dict) else type(options).__name__
    return (
        f"reset options = {shown}: not supported; allowed: None or {{}} (the env takes no reset options: "
        "a scenario, its seed and the episode length are set at construction and by seed=)"
    )


def check_reset_options(options: Any) -> None:
    """The ``options`` of a ``reset``: the envs take none, so ``None`` or an empty mapping; anything else
    (e.g. gymnasium's ``{"reset_mask": ...}`` for a partial reset) was ignored without a word before.

    Raises
    ------
    ValueError
        Naming the options given and what is allowed.
    """
    problem = reset_options_problem(options)
    if problem is not None:
        raise ValueError(problem)
