"""The Gymnasium environment: route the transfers of AI training jobs over a fabric.

:class:`EnvCore` holds everything batched (observation, action decoding, reward, info) over ``batch``
instances of one scenario; :class:`FabricRoutingEnv` is the single env (``batch = 1``) and
:class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` the native vector env over the same core, so the
two cannot drift apart.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ainet_gym.arrays import safe_divide
from ainet_gym.envs import kernels as _envkernels
from ainet_gym.envs.rewards import GpuUtilizationReward, RewardFn, StepTimeReward, make_reward
from ainet_gym.envs.slots import SlotLayout, SlotMaps, background_connections
from ainet_gym.fabric.topology import TIERS
from ainet_gym.routing.plans import CHOOSE_MODES, plan_split, plans_of_mode
from ainet_gym.routing.policies import controlled_connections
from ainet_gym.routing.split import path_index_split, ratio_split
from ainet_gym.scenario.loader import load_scenario
from ainet_gym.scenario.spec import Scenario
from ainet_gym.sim.world import FabricWorld, StepResult, WorldSnapshot
from ainet_gym.units import BYTES_PER_S_TO_GBPS

__all__ = ["ACTION_MODES", "BG_SLOT_MODES", "SPLIT_MODES", "EnvCore", "EnvSnapshot", "FabricRoutingEnv"]

ACTION_MODES = ("path", "split", "ecmp_weights", "choose", "choose_bg", "split_bg")
#: the action modes whose slots also route the background connections (class ``jobs+bg``)
BG_SLOT_MODES = ("split_bg",)
#: the action modes that decode a (slots x max_paths) box of split weights
SPLIT_MODES = ("split", "split_bg")
OBSERVATION_MODES = ("flat", "graph")
#: Optional ``info`` keys (``info_keys=`` at construction, or :meth:`EnvCore.request_info`, as the
#: TensorBoard callback of ``agents`` does), computed only when asked: per-link and per-connection figures
#: of the interval, and the ECMP collision count.
INFO_KEYS = ("links", "flows", "collisions")
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


_BUILTIN_REWARDS = (GpuUtilizationReward, StepTimeReward)  # rewards whose value the info holds

#: the action modes that take a ``residual`` base policy
RESIDUAL_MODES = ("ecmp_weights", "split_bg")
#: default ``residual_scale``: an action of +-1 multiplies a path's share by 4 or 1/4 (per knob link
#: of the path in ``ecmp_weights``)
RESIDUAL_SCALE = float(np.log(4.0))


def _check_residual(residual: str | None, scale: float, action_mode: str) -> tuple[str | None, float]:
    """``(residual, residual_scale)`` checked (see :class:`FabricRoutingEnv`, Arguments).

    Raises
    ------
    ValueError
        Naming the bad value and what is allowed.
    """
    from ainet_gym.routing.policies import CONTROLS

    if isinstance(scale, bool) or not isinstance(scale, int | float | np.floating) or not 0 < scale <= 10:
        raise ValueError(
            f"residual_scale = {scale!r}: allowed: a number in (0, 10] (log of the largest factor)"
        )
    if residual is None:
        return None, float(scale)
    allowed = [n for n, c in CONTROLS.items() if c in ("none", "jobs+bg")]
    if residual not in allowed:
        raise ValueError(
            f"residual = {residual!r}: not a base policy; allowed: None or a routing of class none or "
            f"jobs+bg ({', '.join(allowed)})"
        )
    if action_mode not in RESIDUAL_MODES:
        raise ValueError(
            f"residual = {residual!r} with action_mode = {action_mode!r}: a residual policy acts in "
            f"{' or '.join(RESIDUAL_MODES)}"
        )
    return residual, float(scale)


def _check_obs_features(obs_features: Sequence[str]) -> tuple[str, ...]:
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
    bad = [f for f in out if f not in OBS_FEATURE_BLOCKS]
    if bad or len(set(out)) != len(out):
        why = f"{bad[0]!r} is unknown" if bad else "a name is repeated"
        raise ValueError(f"obs_features = {obs_features!r}: {why}; allowed: distinct names among {allowed}")
    return out


def squash(x: np.ndarray) -> np.ndarray:
    """x / (1 + x): maps [0, inf) onto [0, 1) monotonically."""
    return x / (1.0 + x)


def _nan_to_zero(v: np.ndarray) -> np.ndarray:
    """``np.nan_to_num(v, nan=0.0)`` (a new array; NaN to 0, +-inf to the largest finite numbers) in one
    or two array passes where ``v`` holds no infinity, the case of every info value."""
    finite = np.isfinite(v)
    if finite.all():
        return v.copy()
    if np.isinf(v).any():
        return np.nan_to_num(v, nan=0.0)
    return np.where(finite, v, 0.0)


def _readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the array itself stays writable for its owner)."""
    v = a.view()
    v.flags.writeable = False
    return v


def obs_layout(sizes: dict[str, int]) -> tuple[dict[str, slice], int]:
    """Consecutive slices of a flat observation for blocks of the given sizes, and the total size."""
    layout: dict[str, slice] = {}
    o = 0
    for k, n in sizes.items():
        layout[k] = slice(o, o + n)
        o += n
    return layout, o


@dataclass(frozen=True, eq=False)
class EnvSnapshot:
    """The state of an :class:`EnvCore` (and of the env around it) at one moment, from
    :meth:`EnvCore.snapshot`: the world's (:class:`~ainet_gym.sim.world.WorldSnapshot`), the link
    history of the observation, the last interval's result and, in ``extra``, the wrapper's own (the
    single env's generator, the vector env's pending autoresets). A copy: later steps do not change it."""

    world: WorldSnapshot
    util_hist: np.ndarray  # (batch, history, net_links) link utilisation history, newest first
    last: StepResult | None  # the last interval's result (None right after a full reset)
    needs_reset: bool
    action_mode: str
    extra: dict = field(default_factory=dict)

    @property
    def batch(self) -> int:
        """Instances in the snapshot."""
        return self.world.batch


def _index_result(res: StepResult, src: np.ndarray) -> StepResult:
    """``res`` of the instances ``src`` (a new batch): every per-instance field indexed; the per-connection
    figures (``conn_bytes``, ``connections``) are dropped (None, as a step without the "flows" info gives)."""
    out: dict[str, Any] = {}
    for f in fields(res):
        v = getattr(res, f.name)
        if f.name in ("conn_bytes", "connections"):
            v = None
        elif isinstance(v, np.ndarray):
            v = v[src]
        elif f.name == "job_names":
            v = [list(v[s]) for s in src.tolist()] if v else v
        out[f.name] = v
    return replace(res, **out)


