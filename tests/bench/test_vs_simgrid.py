"""The SimGrid comparison (ainet_gym.bench.vs_simgrid): the makespan loop against closed forms, the ring
phase's shape, and SimGrid's side on small phases where SimGrid's bindings are installed."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

from ainet_gym.bench import vs_simgrid as V


def _has_simgrid() -> bool:
    try:
        return subprocess.run([V.SIMGRID_PYTHON, "-c", "import simgrid"], capture_output=True).returncode == 0
    except OSError:
        return False


TWO = {"capacity": [10.0, 100.0], "routes": [[0], [0, 1]], "bytes": [10.0, 20.0]}
# flows 0, 1 share link 0 (10/s): 5/s each until flow 0 ends at t = 2; flow 1's 10 bytes left then go at
# 10/s: makespan 3 (where bytes / first rate would say 4)


def test_makespan_re_solves_at_every_completion():
    t, solves = V.makespan(V.incidence(TWO), np.array(TWO["capacity"]), np.array(TWO["bytes"]))
    assert t == pytest.approx(3.0, rel=1e-12) and solves == 2


@pytest.mark.parametrize("n", [2, 5, 9])
def test_makespan_of_flows_on_one_link_with_staggered_sizes(n):
    # n flows of sizes 1..n on one link of capacity 1: the makespan is the total bytes over the capacity
    # (the link is busy until the last completes), after n solves (one per distinct size)
    inc = sp.csr_matrix(np.ones((n, 1)))
    t, solves = V.makespan(inc, np.array([1.0]), np.arange(1.0, n + 1))
    assert t == pytest.approx(n * (n + 1) / 2, rel=1e-12) and solves == n


def test_ring_phase_routes_every_transfer_over_one_ecmp_path():
    ph = V.ring_phase(64, 6.4e7)
    assert len(ph["routes"]) == 64 and ph["bytes"] == [1e6] * 64
    assert sorted(ph["dst"]) == list(range(64)) and all(
        s != d for s, d in zip(ph["src"], ph["dst"], strict=True)
    )
    used = {lk for r in ph["routes"] for lk in r}
    assert used == set(range(len(ph["capacity"])))  # only the links the phase uses, renumbered
    assert all(len(r) >= 4 for r in ph["routes"])  # spread hosts: NIC, leaf uplink(s), spine, NIC


@pytest.mark.skipif(not _has_simgrid(), reason="no SimGrid bindings for /usr/bin/python3 (python3-simgrid)")
@pytest.mark.parametrize("mode", ["async", "actors"])
def test_simgrid_gives_the_same_makespan(mode):
    assert V.run_simgrid(TWO, mode=mode)["makespan_s"] == pytest.approx(3.0, rel=1e-12)
    ph = V.ring_phase(64, 6.4e7)
    ours, _ = V.makespan(V.incidence(ph), np.array(ph["capacity"]), np.array(ph["bytes"]))
    assert V.run_simgrid(ph, mode=mode)["makespan_s"] == pytest.approx(ours, rel=1e-9)


def test_simgrid_failure_is_reported_with_its_stderr():
    with pytest.raises(RuntimeError, match="exit"):
        V.run_simgrid(TWO, python=V.SIMGRID_PYTHON if _has_simgrid() else "python3", mode="nonsense")
