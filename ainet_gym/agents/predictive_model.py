"""The link forecaster of the predict-then-route baselines (:mod:`ainet_gym.agents.predictive`): its
features, its training data, its fit, its error, and the fitted model per scenario.

Model (:class:`LinkForecaster`), one least-squares fit per link tier (``nic``, ``leaf_spine``,
``storage``, ...), coefficients shared by every link of the tier (so a fit transfers across ECMP
hash seeds and placements), features of link ``l`` at decision ``t``:

- ``H`` lags of its base utilisation (intervals ``t-1 ... t-H``; measured bytes minus the offered load
  of the placed connections, over nominal capacity x interval);
- the offered utilisation of the background scheduled for interval ``t`` on its current (ECMP) paths,
  and the same for interval ``t-1`` (the schedule is part of the observation: ``scheduled_next``);
- a constant.

In the ``+bg`` versions the router places the background too, so the base load is that of the
single-path transfers (a host's NIC links, intra-leaf hops), and the training data is collected under
``spray+bg``.

Target: the base utilisation of interval ``t``. Ridge-regularised normal equations (``ridge``),
solved once per tier. :func:`forecast_error` compares it with the last-value forecast (``base(t) =
base(t-1)``) on held-out seeds; ``tests/agents/test_predictive.py`` checks that it is lower.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.routing.loads import base_load, connection_demand, controlled_connections
from ainet_gym.routing.policies import get_policy

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.routing.context import RoutingContext

__all__ = [
    "TRAIN_SEED_BASE",
    "FitConfig",
    "LinkForecaster",
    "background_offered",
    "collect",
    "fit",
    "fitted",
    "fitted_model",
    "forecast_error",
    "nominal_bytes",
    "solve_per_tier",
]


#: training episodes use seeds TRAIN_SEED_BASE + i (the evaluation seeds are small integers).
TRAIN_SEED_BASE = 1_000_000


@dataclass
class FitConfig:
    """How the forecaster is fitted (every field a documented, overridable parameter)."""

    train_seeds: int = 8
    """Training episodes (seeds ``TRAIN_SEED_BASE + i``)."""
    history: int = 4
    """Lags of base utilisation per link (H)."""
    ridge: float = 1e-6
    """Ridge penalty on the normal equations (relative to the mean diagonal)."""
    data_policy: str = "spray"
    """Routing of the jobs while the training data is collected (a job-only baseline, so that the
    background stays on ECMP, as under the predictive routers; the ``+bg`` routers use ``spray+bg``)."""
    steps: int | None = None
    """Intervals per training episode (default: those of the evaluated episodes)."""


def nominal_bytes(world: RoutingContext) -> np.ndarray:
    """(links,) nominal capacity x interval, bytes (1 where the capacity is 0)."""
    c = world.fabric.capacity_bytes_per_s * world.decision_interval_s
    return np.where(c > 0, c, 1.0)


def background_offered(world: RoutingContext, background: bool = False) -> np.ndarray:
    """(batch, links) offered utilisation of the traffic not placed by the router (background at its
    scheduled rate for the next interval, single-path transfers) on the current split's paths
    (``background``: the router places the background too, so only single-path transfers count)."""
    sim = world.sim
    assert sim is not None
    B, L = world.batch, world.fabric.n_links
    d = connection_demand(world)
    placed = controlled_connections(world, background) & (sim.conn_npaths > 1) & (d > 0)
    d = np.where(placed, 0.0, d)
    paths = sim.conn_paths_global
    mask = paths >= 0
    w = (world.default_split() * d[:, None])[:, :, None] * mask
    load = np.bincount(paths[mask], weights=w[mask], minlength=B * L).reshape(B, L)
    return load / nominal_bytes(world)


class LinkForecaster:
    """Per-tier linear forecast of each link's next-interval base utilisation (see the module doc)."""

    def __init__(self, tiers: np.ndarray, coef: np.ndarray, history: int) -> None:
        self.tiers = np.asarray(tiers, dtype=np.int64)  # (links,) tier index of each link
        self.coef = np.asarray(coef, dtype=np.float64)  # (n_tiers, F)
        self.history = int(history)

    @property
    def n_features(self) -> int:
        return self.history + 3

    @staticmethod
    def features(hist: np.ndarray, bg_next: np.ndarray, bg_prev: np.ndarray) -> np.ndarray:
        """(batch, links, H + 3) from the lags ``hist`` (batch, H, links), newest first, and the
        scheduled background utilisation of the next and the last interval (batch, links)."""
        B, H, L = hist.shape
        return np.concatenate(
            [hist.transpose(0, 2, 1), bg_next[..., None], bg_prev[..., None], np.ones((B, L, 1))], axis=2
        )

    def predict(self, hist: np.ndarray, bg_next: np.ndarray, bg_prev: np.ndarray) -> np.ndarray:
        """(batch, links) forecast base utilisation (>= 0)."""
        x = self.features(hist, bg_next, bg_prev)
        return np.maximum(np.einsum("blf,lf->bl", x, self.coef[self.tiers]), 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"history": self.history, "coef": self.coef.tolist(), "tiers": self.tiers.tolist()}


