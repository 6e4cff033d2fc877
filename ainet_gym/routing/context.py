"""What a routing policy reads: the small, typed view of a world that :mod:`ainet_gym.routing` works on.

Routing sits below the simulation in the pipeline (``scenario -> fabric -> routing -> sim -> envs``), so it
must not type against the simulation's classes. These protocols name every attribute the policies of
:mod:`ainet_gym.routing.policies` and :mod:`ainet_gym.routing.plans` read, and nothing else:

- :class:`RoutingContext`, the decision's world (a :class:`ainet_gym.sim.world.FabricWorld` is one), with the
  scenario and the step counts a stateful (forecasting) policy reads;
- :class:`ConnectionTable`, its batched connection table (the world's ``BatchSim``);
- :class:`EngineInputs`, the split and capacities of its engine state (the ``BatchSim``'s ``EngineState``);
- :class:`EpisodeClock`, its episode state's step counts (the world's ``WorldState``);
- :class:`LastInterval`, what a reactive policy reads of the previous interval's result (a
  :class:`ainet_gym.sim.world.StepResult` is one).

Agents get the context of an env from :attr:`ainet_gym.envs.env.EnvCore.routing_context` and call an
engine-level policy as ``get_policy(name)(core.routing_context, core.last_result)``. The protocols are
structural: anything with these attributes routes (a test checks that the world and its result satisfy
them, attribute by attribute).

Shapes: ``B`` instances in the batch, ``C`` connections (batch-flat), ``P`` the most candidate paths of any
connection (``max_paths``), ``H`` hops, ``F`` flows, ``M`` flow-to-connection memberships, ``U`` units (a
job or a background source of one instance), ``L`` links per instance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from ainet_gym.scenario.spec import Scenario

__all__ = [
    "BackgroundState",
    "ConnectionTable",
    "EngineInputs",
    "EpisodeClock",
    "FabricLinks",
    "LastInterval",
    "RoutingContext",
]


class BackgroundState(Protocol):
    """The part of the simulation state routing reads: whether each background source is on."""

    @property
    def bg_on(self) -> np.ndarray:
        """(U,) bool: the unit's background source is scheduled on now (False for jobs)."""
        ...


class EngineInputs(Protocol):
    """The part of the engine's state routing reads: the split that ran and the capacities."""

    @property
    def capacity_bytes_per_s(self) -> np.ndarray:
        """(B, L) each link's current capacity (0 for a failed link)."""
        ...

    @property
    def split(self) -> np.ndarray:
        """(C, P) the split that ran in the last interval."""
        ...


class ConnectionTable(Protocol):
    """The batched connection table: connections, their candidate paths, flows and units."""

    @property
    def n_conns(self) -> int:
        """C, connections over the whole batch."""
        ...

    @property
    def n_units(self) -> int:
        """U, units over the whole batch."""
        ...

    @property
    def conn_unit(self) -> np.ndarray:
        """(C,) the unit each connection belongs to."""
        ...

    @property
    def conn_npaths(self) -> np.ndarray:
        """(C,) candidate paths of each connection (1 for single-path ones)."""
        ...

    @property
    def conn_paths(self) -> np.ndarray:
        """(C, P, H) link ids of each candidate path within its instance, -1 padding."""
        ...

    @property
    def conn_paths_global(self) -> np.ndarray:
        """(C, P, H) the same as batch-global link ids (``instance * L + link``), -1 padding."""
        ...

    @property
    def member_conn(self) -> np.ndarray:
        """(M,) the connection of each membership."""
        ...

    @property
    def member_flow(self) -> np.ndarray:
        """(M,) the flow of each membership."""
        ...

    @property
    def flow_unit(self) -> np.ndarray:
        """(F,) the unit of each flow."""
        ...

    @property
    def flow_bg(self) -> np.ndarray:
        """(F,) bool: the flow is background traffic."""
        ...

    @property
    def flow_bytes(self) -> np.ndarray:
        """(F,) bytes per iteration of a job's flow."""
        ...

    @property
    def flow_demand(self) -> np.ndarray:
        """(F,) bytes/s a background flow offers while on."""
        ...

    @property
    def flow_gphase(self) -> np.ndarray:
        """(F,) the (batch-global) phase of each flow, -1 for a background flow."""
        ...

    @property
    def phase_segments(self) -> np.ndarray:
        """(phases,) segments of the ring phase a phase is one of (``routing.ring_run_ahead_bytes``; 1: a
        phase not cut): its flows move 1/segments of the ring's bytes."""
        ...

    @property
    def unit_bg(self) -> np.ndarray:
        """(U,) bool: the unit is a background source."""
        ...

    @property
    def unit_inst(self) -> np.ndarray:
        """(U,) the batch instance of each unit."""
        ...

    @property
    def engine_state(self) -> EngineInputs:
        """The engine's state beside the simulation state (routing reads the split and the capacities)."""
        ...

    @property
    def state(self) -> BackgroundState:
        """The simulation state (routing reads only :attr:`BackgroundState.bg_on`)."""
        ...


