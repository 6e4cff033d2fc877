"""The compiled backend's error codes, statistics columns and tuning constants (read when a kernel is
compiled, or by :class:`~ainet_gym.sim.engine.BatchSim` when a simulation is built)."""

from __future__ import annotations

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

#: the departure repair with per-link level heaps (issue-28zi; :func:`resolve_incremental`'s ``rep_heap``):
#: every solve keeps, once the link index is built, a max-heap of the levels of each link's active flows; the
#: repair's "largest level after a fill" and "check after a fill" read only the heap nodes above a level
#: instead of every flow on a link, the repair never declines on :data:`REPAIR_MAX_SHARE`, and its read
#: counter counts a flow once per solve and not when it is re-filled; only saturated links keep a heap (one
#: is built again, its flows read, when a repair reads it). Exact either way. Off by default: on 8 AllToAll x
#: 128 GPUs it brings the flows touched per event from 0.1610 to 0.0880 on the bench's window, but interval
#: 5's first 3,000 events took 1.65-1.9x main's CPU (docs/engine-alltoall.md, "issue-28zi")
REPAIR_LEVEL_HEAPS = False

#: whether a solve of the lazy kernel that fills by the heap walks the flows it re-fills in flow order (their
#: entries in memory order, as a dense solve does) rather than in the freeze log's order (by level: flow ids at
#: random), for the fill, the loads and the per-flow progress (issue-28zj; :func:`resolve_incremental`'s
#: ``flow_order``). Exact either way; the rates differ from the level-ordered walk's in the last bits (the
#: fill's sums in another order). On by default: on 8 AllToAll x 128 GPUs interval 5's first 3,000 events took
#: 0.80-0.82x main's CPU in each of 3 interleaved pairs (docs/engine-alltoall.md, "issue-28zj")
REFILL_FLOW_ORDER = True

#: whether a solve of the lazy kernel that fills by the heap fills over groups (issue-28zm;
#: :func:`resolve_incremental`'s ``grp_fill`` 1, :mod:`~ainet_gym.sim.backends.numba.groupfill`): the flows it
#: re-fills that held one level at the last solve (bitwise) rise as one unit with one (group, link) pair per
#: link they cross, a link that fills freezes a group whole when all its unfrozen members cross it (one update
#: per pair) and else splits it (the members on the link frozen one by one). Exact either way (the same
#: progressive fill; sums in another order). Off by default: on 8 AllToAll x 128 GPUs the whole of interval
#: 5 took 1.27-1.59x main's CPU in each of 5 interleaved pairs (its pairs are 256 M against the fills' 499 M
#: entries, and it builds them from the entries at every fill; docs/engine-alltoall.md, "issue-28zm"). With this
#: and :data:`GROUP_KEEP` off the backend passes ``grp_fill = None`` and the group fills are not compiled into
#: the lazy kernel (issue-31ze2); turning either on compiles a second signature of it.
GROUP_FILL = False

#: whether the lazy kernel's restart heap fills run over groups KEPT from solve to solve (issue-28zn;
#: :func:`run_interval_lazy`'s ``grp_fill`` 2, :func:`~ainet_gym.sim.backends.numba.groupfill.group_fill_kept`):
#: :data:`GROUP_FILL`'s fill whose groups, (group, link) pairs and pair member lists persist in the fill
#: scratch, so a fill rebuilds from the entries only the flows whose group is not intact. Exact either way
#: (the same progressive fill; sums in another order). Takes precedence over :data:`GROUP_FILL`. Off by
#: default: on 8 AllToAll x 128 GPUs the whole of interval 5 took 1.11-1.33x main's CPU in each of 4
#: interleaved pairs (84% of the fills' flows came as intact groups, but their 224 M pairs are only 1.86x fewer
#: than their entries, and a kept pair costs more than an entry; docs/engine-alltoall.md, "issue-28zn")
GROUP_KEEP = False

#: whether the lazy kernel keeps its flows' progress on group clocks (issue-28zl; :func:`run_interval_lazy`'s
#: ``grp_on``, :mod:`~ainet_gym.sim.backends.numba.progress`): flows at the same rate share a clock, so a
#: solve that changes the rate of every flow of a group moves one clock and one key in a heap of groups, not
#: each flow's bytes left and completion key; only the flows that leave their group are brought up to date.
#: The rates are the same; bytes left and completion times equal the per-flow path's to round-off (exact
#: either way). On by default: on 8 AllToAll x 128 GPUs the whole of interval 5 took 0.925-0.943x main's CPU in
#: each of 4 interleaved pairs, parity 1e-9 (docs/engine-alltoall.md, "issue-28zl")
PROGRESS_GROUPS = True

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
