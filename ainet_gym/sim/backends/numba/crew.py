"""The worker threads that take instance ranges of a batch beside the calling thread (:func:`run_ranges`).

A step of the compiled backend hands its instance ranges to the threads once (decode, merge, interval,
figures, observation and info run per range on one thread). On a 2-core machine a B = 64 step of
``SpineLeaf-v0`` takes about a millisecond, so the hand-off itself matters: a worker sleeping in a
condition variable (as in a :class:`concurrent.futures.ThreadPoolExecutor`) needs tens of microseconds to
wake, at the start of the step and again for the caller to learn that the last range is done.

So a worker that finished a hand-off first waits for the next one by spinning, in compiled code that
holds no GIL, on a flag the caller sets, for at most :data:`SPIN_S` (``$AINET_GYM_SPIN_US``, default
1000 us) before it sleeps; the caller waits for the last range the same way. This is what OpenMP
runtimes do between parallel regions (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``). A spinning worker keeps
one core busy for up to that long after each step: ``AINET_GYM_SPIN_US=0`` makes the threads sleep at
once (slower hand-offs, no spinning). The flags are read and written with acquire and release atomics,
so a thread that sees a range done also sees what the range wrote.

The GIL is the other cost: a thread that asks for it while another holds it sleeps until it is let go,
and a sleeping thread takes tens of microseconds to wake on an idle core. So every wait of the hand-off
happens in compiled code that holds no GIL, and every flag another thread waits on is set from there: the
caller posts a hand-off from inside its wait for a spinning worker to start (:func:`announce`, which the
range kernels call first, once they run without the GIL), and takes a range itself only then; a worker
publishes a finished hand-off from inside its spin for the next one.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["SPIN_S", "Crew", "announce", "spin_until"]


def _spin_seconds() -> float:
    raw = os.environ.get("AINET_GYM_SPIN_US", "1000")
    try:
        us = float(raw)
    except ValueError:
        raise ValueError(f"AINET_GYM_SPIN_US={raw!r}: expected microseconds, a number >= 0") from None
    if not us >= 0:
        raise ValueError(f"AINET_GYM_SPIN_US={raw!r}: expected microseconds, a number >= 0")
    return us * 1e-6


#: how long (s) a worker spins for the next hand-off, and the caller for the last range, before sleeping
SPIN_S = _spin_seconds()

#: the flags: sequence number of the last hand-off posted / fully done / whose first range a thread runs
POSTED, FINISHED, STARTED = 0, 1, 2

try:
    from numba import njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _load_acquire(typingctx, arr, idx):  # pragma: no cover - compiled
        """``arr[idx]`` (int64) as an atomic load with acquire ordering (never hoisted out of a loop)."""

        def codegen(context, builder, signature, args):
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
            return builder.load_atomic(ptr, "acquire", 8)

        return types.int64(arr, types.intp), codegen

    @intrinsic
    def _store_release(typingctx, arr, idx, val):  # pragma: no cover - compiled
        """``arr[idx] = val`` (int64) as an atomic store with release ordering."""

        def codegen(context, builder, signature, args):
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
            builder.store_atomic(args[2], ptr, "release", 8)
            return context.get_dummy_value()

        return types.void(arr, types.intp, types.int64), codegen

    @njit(cache=True, nogil=True)
    def spin_until(flags, i, target, max_loads):  # pragma: no cover - compiled
        """Spin until ``flags[i] >= target`` (True) or ``max_loads`` reads went by (False), without the GIL."""
        for _ in range(max_loads):  # noqa: SIM110 - a loop numba compiles (no generators)
            if _load_acquire(flags, i) >= target:
                return True
        return False

    @njit(cache=True, nogil=True)
    def announce(flags):  # pragma: no cover - compiled
        """``flags[STARTED] = flags[POSTED]``: a kernel that runs a range of the posted hand-off calls it
        first, once it runs without the GIL (see :meth:`Crew.run`)."""
        _store_release(flags, STARTED, _load_acquire(flags, POSTED))

    @njit(cache=True, nogil=True)
    def _post_and_spin(flags, seq, max_loads):  # pragma: no cover - compiled
        """``flags[POSTED] = seq``, then :func:`spin_until` ``flags[STARTED] >= seq``, in one call without
        the GIL: a spinning worker that sees the post finds the GIL free (not held by the poster on its way
        into this call, where taking it means sleeping until it is let go)."""
        _store_release(flags, POSTED, seq)
        return spin_until(flags, STARTED, seq, max_loads)

    @njit(cache=True, nogil=True)
    def _publish_and_spin(flags, finished, target, max_loads):  # pragma: no cover - compiled
        """``flags[FINISHED] = finished`` with release ordering (what this thread wrote before is seen with
        it) unless ``finished`` is 0, then :func:`spin_until` ``flags[POSTED] >= target``. One compiled call
        without the GIL: the caller that sees the flag finds the GIL free, not held by this thread on its
        way back from Python, where taking it means sleeping until this thread lets go (tens of us)."""
        if finished > 0:
            _store_release(flags, FINISHED, finished)
        return spin_until(flags, POSTED, target, max_loads)

    HAVE_SPIN = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    HAVE_SPIN = False

    def spin_until(flags, i, target, max_loads):  # type: ignore[no-redef]
        return bool(flags[i] >= target)

    def announce(flags):  # type: ignore[no-redef]
        flags[STARTED] = flags[POSTED]

    def _post_and_spin(flags, seq, max_loads):  # type: ignore[no-redef]
        flags[POSTED] = seq
        return bool(flags[STARTED] >= seq)

    def _publish_and_spin(flags, finished, target, max_loads):  # type: ignore[no-redef]
        if finished > 0:
            flags[FINISHED] = finished
        return bool(flags[POSTED] >= target)


class _Job:
    """One hand-off: ranges are claimed from ``todo`` and counted done with ``done`` (both atomic under the
    GIL); the thread that finishes the last range sets ``event`` and, if it is a worker, then publishes
    ``seq`` as finished."""

    __slots__ = ("args_of", "done", "error", "event", "fn", "n", "ranges", "seq", "todo")

    def __init__(self, seq: int, fn: Callable[..., object], ranges: Sequence[tuple[int, int]],
                 args_of: Callable[[int, int], tuple], event: threading.Event) -> None:  # fmt: skip
        self.seq, self.fn, self.ranges, self.args_of = seq, fn, ranges, args_of
        self.n = len(ranges)
        self.todo = iter(range(self.n))
        self.done = itertools.count()
        self.error: BaseException | None = None
        self.event = event


class Crew:
    """``workers`` daemon threads that take ranges of the hand-offs of :meth:`run` beside the caller.

    One hand-off at a time: :meth:`run` from a second thread while one runs takes every range itself
    (correct, just without the workers)."""

    def __init__(self, workers: int, spin_s: float = SPIN_S) -> None:
        self.flags = np.zeros(3, dtype=np.int64)  # POSTED, FINISHED, STARTED sequence numbers
        self.seq = 0
        self.job: _Job | None = None
        self.busy = threading.Lock()  # held by the thread whose hand-off is running
        self.cond = threading.Condition()
        self.event = threading.Event()  # the running hand-off's last range is done (cleared at each post)
        self.sleeping = 0
        self.spin_loads = self._calibrate(spin_s)
        self.start_loads = self.spin_loads // 10  # the caller's wait for a spinning worker to start
        self.threads = [
            threading.Thread(target=self._serve, name=f"ainet-gym-kernel-{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self.threads:
            t.start()

    def _calibrate(self, spin_s: float) -> int:
        """Flag reads that take about ``spin_s`` on this machine (0: no spinning)."""
        if spin_s <= 0 or not HAVE_SPIN:
            return 0
        probe = np.zeros(1, dtype=np.int64)
        spin_until(probe, 0, 1, 16)  # compiled (or loaded from the cache) before timing
        n = 100_000
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            spin_until(probe, 0, 1, n)
            best = min(best, time.perf_counter() - t0)
        return max(1, int(n * spin_s / max(best, 1e-9)))

    def _serve(self) -> None:
        seen = 0
        finished = 0  # the hand-off whose last range this thread ran, to publish (0: none)
        while True:
            target = seen + 1
            # publish the finished hand-off and spin for the next one in one call without the GIL (with
            # several workers an older hand-off may be published late: harmless, the caller waits for
            # FINISHED >= its own and has the event besides)
            if not _publish_and_spin(self.flags, finished, target, self.spin_loads):
                with self.cond:
                    self.sleeping += 1
                    while self.flags[POSTED] < target:
                        self.cond.wait()
                    self.sleeping -= 1
            finished = 0
            job = self.job
            if job is None:  # pragma: no cover - posted before the job was set: cannot happen
                continue
            seen = job.seq
            if self._work(job):
                finished = job.seq

    def _work(self, job: _Job) -> bool:
        """Take ranges of ``job`` until none is left; True if this thread finished the job's last range
        (then ``job.event`` is set). After a range failed, the ranges still unclaimed are counted done
        without running."""
        last = False
        while True:
            i = next(job.todo, job.n)
            if i >= job.n:
                return last
            if job.error is None:
                try:
                    job.fn(*job.args_of(*job.ranges[i]))
                except BaseException as e:  # re-raised by the caller of run
                    if job.error is None:
                        job.error = e
            if next(job.done) == job.n - 1:  # the last range of the job is done
                job.event.set()
                last = True

    def run(self, fn: Callable[..., object], ranges: Sequence[tuple[int, int]],
            args_of: Callable[[int, int], tuple]) -> None:  # fmt: skip
        """``fn(*args_of(lo, hi))`` once for every range, on this thread and the workers."""
        if not self.busy.acquire(blocking=False):  # another thread's hand-off is running
            for lo, hi in ranges:
                fn(*args_of(lo, hi))
            return
        try:
            self.seq += 1
            # the previous hand-off is over (its last range set the event before anyone could see it done)
            self.event.clear()
            job = _Job(self.seq, fn, ranges, args_of, self.event)
            self.job = job
            if self.sleeping or job.n <= 1 or not self.start_loads:
                self.flags[POSTED] = job.seq  # seen by spinning workers at once
                if self.sleeping:
                    with self.cond:
                        self.cond.notify_all()
            else:
                # post without the GIL and let a spinning worker take the first range: it finds the GIL
                # free and runs its range's Python part at once; this thread goes on when the worker's
                # kernel runs without the GIL (announce). Taking a range first instead would hold the GIL
                # for that range's Python part, and a worker that finds it held sleeps until it is let go
                # (tens of us to wake on an idle core).
                if not _post_and_spin(self.flags, job.seq, self.start_loads) and self.sleeping:
                    with self.cond:  # a worker went to sleep before it saw the post
                        self.cond.notify_all()
            # then wait for the ranges the workers took: a worker publishes the finished hand-off when it
            # no longer holds the GIL, or (spin over) sets the event
            if not self._work(job) and not spin_until(self.flags, FINISHED, job.seq, self.spin_loads):
                job.event.wait()
        finally:
            self.busy.release()
        if job.error is not None:
            raise job.error
