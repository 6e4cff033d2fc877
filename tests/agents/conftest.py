"""Fixtures shared by the agent tests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest


@pytest.fixture
def refused_model_file(tmp_path: Path) -> Callable[..., None]:
    """``check(arrays, load, agent, change, must)``: the good file (``np.savez`` of ``arrays()``) loads with
    plans ``'0'..'5'``; the same arrays after ``change`` (a function that edits the dict in place) make
    ``agent(path)`` raise a :class:`ModelFileError` naming the file and containing ``must``."""

    def check(
        arrays: Callable[[], dict],
        load: Callable[[Path], dict],
        agent: Callable[[str], Any],
        change: Callable[[dict], Any],
        must: str,
    ) -> None:
        good = tmp_path / "good.npz"
        np.savez(good, **arrays())
        assert load(good)["plans"] == [str(i) for i in range(6)]
        a = arrays()
        change(a)
        bad = tmp_path / "bad.npz"
        np.savez(bad, **a)
        from ainet_gym.agents.model_files import ModelFileError

        with pytest.raises(ModelFileError, match=r"bad\.npz") as e:
            agent(str(bad))
        assert must in str(e.value), str(e.value)

    return check


def tiny_ppo_config(scenario: Any, folder: Path, **changes: Any) -> Any:
    """The :class:`~ainet_gym.agents.train.TrainConfig` of a PPO run of 64 steps on ``scenario`` in 2 envs,
    its logs in ``folder`` and its model at ``folder/model.zip``, with tiny updates (16 steps, batch 16,
    2 epochs); ``changes`` override fields."""
    from ainet_gym.agents.train_config import TrainConfig

    cfg: dict[str, Any] = {
        "scenario": scenario,
        "timesteps": 64,
        "n_envs": 2,
        "logdir": folder,
        "out": folder / "model.zip",
        "progress": False,
        "hyperparameters": {"n_steps": 16, "batch_size": 16, "n_epochs": 2},
    }
    return TrainConfig(**{**cfg, **changes})


@pytest.fixture
def evaluate_json(capsys: pytest.CaptureFixture[str]) -> Callable[..., dict[str, Any]]:
    """``run(scenario, policies, *flags)``: ``ainet-gym evaluate SCENARIO --policies POLICIES FLAGS --json``
    through the CLI's ``main``, checked to exit 0; returns the JSON it printed."""
    from ainet_gym.cli import main

    def run(scenario: str, policies: str, *flags: str) -> dict[str, Any]:
        assert main(["evaluate", scenario, "--policies", policies, *flags, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    return run


@pytest.fixture(scope="session")
def tiny_ppo() -> Callable[..., Any]:
    """:func:`tiny_ppo_config` (a session fixture, so that module fixtures can use it too)."""
    return tiny_ppo_config


@pytest.fixture
def refuses_other_envs() -> Callable[..., None]:
    """``check(agent, label, made, field, width)``: ``agent`` (a plan model made on scenario ``'s'`` with
    plans ``'0'..'5'`` and observation block ``job_phase`` of ``width`` columns, those of its ``field``)
    accepts an env that matches, and refuses, naming ``label`` and what differs, one of another scenario,
    other plans, a block of another width and one without the block."""

    def core(name: str = "s", plans: int = 6, width: int = 2, block: str = "job_phase") -> SimpleNamespace:
        layout = {"links": slice(0, 3), block: slice(3, 3 + width)}
        return SimpleNamespace(
            scenario=SimpleNamespace(name=name), plans=[str(i) for i in range(plans)], obs_layout=layout
        )

    def check(agent: Any, label: str, made: str, field: str, width: int) -> None:
        agent.check(core(width=width))
        for env, must in (
            (core(name="t", width=width), f"{label}: {made} on scenario 's', evaluated on 't'"),
            (core(plans=5, width=width), f"{label}: the env has other plans than"),
            (core(width=width + 1), f"{label}: field {field!r} has {width} columns; the env's block 'job_phase' "
             f"has {width + 1}"),
            (core(width=width, block="phase"), f"{label}: the env has no block 'job_phase'"),
        ):  # fmt: skip
            with pytest.raises(ValueError, match=re.escape(must)):
                agent.check(env)

    return check


@pytest.fixture
def knn_arrays() -> Callable[[], dict]:
    """A function that returns the arrays of a valid k-NN file (:func:`~ainet_gym.agents.imitate.load_knn`):
    3 points of 2 features, labelled on scenario ``'s'``, block ``job_phase``, plans ``'0'..'5'``."""

    def arrays() -> dict:
        return {
            "x": np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0]], dtype=np.float32),
            "y": np.array([1, 1, 3]),
            "k": np.int64(1),
            "block": np.array("job_phase"),
            "meta": np.array(["s", "choose_bg", "phase", "4", "8", "spray+bg", "8"]),
            "plans": np.arange(6).astype(str),
        }

    return arrays


@pytest.fixture
def qnet_arrays() -> Callable[[], dict]:
    """A function that returns the arrays of a valid Q-network file (:func:`~ainet_gym.agents.qnet.load_qnet`):
    2 features, one hidden layer of 3, fitted on scenario ``'s'``, block ``job_phase``, plans ``'0'..'5'``."""

    def arrays() -> dict:
        rng = np.random.default_rng(0)
        return {
            "layers": np.int64(2),
            "w0": rng.normal(size=(2, 3)),
            "b0": np.zeros(3),
            "w1": rng.normal(size=(3, 6)),
            "b1": np.zeros(6),
            "mean": np.zeros(2),
            "scale": np.ones(2),
            "target_scale": np.float64(1.0),
            "value_weight": np.float64(10.0),
            "block": np.array("job_phase"),
            "meta": np.array(["s", "choose_bg", "phase", "4", "8", "spray+bg", "8"]),
            "plans": np.arange(6).astype(str),
        }

    return arrays
