"""The line ``ainet-gym train`` prints when a run ends (both frameworks print it: :func:`format_run`)."""

from __future__ import annotations

from types import SimpleNamespace

from ainet_gym.agents.train import format_run


def _result(interrupted: bool, final: dict[str, float]) -> SimpleNamespace:
    return SimpleNamespace(
        total_timesteps=4096, seconds=12.34, steps_per_second=331.9, final=final, interrupted=interrupted
    )


def test_run_line_says_steps_time_speed_and_the_last_episodes() -> None:
    line = format_run(_result(False, {"gpu_utilization": 0.8125, "collisions": 2.0}))
    assert line == (
        "trained 4096 steps in 12.3 s (332 steps/s); last episodes: GPU util 0.812, collisions 2.000"
    )


def test_run_line_of_an_interrupted_run_without_finished_episodes() -> None:
    line = format_run(_result(True, {}))
    assert line == "interrupted after 4096 steps in 12.3 s (332 steps/s); last episodes: no episode finished"
