"""Compiled (numba) decision interval: the event loop and the exact max-min allocator in one call.

This is the ``"numba"`` backend of :class:`ainet_gym.sim.engine.BatchSim` (its Python side:
:mod:`ainet_gym.sim.backends.numba`); the numpy code in :mod:`ainet_gym.sim.backends.numpy_ref` and
:func:`ainet_gym.sim.allocator.solve_coo` is the reference backend, and the two
agree to round-off (``tests/sim/test_backends.py`` checks every observation, reward and info value to 1e-9
relative). The kernel walks each instance of the batch on its own (instances are independent): Python is
entered once per interval, and an instance's allocation is re-solved only when its set of active flows
changed since its last solve (capacities and the split are fixed within an interval).

Threads: the instances of a batch are cut into contiguous ranges (:func:`batch_ranges`, about equal
work each) that the calling thread and :func:`kernel_threads` - 1 worker threads take in turn
(:func:`run_ranges`, :mod:`ainet_gym.sim.crew`: between steps the workers spin briefly for the next
hand-off rather than sleep); the kernels release the GIL. Every instance is walked by one thread with the same
operations in the same order, so results are bit for bit the same for any thread count. Set the count
with ``NUMBA_NUM_THREADS`` (numba's own variable; default: the CPUs the process may use); ``1`` keeps
everything on the calling thread. Python threads rather than ``parallel=True``: they need no threading
layer (numba's OpenMP layer kills a process forked after it ran, as SB3's ``SubprocVecEnv`` may fork),
compose with callers' own threads, and keep ``cache=True`` simple.

Layout (flat arrays, as :class:`~ainet_gym.sim.engine.BatchSim` stacks them): units, flows and incidence
segments of instance ``b`` are contiguous (``inst_unit``, ``inst_flow``, ``inst_seg`` hold the
boundaries); instance ``b``'s merged entries under the current split are ``inst_seg[b]:ent_hi[b]``
(:func:`merge_range`), sorted by flow; link ids are global (``b * links + l``); the flows of phase
``p`` of a unit are the contiguous range ``phase_flow_lo[p] .. phase_flow_lo[p] + phase_flow_n[p]``.
Phases form a graph per unit (``phase_npred`` predecessors; successors ``phase_succ[phase_succ_off[p]:
phase_succ_off[p + 1]]``, global ids): a phase runs once all its predecessors are done (a chain for
unchunked collectives; a pipeline grid of chunks x stages for chunked ones).

The allocator is the parallel local-bottleneck rule of :mod:`ainet_gym.sim.allocator` (demand caps; share
weights per flow, the level ``rate / weight`` made max-min fair), with the same order of floating-point sums,
so unweighted rates agree bit for bit with ``solve_coo`` (weighted ones to round-off). Large instances in
exact event mode take the lazy incremental kernel (:func:`run_interval_lazy`), weighted or not: its fills,
restart level, freeze log and departure repair are all in levels (docs/engine-alltoall.md).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ainet_gym.sim.crew import Crew, announce
from ainet_gym.sim.state import DONE, IDLE, PRE_COMM, RUNNING, WAITING

try:  # numba is a core dependency; the import guard keeps the numpy backend usable without it
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    HAVE_NUMBA = False

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        def wrap(fn):
            return fn

        return wrap


__all__ = [
    "HAVE_NUMBA",
    "MIN_SEGMENTS_PER_RANGE",
    "RANGES_PER_THREAD",
    "FillScratch",
    "RepairScratch",
    "batch_ranges",
    "block_sum",
    "fill_levels",
    "fill_parallel",
    "fill_scratch",
    "go_flags",
    "kernel_threads",
    "lazy_instance",
    "lazy_scratch",
    "merge_range",
    "repair_departures",
    "repair_scratch",
    "resolve_incremental",
    "run_interval_lazy",
    "run_interval_numba",
    "run_ranges",
    "solve_fill",
    "solve_fill_blocks",
]

ERR_NONE, ERR_ZERO_STEP, ERR_SETTLE, ERR_EVENTS, ERR_SOLVER = 0, 1, 2, 3, 4
#: columns of the per-range statistics of :func:`run_interval_numba`
N_STATS = 18
#: the incremental solve re-fills the flows at levels >= (1 - RESTART_MARGIN) x the restart level: flows
#: tied with a departed one at its level up to round-off are re-filled with it
RESTART_MARGIN = 1e-9
#: a full fill (every active flow; the link loads computed anew) after this many incremental solves
FULL_FILL_EVERY = 256
#: the departure repair (:func:`repair_departures`, docs/engine-alltoall.md): a link counts as saturated when
#: its residual capacity is at most this share of its capacity, and a flow is at the largest level on a link
#: (or at its demand) when its level is at least that level (its demand) times ``1 - REPAIR_RTOL``: the
#: round-off of the fills' sums, far below the backends' 1e-9 contract
REPAIR_RTOL = 1e-12
#: whether the lazy kernel repairs an event at which flows only left (:func:`repair_departures`: re-fill
#: only the flows that lost every bottleneck, checked against the max-min bottleneck condition) before it
#: re-fills every flow at or above the restart level. Exact either way (docs/engine-alltoall.md); the default
#: of :func:`run_interval_lazy`'s ``rep_on``
REPAIR_DEPARTURES = True
#: a departure repair gives up (and the solve re-fills every flow at or above the restart level) once the
#: flows it would re-fill exceed this share of those the restart rule would re-fill (a declined repair's
#: scans are lost: on 8 AllToAll x 128 GPUs interval 5 ran 0.93x the time without the repair at 0.25,
#: 0.95x at 0.1 and 1.01-1.03x at 0.5, intervals 3-4 the same at all three; docs/engine-alltoall.md)
REPAIR_MAX_SHARE = 0.25
#: the departure repair checks, on each changed saturated link, only the flows at the link's largest level
#: before the event (``RepairScratch.sat``; every flow where it is not known): only those have the link as a
#: bottleneck, and a flow below it whose own bottleneck changed too is found on that link (every changed
#: link is scanned). Exact either way; False checks every active flow on the link for a witness (the
#: repair of item 9). With it, the scan reads only the flows listed at that level (``RepairScratch.top_*``,
#: kept where ``sat`` is set; issue-28zf), not every flow on the link. The default of
#: :func:`resolve_incremental`'s ``rep_top``; docs/engine-alltoall.md item 11
REPAIR_ONLY_TOP = True
#: a re-filled flow without a bottleneck after a repair's fill (a kept flow above it on each saturated link
#: it crosses) puts those kept flows in the re-fill, and the repair fills again, at most this many times
REPAIR_MAX_ROUNDS = 4
#: an incremental solve whose component rule (re-fill only the connected components of the changed flows)
#: kept no flow out of the re-fill skips the rule (its union-find over every flow above the restart level)
#: for the next 1, 2, 4, ... solves, at most this many, and re-fills every flow above the level meanwhile
#: (exact either way: those flows are a max-min problem of their own). On an AllToAll whose jobs all cross
#: every spine one component spans the fabric and the rule never keeps a flow; docs/engine-alltoall.md
COMPONENT_BACKOFF_MAX = 64
#: default share of the active flows above which a solve of the lazy kernel re-fills by the parallel
#: local-bottleneck rule (:func:`fill_parallel`, O(entries x rounds)) rather than by the heap
#: (:func:`fill_levels`, O(entries log links)): with few distinct levels (the first intervals of an
#: AllToAll) a few parallel rounds cost less than a heap fill of half the flows. Both are exact max-min
#: fills of the same problem. 1: never (every solve a heap fill); 0: every solve. Read when a
#: :class:`~ainet_gym.sim.engine.BatchSim` is built (``BatchSim.parallel_share`` per simulation);
#: docs/engine-alltoall.md
PARALLEL_SHARE = 0.25
#: the parallel rule of such a solve hands the flows still unfrozen to the heap fill after this many
#: rounds (many distinct levels: one round each; the heap fill costs O(log links) per entry at any count)
PARALLEL_MAX_ROUNDS = 8
#: a solve re-fills by the parallel rule only when the flows it re-fills held at most this many distinct
#: levels at the last solve (the log's levels at or above the restart level; a periodic full fill: all of
#: them); with more, the rule freezes few flows per round and the heap fill is cheaper: on 8 AllToAll x 128
#: GPUs interval 5 (175 distinct levels above the restart level, median) ran its first 3,000 events in
#: 6.2 s with heap fills only against 8.1-8.3 s with the parallel rule on the dense solves, while intervals
#: 1-2 (one level) need the rule. Exact either way. The default of :func:`resolve_incremental`'s
#: ``par_levels``; docs/engine-alltoall.md item 11
PARALLEL_MAX_LEVELS = 8
#: the switch between the two exact paths of a lazy-kernel instance (docs/engine-alltoall.md): the full
#: re-solve per event (:func:`run_interval_numba`, the parallel rule over every active flow) and the lazy
#: kernel (:func:`run_interval_lazy`, a re-fill of the flows at or above the restart level). With the switch
#: on, each event's solve is predicted on both paths by a cost model of work counted in the kernels (entry
#: visits: the entries of the live flows in every round of a parallel rule, the entries of a heap fill and
#: its pops, the entries a re-fill walks, the flows an event scans), and the instance moves to the path
#: predicted cheaper once the predicted savings, summed over the events since the last hand-off (never
#: below 0), exceed :data:`LAZY_HANDOFF_SOLVES` predicted full solves (what a hand-off costs: the lazy
#: kernel starts with a fill of every active flow). Full path, per event: ``rho_f x active entries +
#: instance flows + active flows``; lazy path, per solve: ``LAZY_COST_RATIO x rho_l x entries at or above
#: the restart level``; ``rho_f`` and ``rho_l`` are the running means (:data:`SWITCH_MEAN_WEIGHT`) of the
#: work measured per entry on each path, kept per instance across intervals. Both paths are exact: the
#: switch changes no result beyond round-off. Read when a :class:`~ainet_gym.sim.engine.BatchSim` is built
#: (``BatchSim.lazy_switch`` per simulation; off: the lazy kernel from the first event to the last). Off
#: by default: on 8 AllToAll x 128 GPUs it matched the full re-solve on intervals 1-2 and the lazy kernel
#: on interval 3, but interval 4 kept 100-250 of its 968 events on the full path and ran 6-33% slower
#: than the lazy kernel alone in every setting tried (docs/engine-alltoall.md, item 8)
LAZY_SWITCH = False
#: time of one unit of the lazy kernel's counted work over one unit of the full path's (> 0): the cost
#: model's calibration, measured on 8 AllToAll x 128 GPUs (time per counted unit 1.2-1.7x the full path's
#: on intervals 3-4, about 2x on intervals 1-2; of 1.0, 1.15, 1.2, 1.3, 1.5, 1.7 and 2 tried, none kept
#: interval 4 as fast as the lazy kernel alone, and 1.15 and 1.3 were the best over intervals 1-4 within
#: the noise; docs/engine-alltoall.md; ``BatchSim.lazy_cost_ratio``)
LAZY_COST_RATIO = 1.15
#: the predicted savings (in predicted full solves, >= 0) that move an instance to the other path: a
#: hand-off costs a fill of every active flow in the lazy kernel and a pass over the instance's flows in
#: each kernel (``BatchSim.lazy_handoff_solves``; 0: at every event predicted cheaper on the other path;
#: of 1, 2, 3, 4 and 8 tried, 4 was the best)
LAZY_HANDOFF_SOLVES = 4.0
#: work per active entry of a full solve before the first is measured (the parallel rule's rounds)
FULL_WORK_PER_ENTRY = 4.0
#: work per entry at or above the restart level of a lazy re-fill before the first is measured
LAZY_WORK_PER_ENTRY = 8.0
#: each solve's measured work per entry enters the running means ``rho_f`` / ``rho_l`` of the switch's cost
#: model with this weight
SWITCH_MEAN_WEIGHT = 0.125
#: columns of a lazy-kernel instance's switch state (``BatchSim``'s ``(batch, N_SWITCH)`` array): ``rho_f``,
#: ``rho_l``, the predicted savings since the last hand-off, the path the instance is on (0 lazy, 1 full)
N_SWITCH = 4
#: default least number of flows of an instance for the lazy exact kernel (:func:`run_interval_lazy`:
#: incremental fills, per-flow progress) in exact event mode; smaller instances, or all with -1, run the
#: parallel rule, bit for bit as the numpy backend. Read when a :class:`~ainet_gym.sim.engine.BatchSim` is
#: built (override it here, or per simulation with ``BatchSim.incremental_min_flows``); docs/engine-alltoall.md
INCREMENTAL_MIN_FLOWS = 256

#: ranges per thread a batch is cut into (threads take them in turn, so a thread that is late or slow
#: leaves its range to another). One: each range costs a Python dispatch of six kernels holding the GIL,
#: and two threads that want the GIL at once make one of them sleep (tens of us to wake); with the crew's
#: hand-off, one range per thread gave 5-8% more env steps/s than two at B = 64 and B = 256 on 2 cores.
RANGES_PER_THREAD = 1
#: a batch is spread over threads only when each range gets at least this many incidence segments
#: (candidate (flow, link) pairs of the split, a proxy for the work of an interval): below it, handing
#: a range to another thread (tens of microseconds) costs more than it saves.
MIN_SEGMENTS_PER_RANGE = 2048

_crew: Crew | None = None
_crew_key: tuple[int, int] | None = None  # (process id, workers) the crew was made for
_crew_lock = threading.Lock()


def kernel_threads() -> int:
    """Threads the compiled backend spreads the instances of a batch over: numba's own setting,
    ``$NUMBA_NUM_THREADS`` (default: the CPUs this process may run on), read when numba is imported.

    The kernels release the GIL (``nogil``), so the threads run in parallel; each instance is walked by
    one thread, with the same floating-point operations in the same order, so results do not depend on
    the thread count. ``NUMBA_NUM_THREADS=1`` keeps everything on the calling thread.
    """
    if not HAVE_NUMBA:  # pragma: no cover
        return 1
    from numba import config

    return max(1, int(config.NUMBA_NUM_THREADS))


def batch_ranges(cost: np.ndarray, n_threads: int, min_cost: float | None = None) -> list[tuple[int, int]]:
    """Contiguous instance ranges ``(lo, hi)`` covering ``0:len(cost)``, :data:`RANGES_PER_THREAD` per
    thread, of about equal summed ``cost`` (per instance); fewer ranges when a range would cost less than ``min_cost`` (default
    :data:`MIN_SEGMENTS_PER_RANGE`)."""
    min_cost = MIN_SEGMENTS_PER_RANGE if min_cost is None else min_cost
    n = cost.shape[0]
    total = float(cost.sum())
    per_thread = RANGES_PER_THREAD if n_threads > 1 else 1
    k = int(min(n_threads * per_thread, n, max(1, total // max(min_cost, 1e-300))))
    if k <= 1:
        return [(0, n)]
    cum = np.cumsum(cost)
    cuts = np.searchsorted(cum, total * np.arange(1, k) / k, side="left") + 1
    bounds = np.unique(np.concatenate(([0], np.clip(cuts, 1, n - 1), [n])))
    return [(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds)]


def _get_crew(workers: int) -> Crew:
    """The process's worker threads (made again after a fork: a child inherits no threads)."""
    global _crew, _crew_key
    key = (os.getpid(), workers)
    with _crew_lock:
        if _crew is None or _crew_key != key:
            _crew = Crew(workers)  # an earlier crew of this process sleeps on, unused
            _crew_key = key
        return _crew


_NO_CREW_FLAGS = np.zeros(3, dtype=np.int64)


def go_flags() -> np.ndarray:
    """The flags a range kernel announces its start in (:func:`ainet_gym.sim.crew.announce`, first thing
    without the GIL): the worker threads' (made if need be) when :func:`kernel_threads` is above one, else
    flags no one reads."""
    threads = kernel_threads()
    return _get_crew(threads - 1).flags if threads > 1 else _NO_CREW_FLAGS


def run_ranges(fn: Callable[..., object], ranges: Sequence[tuple[int, int]],
               args_of: Callable[[int, int], tuple]) -> None:  # fmt: skip
    """Call the compiled ``fn(*args_of(lo, hi))`` once for every range, shared out between this thread and
    the worker threads (``fn`` must release the GIL and touch only its range's data).

    The ranges are taken in turn by whichever thread is free, this one included: on a machine whose
    cores are busy with other work, a worker that is not scheduled in time simply takes none, and the
    call costs about what one thread would. The workers wait for the next call spinning for a short
    while before they sleep (:mod:`ainet_gym.sim.crew`); the first exception a range raised is raised
    here once every range is done."""
    threads = kernel_threads()
    if threads <= 1 or len(ranges) <= 1:
        for lo, hi in ranges:
            fn(*args_of(lo, hi))
        return
    _get_crew(threads - 1).run(fn, ranges, args_of)


