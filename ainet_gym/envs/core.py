"""The batched core of the envs: :class:`EnvCore` holds everything batched (observation, action decoding,
reward, info) over ``batch`` instances of one scenario; :class:`~ainet_gym.envs.gym_env.FabricRoutingEnv`
is the single env (``batch = 1``) and :class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` the native
vector env over the same core, so the two cannot drift apart.

The core's concerns live in modules of their own, as its base classes: :mod:`ainet_gym.envs.agent_api`
(the read-only API for agents), :mod:`ainet_gym.envs.share_weights` (share weights),
:mod:`ainet_gym.envs.actions` (checking and decoding actions), :mod:`ainet_gym.envs.spaces` (the action and
observation spaces), :mod:`ainet_gym.envs.observation` (the observation; its bases in
:mod:`ainet_gym.envs.obs_compiled` and :mod:`ainet_gym.envs.obs_blocks`, its layout :mod:`ainet_gym.envs.obs_layout`)
and :mod:`ainet_gym.envs.info` (the info dict); this module keeps the state
(construction, reset, snapshot and restore) and the step. The step and the reset as functions
of the episode state are :mod:`ainet_gym.envs.functional`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from ainet_gym.envs.actions import (
    ACTION_MODES,
    BG_SLOT_MODES,
    RESIDUAL_SCALE,
    EnvActions,
    check_residual,
)
from ainet_gym.envs.agent_api import EnvAgentAPI
from ainet_gym.envs.functional import step, step_split
from ainet_gym.envs.info import BUILTIN_REWARDS, INFO_KEYS, EnvInfo, check_info_keys
from ainet_gym.envs.obs_layout import OBSERVATION_MODES, check_obs_features
from ainet_gym.envs.observation import EnvObservation
from ainet_gym.envs.passes import EnvPasses, get_passes
from ainet_gym.envs.rewards import RewardFn, make_reward
from ainet_gym.envs.share_weights import EnvShareWeights
from ainet_gym.envs.slots import SlotLayout, SlotMaps, background_connections
from ainet_gym.envs.spaces import EnvSpaces
from ainet_gym.envs.state import (
    EnvSnapshot,
    EnvState,
    EpisodeState,
)
from ainet_gym.errors import check_choice
from ainet_gym.fabric.topology import TIERS
from ainet_gym.routing.plans import (
    CHOOSE_MODES,
    WEIGHTED_CLASS,
    plan_weight_table,
    plans_of_mode,
)
from ainet_gym.scenario.loader import LIMITS, load_scenario
from ainet_gym.scenario.spec import Scenario
from ainet_gym.sim.backends import import_compiled_backend
from ainet_gym.sim.backends.numba import env_passes as _env_passes
from ainet_gym.sim.world import FabricWorld, StepResult, WorldSnapshot

# the default backend's modules imported with the envs, not by the first env built (issue-31zw2: about 18 ms
# of CPU that `4ab3d09` paid at import, its engine importing its kernels, and main paid inside the bench's
# construction probe); `import ainet_gym` does not import the envs, so it stays as light
import_compiled_backend()

__all__ = ["EnvCore"]


def _check_arguments(
    action_mode: str, observation: str, history: int, episode_steps: int | None, batch: int
) -> None:
    """:class:`EnvCore`'s mode and size arguments checked (see :class:`FabricRoutingEnv`, Arguments).

    Raises
    ------
    ValueError
        Naming the bad value and what is allowed.
    """
    check_choice("action_mode", action_mode, ACTION_MODES)
    check_choice("observation", observation, OBSERVATION_MODES)
    hmax = int(LIMITS["history_max"])
    if isinstance(history, bool) or not isinstance(history, int | np.integer) or not 1 <= history <= hmax:
        raise ValueError(
            f"history = {history!r}: must be an integer in [1, {hmax:,}] (intervals of link history; "
            "ainet_gym.scenario.loader.LIMITS['history_max'])"
        )
    if episode_steps is not None and (not isinstance(episode_steps, int | np.integer) or episode_steps < 1):
        raise ValueError(f"episode_steps = {episode_steps!r}: must be an integer >= 1 or None")
    if isinstance(batch, bool) or not isinstance(batch, int | np.integer) or batch < 1:
        raise ValueError(f"num_envs = {batch!r}: must be an integer >= 1")


def _choose_plans(action_mode: str, extra_plans: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """(controls class, plans) of a ``choose`` mode with its ``extra_plans``; ``(None, ())`` for another mode.

    Raises
    ------
    ValueError
        If ``extra_plans`` is a string, or given with a mode that is not a ``choose`` mode, or
        :func:`~ainet_gym.routing.plans.plans_of_mode` refuses them.
    """
    if isinstance(extra_plans, str):
        raise ValueError(f"extra_plans = {extra_plans!r}: allowed: a list of plan names")
    if action_mode in CHOOSE_MODES:
        return plans_of_mode(action_mode, tuple(extra_plans))
    if extra_plans:
        raise ValueError(
            f"extra_plans = {list(extra_plans)!r} with action_mode = {action_mode!r}: allowed: extra plans "
            f"only in a choose mode ({', '.join(CHOOSE_MODES)})"
        )
    return None, ()


class EnvCore(EnvAgentAPI, EnvShareWeights, EnvActions, EnvSpaces, EnvObservation, EnvInfo):
    """Batched observation / action / reward logic over a :class:`FabricWorld`.

    The episode state lives in four containers (:mod:`ainet_gym.envs.state`): :attr:`state` (the core's
    own), ``world.state``, ``world.sim.state`` and ``world.sim.engine_state``; :attr:`episode_state` holds
    them together (an :class:`~ainet_gym.envs.state.EpisodeState`), :meth:`step` is the module's
    :func:`step` on it, :meth:`bind` makes another the core's (by reference), :meth:`snapshot` copies it and
    :meth:`restore` binds a copy."""

    #: the core's own episode state (:class:`~ainet_gym.envs.state.EnvState`): ``util_hist`` (batch, history,
    #: net_links) the link history, newest first; ``last`` the last interval's result (public:
    #: :attr:`last_result`); ``needs_reset``; ``plan`` (batch,) the plan run in the last interval (choose modes)
    state: EnvState

    #: the attributes a step may replace or write besides the episode state: caches derived from the
    #: structure and the state, each made again, or checked by the identity of what it came from, when that
    #: changes (the default split of the hash seeds and capacities; the slot maps and the slot tables of the
    #: units; the "flows" info's bytes of the last result; the episode state's view). Everything else of the
    #: core is structure, fixed after construction (tests/envs/test_step_function.py checks both).
    DERIVED: ClassVar[frozenset[str]] = frozenset(
        {"_default", "_slot_bytes", "_episode", "_maps", "_maps_of", "_ctrl_cache", "_fixed_cache",
         "_bounds_cache", "_demand_cache", "_slot_obs_cache", "_own_weights", "_step_jobs"}
    )  # fmt: skip

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
        extra_plans: Sequence[str] = (),
    ) -> None:
        if isinstance(info_keys, str):
            raise ValueError(f"info_keys = {info_keys!r}: allowed: a list of {', '.join(INFO_KEYS)}")
        check_info_keys(info_keys)
        self.residual, self.residual_scale = check_residual(residual, residual_scale, action_mode)
        self.obs_features = check_obs_features(obs_features)
        self.info_keys = tuple(info_keys)
        _check_arguments(action_mode, observation, history, episode_steps, batch)
        self.scenario = load_scenario(scenario)
        self.batch = int(batch)
        self.action_mode = action_mode
        #: ``choose`` modes: the controls class of the plans and the plans (policy names), in action order
        self.plan_class, self.plans = _choose_plans(action_mode, extra_plans)
        #: whether each step sets the share weights of the plans picked (class ``jobs+bg+weights``)
        self.weighted_plans = self.plan_class == WEIGHTED_CLASS
        # each plan's favoured job slot (-1: none) and weight, parsed once (a step indexes them)
        self._plan_slot, self._plan_weight = plan_weight_table(self.plans)
        # (flat_units list, (units,) their scenario share weights): rebuilt when a restack changes the units
        self._own_weights: tuple[list, np.ndarray] | None = None
        self.history = int(history)
        self.observation_mode = observation
        self.reward_fn = make_reward(reward if reward is not None else self.scenario.reward.kind)
        self.episode_steps = int(episode_steps or self.scenario.dynamics.episode_steps)
        self.world = FabricWorld(self.scenario, batch=self.batch, backend=backend)
        # the env side of the step on the world's backend (decode, observation): ainet_gym.envs.passes
        self._passes: EnvPasses = get_passes(self.world.backend)
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
        self.state = EnvState.initial(self.batch, self.history, self.n_net)
        self._episode: EpisodeState | None = None  # the view episode_state returned last (while current)
        # (result, info arrays) of the step being assembled, when the kernel threads computed them (info_jobs)
        self._step_jobs: tuple[StepResult, dict[str, np.ndarray]] | None = None
        self._ctrl_cache: tuple | None = None  # (slot_mask it was built from, controllable slot arrays)
        self._fixed_cache: tuple | None = None  # (controllable slots' connections, the other connections)
        self._bounds_cache: tuple | None = None  # (conns, fixed, per-instance bounds of each)
        self._demand_cache: tuple | None = None  # (flow_bytes, slot_conn it was built from, demand)
        self._slot_obs_cache: tuple | None = None  # (demand, slot_mask it was built from, float32 block)
        self._net_capacity = w.fabric.capacity_bytes_per_s[self.net_links]  # (net_links,) nominal bytes/s
        self._tiers_present = [i for i in range(len(TIERS)) if (w.fabric.link_tier == i).any()]
        self._no_lu = np.zeros((self.batch, w.fabric.n_links))  # compiled observation: no interval yet
        self._no_job = np.zeros((self.batch, w.n_job_slots))

    # ------------------------------------------------------------------ reset
    def reset(self, seeds: list[int | None], mask: np.ndarray | None = None) -> tuple[Any, dict[str, Any]]:
        mask = np.ones(self.batch, dtype=bool) if mask is None else mask
        self.world.reset(seeds=seeds, mask=mask)
        self.state.util_hist[mask] = 0.0
        self.state.last = None if mask.all() else self.state.last
        self.state.needs_reset = False
        self.state.plan[mask] = -1
        self._default = self.world.default_split(copy=False)
        return self.observe(None), self.info(None)

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> EnvSnapshot:
        """The state of every instance (:class:`EnvSnapshot`): :meth:`restore` puts it back, and the
        same actions from there give the same observations, rewards and infos, bit for bit.

        For planning and tree search: take a snapshot, try actions, restore, try others. The snapshot
        holds copies of the state arrays (the engine's per-unit, per-phase and per-flow state, its split,
        pinned splits and capacities, the link history, the generators), not of the compiled structure (shared, read-only), so it is cheap
        (tens of microseconds to a few milliseconds on the shipped scenarios). A custom reward object
        with state of its own is not part of it.

        Raises
        ------
        RuntimeError
            Before the first :meth:`reset`.
        """
        sim = self.world.sim
        if sim is None:
            raise RuntimeError("snapshot() before the first reset(): there is no state yet")
        sim.merge_pending()  # a deferred split is written by its merge: take it as the engine will run it
        ep = self.episode_state.copy()
        world = WorldSnapshot.of(self.scenario, ep.world, ep.sim, ep.engine, ep.units)
        return EnvSnapshot(world=world, state=ep.env, action_mode=self.action_mode)

    def restore(self, snap: EnvSnapshot, source: Sequence[int] | np.ndarray | None = None) -> None:
        """Put the state of ``snap`` back (:meth:`snapshot`). ``source`` (batch,) copies, into instance
        ``b``, the snapshot's instance ``source[b]`` instead (a core of another batch size may take them:
        ``[b] * K`` tries K continuations of instance ``b``; its last result is then the source
        instances', without per-connection figures).

        Without ``source`` the core binds a copy of the snapshot's episode state (:meth:`bind`); the state it
        held before is left as it was. With ``source`` the chosen instances are copied into the state it holds.

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
        if snap.state.util_hist.shape[1:] != self.state.util_hist.shape[1:]:
            raise ValueError(
                f"restore: the snapshot's link history has shape {snap.state.util_hist.shape[1:]}, this core's "
                f"{self.state.util_hist.shape[1:]} (another history length)"
            )
        if source is None and snap.world.stack is not None:  # a copy of the snapshot's episode state, bound
            self.world.restore_source(snap.world, None)  # (the scenario and the batch checked)
            self.bind(snap.episode.copy())
            return
        self.world.restore(snap.world, source)
        self.state.load(snap.state, source)  # (with source: the last result without per-connection figures)
        self._default = self.world.default_split(copy=False)
        self._slot_bytes = None

    # ------------------------------------------------------------------ step
    def step(
        self, actions: np.ndarray, active: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Validate, decode and run one interval in the ``active`` instances (all by default): :func:`step`
        on the episode state the core holds (:attr:`episode_state`), stepped in place."""
        if self.state.needs_reset:
            raise RuntimeError("step() called before reset()")
        return step(self, self.episode_state, actions, active)[1]

    def step_bound(
        self, actions: np.ndarray, active: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The body of :func:`step` on the state the core holds (:meth:`bind`): validate, decode and run one
        interval in the ``active`` instances."""
        if self.state.needs_reset:
            raise RuntimeError("step() called before reset()")
        fused = self._fused_decode()
        a = self._validate(actions, float64=not fused)  # raises before any state changes
        if self.plans:
            self.state.plan = np.where(np.ones(self.batch, dtype=bool) if active is None else active, a, -1)
            if self.weighted_plans:  # the share weights of each instance's plan, for this interval
                self._set_plan_weights_at(np.asarray(a, dtype=np.int64).reshape(-1))
        if fused:  # decoded and merged in one compiled pass per instance range
            w = self.world
            assert w.sim is not None
            ctrl, conns, npaths = self._controllable()
            fixed = self._fixed_conns(conns)
            ctrl_lo, fixed_lo = self._instance_bounds(conns, fixed)
            rows = np.ascontiguousarray(a).reshape(-1, self.P)  # float32 or float64
            w.sim.set_split_fused(
                _env_passes.decode_merge_range,
                (rows, ctrl, conns, npaths, self._default, fixed, ctrl_lo, fixed_lo),
                np.empty_like(self._default),
                defer=True,  # merged by each instance range just before its interval, on its thread
            )
            return self._run(w.sim.engine_state.split, active, split_set=True)
        return self._run(self.decode(a), active)  # a decoded split is valid by construction

    def _fused_decode(self) -> bool:
        """Whether :meth:`step` decodes split actions inside the engine's merge (numba backend)."""
        return (
            self.residual is None
            and self.world.reroute == "in_flight"  # new_transfers carries transfers over before the merge
            and self.world.split_flows == "coupled"  # independent hands bytes to the parts before the merge
            and self._passes.fuses_decode(self.action_mode, self.P)
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
        self, split: npt.ArrayLike, active: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Run one interval with an explicit split (connections, max_paths) of every connection:
        :func:`step_split` on the episode state the core holds (:attr:`episode_state`), stepped in place.

        The entry point of engine-level policies (:mod:`ainet_gym.routing.policies`): baselines that a
        fixed-size action cannot express exactly (ECMP hashing in ``split`` mode is exact, spraying in
        ``path`` mode is not) are evaluated through it.
        """
        if self.state.needs_reset:
            raise RuntimeError("step() called before reset()")
        return step_split(self, self.episode_state, split, active)[1]

    def step_split_bound(
        self, split: npt.ArrayLike, active: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The body of :func:`step_split` on the state the core holds (:meth:`bind`): check the split, then
        run one interval with it in the ``active`` instances."""
        if self.state.needs_reset:
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
        self.state.plan[:] = -1  # choose modes: no plan ran, the split was given
        return self._run(split, active)

    def _run(
        self, split: np.ndarray, active: np.ndarray | None, split_set: bool = False
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One interval with a checked split (connections, max_paths) (``split_set``: already set on the
        engine)."""
        if active is None:  # every instance (empty + fill: np.ones is two calls in Python, ~1 us more)
            active = np.empty(self.batch, dtype=bool)
            active.fill(True)
        else:
            active = np.asarray(active, dtype=bool)
        compiled = self._passes.compiled_observation
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
        self.state.last = res
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
        raw = info[f"reward_{fn.name}"] if type(fn) in BUILTIN_REWARDS else fn(res)
        rewards = np.where(active, np.asarray(raw, dtype=np.float64), 0.0)
        truncated = (self.world.state.step_count >= self.episode_steps) & active
        terminated = np.zeros(self.batch, dtype=bool)
        obs = self._observe_numba(res, active, early) if compiled else self._observe(res, None)
        return obs, rewards, terminated, truncated, info
