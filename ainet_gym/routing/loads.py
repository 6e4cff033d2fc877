"""What a routing policy reads of the traffic: the connections a policy class routes
(:func:`controlled_connections`), the bytes each connection offers in an interval (:func:`connection_demand`) or
the rate it needs while its job communicates (:func:`connection_peak_rate`), the load a split of that demand
puts on each link (:func:`offered_load`, :func:`offered_utilization`) and the part of the last interval's
measured load the routed connections did not cause (:func:`base_load`). The greedy and LP policies build on
these; so do the agents' routers and the env's agent API."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.arrays import safe_divide

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = [
    "base_load",
    "connection_demand",
    "connection_peak_rate",
    "controlled_connections",
    "offered_load",
    "offered_utilization",
]


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
