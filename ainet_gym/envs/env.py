"""The Gymnasium environment: route the transfers of AI training jobs over a fabric.

:class:`EnvCore` holds everything batched (observation, action decoding, reward, info) over ``batch``
instances of one scenario; :class:`FabricRoutingEnv` is the single env (``batch = 1``) and
:class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` the native vector env over the same core, so the
two cannot drift apart.

The core's concerns live in modules of their own, as its base classes: :mod:`ainet_gym.envs.actions`
(checking and decoding actions), :mod:`ainet_gym.envs.observation` (spaces and observation blocks) and
:mod:`ainet_gym.envs.info` (the info dict); this module keeps the state (construction, reset, snapshot and
restore) and the step. Their names stay importable from here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from ainet_gym.envs.actions import (
    ACTION_MODES,
    BG_SLOT_MODES,
    RESIDUAL_MODES,
    RESIDUAL_SCALE,
    SPLIT_MODES,
    EnvActions,
    check_residual,
)
from ainet_gym.envs.info import BUILTIN_REWARDS, INFO_KEYS, EnvInfo, check_info_keys
from ainet_gym.envs.observation import (
    BG_FEATURES,
    JOB_FEATURES,
    OBS_FEATURE_BLOCKS,
    OBSERVATION_MODES,
    SLOT_FEATURES,
    EnvObservation,
    check_obs_features,
    obs_layout,
    squash,
)
from ainet_gym.envs.passes import EnvPasses, get_passes
from ainet_gym.envs.render import RENDER_MODES, check_render_mode
from ainet_gym.envs.rewards import RewardFn, make_reward
from ainet_gym.envs.slots import SlotLayout, SlotMaps, background_connections
from ainet_gym.envs.state import (
    EnvState,
    EpisodeState,
    GeneratorState,
    SingleWrapperState,
    VectorWrapperState,
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

# the constants and helpers of actions.py, observation.py and info.py stay importable from here
__all__ = [
    "ACTION_MODES",
    "BG_FEATURES",
    "BG_SLOT_MODES",
    "INFO_KEYS",
    "JOB_FEATURES",
    "OBSERVATION_MODES",
    "OBS_FEATURE_BLOCKS",
    "RESIDUAL_MODES",
    "RESIDUAL_SCALE",
    "SLOT_FEATURES",
    "SPLIT_MODES",
    "EnvCore",
    "EnvSnapshot",
    "FabricRoutingEnv",
    "StepOutput",
    "obs_layout",
    "reset",
    "squash",
    "step",
    "step_split",
    "step_state",
]


def _readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the array itself stays writable for its owner)."""
    v = a.view()
    v.flags.writeable = False
    return v


def reset_options_problem(options: Any) -> str | None:
    """What is wrong with the ``options`` of a ``reset``, or None when they are ``None`` or an empty mapping
    (the envs take no reset options). The Gymnasium envs raise it (:func:`check_reset_options`); the PettingZoo
    env warns with it for PettingZoo's API-test probe and refuses every other option naming keys and values
    (:func:`ainet_gym.envs.multiagent.check_parallel_reset_options`)."""
    if options is None or (isinstance(options, dict) and not options):
        return None
    shown = sorted(map(str, options)) if isinstance(options, dict) else type(options).__name__
    return (
        f"reset options = {shown}: not supported; allowed: None or {{}} (the env takes no reset options: "
        "a scenario, its seed and the episode length are set at construction and by seed=)"
    )


def check_reset_options(options: Any) -> None:
    """The ``options`` of a ``reset``: the envs take none, so ``None`` or an empty mapping; anything else
    (e.g. gymnasium's ``{"reset_mask": ...}`` for a partial reset) was ignored without a word before.

    Raises
    ------
    ValueError
        Naming the options given and what is allowed.
    """
    problem = reset_options_problem(options)
    if problem is not None:
        raise ValueError(problem)


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