def collect(
    scenario: Any,
    seeds: list[int],
    data_policy: str = "spray",
    steps: int | None = None,
    background: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run one episode per seed (batched) under ``data_policy``; returns the base utilisation
    (batch, T, links) of each interval, the background offered for it (batch, T, links) and the
    link tiers (links,); ``background``: of a router that places the background too."""
    from ainet_gym.envs.env import EnvCore

    core = EnvCore(scenario, batch=len(seeds), episode_steps=steps)
    core.reset(list(seeds))
    w = core.routing_context
    pol = get_policy(data_policy)
    T, B, L = core.episode_steps, core.batch, core.fabric.n_links
    base = np.zeros((B, T, L))
    bg = np.zeros((B, T, L))
    for t in range(T):
        bg[:, t] = background_offered(w, background)
        core.step_split(pol(core.routing_context, core.last_result))
        last = core.last_result
        assert last is not None
        base[:, t] = base_load(w, last, background) / nominal_bytes(w)
    return base, bg, core.fabric.link_tier.copy()


def _design(base: np.ndarray, bg: np.ndarray, H: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features (batch, T, links, F), targets (batch, T, links) and last-value forecasts of every
    interval, lags before the first interval zero."""
    B, T, L = base.shape
    pad = np.concatenate([np.zeros((B, H, L)), base], axis=1)  # pad[:, H + t] = base[:, t]
    lags = np.stack([pad[:, H - k : H - k + T] for k in range(1, H + 1)], axis=2)  # (B, T, H, L)
    bg_prev = np.concatenate([np.zeros((B, 1, L)), bg[:, :-1]], axis=1)
    x = np.concatenate(
        [lags.transpose(0, 1, 3, 2), bg[..., None], bg_prev[..., None], np.ones((B, T, L, 1))], axis=3
    )
    return x, base, lags[:, :, 0]


def fit(scenario: Any, cfg: FitConfig | None = None, background: bool = False) -> LinkForecaster:
    """Fit the forecaster on ``cfg.train_seeds`` training episodes of ``scenario`` (``background``: for a
    router that places the background too).

    Raises
    ------
    ValueError
        On a bad configuration (seeds, history, ridge, data policy).
    """
    cfg = cfg or FitConfig()
    if not isinstance(cfg.train_seeds, int) or cfg.train_seeds < 1:
        raise ValueError(f"train_seeds = {cfg.train_seeds!r}: must be an integer >= 1")
    if not isinstance(cfg.history, int) or cfg.history < 1:
        raise ValueError(f"history = {cfg.history!r}: must be an integer >= 1")
    if not cfg.ridge >= 0:
        raise ValueError(f"ridge = {cfg.ridge!r}: must be >= 0")
    seeds = [TRAIN_SEED_BASE + i for i in range(cfg.train_seeds)]
    base, bg, tiers = collect(scenario, seeds, cfg.data_policy, cfg.steps, background)
    x, y, _ = _design(base, bg, cfg.history)
    return LinkForecaster(tiers, solve_per_tier(x, y, tiers, cfg.ridge), cfg.history)


def solve_per_tier(x: np.ndarray, y: np.ndarray, tiers: np.ndarray, ridge: float = 0.0) -> np.ndarray:
    """Least-squares coefficients (n_tiers, F) pooled over the links of each tier, from features
    ``x`` (batch, T, links, F) and targets ``y`` (batch, T, links); ``ridge`` times the mean diagonal
    of each tier's normal matrix is added to it (0: ordinary least squares)."""
    F = x.shape[-1]
    n_tiers = int(tiers.max()) + 1
    xt = x.transpose(2, 0, 1, 3).reshape(tiers.size, -1, F)  # (links, samples, F)
    yt = y.transpose(2, 0, 1).reshape(tiers.size, -1)
    xtx = np.einsum("lsf,lsg->lfg", xt, xt)
    xty = np.einsum("lsf,ls->lf", xt, yt)
    A = np.zeros((n_tiers, F, F))
    b = np.zeros((n_tiers, F))
    np.add.at(A, tiers, xtx)
    np.add.at(b, tiers, xty)
    lam = ridge * np.maximum(np.trace(A, axis1=1, axis2=2) / F, 1e-12)
    A += (lam[:, None, None] + 1e-12) * np.eye(F)[None]  # tiers without samples: 0 coefficients
    return np.linalg.solve(A, b[..., None])[..., 0]


def forecast_error(
    model: LinkForecaster, scenario: Any, seeds: list[int], data_policy: str = "spray"
) -> dict:
    """Root-mean-square error of the model and of the last-value forecast of the base utilisation of
    the network links, over every interval of one episode per held-out seed (run under
    ``data_policy``); also the error during intervals where the scheduled background changes."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario(scenario)
    base, bg, _ = collect(sc, seeds, data_policy)
    x, y, last = _design(base, bg, model.history)
    pred = np.maximum(np.einsum("btlf,lf->btl", x, model.coef[model.tiers]), 0.0)
    net = FabricWorld(sc, batch=1).fabric.network_links
    bg_prev = np.concatenate([np.zeros_like(bg[:, :1]), bg[:, :-1]], axis=1)
    change = (np.abs(bg - bg_prev) > 1e-9)[..., net]
    e_m, e_l = (pred - y)[..., net], (last - y)[..., net]

    def rmse(e: np.ndarray) -> float:
        return float(np.sqrt(np.mean(e**2))) if e.size else float("nan")

    return {
        "model_rmse": rmse(e_m),
        "last_value_rmse": rmse(e_l),
        "model_rmse_when_schedule_changes": rmse(e_m[change]),
        "last_value_rmse_when_schedule_changes": rmse(e_l[change]),
        "samples": int(e_m.size),
    }


_CACHE: dict[tuple, LinkForecaster] = {}


def fitted_model(
    scenario: Any, steps: int, cfg: FitConfig | None = None, background: bool = False
) -> LinkForecaster:
    """The forecaster of ``scenario`` under ``cfg`` (fitted once per process and scenario, on training
    episodes of ``steps`` intervals unless ``cfg.steps`` says otherwise; ``background``: for a router that
    places the background too, on data collected under ``spray+bg`` unless ``cfg`` names another)."""
    cfg = cfg or FitConfig()
    steps = cfg.steps or steps  # training episodes as long as the evaluated ones
    data_policy = cfg.data_policy
    if background and data_policy == FitConfig.data_policy:
        data_policy = "spray+bg"
    key = (repr(scenario), cfg.train_seeds, cfg.history, cfg.ridge, data_policy, steps, background)
    if key not in _CACHE:
        _CACHE[key] = fit(
            scenario, FitConfig(cfg.train_seeds, cfg.history, cfg.ridge, data_policy, steps), background
        )
    return _CACHE[key]


def fitted(core: EnvCore, cfg: FitConfig | None = None, background: bool = False) -> LinkForecaster:
    """:func:`fitted_model` of ``core``'s scenario, on training episodes as long as ``core``'s."""
    return fitted_model(core.scenario, core.episode_steps, cfg, background)
