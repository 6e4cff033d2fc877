"""The observation of an env: spaces, the flat blocks, the optional phase block, the graph view.

:class:`EnvObservation` is the observation side of :class:`~ainet_gym.envs.env.EnvCore` (its base class): it
holds no state of its own and reads the core's, the attributes annotated on it, which ``EnvCore.__init__``
sets. The block layout (:data:`JOB_FEATURES`, :data:`SLOT_FEATURES`, :data:`BG_FEATURES`,
:data:`OBS_FEATURE_BLOCKS`) is part of the env's contract: shipped checkpoints read these offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from ainet_gym.arrays import safe_divide
from ainet_gym.envs.actions import SPLIT_MODES
from ainet_gym.envs.info import INFO_JOB_KEYS
from ainet_gym.envs.slots import SlotMaps
from ainet_gym.errors import names_message
from ainet_gym.sim.backends.numba import env_passes
from ainet_gym.sim.world import FabricWorld, StepResult

if TYPE_CHECKING:
    from ainet_gym.envs.core import EnvCore
    from ainet_gym.envs.passes import EnvPasses

__all__ = [
    "BG_FEATURES",
    "JOB_FEATURES",
    "OBSERVATION_MODES",
    "OBS_FEATURE_BLOCKS",
    "SLOT_FEATURES",
    "EarlyBlocks",
    "EnvObservation",
    "check_obs_features",
    "obs_layout",
    "squash",
]

OBSERVATION_MODES = ("flat", "graph")

JOB_FEATURES = ("alive", "efficiency", "gpu_utilization", "communicating", "iteration_progress")

SLOT_FEATURES = ("controllable", "demand", "n_paths")

BG_FEATURES = ("active_last", "scheduled_next")

#: Optional observation blocks (``obs_features=`` at construction; none by default, so the default
#: observation space, the shipped checkpoints and every contract are unchanged): name -> the per-job-slot
#: features of the block, appended after ``episode_progress`` in this order.
OBS_FEATURE_BLOCKS: dict[str, tuple[str, ...]] = {
    # each job's position in its iteration, read from the simulator's state at the decision, in ideal
    # iterations: what a lookahead needs to tell when the jobs' communication phases will overlap
    "phase": ("to_comm", "comm_left", "comm_time_left"),
}


def check_obs_features(obs_features: Sequence[str]) -> tuple[str, ...]:
    """``obs_features`` checked (see :class:`FabricRoutingEnv`, Arguments): a tuple of distinct names of
    :data:`OBS_FEATURE_BLOCKS`, in the order given.

    Raises
    ------
    ValueError
        Naming the bad value and what is allowed.
    """
    allowed = ", ".join(OBS_FEATURE_BLOCKS)
    if isinstance(obs_features, str) or not isinstance(obs_features, Sequence):
        raise ValueError(f"obs_features = {obs_features!r}: allowed: a list of names among {allowed}")
    out = tuple(obs_features)
    if any(f not in OBS_FEATURE_BLOCKS for f in out):
        raise ValueError(names_message("obs_features", out, OBS_FEATURE_BLOCKS, more=" (distinct)"))
    if len(set(out)) != len(out):
        raise ValueError(
            f"obs_features = {obs_features!r}: a name is repeated; allowed: distinct names among {allowed}"
        )
    return out


def squash(x: np.ndarray) -> np.ndarray:
    """x / (1 + x): maps [0, inf) onto [0, 1) monotonically."""
    return x / (1.0 + x)


def obs_layout(sizes: dict[str, int]) -> tuple[dict[str, slice], int]:
    """Consecutive slices of a flat observation for blocks of the given sizes, and the total size."""
    layout: dict[str, slice] = {}
    o = 0
    for k, n in sizes.items():
        layout[k] = slice(o, o + n)
        o += n
    return layout, o


class EarlyBlocks:
    """The observation blocks and the per-job part of the info of a compiled step, computed
    on the kernel threads right after each instance range's interval and figures
    (:meth:`FabricWorld.step`'s ``after_figures``): the observation array, each range's largest newest
    utilisation and the info arrays.

    ``slot_features`` and ``rest_args`` are the core's own builders of the slot block and of
    ``observe_rest``'s arguments, handed over by the core that makes this object."""

    def __init__(
        self,
        core: EnvCore,
        active: np.ndarray,
        slot_features: Callable[[], np.ndarray],
        rest_args: Callable[..., tuple],
    ) -> None:
        self.core = core
        self.slot_features, self.rest_args = slot_features, rest_args
        self.push = np.ascontiguousarray(active, dtype=np.bool_)
        self.obs = np.empty((core.batch, core.obs_dim), dtype=np.float32)
        self.tops = np.empty(0)
        self.jobs: dict[str, np.ndarray] = {}  # the info's per-job arrays and rewards (info_jobs)
        self.slots: np.ndarray | None = None  # the slot block the early observe_rest wrote
        self.ran = False

    def kernel(self, fig: Any) -> tuple[Any, Any]:
        """(kernel, arguments of a range) for the interval whose figures ``fig`` will hold."""
        core = self.core
        sim = core.world.sim
        assert sim is not None
        ranges = sim.table.ranges
        self.tops = np.empty(len(ranges))
        self.ran = True
        start = core.obs_layout["link_utilization"].start
        where = {r: i for i, r in enumerate(ranges)}

        B, J = fig.step_t.shape
        jobs = {k: np.empty((B, J)) for k in INFO_JOB_KEYS}
        jobs.update(reward_gpu_utilization=np.empty(B), reward_step_time=np.empty(B))
        self.jobs = jobs
        info_args = (fig.step_t, fig.ideal, fig.util, fig.eff, fig.compute_s, fig.ngpu,
                     *(jobs[k] for k in INFO_JOB_KEYS), jobs["reward_gpu_utilization"], jobs["reward_step_time"])  # fmt: skip

        # the other blocks, as they will be if the dynamics change no capacity and restack nothing (the
        # common case; else they are written again after the dynamics): the capacities of this interval,
        # the jobs after it, the slots as they are, the progress after the step
        w = core.world
        self.slots = self.slot_features()
        rest_args = self.rest_args(fig.eff, fig.util, self.slots, w.state.step_count + self.push)

        def both(lo: int, hi: int) -> None:
            i = where[(lo, hi)]
            env_passes.observe_history(lo, hi, core.state.util_hist, self.push, fig.lu, core.net_links, start, self.obs,
                                        self.tops[i : i + 1])  # fmt: skip
            env_passes.info_jobs(lo, hi, *info_args, np.empty(J))
            env_passes.observe_rest(lo, hi, *rest_args, self.obs)

        return both, lambda lo, hi: (lo, hi)


class EnvObservation:
    """The observation side of :class:`~ainet_gym.envs.env.EnvCore`: the action and observation spaces, and
    the observation of an interval's result, float32 in [0, 1]."""

    P: int
    _demand_cache: tuple | None
    _net_capacity: np.ndarray
    _no_job: np.ndarray
    _no_lu: np.ndarray
    _passes: EnvPasses
    _sim: Callable[[], Any]
    _slot_maps: Callable[[], SlotMaps]
    _slot_obs_cache: tuple | None
    action_mode: str
    action_space: spaces.Space
    batch: int
    episode_steps: int
    history: int
    n_bg: int
    n_net: int
    n_slots: int
    net_links: np.ndarray
    obs_dim: int
    obs_features: tuple[str, ...]
    obs_layout: dict[str, slice]
    observation_mode: str
    observation_space: spaces.Space
    plans: tuple[str, ...]
    util_hist: np.ndarray
    wcmp_links: np.ndarray
    world: FabricWorld

    # ------------------------------------------------------------------ spaces
    def _build_spaces(self) -> None:
        w = self.world
        S, P = self.n_slots, self.P
        if self.action_mode == "path":
            self.action_space = spaces.MultiDiscrete(np.full(S, P, dtype=np.int64))
        elif self.action_mode in SPLIT_MODES:
            self.action_space = spaces.Box(-1.0, 1.0, shape=(S * P,), dtype=np.float32)
        elif self.plans:
            self.action_space = spaces.Discrete(len(self.plans))
        else:
            self.action_space = spaces.Box(-1.0, 1.0, shape=(self.wcmp_links.shape[0],), dtype=np.float32)
        sizes = {
            "link_utilization": self.history * self.n_net,
            "link_capacity": self.n_net,
            "jobs": w.n_job_slots * len(JOB_FEATURES),
            "slots": S * len(SLOT_FEATURES),
            "background": self.n_bg * len(BG_FEATURES),
            "episode_progress": 1,
        }
        for name in self.obs_features:  # optional blocks after every default one: their offsets stay
            sizes[f"job_{name}"] = w.n_job_slots * len(OBS_FEATURE_BLOCKS[name])
        self.obs_layout, o = obs_layout(sizes)
        self.obs_dim = o
        flat = spaces.Box(0.0, 1.0, shape=(o,), dtype=np.float32)
        if self.observation_mode == "flat":
            self.observation_space = flat
        else:
            f = w.fabric
            n_nodes = len(f.node_names)
            self.observation_space = spaces.Dict(
                {
                    "flat": flat,
                    "node_features": spaces.Box(0.0, 1.0, shape=(n_nodes, 4), dtype=np.float32),
                    # node ids as float32 (exact below 2**24 nodes): every block float32, so a flattened
                    # graph observation (FlattenObservation, spaces.flatten) stays float32
                    "edge_index": spaces.Box(0, n_nodes - 1, shape=(2, f.n_links), dtype=np.float32),
                    "edge_features": spaces.Box(
                        0.0, 1.0, shape=(f.n_links, self.history + 1), dtype=np.float32
                    ),
                }
            )

    def _early_blocks(self, active: np.ndarray) -> EarlyBlocks:
        """The blocks of this step's observation and info that the kernel threads compute right after each
        range's interval (:class:`EarlyBlocks`)."""
        return EarlyBlocks(self, active, self._slot_features, self._rest_args)

    def _push_history(self, res: StepResult, active: np.ndarray) -> None:
        """Newest first: shift the link-utilisation history of the ``active`` copies by one interval."""
        hist = self.state.util_hist
        if active.all():  # slices, no gather
            hist[:, 1:] = hist[:, :-1]
            hist[:, 0] = res.link_utilization[:, self.net_links]
        else:
            act = np.flatnonzero(active)
            hist[act, 1:] = hist[act, :-1]
            hist[act, 0] = res.link_utilization[np.ix_(act, self.net_links)]

    # ------------------------------------------------------------------ observation
    def observe(self, res: StepResult | None) -> Any:
        """The observation (batch, ...) after the interval ``res`` (None: right after a reset)."""
        return self._observe(res, None)

    def _observe(self, res: StepResult | None, push: np.ndarray | None) -> Any:
        """:meth:`observe`, after pushing ``res``'s link utilisation into the history of the ``push``
        copies (compiled backend only; the numpy path pushes in :meth:`_push_history`)."""
        w = self.world
        sim = w.sim
        assert sim is not None
        B = self.batch
        if self._passes.compiled_observation:
            return self._observe_numba(res, push)
        # float32 blocks written in place: each float64 value is rounded to float32 once, as the cast of a
        # float64 vector would
        obs = np.empty((B, self.obs_dim), dtype=np.float32)
        L = self.obs_layout
        u = self.state.util_hist
        # each row was checked when it was the newest one: checking that one suffices
        if u.size and u[:, 0].max() > 1.0 + 1e-6:
            raise AssertionError(f"link utilisation {u[:, 0].max()} > 1: capacity constraint violated")
        np.minimum(u.reshape(B, -1), 1.0, out=obs[:, L["link_utilization"]])
        obs[:, L["link_capacity"]] = (
            sim.engine_state.capacity_bytes_per_s[:, self.net_links] / self._net_capacity
        )
        # jobs
        J = w.n_job_slots
        ju = w.job_unit
        alive = ju >= 0
        idx = np.maximum(ju, 0)
        jf = np.zeros((B, J, len(JOB_FEATURES)))
        jf[..., 0] = alive
        if res is not None:
            jf[..., 1] = np.nan_to_num(res.efficiency, nan=0.0)
            jf[..., 2] = np.nan_to_num(res.gpu_utilization, nan=0.0)
        pc = sim.state.phase_cur[idx]
        jf[..., 3] = alive & (pc >= 0) & (pc < sim.unit_nphases[idx])
        since = np.maximum(sim.state.time_s[:, None] - sim.state.iter_start[idx], 0.0)
        ideal = np.where(alive, w.job_ideal_step_s, 1.0)
        jf[..., 4] = np.where(alive, squash(since / ideal), 0.0)
        jf[~alive] = 0.0
        obs[:, L["jobs"]] = jf.reshape(B, -1)
        obs[:, L["slots"]] = self._slot_features()
        # background
        if self.n_bg:
            obs[:, L["background"]] = self._background_features(res)
        obs[:, L["episode_progress"]] = np.minimum(w.state.step_count / self.episode_steps, 1.0)[:, None]
        self._optional_blocks(obs)
        if self.observation_mode == "flat":
            return obs
        return self._graph_obs(obs)

    def _optional_blocks(self, obs: np.ndarray) -> None:
        """Write the optional blocks (``obs_features``) into ``obs`` (batch, obs_dim) in place."""
        blocks = {"phase": self.job_phase_features}
        for name in self.obs_features:
            obs[:, self.obs_layout[f"job_{name}"]] = blocks[name]().reshape(self.batch, -1)

    def job_phase_features(self) -> np.ndarray:
        """(B, J, 3) float64 each job slot's position in its iteration at this decision, from the
        simulator's state, in units of the job's ideal iteration (:attr:`ideal_step_s`), each clipped to
        [0, 1] (0 for an empty slot); the ``phase`` block of ``obs_features``:

        - ``to_comm``: time until the job's next communication starts (0 while it communicates): the
          compute left before it (``(1 - overlap) * compute`` after a job that waits for its start,
          ``start_ms``, starts, or after the current iteration ends);
        - ``comm_left``: bytes left in the current iteration's communication over its total bytes (1
          before it starts, 0 once it is done);
        - ``comm_time_left``: ``comm_left`` times the job's ideal communication time
          (:attr:`ideal_comm_s`): the communication left, at full speed.

        A job that starts computing at time 0 with compute time C and no overlap has, at a decision at
        time t < C, ``to_comm = (C - t) / ideal``, ``comm_left = 1``, ``comm_time_left = ideal_comm / ideal``.
        """
        from ainet_gym.sim.state import PRE_COMM, WAITING

        w = self.world
        sim = self._sim()
        st = sim.state
        ju = w.job_unit
        alive = ju >= 0
        u = np.maximum(ju, 0)
        pc = st.phase_cur[u]
        compute = sim.unit_compute[u]
        first_comm = (1.0 - sim.unit_overlap[u]) * compute  # from an iteration's start to its communication
        to_comm = np.where(
            pc == WAITING,
            st.t_start_left[u] + first_comm,
            np.where(
                pc == PRE_COMM,
                st.t_comm_start_left[u],
                np.where(pc < sim.unit_nphases[u], 0.0, st.t_compute_left[u] + first_comm),
            ),
        )
        jf = sim.job_flows
        left = np.bincount(sim.flow_unit[jf], weights=st.rem[jf], minlength=sim.n_units)
        total = np.bincount(sim.flow_unit[jf], weights=sim.flow_bytes[jf], minlength=sim.n_units)
        frac = safe_divide(left, total, np.zeros_like(left))[u]
        ideal = np.where(alive, w.job_ideal_step_s, 1.0)
        comm = np.where(alive, np.nan_to_num(w.job_ideal_comm_s), 0.0)
        out = np.stack([to_comm / ideal, frac, frac * comm / ideal], axis=-1)
        return np.where(alive[..., None], np.clip(out, 0.0, 1.0), 0.0)

    def _background_features(self, res: StepResult | None) -> np.ndarray:
        """(batch, background sources * 2) the background block of the observation: each source on during
        the interval just run (0 where none ran: after a reset, or a reset copy that stood still in the
        step), and on in the next one."""
        w = self.world
        sim = w.sim
        assert sim is not None
        on = sim.state.bg_on[w.bg_unit]  # (batch, sources)
        bf = np.zeros((self.batch, self.n_bg, 2))
        if res is not None:
            bf[..., 0] = np.where((res.duration_s > 0)[:, None], on, 0.0)
        bf[..., 1] = on
        return bf.reshape(self.batch, -1)

    def _observe_numba(
        self, res: StepResult | None, push: np.ndarray | None, early: EarlyBlocks | None = None
    ) -> Any:
        """:meth:`observe` by compiled passes (:func:`ainet_gym.sim.backends.numba.env_passes.observe_history` and :func:`~ainet_gym.sim.backends.numba.env_passes.observe_rest`), the same
        floating-point operations as the numpy code (bit for bit). ``early``: the blocks written on the
        kernel threads (:meth:`_early_blocks`): the history, and the rest as it is when the
        dynamics changed nothing it shows (else the rest is written again here)."""
        w = self.world
        sim = w.sim
        assert sim is not None
        B = self.batch
        L = self.obs_layout
        slots = self._slot_features()
        eff = self._no_job if res is None else res.efficiency
        util = self._no_job if res is None else res.gpu_utilization
        if early is not None and early.ran:
            tops = early.tops  # NaN if any range saw one (one range: its value, without a reduction)
            obs, top = early.obs, tops[0] if tops.shape[0] == 1 else tops.max()
            if w.state.dynamics_changed or slots is not early.slots:  # the early rest blocks are out of date
                env_passes.observe_rest(0, B, *self._rest_args(eff, util, slots, w.state.step_count), obs)
        else:
            rest = self._rest_args(eff, util, slots, w.state.step_count, res is not None)
            obs = np.empty((B, self.obs_dim), dtype=np.float32)
            if res is None or push is None:
                push = np.zeros(B, dtype=np.bool_)
            lu = self._no_lu if res is None else res.link_utilization
            tops = np.empty(1)
            env_passes.observe_history(
                0, B, self.state.util_hist, np.ascontiguousarray(push, dtype=np.bool_),
                np.ascontiguousarray(lu, dtype=np.float64), self.net_links, L["link_utilization"].start, obs, tops,
            )  # fmt: skip
            env_passes.observe_rest(0, B, *rest, obs)
            top = tops[0]
        if self.n_net and top > 1.0 + 1e-6:
            raise AssertionError(f"link utilisation {top} > 1: capacity constraint violated")
        if self.n_bg:
            obs[:, L["background"]] = self._background_features(res)
        self._optional_blocks(obs)
        if self.observation_mode == "flat":
            return obs
        return self._graph_obs(obs)

    def _rest_args(
        self,
        eff: np.ndarray,
        util: np.ndarray,
        slots: np.ndarray,
        step_count: np.ndarray,
        has_res: bool = True,
    ) -> tuple:
        """The arguments of :func:`ainet_gym.sim.backends.numba.env_passes.observe_rest` but the instance range and ``obs``,
        with the engine's current capacities, units and clocks."""
        w = self.world
        sim = w.sim
        assert sim is not None
        L = self.obs_layout
        return (
            self.net_links, np.ascontiguousarray(sim.engine_state.capacity_bytes_per_s, dtype=np.float64), self._net_capacity,
            np.ascontiguousarray(w.job_unit, dtype=np.int64), has_res, eff, util, sim.state.phase_cur,
            sim.unit_nphases, sim.state.time_s, sim.state.iter_start, w.job_ideal_step_s, slots,
            np.ascontiguousarray(step_count), self.episode_steps, L["link_capacity"].start, L["jobs"].start,
            L["slots"].start, L["episode_progress"].start,
        )  # fmt: skip

    def _slot_features(self) -> np.ndarray:
        """(batch, slots * 3) float32 slot block of the observation; valid while the slot demand is (the same
        flows and slot layout), so rebuilt only when a reset or churn changes them."""
        maps = self._slot_maps()
        demand = self._slot_demand() if self.n_slots else None
        cache = self._slot_obs_cache
        if cache is not None and cache[0] is demand and cache[1] is maps.mask:
            return cache[2]
        sf = np.zeros((self.batch, self.n_slots, len(SLOT_FEATURES)))
        sf[..., 0] = maps.mask
        if demand is not None:
            sf[..., 1] = squash(demand)
            sf[..., 2] = maps.npaths / self.P
        out = sf.reshape(self.batch, -1).astype(np.float32)
        self._slot_obs_cache = (demand, maps.mask, out)
        return out

    def _slot_demand(self) -> np.ndarray:
        """(batch, slots): offered bytes of each slot's connection in one interval over its NIC's capacity."""
        from ainet_gym.routing.loads import connection_demand

        w = self.world
        sim = w.sim
        assert sim is not None
        # valid while the flows (the same flow_bytes array) and the slot layout are: holding the arrays
        # themselves, not their id(), so a new array at a recycled address cannot match
        slot_conn = self._slot_maps().conn
        cache = self._demand_cache
        if cache is not None and cache[0] is sim.flow_bytes and cache[1] is slot_conn:
            return cache[2]
        d = connection_demand(w, background_on=True)  # background slots (split_bg): their nominal demand
        has = slot_conn >= 0
        if not has.any():
            out = np.zeros(slot_conn.shape)
        else:
            c = np.maximum(slot_conn, 0)
            nic = w.fabric.capacity_bytes_per_s[w.fabric.endpoint_up[sim.conn_src[c]]]
            out = np.where(has, d[c] / (nic * w.decision_interval_s), 0.0)
        self._demand_cache = (sim.flow_bytes, slot_conn, out)
        return out

    def _graph_obs(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        w = self.world
        f = w.fabric
        sim = w.sim
        assert sim is not None
        B = self.batch
        n_nodes = len(f.node_names)
        kinds = ("gpu", "storage", "nvswitch", "switch")
        nf = np.zeros((B, n_nodes, 4), dtype=np.float32)
        for i, k in enumerate(f.node_kind):
            nf[:, i, kinds.index(k) if k in kinds else 3] = 1.0
        ef = np.zeros((B, f.n_links, self.history + 1), dtype=np.float32)
        ef[:, self.net_links, : self.history] = np.minimum(self.state.util_hist, 1.0).transpose(0, 2, 1)
        ef[:, :, self.history] = sim.engine_state.capacity_bytes_per_s / f.capacity_bytes_per_s
        ei = np.broadcast_to(np.stack([f.link_src, f.link_dst]), (B, 2, f.n_links)).astype(np.float32)
        return {"flat": flat, "node_features": nf, "edge_index": ei.copy(), "edge_features": ef}
