"""The greedy router's least-loaded placement (``routing/greedy.py:place_least_loaded``): batched rounds
against a plain Python loop that places one connection at a time, and its tie rule under round-off.

Moved from ``tests/envs/test_state_api.py``: the subject is routing's placement, not the env's
read-only API; the reference is independent of the code under test (a loop over connections, paths and links).
"""

from __future__ import annotations

import numpy as np

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.greedy import PLACE_TIE_RTOL, place_least_loaded


def _core(batch: int) -> EnvCore:
    """``link-failure`` with ``batch`` copies, reset on seeds 0..batch-1 and stepped once (ECMP's zero action)."""
    core = EnvCore("link-failure", batch=batch)
    core.reset(list(range(batch)))
    core.step(np.zeros((batch, *core.action_space.shape), dtype=np.float32))
    return core


def test_place_least_loaded_matches_a_sequential_reference() -> None:
    """Batched rounds place like one connection at a time: each on the allowed path whose most loaded
    link after adding it, over capacity, is lowest (first on ties; a failed link ranks after every live
    one), then its demand is added."""
    core = _core(batch=3)
    rng = np.random.default_rng(1)
    C, P = core.n_paths.shape[0], core.P
    L = core.world.fabric.n_links
    demand = rng.uniform(1e5, 1e7, size=C)
    allowed = (np.arange(P)[None, :] < core.n_paths[:, None]) & (rng.uniform(size=(C, P)) < 0.8)
    load = rng.uniform(0, 1e7, size=core.batch * L)
    cap = rng.uniform(1e8, 1e9, size=core.batch * L)
    cap[rng.choice(cap.size, 3, replace=False)] = 0.0
    inv = np.where(cap > 0, 1.0 / np.where(cap > 0, cap, 1.0), np.inf)
    inst = np.asarray(core.candidate_paths.max(axis=(1, 2)) // L)  # instance of each connection
    conns = [np.flatnonzero(inst == b) for b in range(core.batch)]
    rounds = max(len(c) for c in conns)
    table = np.full((core.batch, rounds), -1, dtype=np.int64)
    for b, cs in enumerate(conns):
        table[b, : len(cs)] = rng.permutation(cs)
    got = place_least_loaded(core.world, table, demand, allowed, load, inv)
    ref_load = load.copy()
    paths = core.candidate_paths
    for b in range(core.batch):  # instances are independent: one at a time, in table order
        for c in table[b][table[b] >= 0]:
            best, best_score = 0, np.inf
            for p in range(P):
                if not allowed[c, p]:
                    continue
                links = [int(x) for x in paths[c, p] if x >= 0]
                dead = np.finfo(np.float64).max
                score = max(dead if inv[x] == np.inf else (ref_load[x] + demand[c]) * inv[x] for x in links)
                if score < best_score:
                    best, best_score = p, score
            assert got[c] == best, (b, c)
            for x in paths[c, best]:
                if x >= 0:
                    ref_load[x] += demand[c]
    assert np.all(got[np.setdiff1d(np.arange(C), table[table >= 0])] == -1)


def test_place_least_loaded_takes_loads_equal_up_to_round_off_as_ties() -> None:
    """Symmetric links carry equal loads, which measured link bytes give only to round-off (the two
    backends sum in different orders): scores within ``PLACE_TIE_RTOL`` of the least are ties, broken by the
    lowest path index, whichever of them the round-off made smaller; a real difference still wins."""
    core = _core(batch=1)
    P, L = core.P, core.world.fabric.n_links
    c = int(np.flatnonzero(core.n_paths >= 2)[0])
    paths = core.candidate_paths[c]
    p0, p1 = ({int(x) for x in paths[k] if x >= 0} for k in (0, 1))
    only0, only1 = sorted(p0 - p1), sorted(p1 - p0)
    assert only0 and only1
    table = np.array([[c]], dtype=np.int64)
    allowed = np.zeros((core.n_paths.shape[0], P), dtype=bool)
    allowed[c, :2] = True
    demand = np.zeros(core.n_paths.shape[0])
    demand[c] = 1e6
    inv = np.full(L, 1e-9)
    for eps, want in ((-3e-16, 0), (3e-16, 0), (-1e3 * PLACE_TIE_RTOL, 1), (1e3 * PLACE_TIE_RTOL, 0)):
        load = np.full(L, 1e8)
        load[only0] = 5e8
        load[only1] = 5e8 * (1 + eps)  # path 1's own links: equal, a few ulps below or above, or really less
        got = place_least_loaded(core.world, table, demand, allowed, load, inv)
        assert got[c] == want, eps
