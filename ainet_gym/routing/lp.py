"""The min-max LP policies: ``lp`` and ``lp+bg`` (the two LPs of :func:`min_max_split`, solved by HiGHS and
memoised by their inputs, :data:`LP_CACHE_SIZE`), ``solo-lp+bg`` (each job's LP alone over the sprayed
background) and ``burst-lp+bg`` (one or the other by whether a background source is scheduled on,
:func:`background_active`)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.arrays import safe_divide
from ainet_gym.routing.loads import connection_peak_rate, controlled_connections, offered_load
from ainet_gym.routing.oblivious import spray_all

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = [
    "LP_CACHE_SIZE",
    "background_active",
    "burst_lp_all",
    "lp",
    "lp_all",
    "min_max_split",
    "solo_lp_all",
]


def lp(
    world: RoutingContext,
    last: LastInterval | None,
    fixed_rate: np.ndarray | None = None,
    background: bool = False,
) -> np.ndarray:
    """Min-max offered utilisation over candidate paths (per instance, HiGHS), of the peak demand of
    :func:`connection_peak_rate`: the routing under which the worst moment (every job communicating
    at once) loads the fabric least.

    The min-max optimum is degenerate (many routings reach it, some badly unbalanced for a job that
    communicates alone), so a second LP keeps the optimal peak (to 1e-6 relative) and minimises the
    sum over jobs of each job's own peak link utilisation (lexicographic). Connections whose every path
    is dead keep ECMP; an instance whose LP fails keeps ECMP.

    "Optimal" is meant for this objective (offered peak load of the jobs' traffic, background fixed on
    ECMP), not for GPU utilisation: a policy can beat it on GPU utilisation (a negative gap to the LP),
    e.g. by steering background traffic through switch weights, or by exploiting the timing of phases.

    ``fixed_rate`` (batch, links), bytes/s, replaces the load of the connections the LP does not route
    (background at its scheduled rate on its ECMP paths) by a forecast (see ``ainet_gym.agents.predictive``).

    ``background=True`` (``lp+bg``): the LP routes every multi-path connection, background included
    (at its scheduled rate); each background source is one more "job" of the second LP. Its feasible
    set contains every routing ``lp`` can choose, so its optimal peak is never higher.
    """
    sim = world.sim
    assert sim is not None
    split = world.default_split()
    d = connection_peak_rate(world)
    live = world.live_paths()
    ctrl = controlled_connections(world, background) & (sim.conn_npaths > 1) & (d > 0) & live.any(axis=1)
    inst_of_conn = sim.unit_inst[sim.conn_unit]
    # fixed load of the connections the LP does not route (background, single-path), bytes/s per link
    fixed_all = offered_load(world, np.where(ctrl[:, None], 0.0, split), d)
    for b in range(world.batch):
        cs = np.flatnonzero(ctrl & (inst_of_conn == b))
        if cs.size == 0:
            continue
        fixed = fixed_all[b]
        if fixed_rate is not None:
            fixed = np.asarray(fixed_rate[b], dtype=np.float64)
        job = np.unique(sim.conn_unit[cs], return_inverse=True)[1].reshape(-1)  # dense job id per conn
        out = min_max_split(
            sim.conn_paths[cs],
            live[cs],
            d[cs],
            job,
            fixed,
            sim.engine_state.capacity_bytes_per_s[b],
            world.max_paths,
        )
        if out is not None:
            split[cs] = out
    return split


#: LP solutions of :func:`min_max_split` by a digest of their inputs (the LP is a pure function of
#: them, and HiGHS is deterministic): an episode re-solves the same few LPs (the peak demand changes only
#: when background switches, a link fails or a job comes or goes), and so do copies of one scenario.
_LP_CACHE: OrderedDict[bytes, np.ndarray | None] = OrderedDict()


LP_CACHE_SIZE = 4096
"""Solutions kept by :func:`min_max_split` (least recently used dropped first; 0 disables the cache)."""


def min_max_split(
    paths: np.ndarray,
    live: np.ndarray,
    demand: np.ndarray,
    job: np.ndarray,
    fixed: np.ndarray,
    capacity: np.ndarray,
    max_paths: int,
) -> np.ndarray | None:
    """The two LPs of :func:`lp` for one instance: the split (connections, max_paths) of the routed
    connections, or None if the first LP fails.

    ``paths`` (n, max_paths, hops) local link ids (-1 padded), ``live`` (n, max_paths) bool usable paths,
    ``demand`` (n,) bytes/s, ``job`` (n,) dense job (unit) index of each connection, ``fixed`` (links,)
    bytes/s of traffic the LP does not route, ``capacity`` (links,) bytes/s. Solutions are memoised by
    their inputs (:data:`LP_CACHE_SIZE`); a returned array is the caller's own copy.
    """
    key = None
    if LP_CACHE_SIZE > 0:
        h = hashlib.blake2b(digest_size=20)
        for a in (paths, live, demand, job, fixed, capacity):
            a = np.ascontiguousarray(a)
            h.update(str((a.dtype.str, a.shape)).encode())
            h.update(a.tobytes())
        h.update(str(max_paths).encode())
        key = h.digest()
        if key in _LP_CACHE:
            _LP_CACHE.move_to_end(key)
            hit = _LP_CACHE[key]
            return None if hit is None else hit.copy()
    out = _solve_min_max(paths, live, demand, job, fixed, capacity, max_paths)
    if key is not None:
        _LP_CACHE[key] = None if out is None else out.copy()
        while len(_LP_CACHE) > LP_CACHE_SIZE:
            _LP_CACHE.popitem(last=False)
    return out


def _solve_min_max(
    paths: np.ndarray,
    live: np.ndarray,
    demand: np.ndarray,
    job: np.ndarray,
    fixed: np.ndarray,
    capacity: np.ndarray,
    max_paths: int,
) -> np.ndarray | None:
    """:func:`min_max_split` without the cache (HiGHS through :func:`scipy.optimize.linprog`)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, vstack

    L = capacity.shape[0]
    n = paths.shape[0]
    usable = capacity > 0
    scale = safe_divide(1.0, capacity)
    # variables: x[c, p] for live candidate paths, then t, then one t_j per job
    cc, pp = np.nonzero(live)
    nv = cc.shape[0]
    nj = int(job.max()) + 1
    hops = paths[cc, pp]  # (vars, hops)
    hm = hops >= 0
    link = hops[hm]
    col = np.repeat(np.arange(nv), hm.sum(axis=1))
    val = demand[cc][col] * scale[link]
    n_all = nv + 1 + nj
    # aggregate rows: load(l) / cap(l) - t <= -fixed(l) / cap(l), one per usable link
    agg = coo_matrix((val, (link, col)), shape=(L, n_all)).tocsr()[usable]
    n_agg = agg.shape[0]
    agg = agg + coo_matrix((-np.ones(n_agg), (np.arange(n_agg), np.full(n_agg, nv))), shape=(n_agg, n_all))
    # per-job rows: the job's own load(l) / cap(l) - t_j <= 0, one per (job, link) it can use
    jl = job[cc][col] * L + link
    rows_u, row = np.unique(jl, return_inverse=True)
    nr = rows_u.shape[0]
    per_job = coo_matrix((val, (row, col)), shape=(nr, n_all)) + coo_matrix(
        (-np.ones(nr), (np.arange(nr), nv + 1 + rows_u // L)), shape=(nr, n_all)
    )
    A_ub = vstack([agg, per_job]).tocsr()
    b_ub = np.concatenate([-(fixed * scale)[usable], np.zeros(nr)])
    A_eq = coo_matrix((np.ones(nv), (cc, np.arange(nv))), shape=(n, n_all))
    b_eq = np.ones(n)
    bounds = [(0.0, 1.0)] * nv + [(0.0, None)] * (1 + nj)
    c1 = np.zeros(n_all)
    c1[nv] = 1.0
    r1 = linprog(c1, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if r1.status != 0:
        return None
    t_star = r1.x[nv]
    c2 = np.zeros(n_all)
    c2[nv + 1 :] = 1.0
    bounds[nv] = (0.0, t_star * (1 + 1e-6) + 1e-12)
    r2 = linprog(c2, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
    x = (r2 if r2.status == 0 else r1).x[:nv]
    out = np.zeros((n, max_paths))
    out[cc, pp] = np.maximum(x, 0.0)  # HiGHS round-off below zero
    out /= np.maximum(out.sum(axis=1, keepdims=True), 1e-300)
    return out


def lp_all(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """:func:`lp` over every multi-path connection, background included (``lp+bg``)."""
    return lp(world, last, background=True)


def solo_lp_all(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """``solo-lp+bg``: the background sprayed evenly over its live paths (as ``spray+bg``), and each job
    routed by the min-max LP of :func:`min_max_split` *alone*, with the sprayed background and the
    single-path traffic as its fixed load: the routing under which each job, communicating on its own,
    is fastest.

    ``lp+bg`` plans for every job communicating at once; that optimum is degenerate, and HiGHS returns
    vertex solutions that pack a job onto a few paths, which then carry it at a fraction of its speed
    when it communicates alone (as jobs whose phases drift mostly do). Built as a candidate of the
    clairvoyant ``twin`` (``ainet_gym.agents.twin``), where it proved the strongest heuristic of its class.
    """
    sim = world.sim
    assert sim is not None
    split = spray_all(world, last)
    d = connection_peak_rate(world)
    live = world.live_paths()
    jobs = ~sim.unit_bg[sim.conn_unit]
    ctrl = jobs & (sim.conn_npaths > 1) & (d > 0) & live.any(axis=1)
    fixed = offered_load(world, np.where(jobs[:, None], 0.0, split), d)  # (batch, links) bytes/s
    inst = sim.unit_inst[sim.conn_unit]
    for u in np.unique(sim.conn_unit[ctrl]):  # one LP per job (memoised: the same few in every episode)
        cs = np.flatnonzero(ctrl & (sim.conn_unit == u))
        b = int(inst[cs[0]])
        out = min_max_split(
            sim.conn_paths[cs], live[cs], d[cs], np.zeros(cs.size, dtype=np.int64), fixed[b],
            sim.engine_state.capacity_bytes_per_s[b], world.max_paths,
        )  # fmt: skip
        if out is not None:
            split[cs] = out
    return split


def background_active(world: RoutingContext) -> np.ndarray:
    """(batch,) bool: whether a background source (data ingest, checkpoint writes, another tenant) of each
    instance is scheduled on in its coming interval.

    This is what the observation's background block shows (``scheduled_next``: the schedule is part of the
    observation), read from the world before the interval runs, not a forecast. A ``constant`` source is on
    in every interval; a ``periodic`` one during its bursts.
    """
    sim = world.sim
    assert sim is not None
    on = sim.state.bg_on & sim.unit_bg  # (units,)
    return np.bincount(sim.unit_inst[on], minlength=world.batch) > 0


def burst_lp_all(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """``burst-lp+bg``: :func:`solo_lp_all` in the instances where a background source is scheduled on for
    the coming interval (:func:`background_active`: on ``ingest-bursts``, an ingest burst), :func:`lp_all`
    in the others; class ``jobs+bg``.

    The two-state switch that a k-nearest-neighbour imitation of the lookahead learned on ``ingest-bursts``
    (docs/learning.md): between bursts the joint LP over jobs and background, during a burst the
    background sprayed and each job on its own LP. It reads only what the env exposes (the schedule of the
    coming interval), so it is a heuristic of the class, not a clairvoyant reference; in every interval it
    plays the split of one of the ``choose_bg`` plans (``lp+bg`` or ``solo-lp+bg``), so the ``twin``'s
    candidates cover it interval by interval. With a ``constant`` source it is ``solo-lp+bg`` throughout.
    """
    on = background_active(world)
    if not on.any():
        return lp_all(world, last)
    solo = solo_lp_all(world, last)
    if on.all():
        return solo
    sim = world.sim
    assert sim is not None
    split = lp_all(world, last)
    rows = on[sim.unit_inst[sim.conn_unit]]  # (connections,) in an instance with a burst
    split[rows] = solo[rows]
    return split
