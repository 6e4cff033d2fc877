"""The read-only API for agents of :class:`~ainet_gym.envs.env.EnvCore` (:class:`EnvAgentAPI`, its base class):
what agents, baselines and render read of the simulation (the episode state and its binding, the fabric, the
units, the slots, the candidate paths, the capacities, the demand), as read-only array views."""

from __future__ import annotations

from typing import Any

import numpy as np

from ainet_gym.envs.slots import SlotLayout, SlotMaps
from ainet_gym.envs.state import EnvState, EpisodeState
from ainet_gym.fabric.topology import Fabric
from ainet_gym.routing.context import RoutingContext
from ainet_gym.sim.stack import UnitStack
from ainet_gym.sim.state import WAITING
from ainet_gym.sim.world import FabricWorld, StepResult

__all__ = ["EnvAgentAPI"]


def _readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (the array itself stays writable for its owner)."""
    v = a.view()
    v.flags.writeable = False
    return v


class EnvAgentAPI:
    """The read-only API for agents of :class:`~ainet_gym.envs.env.EnvCore`: it holds no state of its own and
    reads the core's, the attributes annotated here, which ``EnvCore.__init__``, its reset and its step set."""

    # set by EnvCore.__init__, EnvCore.reset and the step
    _default: np.ndarray
    _episode: EpisodeState | None
    _maps: SlotMaps
    _maps_of: tuple | None
    _slot_bytes: tuple[StepResult, np.ndarray] | None
    batch: int
    slot_layout: SlotLayout
    state: EnvState
    world: FabricWorld

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
        from ainet_gym.routing.loads import connection_demand

        return connection_demand(self.world)

    def offered_load(self, split: np.ndarray, demand: np.ndarray | None = None) -> np.ndarray:
        """(B, L) bytes that ``demand`` (C,) bytes (default: :meth:`connection_demand`) puts on each link
        when routed by ``split`` (C, P) (:func:`ainet_gym.routing.policies.offered_load`)."""
        from ainet_gym.routing.loads import offered_load

        return offered_load(self.world, split, self.connection_demand() if demand is None else demand)

    def _sim(self) -> Any:
        sim = self.world.sim
        if sim is None:
            raise RuntimeError("the simulation exists after the first reset()")
        return sim
