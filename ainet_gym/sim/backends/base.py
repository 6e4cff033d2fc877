"""The interface of a simulation backend: the stages of a decision interval that a backend implements.

A backend is a *strategy for the whole step*, chosen by name in one place (:func:`ainet_gym.sim.backends.
get_backend`), as SimGrid chooses its max-min solvers: the engine (:class:`~ainet_gym.sim.engine.BatchSim`),
the world (:class:`~ainet_gym.sim.world.FabricWorld`), the meter (:class:`~ainet_gym.sim.metrics.IntervalMeter`)
and the allocator call the stages below and never ask which backend they run on. The env side of a step has
its own strategy of the same name (:mod:`ainet_gym.envs.passes`; the simulation never imports the envs).

Stages, in the order of a step (docs/development.md, "The backend as a strategy"):

1. :meth:`SimBackend.merge_split`: a split (connections, paths) into the merged incidence entries
   (flow, link, coef), now or deferred to the interval's kernel threads;
2. :meth:`SimBackend.run_step`: the interval of every instance (as ``windows`` windows), with the figures
   on the kernel threads where the backend can (:attr:`SimBackend.figures_on_kernel_threads`);
3. :meth:`SimBackend.interval_result`: the per-job and per-link figures of an interval whose figures were
   not computed during it.

And :meth:`SimBackend.solve_entries`, the max-min fair rates of a set of entries (the allocator's public
functions, the ideal step times). Backends are stateless: the state of a simulation lives on its
:class:`~ainet_gym.sim.engine.BatchSim`, which the stages take as an argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from ainet_gym.sim.engine import BatchSim, EntryTable, IntervalMetrics
    from ainet_gym.sim.metrics import IntervalMeter, NumbaFigures, StepResult

__all__ = ["AfterFigures", "Pending", "SimBackend", "Then", "run_windows"]

#: a pass over an instance range: (compiled kernel, its arguments for the range ``lo:hi``)
Pending = tuple[Callable[..., object], Callable[[int, int], tuple]]
#: given an interval's metrics (not yet filled), the pass to run on each range's thread after its interval
Then = Callable[["IntervalMetrics"], Pending]
#: given an interval's figures (allocated, not yet computed), the pass to run after each range's figures
AfterFigures = Callable[["NumbaFigures"], Pending]


class SimBackend(Protocol):
    """The stages of a decision interval that a simulation backend implements (module docstring)."""

    #: the name it is chosen by (``BatchSim(backend=name)``, ``$AINET_GYM_BACKEND``)
    name: str
    #: whether it is the readable reference (the oracle of ``python -m ainet_gym.checks.parity``; slow, so
    #: the benchmark skips it on large scenarios)
    reference: bool
    #: whether :meth:`~ainet_gym.sim.engine.BatchSim.set_split_fused` is available: a compiled pass that
    #: writes the split and merges it on the kernel threads
    fused_split: bool
    #: whether :meth:`run_step` computes a single window's figures on the interval's kernel threads (and
    #: runs ``after_figures`` there)
    figures_on_kernel_threads: bool
    #: whether :meth:`run_interval` runs the NCCL window of rings' sub-flows (``routing.ring_window_bytes``,
    #: :mod:`ainet_gym.sim.ring_window`); a simulation with the field on a backend without it is refused
    ring_window: bool
    #: the ``workload.background[].upstream`` modes it runs (``share``: every backend; ``demand``: the numpy
    #: reference, :mod:`ainet_gym.sim.upstream`); a source with another is refused when units are stacked
    background_upstream: tuple[str, ...]

    def merge_split(
        self, table: EntryTable, split: np.ndarray
    ) -> tuple[tuple[np.ndarray, ...] | None, Pending | None]:
        """The merged entries of ``split`` (rows of :class:`~ainet_gym.sim.engine.EntryTable`'s connections,
        carry columns included): ``(entries, None)`` with ``entries = (e_flow, e_link, e_coef, keep)``, or
        ``(None, pending)``: a pass per instance range that merges into the table's entry buffers when the
        entries are next needed (``split`` must then not change in place)."""
        ...

    def run_interval(
        self, sim: BatchSim, duration_s: np.ndarray | float, max_events: int, then: Then | None
    ) -> IntervalMetrics:
        """:meth:`BatchSim.run_interval <ainet_gym.sim.engine.BatchSim.run_interval>` on this backend."""
        ...

    def run_step(
        self,
        sim: BatchSim,
        meter: IntervalMeter,
        duration_s: np.ndarray,
        windows: int,
        max_events: int,
        job_unit: np.ndarray,
        ideal_step_s: np.ndarray,
        job_names: list[list[str | None]],
        after_figures: AfterFigures | None,
    ) -> tuple[list[IntervalMetrics], NumbaFigures | None]:
        """Run the interval ``duration_s`` (batch,) s as ``windows`` equal windows: the metrics of each
        window and, if they were computed on the kernel threads, the interval's figures (then
        ``after_figures`` ran too; otherwise it is ignored and the caller checks the result)."""
        ...

    def interval_result(
        self,
        meter: IntervalMeter,
        sim: BatchSim,
        m: IntervalMetrics,
        job_unit: np.ndarray,
        ideal_step_s: np.ndarray,
        job_names: list[list[str | None]],
    ) -> StepResult:
        """The figures of the interval ``m`` (:meth:`IntervalMeter.result
        <ainet_gym.sim.metrics.IntervalMeter.result>` with ``capacity_bytes_per_s`` and ``throughput_gbps``)."""
        ...

    def solve_entries(
        self,
        flow: np.ndarray,
        link: np.ndarray,
        coef: np.ndarray,
        cap: np.ndarray,
        n_flows: int,
        weights: np.ndarray | None,
        demand: np.ndarray | None,
        blocks: tuple[np.ndarray, np.ndarray] | None,
    ) -> np.ndarray:
        """Max-min fair rates (n_flows,) of validated COO entries (coef > 0); ``blocks``: the (instances + 1,)
        flow and link offsets of independent stacked instances (a batched call equals a loop of single
        calls bit for bit)."""
        ...


def run_windows(
    sim: BatchSim, duration_s: np.ndarray, windows: int, max_events: int
) -> list[IntervalMetrics]:
    """The interval as ``windows`` equal windows, one :meth:`BatchSim.run_interval` each (no figures)."""
    return [sim.run_interval(duration_s / windows, max_events) for _ in range(windows)]
