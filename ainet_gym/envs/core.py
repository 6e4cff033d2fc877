"""The batched core of the envs: :class:`EnvCore` holds everything batched (observation, action decoding,
reward, info) over ``batch`` instances of one scenario; :class:`~ainet_gym.envs.gym_env.FabricRoutingEnv`
is the single env (``batch = 1``) and :class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` the native
vector env over the same core, so the two cannot drift apart.

The core's concerns live in modules of their own, as its base classes: :mod:`ainet_gym.envs.actions`
(checking and decoding actions), :mod:`ainet_gym.envs.observation` (spaces and observation blocks) and
:mod:`ainet_gym.envs.info` (the info dict); this module keeps the state (construction, the read-only API
for agents, reset, share weights, snapshot and restore) and the step. The step and the reset as functions
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
from ainet_gym.envs.functional import step, step_split
from ainet_gym.envs.info import BUILTIN_REWARDS, INFO_KEYS, EnvInfo, check_info_keys
from ainet_gym.envs.observation import (
    OBSERVATION_MODES,
    EnvObservation,
    check_obs_features,
)
from ainet_gym.envs.passes import EnvPasses, get_passes
from ainet_gym.envs.rewards import RewardFn, make_reward
from ainet_gym.envs.slots import SlotLayout, SlotMaps, background_connections
from ainet_gym.envs.state import (
    EnvSnapshot,
    EnvState,
    EpisodeState,
)
from ainet_gym.errors import check_choice
from ainet_gym.fabric.topology import TIERS, Fabric
from ainet_gym.routing.context import RoutingContext
from ainet_gym.routing.plans import (
    CHOOSE_MODES,
    WEIGHTED_CLASS,
    plan_share_weights,
    plan_weight_table,
    plans_of_mode,
    share_weights_of,
)
from ainet_gym.scenario.loader import LIMITS, load_scenario
from ainet_gym.scenario.spec import Scenario
from ainet_gym.sim.backends.numba import env_passes as _env_passes
from ainet_gym.sim.stack import UnitStack
from ainet_gym.sim.state import WAITING
from ainet_gym.sim.world import FabricWorld, StepResult, WorldSnapshot

__all__ = ["EnvCore"]


def _readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the array itself stays writable for its owner)."""
    v = a.view()
    v.flags.writeable = False
    return v


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


