"""``knn:PATH``: the agent that plays a knn policy file (:class:`KnnAgent`), registered on import."""

from __future__ import annotations

from typing import Any

import numpy as np

from ainet_gym.agents.imitate.features import (
    check_plan_model,
    extra_plans_of,
    knn_columns,
    plan_one_hot,
    split_previous_plan,
)
from ainet_gym.agents.imitate.knn_file import load_knn
from ainet_gym.agents.imitate.label_files import check_fabric


class KnnAgent:
    """``knn:PATH``: the k-nearest-neighbour imitation of the lookahead saved by :func:`fit_knn`, acting in
    the ``choose`` mode of its labels with their ``obs_features`` (class of the mode's plans). A learned
    policy: it reads only the observation."""

    level = "action"
    learned = True

    def __init__(self, path: str) -> None:
        z = load_knn(path)
        self.x, self.y, self.k, self.block = z["x"], z["y"], z["k"], z["block"]
        self.plans, self.meta, self.q = z["plans"], z["metadata"], z["q"]
        self.margin, self.fallback = z["margin"], z["fallback"]
        self.vote_plans = z["vote_plans"]  # None: every plan
        self.cooldown, self._cool_plan = z["cooldown"]  # 0: none
        self._left: np.ndarray | None = None  # steps of cooldown left per env (cooldown > 0)
        self.scale = z["scale"]  # None: raw columns
        self.prev_scale = z["previous_plan"]  # None: the observation only
        self.fabric = z["fabric"]  # the labels' fabric fingerprint; None: not known, not checked
        self.obs_block = split_previous_plan(self.block)[0]
        self._prev: np.ndarray | None = None  # the plan of each env's previous decision (-1: none yet)
        meta = z["meta"]
        self.path = path
        self.spec_name = f"knn:{path}"  # how errors name the file (``pretrained:PATH`` when shipped)
        self.scenario = meta[0]
        self.name = "knn"
        feats = tuple(f for f in meta[2].split(",") if f)
        self.env_kwargs: dict[str, Any] = {"action_mode": meta[1], "history": int(meta[3])}
        if feats:
            self.env_kwargs["obs_features"] = feats
        extra = extra_plans_of(meta[1], self.plans)
        if extra:
            self.env_kwargs["extra_plans"] = extra
        self._sq = (self.x**2).sum(axis=1)

    def check(self, core: Any) -> None:
        width = self.x.shape[1] - (0 if self.prev_scale is None else len(self.plans))
        check_plan_model(
            core, self.spec_name, "labelled", self.scenario, self.plans, self.obs_block, "x", self.x[:, :width],
        )  # fmt: skip
        check_fabric(self.spec_name, self.fabric, getattr(core, "fabric", None))

    def reset(self, core: Any) -> None:
        self._left = None  # a new batch of episodes: no cooldown running
        self._prev = None  # and no previous decision

    def act(self, core: Any, obs: Any) -> np.ndarray:
        """(batch,) :meth:`vote`'s plans; with a ``cooldown``, the fallback plan in the ``cooldown`` steps after
        a step that played another plan (state kept per env since :meth:`reset`); with the
        :data:`PREVIOUS_PLAN` block, the plans are remembered for the next decision's distance."""
        plan = self.vote(core, obs)
        if self.cooldown:
            if self._left is None or self._left.shape != plan.shape:
                self._left = np.zeros(plan.shape, dtype=np.int64)
            plan = np.where(self._left > 0, self._cool_plan, plan).astype(np.int64)
            self._left = np.where(
                self._left > 0, self._left - 1, np.where(plan != self._cool_plan, self.cooldown, 0)
            )
        if self.prev_scale is not None:
            self._prev = plan.copy()
        return plan

    def features(self, core: Any, obs: Any) -> np.ndarray:
        """(batch, D) the columns the distance reads: the observation's blocks, then (the
        :data:`PREVIOUS_PLAN` block) the one-hot of each env's previous plan times its scale (zeros before the
        first :meth:`act` since :meth:`reset`, or when the batch size changed); divided by ``scale`` if the file
        has one."""
        q = np.asarray(obs, dtype=np.float64)[:, knn_columns(core.obs_layout, self.obs_block)]
        if self.prev_scale is not None:
            prev = self._prev
            if prev is None or prev.shape != (q.shape[0],):
                prev = np.full(q.shape[0], -1, dtype=np.int64)
            q = np.concatenate([q, plan_one_hot(prev, len(self.plans), self.prev_scale)], axis=1)
        if self.scale is not None:
            q = q / self.scale  # the columns as the file's x holds them (fit_knn standardize)
        return q

    def vote(self, core: Any, obs: Any) -> np.ndarray:
        """(batch,) the plan most of the ``k`` nearest labelled decisions got (a file with ``q``: the plan of
        the best mean value over them, :data:`KNN_VOTES`, among its ``vote_plans`` if it has them; with a
        ``margin``: the ``fallback`` plan where the best mean value exceeds the fallback's by less than the
        margin)."""
        q = self.features(core, obs)
        d = (q**2).sum(axis=1)[:, None] - 2.0 * q @ self.x.T + self._sq[None, :]  # (B, N) squared distances
        k = min(self.k, self.y.shape[0])
        nn = np.argpartition(d, k - 1, axis=1)[:, :k]
        if self.q is not None:
            v = self.q[nn].mean(axis=1)  # (B, K) mean value of each plan over the neighbours
            rows = np.arange(v.shape[0])
            best = np.argmax(
                v if self.vote_plans is None else np.where(self.vote_plans, v, -np.inf), axis=1
            ).astype(np.int64)  # among the vote plans only (fit_knn vote_plans)
            if self.margin is None:
                return best
            gain = (
                v[rows, best] - v[:, self.fallback]
            )  # the switch's value over the fallback (a vote plan or not)
            return np.where(gain < self.margin, self.fallback, best).astype(np.int64)
        votes = np.zeros((q.shape[0], len(self.plans)))
        np.add.at(votes, (np.repeat(np.arange(q.shape[0]), k), self.y[nn].reshape(-1)), 1.0)
        return np.argmax(votes, axis=1).astype(np.int64)


def _register() -> None:
    from ainet_gym.agents.registry import register_agent

    register_agent(
        "knn",
        KnnAgent,
        needs_arg=True,
        arg_help="PATH",
        description="k-nearest-neighbour imitation of the lookahead over the choose_bg plans (imitate knn)",
        overwrite=True,
    )


_register()
