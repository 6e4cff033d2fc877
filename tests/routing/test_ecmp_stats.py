"""Statistics of static ECMP hashing against balls-into-bins closed forms.

n connections hashed independently and uniformly onto n equal paths occupy X paths with
E[X] = n (1 - (1 - 1/n)^n) and Var[X] = n(n-1)(1 - 2/n)^n + n(1 - 1/n)^n - n^2 (1 - 1/n)^(2n)
(e.g. Mitzenmacher & Upfal, "Probability and Computing", occupancy problem). Flows sharing a path split
it max-min fairly and the NICs run at the path rate C, so the aggregate throughput is exactly C * X:
0.684 of the optimum n C at n = 4. The hash must also be uniform over the ECMP set across seeds and
independent between connections (chi-square tests).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

import ainet_gym
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.routing.split import ecmp_split
from ainet_gym.sim.engine import BatchSim, compile_job
from ainet_gym.sim.world import FabricWorld
from tests._scenarios import LOSSLESS_400G, spine_leaf_fabric

C = 400.0e9 / 8.0  # bytes/s of every NIC and uplink
P_FALSE_ALARM = 1e-6  # per chi-square test


def occupancy_mean(n: int, m: int) -> float:
    return n * (1 - (1 - 1 / n) ** m)


def occupancy_var(n: int, m: int) -> float:
    return n * (n - 1) * (1 - 2 / n) ** m + n * (1 - 1 / n) ** m - n * n * (1 - 1 / n) ** (2 * m)


def two_leaf_scenario(n: int, qps: int = 1) -> dict:
    """2 leaves, n spines (n equal paths leaf to leaf), n GPUs per leaf; rank i sends to rank i+n:
    n connections leaf0 -> leaf1 and n back, each on its own NIC."""
    return {
        "name": f"bins{n}",
        "fabric": spine_leaf_fabric(2, n, n, **LOSSLESS_400G),
        "workload": {
            "jobs": [
                {
                    "name": "perm",
                    "gpus": 2 * n,
                    "compute_ms": 0.0,
                    "collectives": [{"op": "sendrecv", "pattern": f"shift:{n}", "bytes": 1.0e9}],
                }
            ]
        },
        "routing": {"max_paths": max(n, 2), "qps_per_connection": qps},
    }


def compiled(n: int):
    sc = ainet_gym.load_scenario(two_leaf_scenario(n))
    f = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    u = compile_job(f, sc.jobs[0], np.arange(2 * n))
    return f, u


def test_occupancy_formulas_match_exhaustive_enumeration():
    # the closed forms used below, checked by enumerating all n^n assignments
    for n in (2, 3, 4):
        occ = np.array([len(set(a)) for a in itertools.product(range(n), repeat=n)], dtype=float)
        assert occ.mean() == pytest.approx(occupancy_mean(n, n), rel=1e-12)
        assert occ.var() == pytest.approx(occupancy_var(n, n), rel=1e-12)
    assert occupancy_mean(4, 4) / 4 == pytest.approx(0.68359375, rel=1e-12)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_mean_ecmp_throughput_is_balls_into_bins(n):
    f, u = compiled(n)
    P = f.max_paths
    assert np.all(u.conn_npaths == n)
    M = 1000
    sim = BatchSim(f, [[u] for _ in range(M)])
    splits = [ecmp_split(u.conn_npaths, u.conn_key, P, 1, seed) for seed in range(M)]
    sim.set_split(np.vstack(splits))
    dt = 1.0e-3  # < S / C = 20 ms: no flow finishes, this is the initial max-min allocation
    m = sim.run_interval(dt)
    up = f.endpoint_up
    src_leaf = f.endpoint_leaf[u.conn_src]
    per_dir = []
    for leaf in (0, 1):
        conns = np.flatnonzero(src_leaf == leaf)
        thr = m.link_bytes[:, up[u.conn_src[conns]]].sum(axis=1) / dt
        # per instance, exactly C times the number of distinct paths its connections hashed onto
        occupied = np.array([len(set(np.argmax(s[conns], axis=1).tolist())) for s in splits])
        np.testing.assert_allclose(thr, C * occupied, rtol=1e-9)
        per_dir.append(thr / C)
    x = (per_dir[0] + per_dir[1]) / 2  # Var <= Var[X] whatever the correlation of the two directions
    # tolerance: 4.5 standard errors of the mean under the closed-form variance (two-sided normal tail
    # 7e-6); at n = 4, +-0.09 paths = +-2.3% of E[X] = 2.73
    se = np.sqrt(occupancy_var(n, n) / M)
    assert abs(x.mean() - occupancy_mean(n, n)) < 4.5 * se
    # the fraction of optimal is 1 - (1 - 1/n)^n (0.684 at n = 4)
    assert x.mean() / n == pytest.approx(1 - (1 - 1 / n) ** n, abs=4.5 * se / n)


@pytest.mark.parametrize("n", [2, 3, 4, 6, 8])
def test_ecmp_hash_is_uniform_over_the_ecmp_set_across_seeds(n):
    f, u = compiled(n)
    M = 600 * n
    picks = np.stack(
        [np.argmax(ecmp_split(u.conn_npaths, u.conn_key, f.max_paths, 1, s), axis=1) for s in range(M)]
    )  # (seeds, conns)
    assert picks.max() < n
    crit = stats.chi2.ppf(1 - P_FALSE_ALARM, n - 1)
    for c in range(picks.shape[1]):
        counts = np.bincount(picks[:, c], minlength=n)
        chi2 = ((counts - M / n) ** 2 / (M / n)).sum()
        assert chi2 < crit, f"connection {c}: path counts {counts.tolist()} not uniform"
    # pairs of connections at the same seed are independent: joint uniform over n^2 cells
    crit2 = stats.chi2.ppf(1 - P_FALSE_ALARM, n * n - 1)
    for a, b in [(0, 1), (0, n), (1, 2 * n - 1)]:
        counts = np.bincount(picks[:, a] * n + picks[:, b], minlength=n * n)
        chi2 = ((counts - M / n**2) ** 2 / (M / n**2)).sum()
        assert chi2 < crit2, f"connections {a}, {b}: joint path counts not uniform"


def test_ecmp_qps_hash_independently():
    # with q QPs per connection, each QP picks a path uniformly: E[#paths used] = n (1 - (1 - 1/n)^q)
    n, q, M = 4, 3, 3000
    f, u = compiled(n)
    used = np.stack(
        [(ecmp_split(u.conn_npaths, u.conn_key, f.max_paths, q, s) > 0).sum(axis=1) for s in range(M)]
    )
    se = np.sqrt(occupancy_var(n, q) / M)
    for c in range(used.shape[1]):
        assert abs(used[:, c].mean() - occupancy_mean(n, q)) < 4.5 * se
    # every split row is a distribution over valid paths in multiples of 1/q
    s = ecmp_split(u.conn_npaths, u.conn_key, f.max_paths, q, 7)
    np.testing.assert_allclose(s.sum(axis=1), 1.0)
    np.testing.assert_allclose(s * q, np.round(s * q), atol=1e-12)


def test_ecmp_connection_keeps_its_path_between_intervals():
    # static hashing: the same connection, the same path, interval after interval (same collisions)
    w = FabricWorld(ainet_gym.load_scenario(two_leaf_scenario(4)), batch=1)
    w.reset(seeds=[3])
    first = w.default_split()
    for _ in range(3):
        w.step(w.default_split())
        np.testing.assert_array_equal(w.default_split(), first)
