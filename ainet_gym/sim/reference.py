"""Deliberately simple reference max-min fair allocators, for tests and benchmarks.

Neither is used by the simulator; :mod:`ainet_gym.sim.allocator` is the production solver.

* :func:`max_min_fair_reference_coo`: textbook progressive filling in pure Python (lists and loops) on
  the allocator's COO entries. All active flows rise together to the next link saturation or demand; the
  flows that hit it are frozen. Slow, and obviously correct. :func:`max_min_fair_reference` is the same on a
  dense incidence matrix.
* :func:`max_min_fair_global_min`: the same progressive filling in numpy, freezing each iteration only
  the flows at the global minimum fair level, so it needs one iteration per distinct bottleneck level
  (about F/5 on ECMP fabrics). The baseline that the parallel rule of
  :func:`ainet_gym.sim.allocator.solve_coo` is measured against.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["max_min_fair_global_min", "max_min_fair_reference", "max_min_fair_reference_coo"]


def max_min_fair_reference_coo(
    entry_flow: npt.ArrayLike,
    entry_link: npt.ArrayLike,
    entry_coef: npt.ArrayLike,
    capacity: npt.ArrayLike,
    n_flows: int,
    weights: npt.ArrayLike | None = None,
    demand: npt.ArrayLike | None = None,
    return_iterations: bool = False,
) -> npt.NDArray[np.float64] | tuple[npt.NDArray[np.float64], int]:
    """Weighted max-min fair rates by classic progressive filling, in pure Python (lists and loops).

    All active flows share one level ``t`` (rate ``w_f * t``). Each round recomputes every link's load
    from the active flows, finds the smallest level at which a link saturates or an active flow reaches
    its demand, and freezes the flows that reach it. Same arguments and result as
    :func:`ainet_gym.sim.allocator.solve_coo` (entries with a coefficient <= 0 are ignored; duplicate
    entries of a flow on a link add); the iteration count is the number of rounds (distinct bottleneck
    levels). Inputs are not validated. The benchmark's pure-Python baseline.

    Examples
    --------
    >>> r, rounds = max_min_fair_reference_coo([0, 0, 1, 2], [0, 1, 0, 1], [1.0] * 4, [1.0, 1.0], 3,
    ...                                        return_iterations=True)
    >>> r.tolist(), rounds
    ([0.5, 0.5, 0.5], 1)
    """
    n = int(n_flows)
    cap = [float(c) for c in np.asarray(capacity, dtype=float).ravel().tolist()]
    w = [1.0] * n if weights is None else [float(x) for x in np.ravel(weights).tolist()]
    dem = [math.inf] * n if demand is None else [float(x) for x in np.ravel(demand).tolist()]
    paths: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for f, lk, c in zip(
        np.asarray(entry_flow).tolist(), np.asarray(entry_link).tolist(), np.asarray(entry_coef).tolist()
    ):
        if c > 0:
            paths[f].append((lk, float(c)))
    n_links = len(cap)
    rate = [0.0] * n
    used = [0.0] * n_links  # traffic of the frozen flows on each link
    active = list(range(n))
    rounds = 0
    while active:
        rounds += 1
        load = [0.0] * n_links
        for f in active:
            wf = w[f]
            for lk, c in paths[f]:
                load[lk] += c * wf
        # level at which each link saturates if every active flow runs at that level
        level = math.inf
        link_level = [math.inf] * n_links
        for lk in range(n_links):
            if load[lk] > 0:
                x = max(cap[lk] - used[lk], 0.0) / load[lk]
                link_level[lk] = x
                level = min(level, x)
        for f in active:
            level = min(level, dem[f] / w[f])
        if level == math.inf:  # the rest is unconstrained
            for f in active:
                rate[f] = math.inf
            break
        still = []
        for f in active:
            if dem[f] / w[f] <= level:
                r = dem[f]
            elif any(link_level[lk] <= level for lk, _ in paths[f]):
                r = w[f] * level
            else:
                still.append(f)
                continue
            rate[f] = r
            for lk, c in paths[f]:
                used[lk] += c * r
        active = still
    rates = np.array(rate, dtype=np.float64)
    return (rates, rounds) if return_iterations else rates


def max_min_fair_reference(
    incidence_dense: npt.ArrayLike,
    capacity: npt.ArrayLike,
    demand: npt.ArrayLike | None = None,
    weights: npt.ArrayLike | None = None,
) -> npt.NDArray[np.float64]:
    """:func:`max_min_fair_reference_coo` on a dense incidence matrix.

    Parameters
    ----------
    incidence_dense : array_like, shape (flows, links)
        Traffic per unit rate of each flow on each link (0 = does not cross).
    capacity : array_like, shape (links,)
        Link capacities (``inf`` allowed).
    demand : array_like, shape (flows,), optional
        Per-flow caps (``inf`` = none).
    weights : array_like, shape (flows,), optional
        Positive weights.

    Returns
    -------
    ndarray of float64, shape (flows,)
        The rates; unconstrained flows get ``inf``.

    Examples
    --------
    >>> max_min_fair_reference([[1, 1], [1, 0], [0, 1]], [1.0, 1.0]).tolist()
    [0.5, 0.5, 0.5]
    """
    inc = np.asarray(incidence_dense, dtype=float)
    f, lk = np.nonzero(inc > 0)
    return max_min_fair_reference_coo(f, lk, inc[f, lk], capacity, inc.shape[0], weights, demand)


def max_min_fair_global_min(
    entry_flow: npt.ArrayLike,
    entry_link: npt.ArrayLike,
    entry_coef: npt.ArrayLike,
    capacity: npt.ArrayLike,
    n_flows: int,
    weights: npt.ArrayLike | None = None,
    demand: npt.ArrayLike | None = None,
    return_iterations: bool = False,
) -> npt.NDArray[np.float64] | tuple[npt.NDArray[np.float64], int]:
    """Weighted max-min fair rates by global-minimum progressive filling, in numpy.

    Same arguments and result as :func:`ainet_gym.sim.allocator.solve_coo`, but each iteration freezes
    only the flows whose path minimum equals the global minimum level, so the iteration count is the
    number of distinct bottleneck levels.

    Examples
    --------
    >>> r, its = max_min_fair_global_min([0, 1, 1], [0, 0, 1], [1.0, 1.0, 1.0], [2.0, 4.0], 2,
    ...                                  return_iterations=True)
    >>> r.tolist(), its
    ([1.0, 1.0], 1)
    """
    ef = np.asarray(entry_flow, dtype=np.intp).ravel()
    el = np.asarray(entry_link, dtype=np.intp).ravel()
    ec = np.asarray(entry_coef, dtype=np.float64).ravel()
    remaining = np.array(capacity, dtype=np.float64).ravel()
    n_links = remaining.size
    w = np.ones(n_flows) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    dem = np.full(n_flows, np.inf) if demand is None else np.asarray(demand, dtype=np.float64).ravel()
    dem_level = dem / w

    keep = ec > 0
    ef, el, ec = ef[keep], el[keep], ec[keep]
    rates = np.zeros(n_flows)
    active = np.ones(n_flows, dtype=bool)
    iterations = 0
    while active.any():
        iterations += 1
        on = active[ef]
        ef, el, ec = ef[on], el[on], ec[on]
        denom = np.bincount(el, weights=ec * w[ef], minlength=n_links)
        share = np.full(n_links, np.inf)
        np.divide(remaining, denom, out=share, where=denom > 0)
        m = dem_level.copy()
        np.minimum.at(m, ef, share[el])
        m[~active] = np.inf
        g = m.min()
        if g == np.inf:
            rates[active] = np.inf
            break
        freeze = active & (m == g)
        rates[freeze] = np.where(dem_level[freeze] == g, dem[freeze], w[freeze] * g)
        sel = freeze[ef]
        remaining -= np.bincount(el[sel], weights=ec[sel] * rates[ef[sel]], minlength=n_links)
        np.maximum(remaining, 0.0, out=remaining)
        active &= ~freeze
    if return_iterations:
        return rates, iterations
    return rates
