"""What both frameworks' ``ainet-gym train`` share (:mod:`ainet_gym.agents.train`,
:mod:`ainet_gym.agents.rllib_train`): the CleanRL-style run name (:func:`run_name`), the arguments both configs
take (:func:`train_arguments`) and the lines a run ends with (:func:`format_final`, :func:`format_run`,
:func:`report_run`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "format_final",
    "format_run",
    "report_run",
    "run_name",
    "train_arguments",
]


def run_name(scenario: str, algo: str, seed: int, when: float | None = None) -> str:
    """CleanRL-style run name ``{scenario}__{algo}__{seed}__{unix time}``."""
    return f"{scenario}__{algo}__{seed}__{int(time.time() if when is None else when)}"


def format_final(final: dict[str, float]) -> str:
    """One line of the last episodes' fabric metrics."""
    if not final:
        return "no episode finished"
    names = {
        "gpu_utilization": "GPU util",
        "step_time_ratio": "step/ideal",
        "max_link_utilization": "max link util",
        "collisions": "collisions",
    }
    return ", ".join(f"{lbl} {final[k]:.3f}" for k, lbl in names.items() if k in final)


class _RunResult(Protocol):
    """What :func:`format_run` reads of a training result (:class:`TrainResult`, the RLlib one)."""

    total_timesteps: int
    seconds: float
    steps_per_second: float
    final: dict[str, float]
    interrupted: bool


def format_run(res: _RunResult) -> str:
    """The line ``ainet-gym train`` prints when a run ends: steps, time, speed and the last episodes'
    fabric metrics (:func:`format_final`)."""
    state = "interrupted after" if res.interrupted else "trained"
    return (
        f"{state} {res.total_timesteps} steps in {res.seconds:.1f} s ({res.steps_per_second:.0f} steps/s); "
        f"last episodes: {format_final(res.final)}"
    )


def train_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ainet-gym train`` arguments that both frameworks' configs take (:class:`TrainConfig` and
    :class:`~ainet_gym.agents.rllib_train.RLlibTrainConfig`), by field name."""
    return {
        "scenario": args.scenario,
        "algo": args.algo,
        "action_mode": args.action_mode,
        "timesteps": args.timesteps,
        "seed": args.seed,
        "logdir": args.logdir,
        "out": args.out,
        "resume": args.resume,
        "progress": not args.no_progress,
        "overwrite": bool(getattr(args, "overwrite", False)),
    }


def report_run(res: Any, logdir: str | Path, saved: str) -> int:
    """Print the end of an ``ainet-gym train`` run (:func:`format_run`, the line ``saved`` that says where
    the result is, where its TensorBoard logs are) and return the exit code: 130 if it was interrupted."""
    print(format_run(res))
    print(saved)
    print(f"logs:  tensorboard --logdir {Path(logdir)}  (run {res.run_name})")
    return 130 if res.interrupted else 0