def _share_array(name: str, x: npt.ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` broadcast to ``shape`` as float64 share weights, or a ValueError naming ``name``, the first bad
    value and what is allowed (finite numbers > 0)."""
    try:
        a = np.broadcast_to(np.asarray(x, dtype=np.float64), shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} = {x!r}: allowed: finite numbers > 0 of shape {shape} (or one number)"
        ) from None
    bad = np.argwhere(~(np.isfinite(a) & (a > 0.0)))
    if bad.size:
        i = tuple(int(k) for k in bad[0])
        raise ValueError(f"{name}[{', '.join(map(str, i))}] = {float(a[i])!r}: allowed: a finite number > 0")
    return a


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


class EnvCore(EnvActions, EnvObservation, EnvInfo):
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

    # ------------------------------------------------------------------ read-only API for agents
    # What agents, baselines and render read of the simulation, as read-only array views (writing one
    # raises ValueError); shapes use B = batch, J = job slots, S = action slots, C = connections of the
    # batch, P = max_paths, H = max hops, L = links of the fabric.

    @property
    def episode_state(self) -> EpisodeState:
        """The whole episode state the core holds: the engine's, the world's and the core's containers and
        the units they are laid out by (the objects :meth:`step` changes in place, not copies; a restack
        gives the engine new ones, so take it again after a step; :meth:`snapshot` copies it).

        Raises
        ------
        RuntimeError
            Before the first :meth:`reset`.
        """
        sim = self._sim()
        ep = self._episode
        if (
            ep is None
            or ep.sim is not sim.state
            or ep.engine is not sim.engine_state
            or ep.world is not self.world.state
            or ep.env is not self.state
            or ep.units is not sim.stack
        ):  # (a restack or a bind gave the core other containers)
            ep = self._episode = EpisodeState(
                sim=sim.state,
                engine=sim.engine_state,
                world=self.world.state,
                env=self.state,
                units=sim.stack,
            )
        return ep

    def holds(self, state: EpisodeState) -> bool:
        """Whether ``state`` is the episode state this core steps now (its containers, not a copy)."""
        sim = self.world.sim
        return (
            sim is not None
            and state.env is self.state
            and state.sim is sim.state
            and state.engine is sim.engine_state
            and state.world is self.world.state
            and state.units is sim.stack
        )

    def bind(self, state: EpisodeState) -> None:
        """Make ``state`` the episode state this core steps, by reference (no copy: the next steps write its
        arrays; :meth:`~ainet_gym.envs.state.EpisodeState.copy` it to keep it). Nothing to do when the core
        holds it already; else the engine restacks if its units are not those of ``state``'s jobs, and the
        caches derived from the state (the entries of the split, the default split, the capacities' product)
        are made again. The state the core held before is left as it was.

        Raises
        ------
        ValueError
            If ``state`` is not an episode state of this scenario with this core's batch and history.
        RuntimeError
            If ``state`` is that of a core not reset yet.
        """
        if not isinstance(state, EpisodeState):
            raise ValueError(f"bind: {type(state).__name__} is not an EpisodeState")
        if self.holds(state):
            return
        if state.env.util_hist.shape != self.state.util_hist.shape:
            raise ValueError(
                f"bind: the state's link history has shape {state.env.util_hist.shape}, this core's "
                f"{self.state.util_hist.shape} (another batch or history length)"
            )
        if state.env.needs_reset:
            raise RuntimeError("bind: the state is that of a core not reset yet")
        w = self.world
        if w.sim is None:
            w.reset([None] * self.batch)  # builds the engine; its state is replaced below
        held = self.episode_state
        try:
            w.bind_state(state.world, state.sim, state.engine, state.units)
        except ValueError:  # (units of another layout: the core goes on with the state it held)
            w.bind_state(held.world, held.sim, held.engine, held.units)
            raise
        self.state = state.env
        self._default = w.default_split(copy=False)
        self._slot_bytes = None

    @property
    def last_result(self) -> StepResult | None:
        """The :class:`StepResult` of the last interval (None right after a full reset); read-only."""
        return self.state.last

    @property
    def decision_interval_s(self) -> float:
        """Simulated seconds of one step."""
        return self.world.decision_interval_s

    @property
    def fabric(self) -> Fabric:
        """The fabric the instances share (structure: links, nominal capacities, tiers, ECMP groups); the
        world's own object, read it and do not change it."""
        return self.world.fabric

    @property
    def backend(self) -> str:
        """The simulation backend the core runs on (``"numba"`` or ``"numpy"``)."""
        return self.world.backend

    @property
    def job_names(self) -> list[list[str | None]]:
        """(B, J) the name of each job slot's job as of the last restack (None: empty slot); a copy."""
        return [list(x) for x in self.world.names]

    @property
    def unit_stack(self) -> UnitStack:
        """The engine's compiled units of the batch (:class:`~ainet_gym.sim.stack.UnitStack`), read-only: a
        restack (a reset that changes the jobs, churn, an AllToAll rotation) replaces it whole and renumbers
        the connections, so ``core.unit_stack is before`` tells that a split of ``before`` still applies.

        Raises
        ------
        RuntimeError
            Before the first :meth:`reset`.
        """
        return self._sim().stack

    def connection_bounds(self) -> np.ndarray:
        """(B+1,) int64: the first connection of each instance (instance ``b``'s connections are the rows
        ``bounds[b]:bounds[b + 1]`` of a split).

        Raises
        ------
        RuntimeError
            Before the first :meth:`reset`.
        """
        sim = self._sim()
        return np.searchsorted(sim.unit_inst[sim.conn_unit], np.arange(self.batch + 1)).astype(np.int64)

    def job_progress(self) -> np.ndarray:
        """(B, J) GPU-seconds of ideal work each job slot's job has done since it was stacked: per GPU,
        completed iterations times the ideal step time, plus the compute done in the current iteration,
        plus the share of its communication bytes moved times its ideal communication time (0 for an empty
        slot). The twin's and the imitation labels' terminal value (:mod:`ainet_gym.agents.twin`).

        Raises
        ------
        RuntimeError
            Before the first :meth:`reset`.
        """
        sim, w = self._sim(), self.world
        st = sim.state
        ju = w.job_unit
        alive = ju >= 0
        u = np.maximum(ju, 0)
        jf = sim.job_flows
        left = np.bincount(sim.flow_unit[jf], weights=st.rem[jf], minlength=sim.n_units)
        total = np.bincount(sim.flow_unit[jf], weights=sim.flow_bytes[jf], minlength=sim.n_units)
        comm_frac = np.where(total > 0, 1.0 - left / np.where(total > 0, total, 1.0), 0.0)
        compute = sim.unit_compute[u]
        done_compute = np.clip(compute - st.t_compute_left[u], 0.0, compute)
        done_compute = np.where(st.phase_cur[u] == WAITING, 0.0, done_compute)  # not started yet
        ideal_step = np.nan_to_num(w.job_ideal_step_s)
        ideal_comm = np.nan_to_num(w.job_ideal_comm_s)
        work = st.iterations_total[u] * ideal_step + done_compute + comm_frac[u] * ideal_comm
        return np.where(alive, work * sim.unit_ngpus[u], 0.0)

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
        return _readonly(self._sim().engine_state.capacity_bytes_per_s)

    @property
    def routing_context(self) -> RoutingContext:
        """The world as an engine-level routing policy reads it: ``get_policy(name)(core.routing_context,
        core.last_result)`` gives that policy's split for the next interval
        (:class:`ainet_gym.routing.context.RoutingContext` lists what a policy may read)."""
        return self.world

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
        self.state.util_hist[mask] = 0.0
        self.state.last = None if mask.all() else self.state.last
        self.state.needs_reset = False
        self.state.plan[mask] = -1
        self._default = self.world.default_split(copy=False)
        return self.observe(None), self.info(None)

    # ------------------------------------------------------------------ share weights
    def set_share_weights(self, jobs: npt.ArrayLike | None, background: npt.ArrayLike = 1.0) -> None:
        """The share weight of the flows of each job slot (``jobs``: (B, J), finite > 0; None: each job's
        ``share_weight`` of the scenario, default 1) and of
        each background source (``background``: a number, or (B, sources)), from the next step on:
        the engine makes the level ``rate / weight`` max-min fair (:meth:`BatchSim.set_share_weights
        <ainet_gym.sim.engine.BatchSim.set_share_weights>`; docs/model.md, "Share weights"). An empty slot's
        weight is not used; a job keeps its weight while it runs, a job that arrives starts at its
        ``share_weight``. In
        :meth:`snapshot` / :meth:`restore`.

        Raises
        ------
        ValueError
            If a weight is not a finite number > 0 or a shape does not fit (nothing is changed then).
        """
        w = self.world
        sim = self._sim()
        J, bg_unit = w.job_unit.shape[1], w.bg_unit
        jw = None if jobs is None else _share_array("jobs", jobs, (self.batch, J))
        bw = _share_array("background", background, bg_unit.shape)
        uw = self._scenario_unit_weights().copy()
        if jw is not None:
            ok = w.job_unit >= 0
            uw[w.job_unit[ok]] = jw[ok]
        uw[bg_unit.reshape(-1)] = bw.reshape(-1)
        sim.set_share_weights(uw)

    def set_plan_weights(self, plans: Sequence[str]) -> None:
        """The share weights of the plan each instance runs in the next step (``plans``: one plan name per
        instance): a weighted plan's (``favour{j}[-w{W}]+bg``: job slot ``j`` and the background at its weight,
        the other jobs 1; :func:`ainet_gym.routing.plans.plan_share_weights`), the scenario's for any other
        plan. A ``choose_bg`` env with weighted plans calls it in every :meth:`step`; engine-level agents of
        the class (the ``favour{j}+bg`` baselines, ``twin:...-w``) before their ``step_split``.

        Raises
        ------
        ValueError
            If ``plans`` does not name one plan per instance, or a weighted plan is misspelt.
        """
        if len(plans) != self.batch:
            raise ValueError(f"plans: {len(plans)} names; allowed: one plan name per instance ({self.batch})")
        jobs, bg = plan_share_weights(list(plans), self.world.job_unit.shape[1], self._scenario_job_weights())
        self.set_share_weights(jobs, np.broadcast_to(bg[:, None], self.world.bg_unit.shape))

    def _set_plan_weights_at(self, picked: np.ndarray) -> None:
        """:meth:`set_plan_weights` for the plans of this env picked by index (``picked``: (B,)), as a step
        does: the table parsed at construction, no name parsed."""
        jobs, bg = share_weights_of(
            self._plan_slot[picked], self._plan_weight[picked], self._scenario_job_weights()
        )
        self.set_share_weights(jobs, np.broadcast_to(bg[:, None], self.world.bg_unit.shape))

    def _scenario_unit_weights(self) -> np.ndarray:
        """(units,) each unit's scenario share weight (``jobs[].share_weight``, the background's 1), cached
        until a restack gives the simulation other units."""
        units = self._sim().flat_units
        if self._own_weights is None or self._own_weights[0] is not units:
            self._own_weights = (units, np.array([u.share_weight for u in units], dtype=np.float64))
        return self._own_weights[1]

    def _scenario_job_weights(self) -> np.ndarray:
        """(B, J) each job slot's scenario share weight (1 for an empty slot)."""
        ju = self.world.job_unit
        return np.where(ju >= 0, self._scenario_unit_weights()[np.maximum(ju, 0)], 1.0)

    def redraw_background(self, redraw: Any, seeds: Sequence[int], plans: int) -> None:
        """Re-draw, in place, the phases of the periodic background sources that the observation has not shown
        (a planner's copies of ``len(seeds)`` episodes laid out as (episode, sample, plan); ``redraw`` a
        :class:`ainet_gym.sim.redraw.FutureRedraw`): the bursts change from the next interval on, nothing else
        of the state does (docs/learning.md, "issue-26zr")."""
        redraw.apply(self.world.state, self.scenario.background, seeds, plans)

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
