"""Routing policies at the engine level: each maps the world's state to a split of every connection.

A policy is a callable ``policy(world, last) -> split`` where ``world`` is a
:class:`~ainet_gym.world.FabricWorld`, ``last`` the :class:`~ainet_gym.world.StepResult` of the previous
interval (None on the first) and ``split`` a ``(connections, max_paths)`` array. They serve
:func:`ainet_gym.simulate` and, through the env's action space, the baseline agents.

- ``ecmp``: static hashing of each connection (per QP) onto one candidate path.
- ``spray``: even split over all live candidate paths (packet spraying; paths through a failed link
  are dropped, as a switch drops a dead next hop).
- ``wcmp``: weights at each switch's equal-cost next hops proportional to the link's current capacity
  (a half-rate link gets half the traffic); paths through a failed link are dropped.
- ``greedy``: reactive: each controllable connection on the candidate path whose most loaded link
  had the lowest utilisation in the *last* interval.
- ``lp``: minimise the maximum offered link utilisation of the interval's known demand over the
  candidate paths (a linear program solved by HiGHS through :func:`scipy.optimize.linprog`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.routing import spray_split, wcmp_split

if TYPE_CHECKING:
    from ainet_gym.world import FabricWorld, StepResult

__all__ = ["POLICIES", "connection_demand", "get_policy", "offered_utilization"]

Policy = Callable[["FabricWorld", "StepResult | None"], np.ndarray]


def ecmp(world: FabricWorld, last: StepResult | None) -> np.ndarray:
    return world.default_split()


def _avoid_dead(world: FabricWorld, split: np.ndarray) -> np.ndarray:
    """Zero the share of paths through a failed link and renormalise (unchanged if all are dead)."""
    live = world.live_paths()
    kept = np.where(live, split, 0.0)
    tot = kept.sum(axis=1, keepdims=True)
    return np.where(tot > 0, kept / np.where(tot > 0, tot, 1.0), split)


def spray(world: FabricWorld, last: StepResult | None) -> np.ndarray:
    sim = world.sim
    assert sim is not None
    return _avoid_dead(world, spray_split(sim.conn_npaths, world.max_paths))


def wcmp(world: FabricWorld, last: StepResult | None) -> np.ndarray:
    sim = world.sim
    assert sim is not None
    out = np.zeros((sim.n_conns, world.max_paths))
    f = world.fabric
    for b in range(world.batch):
        sel = world.sim.unit_inst[sim.conn_unit] == b
        out[sel] = wcmp_split(sim.conn_paths[sel], sim.conn_npaths[sel], sim.capacity[b], f.link_group)
    return _avoid_dead(world, out)


def _controlled(world: FabricWorld) -> np.ndarray:
    """Mask (connections,) of connections that sit in action slots (jobs' connections)."""
    sim = world.sim
    assert sim is not None
    m = np.zeros(sim.n_conns, dtype=bool)
    sc = world.slot_conn[world.slot_conn >= 0]
    m[sc] = True
    return m


def greedy(world: FabricWorld, last: StepResult | None) -> np.ndarray:
    split = world.default_split()
    if last is None:
        return split
    sim = world.sim
    assert sim is not None
    inst = sim.unit_inst[sim.conn_unit]
    util = np.concatenate([last.link_utilization.reshape(-1), [0.0]])
    # fail-aware: a link with zero capacity counts as infinitely loaded
    dead = np.concatenate([(sim.capacity.reshape(-1) <= 0).astype(float) * 1e9, [0.0]])
    paths = sim.conn_paths_global  # (conn, paths, hops)
    load = (util + dead)[paths].max(axis=2)  # padding -1 -> 0
    valid = np.arange(world.max_paths)[None, :] < sim.conn_npaths[:, None]
    load = np.where(valid, load, np.inf)
    best = np.argmin(load, axis=1)
    ctrl = _controlled(world) & (sim.conn_npaths > 1)
    one = np.zeros_like(split)
    one[np.arange(split.shape[0]), best] = 1.0
    del inst
    return np.where(ctrl[:, None], one, split)


def connection_demand(world: FabricWorld) -> np.ndarray:
    """Bytes each connection offers in one interval (connections,): per-iteration bytes of its flows
    times the iterations an ideal job completes in the interval; background at its demand rate."""
    sim = world.sim
    assert sim is not None
    bg = sim.flow_bg[sim.member_flow]
    per_member = np.where(bg, 0.0, sim.flow_bytes[sim.member_flow])
    dur = world.decision_interval_s
    unit = sim.flow_unit[sim.member_flow]
    ideal = np.full(sim.n_units, np.inf)
    for b in range(world.batch):
        for j, ui in enumerate(world.slot_units[b]):
            if ui >= 0:
                ideal[world._flat_index(b, ui)] = world._ideal[b, j]
    iters = np.where(np.isfinite(ideal), dur / ideal, 0.0)[unit]
    on = sim.bg_on[unit]
    d = np.where(bg, np.where(on, sim.flow_demand[sim.member_flow] * dur, 0.0), per_member * iters)
    return np.bincount(sim.member_conn, weights=d, minlength=sim.n_conns)


def offered_utilization(world: FabricWorld, split: np.ndarray) -> np.ndarray:
    """Offered-load utilisation (batch, links) of the interval's demand under ``split``."""
    sim = world.sim
    assert sim is not None
    d = connection_demand(world)
    B, L = world.batch, world.fabric.n_links
    paths = sim.conn_paths_global
    mask = paths >= 0
    w = (split * d[:, None])[:, :, None] * mask
    load = np.bincount(paths[mask], weights=w[mask], minlength=B * L).reshape(B, L)
    cap = sim.capacity * world.decision_interval_s
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(cap > 0, load / np.where(cap > 0, cap, 1), np.where(load > 0, np.inf, 0.0))


def lp(world: FabricWorld, last: StepResult | None) -> np.ndarray:
    """Min-max offered utilisation over candidate paths (per instance, HiGHS)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, hstack

    sim = world.sim
    assert sim is not None
    split = world.default_split()
    d = connection_demand(world)
    ctrl = _controlled(world) & (sim.conn_npaths > 1) & (d > 0)
    base = split.copy()
    base[ctrl] = 0.0
    inst_of_conn = sim.unit_inst[sim.conn_unit]
    L = world.fabric.n_links
    dur = world.decision_interval_s
    for b in range(world.batch):
        cs = np.flatnonzero(ctrl & (inst_of_conn == b))
        if cs.size == 0:
            continue
        # fixed load from uncontrolled connections of this instance
        fixed_sel = inst_of_conn == b
        pths = sim.conn_paths[fixed_sel]
        m = pths >= 0
        fw = (base[fixed_sel] * d[fixed_sel][:, None])[:, :, None] * m
        fixed = np.bincount(pths[m], weights=fw[m], minlength=L)
        cap = sim.capacity[b] * dur
        # variables: x[c, p] for valid paths, then t
        cc, pp = np.nonzero(np.arange(world.max_paths)[None, :] < sim.conn_npaths[cs][:, None])
        nv = cc.shape[0]
        hops = sim.conn_paths[cs[cc], pp]  # (vars, hops)
        hm = hops >= 0
        rows = hops[hm]
        cols = np.repeat(np.arange(nv), hm.sum(axis=1))
        vals = d[cs[cc]][cols]
        use = cap > 0
        # links with zero capacity: forbid any controlled traffic on them
        dead_rows = ~use[rows]
        A_load = coo_matrix((vals[~dead_rows], (rows[~dead_rows], cols[~dead_rows])), shape=(L, nv)).tocsr()
        scale = np.where(use, 1.0 / np.where(use, cap, 1.0), 0.0)
        A = coo_matrix(A_load.multiply(scale[:, None]))
        A_ub = hstack([A, coo_matrix(-np.ones((L, 1)))]).tocsr()[use]
        b_ub = -(fixed * scale)[use]
        A_eq = coo_matrix((np.ones(nv), (cc, np.arange(nv))), shape=(cs.shape[0], nv + 1))
        b_eq = np.ones(cs.shape[0])
        ub = np.ones(nv + 1)
        ub[-1] = np.inf
        forbidden = np.zeros(nv, dtype=bool)
        np.logical_or.at(forbidden, cols[dead_rows], True)
        ub[:nv][forbidden] = 0.0
        c = np.zeros(nv + 1)
        c[-1] = 1.0
        res = linprog(
            c,
            A_ub=A_ub,
            b_ub=b_ub,
            A_eq=A_eq,
            b_eq=b_eq,
            bounds=list(zip(np.zeros(nv + 1), ub)),
            method="highs",
        )
        if res.status != 0:
            # infeasible (every path of a connection is dead): fall back to ECMP for this instance
            continue
        x = np.clip(res.x[:nv], 0.0, None)
        out = np.zeros((cs.shape[0], world.max_paths))
        out[cc, pp] = x
        out /= np.maximum(out.sum(axis=1, keepdims=True), 1e-300)
        base[cs] = out
        split[cs] = out
    return split


POLICIES: dict[str, Policy] = {"ecmp": ecmp, "spray": spray, "wcmp": wcmp, "greedy": greedy, "lp": lp}


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
        raise ValueError(f"policy {name!r} is not known; allowed: {', '.join(POLICIES)}") from None
