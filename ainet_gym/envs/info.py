"""The ``info`` of an env: per-job figures of the interval, the reward's terms, and the optional keys.

:class:`EnvInfo` is the info side of :class:`~ainet_gym.envs.env.EnvCore` (its base class): it holds no state
of its own and reads the core's, the attributes annotated on it, which ``EnvCore.__init__`` sets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ainet_gym.arrays import nan_to_zero, safe_divide
from ainet_gym.envs.actions import BG_SLOT_MODES
from ainet_gym.envs.rewards import GpuUtilizationReward, StepTimeReward
from ainet_gym.envs.slots import SlotMaps
from ainet_gym.errors import names_message
from ainet_gym.fabric.topology import TIERS
from ainet_gym.routing.loads import controlled_connections
from ainet_gym.sim.world import FabricWorld, StepResult
from ainet_gym.units import BYTES_PER_S_TO_GBPS

__all__ = ["BUILTIN_REWARDS", "INFO_JOB_KEYS", "INFO_KEYS", "EnvInfo", "check_info_keys", "nan_to_zero"]

#: Optional ``info`` keys (``info_keys=`` at construction, or :meth:`EnvCore.request_info`, as the
#: TensorBoard callback of ``agents`` does), computed only when asked: per-link and per-connection figures
#: of the interval, and the ECMP collision count.
INFO_KEYS = ("links", "flows", "collisions")

BUILTIN_REWARDS = (GpuUtilizationReward, StepTimeReward)  # rewards whose value the info holds


#: the per-job info arrays :func:`ainet_gym.sim.backends.numba.env_passes.info_jobs` writes, in its order
INFO_JOB_KEYS = (
    "step_time_ms",
    "ideal_step_time_ms",
    "gpu_utilization",
    "efficiency",
    "iteration_gpu_utilization",
)


def check_info_keys(keys: Sequence[str]) -> None:
    """Refuse a key of ``keys`` that is not an optional info key (:data:`INFO_KEYS`): a ``ValueError`` naming
    the keys given, the unknown ones and what is allowed (``EnvCore(info_keys=...)`` and
    :meth:`EnvInfo.request_info`)."""
    if any(k not in INFO_KEYS for k in keys):
        raise ValueError(names_message("info_keys", keys, INFO_KEYS))


class EnvInfo:
    """The info side of :class:`~ainet_gym.envs.env.EnvCore`: the per-job arrays of the interval, and the
    optional keys (:data:`INFO_KEYS`), computed only when asked."""

    _plan: np.ndarray
    _slot_bytes: tuple[StepResult, np.ndarray] | None
    _slot_maps: Callable[[], SlotMaps]
    _step_jobs: tuple[StepResult, dict[str, np.ndarray]] | None
    _tiers_present: list[int]
    action_mode: str
    batch: int
    info_keys: tuple[str, ...]
    n_slots: int
    plan_class: str | None
    plans: tuple[str, ...]
    world: FabricWorld

    def request_info(self, *keys: str) -> None:
        """Add optional keys (:data:`INFO_KEYS`) to ``info`` from the next step on.

        Raises
        ------
        ValueError
            Naming a key that is not an optional info key.
        """
        check_info_keys(keys)
        self.info_keys = tuple(dict.fromkeys((*self.info_keys, *keys)))

    # ------------------------------------------------------------------ info
    def info(self, res: StepResult | None) -> dict[str, Any]:
        """Batched info: arrays with a leading batch axis; per-job arrays have one entry per job slot
        and hold 0 where there is no value (empty slot, or no iteration completed in the interval),
        so that infos compare equal across same-seed rollouts."""
        done = self._step_jobs
        return self._info_of(res, done[1] if done is not None and done[0] is res else None)

    def _info_of(self, res: StepResult | None, jobs: dict[str, np.ndarray] | None) -> dict[str, Any]:
        """:meth:`info`, with the per-job arrays and rewards ``jobs`` already computed with NaN as 0 (by
        :func:`ainet_gym.sim.backends.numba.env_passes.info_jobs` on the kernel threads) when given."""
        out = self._info(res, jobs)
        for k, v in out.items():
            if isinstance(v, np.ndarray) and v.dtype.kind == "f" and (jobs is None or k not in jobs):
                out[k] = nan_to_zero(v)
        return out

    def _info(self, res: StepResult | None, jobs: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        w = self.world
        B, J = self.batch, w.n_job_slots
        nan = np.full((B, J), np.nan) if res is None else None  # (the after-reset values only)
        out: dict[str, Any] = {
            "action_mask": self._slot_maps().mask.copy(),
            "step": w.state.step_count.copy(),
            # per-job figures describe the interval just run (jobs that arrive at its end appear in the
            # next step's info); after a reset, the jobs of the first interval
            "job_alive": w.job_unit >= 0 if res is None else res.job_alive.copy(),
            "step_time_ms": nan.copy() if res is None else res.step_time_s * 1e3,
            "ideal_step_time_ms": (
                np.where(w.job_unit >= 0, w.job_ideal_step_s * 1e3, np.nan)
                if res is None
                else res.ideal_step_s * 1e3
            ),
            "gpu_utilization": nan.copy() if res is None else res.gpu_utilization,
            "efficiency": nan.copy() if res is None else res.efficiency,
            "iterations": np.zeros((B, J), dtype=np.int64) if res is None else res.iterations,
            "max_link_utilization": np.zeros(B) if res is None else res.max_link_utilization,
            "stalled_transfers": np.zeros(B, dtype=np.int64) if res is None else res.stalled_transfers,
            # during the interval just run (the observation shows the capacities of the next one)
            "failed_links": (
                ((w.sim.engine_state.capacity_bytes_per_s <= 0) & w.fabric.network_links[None, :]).sum(axis=1)
                if res is None
                else res.failed_links
            ),
        }
        out["throughput_gbps"] = np.zeros(B) if res is None else res.throughput_gbps
        if self.plans:  # the choose modes: the plans' class, and the plan each instance ran (-1: none yet)
            out["plan_class"] = np.full(B, self.plan_class)
            out["plan"] = self.state.plan.copy() if res is not None else np.full(B, -1, dtype=np.int64)
        # per-iteration GPU utilisation: compute / mean step time of the iterations completed in the interval
        # (of the jobs that ran in it: res.compute_s is taken before churn replaces any)
        out["iteration_gpu_utilization"] = nan.copy() if res is None else res.compute_s / res.step_time_s
        if jobs is not None:
            out.update((k, jobs[k]) for k in INFO_JOB_KEYS)
        if "links" in self.info_keys:
            cap = (
                w.sim.engine_state.capacity_bytes_per_s
                if res is None or res.capacity_bytes_per_s is None
                else res.capacity_bytes_per_s
            )
            out["link_capacity_gbps"] = cap * BYTES_PER_S_TO_GBPS
            out["link_bytes"] = np.zeros(cap.shape) if res is None else res.link_bytes
            out["link_utilization"] = np.zeros(cap.shape) if res is None else res.link_utilization
        if "flows" in self.info_keys:
            moved = np.zeros((B, self.n_slots))
            done = self._slot_bytes
            if res is not None and done is not None and done[0] is res:
                moved = done[1]  # the slots' connections during the interval (before churn)
            out["flow_bytes"] = moved
            with np.errstate(invalid="ignore", divide="ignore"):
                dur = np.zeros(B) if res is None else res.duration_s
                out["flow_rate_gbps"] = safe_divide(moved * BYTES_PER_S_TO_GBPS, dur[:, None])
        for i in self._tiers_present:
            out[f"tier_bytes_{TIERS[i]}"] = np.zeros(B) if res is None else res.tier_bytes[:, i]
        if res is not None:
            if jobs is None:
                out["reward_gpu_utilization"] = GpuUtilizationReward()(res)
                out["reward_step_time"] = StepTimeReward()(res)
            else:
                out["reward_gpu_utilization"] = jobs["reward_gpu_utilization"]
                out["reward_step_time"] = jobs["reward_step_time"]
            if "collisions" in self.info_keys:
                out["collisions"] = self._collisions(res)
        else:
            out["reward_gpu_utilization"] = np.zeros(B)
            out["reward_step_time"] = np.zeros(B)
            if "collisions" in self.info_keys:
                out["collisions"] = np.zeros(B, dtype=np.int64)
        return out

    def _collisions(self, res: StepResult) -> np.ndarray:
        """Network links that carried more than one controllable connection's traffic in the interval
        while at least 95% utilised: the ECMP collisions an agent should avoid."""
        w = self.world
        sim = w.sim
        assert sim is not None
        net = w.fabric.network_links & ~np.isin(w.fabric.link_tier, [TIERS.index("nic"), TIERS.index("pcie")])
        hot = ((res.link_utilization >= 0.95) & net[None, :]).reshape(-1)
        if not hot.any():
            return np.zeros(self.batch, dtype=np.int64)
        # the connections of controllable slots
        ctrl = controlled_connections(w, self.action_mode in BG_SLOT_MODES) & (sim.conn_npaths > 1)
        paths = sim.conn_paths_global
        used = (sim.engine_state.split[:, :, None] > 0) & (paths >= 0) & ctrl[:, None, None]
        used &= hot[np.maximum(paths, 0)]  # only entries on hot links: a small set to deduplicate
        links = paths[used]
        conn = np.broadcast_to(np.arange(sim.n_conns)[:, None, None], paths.shape)[used]
        key = np.unique(links * sim.n_conns + conn)  # distinct (link, connection) pairs
        count = np.bincount(key // sim.n_conns, minlength=self.batch * w.fabric.n_links).reshape(
            self.batch, -1
        )
        return (count > 1).sum(axis=1)
