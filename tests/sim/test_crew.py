"""The worker threads of the compiled backend (:mod:`ainet_gym.sim.backends.numba.crew`): every range runs once, on
some thread, whatever the spinning; a failed range is raised and leaves the crew usable; a second
thread's hand-off while one runs takes its own ranges; the spin setting is checked."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ainet_gym.sim.backends.numba import crew as _crew
from ainet_gym.sim.backends.numba.crew import Crew

pytestmark = pytest.mark.skipif(not _crew.HAVE_SPIN, reason="numba is not installed")

RANGES = [(0, 2), (2, 3), (3, 7), (7, 8), (8, 12)]


@pytest.mark.parametrize("spin_s", [0.0, 1e-3])
def test_every_range_runs_once_and_the_results_are_seen(spin_s: float) -> None:
    c = Crew(2, spin_s=spin_s)
    out = np.zeros(12)
    for step in range(1, 30):
        threads: list[str] = []

        def fn(lo: int, hi: int, threads: list[str] = threads) -> None:
            threads.append(threading.current_thread().name)
            out[lo:hi] += 1.0

        c.run(fn, RANGES, lambda lo, hi: (lo, hi))
        assert np.array_equal(out, np.full(12, float(step)))  # each range once per call, all done
        assert len(threads) == len(RANGES)
        if step % 7 == 0:
            time.sleep(0.01)  # longer than the spin: the workers sleep, and must be woken
    assert c.spin_loads == 0 if spin_s == 0 else c.spin_loads > 0


def test_the_workers_take_ranges() -> None:
    """Ranges slow enough that the caller cannot take them all: a worker must have run some."""
    c = Crew(1, spin_s=1e-3)
    seen: set[str] = set()

    def fn(lo: int, hi: int) -> None:
        seen.add(threading.current_thread().name)
        time.sleep(0.02)  # releases the GIL, as the compiled kernels do

    for _ in range(3):
        c.run(fn, RANGES, lambda lo, hi: (lo, hi))
    assert threading.current_thread().name in seen
    assert any(name.startswith("ainet-gym-kernel") for name in seen)


def test_a_failed_range_is_raised_and_the_crew_goes_on() -> None:
    c = Crew(1, spin_s=1e-3)

    def fail(lo: int, hi: int) -> None:
        time.sleep(0.001)
        if lo == 3:
            raise ValueError("range 3")

    for _ in range(3):
        with pytest.raises(ValueError, match="range 3"):
            c.run(fail, RANGES, lambda lo, hi: (lo, hi))
    done: list[tuple[int, int]] = []
    c.run(lambda lo, hi: done.append((lo, hi)), RANGES, lambda lo, hi: (lo, hi))
    assert sorted(done) == RANGES


def test_a_second_callers_hand_off_runs_on_its_own_thread() -> None:
    """Two threads call run at once: the crew serves one; the other takes its own ranges. Both complete."""
    c = Crew(1, spin_s=1e-3)
    out = {name: np.zeros(12) for name in ("a", "b")}

    def caller(name: str) -> None:
        for _ in range(20):

            def fn(lo: int, hi: int) -> None:
                time.sleep(0.0005)
                out[name][lo:hi] += 1.0

            c.run(fn, RANGES, lambda lo, hi: (lo, hi))

    ts = [threading.Thread(target=caller, args=(n,)) for n in out]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert all(np.array_equal(v, np.full(12, 20.0)) for v in out.values())


def test_spin_setting_is_checked(monkeypatch) -> None:
    monkeypatch.setenv("AINET_GYM_SPIN_US", "250")
    assert _crew._spin_seconds() == pytest.approx(250e-6)
    monkeypatch.setenv("AINET_GYM_SPIN_US", "0")
    assert _crew._spin_seconds() == 0.0
    for bad in ("fast", "-5", "nan"):
        monkeypatch.setenv("AINET_GYM_SPIN_US", bad)
        with pytest.raises(ValueError, match=f"AINET_GYM_SPIN_US='{bad}'.*microseconds"):
            _crew._spin_seconds()


def test_spin_until_sees_a_flag_another_thread_sets() -> None:
    flags = np.zeros(2, dtype=np.int64)
    assert not _crew.spin_until(flags, _crew.FINISHED, 1, 1000)  # never set: gives up after its reads
    # another thread publishes hand-off 7 as finished, then spins (briefly) for hand-off 8 to be posted
    posted = []
    t = threading.Timer(0.01, lambda: posted.append(_crew._publish_and_spin(flags, 7, 8, 1000)))
    t.start()
    assert _crew.spin_until(
        flags, _crew.FINISHED, 7, 1 << 34
    )  # seconds of reads at most; returns once the other thread's store lands
    t.join()
    assert posted == [False] and flags[_crew.POSTED] == 0  # nothing was posted: it gave up
    assert not _crew._publish_and_spin(flags, 0, 1, 10) and flags[_crew.FINISHED] == 7  # 0 publishes nothing
    flags[_crew.POSTED] = 8
    assert _crew._publish_and_spin(flags, 0, 8, 10)


def test_a_post_waits_for_a_range_to_announce_its_start() -> None:
    """The caller posts hand-off ``seq`` and waits (without the GIL) until a range kernel announces that it
    runs a range of it: ``announce`` copies the posted number into STARTED; an older start does not count."""
    flags = np.zeros(3, dtype=np.int64)
    assert not _crew._post_and_spin(flags, 5, 100)  # no range started: gives up after its reads
    assert flags[_crew.POSTED] == 5 and flags[_crew.STARTED] == 0
    _crew.announce(flags)
    assert flags[_crew.STARTED] == 5
    assert _crew._post_and_spin(flags, 5, 1)
    assert not _crew._post_and_spin(flags, 6, 100)  # hand-off 5's start is not hand-off 6's


def test_a_spinning_worker_takes_the_first_range() -> None:
    """With a worker spinning for the hand-off, the caller lets it take the first range and takes one itself
    only once the worker's kernel announces its start: the first range runs on the worker (were the caller
    to take a range first, it would run the first range every time)."""
    c = Crew(1, spin_s=0.5)  # the caller waits up to 50 ms for the worker: enough on a loaded machine
    assert c.start_loads > 0
    first: list[str] = []

    def fn(lo: int, hi: int) -> None:
        if lo == 0:
            first.append(threading.current_thread().name)
        _crew.announce(c.flags)  # as the range kernels do, first thing without the GIL
        time.sleep(0.001)

    for _ in range(20):
        c.run(fn, RANGES, lambda lo, hi: (lo, hi))
    assert len(first) == 20
    # a busy machine may leave the worker unscheduled past the caller's wait now and then
    assert sum(name.startswith("ainet-gym-kernel") for name in first) >= 15
