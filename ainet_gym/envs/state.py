"""The env's episode state as data: what :class:`~ainet_gym.envs.env.EnvCore` keeps from step to step.

Four containers make the state of an episode, each owned by the object that uses it:

- :class:`~ainet_gym.sim.state.SimState` (the engine's :attr:`BatchSim.state
  <ainet_gym.sim.engine.BatchSim.state>`): bytes left, phase cursors, timers, clocks;
- :class:`~ainet_gym.sim.state.EngineState` (:attr:`BatchSim.engine_state
  <ainet_gym.sim.engine.BatchSim.engine_state>`): the split, the pinned splits, the part flows' split and
  bytes, the capacities, the lazy switch's cost model;
- :class:`~ainet_gym.sim.state.WorldState` (:attr:`FabricWorld.state
  <ainet_gym.sim.world.FabricWorld.state>`): generators, step counts, hash seeds, background offsets,
  link failures, the jobs and their GPUs;
- :class:`EnvState` (:attr:`EnvCore.state <ainet_gym.envs.env.EnvCore.state>`): the observation's link
  history, the last interval's result, the plan that ran and whether a reset is due.

The Gymnasium wrappers around a core keep a little state of their own, outside the episode state (it is not
the core's): :class:`SingleWrapperState` (:class:`~ainet_gym.envs.env.FabricRoutingEnv`'s generator and
whether it was reset) and :class:`VectorWrapperState` (:class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv`'s
pending autoresets and seed generator); their ``snapshot()`` records it in
:attr:`EnvSnapshot.wrapper <ainet_gym.envs.env.EnvSnapshot.wrapper>`.

Everything else of the core, the world and the engine is structure (fixed after construction: the fabric,
the paths, the spaces, the slot layout) or a cache derived from structure and state (compiled units,
incidence tables, the default split, slot maps), made again when what it came from changes.
:class:`EpisodeState` holds the four (and the units they are laid out by): a core steps the one it holds,
:func:`ainet_gym.envs.env.step` takes any (by reference), and a snapshot (:meth:`EnvCore.snapshot
<ainet_gym.envs.env.EnvCore.snapshot>`) is a copy of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from ainet_gym.sim.metrics import StepResult
from ainet_gym.sim.stack import UnitStack
from ainet_gym.sim.state import EngineState, SimState, WorldState
from ainet_gym.sim.world import WorldSnapshot

__all__ = [
    "EnvSnapshot",
    "EnvState",
    "EpisodeState",
    "GeneratorState",
    "SingleWrapperState",
    "VectorWrapperState",
    "index_result",
]


def index_result(res: StepResult, src: np.ndarray) -> StepResult:
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


@dataclass(eq=False)
class EnvState:
    """The env's own per-episode state over the ``batch`` instances of an :class:`EnvCore
    <ainet_gym.envs.env.EnvCore>` (beside the world's and the engine's)."""

    util_hist: np.ndarray  # (batch, history, net_links) link utilisation history, newest first
    last: StepResult | None  # the last interval's result (None right after a full reset); not mutated
    needs_reset: bool  # True until the first reset
    plan: np.ndarray  # (batch,) int64 choose modes: the plan run in the last interval (-1: none)

    @classmethod
    def initial(cls, batch: int, history: int, n_net: int) -> EnvState:
        """The state of a core before its first reset."""
        return cls(
            util_hist=np.zeros((batch, history, n_net)),
            last=None,
            needs_reset=True,
            plan=np.full(batch, -1, dtype=np.int64),
        )

    def take(self, src: Sequence[int] | np.ndarray | None = None) -> EnvState:
        """A copy of the instances ``src`` (default: all, in order); the last result is shared when
        ``src`` is None (a result is never mutated), else indexed (:func:`index_result`)."""
        if src is None:
            return EnvState(self.util_hist.copy(), self.last, self.needs_reset, self.plan.copy())
        idx = np.asarray(src, dtype=np.int64)
        last = None if self.last is None else index_result(self.last, idx)
        return EnvState(self.util_hist[idx], last, self.needs_reset, self.plan[idx])

    def copy(self) -> EnvState:
        """A copy (arrays copied, the last result shared)."""
        return self.take(None)

    def load(self, other: EnvState, src: Sequence[int] | np.ndarray | None = None) -> None:
        """Write the instances ``src`` of ``other`` (default: all) into this state; the arrays are written
        in place (the compiled observation holds the link history)."""
        part = other.take(src)
        self.util_hist[...] = part.util_hist
        self.plan[...] = part.plan
        self.last = part.last
        self.needs_reset = part.needs_reset


@dataclass(frozen=True, eq=False)
class EpisodeState:
    """The whole episode state of a core, as gymnax's ``EnvState`` reads: the engine's two containers (the
    units' and the engine's own), the world's and the env's, and the units they are laid out by.

    What :func:`ainet_gym.envs.env.step` reads and writes of an episode is this container or the structure
    (the core: fabric, paths, spaces, slot layout, settings) and caches derived from the two. Of a core,
    :attr:`EnvCore.episode_state <ainet_gym.envs.env.EnvCore.episode_state>` is the containers the core
    steps now (not copies); :meth:`copy` makes an independent state, which a core takes with ``step`` (or
    :meth:`EnvCore.bind <ainet_gym.envs.env.EnvCore.bind>`) by reference, without a copy."""

    sim: SimState
    engine: EngineState
    world: WorldState
    env: EnvState
    #: the compiled units the ``sim`` and ``engine`` arrays are laid out by (structure of the episode: a
    #: restack, churn or an AllToAll rotation, replaces it; shared by copies, never written)
    units: UnitStack

    @property
    def batch(self) -> int:
        """Instances."""
        return self.world.batch

    def copy(self) -> EpisodeState:
        """An independent copy: every array and generator copied (the last result, the job specs, the GPU
        arrays and the units shared: nothing writes them)."""
        return EpisodeState(
            sim=self.sim.copy(),
            engine=self.engine.copy(),
            world=self.world.copy(),
            env=self.env.copy(),
            units=self.units,
        )


@dataclass(frozen=True, eq=False)
class GeneratorState:
    """A copy of a numpy :class:`~numpy.random.Generator`'s state: its bit generator's class and state
    (``bit_generator.state``, a dict of its own). :meth:`generator` makes a new generator that draws what
    the one copied would have drawn next, as often as it is called."""

    bit_generator: type[np.random.BitGenerator]  # e.g. numpy.random.PCG64
    state: dict[str, Any]  # bit_generator.state at the copy (a new dict; nothing writes it)

    @classmethod
    def of(cls, rng: np.random.Generator) -> GeneratorState:
        """The state of ``rng`` now (``rng`` is not changed)."""
        bit = rng.bit_generator
        return cls(type(bit), bit.state)

    def generator(self) -> np.random.Generator:
        """A new generator in this state."""
        g = np.random.Generator(self.bit_generator())
        g.bit_generator.state = self.state
        return g


@dataclass(frozen=True, eq=False)
class SingleWrapperState:
    """The state :class:`~ainet_gym.envs.env.FabricRoutingEnv` keeps beside its core's (a snapshot's
    :attr:`~ainet_gym.envs.env.EnvSnapshot.wrapper`)."""

    #: Gymnasium's ``env.np_random`` (seeded by ``reset(seed=...)``; the first ``reset()`` without a seed
    #: draws the core's seed from it); None: not made yet (a restore then keeps the env's own)
    np_random: GeneratorState | None
    #: whether ``reset()`` has run (later resets without a seed let the core's own generator go on)
    seeded: bool


@dataclass(frozen=True, eq=False)
class VectorWrapperState:
    """The state :class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` keeps beside its core's (a
    snapshot's :attr:`~ainet_gym.envs.env.EnvSnapshot.wrapper`)."""

    #: (num_envs,) bool, read-only: the copies whose episode ended at the last step, so that the next step
    #: resets them (Gymnasium's next-step autoreset; ``autoreset_pending``)
    autoreset: np.ndarray
    #: the generator that draws each copy's seed at a ``reset()`` without a seed
    rng: GeneratorState

    def __post_init__(self) -> None:
        a = np.array(self.autoreset, dtype=bool)  # a copy of its own, read-only: the record is a value
        a.flags.writeable = False
        object.__setattr__(self, "autoreset", a)


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
