"""Routing policies at the engine level: each maps the world's state to a split of every connection.

A policy is a callable ``policy(world, last) -> split`` where ``world`` is a
:class:`~ainet_gym.routing.context.RoutingContext` (what routing reads of a
:class:`~ainet_gym.sim.world.FabricWorld`; an env's is ``core.routing_context``), ``last`` the previous
interval's result as a :class:`~ainet_gym.routing.context.LastInterval` (None on the first) and ``split`` a
``(connections, max_paths)`` array. They serve
:func:`ainet_gym.simulate` and, through the env's action space, the baseline agents.

- ``ecmp``: static hashing of each connection (per QP) onto one candidate path.
- ``spray``: even split of every *job* connection over its live candidate paths (packet spraying;
  paths through a failed link are dropped, as a switch drops a dead next hop); background stays on
  static ECMP, like every other policy that routes the jobs' connections.
- ``wcmp``: weights at each switch's equal-cost next hops proportional to the link's current capacity
  (a half-rate link gets half the traffic), applied to the jobs' connections; background on ECMP.
- ``spray+bg``, ``wcmp+bg``: the same applied to *all* traffic, background included (what a switch
  that sprays or weights every packet does). They control more traffic than ``greedy``, ``lp`` or an
  agent in the ``split``/``path`` modes can, so compare them with agents in the ``ecmp_weights`` mode.
- ``greedy``: reactive: connections placed one by one (largest first) on the candidate path with the
  lowest peak utilisation, given the load measured in the *last* interval that they did not cause.
- ``lp``: minimise the maximum offered link utilisation of the interval's known demand over the
  candidate paths (a linear program solved by HiGHS through :func:`scipy.optimize.linprog`).
- ``greedy+bg``, ``lp+bg``: the same algorithms over *every* multi-path connection, background
  included (class ``jobs+bg``: the traffic an agent in the ``ecmp_weights`` or ``split_bg`` mode
  routes). ``lp+bg`` is never worse than ``lp`` in the LP's own objective (its feasible set contains
  ``lp``'s routing).
- ``solo-lp+bg``: the background sprayed, each job routed by the min-max LP as if it communicated
  alone (:func:`solo_lp_all`); class ``jobs+bg``.
- ``burst-lp+bg`` (:func:`burst_lp_all`, a baseline of ``ainet_gym.agents.baselines`` that switches
  between two entries of :data:`POLICIES`, not an entry itself): ``solo-lp+bg`` in an interval for which a
  background source is scheduled on (:func:`background_active`), ``lp+bg`` otherwise.
- ``isolate0+bg`` ... ``isolate7+bg`` (:func:`isolate_slot_all`, :data:`ISOLATE_PLANS`; plans a ``choose`` mode may
  add with ``extra_plans``, not entries of :data:`POLICIES` nor baselines): the job of one job slot confined
  to one path, everything else sprayed over the other paths, for one interval at a time.
- ``predictive-greedy``, ``predictive-lp`` and their ``+bg`` versions: the greedy placement and the LP
  on a least-squares forecast of the next interval's load of the traffic they do not route (see
  ``ainet_gym.agents.predictive``; the model is fitted once per scenario on training seeds, when first
  called). They keep the forecast's lags per world, so call them once per interval.

:data:`CONTROLS` gives the class of each; :func:`controlled_connections` the connections a class routes.
"""

from __future__ import annotations

import hashlib
import weakref
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.arrays import safe_divide
from ainet_gym.errors import choice_message
from ainet_gym.routing.split import spray_split

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = [
    "CONTROLS",
    "ISOLATE_PLANS",
    "PLACE_TIE_RTOL",
    "POLICIES",
    "PREDICTIVE",
    "avoid_dead_paths",
    "background_active",
    "base_load",
    "burst_lp_all",
    "connection_demand",
    "controlled_connections",
    "get_policy",
    "isolate_slot_all",
    "min_max_split",
    "offered_load",
    "offered_utilization",
    "place_least_loaded",
    "predictive_router_factory",
    "register_predictive_router",
    "solo_lp_all",
]

Policy = Callable[["RoutingContext", "LastInterval | None"], np.ndarray]


