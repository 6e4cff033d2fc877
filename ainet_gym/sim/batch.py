"""The batched simulation (:class:`BatchSim`): ``batch`` instances of one fabric stacked, the units' state and
the engine's state beside it, and the interval run on the backend's strategy. Its structure side (stacking,
restacks, snapshots, share weights) is :class:`~ainet_gym.sim.batch_units.BatchUnits`, its split side (the
split, the part and carry flows, the merged entries) :class:`~ainet_gym.sim.batch_split.BatchSplit`: its base
classes, one module per concern."""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from ainet_gym.fabric.topology import Fabric
from ainet_gym.sim.backends import get_backend
from ainet_gym.sim.backends.base import Pending, Then
from ainet_gym.sim.backends.numba import settings as _settings
from ainet_gym.sim.batch_split import BatchSplit
from ainet_gym.sim.batch_units import BatchUnits
from ainet_gym.sim.entries import EntryTable
from ainet_gym.sim.interval import IntervalMetrics
from ainet_gym.sim.stack import UnitStack
from ainet_gym.sim.state import EngineState, SimState
from ainet_gym.sim.unit import CompiledUnit

__all__ = ["BatchSim"]


_STATE_FIELDS = tuple(f.name for f in fields(SimState))  # read through BatchSim.state only
_ENGINE_FIELDS = tuple(f.name for f in fields(EngineState))  # read through BatchSim.engine_state only
_STACK_FIELDS = tuple(f.name for f in fields(UnitStack))  # BatchSim attributes that view the structure