@dataclass(frozen=True, eq=False)
class EnvSnapshot:
    """The state of an :class:`EnvCore` (and of the env around it) at one moment, from
    :meth:`EnvCore.snapshot`: the world's (:class:`~ainet_gym.sim.world.WorldSnapshot`, with the engine's),
    a copy of the core's own (:class:`~ainet_gym.envs.state.EnvState`: link history, last result, plan,
    reset flag) and, in :attr:`wrapper`, the Gymnasium wrapper's own. A copy: later steps do not change it."""

    world: WorldSnapshot
    state: EnvState  # a copy of the core's EnvState
    action_mode: str
    #: the state of the wrapper that took the snapshot: :class:`~ainet_gym.envs.state.SingleWrapperState`
    #: (:meth:`FabricRoutingEnv.snapshot`: its generator, whether it was reset),
    #: :class:`~ainet_gym.envs.state.VectorWrapperState` (the vector env's: pending autoresets, seed
    #: generator), or None (:meth:`EnvCore.snapshot`)
    wrapper: SingleWrapperState | VectorWrapperState | None = None

    @property
    def batch(self) -> int:
        """Instances in the snapshot."""
        return self.world.batch

    @property
    def episode(self) -> EpisodeState:
        """The snapshot's copies as one :class:`~ainet_gym.envs.state.EpisodeState` (held, not copied again:
        :meth:`~ainet_gym.envs.state.EpisodeState.copy` it before stepping it, so that the snapshot serves
        again)."""
        w = self.world
        if w.stack is None:
            raise ValueError(
                "EnvSnapshot.episode: the snapshot does not record its units (take it with snapshot())"
            )
        return EpisodeState(sim=w.units.state, engine=w.engine, world=w.state, env=self.state, units=w.stack)


#: (observations, rewards, terminated, truncated, info) of one step of a core
StepOutput = tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


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


def step(
    core: EnvCore, state: EpisodeState, actions: Any, active: np.ndarray | None = None
) -> tuple[EpisodeState, StepOutput]:
    """One step as a function of (structure, state, action) -> (state, result), as gymnax's ``step_env``
    reads: ``core`` is the structure (the scenario compiled: fabric, candidate paths, spaces, slot layout,
    settings, and caches derived from structure and state), ``state`` the episode state
    (:class:`~ainet_gym.envs.state.EpisodeState`), ``actions`` (batch, ...) the action of every instance
    (``active``: the instances that step, all by default). Returns the state after the step and the step's
    output (observations, rewards, terminated, truncated, info).

    The state is stepped in place, by reference: its arrays are written, and the state returned holds them
    (the same containers, but for the engine's two when the step restacked the units: churn, an AllToAll
    rotation). Use the state returned and treat the one passed as spent; to keep a state, step a copy
    (``step(core, s.copy(), a)``). A state the core does not hold yet is bound first
    (:meth:`EnvCore.bind`: no copy; the core's caches derived from the state are made again), so one core
    steps any number of episodes in turns; the state it held before is left as it was.
    :meth:`EnvCore.step` is ``step(core, core.episode_state, actions, active)``.

    Raises
    ------
    RuntimeError
        If ``state`` is that of a core not reset yet.
    ValueError
        If ``state`` is not an episode state of this scenario with this core's batch and history, or the
        actions are not in the action space.
    """
    core.bind(state)
    out = core.step_bound(actions, active)
    return core.episode_state, out


def step_split(
    core: EnvCore, state: EpisodeState, split: npt.ArrayLike, active: np.ndarray | None = None
) -> tuple[EpisodeState, StepOutput]:
    """One interval with an explicit split as a function of (structure, state, split) -> (state, result),
    as :func:`step` reads for an action: ``split`` (connections, max_paths) is every connection's split
    (the engine-level policies' action, :mod:`ainet_gym.routing.policies`), ``active`` the instances that
    step (all by default). Returns the state after the interval and its output (observations, rewards,
    terminated, truncated, info).

    The state is bound and stepped in place, by reference, as in :func:`step` (use the state returned; step a
    copy to keep one); :meth:`EnvCore.step_split` is ``step_split(core, core.episode_state, split, active)``.

    Raises
    ------
    RuntimeError
        If ``state`` is that of a core not reset yet.
    ValueError
        If ``state`` does not fit this core (:meth:`EnvCore.bind`), or ``split`` is not of shape
        (connections, max_paths) with finite ratios >= 0.
    """
    core.bind(state)
    out = core.step_split_bound(split, active)
    return core.episode_state, out


