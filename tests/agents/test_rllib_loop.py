"""The RLlib training loop without Ray: a fake algorithm stands in for ``Algorithm.train()``, so the loop's
bookkeeping (when it stops, what it logs, what an interrupt keeps) is tested in the main suite; the RLlib venv
(``make check-rllib``) runs the same loop on real RLlib."""

from __future__ import annotations

import csv
from pathlib import Path

from ainet_gym.agents.rllib_train import _train_loop, _write_progress_csv


class _Algo:
    """Samples ``per_iter`` env steps per ``train()``; raises KeyboardInterrupt on iteration ``stop_at``."""

    def __init__(self, per_iter: int, stop_at: int | None = None) -> None:
        self.per_iter, self.stop_at, self.calls = per_iter, stop_at, 0

    def train(self) -> dict:
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return {
            "training_iteration": self.calls,
            "env_runners": {"num_env_steps_sampled": self.per_iter, "episode_return_mean": 0.5 * self.calls},
        }


class _Writer:
    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []
        self.closed = False

    def add_scalar(self, k: str, v: float, step: int) -> None:
        self.scalars.append((k, v, step))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_the_loop_stops_at_the_first_iteration_that_reaches_the_target() -> None:
    algo, writer = _Algo(per_iter=300), _Writer()
    steps, rows, _final, interrupted = _train_loop(algo, writer, start=1000, target=2000, progress=False)
    # 1000 + 4 x 300 = 2200 >= 2000 after the 4th iteration (3 would give 1900)
    assert (steps, algo.calls, interrupted) == (2200, 4, False)
    assert [r["timesteps"] for r in rows] == [1300, 1600, 1900, 2200]
    assert [r["rollout/ep_rew_mean"] for r in rows] == [0.5, 1.0, 1.5, 2.0]
    assert writer.closed
    assert {s for k, _v, s in writer.scalars if k == "rollout/ep_rew_mean"} == {1300, 1600, 1900, 2200}


def test_an_interrupt_keeps_the_iterations_done_and_closes_the_log() -> None:
    algo, writer = _Algo(per_iter=100, stop_at=3), _Writer()
    steps, rows, _final, interrupted = _train_loop(algo, writer, start=0, target=10_000, progress=False)
    assert (steps, len(rows), interrupted, writer.closed) == (200, 2, True, True)


def test_progress_csv_has_timesteps_first_and_every_column(tmp_path: Path) -> None:
    p = tmp_path / "progress.csv"
    _write_progress_csv(p, [{"timesteps": 1, "b": 2.0}, {"timesteps": 2, "a": 3.0}])
    with open(p) as f:
        got = list(csv.reader(f))
    assert got == [["timesteps", "a", "b"], ["1", "", "2.0"], ["2", "3.0", ""]]
    _write_progress_csv(tmp_path / "none.csv", [])
    assert not (tmp_path / "none.csv").exists()