class BatchSim(BatchUnits, BatchSplit):
    """Stacked state of ``batch`` instances of one fabric, each with its own units and capacities.

    Build with the list of units of each instance; call :meth:`run_interval` with the split of every
    connection. Structure changes (a job arrives or leaves) go through :meth:`set_units`.

    Three kinds of data: the *structure* (:attr:`stack`, a :class:`~ainet_gym.sim.stack.UnitStack` of
    ``unit_*``, ``phase_*``, ``flow_*``, ``member_*``, ``conn_*``, ``inst_*`` tables, replaced by
    :meth:`set_units` only), the *state* of the units (:attr:`state`, a :class:`SimState`, mutated in
    place by :meth:`run_interval`: read and write it as ``sim.state.rem`` etc.) and the *engine's state*
    beside it (:attr:`engine_state`, an :class:`~ainet_gym.sim.state.EngineState`: the split, written by
    :meth:`set_split`, the pinned splits, the part flows' split and bytes, the capacities, written by the
    world as ``sim.engine_state.capacity_bytes_per_s``, and the lazy switch's cost model). The incidence
    entries ``e_*`` of the split are derived from the structure and the split. Each field of the
    structure is also readable as an attribute of the same name (``sim.conn_npaths`` is
    ``sim.stack.conn_npaths``, the same array).
    """

    stack: UnitStack
    state: SimState
    engine_state: EngineState

    def __init__(
        self,
        fabric: Fabric,
        units: list[list[CompiledUnit]],
        rate_updates: str = "event",
        backend: str | None = None,
        rate_quantum_s: float = 0.0,
        incremental: bool = True,
    ) -> None:
        if rate_updates not in ("event", "phase"):
            raise ValueError(f"rate_updates = {rate_updates!r}: allowed: event, phase")
        if not (isinstance(rate_quantum_s, int | float) and 0.0 <= rate_quantum_s < np.inf):
            raise ValueError(f"rate_quantum_s = {rate_quantum_s!r}: allowed: a finite time in s >= 0")
        self.rate_updates = rate_updates
        # completions up to this many seconds after the first one are one event (0: every completion is)
        self.rate_quantum_s = float(rate_quantum_s)
        # the backend's strategy for every stage of an interval (ainet_gym.sim.backends), and its name
        self.strategy = get_backend(backend)
        self.backend = self.strategy.name
        # numba, exact event mode: instances with at least this many flows run in the lazy exact kernel
        # (incremental fills, per-flow progress kept from the last rate change); the others, or all with -1,
        # in the parallel-rule kernel, bit for bit as the numpy backend
        self.incremental_min_flows = _settings.INCREMENTAL_MIN_FLOWS if incremental else -1
        # the lazy kernel's solves that re-fill more than this share of the active flows take the parallel rule
        # for their first parallel_max_rounds rounds (1: never); docs/engine-alltoall.md
        self.parallel_share = float(_settings.PARALLEL_SHARE)
        self.parallel_max_rounds = int(_settings.PARALLEL_MAX_ROUNDS)
        # a lazy-kernel instance moves between the full re-solve per event and the lazy kernel by a cost model
        # of the work counted in the kernels (off: the lazy kernel from the start to the end); the lazy work
        # is weighted by lazy_cost_ratio, and a hand-off needs savings of lazy_handoff_solves predicted full
        # solves; docs/engine-alltoall.md
        self.lazy_switch = bool(_settings.LAZY_SWITCH)
        self.lazy_cost_ratio = float(_settings.LAZY_COST_RATIO)
        self.lazy_handoff_solves = float(_settings.LAZY_HANDOFF_SOLVES)
        # what a backend keeps from interval to interval for this simulation (numba: the lazy kernel's fill
        # and repair scratch per instance range, allocated once, not per interval; docs/engine-alltoall.md)
        self.backend_scratch: dict[object, object] = {}
        self.fabric = fabric
        self.batch = len(units)
        self.n_links = fabric.n_links
        # set by set_units (with self.stack, self.state and self.engine_state) and set_split:
        self.table: EntryTable  # the merged incidence entries of the structure
        self._entries: tuple[np.ndarray, ...] | None = None  # (e_flow, e_link, e_coef, keep), on demand
        self._e_lperm: np.ndarray | None = None  # the entries in link order, on demand (numpy allocator)
        # a split set by set_split_fused(defer=True) and not merged yet: (kernel, its arguments of a range)
        self._pending: Pending | None = None
        self.set_units(units, time_s=np.zeros(self.batch))

    def __setattr__(self, name: str, value: object) -> None:
        if name in _STATE_FIELDS:
            raise AttributeError(f"BatchSim.{name}: the state is BatchSim.state.{name}; write that in place")
        if name in _ENGINE_FIELDS:
            raise AttributeError(f"BatchSim.{name}: the engine's state is BatchSim.engine_state.{name}")
        if name in _STACK_FIELDS:
            raise AttributeError(f"BatchSim.{name} is BatchSim.stack.{name}, set by set_units only")
        object.__setattr__(self, name, value)

    def _bind(self, stack: UnitStack) -> None:
        """Make ``stack`` the simulation's structure (and its fields readable as attributes)."""
        object.__setattr__(self, "stack", stack)
        for name in _STACK_FIELDS:
            object.__setattr__(self, name, getattr(stack, name))

    def __getattr__(self, name: str) -> object:  # only for names not found the usual way
        if name in _STATE_FIELDS:
            raise AttributeError(f"BatchSim.{name}: the state is BatchSim.state.{name}")
        if name in _ENGINE_FIELDS:
            raise AttributeError(f"BatchSim.{name}: the engine's state is BatchSim.engine_state.{name}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _bind_state(self, state: SimState) -> None:
        """Make ``state`` the simulation's state."""
        object.__setattr__(self, "state", state)

    # ------------------------------------------------------------------ dynamics
    def run_interval(
        self,
        duration_s: np.ndarray | float,
        max_events: int = 1_000_000,
        then: Then | None = None,
    ) -> IntervalMetrics:
        """Advance every instance by ``duration_s`` of simulated time, event to event, on the backend's
        strategy (:mod:`ainet_gym.sim.backends`).

        ``then`` (backends with ``figures_on_kernel_threads``, numba): given the interval's metrics (before
        they are filled), a compiled kernel and its arguments for an instance range, run on each range's
        thread right after that range's interval (the env's figures of the interval,
        :meth:`IntervalMeter.figures`)."""
        return self.strategy.run_interval(self, duration_s, max_events, then)

    def take_pending(self) -> Pending | None:
        """The deferred merge pass of the split (:meth:`set_split`, :meth:`set_split_fused` with
        ``defer=True``), for the backend to run on its kernel threads with the interval; it is then no
        longer pending. None: the entries are merged."""
        pending, self._pending = self._pending, None
        return pending

    def any_lazy(self) -> bool:
        """Whether an instance runs in the lazy exact kernel this interval
        (:func:`ainet_gym.sim.backends.numba.interval.lazy_instance`): exact event mode and at least
        :attr:`incremental_min_flows` flows (>= 0)."""
        k = self.incremental_min_flows
        if k < 0 or self.rate_updates != "event" or self.rate_quantum_s > 0.0:
            return False
        return self._max_inst_flows >= k