def reset(
    core: EnvCore, seeds: list[int | None], state: EpisodeState | None = None, mask: np.ndarray | None = None
) -> tuple[EpisodeState, tuple[Any, dict[str, Any]]]:
    """A new episode as a function, as gymnax's ``reset_env`` reads: returns the episode state after
    :meth:`EnvCore.reset` with ``seeds`` (one per instance) and its output (observations, info).

    ``state`` None: a new state; the state the core held (if any) is left as it was (a copy of it is
    reset, so it costs a copy). Else ``state`` is bound (:meth:`EnvCore.bind`) and its instances ``mask``
    (default: all) are reset in place, the others going on.
    """
    if state is not None:
        core.bind(state)
    elif core.world.sim is not None:
        core.bind(core.episode_state.copy())
    out = core.reset(seeds, mask)
    return core.episode_state, out


def step_state(core: EnvCore, state: EnvSnapshot, actions: np.ndarray) -> tuple[EnvSnapshot, StepOutput]:
    """:func:`step` on snapshots: ``state`` (an :class:`EnvSnapshot`) is not changed (a copy of its episode
    state is stepped); returns the state after the step as a new snapshot, and the step's output. From a
    state ``s``, ``core.step(a)`` gives the output of ``step_state(core, s, a)`` bit for bit. The copies cost
    about a step and a half (docs/development.md, "State as data"): for search, replay and tests."""
    if not isinstance(state, EnvSnapshot):
        raise ValueError(
            f"step_state: {type(state).__name__} is not an EnvSnapshot (take one with snapshot())"
        )
    _, out = step(core, state.episode.copy(), actions)
    return core.snapshot(), out


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
      1 ``spray+bg``, 2 ``wcmp+bg``, 3 ``greedy+bg``, 4 ``lp+bg``, 5 ``solo-lp+bg``; with ``extra_plans``
      (e.g. ``("isolate0+bg", "isolate1+bg")``, :data:`ainet_gym.routing.plans.EXTRA_PLANS`) those plans
      follow, 6 on, in the order given. A weighted extra plan (``favour{j}+bg``, ``favour{j}-w{W}+bg``)
      makes the env's class ``jobs+bg+weights``: each step then also sets the share weights of the plan
      each instance picked (:meth:`EnvCore.set_plan_weights`; docs/learning.md, "issue-26zi").

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
    the blocks before it keep their offsets) and ``extra_plans`` (``choose`` modes: plans appended to the
    mode's own, see the action space).

    ## Vectorized environment
    :class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` steps B copies with one batched engine call
    (``gymnasium.make_vec(id, num_envs=B, vectorization_mode="vector_entry_point")``).

    ## Version History
    - v0: initial release.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

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
        extra_plans: Sequence[str] = (),
    ) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        self.core = EnvCore(
            scenario, 1, action_mode, history, observation, reward, episode_steps, backend, info_keys,
            residual, residual_scale, obs_features, extra_plans,
        )  # fmt: skip
        self.action_space = self.core.action_space
        self.observation_space = self.core.observation_space
        self.render_mode = render_mode

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict[str, Any]]:
        check_reset_options(options)
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
        """The env's state (:meth:`EnvCore.snapshot`, with the env's own, :class:`SingleWrapperState`):
        :meth:`restore` puts it back, and the same actions from there give the same rollout, bit for bit
        (planning, tree search)."""
        rng = self._np_random
        own = SingleWrapperState(
            np_random=None if rng is None else GeneratorState.of(rng), seeded=hasattr(self, "_seeded")
        )
        return replace(self.core.snapshot(), wrapper=own)

    def restore(self, snap: EnvSnapshot) -> None:
        """Put the state of ``snap`` (:meth:`snapshot`) back. A snapshot without the single env's own
        (:meth:`EnvCore.snapshot`, a vector env's of one copy) restores the core; the env then counts as
        not reset (its next ``reset()`` without a seed draws the core's seed) and keeps its generator.

        Raises
        ------
        ValueError
            If ``snap`` is not a snapshot of an env of this scenario with one instance.
        """
        self.core.restore(snap)
        own = snap.wrapper if isinstance(snap.wrapper, SingleWrapperState) else None
        if own is not None and own.np_random is not None:
            self._np_random = own.np_random.generator()
        if own is not None and own.seeded:
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
        """The single env's info: each batched value's row 0, a numpy scalar as a Python one."""
        out = {}
        for k, v in info.items():
            if type(v) is np.ndarray and v.ndim == 1:  # v.item() is v[0].item(), one call instead of two
                out[k] = v.item(0)
                continue
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
