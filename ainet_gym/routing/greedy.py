"""The reactive greedy policy (``greedy``, ``greedy+bg``): connections placed one by one, largest first, on
the candidate path whose most loaded link is lowest given the load they did not cause
(:func:`place_least_loaded`, also used by the predict-then-route router of ``ainet_gym.agents.predictive``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.arrays import safe_divide
from ainet_gym.routing.loads import base_load, connection_demand, controlled_connections

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = [
    "PLACE_TIE_RTOL",
    "greedy",
    "greedy_all",
    "place_least_loaded",
]


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


def greedy_all(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """:func:`greedy` over every multi-path connection, background included (``greedy+bg``)."""
    return greedy(world, last, background=True)