def ecmp(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    return world.default_split()


def avoid_dead_paths(world: RoutingContext, split: np.ndarray) -> np.ndarray:
    """Zero the share of paths through a failed link and renormalise (``world.withdraw_dead``)."""
    return world.withdraw_dead(split)


def _jobs_only(world: RoutingContext, split: np.ndarray) -> np.ndarray:
    """``split`` on the jobs' connections (action slots), static ECMP on every other connection."""
    out = world.default_split()
    ctrl = controlled_connections(world)
    out[ctrl] = split[ctrl]
    return out


def spray_all(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """Even split of every connection, background included, over its live candidate paths."""
    sim = world.sim
    assert sim is not None
    return avoid_dead_paths(world, spray_split(sim.conn_npaths, world.max_paths))


def wcmp_all(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """Capacity-weighted ECMP of every connection, background included."""
    sim = world.sim
    assert sim is not None
    return world.wcmp(sim.engine_state.capacity_bytes_per_s)  # withdraws paths through failed links itself


def spray(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """Even split of the jobs' connections over their live paths; background on static ECMP."""
    return _jobs_only(world, spray_all(world, last))


def wcmp(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """Capacity-weighted ECMP of the jobs' connections; background on static ECMP."""
    return _jobs_only(world, wcmp_all(world, last))


def controlled_connections(world: RoutingContext, background: bool = False) -> np.ndarray:
    """Mask (connections,) of the connections a policy of the class ``jobs`` routes: the jobs'
    connections (those the action slots of the ``split`` and ``path`` modes route; background sources
    follow static ECMP). ``background=True``: every connection (the class ``jobs+bg``)."""
    sim = world.sim
    assert sim is not None
    if background:
        return np.ones(sim.n_conns, dtype=bool)
    return ~sim.unit_bg[sim.conn_unit]


def base_load(world: RoutingContext, last: LastInterval, background: bool = False) -> np.ndarray:
    """Bytes (batch, links) of the last interval that the routed multi-path connections (the jobs',
    and with ``background`` the background's too) did not cause: the measured bytes minus their
    offered load under the split that ran (clipped at 0)."""
    sim = world.sim
    assert sim is not None
    B, L = world.batch, world.fabric.n_links
    d = connection_demand(world)
    ctrl = controlled_connections(world, background) & (sim.conn_npaths > 1) & (d > 0)
    own = offered_load(world, sim.engine_state.split, np.where(ctrl, d, 0.0)).reshape(-1)
    return np.maximum(last.link_bytes.reshape(-1) - own, 0.0).reshape(B, L)


def offered_load(world: RoutingContext, split: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Bytes (batch, links) that ``demand`` (connections,) bytes puts on each link when routed by
    ``split`` (connections, max_paths): every path of a connection carries its share on each of its
    links (a fluid offered load: no capacity limit, no queueing)."""
    sim = world.sim
    assert sim is not None
    paths = sim.conn_paths_global  # (conns, P, hops) batch-global link ids, -1 padding
    mask = paths >= 0
    per = (split * demand[:, None])[:, :, None] * mask
    B, L = world.batch, world.fabric.n_links
    return np.bincount(paths[mask], weights=per[mask], minlength=B * L).reshape(B, L)


#: scores of :func:`place_least_loaded` within this relative distance of the least one are ties (broken by the
#: lowest path index): symmetric links carry equal loads in exact arithmetic, which the measured link bytes
#: give only to round-off (1e-16 relative; the backends sum in different orders), and an exact comparison
#: would let that round-off pick the path
PLACE_TIE_RTOL = 1e-9


def place_least_loaded(
    world: RoutingContext,
    table: np.ndarray,
    demand: np.ndarray,
    allowed: np.ndarray,
    load: np.ndarray,
    inv_capacity: np.ndarray,
) -> np.ndarray:
    """Place connections one by one, each on the allowed candidate path whose most loaded link (load
    plus the connection's demand, times the link's inverse capacity) is lowest (ties, up to
    :data:`PLACE_TIE_RTOL` relative: the lowest index).

    ``table`` (batch, rounds) holds the connections in placement order (-1: none): round ``k`` places
    ``table[:, k]``, one connection per instance, batched (the loop is over rounds, not over flows).
    ``demand`` (connections,) bytes; ``allowed`` (connections, max_paths) bool; ``load`` and
    ``inv_capacity`` (batch * links,) bytes and 1 / bytes (inf for a failed link) over batch-global link
    ids; ``load`` is not modified. Returns (connections,) the chosen path index of each placed
    connection (0 where no path is allowed; -1 for connections not in ``table``).
    """
    sim = world.sim
    assert sim is not None
    paths = sim.conn_paths_global  # (conns, P, hops), -1 padding: index -1 of the extended arrays
    load_ext = np.concatenate([load, [0.0]])
    inv_ext = np.concatenate([inv_capacity, [0.0]])
    best = np.full(demand.shape[0], -1, dtype=np.int64)
    for k in range(table.shape[1]):  # placement rounds (connections per instance), batched
        c = table[:, k]
        c = c[c >= 0]
        pl = paths[c]  # (n, paths, hops)
        util = (load_ext[pl] + demand[c][:, None, None]) * inv_ext[pl]
        util = np.nan_to_num(util, nan=np.inf)  # 0 * inf: a failed link the connection adds nothing to
        score = np.where(allowed[c], util.max(axis=2), np.inf)
        # ties: the lowest index among the paths within PLACE_TIE_RTOL of the least score, so that loads
        # equal up to round-off (measured by two backends that sum in different orders) pick the same path
        least = score.min(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):  # inf - inf (no path allowed): not a tie, argmax gives 0
            p = np.argmax(score - least <= PLACE_TIE_RTOL * least, axis=1)
        best[c] = p
        chosen = pl[np.arange(c.size), p]  # (n, hops)
        ok = chosen >= 0
        np.add.at(load_ext, chosen[ok], np.broadcast_to(demand[c][:, None], chosen.shape)[ok])
    return best


def greedy(
    world: RoutingContext,
    last: LastInterval | None,
    base: np.ndarray | None = None,
    background: bool = False,
) -> np.ndarray:
    """Reactive congestion-aware placement from the last interval's measured link loads.

    The load the controlled connections did not cause (background, uncontrolled traffic) is the last
    interval's measured bytes minus their own offered load under the last split (:func:`base_load`),
    or ``base`` (batch, links) bytes when given (a forecast, see ``ainet_gym.agents.predictive``). Connections are
    then placed one by one, largest demand first, each on the candidate path whose most loaded link (the
    base load plus what was placed so far, over capacity) is lowest. Runs over the batch at once; the
    loop is over placement rounds, not over flows. First interval without ``base``: static ECMP.
    ``background=True`` places the background connections too (``greedy+bg``).
    """
    split = world.default_split()
    if last is None and base is None:
        return split
    sim = world.sim
    assert sim is not None
    B, P = world.batch, world.max_paths
    d = connection_demand(world)
    ctrl = controlled_connections(world, background) & (sim.conn_npaths > 1) & (d > 0)
    if base is None:
        assert last is not None
        base = base_load(world, last, background)
    load = np.asarray(base, dtype=np.float64).reshape(-1)
    cap = (sim.engine_state.capacity_bytes_per_s * world.decision_interval_s).reshape(-1)
    inv = safe_divide(1.0, cap, np.inf)
    inst = sim.unit_inst[sim.conn_unit]
    cs = np.flatnonzero(ctrl)
    if cs.size == 0:
        return split
    # placement order: per instance, by demand, largest first -> a (batch, rounds) table of connections
    order = cs[np.lexsort((-d[cs], inst[cs]))]
    oi = inst[order]
    rank = np.arange(order.size) - np.searchsorted(oi, oi)
    table = np.full((B, int(rank.max()) + 1), -1, dtype=np.int64)
    table[oi, rank] = order
    valid_p = np.arange(P)[None, :] < sim.conn_npaths[:, None]
    best = place_least_loaded(world, table, d, valid_p, load, inv)
    split[cs] = np.arange(P)[None, :] == best[cs][:, None]
    return split


def connection_demand(world: RoutingContext, background_on: bool | None = None) -> np.ndarray:
    """Bytes each connection offers in one interval (connections,): per-iteration bytes of its flows
    times the iterations an ideal job completes in the interval; background at its demand rate while
    it is scheduled on (``background_on=True``: as if every source were on, its nominal demand)."""
    sim = world.sim
    assert sim is not None
    bg = sim.flow_bg[sim.member_flow]
    per_member = np.where(bg, 0.0, sim.flow_bytes[sim.member_flow])
    dur = world.decision_interval_s
    unit = sim.flow_unit[sim.member_flow]
    ideal = _per_unit(world, world.job_ideal_step_s)
    iters = np.where(np.isfinite(ideal), dur / ideal, 0.0)[unit]
    on = sim.state.bg_on[unit] if background_on is None else np.full(unit.shape, bool(background_on))
    d = np.where(bg, np.where(on, sim.flow_demand[sim.member_flow] * dur, 0.0), per_member * iters)
    return np.bincount(sim.member_conn, weights=d, minlength=sim.n_conns)


def _per_unit(world: RoutingContext, per_job: np.ndarray) -> np.ndarray:
    """Spread a (batch, job slots) array onto the flat units (inf where a unit is not a job)."""
    sim = world.sim
    assert sim is not None
    out = np.full(sim.n_units, np.inf)
    ok = world.job_unit >= 0
    out[world.job_unit[ok]] = per_job[ok]
    return out


def connection_peak_rate(world: RoutingContext) -> np.ndarray:
    """Rate each connection needs (bytes/s, (connections,)) while its job communicates, to finish the
    job's communication in its ideal (non-blocking) time; background at its demand rate if it is on.

    With these demands, a maximum link utilisation <= 1 means every job could run at its ideal step
    time even if all jobs communicated at the same moment: the worst-case-concurrency load.
    """
    sim = world.sim
    assert sim is not None
    bg = sim.flow_bg[sim.member_flow]
    unit = sim.flow_unit[sim.member_flow]
    comm = _per_unit(world, world.job_ideal_comm_s)[unit]
    # a segment of a ring cut by routing.ring_run_ahead_bytes counts its whole ring's bytes (the demand of
    # the uncut ring, so a policy sees the same peak with or without the run-ahead bound)
    gph = sim.flow_gphase[sim.member_flow]
    segs = np.where(gph >= 0, sim.phase_segments[np.maximum(gph, 0)], 1)
    job_rate = safe_divide(np.where(bg, 0.0, sim.flow_bytes[sim.member_flow] * segs), comm)  # background: 0
    bg_rate = np.where(bg & sim.state.bg_on[unit], sim.flow_demand[sim.member_flow], 0.0)
    # a connection is used by one member per phase; take its largest rate over the job's phases
    r = np.zeros(sim.n_conns)
    np.maximum.at(r, sim.member_conn, np.where(bg, bg_rate, job_rate))
    return r


def offered_utilization(world: RoutingContext, split: np.ndarray) -> np.ndarray:
    """Offered-load utilisation (batch, links) under ``split`` of the interval's peak demand
    (:func:`connection_peak_rate`: every job communicating at its ideal rate, background as scheduled)."""
    sim = world.sim
    assert sim is not None
    load = offered_load(world, split, connection_peak_rate(world))
    cap = sim.engine_state.capacity_bytes_per_s
    with np.errstate(divide="ignore", invalid="ignore"):
        return safe_divide(load, cap, np.where(load > 0, np.inf, 0.0))


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


def greedy_all(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """:func:`greedy` over every multi-path connection, background included (``greedy+bg``)."""
    return greedy(world, last, background=True)


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


def isolate_slot_all(world: RoutingContext, last: LastInterval | None, slot: int) -> np.ndarray:
    """``isolate{slot}+bg``: the connections of the job in job slot ``slot`` each on its first live candidate
    path alone, and every other connection (the other jobs', the background's) sprayed evenly over its live
    paths but its first one (over all of them if it has only one); an instance whose slot is empty, or
    beyond the world's job slots, plays ``spray+bg``. Class ``jobs+bg``.

    On a two-tier spine-leaf fabric the candidate paths of every leaf-to-leaf connection are ordered by
    spine, so the plan partitions the spines: the job alone on the first spine, the rest of the traffic on
    the others. With S spines and a job whose ring hops leave every leaf at NIC rate, its rate falls to
    about 1/S of its sprayed rate when it communicates alone, and every other job runs on S - 1 spines
    without it: a way to hold one job back (or to keep it out of the others' way) for one interval, which the
    lookahead over plans uses to set the jobs' phases apart on ``spine-leaf-4to1-jitter`` (docs/learning.md,
    "issue-26z"). Alone for a whole episode it is a poor policy (the note gives its scores), so it is a plan of
    the ``choose`` modes (``extra_plans``), not a baseline.
    """
    sim = world.sim
    assert sim is not None
    live = world.live_paths()
    J = world.job_unit.shape[1]
    unit = world.job_unit[:, slot] if 0 <= slot < J else np.full(world.batch, -1)
    inst = sim.unit_inst[sim.conn_unit]
    has = (unit >= 0)[inst]  # (connections,) the connection's instance has a job in the slot
    mine = has & (sim.conn_unit == unit[inst])
    P = world.max_paths
    first = np.arange(P)[None, :] == np.argmax(live, axis=1)[:, None]  # the first live path
    others = live & ~first
    rest = np.where(others.any(axis=1)[:, None], others, live)
    out = np.where(mine[:, None], first & live, np.where(has[:, None], rest, live)).astype(np.float64)
    total = out.sum(axis=1, keepdims=True)
    spray = spray_all(world, last)  # rows without a live path: as spray+bg routes them
    return np.where(total > 0, out / np.maximum(total, 1e-300), spray)


#: the isolating plans (:func:`isolate_slot_all`) of job slots 0-7: name -> policy; plans a ``choose`` mode
#: may add (``EnvCore(extra_plans=...)``, :data:`ainet_gym.routing.plans.EXTRA_PLANS`), not baselines
ISOLATE_PLANS: dict[str, Policy] = {f"isolate{j}+bg": partial(isolate_slot_all, slot=j) for j in range(8)}


#: A predict-then-route router's factory: ``factory(world, router, background)`` -> a callable ``last -> split``
#: for that world (``router`` ``greedy`` or ``lp``; ``background``: the ``+bg`` version).
PredictiveRouterFactory = Callable[
    ["RoutingContext", str, bool], Callable[["LastInterval | None"], np.ndarray]
]

_PREDICTIVE_ROUTER: list[PredictiveRouterFactory] = []


def register_predictive_router(factory: PredictiveRouterFactory) -> None:
    """Make ``factory`` the one the ``predictive-*`` entries of :data:`POLICIES` call.

    The predictive router fits its forecaster on simulated episodes of the scenario, so it lives with the
    agents (:class:`ainet_gym.agents.predictive.PredictiveRouter`), after routing in the pipeline; that module
    registers it here when imported (importing ``ainet_gym`` imports it), so routing never imports up."""
    _PREDICTIVE_ROUTER[:] = [factory]


def predictive_router_factory() -> PredictiveRouterFactory:
    """The registered predict-then-route router factory.

    Raises
    ------
    RuntimeError
        If none is registered (``ainet_gym.agents.predictive`` was never imported; ``import ainet_gym``
        imports it).
    """
    if not _PREDICTIVE_ROUTER:
        raise RuntimeError(
            "the predictive-* policies need the predictive router of ainet_gym.agents.predictive, which "
            "registers it when imported: import ainet_gym (or ainet_gym.agents.predictive) first"
        )
    return _PREDICTIVE_ROUTER[0]


class PredictivePolicy:
    """An engine-level predict-then-route policy (``predictive-greedy``, ``predictive-lp`` and their
    ``+bg`` versions): the registered router (:func:`register_predictive_router`,
    :class:`ainet_gym.agents.predictive.PredictiveRouter`) per world, made (and its forecaster fitted, once
    per process and scenario) on the first call with that world.

    Each call with a new ``last`` result pushes that interval's base load into the forecaster's lags,
    so call it once per interval (as :func:`ainet_gym.simulate` and the evaluator do); instances whose
    step count is 0 (just reset) start from empty lags.
    """

    def __init__(self, router: str, background: bool) -> None:
        self.router = router
        self.background = background
        self._routers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __call__(self, world: RoutingContext, last: LastInterval | None) -> np.ndarray:
        r = self._routers.get(world)
        if r is None:
            r = predictive_router_factory()(world, self.router, self.background)
            self._routers[world] = r
        return r(last)


POLICIES: dict[str, Policy] = {
    "ecmp": ecmp,
    "spray": spray,
    "wcmp": wcmp,
    "greedy": greedy,
    "lp": lp,
    "spray+bg": spray_all,
    "wcmp+bg": wcmp_all,
    "greedy+bg": greedy_all,
    "lp+bg": lp_all,
    "solo-lp+bg": solo_lp_all,
    "predictive-greedy": PredictivePolicy("greedy", False),
    "predictive-lp": PredictivePolicy("lp", False),
    "predictive-greedy+bg": PredictivePolicy("greedy", True),
    "predictive-lp+bg": PredictivePolicy("lp", True),
}

#: The predict-then-route entries of :data:`POLICIES` (stateful: see :class:`PredictivePolicy`).
PREDICTIVE: tuple[str, ...] = tuple(k for k, v in POLICIES.items() if isinstance(v, PredictivePolicy))

#: The traffic each policy routes: ``"none"`` (static hashing of everything), ``"jobs"`` (the jobs'
#: connections, background on static ECMP: what ``greedy``, ``lp`` and agents in the ``split`` and
#: ``path`` action modes can control) or ``"jobs+bg"`` (background too: the ``ecmp_weights`` and
#: ``split_bg`` modes). A ``+bg`` suffix names the ``jobs+bg`` version of a router.
CONTROLS: dict[str, str] = {
    name: ("none" if name == "ecmp" else "jobs+bg" if name.endswith("+bg") else "jobs") for name in POLICIES
}


def get_policy(name: str) -> Policy:
    """The engine-level policy ``name``.

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`POLICIES`.
    """
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(choice_message("policy", name, POLICIES)) from None
