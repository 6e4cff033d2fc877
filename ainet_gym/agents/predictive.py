"""Predict-then-route baselines (DOTE-style, not RL): ``predictive-greedy`` and ``predictive-lp``, and
their ``+bg`` versions (``predictive-greedy+bg``, ``predictive-lp+bg``) that route the background
connections too (class ``jobs+bg``).

The reactive router (``greedy``) routes on the *last* interval's measured load and the LP on the
background scheduled for the next interval at its nominal rate; neither learns how the load of the
traffic they do not route evolves. These baselines fit a small linear model on training episodes
(seeds >= 1,000,000, never the evaluation seeds) that forecasts, for every link, the next interval's
*base load* (utilisation of the link by the traffic the router does not place: background and
single-path transfers; the jobs' multi-path connections are what the router places), then run the
greedy placement or the min-max LP on the forecast instead.

The model (a least-squares fit per link tier on lags of the base load and the scheduled background), its
training data and its held-out error are :mod:`ainet_gym.agents.predictive_model`.

Training command (prints the fit and the held-out error; the agents refit the same model, with the
same defaults, when they first see a scenario, a few seconds)::

    python -m ainet_gym.agents.predictive periodic-interference --train-seeds 8 --eval-seeds 1-10

This module is the agent (:class:`PredictiveAgent`, its four registered names) and ``python -m
ainet_gym.agents.predictive`` (:func:`main`); the engine-level router is :mod:`ainet_gym.agents.predictive_router`
(registered behind routing's ``predictive-*`` policies when this module is imported).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.predictive_model import FitConfig, LinkForecaster, fit, fitted, forecast_error
from ainet_gym.agents.predictive_router import PredictiveRouter
from ainet_gym.agents.registry import register_agent
from ainet_gym.errors import check_choice

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = [
    "PredictiveAgent",
]


class PredictiveAgent:
    """Greedy placement or the min-max LP on the forecast base load (engine level), of the jobs'
    traffic or (``background``) of all traffic."""

    level = "engine"

    def __init__(self, router: str, cfg: FitConfig | None = None, background: bool = False) -> None:
        check_choice("router", router, ("greedy", "lp"))
        self.router = router
        self.background = background
        self.name = f"predictive-{router}" + ("+bg" if background else "")
        self.controls = "jobs+bg" if background else "jobs"
        self.env_kwargs: dict[str, Any] = {}
        self.cfg = cfg or FitConfig()
        self.model: LinkForecaster | None = None
        self._router: PredictiveRouter | None = None

    def check(self, core: EnvCore) -> None:
        self.model = fitted(core, self.cfg, self.background)
        if self.model.tiers.shape[0] != core.link_capacity_bytes_per_s.shape[1]:
            raise ValueError(f"{self.name}: the forecaster was fitted on another fabric")

    def reset(self, core: EnvCore) -> None:
        if self.model is None:
            self.check(core)
        self._router = PredictiveRouter.of_core(core, self.router, self.background, self.cfg)

    def forecast(self, core: EnvCore) -> np.ndarray:
        """(batch, links) forecast base utilisation of the next interval; updates the lags."""
        if self._router is None or not self._router.serves(core):
            self.reset(core)
        assert self._router is not None
        return self._router.forecast(core.last_result)

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        if self._router is None or not self._router.serves(core):
            self.reset(core)
        assert self._router is not None
        return self._router(core.last_result)


register_agent(
    "predictive-greedy",
    lambda arg: PredictiveAgent("greedy"),
    description="greedy placement on a least-squares forecast of each link's next-interval load",
    overwrite=True,
)
register_agent(
    "predictive-lp",
    lambda arg: PredictiveAgent("lp"),
    description="min-max LP on a least-squares forecast of each link's next-interval load",
    overwrite=True,
)
register_agent(
    "predictive-greedy+bg",
    lambda arg: PredictiveAgent("greedy", background=True),
    description="predictive-greedy over all traffic, background included",
    overwrite=True,
)
register_agent(
    "predictive-lp+bg",
    lambda arg: PredictiveAgent("lp", background=True),
    description="predictive-lp over all traffic, background included",
    overwrite=True,
)


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.predictive SCENARIO``: fit, print the coefficients and the held-out error."""
    # one-line errors, as ainet-gym's
    from ainet_gym.agents.arg_types import int_arg
    from ainet_gym.agents.module_cli import OneLineParser
    from ainet_gym.agents.outputs import add_out_file_args

    p = OneLineParser(prog="python -m ainet_gym.agents.predictive", description=__doc__.split("\n")[0])
    p.add_argument("scenario")
    p.add_argument("--train-seeds", type=int_arg(1), default=FitConfig.train_seeds)
    p.add_argument("--history", type=int_arg(1), default=FitConfig.history)
    p.add_argument("--eval-seeds", default="1-10", help="held-out seeds for the forecast error")
    add_out_file_args(p, "write the coefficients and errors as JSON")
    a = p.parse_args(argv)
    from ainet_gym.agents.outputs import run_writing_module_cli

    return run_writing_module_cli(
        "python -m ainet_gym.agents.predictive", lambda: _run(a), a.out, a.overwrite
    )


def _run(a: argparse.Namespace) -> int:
    """The parsed command of :func:`main`: fit, print, write ``--out``."""
    from ainet_gym.agents.evaluate import parse_seeds
    from ainet_gym.fabric.topology import TIERS

    model = fit(a.scenario, FitConfig(train_seeds=a.train_seeds, history=a.history))
    err = forecast_error(model, a.scenario, parse_seeds(a.eval_seeds))
    present = sorted(set(model.tiers.tolist()))
    names = [f"lag{k}" for k in range(1, model.history + 1)] + ["bg_next", "bg_prev", "const"]
    print(f"{'tier':<12}" + "".join(f"{n:>9}" for n in names))
    for t in present:
        print(f"{TIERS[t]:<12}" + "".join(f"{c:>9.3f}" for c in model.coef[t]))
    print(json.dumps(err))
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"scenario": a.scenario, "model": model.to_json(), "error": err}, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