@njit(cache=True, nogil=True, error_model="numpy")
def block_sum(x, lo, n):  # pragma: no cover - compiled
    """``x[lo:lo + n].sum()`` as numpy computes it for a contiguous float64 run of ``n <= 128`` elements
    (numpy's pairwise block): left to right below 8 elements, else eight interleaved partial sums combined
    as a tree, then the tail. The env's decode and the interval figures use it to stay bit for bit equal
    to the numpy backend."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += x[lo + i]
        return res
    r0, r1, r2, r3 = x[lo], x[lo + 1], x[lo + 2], x[lo + 3]
    r4, r5, r6, r7 = x[lo + 4], x[lo + 5], x[lo + 6], x[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += x[lo + i]
        r1 += x[lo + i + 1]
        r2 += x[lo + i + 2]
        r3 += x[lo + i + 3]
        r4 += x[lo + i + 4]
        r5 += x[lo + i + 5]
        r6 += x[lo + i + 6]
        r7 += x[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += x[lo + i]
        i += 1
    return res


@njit(cache=True, nogil=True)
def merge_range(b_lo, b_hi, split_flat, table, go):  # pragma: no cover - compiled
    """Incidence entries of a split for the instances ``b_lo:b_hi``, written into the merge record ``table``
    (:class:`~ainet_gym.sim.records.MergeTable`, compiled: the arrays of the engine's entry table, whose
    fields are named below).

    The candidate (member, path, hop) coefficients ``split_flat[cand_gather[i]]`` of segment ``j`` (a
    merged (flow, link) pair) are ``i`` in ``seg_cand[j]:seg_cand[j + 1]``; their sum, from 0 in candidate
    order (as ``np.bincount`` adds), goes to ``seg_coef[j]``. Instance ``b``'s segments are
    ``inst_seg[b]:inst_seg[b + 1]``; its nonzero ones are written compacted from ``inst_seg[b]`` on in
    ``e_flow`` / ``e_link`` / ``e_coef`` (sorted by flow, as the segments are), and ``ent_hi[b]`` is one
    past the last, except those on a link that no other flow of the instance crosses (``seg_excl``), which
    are written from ``inst_seg[b + 1] - 1`` down to ``ex_lo[b]``; flow ``f``'s other entries are
    ``fe_lo[f]:fe_hi[f]`` (the flows of instance ``b`` are ``inst_flow[b]:inst_flow[b + 1]``). The interval
    folds the exclusive ones into demand caps (:func:`run_interval_numba`), and solves over the rest.
    Instances own disjoint ranges of every output, so threads may merge different ranges at the same time.

    A segment with ``seg_row[j] = c >= 0`` sums the whole row of connection ``c`` (its ``conn_npaths[c]``
    paths, in order, as a NIC link every path crosses does): it takes ``rowsum[c]``, that row summed from 0 in
    path order once per connection (the instance's connections are ``inst_conn[b]:inst_conn[b + 1]``), the
    same additions in the same order. ``go``: the kernel threads' flags (:func:`go_flags`), announced first.
    """
    announce(go)
    t = table
    seg_cand, cand_gather, seg_flow, seg_link = t.seg_cand, t.cand_gather, t.seg_flow, t.seg_link
    inst_seg, seg_coef, ent_hi, seg_row = t.inst_seg, t.seg_coef, t.ent_hi, t.seg_row
    e_flow, e_link, e_coef, rowsum = t.e_flow, t.e_link, t.e_coef, t.rowsum
    inst_conn, conn_npaths, seg_excl, inst_flow = t.inst_conn, t.conn_npaths, t.seg_excl, t.inst_flow
    ex_lo, fe_lo, fe_hi = t.ex_lo, t.fe_lo, t.fe_hi
    P = split_flat.shape[0] // max(conn_npaths.shape[0], 1)  # the split's row length (max_paths)
    for b in range(b_lo, b_hi):
        for k in range(inst_conn[b], inst_conn[b + 1]):  # each connection's row, summed once
            r = 0.0
            o = k * P
            for p in range(conn_npaths[k]):
                r += split_flat[o + p]
            rowsum[k] = r
        for f in range(inst_flow[b], inst_flow[b + 1]):
            fe_lo[f] = 0
            fe_hi[f] = 0
        n = inst_seg[b]  # the next shared entry, from the front
        x = inst_seg[b + 1]  # one past the last exclusive entry, from the back
        prev = -1
        for j in range(inst_seg[b], inst_seg[b + 1]):
            if seg_row[j] >= 0:
                c = rowsum[seg_row[j]]
            else:
                c = 0.0
                for i in range(seg_cand[j], seg_cand[j + 1]):
                    c += split_flat[cand_gather[i]]
            seg_coef[j] = c
            if c > 0:
                f = seg_flow[j]
                if seg_excl[j]:
                    x -= 1
                    e_flow[x] = f
                    e_link[x] = seg_link[j]
                    e_coef[x] = c
                else:
                    if f != prev:
                        fe_lo[f] = n
                        prev = f
                    e_flow[n] = f
                    e_link[n] = seg_link[j]
                    e_coef[n] = c
                    n += 1
                    fe_hi[f] = n
        ent_hi[b] = n
        ex_lo[b] = x


# ----------------------------------------------------------------------------------------------------------
# the event loop's shared steps: both interval kernels (run_interval_numba and run_interval_lazy) are made of
# these and their own allocation and completion bookkeeping, with the same operations in the same order as
# when they were written into both loops (results bit for bit unchanged). They are compiled without numba's
# reference counting (``_nrt=False``: they allocate nothing): a compiled function increfs and decrefs every
# array it takes, atomically, which at every event was the threads' bottleneck (docs/performance-log.md,
# "Reference counts were the threads' bottleneck"); without it a call passes the arrays for free. Numba's
# own inlining (``inline="always"``) was tried: it copies each argument into a local of the caller, and
# those copies left 46 incref/decref pairs inside run_interval_numba's loops (none before; counted in its
# LLVM IR), where these calls leave none. A call takes at most 30 arguments (more compile to ``*args``).
# LLVM's own inlining is another thing: ``forceinline=True`` marks the compiled function ``alwaysinline``
# after numba has lowered it (no argument copies, no reference counts: the helper has none). LLVM left
# the three largest helpers as calls; inlined, ``parallel_rule`` and ``settle_units`` take 7% fewer
# instructions from run_interval_numba (its arguments no longer spilled and reloaded at every event), and
# ``add_link_bytes`` 3% more, so it stays a call (callgrind counts, docs/development.md, "Instructions per
# step").
# The steps only compiled code calls (all but ``settle_units`` and ``parallel_rule``, which tests call from
# Python) are compiled without the CPython and C-callable wrappers (``_COMPILED_ONLY``): nothing calls them
# from Python, and their wrappers cost the cold start 0.66 s of CPU (docs/development.md, "the cold compile",
# issue-31zb); the callers' code is the same.
# The frame of an event is written once for both kernels (begin_event, end_event, below); every long kernel
# of this module is a short driver over such steps, each of one concern (issue-31ze): the steps that run at
# every event or round are ``_nrt=False``, ``forceinline=True`` and ``_COMPILED_ONLY``, so the drivers'
# machine code is what it was when the steps were written inline (docs/development.md, "issue-31ze").
# ----------------------------------------------------------------------------------------------------------

#: the options of a step that only compiled code calls: no Python-callable wrappers to compile
_COMPILED_ONLY: dict[str, bool] = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


class JobParams(NamedTuple):
    """Per-unit job parameters and per-flow bytes that :func:`settle_units` reads at a job's start and at the
    end of an iteration (the kernels' arguments of those names)."""

    unit_compute: np.ndarray  # (units,) float64 s of compute per iteration
    unit_overlap: np.ndarray  # (units,) float64 fraction of the compute that overlaps communication
    flow_bytes: np.ndarray  # (flows,) float64 bytes a flow starts an iteration with (flow_reset)


class PhaseGraph(NamedTuple):
    """The phases' latency and dependency graph, read when a unit's communication starts and when a phase
    ends (:func:`settle_units`; the kernels' arguments of those names)."""

    phase_latency: np.ndarray  # (phases,) float64 s
    phase_npred: np.ndarray  # (phases,) int64 predecessors
    phase_succ_off: np.ndarray  # (phases + 1,) int64 CSR offsets of the successors
    phase_succ: np.ndarray  # (successor entries,) int64 global phase ids


class IterationTallies(NamedTuple):
    """What the end of an iteration counts (:func:`settle_units`): the state's totals and last times, and
    the interval's outputs per unit (the kernels' arguments of those names)."""

    iterations_total: np.ndarray  # (units,) int64
    last_step_s: np.ndarray  # (units,) float64 s
    last_comm_s: np.ndarray  # (units,) float64 s
    iters: np.ndarray  # (units,) int64 iterations completed in the interval
    step_sum: np.ndarray  # (units,) float64 s, their step times summed
    comm_sum: np.ndarray  # (units,) float64 s, their communication times summed


class UnitTable(NamedTuple):
    """The stacked units' and phases' tables every unit step reads (the structure record's fields of those
    names, :class:`~ainet_gym.sim.records.IntervalStructure`)."""

    unit_alive: np.ndarray  # (units,) bool
    unit_bg: np.ndarray  # (units,) bool, a background source
    unit_nphases: np.ndarray  # (units,) int64
    phase_off: np.ndarray  # (units,) int64 first phase of each unit
    phase_flow_lo: np.ndarray  # (phases,) int64 first flow of each phase
    phase_flow_n: np.ndarray  # (phases,) int64 its flows


class UnitClock(NamedTuple):
    """The units' and phases' cursors and timers the unit steps advance (the
    :class:`~ainet_gym.sim.state.SimState` fields of those names, updated in place)."""

    phase_cur: np.ndarray  # (units,) int64 the running phase (WAITING, PRE_COMM, 0 .. nphases)
    t_start_left: np.ndarray  # (units,) float64 s to the job's start
    t_compute_left: np.ndarray  # (units,) float64 s of compute left in the iteration
    t_comm_start_left: np.ndarray  # (units,) float64 s to the start of its communication
    phase_state: np.ndarray  # (phases,) int64 IDLE / RUNNING / DONE
    phase_wait: np.ndarray  # (phases,) int64 predecessors not yet done
    phase_lat_left: np.ndarray  # (phases,) float64 s of latency left
    iter_start: np.ndarray  # (units,) float64 s, the iteration's start
    comm_start: np.ndarray  # (units,) float64 s, its communication's start
    comm_end: np.ndarray  # (units,) float64 s, its end


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def exclusive_caps(b, ex_lo, inst_seg, e_flow, e_link, e_coef, capacity, dcap):  # pragma: no cover - compiled
    """Cap ``dcap`` (the flows' demands, bytes/s) of instance ``b`` by its exclusive links' shares.

    A link only one flow crosses keeps its share cap / coef through the solve (nothing else is taken off
    it), so it acts on the flow exactly as a demand cap would: the solver sees the flow's demand capped by
    the least of those shares (the same rates, bit for bit; the parallel rule freezes the same flows in the
    same rounds) and only the shared links, often half the entries. The merge wrote the exclusive entries
    apart (``ex_lo[b]:inst_seg[b + 1]``, :func:`merge_range`) and the shared ones per flow.
    """
    for e in range(ex_lo[b], inst_seg[b + 1]):
        f = e_flow[e]
        x = capacity[e_link[e]] / e_coef[e]  # the link's share in every round (coef > 0)
        if x < dcap[f]:
            dcap[f] = x


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def end_phases(u, p0, nph, eps_t, counted, pend, joined, units, clock, rem, graph):  # pragma: no cover
    """End every running phase ``p0:p0 + nph`` of unit ``u`` whose latency is paid (within ``eps_t``) and
    whose flows have no bytes left (``pend``, or a scan of ``rem``: :func:`settle_units`' ``counted``),
    advancing the unit's cursor (:class:`UnitClock` ``clock``); its successors that wait for no other phase
    start (:class:`PhaseGraph` ``graph``). Whether a phase ended."""
    phase_flow_lo, phase_flow_n = units.phase_flow_lo, units.phase_flow_n
    phase_cur, phase_state, phase_wait, phase_lat_left = (
        clock.phase_cur, clock.phase_state, clock.phase_wait, clock.phase_lat_left,
    )  # fmt: skip
    ended = False
    for p in range(p0, p0 + nph):
        if phase_state[p] != RUNNING or phase_lat_left[p] > eps_t:
            continue
        if counted:
            pending = pend[p] > 0
        else:
            pending = False
            for f in range(phase_flow_lo[p], phase_flow_lo[p] + phase_flow_n[p]):
                if rem[f] > 0:
                    pending = True
                    break
        if pending:
            continue
        phase_state[p] = DONE
        phase_cur[u] += 1
        # its successors may start
        for e in range(graph.phase_succ_off[p], graph.phase_succ_off[p + 1]):
            q = graph.phase_succ[e]
            phase_wait[q] -= 1
            if phase_wait[q] == 0:
                phase_state[q] = RUNNING
                phase_lat_left[q] = graph.phase_latency[q]
                if counted:
                    joined[q] = False
        ended = True
    return ended


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def end_iteration(u, now, p0, nph, counted, pend, units, clock, rem, job, tallies, stats):  # pragma: no cover
    """Unit ``u``'s iteration ends at ``now`` (s): its step and communication times counted
    (:class:`IterationTallies` ``tallies``), the next iteration started (compute, the bytes of its phases
    ``p0:p0 + nph`` reset from :class:`JobParams` ``job``, and their counts in ``pend`` where ``counted``).
    False, with ``stats[2]``, ``stats[3]`` set, for a step of zero time."""
    phase_flow_lo, phase_flow_n = units.phase_flow_lo, units.phase_flow_n
    iter_start, comm_start, comm_end = clock.iter_start, clock.comm_start, clock.comm_end
    st = now - iter_start[u]
    tallies.iters[u] += 1
    tallies.step_sum[u] += st
    tallies.comm_sum[u] += comm_end[u] - comm_start[u]
    tallies.iterations_total[u] += 1
    tallies.last_step_s[u] = st
    tallies.last_comm_s[u] = comm_end[u] - comm_start[u]
    if st <= 0:
        stats[2], stats[3] = ERR_ZERO_STEP, u
        return False
    iter_start[u] = now
    clock.phase_cur[u] = PRE_COMM
    clock.t_compute_left[u] = job.unit_compute[u]
    clock.t_comm_start_left[u] = (1 - job.unit_overlap[u]) * job.unit_compute[u]
    for p in range(p0, p0 + nph):
        c = 0
        for f in range(phase_flow_lo[p], phase_flow_lo[p] + phase_flow_n[p]):
            rem[f] = job.flow_bytes[f]
            if rem[f] > 0:
                c += 1
        if counted:
            pend[p] = c
    return True


@njit(cache=True, nogil=True, _nrt=False, forceinline=True)
def settle_units(
    u0, u1, now, max_rounds, eps_t, counted, pend, joined, units, clock, rem, job, graph, tallies, stats,
):  # fmt: skip  # pragma: no cover - compiled
    """Every transition of units ``u0:u1`` that is due at time ``now`` (s), repeated until none is (at most
    ``max_rounds`` rounds per unit): a job starts, its communication starts (the phases that wait for none
    run, paying their latency), a phase ends (latency paid, no bytes left: its successors may start), an
    iteration ends (its step and communication times counted into ``iters`` / ``step_sum`` /
    ``comm_sum`` and the state's totals; the next iteration's bytes reset). Compute that ends within
    ``eps_t`` has ended (no sliver carried).

    The arrays come as records: the units' tables (:class:`UnitTable` ``units``) and their timers
    (:class:`UnitClock` ``clock``), and those of the rarer transitions (:class:`JobParams` ``job``,
    :class:`PhaseGraph` ``graph``, :class:`IterationTallies` ``tallies``); below each array is named by
    its field.

    ``counted`` (:func:`run_interval_lazy`): a phase's flows with bytes left are counted in ``pend``
    (kept here when an iteration resets them) and ``joined[p]`` is cleared when phase ``p`` starts;
    otherwise (:func:`run_interval_numba`, which passes empty arrays for both) a phase's flows are scanned
    for bytes left. False on an error (``stats[2]``, ``stats[3]``: the code and the unit).
    """
    unit_alive, unit_bg, unit_nphases, phase_off = (
        units.unit_alive, units.unit_bg, units.unit_nphases, units.phase_off,
    )  # fmt: skip
    phase_cur, t_start_left, t_compute_left, t_comm_start_left = (
        clock.phase_cur, clock.t_start_left, clock.t_compute_left, clock.t_comm_start_left,
    )  # fmt: skip
    phase_state, phase_wait, phase_lat_left = clock.phase_state, clock.phase_wait, clock.phase_lat_left
    iter_start, comm_start, comm_end = clock.iter_start, clock.comm_start, clock.comm_end
    for u in range(u0, u1):
        if not unit_alive[u] or unit_bg[u]:
            continue
        nph = unit_nphases[u]
        p0 = phase_off[u]
        if t_compute_left[u] <= eps_t:  # compute that ends within eps_t has ended (no sliver carried)
            t_compute_left[u] = 0.0
        settled = False
        for _ in range(max_rounds):
            changed = False
            if phase_cur[u] == WAITING and t_start_left[u] <= eps_t:  # the job starts
                phase_cur[u] = PRE_COMM
                t_compute_left[u] = job.unit_compute[u]
                t_comm_start_left[u] = (1 - job.unit_overlap[u]) * job.unit_compute[u]
                iter_start[u] = now
                changed = True
            if phase_cur[u] == PRE_COMM and t_comm_start_left[u] <= eps_t:  # communication starts
                phase_cur[u] = 0
                comm_start[u] = now
                for p in range(p0, p0 + nph):  # phases that wait for none run, paying their latency
                    phase_wait[p] = graph.phase_npred[p]
                    if graph.phase_npred[p] == 0:
                        phase_state[p] = RUNNING
                        phase_lat_left[p] = graph.phase_latency[p]
                        if counted:
                            joined[p] = False
                    else:
                        phase_state[p] = IDLE
                changed = True
            pc = phase_cur[u]
            # a phase ends when its latency is paid and no bytes are left
            if pc >= 0 and pc < nph and end_phases(
                u, p0, nph, eps_t, counted, pend, joined, units, clock, rem, graph
            ):  # fmt: skip
                if phase_cur[u] == nph:
                    comm_end[u] = now
                changed = True
            if phase_cur[u] == nph and t_compute_left[u] <= eps_t:  # the iteration ends
                if not end_iteration(u, now, p0, nph, counted, pend, units, clock, rem, job, tallies, stats):
                    return False
                changed = True
            if not changed:
                settled = True
                break
        if not settled:
            stats[2], stats[3] = ERR_SETTLE, u
            return False
    return True


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def next_unit_event(u0, u1, dt, eps_t, units, clock):  # pragma: no cover - compiled
    """The least of ``dt`` and the time (s) to the next timer of units ``u0:u1`` (:class:`UnitTable`
    ``units``, :class:`UnitClock` ``clock``): a start, the end of compute (above ``eps_t``), the start of
    communication, the end of a running phase's latency."""
    inf = np.inf
    c = clock
    for u in range(u0, u1):
        if not units.unit_alive[u] or units.unit_bg[u]:
            continue
        pc = c.phase_cur[u]
        tm = c.t_start_left[u] if pc == WAITING else inf
        if c.t_compute_left[u] > eps_t and c.t_compute_left[u] < tm:
            tm = c.t_compute_left[u]
        if pc == PRE_COMM and c.t_comm_start_left[u] < tm:
            tm = c.t_comm_start_left[u]
        p0, nph = units.phase_off[u], units.unit_nphases[u]
        if pc >= 0 and pc < nph:
            for p in range(p0, p0 + nph):
                lt = c.phase_lat_left[p]
                if c.phase_state[p] == RUNNING and lt > eps_t and lt < tm:
                    tm = lt
        if tm < dt:
            dt = tm
    return dt


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def advance_units(u0, u1, dt, units, clock, active_t, compute_t):  # pragma: no cover - compiled
    """Advance the timers of units ``u0:u1`` (:class:`UnitTable` ``units``, :class:`UnitClock` ``clock``)
    by ``dt`` s, adding it to their active and compute times."""
    c = clock
    for u in range(u0, u1):
        if not units.unit_alive[u] or units.unit_bg[u]:
            continue
        pc = c.phase_cur[u]
        if pc != WAITING:
            active_t[u] += dt
            compute_t[u] += min(c.t_compute_left[u], dt)
        c.t_compute_left[u] = max(c.t_compute_left[u] - dt, 0.0)
        p0, nph = units.phase_off[u], units.unit_nphases[u]
        if pc == WAITING:
            c.t_start_left[u] = c.t_start_left[u] - dt
        elif pc == PRE_COMM:
            c.t_comm_start_left[u] = c.t_comm_start_left[u] - dt
        elif pc < nph:
            for p in range(p0, p0 + nph):
                if c.phase_state[p] == RUNNING:
                    c.phase_lat_left[p] = max(c.phase_lat_left[p] - dt, 0.0)


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def advance_flow(f, x, flow_bg, rem, moved):  # pragma: no cover - compiled
    """Flow ``f`` moves ``x`` bytes (a job flow at most its bytes left, ``rem``; a background flow has no
    end), added to ``moved``."""
    if not flow_bg[f]:
        if rem[f] < x:
            x = rem[f]
        rem[f] = rem[f] - x
    moved[f] += x


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def add_link_bytes(b, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef, moved, link_bytes):  # pragma: no cover
    """Add the bytes instance ``b``'s flows moved (``moved``) to its links' ``link_bytes``: the split is
    fixed within the interval, so bytes per flow first, then per entry (each link's entries in entry order
    from zero, as ``np.bincount`` sums: an exclusive link has one)."""
    for e in range(inst_seg[b], ent_hi[b]):
        link_bytes[e_link[e]] += e_coef[e] * moved[e_flow[e]]
    for e in range(ex_lo[b], inst_seg[b + 1]):
        link_bytes[e_link[e]] += e_coef[e] * moved[e_flow[e]]


# the event loop's frame, one implementation for both interval kernels: begin_event (the units settle, the
# interval's end, the event cap) and end_event (the units' next timer, their timers and the instance's clock
# advanced); each kernel's own allocation and completions go between the two

#: :func:`begin_event`'s codes: run the event; the interval is over; an error (in ``stats``); the event cap
FRAME_RUN, FRAME_END, FRAME_ERROR, FRAME_CAP = 0, 1, 2, 3


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def begin_event(
    u0, u1, now_s, t_left, ev, max_events, max_rounds, eps_t, counted, pend, joined, units, clock, rem, job, graph,
    tallies, stats,
):  # fmt: skip  # pragma: no cover - compiled
    """The top of an event of both interval kernels: every transition of units ``u0:u1`` due at ``now_s``
    (:func:`settle_units`, its arguments), then the interval's end (``t_left`` s left, no more than
    ``eps_t``) and the event count ``ev`` against ``max_events``. ``(code, ev)``: :data:`FRAME_RUN` (event
    ``ev``, counted up, runs), :data:`FRAME_END`, :data:`FRAME_ERROR` (a unit's error in ``stats``) or
    :data:`FRAME_CAP` (``ERR_EVENTS`` in ``stats``; the caller adds its counters so far)."""
    if not settle_units(
        u0, u1, now_s, max_rounds, eps_t, counted, pend, joined, units, clock, rem, job, graph, tallies, stats
    ):  # fmt: skip
        return FRAME_ERROR, ev
    if not t_left > eps_t:
        return FRAME_END, ev
    ev += 1
    if ev > max_events:
        stats[2], stats[3] = ERR_EVENTS, -1
        return FRAME_CAP, ev
    return FRAME_RUN, ev


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def end_event(b, u0, u1, dt, eps_t, units, clock, active_t, compute_t, time_s):  # pragma: no cover - compiled
    """The bottom of an event of both interval kernels: the step is the least of ``dt`` (the flows' next
    event, or the interval's end) and the next timer of units ``u0:u1`` (:func:`next_unit_event`), never
    below 0; the units' timers (:func:`advance_units`) and instance ``b``'s clock ``time_s[b]`` advance by
    it. ``(step, whether a unit's timer came first)``."""
    dt_u = next_unit_event(u0, u1, dt, eps_t, units, clock)
    unit_first = dt_u < dt
    if dt_u < 0.0:
        dt_u = 0.0
    advance_units(u0, u1, dt_u, units, clock, active_t, compute_t)
    time_s[b] += dt_u
    return dt_u, unit_first


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def reset_instance_flows(
    b, f0, f1, act, moved, dcap, flow_demand, ex_lo, inst_seg, e_flow, e_link, e_coef, capacity,
):  # fmt: skip  # pragma: no cover - compiled
    """Instance ``b``'s flows ``f0:f1`` at the start of its part of an interval (both kernels): none active,
    no bytes moved, demands capped by the exclusive links (:func:`exclusive_caps`)."""
    for f in range(f0, f1):
        act[f] = False
        moved[f] = 0.0
        dcap[f] = flow_demand[f]
    exclusive_caps(b, ex_lo, inst_seg, e_flow, e_link, e_coef, capacity, dcap)


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def zero_completed(f0, f1, eps_b, flow_bg, flow_scale, rem):  # pragma: no cover - compiled
    """Job flows of ``f0:f1`` whose bytes left are within the completion tolerance ``eps_b x flow_scale``
    have none (``rem`` 0)."""
    for f in range(f0, f1):
        if not flow_bg[f] and rem[f] <= eps_b * flow_scale[f]:
            rem[f] = 0.0


class ParallelRows(NamedTuple):
    """:func:`parallel_rule`'s scratch per flow of a solve (rows: the most flows of one)."""

    live_i: np.ndarray  # (rows, 3) int64 flow, first entry, end entry of the flows still unfrozen
    live_x: np.ndarray  # (rows, 2) float64 their demand and path minimum
    froz_i: np.ndarray  # (rows, 2) int64 first and end entry of the frozen flows, in the order they froze
    froz_x: np.ndarray  # (rows,) float64 their rate
    froz_g: np.ndarray  # (rows, 2) int64 their flow and group (``order`` only; the three below may be empty
    # otherwise)
    glev: np.ndarray  # (rows,) float64 the level of each group


class ParallelLinks(NamedTuple):
    """:func:`parallel_rule`'s scratch per link of an instance, valid where a stamp says so."""

    remaining: np.ndarray  # (links,) float64 capacity the frozen flows leave
    denom: np.ndarray  # (links,) float64 sum of the live flows' coefficients
    share: np.ndarray  # (links,) float64 remaining / denom
    linkmin: np.ndarray  # (links,) float64 least path minimum of its live flows
    sub: np.ndarray  # (links,) float64 the frozen flows' traffic, to take off
    stamp: np.ndarray  # (links,) int64 the round that last touched the link (-1: none)
    sstamp: np.ndarray  # (links,) int64 the round that last took traffic off it
    touched: np.ndarray  # (links,) int64 the links touched in a round
    gstamp: np.ndarray  # (links,) int64 the round in which the link last froze a group (``order`` only)
    gid: np.ndarray  # (links,) int64 that group (``order`` only; both may be empty otherwise)


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _rule_start(
    n_act, act_flows, fe_lo, fe_hi, dcap, rate, rows, order, weight
):  # pragma: no cover - compiled
    """:func:`parallel_rule`'s start: the flows ``act_flows[:n_act]`` that cross a shared link are live
    (``rows.live_i``: flow, first and end entry; ``rows.live_x[:, 0]``: demand level); the others are at their
    demand (``order``: each a frozen group of its own). ``(live, frozen, groups)``."""
    live_i, live_x, froz_i, froz_x, froz_g, glev = rows.live_i, rows.live_x, rows.froz_i, rows.froz_x, rows.froz_g, rows.glev  # fmt: skip
    wtd = weight.shape[0] > 0  # (a weight of 1 multiplies exactly: the unweighted rule bit for bit)
    n_live = n_done = n_grp = 0
    for k in range(n_act):
        f = act_flows[k]
        if fe_hi[f] > fe_lo[f]:
            live_i[n_live, 0] = f
            live_i[n_live, 1] = fe_lo[f]
            live_i[n_live, 2] = fe_hi[f]
            live_x[n_live, 0] = dcap[f] / weight[f] if wtd else dcap[f]  # its demand level
            n_live += 1
        else:
            rate[f] = dcap[f]  # crosses no shared link: limited by its demand only
            if order:  # a group of its own, at its demand level
                froz_i[n_done, 0] = 0
                froz_i[n_done, 1] = 0
                froz_g[n_done, 0] = f
                froz_g[n_done, 1] = n_grp
                froz_x[n_done] = dcap[f]
                glev[n_grp] = dcap[f] / weight[f] if wtd else dcap[f]
                n_grp += 1
                n_done += 1
    return n_live, n_done, n_grp


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _rule_shares(n_live, cur, first, e_link, e_coef, capacity, lo, rows, links, weight):  # pragma: no cover
    """Step 1 of a round of :func:`parallel_rule` (round stamp ``cur``): the fair share level ``remaining /
    sum coef x weight`` of every link a live flow crosses (sums in entry order; ``first``: the remaining
    capacities start as ``capacity[lo + l]``). The live flows' entries (the cost model's work)."""
    live_i = rows.live_i
    remaining, denom, share, linkmin, sub, stamp, touched = (
        links.remaining, links.denom, links.share, links.linkmin, links.sub, links.stamp, links.touched,
    )  # fmt: skip
    wtd = weight.shape[0] > 0
    wk = 0
    n_touched = 0
    for i in range(n_live):
        wk += live_i[i, 2] - live_i[i, 1]
        w = weight[live_i[i, 0]] if wtd else 1.0
        for e in range(live_i[i, 1], live_i[i, 2]):
            lk = e_link[e] - lo
            if stamp[lk] != cur:
                stamp[lk] = cur
                if first:  # a later round's links were all touched in the first
                    remaining[lk] = capacity[lo + lk]
                denom[lk] = 0.0
                linkmin[lk] = np.inf
                sub[lk] = 0.0
                touched[n_touched] = lk
                n_touched += 1
            denom[lk] += e_coef[e] * w
    for t in range(n_touched):  # each touched link's level: one division per link
        lk = touched[t]
        share[lk] = remaining[lk] / denom[lk] if denom[lk] > 0 else np.inf
    return wk


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _rule_path_minima(n_live, e_link, lo, rows, links):  # pragma: no cover - compiled
    """Step 2 of a round of :func:`parallel_rule`: the path minimum of every live flow (the least share on its
    links, or its demand level; ``rows.live_x[:, 1]``), and the smallest one at each link
    (``links.linkmin``; a flow alone is ready as it is: at its demand, or at the level of its min link)."""
    live_i, live_x, share, linkmin = rows.live_i, rows.live_x, links.share, links.linkmin
    for i in range(n_live):
        e0, e1 = live_i[i, 1], live_i[i, 2]
        mk = np.inf
        for e in range(e0, e1):
            sh = share[e_link[e] - lo]
            if sh < mk:
                mk = sh
        d = live_x[i, 0]
        if d < mk:
            mk = d
        live_x[i, 1] = mk
        if n_live == 1:
            break
        for e in range(e0, e1):
            lk = e_link[e] - lo
            if mk < linkmin[lk]:
                linkmin[lk] = mk


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _rule_group(f, e0, e1, mk, r, at_demand, cur, n_grp, e_link, lo, rows, links):  # pragma: no cover
    """The freeze-order group (``order``) of flow ``f`` frozen at level ``r`` in round ``cur`` of
    :func:`parallel_rule`: the group its first link at the path minimum ``mk`` froze in this round (as it was
    found: the least share, first), a new one if it is the first such flow, or (at its demand) a group of its
    own. ``(group, groups)``."""
    share, gstamp, gid, glev = links.share, links.gstamp, links.gid, rows.glev
    bl = -1
    if not at_demand:
        for e in range(e0, e1):
            if share[e_link[e] - lo] == mk:
                bl = e_link[e] - lo
                break
    if bl < 0:  # at its demand: a group of its own
        g = n_grp
        glev[g] = r
        n_grp += 1
    elif gstamp[bl] != cur:  # the first flow its link freezes in this round
        gstamp[bl] = cur
        g = n_grp
        gid[bl] = g
        glev[g] = r
        n_grp += 1
    else:
        g = gid[bl]
    return g, n_grp


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _rule_freeze(
    n_live, n_done, n_grp, cur, e_link, lo, dcap, rate, rows, links, order, weight
):  # pragma: no cover
    """Step 3 of a round of :func:`parallel_rule`: the ready flows (a link of theirs ready, its least path
    minimum at its share, or at their demand) freeze at their level (``rate``; ``rows.froz_*`` in freeze
    order, with ``order`` their groups, :func:`_rule_group`); the others stay live, compacted.
    ``(live, frozen in all, groups, frozen in this round)``."""
    live_i, live_x, froz_i, froz_x, froz_g = rows.live_i, rows.live_x, rows.froz_i, rows.froz_x, rows.froz_g
    share, linkmin = links.share, links.linkmin
    wtd = weight.shape[0] > 0
    n_keep = 0
    n_frozen = 0
    for i in range(n_live):
        mk = live_x[i, 1]
        d = live_x[i, 0]
        e0, e1 = live_i[i, 1], live_i[i, 2]
        at_demand = mk >= d  # never >: equality, exact
        ready = at_demand or n_live == 1
        if not ready:
            for e in range(e0, e1):
                lk = e_link[e] - lo
                if linkmin[lk] >= share[lk]:  # never >: equality, exact
                    ready = True
                    break
        if ready:
            r = d if at_demand else mk  # the level
            f = live_i[i, 0]
            rate[f] = (dcap[f] if at_demand else weight[f] * mk) if wtd else r
            froz_i[n_done, 0] = e0
            froz_i[n_done, 1] = e1
            froz_x[n_done] = rate[f]
            if order:
                froz_g[n_done, 0] = f
                froz_g[n_done, 1], n_grp = _rule_group(
                    f, e0, e1, mk, r, at_demand, cur, n_grp, e_link, lo, rows, links
                )
            n_done += 1
            n_frozen += 1
        else:
            if n_keep != i:
                live_i[n_keep, 0] = live_i[i, 0]
                live_i[n_keep, 1] = e0
                live_i[n_keep, 2] = e1
                live_x[n_keep, 0] = d
            n_keep += 1
    return n_keep, n_done, n_grp, n_frozen


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _rule_take_off(n_done, n_frozen, cur, e_link, e_coef, lo, rows, links):  # pragma: no cover - compiled
    """Step 4 of a round of :func:`parallel_rule`: the traffic of the ``n_frozen`` flows frozen last
    (``rows.froz_i``, ``rows.froz_x``) taken off their links' remaining capacities, summed per link in entry
    order and then off each link once (as ``remaining - bincount(...)`` does; never below 0)."""
    froz_i, froz_x = rows.froz_i, rows.froz_x
    remaining, sub, sstamp = links.remaining, links.sub, links.sstamp
    for i in range(n_done - n_frozen, n_done):
        r = froz_x[i]
        for e in range(froz_i[i, 0], froz_i[i, 1]):
            use = e_coef[e] * r
            # inf only for unconstrained flows, whose links are all inf
            if np.isfinite(use):
                sub[e_link[e] - lo] += use
    for i in range(n_done - n_frozen, n_done):
        for e in range(froz_i[i, 0], froz_i[i, 1]):
            lk = e_link[e] - lo
            if sstamp[lk] != cur:
                sstamp[lk] = cur
                y = remaining[lk] - sub[lk]
                remaining[lk] = y if y > 0.0 else 0.0


@njit(cache=True, nogil=True, _nrt=False, forceinline=True)
def parallel_rule(
    n_act, act_flows, fe_lo, fe_hi, e_link, e_coef, capacity, lo, dcap, rate, rows, links, tick, max_rounds,
    order, weight,
):  # fmt: skip  # pragma: no cover - compiled
    """Max-min rates of the flows ``act_flows[:n_act]`` of one instance (its links are rows ``e_link[e] -
    lo`` of the link scratch) by the parallel local-bottleneck rule of
    :func:`ainet_gym.sim.allocator.solve_coo`, bit for bit as the numpy backend, written to ``rate``: in each
    round, every link whose share ``remaining / sum coef`` is the least among the path minima of its live
    flows, and every flow at its demand, freezes its flows at that level. Flow ``f`` owns the shared entries
    ``fe_lo[f]:fe_hi[f]``; its demand is ``dcap[f]`` (the full solve: already capped by its exclusive links,
    :func:`exclusive_caps`). The one rule of both solves that use it: :func:`run_interval_numba`'s
    (``order`` false: the remaining capacities start as ``capacity[lo + l]``, the solve runs to the end) and
    :func:`fill_parallel`'s (``order`` true: ``links.remaining`` is the caller's residuals, read and left as
    the frozen flows leave them; the frozen flows keep their groups for the freeze order; at most
    ``max_rounds`` rounds). ``weight``: (flows,) each flow's share weight (the level ``rate / weight`` is made
    max-min fair, as ``solve_coo(weights=)``, to round-off: the traffic taken off a link is coefficient x rate,
    not (coefficient x weight) x level; with ``order`` the groups' levels are levels, ``rate / weight``);
    empty: every weight 1, bit for bit.

    Scratch: ``rows`` (:class:`ParallelRows`, one row per flow) keeps the flows still unfrozen compacted
    (``live_i``: flow, first entry, end entry; ``live_x``: demand, path minimum) and the frozen ones in
    freeze order (``froz_i`` / ``froz_x``, with ``order`` ``froz_g``); ``links`` (:class:`ParallelLinks`, one row per
    link) is initialised lazily by stamps: ``tick`` is a counter unique over the scratch's life, one per
    round, so a solve costs O(active entries x rounds), not O(links). Returns ``(rounds, live, frozen,
    groups, work, work of the first round, tick)``: the flows still unfrozen are ``live_i[:live, 0]``
    (``max_rounds`` reached, or a round that froze no flow: NaN input, rounds ``-1``), the frozen ones
    ``froz_g[:frozen, 0]``, their groups ``froz_g[:frozen, 1]`` and the groups' levels ``glev[:groups]`` (``order``: the flows a link freezes in a
    round share its share bitwise, so they are one group; a flow frozen at its demand, or crossing no link,
    is a group of its own); work: the entries of the live flows summed over the rounds (the switch's cost
    model).

    The rule's four steps per round over one set of scratch rows, the compiled twin of ``solve_coo``'s
    numbered steps: :func:`_rule_shares`, :func:`_rule_path_minima`, :func:`_rule_freeze` (ready flows,
    their groups :func:`_rule_group`) and :func:`_rule_take_off` (traffic off the links), after
    :func:`_rule_start`; each compiled into the rule (``forceinline``).
    """
    n_live, n_done, n_grp = _rule_start(n_act, act_flows, fe_lo, fe_hi, dcap, rate, rows, order, weight)
    it = 0
    wk = 0  # entries of the live flows, summed over the rounds (the cost model's work)
    wk0 = 0  # in the first round
    while n_live > 0 and it < max_rounds:
        cur = tick
        tick += 1
        wk += _rule_shares(
            n_live, cur, it == 0 and not order, e_link, e_coef, capacity, lo, rows, links, weight
        )
        _rule_path_minima(n_live, e_link, lo, rows, links)
        n_keep, n_done, n_grp, n_frozen = _rule_freeze(
            n_live, n_done, n_grp, cur, e_link, lo, dcap, rate, rows, links, order, weight
        )  # fmt: skip
        if n_frozen == 0:
            return -1, n_live, n_done, n_grp, wk, wk0, tick
        if n_keep > 0 or order:  # (the full solve: not needed after the last round)
            _rule_take_off(n_done, n_frozen, cur, e_link, e_coef, lo, rows, links)
        if it == 0:
            wk0 = wk
        it += 1
        n_live = n_keep
    return it, n_live, n_done, n_grp, wk, wk0, tick


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _flow_level(rate, weight, f):  # pragma: no cover - compiled
    """Flow ``f``'s level, ``rate[f] / weight[f]`` (its share weight; ``weight`` empty: every weight 1, the
    rate itself)."""
    return rate[f] / weight[f] if weight.shape[0] > 0 else rate[f]


class FullScratch(NamedTuple):
    """:func:`run_interval_numba`'s scratch (:func:`full_scratch`), indexed by global flow / phase id: only
    the flows and phases of the range are initialised and touched."""

    act: np.ndarray  # (flows,) bool active at the last event
    rate: np.ndarray  # (flows,) float64 bytes/s of the last solve
    moved: np.ndarray  # (flows,) float64 bytes moved in the interval
    t_phase: np.ndarray  # (phases,) float64 s to the last completion of each phase (phase mode)
    act_flows: np.ndarray  # (flows,) int64 the active flows, in flow order
    dcap: np.ndarray  # (flows,) float64 demand capped by the flow's exclusive links, bytes/s
    came_f: np.ndarray  # (flows,) bool an active flow joined the set at this event
    no_pend: np.ndarray  # (0,) int64, (0,) bool: settle_units' counts are run_interval_lazy's
    no_joined: np.ndarray


@njit(cache=True, nogil=True, **_COMPILED_ONLY)
def full_scratch(b_lo, b_hi, inst_flow, n_flows, n_phases, n_links):  # pragma: no cover - compiled
    """:func:`run_interval_numba`'s scratch for the instances ``b_lo:b_hi``: :class:`FullScratch`, and the
    solver's (:func:`parallel_rule`): :class:`ParallelRows` for the most flows of one instance, and
    :class:`ParallelLinks` reused by the instances in turn, initialised lazily by stamps."""
    f_max = 0  # most flows of one instance in the range
    for b in range(b_lo, b_hi):
        if inst_flow[b + 1] - inst_flow[b] > f_max:
            f_max = inst_flow[b + 1] - inst_flow[b]
    i64 = np.int64
    scr = FullScratch(
        np.empty(n_flows, dtype=np.bool_), np.empty(n_flows), np.empty(n_flows), np.empty(n_phases),
        np.empty(n_flows, dtype=i64), np.empty(n_flows), np.empty(n_flows, dtype=np.bool_), np.empty(0, dtype=i64),
        np.empty(0, dtype=np.bool_),
    )  # fmt: skip
    rows = ParallelRows(np.empty((f_max, 3), dtype=i64), np.empty((f_max, 2)), np.empty((f_max, 2), dtype=i64),
                        np.empty(f_max), np.empty((0, 2), dtype=i64), np.empty(0))  # fmt: skip
    links = ParallelLinks(
        np.empty(n_links), np.empty(n_links), np.empty(n_links), np.empty(n_links), np.empty(n_links),
        np.full(n_links, -1, dtype=i64), np.full(n_links, -1, dtype=i64), np.empty(n_links, dtype=i64),
        np.empty(0, dtype=i64), np.empty(0, dtype=i64),
    )  # fmt: skip
    return scr, rows, links


@njit(cache=True, nogil=True, **_COMPILED_ONLY)
def unit_records(structure, state, outputs):  # pragma: no cover - compiled
    """The unit steps' records (:class:`UnitTable`, :class:`UnitClock`, :class:`JobParams`,
    :class:`PhaseGraph`, :class:`IterationTallies`) of :func:`run_interval_numba`'s compiled records."""
    units = UnitTable(
        structure.unit_alive, structure.unit_bg, structure.unit_nphases, structure.phase_off,
        structure.phase_flow_lo, structure.phase_flow_n,
    )  # fmt: skip
    clock = UnitClock(
        state.phase_cur, state.t_start_left, state.t_compute_left, state.t_comm_start_left, state.phase_state,
        state.phase_wait, state.phase_lat_left, state.iter_start, state.comm_start, state.comm_end,
    )  # fmt: skip
    job = JobParams(structure.unit_compute, structure.unit_overlap, state.flow_bytes)
    graph = PhaseGraph(
        structure.phase_latency, structure.phase_npred, structure.phase_succ_off, structure.phase_succ,
    )  # fmt: skip
    tallies = IterationTallies(
        state.iterations_total, state.last_step_s, state.last_comm_s, outputs.iters, outputs.step_sum,
        outputs.comm_sum,
    )  # fmt: skip
    return units, clock, job, graph, tallies


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def full_instance_start(
    b, u0, u1, lo, n_links, cand, resumed, sw_on, sw_mode, sw_ev, sw_t, sw_cost, t_left, link_bytes, tallies,
    compute_t, active_t, stalled,
):  # fmt: skip  # pragma: no cover - compiled
    """Instance ``b`` at the start of its interval in :func:`run_interval_numba` (not ``resumed`` from the
    lazy kernel): its part of the outputs zeroed, here, on its thread (links ``lo:lo + n_links``, units
    ``u0:u1``). A lazy-kernel instance (``cand``) with the switch off, or last on the lazy path, is handed
    to it before its first event (``sw_mode[b] = 2``; the switch's columns ``sw_cost[b]``); True if so."""
    if not resumed:
        for k in range(lo, lo + n_links):
            link_bytes[k] = 0.0
        for u in range(u0, u1):
            tallies.iters[u] = 0
            tallies.step_sum[u] = 0.0
            tallies.comm_sum[u] = 0.0
            compute_t[u] = 0.0
            active_t[u] = 0.0
        stalled[b] = 0
    if cand and not resumed:
        sw_cost[b, 2] = 0.0  # the predicted savings of the other path since the last hand-off
        if not sw_on or sw_cost[b, 3] == 0.0:  # the lazy kernel from the start
            sw_cost[b, 3] = 0.0
            sw_mode[b] = 2
            sw_ev[b] = 0
            sw_t[b] = t_left
            return True
    if cand:
        sw_cost[b, 3] = 1.0  # on this path
    return False


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def active_set(
    f0, f1, eps_t, cand, scr, flow_w, flow_unit, flow_phase, flow_bg, unit_alive, bg_on, phase_off,
    phase_state, phase_lat_left, rem,
):  # fmt: skip  # pragma: no cover - compiled
    """The active flows of ``f0:f1`` at this event (:class:`FullScratch` ``scr``: ``act``, and
    ``act_flows`` in flow order, ``came_f`` marking the arrivals): a flow of an alive unit whose phase runs
    with its latency paid and bytes left, or a background flow switched on. ``(whether the set changed,
    active flows, the least last level rate / weight of the flows that left (lazy-kernel instances, cand;
    else inf), arrivals)``."""
    act, act_flows, came_f, rate = scr.act, scr.act_flows, scr.came_f, scr.rate
    changed = False
    n_act = np.int64(0)
    lev = np.inf
    n_came = 0
    for f in range(f0, f1):
        u = flow_unit[f]
        if not unit_alive[u]:
            a = False
        elif flow_bg[f]:
            a = bg_on[u]
        else:
            p = phase_off[u] + flow_phase[f]
            a = phase_state[p] == RUNNING and phase_lat_left[p] <= eps_t and rem[f] > 0
        arrived = False
        if a != act[f]:
            changed = True
            act[f] = a
            if a:
                n_came += 1
                arrived = True
            elif cand:
                lev = min(lev, _flow_level(rate, flow_w, f))
        if a:
            came_f[f] = arrived
            act_flows[n_act] = f
            n_act += 1
    return changed, n_act, lev, n_came


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def hand_to_lazy(
    b, f0, f1, n_act, n_came, lev, scr, flow_w, fe_lo, fe_hi, sw_ratio, sw_handoff, ev, t_left, sw_mode, sw_ev, sw_t,
    sw_cost,
):  # fmt: skip  # pragma: no cover - compiled
    """Whether :func:`run_interval_numba` hands lazy-kernel instance ``b`` to that kernel at this event (the
    active set changed after a solve; :data:`LAZY_SWITCH` on). The lazy kernel's re-fill is predicted as the
    entries of the active flows at or above its restart level (the flows that arrive, here all flows at an
    event with arrivals, and those whose last level, ``rate / weight``, is at least ``lev``, the least last
    level of the flows that left, less :data:`RESTART_MARGIN`): an upper bound, which also leaves out the
    connected components the event does not touch; a full solve as the running mean of its work per entry
    (``sw_cost[b, 0]``) x the active entries, plus the flows scanned and advanced. The predicted savings of
    the lazy kernel (its work weighted by ``sw_ratio``, :data:`LAZY_COST_RATIO`) accumulate in
    ``sw_cost[b, 2]`` (never below 0); the hand-off comes when they exceed ``sw_handoff`` predicted full
    solves (:data:`LAZY_HANDOFF_SOLVES`): then the hand-off is written (``sw_mode[b] = 2``, ``ev`` events run,
    ``t_left`` s left; the savings and the path reset)."""
    act_flows, came_f, rate = scr.act_flows, scr.came_f, scr.rate
    lev = lev * (1.0 - RESTART_MARGIN) if n_came == 0 else -np.inf
    e_act = 0
    e_above = 0
    for k in range(n_act):
        f = act_flows[k]
        ne = fe_hi[f] - fe_lo[f]
        e_act += ne
        if came_f[f] or _flow_level(rate, flow_w, f) >= lev:
            e_above += ne
    p_full = sw_cost[b, 0] * e_act + (f1 - f0) + n_act
    p_lazy = sw_ratio * sw_cost[b, 1] * e_above
    acc = sw_cost[b, 2] + p_full - p_lazy
    sw_cost[b, 2] = acc if acc > 0.0 else 0.0
    if acc > sw_handoff * p_full:
        sw_mode[b], sw_ev[b], sw_t[b], sw_cost[b, 2], sw_cost[b, 3] = 2, ev, t_left, 0.0, 0.0
        return True
    return False


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def next_flow_event(
    b, n_act, t_phase, act_flows, rate, rem, flow_bg, flow_unit, flow_phase, phase_off, inst_phase, phase_mode,
    quantum, stalled,
):  # fmt: skip  # pragma: no cover - compiled
    """The time (s) to the next flow event of instance ``b`` in :func:`run_interval_numba` (inf: none;
    ``stalled[b]``: the most active job flows at rate 0 at an event of the interval): the first flow completion, or (``phase_mode``: only the last flow of a
    phase is an event, earlier finishers keep their rate) the first phase whose last flow completes; with
    ``quantum`` > 0, completions up to ``quantum`` after the first are one event, at the last of them (the
    flows that finish earlier idle until then: their bandwidth is re-allocated late)."""
    inf = np.inf
    dt_fl = inf
    n_stalled = 0
    if phase_mode:
        for p in range(inst_phase[b], inst_phase[b + 1]):
            t_phase[p] = 0.0
    for i in range(n_act):
        f = act_flows[i]
        if flow_bg[f]:
            continue
        r = rate[f]
        if r <= 0:
            n_stalled += 1
        tf = rem[f] / r if r > 0 else inf
        if phase_mode:
            p = phase_off[flow_unit[f]] + flow_phase[f]
            if tf > t_phase[p]:
                t_phase[p] = tf
        elif tf < dt_fl:
            dt_fl = tf
    if phase_mode:
        for i in range(n_act):
            f = act_flows[i]
            if not flow_bg[f]:
                tf = t_phase[phase_off[flow_unit[f]] + flow_phase[f]]
                if tf < dt_fl:
                    dt_fl = tf
    if quantum > 0.0 and dt_fl < inf:
        t_q = dt_fl + quantum
        for i in range(n_act):
            f = act_flows[i]
            if flow_bg[f]:
                continue
            if phase_mode:
                tf = t_phase[phase_off[flow_unit[f]] + flow_phase[f]]
            else:
                r = rate[f]
                tf = rem[f] / r if r > 0 else inf
            if tf > dt_fl and tf <= t_q:
                dt_fl = tf
    stalled[b] = max(stalled[b], n_stalled)  # (as the lazy kernel's)
    return dt_fl


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def full_solve(
    b, cand, n_act, scr, fe_lo, fe_hi, e_link, e_coef, capacity, lo, rows, links, tick, flow_w, sw_cost,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`run_interval_numba`'s solve of instance ``b``'s active flows (:class:`FullScratch` ``scr``) by
    :func:`parallel_rule` into ``scr.rate``; for a lazy-kernel instance (``cand``) the running mean of the
    work per entry of this path (``sw_cost[b, 0]``) is updated. ``(rounds, -1 on NaN input; the work, cand's
    only, else 0; tick)``."""
    it, _, _, _, wk, wk0, tick = parallel_rule(
        n_act, scr.act_flows, fe_lo, fe_hi, e_link, e_coef, capacity, lo, scr.dcap, scr.rate, rows, links, tick,
        n_act, False, flow_w,
    )  # fmt: skip
    if not cand:
        return it, 0, tick
    if it >= 0 and wk0 > 0:
        sw_cost[b, 0] += SWITCH_MEAN_WEIGHT * (wk / wk0 - sw_cost[b, 0])
    return it, wk, tick


@njit(cache=True, nogil=True, _nrt=False, **_COMPILED_ONLY)
def advance_flows(n_act, act_flows, rate, dt, flow_bg, rem, moved):  # pragma: no cover - compiled
    """The active flows ``act_flows[:n_act]`` move ``rate x dt`` bytes each (:func:`advance_flow`)."""
    for i in range(n_act):
        f = act_flows[i]
        advance_flow(f, rate[f] * dt, flow_bg, rem, moved)


@njit(cache=True, nogil=True)
def run_interval_numba(
    b_lo, b_hi, duration, phase_mode, quantum, inc_min, max_events, n_links, max_rounds, eps_t, eps_b,
    structure, state, outputs, stats, go,
    sw_on, sw_ratio, sw_handoff, sw_mode, sw_ev, sw_t, sw_cost, flow_w,
):  # fmt: skip
    """Advance the instances ``b_lo:b_hi`` by ``duration[b]`` seconds, event to event (see the module
    docstring).

    The arrays come in three compiled records (:mod:`ainet_gym.sim.records`): ``structure`` (the
    :class:`~ainet_gym.sim.records.IntervalStructure` fields), ``state`` (the engine's ``flow_bytes`` and
    ``capacity``, then the :class:`~ainet_gym.sim.state.SimState` fields) and ``outputs`` (the
    :class:`~ainet_gym.sim.records.IntervalOutputs` fields); below, each array is named by its field.

    Instance ``b``'s incidence entries of ``e_flow`` / ``e_link`` / ``e_coef`` are as :func:`merge_range`
    writes them: those on links that two or more of its flows may cross at ``inst_seg[b]:ent_hi[b]``,
    flow ``f``'s at ``fe_lo[f]:fe_hi[f]``, and those on the links that no two of its flows cross (one
    entry at most each) at ``ex_lo[b]:inst_seg[b + 1]``. State arrays are updated in place;
    per-interval outputs (``iters`` .. ``stalled``) are accumulated into their instance's part, which
    the kernel zeroes first (so they may come uninitialised, as :meth:`IntervalMetrics.empty` makes them).
    ``stats`` receives (events, solver iterations, error code, error unit; the other :data:`N_STATS`
    columns are :func:`run_interval_lazy`'s); ``go`` are the kernel
    threads' flags (:func:`go_flags`), announced first. Every array an instance writes
    is its own (its units, flows, phases, segments and links), so disjoint ranges of the batch can run on
    different threads at once, each with its own ``stats``, and give the same result as one call.

    An event: the units settle (:func:`begin_event`, the frame both kernels share), the active set
    (:func:`active_set`), perhaps a hand-off to the lazy kernel (:func:`hand_to_lazy`), a solve when the
    set changed, the time to the next flow event (:func:`next_flow_event`), then the step
    (:func:`end_event`) and the bytes moved. Allocation: the parallel local-bottleneck rule of
    :func:`ainet_gym.sim.allocator.solve_coo` (:func:`parallel_rule`), bit for bit as the numpy backend,
    re-solving every active flow when the active set changed; ``flow_w``: each flow's share weight (the
    level ``rate / weight`` max-min fair), empty when every weight is 1.

    The instances that :func:`run_interval_lazy` takes (exact event mode, at least ``inc_min`` flows; see
    :func:`lazy_instance`) start here and are handed to that kernel (the engine calls it on the same range
    after this one, and this one again while an instance was handed back): with the switch off (``sw_on``
    false) before the first event; with it on (:data:`LAZY_SWITCH`), an interval starts on the path the
    instance was on (``sw_cost[b, 3]``: 0 lazy, 1 here) and goes over when :func:`hand_to_lazy` says so
    (``sw_ratio``, ``sw_handoff``: its cost model). ``sw_cost[b]`` (:data:`N_SWITCH` columns) holds the
    running means of the measured work per entry of both paths, the savings and the path. ``sw_mode[b]``
    (such instances only): 0 at the start of the interval (this kernel zeroes the outputs), 1 handed back
    by the lazy kernel (this kernel resumes), 2 handed to the lazy kernel, 3 done; at a hand-off
    ``sw_ev[b]`` holds the events run and ``sw_t[b]`` the s of the interval left, and each kernel adds the
    link bytes of its part. ``stats[13]`` adds the work counted on this path for such instances (per event
    the flows scanned and the active flows, per solve the entries of the live flows in every round).

    The steps are compiled helpers without reference counting (``_nrt=False``, the note above
    :func:`settle_units`), which take the arrays as named tuples (passed for free); the loops take no views
    (``x[b]``, ``x[lo:hi]``): numba counts array references atomically, a call to a counted function increfs
    and decrefs every array it passes, and two threads doing that to the same arrays fight over the
    counts' cache lines.
    """
    announce(go)
    units, clock, job, graph, tallies = unit_records(structure, state, outputs)  # (read once a call)
    st = structure
    inst_seg, ent_hi, ex_lo, fe_lo, fe_hi, e_flow, e_link, e_coef = (
        st.inst_seg, st.ent_hi, st.ex_lo, st.fe_lo, st.fe_hi, st.e_flow, st.e_link, st.e_coef,
    )  # fmt: skip
    inst_unit, inst_flow, inst_phase, flow_unit, flow_phase, flow_bg, flow_scale, flow_demand = (
        st.inst_unit, st.inst_flow, st.inst_phase, st.flow_unit, st.flow_phase, st.flow_bg, st.flow_scale, st.flow_demand,
    )  # fmt: skip
    capacity, rem, bg_on, time_s, stalled = state.capacity, state.rem, state.bg_on, state.time_s, outputs.stalled  # fmt: skip
    unit_alive, phase_off, phase_state, phase_lat_left = units.unit_alive, units.phase_off, clock.phase_state, clock.phase_lat_left  # fmt: skip
    compute_t, active_t, link_bytes = outputs.compute_t, outputs.active_t, outputs.link_bytes
    scr, rows, links = full_scratch(b_lo, b_hi, inst_flow, flow_unit.shape[0], phase_state.shape[0], n_links)
    act, rate, moved, act_flows, dcap, t_phase, no_pend, no_joined = scr.act, scr.rate, scr.moved, scr.act_flows, scr.dcap, scr.t_phase, scr.no_pend, scr.no_joined  # fmt: skip
    tick = np.int64(0)  # int64 from the start (a literal 0 here and in n_act compiled parallel_rule twice)
    events, solver_iters = stats[0], stats[1]  # (it runs again on the ranges the lazy kernel hands back)
    full_events = switches = full_work = 0  # lazy-kernel instances: events run here, hand-offs, work counted
    for b in range(b_lo, b_hi):
        cand = lazy_instance(inst_flow, b, inc_min, phase_mode, quantum)  # the lazy kernel's (at some event)
        if cand and sw_mode[b] >= 2:  # the lazy kernel's, or done
            continue
        resumed = cand and sw_mode[b] == 1
        u0, u1, f0, f1, lo = inst_unit[b], inst_unit[b + 1], inst_flow[b], inst_flow[b + 1], b * n_links
        t_left = sw_t[b] if resumed else duration[b]
        if full_instance_start(b, u0, u1, lo, n_links, cand, resumed, sw_on, sw_mode, sw_ev, sw_t, sw_cost, t_left,
                               link_bytes, tallies, compute_t, active_t, stalled):  # fmt: skip
            continue
        reset_instance_flows(b, f0, f1, act, moved, dcap, flow_demand, ex_lo, inst_seg, e_flow, e_link, e_coef,
                             capacity)  # fmt: skip
        solved = handed = False
        ev = ev_in = sw_ev[b] if resumed else 0
        while True:
            zero_completed(f0, f1, eps_b, flow_bg, flow_scale, rem)  # (completions first: then settle)
            code, ev = begin_event(u0, u1, time_s[b], t_left, ev, max_events, max_rounds, eps_t, False, no_pend,
                                   no_joined, units, clock, rem, job, graph, tallies, stats)  # fmt: skip
            if code == FRAME_END:
                break
            if code != FRAME_RUN:
                if code == FRAME_CAP:
                    stats[11] += full_events + (ev - ev_in if cand else 0)
                    stats[13] += full_work
                return
            changed, n_act, lev, n_came = active_set(f0, f1, eps_t, cand, scr, flow_w, flow_unit, flow_phase, flow_bg,
                                                     unit_alive, bg_on, phase_off, phase_state, phase_lat_left, rem)  # fmt: skip
            changed = changed or not solved  # re-solve only when the active set changed
            if cand:
                full_work += (f1 - f0) + n_act  # the flows scanned, the active flows advanced
            if cand and sw_on and solved and changed and hand_to_lazy(
                b, f0, f1, n_act, n_came, lev, scr, flow_w, fe_lo, fe_hi, sw_ratio, sw_handoff, ev - 1, t_left,
                sw_mode, sw_ev, sw_t, sw_cost,
            ):  # fmt: skip  # handed to the lazy kernel at this event (which it runs again)
                ev, handed = ev - 1, True
                break
            if changed:
                it, wk, tick = full_solve(b, cand, n_act, scr, fe_lo, fe_hi, e_link, e_coef, capacity, lo, rows, links,
                                          tick, flow_w, sw_cost)  # fmt: skip
                if it < 0:
                    stats[2], stats[3] = ERR_SOLVER, -1
                    return
                solver_iters += it
                full_work += wk
                solved = True
            dt_fl = next_flow_event(b, n_act, t_phase, act_flows, rate, rem, flow_bg, flow_unit, flow_phase,
                                    phase_off, inst_phase, phase_mode, quantum, stalled)  # fmt: skip
            dt, _ = end_event(b, u0, u1, dt_fl if dt_fl < t_left else t_left, eps_t, units, clock, active_t,
                              compute_t, time_s)  # fmt: skip
            advance_flows(n_act, act_flows, rate, dt, flow_bg, rem, moved)
            t_left -= dt
        add_link_bytes(b, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef, moved, link_bytes)
        events = max(events, ev)
        if cand:
            full_events, switches = full_events + ev - ev_in, switches + handed
            if not handed:
                sw_mode[b] = 3  # the rest of the interval ran here
    stats[0], stats[1], stats[11], stats[12], stats[13] = events, solver_iters, stats[11] + full_events, stats[12] + switches, stats[13] + full_work  # fmt: skip


# ----------------------------------------------------------------------------------------------------------
# progressive filling on a subset of flows (the compiled allocator; the event loop's incremental re-solve)
# ----------------------------------------------------------------------------------------------------------


class FillScratch(NamedTuple):
    """Scratch of :func:`fill_levels`, sized once for ``links`` links, ``flows`` flows and ``entries``
    incidence entries (:func:`fill_scratch`). ``tick`` stamps (one per fill) mark the links a fill uses, so
    nothing is cleared between fills. A fill copies its flows' entries into the local rows below (flow
    ``a`` of the fill, link row ``j``), so that the filling walks small contiguous arrays, not the
    global ones in link order."""

    link_stamp: np.ndarray  # (links,) int64 the fill that last used the link
    link_slot: np.ndarray  # (links,) int64 the link's row in the fill
    slot_link: np.ndarray  # (links,) int64 link of each row
    slot_resid: np.ndarray  # (links,) float64 residual capacity of each row
    slot_denom: np.ndarray  # (links,) float64 sum of coef * weight of the unfrozen flows on it
    slot_count: np.ndarray  # (links,) int64 unfrozen flows on it
    slot_off: np.ndarray  # (links+1,) int64 CSR offsets of its flows in slot_flows
    slot_fill: np.ndarray  # (links,) int64 fill cursor
    slot_flows: np.ndarray  # (entries,) int64 the (local) flows of every row
    flow_off: np.ndarray  # (flows+1,) int64 CSR offsets of each local flow's entries
    flow_frozen: np.ndarray  # (flows,) bool
    ent_slot: np.ndarray  # (entries,) int64 row of each local entry
    ent_coef: np.ndarray  # (entries,) float64 its coefficient
    ent_cw: np.ndarray  # (entries,) float64 coefficient * the flow's weight
    heap_key: np.ndarray  # (links + flows + entries + 1,) float64 level of each heap item
    heap_item: np.ndarray  # (same,) int64 row (>= 0) or -1 - local flow (a demand level)


@njit(cache=True, nogil=True)
def fill_scratch(n_links, n_flows, n_entries):  # pragma: no cover - compiled (callable from Python too)
    """A :class:`FillScratch` for fills over at most these many links, flows and entries.

    Only the link stamps are initialised (-1: no fill used the link): a fill writes every other row it
    reads first (:func:`fill_levels`), so the rest is left uninitialised. Zeroing them cost more than the
    fills of a short interval: some 50 ms for the 114 MB of 8 AllToAll x 128 GPUs (2.3 M entries), at every
    call of the lazy kernel, hand-offs of the switch included (docs/engine-alltoall.md)."""
    i64 = np.int64
    h = n_links + n_flows + n_entries + 1
    e = max(n_entries, 1)
    return FillScratch(
        np.full(n_links, -1, dtype=i64), np.empty(n_links, dtype=i64), np.empty(n_links, dtype=i64),
        np.empty(n_links), np.empty(n_links), np.empty(n_links, dtype=i64), np.empty(n_links + 1, dtype=i64),
        np.empty(n_links, dtype=i64), np.empty(e, dtype=i64), np.empty(n_flows + 1, dtype=i64),
        np.empty(n_flows, dtype=np.bool_), np.empty(e, dtype=i64), np.empty(e), np.empty(e),
        np.empty(h), np.empty(h, dtype=i64),
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _heap_push(key, item, n, k, i):  # pragma: no cover - compiled
    """Push ``(k, i)`` on the binary min-heap ``key[:n]`` / ``item[:n]``; the new size."""
    j = n
    while j > 0:
        p = (j - 1) >> 1
        if key[p] <= k:
            break
        key[j] = key[p]
        item[j] = item[p]
        j = p
    key[j] = k
    item[j] = i
    return n + 1


@njit(cache=True, nogil=True, inline="always")
def _heap_pop(key, item, n):  # pragma: no cover - compiled
    """Remove the root of the heap ``key[:n]`` (read it first); the new size."""
    n -= 1
    k = key[n]
    i = item[n]
    j = 0
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and key[c + 1] < key[c]:
            c += 1
        if key[c] >= k:
            break
        key[j] = key[c]
        item[j] = item[c]
        j = c
    if n > 0:
        key[j] = k
        item[j] = i
    return n


@njit(cache=True, nogil=True)
def merge_by_level(a_flow, a_level, n_a, b_flow, b_level, n_b, out_flow, out_level,
                   start):  # fmt: skip  # pragma: no cover - compiled
    """Merge two freeze orders, each sorted by level, into ``out_*[start : start + n_a + n_b]`` (ties: ``a``
    first, so a merge keeps the order of equal levels)."""
    i = 0
    j = 0
    for k in range(start, start + n_a + n_b):
        if j >= n_b or (i < n_a and a_level[i] <= b_level[j]):
            out_flow[k] = a_flow[i]
            out_level[k] = a_level[i]
            i += 1
        else:
            out_flow[k] = b_flow[j]
            out_level[k] = b_level[j]
            j += 1


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _fill_rows(
    flows, n, fe_lo, fe_hi, e_link, e_coef, weight, resid, s, tick, lo
):  # pragma: no cover - compiled
    """:func:`fill_levels`' local rows (:class:`FillScratch` ``s``, stamp ``tick``): the entries of
    ``flows[:n]`` copied flow by flow (local flow ``a``, link row ``j``: its residual, the sum of coef x
    weight and the count of its flows), then the link-major lists of the local flows. The link rows."""
    stamp, slot, slot_link, sres = s.link_stamp, s.link_slot, s.slot_link, s.slot_resid
    den, cnt, off, fill, adj = s.slot_denom, s.slot_count, s.slot_off, s.slot_fill, s.slot_flows
    foff, frozen, eslot, ecoef, ecw = s.flow_off, s.flow_frozen, s.ent_slot, s.ent_coef, s.ent_cw
    nl = 0
    m = 0
    for a in range(n):  # local copies of the flows' entries; the links' denominators and counts
        f = flows[a]
        frozen[a] = False
        foff[a] = m
        w = weight[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            if stamp[lk] != tick:
                stamp[lk] = tick
                slot[lk] = nl
                slot_link[nl] = lk
                sres[nl] = resid[lk]
                den[nl] = 0.0
                cnt[nl] = 0
                nl += 1
            j = slot[lk]
            c = e_coef[e]
            eslot[m] = j
            ecoef[m] = c
            ecw[m] = c * w
            den[j] += c * w
            cnt[j] += 1
            m += 1
    foff[n] = m
    m = 0
    for j in range(nl):  # link-major lists of the local flows
        off[j] = m
        fill[j] = m
        m += cnt[j]
    off[nl] = m
    for a in range(n):
        for q in range(foff[a], foff[a + 1]):
            j = eslot[q]
            adj[fill[j]] = a
            fill[j] += 1
    return nl


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _fill_share(j, s):  # pragma: no cover - compiled
    """Link row ``j``'s share now (:func:`fill_levels`, :class:`FillScratch` ``s``): residual over the sum of
    its unfrozen flows' coef x weight (inf: none), that sum first summed again if round-off ate it."""
    den, sres = s.slot_denom, s.slot_resid
    if den[j] <= 0.0:
        d = 0.0
        for q in range(s.slot_off[j], s.slot_off[j + 1]):
            a = s.slot_flows[q]
            if not s.flow_frozen[a]:
                for x in range(s.flow_off[a], s.flow_off[a + 1]):
                    if s.ent_slot[x] == j:
                        d += s.ent_cw[x]
        den[j] = d
    return sres[j] / den[j] if den[j] > 0 else np.inf


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _fill_freeze(
    q0, q1, it, k, flows, demand, weight, rate, out_flow, out_level, n_out, s
):  # pragma: no cover
    """Freeze at level ``k`` the unfrozen local flows of :func:`fill_levels`' link row (its list
    ``s.slot_flows[q0:q1]``), or (``q0 < 0``) the one local flow ``-1 - it`` at its demand: each flow's rate
    (``weight x k``, or its demand), its place in the freeze order (``out_flow``, ``out_level``, from
    ``n_out``), its traffic off its links' residuals and its coef x weight off their sums. The freeze
    order's length."""
    frozen, adj, foff, eslot, ecoef, ecw = (
        s.flow_frozen,
        s.slot_flows,
        s.flow_off,
        s.ent_slot,
        s.ent_coef,
        s.ent_cw,
    )
    sres, den, cnt = s.slot_resid, s.slot_denom, s.slot_count
    for q in range(q0, q1):
        a = adj[q] if q >= 0 else -1 - it
        if frozen[a]:
            continue
        f = flows[a]
        r = demand[f] if q < 0 else weight[f] * k
        frozen[a] = True
        rate[f] = r
        out_flow[n_out] = f
        out_level[n_out] = k
        n_out += 1
        for x in range(foff[a], foff[a + 1]):  # off its links
            j2 = eslot[x]
            use = ecoef[x] * r
            if np.isfinite(use):  # inf only for unconstrained flows, whose links are all inf
                y = sres[j2] - use
                sres[j2] = y if y > 0.0 else 0.0
            den[j2] -= ecw[x]
            cnt[j2] -= 1
    return n_out


@njit(cache=True, nogil=True)
def fill_levels(flows, n, fe_lo, fe_hi, e_link, e_coef, weight, demand, resid, rate, out_flow, out_level,
                s, tick, lo):  # fmt: skip  # pragma: no cover - compiled
    """Weighted max-min fair rates of ``flows[:n]`` by progressive filling, on the residual capacities
    ``resid`` of their links (updated in place: what the flows leave). Link ``e_link[e]`` is row
    ``e_link[e] - lo`` of ``resid`` (``lo``: the instance's first link, 0 for one instance).

    Flow ``f`` puts ``e_coef[e]`` on link ``e_link[e]`` per unit of rate for ``e`` in ``fe_lo[f]:fe_hi[f]``;
    its level is ``rate / weight[f]``, capped at ``demand[f] / weight[f]`` (inf: none). The level rises for
    every unfrozen flow at once; the next link to fill (least ``resid / sum coef * weight`` over its
    unfrozen flows, a binary heap, each link's key refreshed lazily when popped: a freeze never lowers a
    share) or the next demand level freezes its flows. Each flow is frozen once and each of its entries
    updated once: O(entries log links) for a fill, against O(entries x rounds) for the parallel rule of
    :func:`ainet_gym.sim.allocator.solve_coo` (the numpy reference); rates agree to round-off.

    Writes ``rate[f]`` and the freeze order (``out_flow[:n]``, ``out_level[:n]``, levels nondecreasing).
    ``s``: a :class:`FillScratch`; ``tick``: a stamp no earlier fill with this scratch used. Returns the
    heap pops. A flow on a link of capacity 0 gets 0; a flow that no finite capacity or demand limits,
    ``inf``.

    The steps: the local rows (:func:`_fill_rows`), the heap of link shares and demand levels (its push and
    pop, :func:`_heap_push`, :func:`_heap_pop`; a popped link's share refreshed, :func:`_fill_share`), and
    the freeze of a level's flows (:func:`_fill_freeze`), each compiled into the fill (``forceinline``).
    """
    inf = np.inf
    hkey, hitem, sres, den, cnt, off = s.heap_key, s.heap_item, s.slot_resid, s.slot_denom, s.slot_count, s.slot_off  # fmt: skip
    foff, frozen, slot_link = s.flow_off, s.flow_frozen, s.slot_link
    nl = _fill_rows(flows, n, fe_lo, fe_hi, e_link, e_coef, weight, resid, s, tick, lo)
    hn = 0
    for j in range(nl):
        hn = _heap_push(hkey, hitem, hn, sres[j] / den[j] if den[j] > 0 else inf, j)
    for a in range(n):
        f = flows[a]
        if demand[f] < inf or foff[a + 1] == foff[a]:
            hn = _heap_push(hkey, hitem, hn, demand[f] / weight[f], -1 - a)
    n_out = 0
    pops = 0
    while hn > 0 and n_out < n:
        k = hkey[0]
        it = hitem[0]
        hn = _heap_pop(hkey, hitem, hn)
        pops += 1
        if it >= 0:  # a link: fill it, unless its share moved since it was pushed
            j = it
            if cnt[j] <= 0:
                continue
            sh = _fill_share(j, s)
            if sh != k:
                hn = _heap_push(hkey, hitem, hn, sh, j)
                continue
            q0, q1 = off[j], off[j + 1]
        else:  # a demand level: that one flow
            if frozen[-1 - it]:
                continue
            q0, q1 = -1, 0
        n_out = _fill_freeze(q0, q1, it, k, flows, demand, weight, rate, out_flow, out_level, n_out, s)
    for j in range(nl):
        resid[slot_link[j]] = sres[j]
    return pops


@njit(cache=True, nogil=True)
def fill_parallel(
    flows, n, fe_lo, fe_hi, e_link, e_coef, demand, resid, rate, max_rounds, lo, out_flow, out_level, weight
):  # pragma: no cover - compiled (callable from Python too)
    """Weighted max-min fair rates of ``flows[:n]`` with demands ``demand`` on the residual capacities
    ``resid`` (row ``e_link[e] - lo``, updated in place: what the flows leave) by :func:`parallel_rule` (the
    full solve's rule, with ``order``), at most ``max_rounds`` rounds. ``weight``: (flows,) each flow's share
    weight (the level ``rate / weight`` is made max-min fair, as :func:`fill_levels`); empty: every weight 1,
    bit for bit the unweighted rule. Writes ``rate`` for the flows it freezes, and those flows in freeze order
    (by level, nondecreasing) to ``out_flow`` / ``out_level``.

    Stops after ``max_rounds`` rounds (or at a round that freezes nothing: NaN input) and returns ``(n_done,
    n_rest, rest, work)`` (``work``: the entries of the live flows summed over the rounds): ``n_done``
    flows frozen (``out_flow[:n_done]``); the flows still unfrozen are ``rest[:n_rest]``, and on the
    capacities ``resid`` now holds they are a max-min problem of their own (the frozen ones are frozen at
    their max-min rates), so :func:`fill_levels` of them finishes the allocation exactly.

    The freeze order is not a sort of the flows: the flows a link freezes in a round share its share
    bitwise, so they form one group; the groups (one per link and round, one per flow frozen at its demand)
    are sorted by level and the flows placed by a counting sort: O(flows + groups log groups).
    """
    nlk = resid.shape[0]
    m1 = max(n, 1)
    i64 = np.int64
    rows = ParallelRows(np.empty((m1, 3), dtype=i64), np.empty((m1, 2)), np.empty((m1, 2), dtype=i64),
                        np.empty(m1), np.empty((m1, 2), dtype=i64), np.empty(m1))  # fmt: skip
    links = ParallelLinks(
        resid, np.empty(nlk), np.empty(nlk), np.empty(nlk), np.empty(nlk), np.full(nlk, -1, dtype=i64),
        np.full(nlk, -1, dtype=i64), np.empty(nlk, dtype=i64), np.full(nlk, -1, dtype=i64), np.empty(nlk, dtype=i64),
    )  # fmt: skip
    _, n_live, n_done, n_grp, work, _, _ = parallel_rule(
        n, flows, fe_lo, fe_hi, e_link, e_coef, resid, lo, demand, rate, rows, links, 0, max_rounds, True, weight,
    )  # fmt: skip
    froz_g, glev = rows.froz_g, rows.glev
    # the frozen flows by level: the groups sorted, the flows placed by group (counting sort)
    order = np.argsort(glev[:n_grp])
    pos = np.zeros(n_grp + 1, dtype=i64)  # start of each group (by rank) in the output
    rank = np.empty(n_grp, dtype=i64)
    for k in range(n_grp):
        rank[order[k]] = k
    for i in range(n_done):
        pos[rank[froz_g[i, 1]] + 1] += 1
    for k in range(n_grp):
        pos[k + 1] += pos[k]
    for i in range(n_done):
        g = froz_g[i, 1]
        k = rank[g]
        out_flow[pos[k]] = froz_g[i, 0]
        out_level[pos[k]] = glev[g]
        pos[k] += 1
    rest = np.empty(m1, dtype=i64)
    for i in range(n_live):
        rest[i] = rows.live_i[i, 0]
    return n_done, n_live, rest, work


@njit(cache=True, nogil=True)
def solve_fill(entry_flow, entry_link, entry_coef, capacity, n_flows, weight, demand):  # pragma: no cover
    """:func:`fill_levels` over every flow of flow-sorted COO entries (coefficients > 0): the rates and the
    heap pops. The compiled backend of :func:`ainet_gym.sim.allocator.max_min_fair`."""
    n_links = capacity.shape[0]
    fe_lo = np.zeros(n_flows, dtype=np.int64)
    fe_hi = np.zeros(n_flows, dtype=np.int64)
    for e in range(entry_flow.shape[0]):
        f = entry_flow[e]
        if fe_hi[f] == 0:
            fe_lo[f] = e
        fe_hi[f] = e + 1
    for f in range(n_flows):
        if fe_hi[f] == 0:
            fe_lo[f] = 0
    flows = np.arange(n_flows)
    resid = capacity.copy()
    rate = np.zeros(n_flows)
    out_flow = np.empty(n_flows, dtype=np.int64)
    out_level = np.empty(n_flows)
    s = fill_scratch(n_links, n_flows, entry_flow.shape[0])
    pops = fill_levels(flows, n_flows, fe_lo, fe_hi, entry_link, entry_coef, weight, demand, resid, rate,
                       out_flow, out_level, s, 0, 0)  # fmt: skip
    return rate, pops


@njit(cache=True, nogil=True)
def solve_fill_blocks(
    entry_flow, entry_link, entry_coef, capacity, weight, demand, flow_bounds, link_bounds
):  # pragma: no cover
    """:func:`solve_fill` on each independent instance of a batch, one after the other in one compiled call:
    instance ``i`` owns flows ``flow_bounds[i]:flow_bounds[i + 1]`` and links ``link_bounds[i]:link_bounds[i +
    1]`` (entries flow-sorted, so each instance's entries are contiguous). Each instance gets its own fill,
    heap and residuals, so its rates equal a :func:`solve_fill` of that instance alone bit for bit (one fill
    over the stacked instances would break ties between equal keys across instances in another order, which
    can move a rate by an ulp)."""
    n_inst = flow_bounds.shape[0] - 1
    rate = np.zeros(flow_bounds[n_inst])
    e0 = 0
    for i in range(n_inst):
        f0, f1, l0, l1 = flow_bounds[i], flow_bounds[i + 1], link_bounds[i], link_bounds[i + 1]
        e1 = e0
        while e1 < entry_flow.shape[0] and entry_flow[e1] < f1:
            e1 += 1
        r, _ = solve_fill(entry_flow[e0:e1] - f0, entry_link[e0:e1] - l0, entry_coef[e0:e1],
                          capacity[l0:l1].copy(), f1 - f0, weight[f0:f1].copy(), demand[f0:f1].copy())  # fmt: skip
        rate[f0:f1] = r
        e0 = e1
    return rate


# ----------------------------------------------------------------------------------------------------------
# the lazy exact event loop: incremental fills, per-flow progress kept from the flow's last rate change
# ----------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def lazy_instance(inst_flow, b, inc_min, phase_mode, quantum):  # pragma: no cover - compiled
    """Whether instance ``b`` runs in :func:`run_interval_lazy` (exact event mode, at least ``inc_min >= 0``
    flows) rather than in :func:`run_interval_numba` (the parallel rule, bit for bit as the numpy backend)."""
    return inc_min >= 0 and not phase_mode and quantum == 0.0 and inst_flow[b + 1] - inst_flow[b] >= inc_min


@njit(cache=True, nogil=True, inline="always")
def _uf_find(uf, x):  # pragma: no cover - compiled
    """Root of ``x`` in the union-find forest ``uf`` (path halving)."""
    while uf[x] != x:
        uf[x] = uf[uf[x]]
        x = uf[x]
    return x


@njit(cache=True, nogil=True, inline="always")
def _heap_place(hk, hf, pos, i, k, f):  # pragma: no cover - compiled
    """Put flow ``f`` with key ``k`` in slot ``i`` of the indexed min-heap ``hk`` (keys) / ``hf`` (flows) /
    ``pos`` (flow -> slot)."""
    hk[i] = k
    hf[i] = f
    pos[f] = i


@njit(cache=True, nogil=True, inline="always")
def _sift_up(hk, hf, pos, i):  # pragma: no cover - compiled
    """Move item ``i`` of the indexed min-heap ``hk`` / ``hf`` / ``pos`` (:func:`_heap_place`) up."""
    k = hk[i]
    f = hf[i]
    while i > 0:
        p = (i - 1) >> 1
        if hk[p] <= k:
            break
        _heap_place(hk, hf, pos, i, hk[p], hf[p])
        i = p
    _heap_place(hk, hf, pos, i, k, f)


@njit(cache=True, nogil=True, inline="always")
def _sift_down(hk, hf, pos, n, i):  # pragma: no cover - compiled
    """Move item ``i`` of the indexed min-heap of ``n`` items down."""
    k = hk[i]
    f = hf[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and hk[c + 1] < hk[c]:
            c += 1
        if hk[c] >= k:
            break
        _heap_place(hk, hf, pos, i, hk[c], hf[c])
        i = c
    _heap_place(hk, hf, pos, i, k, f)


@njit(cache=True, nogil=True, inline="always")
def _heap_set(hk, hf, pos, n, f, key):  # pragma: no cover - compiled
    """Give flow ``f`` the key ``key`` in the indexed heap of ``n`` items (inserted, moved, or removed when
    ``key`` is inf); the new size."""
    i = pos[f]
    if key == np.inf:
        if i < 0:
            return n
        n -= 1
        pos[f] = -1
        if i < n:
            _heap_place(hk, hf, pos, i, hk[n], hf[n])  # the last item into the freed slot
            if i > 0 and hk[(i - 1) >> 1] > hk[i]:
                _sift_up(hk, hf, pos, i)
            else:
                _sift_down(hk, hf, pos, n, i)
        return n
    if i < 0:
        hk[n] = key
        hf[n] = f
        _sift_up(hk, hf, pos, n)
        return n + 1
    old = hk[i]
    hk[i] = key
    if key < old:
        _sift_up(hk, hf, pos, i)
    else:
        _sift_down(hk, hf, pos, n, i)
    return n


class RepairScratch(NamedTuple):
    """State and scratch of :func:`repair_departures` for one instance of the lazy kernel
    (:func:`repair_scratch`). ``sat`` is kept from solve to solve: where it is >= 0, the link is saturated
    and no active flow on it has a level above ``sat`` (so a flow on it at that level has the link as a
    bottleneck); -1: not known saturated. Every solve of :func:`resolve_incremental` keeps that true: a fill
    sets it on the saturated links of the flows it filled (the largest level among them: the other flows on
    such a link are below the restart level, so lower), and -1 on the other links of those flows and of the
    departed ones; the links no solve touched keep their flows and rates. Where ``sat`` is set, the flows at
    that level are listed (``top_*``: those the repair's scan reads; a fill lists its flows at the level, a
    repair the flows its scan for ``lmax`` found there, :func:`link_index` every link's from ``sat``)."""

    sat: np.ndarray  # (links,) float64 the largest level on a saturated link, -1: not known saturated
    lmax: np.ndarray  # (links,) float64 the largest level of the active flows on a link (a repair's scan)
    lstamp: np.ndarray  # (links,) int64 the repair whose scan lmax holds
    adj_off: np.ndarray  # (links+1,) int64 CSR offsets of each link's flows (every flow of the instance)
    adj_flow: np.ndarray  # (entries,) int64 the flows on each link
    fmark: np.ndarray  # (flows,) int64 the repair that re-fills the flow
    queue: np.ndarray  # (links,) int64 the links a repair changed, in the order it found them
    # the active flows at each known-saturated link's largest level (``sat``): ``top_flow[adj_off[l] :
    # adj_off[l] + top_n[l]]``, valid where ``sat >= 0``, ``top_n >= 0`` and the link index is built (the
    # repair's scan reads only them, :data:`REPAIR_ONLY_TOP`; with them possibly flows a few ulps below,
    # :func:`_top_add`); -1: not known (the scan reads every flow)
    top_n: np.ndarray  # (links,) int64
    top_flow: np.ndarray  # (entries,) int64
    ptop_n: np.ndarray  # (links,) int64 the same for ``lmax`` (a repair's fill), into ``top_*`` when the
    ptop_flow: np.ndarray  # (entries,) int64 repair is made


@njit(cache=True, nogil=True)
def repair_scratch(n_links, n_flows, n_entries):  # pragma: no cover - compiled (callable from Python too)
    """A :class:`RepairScratch` for instances of at most these many links and entries, flows indexed by
    global id below ``n_flows``."""
    i64 = np.int64
    return RepairScratch(
        np.full(n_links, -1.0), np.empty(n_links), np.full(n_links, -1, dtype=i64), np.zeros(n_links + 1, dtype=i64),
        np.empty(max(n_entries, 1), dtype=i64), np.full(n_flows, -1, dtype=i64), np.empty(n_links, dtype=i64),
        np.full(n_links, -1, dtype=i64), np.empty(max(n_entries, 1), dtype=i64), np.full(n_links, -1, dtype=i64),
        np.empty(max(n_entries, 1), dtype=i64),
    )  # fmt: skip


def lazy_scratch(n_links: int, n_flows: int, f_max: int, e_max: int) -> tuple[FillScratch, RepairScratch]:
    """The scratch :func:`run_interval_lazy` takes (``fs``, ``rp``) for instances of at most ``n_links`` links,
    ``f_max`` flows and ``e_max`` shared entries, flows indexed by global id below ``n_flows``: allocated once
    and passed to every call (the numba backend keeps one per instance range, :class:`BatchSim`'s
    ``backend_scratch``)."""
    return fill_scratch(n_links, f_max, e_max), repair_scratch(n_links, n_flows, e_max)


@njit(cache=True, nogil=True)
def link_index(
    rp, f0, f1, fe_lo, fe_hi, e_link, lo, n_links, act, rate, weight
):  # pragma: no cover - compiled
    """The link-major index of the entries of flows ``f0:f1`` (active or not) into ``rp.adj_off`` /
    ``rp.adj_flow`` (links ``lo .. lo + n_links``), and the lists of the active flows at each link's ``rp.sat``
    level (``rp.top_*``: the flows at levels ``rate / weight >= sat (1 - REPAIR_RTOL)``); the entries
    indexed. O(entries)."""
    off = rp.adj_off
    cur = rp.queue
    for j in range(n_links + 1):
        off[j] = 0
    for f in range(f0, f1):
        for e in range(fe_lo[f], fe_hi[f]):
            off[e_link[e] - lo + 1] += 1
    for j in range(n_links):
        off[j + 1] += off[j]
        cur[j] = off[j]
    for f in range(f0, f1):
        for e in range(fe_lo[f], fe_hi[f]):
            j = e_link[e] - lo
            rp.adj_flow[cur[j]] = f
            cur[j] += 1
    for j in range(n_links):
        if rp.sat[j] < 0.0:
            rp.top_n[j] = -1
            continue
        top = rp.sat[j] * (1.0 - REPAIR_RTOL)
        n = 0
        for x in range(off[j], off[j + 1]):
            g = rp.adj_flow[x]
            if act[g] and rate[g] / weight[g] >= top:
                rp.top_flow[off[j] + n] = g
                n += 1
        rp.top_n[j] = n
    return 2 * off[n_links]


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _top_add(tf, base, n, g, lv, m):  # pragma: no cover - compiled
    """Flow ``g`` at level ``lv`` offered to a link's list of the flows at its largest level ``m`` so far
    (``tf[base : base + n]``): appended when ``lv >= m (1 - REPAIR_RTOL)``; when ``lv (1 - REPAIR_RTOL)``
    exceeds ``m``, every listed flow (at most ``m``) is below the new level and the list restarts with ``g``,
    unread. A rise within round-off keeps the list (flows a few ulps below the new level stay listed: the
    scan checks each listed flow's level). ``(n, m)``."""
    if lv > m:
        if lv * (1.0 - REPAIR_RTOL) > m:
            n = 0
        tf[base + n] = g
        return n + 1, lv
    if lv >= m * (1.0 - REPAIR_RTOL):
        tf[base + n] = g
        return n + 1, m
    return n, m


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _repair_queue(f, tick, fe_lo, fe_hi, e_link, lo, rstamp, q, qn):  # pragma: no cover - compiled
    """:func:`repair_departures`: flow ``f``'s links are changed (stamped ``tick`` in ``rstamp``, queued once
    in ``q`` after its ``qn``). The queue's length."""
    for e in range(fe_lo[f], fe_hi[f]):
        lk = e_link[e] - lo
        if rstamp[lk] != tick:
            rstamp[lk] = tick
            q[qn] = lk
            qn += 1
    return qn


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _repair_scan(
    qi, qn, n_r, work, seen, tick, limit, only_top, act, rate, fe_lo, fe_hi, e_link, capacity, lo, dcap, weight,
    rstamp, load, refill, old_rate, rp,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`repair_departures`' scan of the changed links queued from ``qi`` on: on each that was saturated
    before the event, every active flow not yet re-filled keeps its rate when it is at its demand or has a
    witness (an unchanged link with ``rp.sat`` >= 0 at whose level it is); otherwise it is re-filled
    (``refill``, ``old_rate``, ``rp.fmark``) and its links queued. ``(qi, qn, n_r, work, seen, within
    limit)``: False when more than ``limit`` flows would be re-filled (the repair declines)."""
    tol = REPAIR_RTOL
    q, off, adj, sat, fmark = rp.queue, rp.adj_off, rp.adj_flow, rp.sat, rp.fmark
    top_n, top_flow = rp.top_n, rp.top_flow
    while qi < qn:
        lk = q[qi]
        qi += 1
        c = capacity[lo + lk]
        if not (
            c < np.inf and c - load[lk] <= tol * c
        ):  # not saturated before the event: no flow's bottleneck
            continue
        # the link's largest level before the event, if known: only the flows at it have the link as a
        # bottleneck (:data:`REPAIR_ONLY_TOP`); a flow below it has another bottleneck, and if that one changed
        # too, the flow is found when that link is scanned (it is queued: every changed link is)
        top = sat[lk] * (1.0 - tol) if only_top and sat[lk] >= 0.0 else -np.inf
        # (where the flows at that level are listed, only they are read: the others would be skipped below)
        lst, x0, x1 = adj, off[lk], off[lk + 1]
        if only_top and sat[lk] >= 0.0 and top_n[lk] >= 0:
            lst, x1 = top_flow, x0 + top_n[lk]
        for x in range(x0, x1):
            g = lst[x]
            work += 1
            if not act[g] or fmark[g] == tick:
                continue
            seen += 1
            r = rate[g]
            lv = r / weight[g]
            if lv < top:
                continue
            ok = r >= dcap[g] * (1.0 - tol)
            if not ok:
                for e in range(fe_lo[g], fe_hi[g]):
                    l2 = e_link[e] - lo
                    if rstamp[l2] == tick:
                        continue
                    s2 = sat[l2]
                    if s2 >= 0.0 and lv >= s2 * (1.0 - tol):
                        ok = True
                        break
                work += fe_hi[g] - fe_lo[g]
            if ok:
                continue
            if n_r >= limit:
                return qi, qn, n_r, work, seen, False
            fmark[g] = tick
            refill[n_r] = g
            old_rate[n_r] = r
            n_r += 1
            qn = _repair_queue(g, tick, fe_lo, fe_hi, e_link, lo, rstamp, q, qn)
    return qi, qn, n_r, work, seen, True


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _repair_residuals(
    qn, n_gone, n_r, gone, refill, old_rate, rate, fe_lo, fe_hi, e_link, e_coef, capacity, lo, load, resid, q,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`repair_departures`: the residuals of the changed links ``q[:qn]`` that the re-filled flows are
    filled on: their capacity less their loads, plus what the departed flows (at ``rate``) and the
    ``n_r`` re-filled ones (at ``old_rate``) used. The entries read (work)."""
    work = 0
    for k in range(qn):
        lk = q[k]
        c = capacity[lo + lk]
        resid[lk] = c - load[lk] if c < np.inf else np.inf
    for k in range(n_gone + n_r):
        f = gone[k] if k < n_gone else refill[k - n_gone]
        r = rate[f] if k < n_gone else old_rate[k - n_gone]
        work += fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            use = e_coef[e] * r
            if np.isfinite(use):
                resid[e_link[e] - lo] += use
    return work


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _repair_link_scan(lk, act, rate, weight, rp):  # pragma: no cover - compiled
    """:func:`_repair_link_max` on link ``lk`` the long way: every active flow on it read, its largest level
    into ``rp.lmax`` and the flows at it into ``rp.ptop_*``. The active flows read."""
    off, adj = rp.adj_off, rp.adj_flow
    m = -np.inf
    n = 0
    seen = 0
    for x in range(off[lk], off[lk + 1]):
        g = adj[x]
        if act[g]:
            seen += 1
            n, m = _top_add(rp.ptop_flow, off[lk], n, g, rate[g] / weight[g], m)
    rp.ptop_n[lk] = n
    rp.lmax[lk] = m
    return seen


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _sort_ids(a, base, n):  # pragma: no cover - compiled
    """``a[base : base + n]`` sorted in place (insertion sort: the lists are short and nearly sorted). The
    moves made."""
    moves = 0
    for i in range(base + 1, base + n):
        x = a[i]
        j = i - 1
        while j >= base and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
            moves += 1
        a[j + 1] = x
    return moves


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _repair_link_max(
    qn, tick, ltick, only_top, n_r, refill, act, rate, weight, fe_lo, fe_hi, e_link, capacity, lo, resid, rp,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`repair_departures` after a fill: the largest level on each saturated changed link into
    ``rp.lmax``, stamped ``ltick``, and the flows at it into ``rp.ptop_*``. ``(work, active flows read)``.

    With ``only_top``, a link with a list (``rp.top_*``: before the event, every active flow on it at or
    above ``rp.sat (1 - REPAIR_RTOL)`` is listed) takes its level from the list's kept flows (rates unchanged)
    and the re-filled flows on it at their new levels (:func:`_top_add`, as the long scan would): when the
    largest of those is at least the old ``sat``, the kept flows not listed (below ``sat (1 - REPAIR_RTOL)``)
    are below it beyond round-off, so it is the link's largest level and every flow at it is listed.
    Otherwise (a kept flow not listed may be within round-off of the level), and on a link without a list,
    every active flow on the link is read (:func:`_repair_link_scan`). A list so taken is sorted by flow id,
    the order of the long scan (the link-major index): the next scan re-fills in list order, and the order
    of the re-filled flows is the order of the fill's sums, so the rates stay bit for bit the long scan's."""
    tol = REPAIR_RTOL
    q, off, lmax, lstamp, fmark = rp.queue, rp.adj_off, rp.lmax, rp.lstamp, rp.fmark
    work = 0
    seen = 0
    for k in range(qn):  # the listed kept flows (their links stamped ltick; the others scanned below)
        lk = q[k]
        c = capacity[lo + lk]
        if not (only_top and c < np.inf and resid[lk] <= tol * c and rp.sat[lk] >= 0.0 and rp.top_n[lk] >= 0):
            continue
        m = -np.inf
        n = 0
        for x in range(off[lk], off[lk] + rp.top_n[lk]):
            g = rp.top_flow[x]
            if act[g] and fmark[g] != tick:
                seen += 1
                n, m = _top_add(rp.ptop_flow, off[lk], n, g, rate[g] / weight[g], m)
        work += rp.top_n[lk]
        rp.ptop_n[lk] = n
        lmax[lk] = m
        lstamp[lk] = ltick
    for k in range(n_r):  # the re-filled flows at their new levels on those links
        g = refill[k]
        lv = rate[g] / weight[g]
        work += fe_hi[g] - fe_lo[g]
        for e in range(fe_lo[g], fe_hi[g]):
            lk = e_link[e] - lo
            if lstamp[lk] == ltick:
                rp.ptop_n[lk], lmax[lk] = _top_add(rp.ptop_flow, off[lk], rp.ptop_n[lk], g, lv, lmax[lk])
    for k in range(qn):
        lk = q[k]
        c = capacity[lo + lk]
        if c < np.inf and resid[lk] <= tol * c:
            if lstamp[lk] != ltick or lmax[lk] < rp.sat[lk]:
                seen += _repair_link_scan(lk, act, rate, weight, rp)
                work += off[lk + 1] - off[lk]
            else:
                work += _sort_ids(rp.ptop_flow, off[lk], rp.ptop_n[lk])
            lstamp[lk] = ltick
    return work, seen


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _repair_check(
    n_r, qn, work, seen, tick, ltick, limit, act, rate, fe_lo, fe_hi, e_link, lo, dcap, weight, rstamp, refill,
    old_rate, rp,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`repair_departures`' check after a fill: every re-filled flow must be at its demand or at the
    largest level of a saturated link it crosses (``rp.lmax`` stamped ``ltick``). A flow that is not has a
    kept flow above it on every such link: those must come down, so they join the re-fill (their links
    queued). ``(flows without a bottleneck, n_r, qn, work, seen, within limit)``: False when more than
    ``limit`` flows would be re-filled (the old rates put back; the repair declines)."""
    tol = REPAIR_RTOL
    q, off, adj, fmark, lmax, lstamp = rp.queue, rp.adj_off, rp.adj_flow, rp.fmark, rp.lmax, rp.lstamp
    n_bad = 0
    n_r0 = n_r
    for k in range(n_r0):
        g = refill[k]
        r = rate[g]
        work += fe_hi[g] - fe_lo[g]
        if r >= dcap[g] * (1.0 - tol):
            continue
        lv = r / weight[g]
        ok = False
        for e in range(fe_lo[g], fe_hi[g]):
            l2 = e_link[e] - lo
            if lstamp[l2] == ltick and lv >= lmax[l2] * (1.0 - tol):
                ok = True
                break
        if ok:
            continue
        n_bad += 1
        for e in range(fe_lo[g], fe_hi[g]):
            l2 = e_link[e] - lo
            if lstamp[l2] != ltick:
                continue
            for x in range(off[l2], off[l2 + 1]):
                h = adj[x]
                if not act[h]:
                    continue
                seen += 1
                if fmark[h] == tick or rate[h] / weight[h] <= lv * (1.0 + tol):
                    continue
                if n_r >= limit:
                    for j in range(n_r0):
                        rate[refill[j]] = old_rate[j]
                    return n_bad, n_r, qn, work, seen, False
                fmark[h] = tick
                refill[n_r] = h
                old_rate[n_r] = rate[h]
                n_r += 1
                qn = _repair_queue(h, tick, fe_lo, fe_hi, e_link, lo, rstamp, q, qn)
            work += off[l2 + 1] - off[l2]
    return n_bad, n_r, qn, work, seen, True


@njit(cache=True, nogil=True)
def repair_departures(
    act, rate, gone, n_gone, fe_lo, fe_hi, e_link, e_coef, capacity, lo, dcap, weight, resid, rstamp, load,
    rstate, refill, old_rate, out_flow, out_level, fs, rp, limit, only_top=True,
):  # fmt: skip  # pragma: no cover - compiled
    """The max-min rates after an event at which flows only left (``gone[:n_gone]``), by re-filling only the
    flows that lost every bottleneck, if they are at most ``limit``; ``(n_r, work)`` with ``n_r`` the flows
    re-filled (``refill[:n_r]``, previous rates ``old_rate[:n_r]``, new freeze order ``out_flow[:n_r]`` /
    ``out_level[:n_r]``), or ``n_r = -1``: declined, ``rate``, ``load`` and ``rp.sat`` as they were (the
    caller re-fills from the restart level). ``rstate[3]`` (the solve's stamp) is advanced; ``rp.fmark ==
    rstate[3]`` marks the re-filled flows; ``rstate[11]`` / ``rstate[12]`` count the repairs made / declined,
    ``rstate[13]`` the active flows they read (visits: the flows on the changed saturated links checked for a
    witness, and those scanned for a link's largest level after the fill).

    Exact by the bottleneck characterisation of max-min fairness (Bertsekas and Gallager, Data Networks,
    section 6.5.2, with coefficients and demands): a feasible allocation is THE max-min fair one iff every
    flow is at its demand or crosses a saturated link on which no flow has a higher level. The old rates
    were max-min fair for the old flows. A link is *changed* when a departed or a re-filled flow crosses
    it; the others keep their flows and loads. A flow that crosses no changed link keeps a bottleneck (its
    old one: unchanged). A flow on a changed link keeps its rate when it is at its demand or has a witness:
    an unchanged link with ``rp.sat`` >= 0 (saturated, no flow above that level) at which its level is that
    level; otherwise it is re-filled, its links become changed, and the flows on them are checked again
    (a witness may have become changed). Only the changed links that were saturated before the event are
    scanned: no other is a flow's bottleneck, and a flow whose bottleneck changed is found on that link. When no flow is left without one, the re-filled flows are filled
    (:func:`fill_levels`) on what the others leave, and each must then be at its demand or at the largest
    level of a saturated link it crosses (its flows scanned through ``rp.adj_*``). A re-filled flow that is
    not has a kept flow above it on every saturated link it crosses; in the max-min allocation those come
    down, so they join the re-fill (their links changed, the flows on them checked again) and the repair
    fills again from the old rates, at most :data:`REPAIR_MAX_ROUNDS` times (then, or when no flow is
    found to add, it declines). Comparisons allow :data:`REPAIR_RTOL` (round-off). On an AllToAll whose flows tie
    at one level, bottlenecked at both NICs, a completion at that level changes nothing: every flow of the
    departed flow's NICs has a witness at its other NIC.

    The steps, in order on one set of scratch arrays (each compiled into the repair, ``forceinline``): the
    scan of the changed links (:func:`_repair_scan`), the residuals to fill on (:func:`_repair_residuals`),
    the fill, the saturated links' largest levels (:func:`_repair_link_max`) and the check after the fill
    (:func:`_repair_check`); any of them may decline.
    """
    q, sat, lmax, lstamp = rp.queue, rp.sat, rp.lmax, rp.lstamp
    rstate[3] += 1
    tick = rstate[3]
    qn = 0
    work = 0
    seen = 0  # active flows read (visits; rstate[13])
    for k in range(n_gone):  # the departed flows' links are changed
        f = gone[k]
        work += fe_hi[f] - fe_lo[f]
        qn = _repair_queue(f, tick, fe_lo, fe_hi, e_link, lo, rstamp, q, qn)
    n_r = 0
    qi = 0
    ltick = -1
    ok = True
    for rnd in range(REPAIR_MAX_ROUNDS + 1):
        qi, qn, n_r, work, seen, ok = _repair_scan(qi, qn, n_r, work, seen, tick, limit, only_top, act, rate, fe_lo,
                                                   fe_hi, e_link, capacity, lo, dcap, weight, rstamp, load, refill,
                                                   old_rate, rp)  # fmt: skip
        if not ok:
            break
        if n_r == 0:
            break
        # the re-filled flows on what the others leave
        work += _repair_residuals(qn, n_gone, n_r, gone, refill, old_rate, rate, fe_lo, fe_hi, e_link, e_coef, capacity,
                                  lo, load, resid, q)  # fmt: skip
        work += fill_levels(refill, n_r, fe_lo, fe_hi, e_link, e_coef, weight, dcap, resid, rate, out_flow,
                            out_level, fs, rstate[4], lo)  # fmt: skip
        rstate[4] += 1
        ltick = tick * (REPAIR_MAX_ROUNDS + 1) + rnd
        w2, s2 = _repair_link_max(qn, tick, ltick, only_top, n_r, refill, act, rate, weight, fe_lo, fe_hi, e_link,
                                  capacity, lo, resid, rp)  # fmt: skip
        work += w2
        seen += s2
        n_r0 = n_r
        n_bad, n_r, qn, work, seen, ok = _repair_check(n_r, qn, work, seen, tick, ltick, limit, act, rate, fe_lo,
                                                       fe_hi, e_link, lo, dcap, weight, rstamp, refill, old_rate, rp)  # fmt: skip
        if not ok or n_bad == 0:
            break
        for j in range(n_r0):  # the old rates back: the next round fills the larger set from them
            rate[refill[j]] = old_rate[j]
        if n_r == n_r0 or rnd == REPAIR_MAX_ROUNDS:  # (nothing to add: round-off beyond REPAIR_RTOL)
            ok = False
            break
    if not ok:  # declined: the rates as they were (the caller re-fills from the restart level)
        rstate[12] += 1
        rstate[13] += seen
        return -1, work
    if n_r == 0:  # nothing re-filled: the changed links' residuals are the departed flows' uses back
        _repair_residuals(qn, n_gone, 0, gone, refill, old_rate, rate, fe_lo, fe_hi, e_link, e_coef, capacity, lo,
                          load, resid, q)  # fmt: skip
    for k in range(qn):  # the loads and bottleneck levels of the changed links
        lk = q[k]
        c = capacity[lo + lk]
        load[lk] = c - resid[lk] if c < np.inf else 0.0
        sat[lk] = lmax[lk] if n_r > 0 and lstamp[lk] == ltick else -1.0
        if sat[lk] >= 0.0:  # (the flows at that level, listed after the fill)
            n = rp.ptop_n[lk]
            b = rp.adj_off[lk]
            rp.top_flow[b : b + n] = rp.ptop_flow[b : b + n]
            rp.top_n[lk] = n
            work += n
    work += qn
    rstate[11] += 1
    rstate[13] += seen
    return n_r, work


@njit(cache=True, nogil=True)
def _distinct_levels(level, k0, k1, cap):  # pragma: no cover - compiled
    """The distinct levels of the nondecreasing ``level[k0:k1]`` (equal within 1e-12 relative: the fills'
    round-off), counted up to ``cap + 1``."""
    n = 0
    last = -1.0
    for k in range(k0, k1):
        x = level[k]
        if n == 0 or x > last * (1.0 + 1e-12):
            n += 1
            if n > cap:
                return n
            last = x
    return n


@njit(cache=True, nogil=True, _nrt=False)
def first_at_least(level, n, x):  # pragma: no cover - compiled
    """The first index ``k`` of the nondecreasing ``level[:n]`` with ``level[k] >= x`` (``n`` if none): a
    binary search, as ``np.searchsorted(level[:n], x)`` finds it."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if level[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _inc_full_set(
    n_act, act_list, fe_lo, fe_hi, e_link, e_coef, capacity, lo, unit_weight, refill, resid, csum, link_gen, gen,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s full fill: every active flow to fill (``refill``), on its links'
    capacities (``resid``), their sums of coefficient x weight (``csum``) counted anew (``link_gen`` =
    ``gen``). The active entries."""
    e_act = 0
    for k in range(n_act):
        f = act_list[k]
        e_act += fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            if link_gen[lk] != gen:
                link_gen[lk] = gen
                resid[lk] = capacity[lo + lk]
                csum[lk] = 0.0
            csum[lk] += e_coef[e] * unit_weight[f]
        refill[k] = f
    return e_act


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _inc_restart_level(
    n_gone, gone, n_came, came, rate, unit_weight, dcap, fe_lo, fe_hi, e_link, e_coef, capacity, lo, csum, load,
    link_gen, gen, rstate,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s restart level ``L`` (a level, rate / weight), below which no rate
    changes: the least old level of the departed flows and the least bound of the arrivals (its least equal
    share level, or its demand's), less :data:`RESTART_MARGIN`; the links' sums of coefficient x weight
    (``csum``) and the active entries (``rstate[8]``) follow the departures and arrivals. ``(L, the
    arrivals' entries)``."""
    lev = np.inf
    e_came = 0
    for k in range(n_gone):
        f = gone[k]
        lev = min(lev, rate[f] / unit_weight[f])
        rstate[8] -= fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            csum[e_link[e] - lo] -= e_coef[e] * unit_weight[f]
    for k in range(n_came):
        f = came[k]
        rstate[8] += fe_hi[f] - fe_lo[f]
        e_came += fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            if link_gen[lk] != gen:  # a link no active flow crossed since the full fill
                link_gen[lk] = gen
                csum[lk] = 0.0
                load[lk] = 0.0
            csum[lk] += e_coef[e] * unit_weight[f]
    for k in range(n_came):  # a flow's level is at least its least equal share level (or its demand's)
        f = came[k]
        x = dcap[f] / unit_weight[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            y = capacity[lo + lk] / csum[lk] if csum[lk] > 0 else np.inf
            if y < x:
                x = y
        if x < lev:
            lev = x
    return lev * (1.0 - RESTART_MARGIN), e_came


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _inc_patch_log(
    n_r, lev, n_log, act, old_rate, refill, out_flow, out_level, unit_weight, log_flow, log_level, keep_flow,
    keep_level, rp, rstate, work,
):  # fmt: skip  # pragma: no cover - compiled
    """After a departure repair of :func:`resolve_incremental` that re-filled ``n_r`` flows: the freeze log
    patched (the departed and re-filled flows out, the re-filled ones in at their new levels, from the
    least level either had, less :data:`RESTART_MARGIN`), and the solve's state (``rstate``: log length,
    solves since a full fill, the work)."""
    tick = rstate[3]
    m = lev
    for k in range(n_r):
        x = min(old_rate[k] / unit_weight[refill[k]], out_level[k]) * (1.0 - RESTART_MARGIN)
        if x < m:
            m = x
    kk = first_at_least(log_level, n_log, m)
    n_keep = 0
    for k in range(kk, n_log):
        f = log_flow[k]
        if act[f] and rp.fmark[f] != tick:
            keep_flow[n_keep] = f
            keep_level[n_keep] = log_level[k]
            n_keep += 1
    merge_by_level(keep_flow, keep_level, n_keep, out_flow, out_level, n_r, log_flow, log_level, kk)
    rstate[0] = kk + n_keep + n_r
    rstate[1] += 1
    rstate[9] = work + n_log - kk + n_r


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _inc_declines(
    k0, n_log, log_flow, log_level, fe_lo, fe_hi, e_above, par_levels, sw_on, cost, rstate, n_inst, n_act,
    sw_ratio, sw_handoff,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s switch (:data:`LAZY_SWITCH`): the entries at or above the restart level
    (the log from ``k0``, the departed flows' all there, plus the arrivals' ``e_above``) as the lazy
    re-fill against a full solve; the full path's savings summed in ``cost[2]``, and above ``sw_handoff``
    predicted full solves it declines. ``(entries above, distinct levels above (0: not counted), declines)``."""
    for k in range(k0, n_log):
        f = log_flow[k]
        e_above += fe_hi[f] - fe_lo[f]
    n_lev = 0
    if par_levels < n_log - k0:
        n_lev = _distinct_levels(log_level, k0, n_log, par_levels)
    if sw_on:
        p_full = cost[0] * rstate[8] + n_inst + n_act
        acc = cost[2] + sw_ratio * cost[1] * e_above - p_full
        cost[2] = acc if acc > 0.0 else 0.0
        if acc > sw_handoff * p_full:
            cost[2] = 0.0
            return e_above, n_lev, True
    return e_above, n_lev, False


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _inc_components(
    k0, n_log, n_came, log_flow, came, act, arr_mark, mark, fe_lo, fe_hi, e_link, capacity, lo, load, resid, uf,
    seed, rstamp, tick, use_cc,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`: the links of the flows at or above the restart level (the log from
    ``k0``, departed ones included, and the arrivals) stamped ``tick`` with their residuals at capacity less
    load; with ``use_cc``, their connected components (union-find ``uf`` over the links) and the roots of
    the components of a departed or an arrived flow (``seed`` = ``tick``): only those change."""
    for k in range(k0, n_log + n_came):
        f = log_flow[k] if k < n_log else came[k - n_log]
        r0 = -1
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            if rstamp[lk] != tick:
                rstamp[lk] = tick
                uf[lk] = lk
                c = capacity[lo + lk]
                resid[lk] = c - load[lk] if c < np.inf else np.inf
            if not use_cc:
                continue
            if r0 < 0:
                r0 = _uf_find(uf, lk)
            else:
                r1 = _uf_find(uf, lk)
                if r1 != r0:
                    uf[r1] = r0
    if use_cc:
        for k in range(k0, n_log + n_came):  # the components of the departed and arrived flows
            f = log_flow[k] if k < n_log else came[k - n_log]
            if (k >= n_log or not act[f] or arr_mark[f] == mark) and fe_hi[f] > fe_lo[f]:
                seed[_uf_find(uf, e_link[fe_lo[f]] - lo)] = tick


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _inc_select(
    k0, n_log, n_came, log_flow, log_level, came, act, arr_mark, mark, rate, fe_lo, fe_hi, e_link, e_coef, lo,
    resid, uf, seed, tick, use_cc, refill, keep_flow, keep_level,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`: the flows of the log from ``k0`` in a changed component (every one while
    the component rule backs off, ``use_cc`` false) and the arrivals are filled again (``refill``) on the
    residuals plus what they and the departed flows used; the others keep their rates and levels
    (``keep_flow``, ``keep_level``). ``(to fill, kept)``."""
    n_re = 0
    n_keep = 0
    for k in range(k0, n_log):
        f = log_flow[k]
        hit = not use_cc or (fe_hi[f] > fe_lo[f] and seed[_uf_find(uf, e_link[fe_lo[f]] - lo)] == tick)
        gone_f = not act[f] or arr_mark[f] == mark  # (re-arrived: a came flow)
        if hit or gone_f:
            r = rate[f]
            for e in range(fe_lo[f], fe_hi[f]):
                use = e_coef[e] * r
                if np.isfinite(use):
                    resid[e_link[e] - lo] += use
        if gone_f:
            continue
        if hit:
            refill[n_re] = f
            n_re += 1
        else:
            keep_flow[n_keep] = f
            keep_level[n_keep] = log_level[k]
            n_keep += 1
    for k in range(n_came):
        refill[n_re] = came[k]
        n_re += 1
    return n_re, n_keep


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _inc_backoff(use_cc, n_keep, rstate):  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s back-off of the component rule (``rstate[6]``: solves left to skip it,
    ``rstate[7]``: the last skip): a solve that skipped it counts down; one that used it and kept no flow
    skips it for the next 1, 2, 4, ... solves (at most :data:`COMPONENT_BACKOFF_MAX`)."""
    if not use_cc:
        rstate[6] -= 1
    elif n_keep == 0:
        rstate[7] = min(2 * rstate[7] + 1, COMPONENT_BACKOFF_MAX)
        rstate[6] = rstate[7]
    else:
        rstate[7] = 0


@njit(cache=True, nogil=True, **_COMPILED_ONLY)
def _inc_flow_order(refill, n_re):  # pragma: no cover - compiled
    """``refill[:n_re]`` in flow order (their entries in memory order), for the parallel rule. The work
    counted: the flow range walked and the rule's rows allocated."""
    f_lo = refill[0]
    f_hi = refill[0]
    for k in range(n_re):
        f = refill[k]
        if f < f_lo:
            f_lo = f
        if f > f_hi:
            f_hi = f
    pick = np.zeros(f_hi - f_lo + 1, dtype=np.bool_)
    for k in range(n_re):
        pick[refill[k] - f_lo] = True
    k = 0
    for f in range(f_lo, f_hi + 1):
        if pick[f - f_lo]:
            refill[k] = f
            k += 1
    return f_hi - f_lo + 1 + 7 * n_re


@njit(cache=True, nogil=True, **_COMPILED_ONLY)
def _inc_fill(
    dense, refill, n_re, fe_lo, fe_hi, e_link, e_coef, dcap, resid, rate, par_rounds, lo, out_flow, out_level,
    unit_weight, weighted, fs, rstate,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`resolve_incremental`'s fill of ``refill[:n_re]`` on ``resid``: by the heap
    (:func:`fill_levels`), or, ``dense``, the parallel rule's first rounds (:func:`fill_parallel`) and the
    rest by the heap, its freeze order merged with the rule's (``out_flow``, ``out_level``). The work."""
    work = 0
    if dense:
        rstate[5] += 1
        n_done, n_rest, rest, pw = fill_parallel(refill, n_re, fe_lo, fe_hi, e_link, e_coef, dcap, resid, rate, par_rounds,
                                                 lo, out_flow, out_level, unit_weight if weighted else unit_weight[:0])  # fmt: skip
        work += pw
        if n_rest > 0:
            h_flow = np.empty(n_rest, dtype=np.int64)
            h_level = np.empty(n_rest)
            work += fill_levels(rest, n_rest, fe_lo, fe_hi, e_link, e_coef, unit_weight, dcap, resid, rate,
                                h_flow, h_level, fs, rstate[4], lo)  # fmt: skip
            for k in range(n_rest):
                work += fe_hi[rest[k]] - fe_lo[rest[k]]
            rstate[4] += 1
            p_flow = out_flow[:n_done].copy()
            p_level = out_level[:n_done].copy()
            merge_by_level(p_flow, p_level, n_done, h_flow, h_level, n_rest, out_flow, out_level, 0)
    else:
        work += fill_levels(refill, n_re, fe_lo, fe_hi, e_link, e_coef, unit_weight, dcap, resid, rate,
                            out_flow, out_level, fs, rstate[4], lo)  # fmt: skip
        for k in range(n_re):
            work += fe_hi[refill[k]] - fe_lo[refill[k]]
        rstate[4] += 1
    return work


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def _inc_loads(
    full, rep_on, n_act, act_list, n_re, refill, n_gone, gone, rate, unit_weight, fe_lo, fe_hi, e_link, capacity,
    lo, resid, load, rp, listed, lev,
):  # fmt: skip  # pragma: no cover - compiled
    """After :func:`resolve_incremental`'s fill: the loads of the links the solve touched (every active
    flow's after a full fill; else the filled and departed flows'), their ``sat`` reset, then (``rep_on``)
    the saturated links of the filled flows set to the largest level among them (:class:`RepairScratch`)
    and, when the link index is built (``listed``), the filled flows at that level listed (``rp.top_*``).
    The other active flows on such a link are below the restart level ``lev`` (-inf after a full fill):
    the list holds every flow at the link's level unless that level is within round-off of ``lev`` (then
    not known, -1). The work."""
    sat, top_n, top_flow, off = rp.sat, rp.top_n, rp.top_flow, rp.adj_off
    work = 0
    n = n_act if full else n_re + n_gone
    for k in range(n):
        if full:
            f = act_list[k]
        else:
            f = refill[k] if k < n_re else gone[k - n_re]
            work += fe_hi[f] - fe_lo[f]
        for e in range(fe_lo[f], fe_hi[f]):
            lk = e_link[e] - lo
            c = capacity[lo + lk]
            load[lk] = c - resid[lk] if c < np.inf else 0.0
            sat[lk] = -1.0
            top_n[lk] = 0
    if rep_on:
        low = np.inf  # the lowest level filled
        for k in range(n_re):
            f = refill[k]
            lv = rate[f] / unit_weight[f]
            low = min(low, lv)
            work += fe_hi[f] - fe_lo[f]
            for e in range(fe_lo[f], fe_hi[f]):
                lk = e_link[e] - lo
                c = capacity[lo + lk]
                if c < np.inf and resid[lk] <= REPAIR_RTOL * c:
                    if listed:
                        nt, m = _top_add(top_flow, off[lk], top_n[lk], f, lv, sat[lk])
                        top_n[lk] = nt
                        sat[lk] = m
                    elif lv > sat[lk]:
                        sat[lk] = lv
        near = lev * (1.0 + REPAIR_RTOL)
        if listed and low * (1.0 - REPAIR_RTOL) <= near:  # a link's level may be within round-off of lev
            for k in range(n_re):
                f = refill[k]
                for e in range(fe_lo[f], fe_hi[f]):
                    lk = e_link[e] - lo
                    if sat[lk] >= 0.0 and sat[lk] * (1.0 - REPAIR_RTOL) <= near:
                        top_n[lk] = -1
    return work


@njit(cache=True, nogil=True)
def resolve_incremental(
    act, arr_mark, mark, act_list, n_act, gone, n_gone, came, n_came, fe_lo, fe_hi, e_link, e_coef, capacity,
    lo, dcap, unit_weight, rate, old_rate, refill, keep_flow, keep_level, log_flow, log_level, out_flow,
    out_level, fs, uf, seed, resid, rstamp, load, csum, link_gen, rstate, par_share, par_rounds, sw_on,
    sw_ratio, sw_handoff, n_inst, cost, rp, f0, f1, rep_on, rep_top=REPAIR_ONLY_TOP, par_levels=PARALLEL_MAX_LEVELS, weighted=False,
):  # fmt: skip  # pragma: no cover - compiled (callable from Python too: tests/sim/test_incremental.py)
    """The max-min rates of the active flows after an event, from the last solve's: the allocation of
    :func:`run_interval_lazy` (a function of its own, so that tests drive it event by event).

    ``act`` (flows,) bool: the new active set, listed in ``act_list[:n_act]``; ``gone[:n_gone]``: the flows
    that left it since the last solve; ``came[:n_came]``: those that joined it (a flow may be in both: it
    completed and started again); ``arr_mark[f] == mark`` marks a flow that joined since the last solve.
    ``rate`` holds the last solve's rates (read for the flows of the log, written for the re-filled ones).
    ``rstate`` (int64, 14): the freeze-log length (-1: none, the solve is a full fill), the incremental solves
    since the last full fill, the link-generation, union-find and fill stamps, the parallel-rule solves,
    the component rule's back-off (solves left to skip it, the last skip; :data:`COMPONENT_BACKOFF_MAX`),
    the entries of the active flows, the work the solve counted (the switch's cost model), whether
    ``rp``'s link index holds the instance's entries (0: built at the next repair; set 0 when the entries
    change), the solves the departure repair made and declined and the active flows it read. ``log_flow`` /
    ``log_level``: the freeze log (flows by level, nondecreasing). ``load`` / ``csum`` (the instance's
    links, row ``link - lo``): the active flows' bytes/s and sums of coefficient x share weight per link,
    valid where ``link_gen`` is ``rstate[2]``. The other arrays are scratch (``fs``: a :class:`FillScratch`).

    Levels are weighted: flow ``f``'s level is ``rate[f] / unit_weight[f]`` (its share weight, 1 unweighted;
    docs/model.md, "Share weights"), and every rule below (the restart level, the freeze log, the kept
    flows, the departure repair, both fills) is in levels. ``weighted``: whether a weight differs from 1 (the
    parallel rule then takes ``unit_weight``; False: its unweighted rule, bit for bit as before weights).

    A full fill (no log yet, or :data:`FULL_FILL_EVERY` incremental solves since the last one) fills every
    active flow on the capacities. Otherwise an event that removes flows (lowest old level ``L_d``) or adds
    flows (each at a level of at least ``min(demand / weight, min over its links of capacity / sum of
    coefficient x weight)``, lowest ``L_a``) changes no level below ``L = min(L_d, L_a) (1 -
    RESTART_MARGIN)``: below it the progressive
    filling of the new flow set is the old one step for step (a departed flow crosses no link that
    saturated below its level, an arrival none that saturates below its bound). The flows at levels
    ``>= L`` on the capacities the lower ones leave make a max-min problem of their own, which decomposes
    over the connected components of their flow-link graph: only the components of a departed or an
    arrived flow are filled again.

    The flows to fill are filled by :func:`fill_levels` (a heap), or, when they are more than ``par_share``
    of the active flows, by :func:`fill_parallel` (the parallel rule, at most ``par_rounds`` rounds, the
    flows it leaves unfrozen then by :func:`fill_levels`): both are exact fills of the same max-min problem
    (:data:`PARALLEL_SHARE`). ``rstate[5]`` counts the solves that took the parallel rule.

    With ``rep_on``, an incremental solve at which flows only left is first tried by
    :func:`repair_departures` (``rp``: its :class:`RepairScratch`, whose ``sat`` every solve keeps up to date
    when ``rep_on``; ``f0:f1``: the instance's flows, for its link index): it re-fills only the flows that
    lost every bottleneck, and the freeze log is then patched (those flows and the departed ones out, the
    re-filled ones in at their new levels). When it declines, the solve re-fills from the restart level.

    Returns ``(n_re, full)``: the flows filled (``refill[:n_re]``, their previous rates in
    ``old_rate[:n_re]``, 0 for arrivals) and whether it was a full fill; ``(-1, False)``, nothing solved,
    when ``sw_on`` and the switch's cost model (:data:`LAZY_SWITCH`; ``cost``: the instance's row of
    :data:`N_SWITCH` columns) finds that the predicted savings of the full path since the last hand-off
    exceed ``sw_handoff`` predicted full solves: the lazy re-fill is predicted as ``sw_ratio x rho_l x`` the
    entries at or above the restart level, the full solve as ``rho_f x`` the active entries ``+ n_inst +
    n_act`` (the flows a full-path event scans). The caller re-solves in full, and the state here is then
    stale (the next call must be a full fill, ``rstate[0] = -1``). ``rstate[9]`` receives the work the solve
    counted (entries walked, the parallel rule's live entries over its rounds, a heap fill's entries and
    pops, the loads and the log rewritten), and an incremental solve's work per entry at or above the level
    enters ``rho_l`` (``cost[1]``).

    The steps, in order on one set of scratch arrays: the full set (:func:`_inc_full_set`) or the restart
    level (:func:`_inc_restart_level`), the departure repair and its log patch (:func:`_inc_patch_log`), the
    switch (:func:`_inc_declines`), the components (:func:`_inc_components`) and the flows to fill
    (:func:`_inc_select`), the fill (:func:`_inc_flow_order`, :func:`_inc_fill`), the loads
    (:func:`_inc_loads`); those that allocate nothing compiled into the solve (``forceinline``).
    """
    n_log = rstate[0]
    full = n_log < 0 or rstate[1] >= FULL_FILL_EVERY
    if full:
        rstate[2] += 1
    gen = rstate[2]
    work = 0
    n_lev = 0  # distinct levels of the last solve among the flows to re-fill (0: not known, a first fill)
    lev = -np.inf  # the restart level (a full fill: none)
    if full:
        if n_log >= 0 and par_levels < n_log:  # a periodic full fill: the levels of the last solve's log
            n_lev = _distinct_levels(log_level, 0, n_log, par_levels)
        rstate[8] = _inc_full_set(n_act, act_list, fe_lo, fe_hi, e_link, e_coef, capacity, lo, unit_weight, refill,
                                  resid, csum, link_gen, gen)  # fmt: skip
        work += rstate[8]
        n_re, n_keep, k0, e_above = n_act, 0, 0, 0
    else:
        lev, e_above = _inc_restart_level(n_gone, gone, n_came, came, rate, unit_weight, dcap, fe_lo, fe_hi, e_link,
                                          e_coef, capacity, lo, csum, load, link_gen, gen, rstate)  # fmt: skip
        k0 = first_at_least(log_level, n_log, lev)  # the first flow of the log at a level >= lev
        if rep_on and n_came == 0 and n_gone > 0:  # flows only left: re-fill those that lost every bottleneck
            if rstate[10] == 0:  # (the link-major index of the instance's entries, once per interval)
                work += link_index(
                    rp, f0, f1, fe_lo, fe_hi, e_link, lo, resid.shape[0], act, rate, unit_weight
                )
                rstate[10] = 1
            n_r, rw = repair_departures(
                act, rate, gone, n_gone, fe_lo, fe_hi, e_link, e_coef, capacity, lo, dcap, unit_weight, resid,
                rstamp, load, rstate, refill, old_rate, out_flow, out_level, fs, rp,
                int(REPAIR_MAX_SHARE * (n_log - k0)), rep_top,
            )  # fmt: skip
            work += rw
            if n_r >= 0:
                _inc_patch_log(n_r, lev, n_log, act, old_rate, refill, out_flow, out_level, unit_weight, log_flow,
                               log_level, keep_flow, keep_level, rp, rstate, work)  # fmt: skip
                return n_r, False
        e_above, n_lev, declines = _inc_declines(k0, n_log, log_flow, log_level, fe_lo, fe_hi, e_above, par_levels,
                                                 sw_on, cost, rstate, n_inst, n_act, sw_ratio, sw_handoff)  # fmt: skip
        if declines:
            return -1, False
        work += e_above
        rstate[3] += 1
        tick = rstate[3]
        use_cc = rstate[6] <= 0  # the component rule, unless it is backing off (below)
        _inc_components(k0, n_log, n_came, log_flow, came, act, arr_mark, mark, fe_lo, fe_hi, e_link, capacity, lo,
                        load, resid, uf, seed, rstamp, tick, use_cc)  # fmt: skip
        n_re, n_keep = _inc_select(k0, n_log, n_came, log_flow, log_level, came, act, arr_mark, mark, rate, fe_lo,
                                   fe_hi, e_link, e_coef, lo, resid, uf, seed, tick, use_cc, refill, keep_flow,
                                   keep_level)  # fmt: skip
        _inc_backoff(use_cc, n_keep, rstate)
    # (many distinct levels: the parallel rule would freeze few flows per round, the heap fill is cheaper)
    dense = n_re > par_share * n_act and n_lev <= par_levels
    if (
        dense and n_re > 1
    ):  # many flows: walk them in flow order (their entries in memory order), not by level
        work += _inc_flow_order(refill, n_re)
    for k in range(n_re):
        f = refill[k]
        old_rate[k] = 0.0 if arr_mark[f] == mark else rate[f]  # arrivals: from 0
    work += _inc_fill(dense, refill, n_re, fe_lo, fe_hi, e_link, e_coef, dcap, resid, rate, par_rounds, lo, out_flow,
                      out_level, unit_weight, weighted, fs, rstate)  # fmt: skip
    # the freeze log from k0 on: the kept flows and the new fill's, merged by level
    merge_by_level(keep_flow, keep_level, n_keep, out_flow, out_level, n_re, log_flow, log_level, k0)
    rstate[0] = k0 + n_keep + n_re
    work += n_keep + 2 * n_re  # the log rewritten, the rates written
    work += _inc_loads(full, rep_on, n_act, act_list, n_re, refill, n_gone, gone, rate, unit_weight, fe_lo, fe_hi,
                       e_link, capacity, lo, resid, load, rp, rstate[10] == 1, lev)  # fmt: skip
    rstate[1] = 0 if full else rstate[1] + 1
    if not full and e_above > 0:
        cost[1] += SWITCH_MEAN_WEIGHT * (work / e_above - cost[1])
    rstate[9] = work
    return n_re, full


@njit(cache=True, nogil=True, _nrt=False)
def join_flow(f, n_act, n_came, now, n_fills, act, apos, act_list, t_upd, arr_mark, came):  # pragma: no cover
    """Flow ``f`` joins the lazy kernel's active set at ``now`` (s since the interval start): the
    ``n_act``-th active flow (``act``, ``apos``, ``act_list``) and the ``n_came``-th arrival since the last
    solve (``came``), marked with the solve count ``n_fills``; its rate keeps its last solved value (the
    log's). The caller counts both up."""
    act[f] = True
    apos[f] = n_act
    act_list[n_act] = f
    t_upd[f] = now
    arr_mark[f] = n_fills
    came[n_came] = f


@njit(cache=True, nogil=True, _nrt=False)
def lazy_stats(stats, events, cnt, rstate):  # pragma: no cover - compiled
    """The lazy kernel's counters into ``stats`` (its columns, :func:`run_interval_lazy`): the events
    (``stats[0]`` set), then added: from ``cnt`` (:func:`lazy_count_solve`, :func:`lazy_write_rates`) the
    fills, the incremental solves, the flows they re-filled and those active at them, the full fills, the
    rates written and moved, the work; the parallel-rule solves (``rstate[5]``) and the departure repair's
    three counts (``rstate[11:14]``)."""
    stats[0] = events
    stats[1] += cnt[0]
    stats[4] += cnt[1]
    stats[5] += cnt[2]
    stats[6] += cnt[3]
    stats[7] += cnt[6]
    stats[8] += cnt[4]
    stats[9] += cnt[5]
    stats[10] += rstate[5]
    stats[14] += cnt[7]
    for k in range(3):  # the departure repair's counts
        stats[15 + k] += rstate[11 + k]


class LazyFlows(NamedTuple):
    """:func:`run_interval_lazy`'s scratch per flow (:func:`lazy_flow_scratch`), indexed by global flow id:
    only the lazy instances' flows are initialised and touched."""

    act: np.ndarray  # (flows,) bool in the active set
    rate: np.ndarray  # (flows,) float64 bytes/s since t_upd
    moved: np.ndarray  # (flows,) float64 bytes moved in the interval up to t_upd
    t_upd: np.ndarray  # (flows,) float64 s since the interval start that rem and moved hold for
    t_end: np.ndarray  # (flows,) float64 s, completion time at the current rate (inf: none)
    hpos: np.ndarray  # (flows,) int64 slot in the completion heap, -1: not in it
    zero: np.ndarray  # (flows,) bool an active job flow at rate <= 0 (stalled)
    arr_mark: np.ndarray  # (flows,) int64 the solve count when it last joined the set
    apos: np.ndarray  # (flows,) int64 slot in the active list
    dcap: np.ndarray  # (flows,) float64 demand capped by the flow's exclusive links, bytes/s
    weight: np.ndarray  # (flows,) float64 share weights (levels rate / weight; all 1 when none are given)


class LazyRows(NamedTuple):
    """:func:`run_interval_lazy`'s scratch per instance: one row per flow of the largest lazy instance of the
    range (:func:`lazy_flow_scratch`)."""

    act_list: np.ndarray  # int64 the active flows, unordered
    hk: np.ndarray  # float64 completion heap: keys (s)
    hf: np.ndarray  # int64 and flows
    dfs: np.ndarray  # int64 heap slots to visit (the least completion time)
    log_flow: np.ndarray  # int64 flows of the last fill, in freeze order
    log_level: np.ndarray  # float64 their levels (nondecreasing)
    out_flow: np.ndarray  # int64
    out_level: np.ndarray  # float64
    refill: np.ndarray  # int64 the flows an incremental solve fills again
    old_rate: np.ndarray  # float64 their rates before it
    gone: np.ndarray  # int64 flows that left the active set since the last solve
    came: np.ndarray  # int64 flows that joined it
    keep_flow: np.ndarray  # int64 flows at levels >= the restart level an event leaves alone
    keep_level: np.ndarray  # float64 their levels


class LazyLinks(NamedTuple):
    """:func:`resolve_incremental`'s scratch per link (:func:`lazy_flow_scratch`)."""

    uf: np.ndarray  # (links,) int64 union-find parents (components of a re-fill)
    seed: np.ndarray  # (links,) int64 tick of the solve whose changed flows' root it is
    resid: np.ndarray  # (links,) float64 residual capacity of a fill
    rstamp: np.ndarray  # (links,) int64
    load: np.ndarray  # (links,) float64 bytes/s the active flows put on each link
    csum: np.ndarray  # (links,) float64 sum of the coefficients of the active flows on each link
    link_gen: np.ndarray  # (links,) int64 load and csum are valid where this is gen


@njit(cache=True, nogil=True, **_COMPILED_ONLY)
def lazy_sizes(b_lo, b_hi, inst_flow, inst_seg, ent_hi, inc_min, phase_mode, quantum):  # pragma: no cover
    """The most flows and the most shared entries of one lazy instance (:func:`lazy_instance`) of
    ``b_lo:b_hi`` (0, 0: none)."""
    f_max = 0
    e_max = 0
    for b in range(b_lo, b_hi):
        if lazy_instance(inst_flow, b, inc_min, phase_mode, quantum):
            if inst_flow[b + 1] - inst_flow[b] > f_max:
                f_max = inst_flow[b + 1] - inst_flow[b]
            if ent_hi[b] - inst_seg[b] > e_max:
                e_max = ent_hi[b] - inst_seg[b]
    return f_max, e_max


@njit(cache=True, nogil=True, **_COMPILED_ONLY)
def lazy_flow_scratch(n_flows, n_phases, n_links, f_max, flow_w):  # pragma: no cover - compiled
    """:func:`run_interval_lazy`'s fresh scratch: :class:`LazyFlows`, :class:`LazyRows` (``f_max`` rows),
    :class:`LazyLinks`, the phases' counts of flows with bytes left (``pend``) and whether their flows
    joined the active set (``joined``), and :func:`resolve_incremental`'s state (``rstate``: log length,
    solves since a full fill, stamps, parallel-rule solves, back-off, active entries, the work of the last
    solve, the departure repair's counts)."""
    i64 = np.int64
    weight = flow_w if flow_w.shape[0] > 0 else np.ones(n_flows)
    fl = LazyFlows(
        np.empty(n_flows, dtype=np.bool_), np.empty(n_flows), np.empty(n_flows), np.empty(n_flows), np.empty(n_flows),
        np.empty(n_flows, dtype=i64), np.empty(n_flows, dtype=np.bool_), np.empty(n_flows, dtype=i64),
        np.empty(n_flows, dtype=i64), np.empty(n_flows), weight,
    )  # fmt: skip
    rw = LazyRows(
        np.empty(f_max, dtype=i64), np.empty(f_max), np.empty(f_max, dtype=i64), np.empty(f_max, dtype=i64),
        np.empty(f_max, dtype=i64), np.empty(f_max), np.empty(f_max, dtype=i64), np.empty(f_max),
        np.empty(f_max, dtype=i64), np.empty(f_max), np.empty(f_max, dtype=i64), np.empty(f_max, dtype=i64),
        np.empty(f_max, dtype=i64), np.empty(f_max),
    )  # fmt: skip
    lk = LazyLinks(
        np.empty(n_links, dtype=i64), np.full(n_links, -1, dtype=i64), np.empty(n_links),
        np.full(n_links, -1, dtype=i64), np.zeros(n_links), np.zeros(n_links), np.full(n_links, -1, dtype=i64),
    )  # fmt: skip
    pend = np.empty(n_phases, dtype=i64)
    joined = np.empty(n_phases, dtype=np.bool_)
    return fl, rw, lk, pend, joined, np.zeros(14, dtype=i64), np.zeros(8, dtype=i64)


@njit(cache=True, nogil=True, **_COMPILED_ONLY)
def lazy_reuse_scratch(fs, rp, n_links, n_flows, f_max, e_max):  # pragma: no cover - compiled
    """The caller's fill and repair scratch (:func:`lazy_scratch`, reused from call to call), reset as
    :func:`fill_scratch` / :func:`repair_scratch` initialise them; a fresh one where it is too small."""
    if (
        fs.link_stamp.shape[0] < n_links or fs.flow_off.shape[0] < f_max + 1 or fs.slot_flows.shape[0] < e_max
        or fs.heap_key.shape[0] < n_links + f_max + e_max + 1
    ):  # fmt: skip
        fs = fill_scratch(n_links, f_max, e_max)
    else:  # (the stamps restart with this call's ticks)
        fs.link_stamp[:n_links] = -1
    if rp.sat.shape[0] < n_links or rp.fmark.shape[0] < n_flows or rp.adj_flow.shape[0] < e_max:
        rp = repair_scratch(n_links, n_flows, e_max)
    else:
        rp.sat[:n_links] = -1.0
        rp.top_n[:n_links] = -1
        rp.lstamp[:n_links] = -1
        rp.fmark[:n_flows] = -1
    return fs, rp


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def lazy_instance_start(
    b, f0, f1, eps_b, fl, pend, joined, flow_demand, flow_bg, flow_scale, rem, ex_lo, inst_seg, e_flow, e_link,
    e_coef, capacity, inst_phase, phase_flow_lo, phase_flow_n, rstate,
):  # fmt: skip  # pragma: no cover - compiled
    """Lazy instance ``b`` (flows ``f0:f1``) as :func:`run_interval_lazy` takes it over: its flows reset
    (:func:`reset_instance_flows`; no rate, not in the heap, none stalled) and the completions due at the
    start made (:func:`zero_completed`); its phases count their flows with bytes left (``pend``), none
    joined; :func:`resolve_incremental`'s state (``rstate``) without a valid log (the next fill is a full
    one)."""
    reset_instance_flows(b, f0, f1, fl.act, fl.moved, fl.dcap, flow_demand, ex_lo, inst_seg, e_flow, e_link, e_coef,
                         capacity)  # fmt: skip
    for f in range(f0, f1):
        fl.rate[f] = 0.0
        fl.arr_mark[f] = -1
        fl.hpos[f] = -1
        fl.zero[f] = False
    zero_completed(f0, f1, eps_b, flow_bg, flow_scale, rem)
    for p in range(inst_phase[b], inst_phase[b + 1]):
        joined[p] = False
        c = 0
        for f in range(phase_flow_lo[p], phase_flow_lo[p] + phase_flow_n[p]):
            if rem[f] > 0:
                c += 1
        pend[p] = c
    rstate[0] = -1  # flows in the freeze log (-1: no valid log, the next fill is a full one)
    rstate[1] = 0
    rstate[6] = 0  # the component rule's back-off
    rstate[7] = 0
    rstate[10] = 0  # the link-major index of the instance's entries (built by the first repair)


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def lazy_arrivals(
    u0, u1, f0, f1, first, now, n_fills, n_act, n_came, eps_t, units, clock, joined, bg_on, flow_unit, rem, fl,
    act_list, came,
):  # fmt: skip  # pragma: no cover - compiled
    """The flows that join :func:`run_interval_lazy`'s active set at this event (:func:`join_flow`): the
    flows with bytes left of the phases of units ``u0:u1`` whose latency was paid since the last event, and
    the background flows switched on (at the ``first`` event of the instance here). ``(active flows,
    arrivals since the last solve)``."""
    act, apos, t_upd, arr_mark = fl.act, fl.apos, fl.t_upd, fl.arr_mark
    for u in range(u0, u1):
        if not units.unit_alive[u]:
            continue
        if units.unit_bg[u]:
            if first and bg_on[u]:
                for f in range(f0, f1):  # background flows are few: found by their unit
                    if flow_unit[f] == u:
                        join_flow(f, n_act, n_came, now, n_fills, act, apos, act_list, t_upd, arr_mark, came)
                        n_act += 1
                        n_came += 1
            continue
        pc = clock.phase_cur[u]
        nph = units.unit_nphases[u]
        if pc < 0 or pc >= nph:
            continue
        for p in range(units.phase_off[u], units.phase_off[u] + nph):
            if joined[p] or clock.phase_state[p] != RUNNING or clock.phase_lat_left[p] > eps_t:
                continue
            joined[p] = True
            for f in range(units.phase_flow_lo[p], units.phase_flow_lo[p] + units.phase_flow_n[p]):
                if rem[f] > 0 and not act[f]:
                    join_flow(f, n_act, n_came, now, n_fills, act, apos, act_list, t_upd, arr_mark, came)
                    n_act += 1
                    n_came += 1
    return n_act, n_came


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def lazy_write_rates(
    n_re, n_act, par_share, now, hn, n_zero, eps_b, fl, rw, flow_bg, flow_scale, rem, cnt,
):  # fmt: skip  # pragma: no cover - compiled
    """After a solve of :func:`run_interval_lazy`, the ``n_re`` flows it re-filled (``rw.refill``, their old
    rates ``rw.old_rate``) whose rate changed: progress up to ``now`` at the old rate (:func:`advance_flow`),
    their stalled marks (``n_zero`` counted), and their completion keys (the time their bytes left reach
    the tolerance ``eps_b x flow_scale``) in the heap (``hn`` flows): sifted per flow (O(log heap) each), or,
    when many flows were re-filled (more than ``par_share x n_act``, as many as the parallel rule takes),
    set in place and the heap rebuilt once (:func:`rebuild_heap`, O(heap); its flows counted as work,
    ``cnt[7]``). Counts the rates written and moved by more than 1e-12
    relative (``cnt[4]``, ``cnt[5]``). ``(hn, n_zero)``."""
    inf = np.inf
    rate, t_upd, zero, t_end, hpos, moved = fl.rate, fl.t_upd, fl.zero, fl.t_end, fl.hpos, fl.moved
    hk, hf, refill, old_rate = rw.hk, rw.hf, rw.refill, rw.old_rate
    dense = n_re > par_share * n_act
    for k in range(n_re):
        f = refill[k]
        r = rate[f]
        r0 = old_rate[k]
        if r == r0 and t_upd[f] < now:  # unchanged (an arrival's old rate is 0 at t_upd = now)
            continue
        cnt[4] += 1
        if abs(r - r0) > 1e-12 * max(abs(r), abs(r0)):
            cnt[5] += 1
        dtu = now - t_upd[f]
        if dtu > 0.0:
            advance_flow(f, r0 * dtu, flow_bg, rem, moved)
        t_upd[f] = now
        if flow_bg[f]:
            continue
        z = not r > 0
        if z != zero[f]:
            zero[f] = z
            n_zero += 1 if z else -1
        if r > 0:
            t_end[f] = now + rem[f] / r
            key = now + (rem[f] - eps_b * flow_scale[f]) / r
        else:
            t_end[f] = inf
            key = inf
        if not dense:
            hn = _heap_set(hk, hf, hpos, hn, f, key)
        elif hpos[f] >= 0:
            hk[hpos[f]] = key  # (inf: dropped by rebuild_heap)
        elif key < inf:
            hk[hn] = key
            hf[hn] = f
            hpos[f] = hn
            hn += 1
    if dense:
        cnt[7] += hn
        hn = rebuild_heap(hk, hf, hpos, hn)
    return hn, n_zero


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def rebuild_heap(hk, hf, hpos, hn):  # pragma: no cover - compiled
    """The completion heap's ``hn`` slots with their keys set in place (:func:`lazy_write_rates`):
    the flows at rate 0 (key inf) dropped, then heapified bottom-up. The flows left."""
    hm = 0
    for i in range(hn):
        f = hf[i]
        if hk[i] < np.inf:
            hk[hm] = hk[i]
            hf[hm] = f
            hpos[f] = hm
            hm += 1
        else:
            hpos[f] = -1
    for i in range(hm // 2 - 1, -1, -1):
        _sift_down(hk, hf, hpos, hm, i)
    return hm


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def next_completion(hn, hk, hf, dfs, t_end, now, dt):  # pragma: no cover - compiled
    """The least of ``dt`` and the time to the least completion time of the heap's flows, and that flow (-1:
    ``dt`` came first). The heap is keyed by the time a flow's bytes left reach the tolerance, which
    precedes its completion time by that tolerance over its rate: the least completion time is among the
    keys up to the first flow's completion time."""
    f_min = -1
    if hn > 0:
        thr = t_end[hf[0]]
        best = np.inf
        sp = 1
        dfs[0] = 0
        while sp > 0:
            sp -= 1
            i = dfs[sp]
            f = hf[i]
            if t_end[f] < best:
                best = t_end[f]
                f_min = f
            c = 2 * i + 1
            if c < hn and hk[c] <= thr:
                dfs[sp] = c
                sp += 1
            if c + 1 < hn and hk[c + 1] <= thr:
                dfs[sp] = c + 1
                sp += 1
        if best - now < dt:
            dt = best - now
        else:
            f_min = -1
    return dt, f_min


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def complete_flows(
    hn, f_min, now, n_act, n_zero, n_gone, fl, rw, rem, pend, phase_off, flow_unit, flow_phase,
):  # fmt: skip  # pragma: no cover - compiled
    """Complete the flows whose bytes left reached the tolerance by ``now`` (the heap's keys), and ``f_min``
    (the flow that set the step, in any case): their bytes moved, none left, out of the active set (the last
    active flow takes the slot), their phase's count ``pend`` down, each in ``rw.gone``. ``(hn, n_act,
    n_zero, n_gone)``."""
    hk, hf, act_list, gone = rw.hk, rw.hf, rw.act_list, rw.gone
    rate, t_upd, moved, act, apos, zero, hpos = fl.rate, fl.t_upd, fl.moved, fl.act, fl.apos, fl.zero, fl.hpos
    while hn > 0 and (hk[0] <= now or f_min >= 0):
        f = hf[0] if hk[0] <= now else f_min
        if f == f_min:
            f_min = -1
        hn = _heap_set(hk, hf, hpos, hn, f, np.inf)
        x = rate[f] * (now - t_upd[f])
        if rem[f] < x:
            x = rem[f]
        moved[f] += x
        rem[f] = 0.0
        t_upd[f] = now
        act[f] = False
        n_act -= 1
        g = act_list[n_act]  # the last active flow takes its slot
        act_list[apos[f]] = g
        apos[g] = apos[f]
        pend[phase_off[flow_unit[f]] + flow_phase[f]] -= 1
        if zero[f]:
            zero[f] = False
            n_zero -= 1
        gone[n_gone] = f
        n_gone += 1
    return hn, n_act, n_zero, n_gone


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def lazy_count_solve(cnt, n_re, full, n_act, rstate):  # pragma: no cover - compiled
    """A solve of :func:`run_interval_lazy` in its counters ``cnt`` (:func:`lazy_stats`' columns): a fill,
    full or incremental (with the flows it re-filled and those active), and its work (``rstate[9]``)."""
    cnt[7] += rstate[9]
    if full:
        cnt[6] += 1
    else:
        cnt[1] += 1
        cnt[2] += n_re
        cnt[3] += n_act
    cnt[0] += 1


@njit(cache=True, nogil=True, _nrt=False, forceinline=True, **_COMPILED_ONLY)
def lazy_instance_end(
    b, n_act, now, back, ev, t_left, fl, act_list, flow_bg, rem, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef,
    link_bytes, sw_mode, sw_ev, sw_t, sw_cost,
):  # fmt: skip  # pragma: no cover - compiled
    """Lazy instance ``b`` leaves :func:`run_interval_lazy`: the progress of its flows still active up to
    ``now`` (:func:`advance_flow`), the link bytes of its part (:func:`add_link_bytes`), and where it goes:
    done (``sw_mode[b] = 3``) or, ``back``, to :func:`run_interval_numba`, which takes this event again (its
    transitions are done: they re-settle at once; ``sw_mode[b] = 1``, ``ev - 1`` events run, ``t_left``
    s left). The events run."""
    rate, t_upd, moved = fl.rate, fl.t_upd, fl.moved
    for k in range(n_act):
        f = act_list[k]
        advance_flow(f, rate[f] * (now - t_upd[f]), flow_bg, rem, moved)
    add_link_bytes(b, inst_seg, ent_hi, ex_lo, e_flow, e_link, e_coef, moved, link_bytes)
    if back:
        ev -= 1
        sw_mode[b], sw_ev[b], sw_t[b], sw_cost[b, 3] = 1, ev, t_left, 1.0
    else:
        sw_mode[b] = 3
    return ev


@njit(cache=True, nogil=True)
def run_interval_lazy(
    b_lo, b_hi, duration, phase_mode, quantum, inc_min, max_events, n_links, max_rounds, eps_t, eps_b,
    inst_seg, ent_hi, ex_lo, fe_lo, fe_hi, e_flow, e_link, e_coef,
    inst_unit, inst_flow,
    unit_alive, unit_bg, unit_nphases, unit_compute, unit_overlap, phase_off, phase_latency,
    phase_flow_lo, phase_flow_n, inst_phase, phase_npred, phase_succ_off, phase_succ,
    flow_unit, flow_phase, flow_bg, flow_bytes, flow_scale, flow_demand, capacity,
    rem, phase_cur, t_start_left, t_compute_left, t_comm_start_left, phase_state, phase_wait, phase_lat_left,
    iter_start, comm_start, comm_end, iterations_total, last_step_s, last_comm_s, bg_on, time_s,
    iters, step_sum, comm_sum, compute_t, active_t, link_bytes, stalled, stats, go,
    sw_on, sw_ratio, sw_handoff, sw_mode, sw_ev, sw_t, sw_cost, par_share, par_rounds, fs, rp, flow_w,
    rep_on=REPAIR_DEPARTURES,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`run_interval_numba` for the instances of ``b_lo:b_hi`` that :func:`lazy_instance` selects (the
    same arguments, then :func:`resolve_incremental`'s ``par_share`` and ``par_rounds``, the scratch of its
    fills and of the departure repair, ``fs`` / ``rp`` (:func:`lazy_scratch`: allocated once by the caller
    and reused from call to call, so that an interval does not fault in some 130 MB of fresh pages on the
    1,024-GPU AllToAll; a scratch smaller than the range needs is replaced by a fresh one), ``flow_w``, each
    flow's share weight (:func:`run_interval_numba`'s; empty: every weight 1), and ``rep_on``, the
    departure repair, default :data:`REPAIR_DEPARTURES`; the others are left alone), from where :func:`run_interval_numba` handed them over (``sw_mode[b] = 2``; ``sw_ev[b]`` events
    run, ``sw_t[b]`` s of the interval left; that kernel zeroed the outputs and added the link bytes of its
    part). With the switch on (``sw_on``, :data:`LAZY_SWITCH`), an instance whose solve
    :func:`resolve_incremental` declines (the full path predicted cheaper by the switch's cost model) is
    handed back at that event
    (``sw_mode[b] = 1``, progress and link bytes brought up to date) and the engine runs
    :func:`run_interval_numba` on the range again. In exact event mode with work per event proportional to
    the flows whose rate changes, not to the flows of the instance (docs/engine-alltoall.md).

    Allocation: progressive filling (:func:`fill_levels`), incremental from event to event. A fill keeps its
    freeze order (flows by level); an event that removes flows (lowest old level ``L_d``) or adds flows (each
    at least ``min(demand, min over its links of capacity / sum of coefficients)``, lowest ``L_a``) re-fills
    only the flows at levels ``>= L = min(L_d, L_a) (1 - RESTART_MARGIN)`` on the capacities the lower ones
    leave: below ``L`` the progressive filling of the new flow set is the old one step for step, so those
    rates are unchanged (exact, not a heuristic). Above ``L`` it re-fills only the connected components
    (flows joined by shared links) of the departed and arrived flows: a max-min problem decomposes over
    them. An event at which flows only left is first repaired (:func:`repair_departures`): only the flows
    that lost every bottleneck (a saturated link where no flow is above them) are re-filled. Every :data:`FULL_FILL_EVERY` incremental solves a full fill refreshes the link loads.

    Progress: a flow's bytes left (``rem``) and bytes moved are brought up to date only when its rate
    changes, when it completes and at the end of the interval (``t_upd``: the time they hold for); its
    completion time ``t_end = t_upd + rem / rate`` sits in an indexed min-heap keyed by the time its bytes
    left reach the completion tolerance ``eps_b x flow_scale`` (the flows the reference completes at an
    event are those with that key <= the event time). Phases count their flows with bytes left (a phase
    ends when the count is 0 and its latency is paid); a phase's flows join the active set when its latency
    is paid. So an event costs the flows it completes, starts or re-fills, plus the units and phases of the
    instance, not a pass over every flow. The event rules are :func:`run_interval_numba`'s (module
    docstring); rates and times agree with it and with the numpy backend to round-off (1e-9 relative).

    ``stats`` (accumulated into what :func:`run_interval_numba` wrote): events (max), fills, -, -,
    incremental solves, flows they re-filled, flows active at them, full fills, rates written (bitwise
    changes, arrivals included), rates that moved by more than 1e-12 relative, solves by the parallel rule,
    -, -, -, the work counted (:func:`resolve_incremental`'s, plus the active flows of a completion heap
    rebuilt), the departure repairs made and declined and the active flows they read.

    An event: the units settle (:func:`begin_event`, the frame both kernels share, with the phases' counts
    ``pend`` in place of a pass over their flows), the arrivals (:func:`lazy_arrivals`), a solve when the
    set changed (:func:`resolve_incremental`, then :func:`lazy_write_rates`), the least completion time
    (:func:`next_completion`), the step (:func:`end_event`) and the completions (:func:`complete_flows`);
    the steps are compiled without reference counting, as :func:`run_interval_numba`'s.
    """
    announce(go)
    if stats[2] != ERR_NONE:
        return
    f_max, e_max = lazy_sizes(b_lo, b_hi, inst_flow, inst_seg, ent_hi, inc_min, phase_mode, quantum)
    if f_max == 0:
        return
    fl, rw, lk, pend, joined, rstate, cnt = lazy_flow_scratch(flow_unit.shape[0], phase_state.shape[0], n_links, f_max, flow_w)  # fmt: skip
    fs, rp = lazy_reuse_scratch(fs, rp, n_links, flow_unit.shape[0], f_max, e_max)
    units = UnitTable(unit_alive, unit_bg, unit_nphases, phase_off, phase_flow_lo, phase_flow_n)
    clock = UnitClock(phase_cur, t_start_left, t_compute_left, t_comm_start_left, phase_state, phase_wait,
                      phase_lat_left, iter_start, comm_start, comm_end)  # fmt: skip
    job, graph = JobParams(unit_compute, unit_overlap, flow_bytes), PhaseGraph(phase_latency, phase_npred, phase_succ_off, phase_succ)  # fmt: skip
    tallies = IterationTallies(iterations_total, last_step_s, last_comm_s, iters, step_sum, comm_sum)
    act, arr_mark, rate, dcap, weight, hk, hf = fl.act, fl.arr_mark, fl.rate, fl.dcap, fl.weight, rw.hk, rw.hf  # fmt: skip
    act_list, gone, came, old_rate, refill, keep_flow, keep_level = rw.act_list, rw.gone, rw.came, rw.old_rate, rw.refill, rw.keep_flow, rw.keep_level  # fmt: skip
    log_flow, log_level, out_flow, out_level, dfs, t_end = rw.log_flow, rw.log_level, rw.out_flow, rw.out_level, rw.dfs, fl.t_end  # fmt: skip
    uf, seed, resid, rstamp, load, csum, link_gen = lk.uf, lk.seed, lk.resid, lk.rstamp, lk.load, lk.csum, lk.link_gen  # fmt: skip
    events = stats[0]
    for b in range(b_lo, b_hi):
        if not lazy_instance(inst_flow, b, inc_min, phase_mode, quantum) or sw_mode[b] != 2:
            continue  # (not handed over by run_interval_numba, which zeroed the outputs and added its link bytes)
        u0, u1, f0, f1, lo, t_left = inst_unit[b], inst_unit[b + 1], inst_flow[b], inst_flow[b + 1], b * n_links, sw_t[b]  # fmt: skip
        lazy_instance_start(b, f0, f1, eps_b, fl, pend, joined, flow_demand, flow_bg, flow_scale, rem, ex_lo, inst_seg,
                            e_flow, e_link, e_coef, capacity, inst_phase, phase_flow_lo, phase_flow_n, rstate)  # fmt: skip
        now = 0.0  # s since the interval start (time_s[b] is the clock, advanced by the same steps)
        hn = n_act = n_zero = n_gone = n_came = 0  # heap, active, at rate 0, left and came since a solve
        solved = back = False
        ev = ev0 = sw_ev[b]  # events run by run_interval_numba before the hand-off
        sw_cost[b, 3] = 0.0  # on this path
        while True:
            code, ev = begin_event(u0, u1, time_s[b], t_left, ev, max_events, max_rounds, eps_t, True, pend, joined,
                                   units, clock, rem, job, graph, tallies, stats)  # fmt: skip
            if code == FRAME_END:
                break
            if code != FRAME_RUN:
                if code == FRAME_CAP:  # the counters so far (a capped interval is measured up to here)
                    lazy_stats(stats, ev, cnt, rstate)
                return
            n_act, n_came = lazy_arrivals(u0, u1, f0, f1, ev == ev0 + 1, now, cnt[0], n_act, n_came, eps_t, units,
                                          clock, joined, bg_on, flow_unit, rem, fl, act_list, came)  # fmt: skip
            if not solved or n_came > 0 or n_gone > 0:
                n_re, full = resolve_incremental(
                    act, arr_mark, cnt[0], act_list, n_act, gone, n_gone, came, n_came, fe_lo, fe_hi, e_link,
                    e_coef, capacity, lo, dcap, weight, rate, old_rate, refill, keep_flow, keep_level,
                    log_flow, log_level, out_flow, out_level, fs, uf, seed, resid, rstamp, load, csum,
                    link_gen, rstate, par_share, par_rounds, sw_on, sw_ratio, sw_handoff, f1 - f0, sw_cost[b], rp,
                    f0, f1, rep_on, REPAIR_ONLY_TOP, PARALLEL_MAX_LEVELS, flow_w.shape[0] > 0,
                )  # fmt: skip
                if n_re < 0:  # the full path predicted cheaper: back to run_interval_numba at this event
                    back = True
                    break
                lazy_count_solve(cnt, n_re, full, n_act, rstate)
                hn, n_zero = lazy_write_rates(n_re, n_act, par_share, now, hn, n_zero, eps_b, fl, rw, flow_bg,
                                              flow_scale, rem, cnt)  # fmt: skip
                solved, n_came, n_gone = True, 0, 0
            stalled[b] = max(stalled[b], n_zero)
            # the step: the least completion time, a unit's timer (then no flow completes) or the interval's end
            dt, f_min = next_completion(hn, hk, hf, dfs, t_end, now, t_left)
            dt, unit_first = end_event(b, u0, u1, dt, eps_t, units, clock, active_t, compute_t, time_s)
            f_min, now, t_left = -1 if unit_first else f_min, now + dt, t_left - dt
            hn, n_act, n_zero, n_gone = complete_flows(hn, f_min, now, n_act, n_zero, n_gone, fl, rw, rem, pend, phase_off,
                                                       flow_unit, flow_phase)  # fmt: skip
        ev = lazy_instance_end(b, n_act, now, back, ev, t_left, fl, act_list, flow_bg, rem, inst_seg, ent_hi, ex_lo,
                               e_flow, e_link, e_coef, link_bytes, sw_mode, sw_ev, sw_t, sw_cost)  # fmt: skip
        events = max(events, ev)
    lazy_stats(stats, events, cnt, rstate)