class EnvCore:
    """Batched observation / action / reward logic over a :class:`FabricWorld`."""

    def __init__(
        self,
        scenario: str | os.PathLike | dict | Scenario,
        batch: int = 1,
        action_mode: str = "split",
        history: int = 4,
        observation: str = "flat",
        reward: str | RewardFn | None = None,
        episode_steps: int | None = None,
        backend: str | None = None,
        info_keys: Sequence[str] = (),
        residual: str | None = None,
        residual_scale: float = RESIDUAL_SCALE,
        obs_features: Sequence[str] = (),
    ) -> None:
        bad = [k for k in info_keys if k not in INFO_KEYS]
        if isinstance(info_keys, str) or bad:
            raise ValueError(f"info_keys = {info_keys!r}: allowed: a list of {', '.join(INFO_KEYS)}")
        self.residual, self.residual_scale = _check_residual(residual, residual_scale, action_mode)
        self.obs_features = _check_obs_features(obs_features)
        self.info_keys = tuple(info_keys)
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode = {action_mode!r}: unknown; allowed: {', '.join(ACTION_MODES)}")
        if observation not in OBSERVATION_MODES:
            raise ValueError(
                f"observation = {observation!r}: unknown; allowed: {', '.join(OBSERVATION_MODES)}"
            )
        from ainet_gym.scenario.loader import LIMITS

        hmax = int(LIMITS["history_max"])
        if isinstance(history, bool) or not isinstance(history, int | np.integer) or not 1 <= history <= hmax:
            raise ValueError(
                f"history = {history!r}: must be an integer in [1, {hmax:,}] (intervals of link history; "
                "ainet_gym.scenario.loader.LIMITS['history_max'])"
            )
        if episode_steps is not None and (
            not isinstance(episode_steps, int | np.integer) or episode_steps < 1
        ):
            raise ValueError(f"episode_steps = {episode_steps!r}: must be an integer >= 1 or None")
        if not isinstance(batch, int | np.integer) or batch < 1:
            raise ValueError(f"num_envs = {batch!r}: must be an integer >= 1")
        self.scenario = load_scenario(scenario)
        self.batch = int(batch)
        self.action_mode = action_mode
        #: ``choose`` modes: the controls class of the plans and the plans (policy names), in action order
        self.plan_class: str | None = None
        self.plans: tuple[str, ...] = ()
        if action_mode in CHOOSE_MODES:
            self.plan_class, self.plans = plans_of_mode(action_mode)
        self.history = int(history)
        self.observation_mode = observation
        self.reward_fn = make_reward(reward if reward is not None else self.scenario.reward.kind)
        self.episode_steps = int(episode_steps or self.scenario.dynamics.episode_steps)
        self.world = FabricWorld(self.scenario, batch=self.batch, backend=backend)
        w = self.world
        self.net_links = w.network_links  # (net_links,) link ids the observation shows
        self.n_net = int(self.net_links.shape[0])
        self.wcmp_links = np.flatnonzero(w.fabric.link_group >= 0)  # (wlinks,) links with a WCMP knob
        self.n_bg = len(self.scenario.background)
        self.P = w.max_paths
        #: the action slots over the world's job slots (and background sources, in ``split_bg``); their maps
        #: follow the world's units (_slot_maps)
        bg_widths = (
            tuple(background_connections(w.fabric, bg) for bg in self.scenario.background)
            if action_mode in BG_SLOT_MODES
            else ()
        )
        self.slot_layout = SlotLayout(
            w.fabric, self.scenario.jobs, w.templates if w.churn else (), w.n_job_slots, bg_widths
        )
        S = self.slot_layout.n_slots
        self._maps = SlotMaps(
            conn=np.full((self.batch, S), -1, dtype=np.int64),
            npaths=np.zeros((self.batch, S), dtype=np.int64),
            mask=np.zeros((self.batch, S), dtype=bool),
        )  # before the first reset: no connections
        self._maps_of: tuple | None = None  # (the engine's unit stack, job_unit) the maps were made from
        # the bytes of each slot's connection in the last interval (the "flows" info): (result, bytes)
        self._slot_bytes: tuple[StepResult, np.ndarray] | None = None
        self._build_spaces()
        self.util_hist = np.zeros((self.batch, self.history, self.n_net))
        self._last: StepResult | None = None
        # (result, info arrays) of the step being assembled, when the kernel threads computed them (info_jobs)
        self._step_jobs: tuple[StepResult, dict[str, np.ndarray]] | None = None
        self._needs_reset = True
        self._plan = np.full(self.batch, -1, dtype=np.int64)  # choose modes: plan run in the last interval
        self._ctrl_cache: tuple | None = None  # (slot_mask it was built from, controllable slot arrays)
        self._fixed_cache: tuple | None = None  # (controllable slots' connections, the other connections)
        self._bounds_cache: tuple | None = None  # (conns, fixed, per-instance bounds of each)
        self._demand_cache: tuple | None = None  # (flow_bytes, slot_conn it was built from, demand)
        self._slot_obs_cache: tuple | None = None  # (demand, slot_mask it was built from, float32 block)
        self._net_capacity = w.fabric.capacity_bytes_per_s[self.net_links]  # (net_links,) nominal bytes/s
        self._tiers_present = [i for i in range(len(TIERS)) if (w.fabric.link_tier == i).any()]
        self._no_lu = np.zeros((self.batch, w.fabric.n_links))  # compiled observation: no interval yet
        self._no_job = np.zeros((self.batch, w.n_job_slots))

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

    def request_info(self, *keys: str) -> None:
        """Add optional keys (:data:`INFO_KEYS`) to ``info`` from the next step on.

        Raises
        ------
        ValueError
            Naming a key that is not an optional info key.
        """
        bad = [k for k in keys if k not in INFO_KEYS]
        if bad:
            raise ValueError(
                f"info_keys: {bad[0]!r} is not an optional info key; allowed: {', '.join(INFO_KEYS)}"
            )
        self.info_keys = tuple(dict.fromkeys((*self.info_keys, *keys)))

    # ------------------------------------------------------------------ read-only API for agents
    # What agents, baselines and render read of the simulation, as read-only array views (writing one
    # raises ValueError); shapes use B = batch, J = job slots, S = action slots, C = connections of the
    # batch, P = max_paths, H = max hops, L = links of the fabric.

    @property
    def last_result(self) -> StepResult | None:
        """The :class:`StepResult` of the last interval (None right after a full reset); read-only."""
        return self._last

    @property
    def decision_interval_s(self) -> float:
        """Simulated seconds of one step."""
        return self.world.decision_interval_s

    @property
    def n_slots(self) -> int:
        """S, action slots per instance (one per connection of every job slot)."""
        return self.slot_layout.n_slots

    def _slot_maps(self) -> SlotMaps:
        """Where the action slots point now: made again when the world restacked its units (a reset that
        changes them, churn, an AllToAll rotation), which replaces the engine's unit stack or the job
        slots' units; held by those objects themselves, not their id()."""
        w = self.world
        sim = w.sim
        if sim is None:
            return self._maps
        made = self._maps_of
        if made is None or made[0] is not sim.stack or made[1] is not w.job_unit:
            self._maps = self.slot_layout.maps(sim, w.job_unit, w.bg_unit)
            self._maps_of = (sim.stack, w.job_unit)
        return self._maps

    @property
    def ideal_step_s(self) -> np.ndarray:
        """(B, J) s: step time of each job slot's job alone on a non-blocking fabric (nan: empty slot)."""
        return _readonly(self.world.job_ideal_step_s)

    @property
    def ideal_comm_s(self) -> np.ndarray:
        """(B, J) s: communication time of one iteration of each job slot's job alone on a non-blocking
        fabric (nan: empty slot)."""
        return _readonly(self.world.job_ideal_comm_s)

    @property
    def controllable(self) -> np.ndarray:
        """(B, S) bool: slots whose connection has more than one candidate path (``info["action_mask"]``)."""
        return _readonly(self._slot_maps().mask)

    @property
    def slot_connection(self) -> np.ndarray:
        """(B, S) int: the connection (row of :attr:`candidate_paths`) each slot routes, -1 for none."""
        return _readonly(self._slot_maps().conn)

    @property
    def n_paths(self) -> np.ndarray:
        """(C,) int: candidate paths of each connection of the batch."""
        return _readonly(self._sim().conn_npaths)

    @property
    def candidate_paths(self) -> np.ndarray:
        """(C, P, H) int: link ids of each candidate path, -1 padded; batch-global ids ``b * L + link``
        (``% L`` gives the fabric's link id)."""
        return _readonly(self._sim().conn_paths_global)

    @property
    def link_capacity_bytes_per_s(self) -> np.ndarray:
        """(B, L) bytes/s: each link's capacity in the next interval (0: failed)."""
        return _readonly(self._sim().capacity_bytes_per_s)

    def connection_demand(self) -> np.ndarray:
        """(C,) bytes each connection offers in one interval (:func:`ainet_gym.routing.policies.connection_demand`)."""
        from ainet_gym.routing.policies import connection_demand

        return connection_demand(self.world)

    def offered_load(self, split: np.ndarray, demand: np.ndarray | None = None) -> np.ndarray:
        """(B, L) bytes that ``demand`` (C,) bytes (default: :meth:`connection_demand`) puts on each link
        when routed by ``split`` (C, P) (:func:`ainet_gym.routing.policies.offered_load`)."""
        from ainet_gym.routing.policies import offered_load

        return offered_load(self.world, split, self.connection_demand() if demand is None else demand)

    def _sim(self) -> Any:
        sim = self.world.sim
        if sim is None:
            raise RuntimeError("the simulation exists after the first reset()")
        return sim

    # ------------------------------------------------------------------ reset
    def reset(self, seeds: list[int | None], mask: np.ndarray | None = None) -> tuple[Any, dict[str, Any]]:
        mask = np.ones(self.batch, dtype=bool) if mask is None else mask
        self.world.reset(seeds=seeds, mask=mask)
        self.util_hist[mask] = 0.0
        self._last = None if mask.all() else self._last
        self._needs_reset = False
        self._plan[mask] = -1
        self._default = self.world.default_split(copy=False)
        return self.observe(None), self.info(None)

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> EnvSnapshot:
        """The state of every instance (:class:`EnvSnapshot`): :meth:`restore` puts it back, and the
        same actions from there give the same observations, rewards and infos, bit for bit.

        For planning and tree search: take a snapshot, try actions, restore, try others. The snapshot
        holds copies of the state arrays (the engine's per-unit, per-phase and per-flow state, the link
        history, the generators), not of the compiled structure (shared, read-only), so it is cheap
        (tens of microseconds to a few milliseconds on the shipped scenarios). A custom reward object
        with state of its own is not part of it.

        Raises
        ------
        RuntimeError
            Before the first :meth:`reset`.
        """
        if self.world.sim is None:
            raise RuntimeError("snapshot() before the first reset(): there is no state yet")
        return EnvSnapshot(
            world=self.world.snapshot(),
            util_hist=self.util_hist.copy(),
            last=self._last,
            needs_reset=self._needs_reset,
            action_mode=self.action_mode,
        )

    def restore(self, snap: EnvSnapshot, source: Sequence[int] | np.ndarray | None = None) -> None:
        """Put the state of ``snap`` back (:meth:`snapshot`). ``source`` (batch,) copies, into instance
        ``b``, the snapshot's instance ``source[b]`` instead (a core of another batch size may take them:
        ``[b] * K`` tries K continuations of instance ``b``; its last result is then the source
        instances', without per-connection figures).

        Raises
        ------
        ValueError
            If ``snap`` is of another scenario or ``source`` does not fit (see
            :meth:`ainet_gym.sim.world.FabricWorld.restore`).
        """
        if not isinstance(snap, EnvSnapshot):
            raise ValueError(
                f"restore: {type(snap).__name__} is not an EnvSnapshot (take one with snapshot())"
            )
        if snap.util_hist.shape[1:] != self.util_hist.shape[1:]:
            raise ValueError(
                f"restore: the snapshot's link history has shape {snap.util_hist.shape[1:]}, this core's "
                f"{self.util_hist.shape[1:]} (another history length)"
            )
        self.world.restore(snap.world, source)
        src = np.arange(self.batch) if source is None else np.asarray(source)
        self.util_hist[:] = snap.util_hist[src]
        last = snap.last
        if last is not None and source is not None:
            last = _index_result(last, src)
        self._last = last
        self._needs_reset = snap.needs_reset
        self._default = self.world.default_split(copy=False)
        self._slot_bytes = None

    # ------------------------------------------------------------------ actions
    def validate(self, actions: np.ndarray) -> np.ndarray:
        """Check a batch of actions against the action space; never mutates state. Returns them as int64
        (path mode) or float64 (the other modes).

        Raises
        ------
        ValueError
            Naming the bad element, its value and what is allowed.
        """
        return self._validate(actions, float64=True)

    def _validate_plans(self, a: np.ndarray) -> np.ndarray:
        """:meth:`validate` of the ``choose`` modes: (batch,) plan indices as int64."""
        K = len(self.plans)
        allowed = f"a plan index, an integer in 0..{K - 1} ({', '.join(self.plans)})"
        if a.shape != (self.batch,):
            per_env = "a scalar (or shape (1,))" if self.batch == 1 else f"shape ({self.batch},), one per env"
            raise ValueError(f"action shape {a.shape}: expected {per_env}: {allowed}")
        if a.dtype.kind not in "iuf":
            raise ValueError(f"action dtype {a.dtype}: not a number type; expected {allowed}")
        if a.dtype.kind == "f":
            bad = ~np.isfinite(a) | (a != np.round(a))
            if bad.any():
                i = tuple(np.argwhere(bad)[0])
                raise ValueError(f"action{self._where_plan(i)} = {a[i].item()!r}: expected {allowed}")
        bad = (a < 0) | (a >= K)  # on the given values: a huge float or uint64 would wrap in int64
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise ValueError(
                f"action{self._where_plan(i)} = {a[i].item()!r}: out of Discrete({K}); expected {allowed}"
            )
        return a.astype(np.int64)

    def _where_plan(self, i: tuple) -> str:
        """Index text of a plan action: empty for a single env, ``[env]`` for a batch."""
        return "" if self.batch == 1 else f"[{int(i[0])}]"

    def _validate(self, actions: np.ndarray, float64: bool) -> np.ndarray:
        """:meth:`validate`; ``float64=False`` returns valid float32 or float64 actions as given (no
        conversion: the compiled decode reads either and converts each element exactly)."""
        sp = self.action_space
        if self.plans:
            try:
                a = np.asarray(actions)
            except (ValueError, TypeError) as e:  # ragged nested lists
                raise ValueError(f"action: cannot be read as an array ({e}); expected plan indices") from None
            return self._validate_plans(a.reshape(1) if self.batch == 1 and a.shape in ((), (1,)) else a)
        discrete = isinstance(sp, spaces.MultiDiscrete)
        allowed = f"integers in 0..{self.P - 1}" if discrete else "real numbers in [-1, 1]"
        try:
            a = np.asarray(actions)
        except (ValueError, TypeError) as e:  # ragged nested lists
            raise ValueError(f"action: cannot be read as an array ({e}); expected {allowed}") from None
        want = (self.batch, *sp.shape)
        if a.shape != want and a.shape == sp.shape and self.batch == 1:
            a = a[None]
        if a.shape != want:
            if self.batch > 1 and a.shape == sp.shape:
                raise ValueError(
                    f"action shape {a.shape} is one env's action; the vector env of {self.batch} envs "
                    f"expects {want}, one row per env"
                )
            per_env = f"{sp.shape} for one env" + (
                f", {want} for the {self.batch} envs" if self.batch > 1 else ""
            )
            raise ValueError(f"action shape {a.shape}: expected {per_env}")
        if a.dtype.kind not in "iuf":
            kind = {
                "b": "booleans",
                "c": "complex numbers",
                "U": "strings",
                "S": "bytes",
                "O": "Python objects",
            }
            raise ValueError(
                f"action dtype {a.dtype} ({kind.get(a.dtype.kind, a.dtype.kind)}): not a number type; "
                f"expected {allowed} (an integer or float array)"
            )
        if discrete:
            if not np.issubdtype(a.dtype, np.integer) and (
                not np.issubdtype(a.dtype, np.floating)
                or not np.all(np.isfinite(a))
                or np.any(a != np.round(a))
            ):
                bad = np.argwhere(~np.isfinite(a) | (a != np.round(a)))
                i = tuple(bad[0])
                raise ValueError(
                    f"action{self._where(i)} = {a[i].item()!r}: path indices must be integers in 0..{self.P - 1}"
                )
            bad = (a < 0) | (a >= self.P)  # on the given values: 1e20 or 2**64 - 1 would wrap in int64
            if bad.any():
                i = tuple(np.argwhere(bad)[0])
                raise ValueError(
                    f"action{self._where(i)} = {a[i].item()!r}: out of MultiDiscrete({self.P}); "
                    f"allowed 0..{self.P - 1}"
                )
            return a.astype(np.int64)
        # the common case: two reductions over the given array (float32 from a policy), no temporary;
        # a NaN fails both tests, and every number type converts to float64 exactly
        if a.min(initial=0.0) >= -1.0 and a.max(initial=0.0) <= 1.0:
            return a if not float64 and a.dtype in (np.float32, np.float64) else a.astype(np.float64)
        a = a.astype(np.float64)
        bad = ~np.isfinite(a)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise ValueError(f"action{self._where(i)} = {a[i]}: must be finite, in [-1, 1]")
        bad = (a < -1.0 - 1e-6) | (a > 1.0 + 1e-6)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise ValueError(f"action{self._where(i)} = {a[i]:.6g}: out of the action space; allowed [-1, 1]")
        return np.clip(a, -1.0, 1.0)  # only float32 round-off of at most 1e-6 is clipped here

    def _where(self, i: tuple) -> str:
        """Index text of an action element: ``[3]`` for a single env, ``[env, 3]`` for a batch."""
        idx = [int(x) for x in i]
        return str(idx[1:] if self.batch == 1 else idx)

    def decode(self, a: np.ndarray) -> np.ndarray:
        """Split (connections, max_paths) of every connection of the batch from validated actions."""
        w = self.world
        sim = w.sim
        assert sim is not None
        if self.plans:  # each instance runs the plan it chose, computed as that baseline computes it
            return plan_split(w, self._last, a, self.plans)
        if self.residual is not None:
            return self._residual_split(a)
        if self.action_mode == "ecmp_weights":
            weights = np.ones((self.batch, w.fabric.n_links))
            weights[:, self.wcmp_links] = (a + 1.0) / 2.0
            return w.wcmp(weights)
        ctrl, conns, npaths = self._controllable()
        if self.action_mode in SPLIT_MODES and w.backend == "numba" and self.P <= _envkernels.PW_BLOCKSIZE:
            # one compiled pass, the same floating-point operations as the numpy code below
            rows = np.ascontiguousarray(a, dtype=np.float64).reshape(-1, self.P)
            return _envkernels.decode_split(
                rows,
                ctrl,
                conns,
                npaths,
                self._default,
                self._fixed_conns(conns),
                np.empty_like(self._default),
            )
        split = self._default.copy()
        if self.action_mode == "path":  # indices past a connection's paths wrap (documented)
            split[conns] = path_index_split(a.reshape(-1)[ctrl], npaths, self.P, wrap=True)
        else:
            split[conns] = ratio_split((a.reshape(-1, self.P)[ctrl] + 1.0) / 2.0, npaths)
        return split

    def _residual_split(self, a: np.ndarray) -> np.ndarray:
        """The split of the residual policy (``residual=`` at construction): the base policy's split of
        every connection times a factor per path from the actions, renormalised over the live paths.

        ``ecmp_weights``: a path's factor is ``exp(residual_scale * sum of the actions of its knob
        links)``; ``split_bg``: ``exp(residual_scale * a)`` of the slot's path. Actions of 0 give the base
        split itself; a path the base gives no share keeps none."""
        from ainet_gym.routing.policies import POLICIES

        w = self.world
        sim = w.sim
        assert sim is not None and self.residual is not None
        base = np.asarray(POLICIES[self.residual](w, self._last), dtype=np.float64)
        beta = self.residual_scale
        if self.action_mode == "ecmp_weights":
            log_w = np.zeros((self.batch, w.fabric.n_links))
            log_w[:, self.wcmp_links] = beta * a
            ext = np.concatenate([log_w.reshape(-1), [0.0]])  # index -1: the paths' padding
            factor = np.exp(ext[sim.conn_paths_global].sum(axis=2))  # (C, P)
        else:
            factor = np.ones_like(base)
            ctrl, conns, _ = self._controllable()
            factor[conns] = np.exp(beta * a.reshape(-1, self.P)[ctrl])
        split = base * factor
        total = split.sum(axis=1, keepdims=True)
        return w.withdraw_dead(safe_divide(split, total, base))

    def _controllable(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat indices of the controllable slots of the batch and, per such slot, its connection and its
        number of paths; rebuilt when the slot maps are made again (:meth:`_slot_maps`)."""
        maps = self._slot_maps()
        cache = self._ctrl_cache
        if cache is None or cache[0] is not maps.mask:
            ctrl = np.flatnonzero(maps.mask.reshape(-1))
            cache = (maps.mask, ctrl, maps.conn.reshape(-1)[ctrl], maps.npaths.reshape(-1)[ctrl])
            self._ctrl_cache = cache
        return cache[1:]

    def _fixed_conns(self, conns: np.ndarray) -> np.ndarray:
        """The connections of the batch that no controllable slot routes (``conns``: those that one does),
        which keep their default split; cached with the controllable slots."""
        cache = self._fixed_cache
        if cache is None or cache[0] is not conns:
            n = self._default.shape[0]
            fixed = np.ones(n, dtype=bool)
            fixed[conns] = False
            cache = (conns, np.flatnonzero(fixed).astype(np.int64))
            self._fixed_cache = cache
        return cache[1]

    def action_masks(self) -> np.ndarray:
        """(batch, slots * max_paths) bool: valid path indices per slot (for MaskablePPO).

        A slot that is not controllable (no connection, or one candidate path) allows only index 0.
        In the ``choose`` modes: (batch, plans), every plan allowed.
        """
        if self.plans:
            return np.ones((self.batch, len(self.plans)), dtype=bool)
        maps = self._slot_maps()
        n = np.where(maps.mask, maps.npaths, 1)  # (batch, slots)
        return (np.arange(self.P)[None, None, :] < n[:, :, None]).reshape(self.batch, -1)

    # ------------------------------------------------------------------ step
    def step(
        self, actions: np.ndarray, active: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Validate, decode and run one interval in the ``active`` instances (all by default)."""
        if self._needs_reset:
            raise RuntimeError("step() called before reset()")
        fused = self._fused_decode()
        a = self._validate(actions, float64=not fused)  # raises before any state changes
        if self.plans:
            self._plan = np.where(np.ones(self.batch, dtype=bool) if active is None else active, a, -1)
        if fused:  # decoded and merged in one compiled pass per instance range
            w = self.world
            assert w.sim is not None
            ctrl, conns, npaths = self._controllable()
            fixed = self._fixed_conns(conns)
            ctrl_lo, fixed_lo = self._instance_bounds(conns, fixed)
            rows = np.ascontiguousarray(a).reshape(-1, self.P)  # float32 or float64
            w.sim.set_split_fused(
                _envkernels.decode_merge_range,
                (rows, ctrl, conns, npaths, self._default, fixed, ctrl_lo, fixed_lo),
                np.empty_like(self._default),
                defer=True,  # merged by each instance range just before its interval, on its thread
            )
            return self._run(w.sim.split, active, split_set=True)
        return self._run(self.decode(a), active)  # a decoded split is valid by construction

    def _fused_decode(self) -> bool:
        """Whether :meth:`step` decodes split actions inside the engine's merge (numba backend)."""
        return (
            self.action_mode in SPLIT_MODES
            and self.residual is None
            and self.world.backend == "numba"
            and self.P <= _envkernels.PW_BLOCKSIZE
            and self.world.reroute == "in_flight"  # new_transfers carries transfers over before the merge
        )

    def _instance_bounds(self, conns: np.ndarray, fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(batch+1,) each instance's first controllable slot (of :meth:`_controllable`) and first fixed
        connection (of :meth:`_fixed_conns`); both are in instance order. Cached with them."""
        cache = self._bounds_cache
        if cache is None or cache[0] is not conns or cache[1] is not fixed:
            sim = self.world.sim
            assert sim is not None
            inst = np.arange(self.batch + 1)
            conn_inst = sim.unit_inst[sim.conn_unit]  # (connections,) instance of each connection
            ci, fi = conn_inst[conns], conn_inst[fixed]
            if (np.diff(ci) < 0).any() or (np.diff(fi) < 0).any():
                raise RuntimeError("controllable slots or fixed connections not in instance order")
            cache = (
                conns,
                fixed,
                np.searchsorted(ci, inst).astype(np.int64),
                np.searchsorted(fi, inst).astype(np.int64),
            )
            self._bounds_cache = cache
        return cache[2], cache[3]

    def step_split(
        self, split: np.ndarray, active: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Run one interval with an explicit split (connections, max_paths) of every connection.

        The entry point of engine-level policies (:mod:`ainet_gym.routing.policies`): baselines that a
        fixed-size action cannot express exactly (ECMP hashing in ``split`` mode is exact, spraying in
        ``path`` mode is not) are evaluated through it.
        """
        if self._needs_reset:
            raise RuntimeError("step() called before reset()")
        sim = self.world.sim
        assert sim is not None
        split = np.asarray(split, dtype=np.float64)
        if split.shape != (sim.n_conns, self.P):
            raise ValueError(
                f"split shape {split.shape}: expected {(sim.n_conns, self.P)} (connections, max_paths)"
            )
        if not np.all(np.isfinite(split)) or (split < 0).any():
            raise ValueError("split: every ratio must be finite and >= 0")
        self._plan[:] = -1  # choose modes: no plan ran, the split was given
        return self._run(split, active)

    def _run(
        self, split: np.ndarray, active: np.ndarray | None, split_set: bool = False
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One interval with a checked split (connections, max_paths) (``split_set``: already set on the
        engine)."""
        active = np.ones(self.batch, dtype=bool) if active is None else np.asarray(active, dtype=bool)
        compiled = self.world.backend == "numba"
        # compiled: the link history is pushed and written into the observation on the kernel threads,
        # right after each range's interval and figures; the rest of the observation follows the dynamics
        early = self._early_blocks(active) if compiled else None
        # per-connection figures only for the "flows" info key (nothing else of the env reads them)
        flows = "flows" in self.info_keys
        before = self._slot_maps().conn  # the slots' connections during the interval (churn may restack)
        res = self.world.step(
            split, active, connections=flows, split_set=split_set,
            after_figures=early.kernel if early is not None else None,
        )  # fmt: skip
        if flows:
            assert res.conn_bytes is not None
            moved = np.where(before >= 0, res.conn_bytes[np.maximum(before, 0)], 0.0)
            self._slot_bytes = (res, moved)
        self._default = self.world.default_split(copy=False)
        self._last = res
        if not compiled:  # the compiled observation pushes the history itself
            self._push_history(res, active)
        # the info's per-job arrays and rewards of this interval, if the kernel threads computed them
        self._step_jobs = (res, early.jobs) if early is not None and early.ran else None
        try:
            info = self.info(res)  # (a subclass's info hook still sees every step)
        finally:
            self._step_jobs = None
        # the info carries both built-in rewards of the interval: the env's own is one of them unless custom
        fn = self.reward_fn
        raw = info[f"reward_{fn.name}"] if type(fn) in _BUILTIN_REWARDS else fn(res)
        rewards = np.where(active, np.asarray(raw, dtype=np.float64), 0.0)
        truncated = (self.world.step_count >= self.episode_steps) & active
        terminated = np.zeros(self.batch, dtype=bool)
        obs = self._observe_numba(res, active, early) if compiled else self._observe(res, None)
        return obs, rewards, terminated, truncated, info

    def _early_blocks(self, active: np.ndarray) -> _EarlyBlocks:
        """The blocks of this step's observation and info that the kernel threads compute right after each
        range's interval (:class:`_EarlyBlocks`)."""
        return _EarlyBlocks(self, active)

    def _push_history(self, res: StepResult, active: np.ndarray) -> None:
        """Newest first: shift the link-utilisation history of the ``active`` copies by one interval."""
        hist = self.util_hist
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
        if w.backend == "numba":
            return self._observe_numba(res, push)
        # float32 blocks written in place: each float64 value is rounded to float32 once, as the cast of a
        # float64 vector would
        obs = np.empty((B, self.obs_dim), dtype=np.float32)
        L = self.obs_layout
        u = self.util_hist
        # each row was checked when it was the newest one: checking that one suffices
        if u.size and u[:, 0].max() > 1.0 + 1e-6:
            raise AssertionError(f"link utilisation {u[:, 0].max()} > 1: capacity constraint violated")
        np.minimum(u.reshape(B, -1), 1.0, out=obs[:, L["link_utilization"]])
        obs[:, L["link_capacity"]] = sim.capacity_bytes_per_s[:, self.net_links] / self._net_capacity
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
        obs[:, L["episode_progress"]] = np.minimum(w.step_count / self.episode_steps, 1.0)[:, None]
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
        self, res: StepResult | None, push: np.ndarray | None, early: _EarlyBlocks | None = None
    ) -> Any:
        """:meth:`observe` by compiled passes (:func:`ainet_gym.envs.kernels.observe_history` and :func:`~ainet_gym.envs.kernels.observe_rest`), the same
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
            obs, top = early.obs, early.tops.max()  # NaN if any range saw one
            if w.dynamics_changed or slots is not early.slots:  # the early rest blocks are out of date
                _envkernels.observe_rest(0, B, *self._rest_args(eff, util, slots, w.step_count), obs)
        else:
            rest = self._rest_args(eff, util, slots, w.step_count, res is not None)
            obs = np.empty((B, self.obs_dim), dtype=np.float32)
            if res is None or push is None:
                push = np.zeros(B, dtype=np.bool_)
            lu = self._no_lu if res is None else res.link_utilization
            tops = np.empty(1)
            _envkernels.observe_history(
                0, B, self.util_hist, np.ascontiguousarray(push, dtype=np.bool_),
                np.ascontiguousarray(lu, dtype=np.float64), self.net_links, L["link_utilization"].start, obs, tops,
            )  # fmt: skip
            _envkernels.observe_rest(0, B, *rest, obs)
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
        """The arguments of :func:`ainet_gym.envs.kernels.observe_rest` but the instance range and ``obs``,
        with the engine's current capacities, units and clocks."""
        w = self.world
        sim = w.sim
        assert sim is not None
        L = self.obs_layout
        return (
            self.net_links, np.ascontiguousarray(sim.capacity_bytes_per_s, dtype=np.float64), self._net_capacity,
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
        from ainet_gym.routing.policies import connection_demand

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
        ef[:, self.net_links, : self.history] = np.minimum(self.util_hist, 1.0).transpose(0, 2, 1)
        ef[:, :, self.history] = sim.capacity_bytes_per_s / f.capacity_bytes_per_s
        ei = np.broadcast_to(np.stack([f.link_src, f.link_dst]), (B, 2, f.n_links)).astype(np.float32)
        return {"flat": flat, "node_features": nf, "edge_index": ei.copy(), "edge_features": ef}

    # ------------------------------------------------------------------ info
    def info(self, res: StepResult | None) -> dict[str, Any]:
        """Batched info: arrays with a leading batch axis; per-job arrays have one entry per job slot
        and hold 0 where there is no value (empty slot, or no iteration completed in the interval),
        so that infos compare equal across same-seed rollouts."""
        done = self._step_jobs
        return self._info_of(res, done[1] if done is not None and done[0] is res else None)

    def _info_of(self, res: StepResult | None, jobs: dict[str, np.ndarray] | None) -> dict[str, Any]:
        """:meth:`info`, with the per-job arrays and rewards ``jobs`` already computed with NaN as 0 (by
        :func:`ainet_gym.envs.kernels.info_jobs` on the kernel threads) when given."""
        out = self._info(res, jobs)
        for k, v in out.items():
            if isinstance(v, np.ndarray) and v.dtype.kind == "f" and (jobs is None or k not in jobs):
                out[k] = _nan_to_zero(v)
        return out

    def _info(self, res: StepResult | None, jobs: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        w = self.world
        B, J = self.batch, w.n_job_slots
        nan = np.full((B, J), np.nan)
        out: dict[str, Any] = {
            "action_mask": self._slot_maps().mask.copy(),
            "step": w.step_count.copy(),
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
                ((w.sim.capacity_bytes_per_s <= 0) & w.fabric.network_links[None, :]).sum(axis=1)
                if res is None
                else res.failed_links
            ),
        }
        out["throughput_gbps"] = np.zeros(B) if res is None else res.throughput_gbps
        if self.plans:  # the choose modes: the plans' class, and the plan each instance ran (-1: none yet)
            out["plan_class"] = np.full(B, self.plan_class)
            out["plan"] = self._plan.copy() if res is not None else np.full(B, -1, dtype=np.int64)
        # per-iteration GPU utilisation: compute / mean step time of the iterations completed in the interval
        # (of the jobs that ran in it: res.compute_s is taken before churn replaces any)
        out["iteration_gpu_utilization"] = nan.copy() if res is None else res.compute_s / res.step_time_s
        if jobs is not None:
            out.update((k, jobs[k]) for k in _INFO_JOB_KEYS)
        if "links" in self.info_keys:
            cap = (
                w.sim.capacity_bytes_per_s
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
        used = (sim.split[:, :, None] > 0) & (paths >= 0) & ctrl[:, None, None]
        used &= hot[np.maximum(paths, 0)]  # only entries on hot links: a small set to deduplicate
        links = paths[used]
        conn = np.broadcast_to(np.arange(sim.n_conns)[:, None, None], paths.shape)[used]
        key = np.unique(links * sim.n_conns + conn)  # distinct (link, connection) pairs
        count = np.bincount(key // sim.n_conns, minlength=self.batch * w.fabric.n_links).reshape(
            self.batch, -1
        )
        return (count > 1).sum(axis=1)


class FabricRoutingEnv(gym.Env):
    """Route the collectives of AI training jobs over a data-centre fabric.

    ## Description
    A flow-level, max-min fair fluid model of a fabric (spine-leaf, fat-tree or rail-optimised) runs
    data-parallel jobs that compute and communicate on their own clocks. Each step is one decision
    interval of simulated time (``dynamics.decision_interval_ms``, by default the ideal step time of
    the slowest job). The agent routes each job's connections over their equal-cost candidate paths.
    Background storage traffic follows static ECMP, except in the ``ecmp_weights`` and ``split_bg``
    modes, which route it too (the class ``jobs+bg`` of the baselines ``lp+bg``, ``greedy+bg``, ...).

    ## Action Space
    Fixed size, one *slot* per connection of every job slot (``S`` slots, ``P = routing.max_paths``):

    - ``"path"``: ``MultiDiscrete([P] * S)``, a candidate-path index per slot. An index at or past the
      slot's number of candidate paths ``n`` wraps to ``index mod n`` (use :meth:`action_masks` with
      MaskablePPO to avoid them).
    - ``"split"`` (default): ``Box(-1, 1, (S * P,))``; slot ``s`` gets weights ``(a + 1) / 2`` over its
      paths, normalised to split ratios (all zero: even split).
    - ``"ecmp_weights"``: ``Box(-1, 1, (W,))``, one WCMP weight ``(a + 1) / 2`` per switch next-hop
      link that is an equal-cost choice; a path's share is the product of its hops' normalised weights.
      Applies to all traffic, background included.
    - ``"split_bg"``: ``split`` over every connection: the ``S`` slots of ``split`` first, then one slot
      per connection of every background source (``G_c`` more, ``S' = S + G_c``), so ``Box(-1, 1,
      (S' * P,))`` routes background too, per connection (the class of ``lp+bg``; finer than
      ``ecmp_weights``, whose switch weights apply to every connection through a switch alike).
    - ``"choose"``: ``Discrete(K)``, one of K routing plans for the whole interval: the engine-level
      baselines of the ``jobs`` class (background on static ECMP), in this order: 0 ``ecmp``,
      1 ``spray``, 2 ``wcmp``, 3 ``greedy``, 4 ``lp`` (:data:`ainet_gym.routing.plans.PLANS`). A plan
      computes its split exactly as that baseline does, so always choosing ``k`` reproduces the
      baseline's rollout. ``info["plan_class"]`` names the class, ``info["plan"]`` the plan that ran.
    - ``"choose_bg"``: the same over the ``jobs+bg`` class (background routed too): 0 ``ecmp``,
      1 ``spray+bg``, 2 ``wcmp+bg``, 3 ``greedy+bg``, 4 ``lp+bg``, 5 ``solo-lp+bg``.

    Slots whose connection does not exist or has one path are masked: ``info["action_mask"]`` (S,)
    and :meth:`action_masks` (S * P,) for sb3-contrib's MaskablePPO. Their actions are ignored.

    ## Observation Space
    ``Box(0, 1, (D,), float32)`` (``observation="flat"``), concatenated in this order:

    | index block                        | name               | min | max | meaning                                 |
    |------------------------------------|--------------------|-----|-----|-----------------------------------------|
    | ``H * N``                          | link_utilization   | 0   | 1   | bytes / (capacity * interval) of the N network links over the last H intervals, newest first |
    | ``N``                              | link_capacity      | 0   | 1   | current / nominal capacity (0 = failed) |
    | ``J * 5``                          | jobs               | 0   | 1   | per job slot: alive, efficiency (ideal/actual step), GPU utilisation, communicating now, iteration progress t/(t+ideal) |
    | ``S * 3``                          | slots              | 0   | 1   | per slot: controllable, offered demand next interval d/(1+d) in NIC-intervals (a background slot: its nominal demand), paths / P |
    | ``G * 2``                          | background         | 0   | 1   | per background source: active last interval, scheduled next interval |
    | ``1``                              | episode_progress   | 0   | 1   | step / episode_steps                    |
    | ``J * 3`` (``obs_features=("phase",)`` only) | job_phase | 0 | 1 | per job slot, in ideal iterations: time to its next communication phase, share of the iteration's communication bytes left, that share times its ideal communication time (:meth:`EnvCore.job_phase_features`) |

    ``env.unwrapped.core.obs_layout`` gives the slices. ``observation="graph"`` returns a Dict with
    this ``flat`` vector plus ``node_features`` (one-hot kind), ``edge_index`` (2, links) and
    ``edge_features`` (utilisation history, capacity fraction) for GNN policies. Every block is
    float32, ``edge_index`` too (node ids, exact below 2**24 nodes; cast to int64 for a GNN library),
    so ``gymnasium.wrappers.FlattenObservation`` gives a float32 vector.

    ## Rewards
    ``reward="gpu_utilization"`` (GPU-weighted mean of compute time / elapsed time in the interval) or
    ``"step_time"`` (mean over jobs of ideal / actual step time), or any :class:`RewardFn` object. Both
    lie in [0, 1]. Both components are in ``info`` every step.

    ## Starting State
    Jobs placed by the scenario's placement (random placement and failures drawn from the seed); all
    jobs at the start of an iteration (or waiting ``start_ms``, plus a per-episode draw within
    ``start_jitter_ms``); periodic background from its offset (plus a draw within
    ``offset_jitter_steps``); ECMP hash seed drawn from the seed. The default scenarios of the registered
    ids draw each job's start over at least one iteration, so every seed is another episode.

    ## Episode End
    Never terminated (a continuing task); truncated after ``episode_steps`` intervals.

    ## Arguments
    ``scenario`` (name, path, dict or Scenario), ``action_mode``, ``history`` (H, default 4),
    ``observation`` (``"flat"`` | ``"graph"``), ``reward``, ``episode_steps`` (overrides the scenario),
    ``render_mode`` (``"ansi"`` | ``"rgb_array"``), ``backend`` (``"numba"`` | ``"numpy"``; None: the
    ``AINET_GYM_BACKEND`` variable, else numba when it imports; both give the same results to round-off),
    ``info_keys`` (optional extra ``info``, computed only when asked: ``"links"`` adds
    ``link_capacity_gbps``, ``link_bytes``, ``link_utilization`` per link id; ``"flows"`` adds
    ``flow_bytes`` and ``flow_rate_gbps`` per action slot, i.e. per job connection; ``"collisions"`` the
    hot links shared by two or more routed connections), ``residual`` (None, or the name of an
    engine-level routing of class ``none`` or ``jobs+bg``, e.g. ``"lp+bg"`` or ``"solo-lp+bg"``, in the
    ``ecmp_weights`` and ``split_bg`` modes: the action then *adjusts* that policy's split each step
    instead of setting one, each path's share times ``exp(residual_scale * x)``, ``x`` the sum of the
    actions of the path's knob links (``ecmp_weights``) or the slot's path action (``split_bg``);
    actions of 0 give the base routing exactly), ``residual_scale`` (default ``log 4``) and
    ``obs_features`` (optional observation blocks, none by default: ``("phase",)`` appends ``job_phase``,
    each job's position in its iteration read from the simulator's state, after ``episode_progress``;
    the blocks before it keep their offsets).

    ## Vectorized environment
    :class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` steps B copies with one batched engine call
    (``gymnasium.make_vec(id, num_envs=B, vectorization_mode="vector_entry_point")``).

    ## Version History
    - v0: initial release.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        scenario: str | os.PathLike | dict | Scenario = "spine-leaf-2to1",
        action_mode: str = "split",
        history: int = 4,
        observation: str = "flat",
        reward: str | RewardFn | None = None,
        episode_steps: int | None = None,
        render_mode: str | None = None,
        backend: str | None = None,
        info_keys: Sequence[str] = (),
        residual: str | None = None,
        residual_scale: float = RESIDUAL_SCALE,
        obs_features: Sequence[str] = (),
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode = {render_mode!r}: allowed: None, {', '.join(self.metadata['render_modes'])}"
            )
        self.core = EnvCore(
            scenario, 1, action_mode, history, observation, reward, episode_steps, backend, info_keys,
            residual, residual_scale, obs_features,
        )  # fmt: skip
        self.action_space = self.core.action_space
        self.observation_space = self.core.observation_space
        self.render_mode = render_mode

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is None and not hasattr(self, "_seeded"):
            seed = int(self.np_random.integers(2**31))
        self._seeded = True
        obs, info = self.core.reset([seed])
        return self._one(obs), self._one_info(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, r, term, trunc, info = self.core.step(action)  # validated (and converted) by the core
        return self._one(obs), float(r[0]), bool(term[0]), bool(trunc[0]), self._one_info(info)

    def snapshot(self) -> EnvSnapshot:
        """The env's state (:meth:`EnvCore.snapshot`, with the env's own generator): :meth:`restore`
        puts it back, and the same actions from there give the same rollout, bit for bit (planning,
        tree search)."""
        snap = self.core.snapshot()
        rng = self._np_random
        return replace(
            snap,
            extra={
                "np_random": None if rng is None else (type(rng.bit_generator), rng.bit_generator.state),
                "seeded": hasattr(self, "_seeded"),
            },
        )

    def restore(self, snap: EnvSnapshot) -> None:
        """Put the state of ``snap`` (:meth:`snapshot`) back.

        Raises
        ------
        ValueError
            If ``snap`` is not a snapshot of an env of this scenario with one instance.
        """
        self.core.restore(snap)
        rng = snap.extra.get("np_random")
        if rng is not None:
            g = np.random.Generator(rng[0]())
            g.bit_generator.state = rng[1]
            self._np_random = g
        if snap.extra.get("seeded"):
            self._seeded = True
        elif hasattr(self, "_seeded"):
            del self._seeded

    def action_masks(self) -> np.ndarray:
        """Valid path indices per slot, flat (S * P,) bool, for MaskablePPO."""
        return self.core.action_masks()[0]

    @staticmethod
    def _one(obs: Any) -> Any:
        if isinstance(obs, dict):
            return {k: v[0] for k, v in obs.items()}
        return obs[0]

    @staticmethod
    def _one_info(info: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in info.items():
            x = v[0]
            out[k] = x.item() if isinstance(x, np.generic) else x
        return out

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            return None
        from ainet_gym.envs.render import render_ansi, render_rgb

        if self.render_mode == "ansi":
            return render_ansi(self.core, 0)
        return render_rgb(self.core, 0)


#: the per-job info arrays :func:`ainet_gym.envs.kernels.info_jobs` writes, in its order
_INFO_JOB_KEYS = (
    "step_time_ms",
    "ideal_step_time_ms",
    "gpu_utilization",
    "efficiency",
    "iteration_gpu_utilization",
)


class _EarlyBlocks:
    """The observation blocks and the per-job part of the info of a compiled step, computed
    on the kernel threads right after each instance range's interval and figures
    (:meth:`FabricWorld.step`'s ``after_figures``): the observation array, each range's largest newest
    utilisation and the info arrays."""

    def __init__(self, core: EnvCore, active: np.ndarray) -> None:
        self.core = core
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
        jobs = {k: np.empty((B, J)) for k in _INFO_JOB_KEYS}
        jobs.update(reward_gpu_utilization=np.empty(B), reward_step_time=np.empty(B))
        self.jobs = jobs
        info_args = (fig.step_t, fig.ideal, fig.util, fig.eff, fig.compute_s, fig.ngpu,
                     *(jobs[k] for k in _INFO_JOB_KEYS), jobs["reward_gpu_utilization"], jobs["reward_step_time"])  # fmt: skip

        # the other blocks, as they will be if the dynamics change no capacity and restack nothing (the
        # common case; else they are written again after the dynamics): the capacities of this interval,
        # the jobs after it, the slots as they are, the progress after the step
        w = core.world
        self.slots = core._slot_features()
        rest_args = core._rest_args(fig.eff, fig.util, self.slots, w.step_count + self.push)

        def both(lo: int, hi: int) -> None:
            i = where[(lo, hi)]
            _envkernels.observe_history(lo, hi, core.util_hist, self.push, fig.lu, core.net_links, start, self.obs,
                                        self.tops[i : i + 1])  # fmt: skip
            _envkernels.info_jobs(lo, hi, *info_args, np.empty(J))
            _envkernels.observe_rest(lo, hi, *rest_args, self.obs)

        return both, lambda lo, hi: (lo, hi)
