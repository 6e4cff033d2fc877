"""The compiled (numba) backend: the whole decision interval of every instance in one compiled call.

Modules, one concern each: :mod:`.backend` (the Python side, :class:`~.backend.NumbaBackend`),
:mod:`.interval` (the full-path interval kernel), :mod:`.lazy` (the lazy exact kernel), :mod:`.incremental`
and :mod:`.repair` (its solves), :mod:`.fill` and :mod:`.parallel` (the allocators), :mod:`.csr` (the
allocator's read of a CSR incidence), :mod:`.heaps`,
:mod:`.steps` (the event steps both kernels share), :mod:`.merge` (the merge of a split), :mod:`.figures` and
:mod:`.sums` (the interval's figures), :mod:`.env_passes` (the env side of a step), :mod:`.records` (the
compiled records), :mod:`.threads` and :mod:`.crew` (the kernel threads), :mod:`.settings` and :mod:`.jit`.
The package imports none of them (the numpy backend runs without numba): import the module you need. The move
script of docs/development.md (issue-31zi) made it from ``ainet_gym/sim/kernels.py`` and others.

This is the ``"numba"`` backend of :class:`ainet_gym.sim.engine.BatchSim` (its Python side:
:mod:`.backend`); the numpy code in :mod:`ainet_gym.sim.backends.numpy_ref` and
:func:`ainet_gym.sim.allocator.solve_coo` is the reference backend, and the two
agree to round-off (``tests/sim/test_backends.py`` checks every observation, reward and info value to 1e-9
relative). The kernel walks each instance of the batch on its own (instances are independent): Python is
entered once per interval, and an instance's allocation is re-solved only when its set of active flows
changed since its last solve (capacities and the split are fixed within an interval).

Threads: the instances of a batch are cut into contiguous ranges (:func:`batch_ranges`, about equal
work each) that the calling thread and :func:`kernel_threads` - 1 worker threads take in turn
(:func:`run_ranges`, :mod:`ainet_gym.sim.backends.numba.crew`: between steps the workers spin briefly for the next
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