class EpisodeClock(Protocol):
    """The part of the world's episode state routing reads: how far each instance's episode has run."""

    @property
    def step_count(self) -> np.ndarray:
        """(B,) int: intervals each instance has run since its last reset (0: just reset)."""
        ...


class FabricLinks(Protocol):
    """The fabric as routing reads it: its link count and nominal capacities."""

    @property
    def n_links(self) -> int:
        """L, links per instance."""
        ...

    @property
    def capacity_bytes_per_s(self) -> np.ndarray:
        """(L,) each link's nominal capacity, bytes/s (before failures and degradations; the current
        capacity is :attr:`EngineInputs.capacity_bytes_per_s`)."""
        ...


class LastInterval(Protocol):
    """What a reactive policy reads of the previous interval."""

    @property
    def link_bytes(self) -> np.ndarray:
        """(B, L) bytes each link carried in the interval."""
        ...


class RoutingContext(Protocol):
    """The decision's world as routing reads it."""

    @property
    def batch(self) -> int:
        """B, instances in the batch."""
        ...

    @property
    def max_paths(self) -> int:
        """P, the most candidate paths of any connection."""
        ...

    @property
    def decision_interval_s(self) -> float:
        """Seconds of simulated time per decision."""
        ...

    @property
    def fabric(self) -> FabricLinks:
        """The fabric (routing reads its link count and nominal capacities)."""
        ...

    @property
    def scenario(self) -> Scenario:
        """The scenario the world runs (a forecasting policy fits its model on training episodes of it;
        ``scenario.dynamics.episode_steps`` is the episode length)."""
        ...

    @property
    def sim(self) -> ConnectionTable | None:
        """The batched connection table (None before the first reset)."""
        ...

    @property
    def job_unit(self) -> np.ndarray:
        """(B, job slots) the unit of each job slot, -1 for an empty slot."""
        ...

    @property
    def job_ideal_step_s(self) -> np.ndarray:
        """(B, job slots) each job's step time on a non-blocking fabric (nan for an empty slot)."""
        ...

    @property
    def job_ideal_comm_s(self) -> np.ndarray:
        """(B, job slots) each job's communication time per iteration, non-blocking (nan: empty)."""
        ...

    @property
    def state(self) -> EpisodeClock:
        """The world's episode state (routing reads only :attr:`EpisodeClock.step_count`)."""
        ...

    def default_split(self) -> np.ndarray:
        """(C, P) static ECMP: each connection's QPs hashed onto its candidate paths."""
        ...

    def live_paths(self) -> np.ndarray:
        """(C, P) bool: the candidate path exists and crosses no failed link."""
        ...

    def withdraw_dead(self, split: np.ndarray) -> np.ndarray:
        """``split`` with the share of dead paths moved to the connection's live ones."""
        ...

    def wcmp(self, link_weight: np.ndarray) -> np.ndarray:
        """(C, P) ECMP weighted by ``link_weight`` (B, L) at each switch (dead paths withdrawn)."""
        ...
