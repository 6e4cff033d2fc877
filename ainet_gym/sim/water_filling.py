"""The numpy max-min solver of :mod:`ainet_gym.sim.allocator`: the parallel water-filling rule of that
module's docstring over COO entries (:func:`solve_coo`, unvalidated; the reference of the simulator's numpy
backend, :mod:`ainet_gym.sim.backends.numpy_ref`): the entries as flat flow-sorted arrays, then rounds that find
the ready flows (steps 1-3) and freeze them (step 4) until every flow is frozen."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ainet_gym.arrays import any_true

__all__ = [
    "FloatArray",
    "solve_coo",
]


FloatArray = npt.NDArray[np.float64]


def _coo_start(
    entry_flow: npt.ArrayLike,
    entry_link: npt.ArrayLike,
    entry_coef: npt.ArrayLike,
    capacity: npt.ArrayLike,
    n_flows: int,
    weights: npt.ArrayLike | None,
    demand: npt.ArrayLike | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """:func:`solve_coo`'s inputs as flat arrays: the entries without zero coefficients, sorted by flow
    (stable), a copy of the capacities (the residuals the filling updates), the weights (default 1), the
    demands (default inf), and the rates to fill, set already for the flows that cross no link (their
    demand: inf if none); shapes asserted."""
    ef = np.asarray(entry_flow, dtype=np.intp).ravel()
    el = np.asarray(entry_link, dtype=np.intp).ravel()
    ec = np.asarray(entry_coef, dtype=np.float64).ravel()
    remaining = np.array(capacity, dtype=np.float64).ravel()  # a copy: updated in place
    assert ef.shape == el.shape == ec.shape, "entry arrays must have equal lengths"
    w = np.ones(n_flows) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    assert w.size == n_flows, "weights must have n_flows values"
    if demand is None:
        dem = np.full(n_flows, np.inf)
    else:
        dem = np.asarray(demand, dtype=np.float64).ravel()
        assert dem.size == n_flows, "demand must have n_flows values"
    keep = ec > 0
    if np.count_nonzero(keep) < keep.size:  # (keep.all() in C)
        ef, el, ec = ef[keep], el[keep], ec[keep]
    if ef.size > 1 and any_true(ef[1:] < ef[:-1]):
        order = np.argsort(ef, kind="stable")
        ef, el, ec = ef[order], el[order], ec[order]
    rates = np.empty(n_flows, dtype=np.float64)
    has_link = np.zeros(n_flows, dtype=bool)
    has_link[ef] = True
    rates[~has_link] = dem[~has_link]
    return ef, el, ec, remaining, w, dem, rates


def solve_coo(
    entry_flow: npt.ArrayLike,
    entry_link: npt.ArrayLike,
    entry_coef: npt.ArrayLike,
    capacity: npt.ArrayLike,
    n_flows: int,
    weights: npt.ArrayLike | None = None,
    demand: npt.ArrayLike | None = None,
    return_iterations: bool = False,
    link_order: npt.ArrayLike | None = None,
) -> FloatArray | tuple[FloatArray, int]:
    """Max-min fair rates of an incidence matrix given as COO entries (the unvalidated hot path).

    Parameters
    ----------
    entry_flow, entry_link : array_like of int, shape (entries,)
        Flow index (``0 <= f < n_flows``) and link index (``0 <= l < len(capacity)``) of each entry.
        Entries need not be sorted; duplicated ``(flow, link)`` pairs are allowed and their
        coefficients add.
    entry_coef : array_like of float, shape (entries,)
        Traffic on the link per unit of the flow's rate, ``> 0``. Entries with coefficient 0 are
        ignored.
    capacity : array_like of float, shape (links,)
        Link capacities, ``>= 0`` (0 = failed link, ``np.inf`` = unconstrained).
    n_flows : int
        Number of flows (flows without entries are allowed).
    weights : array_like of float, shape (n_flows,), optional
        Positive weights; the level ``rate / weight`` is made max-min fair. Default: all 1.
    demand : array_like of float, shape (n_flows,), optional
        Per-flow rate caps, ``>= 0`` (``np.inf`` = no cap). Default: no caps.
    return_iterations : bool, default False
        Also return the number of water-filling iterations used.
    link_order : array_like of int, shape (entries,), optional
        A permutation listing the entries by link (as ``np.argsort(entry_link, kind="stable")``), when
        the caller already has it; only valid for flow-sorted entries without zero coefficients.

    Returns
    -------
    rates : ndarray of float64, shape (n_flows,)
        The max-min fair rates. Unconstrained flows get ``np.inf``.
    iterations : int
        Only if `return_iterations`: the number of iterations of the parallel rule.

    Raises
    ------
    AssertionError
        If the entry arrays have different lengths or `weights` / `demand` do not have `n_flows`
        values (cheap shape checks only, and only when assertions are enabled). Values are not
        validated: use :func:`max_min_fair` for checked input.
    ValueError
        If an iteration freezes no flow, which only NaN input can cause (instead of looping forever).

    Examples
    --------
    Three links of capacity 1 in series; flow 0 crosses all three, flows 1-3 one link each:

    >>> rates, its = solve_coo([0, 0, 0, 1, 2, 3], [0, 1, 2, 0, 1, 2], [1.0] * 6,
    ...                        [1.0, 1.0, 1.0], 4, return_iterations=True)
    >>> rates.tolist(), its
    ([0.5, 0.5, 0.5, 0.5], 1)
    """
    n_flows = int(n_flows)
    ef, el, ec, remaining, w, dem, rates = _coo_start(
        entry_flow, entry_link, entry_coef, capacity, n_flows, weights, demand
    )
    with np.errstate(over="ignore"):  # huge capacity / tiny weight may overflow to inf: that is the answer
        iterations = _fill_rounds(ef, el, ec, remaining, w, dem, rates, link_order)
    if return_iterations:
        return rates, iterations
    return rates


def _fill_rounds(
    ef: np.ndarray,
    el: np.ndarray,
    ec: np.ndarray,
    remaining: FloatArray,
    w: FloatArray,
    dem: FloatArray,
    rates: FloatArray,
    link_order: npt.ArrayLike | None,
) -> int:
    """The rounds of :func:`solve_coo`'s parallel rule over the flow-sorted entries of :func:`_coo_start`:
    fills ``rates`` of the flows that cross a link and lowers ``remaining`` in place; returns the number of
    rounds. Each round finds the ready flows (:func:`_ready_flows`, steps 1-3), freezes them
    (:func:`_freeze_ready`, step 4), then keeps only the entries of the flows still active."""
    n_links = remaining.size
    dem_level = dem / w
    cw = ec * w[ef]  # link "weight" of each entry: coef * w_f
    # flow segments of the flow-sorted entries, and a permutation listing the entries in link order
    # (array methods where numpy's functions add Python wrappers: the rounds run some 25 times a step)
    fstart = np.concatenate(([True], ef[1:] != ef[:-1])).nonzero()[0] if ef.size else ef
    flows, fcount = ef[fstart], np.concatenate((fstart[1:], [ef.size])) - fstart
    lperm = np.argsort(el, kind="stable") if link_order is None else np.asarray(link_order, dtype=np.intp)
    lcount = np.bincount(el, minlength=n_links)  # active entries per link
    iterations = 0
    while el.size:
        iterations += 1
        m, entry_m, ready, at_demand = _ready_flows(
            el, cw, remaining, fcount, lperm, lcount, dem_level[flows]
        )
        entry_frozen, frozen_link = _freeze_ready(
            el, cw, fcount, flows, w, dem, m, entry_m, ready, at_demand, rates, remaining
        )
        # compact to the entries of still-active flows
        keep = ~entry_frozen
        if not any_true(keep):
            break
        lcount -= np.bincount(frozen_link, minlength=n_links)
        new_index = keep.cumsum() - 1
        lperm = new_index[lperm[keep[lperm]]]
        el, cw = el[keep], cw[keep]
        active = ~ready
        flows, fcount = flows[active], fcount[active]
    return iterations


def _freeze_ready(
    el: np.ndarray,
    cw: np.ndarray,
    fcount: np.ndarray,
    flows: np.ndarray,
    w: FloatArray,
    dem: FloatArray,
    m: FloatArray,
    entry_m: FloatArray,
    ready: np.ndarray,
    at_demand: np.ndarray,
    rates: FloatArray,
    remaining: FloatArray,
) -> tuple[np.ndarray, np.ndarray]:
    """Step 4 of a round of :func:`solve_coo`'s parallel rule: the ready flows' rates (their demand, or weight
    times their path minimum ``m``) written into ``rates``, and their traffic taken off ``remaining`` (in
    place, clamped at 0); returns which active entries are frozen and their links."""
    n_links = remaining.size
    frozen = flows[ready]
    rates[frozen] = np.where(at_demand[ready], dem[frozen], w[frozen] * m[ready])
    entry_frozen = ready.repeat(fcount)
    frozen_link = el[entry_frozen]
    use = cw[entry_frozen] * entry_m[entry_frozen]
    finite = np.isfinite(use)  # inf only for unconstrained flows, whose links are all inf
    remaining -= np.bincount(frozen_link[finite], weights=use[finite], minlength=n_links)
    np.maximum(remaining, 0.0, out=remaining)  # clamp round-off below zero
    return entry_frozen, frozen_link


def _ready_flows(
    el: np.ndarray,
    cw: np.ndarray,
    remaining: FloatArray,
    fcount: np.ndarray,
    lperm: np.ndarray,
    lcount: np.ndarray,
    flow_dem: FloatArray,
) -> tuple[FloatArray, FloatArray, np.ndarray, np.ndarray]:
    """Steps 1-3 of a round of :func:`solve_coo`'s parallel rule over the active entries (``el`` their links,
    ``cw`` their coef * weight, flow-sorted, ``fcount`` entries per active flow, ``lperm`` the entries in link
    order, ``lcount`` active entries per link, ``flow_dem`` the active flows' demand levels): the path minimum
    of each active flow, the same per entry, which flows are ready, and which of them are at their demand."""
    n_links = remaining.size
    fstart = np.zeros(fcount.size, dtype=np.intp)
    fcount[:-1].cumsum(out=fstart[1:])  # (array methods: np.cumsum and np.repeat add Python wrappers)
    links = lcount.nonzero()[0]  # (np.flatnonzero of the 1-D counts, without its Python wrappers)
    lstart = np.zeros(links.size, dtype=np.intp)
    lcount[links[:-1]].cumsum(out=lstart[1:])

    # 1. fair share level of every link (inf where no active flow crosses it)
    denom = np.bincount(el, weights=cw, minlength=n_links)
    share = np.full(n_links, np.inf)
    np.divide(remaining, denom, out=share, where=denom > 0)

    # 2. path minimum of every active flow
    m = np.minimum.reduceat(share[el], fstart)
    np.minimum(m, flow_dem, out=m)
    entry_m = m.repeat(fcount)

    # 3. ready links: the smallest path minimum among their flows equals their share
    link_min = np.minimum.reduceat(entry_m[lperm], lstart)
    ready_link = np.zeros(n_links, dtype=bool)
    ready_link[links] = link_min >= share[links]  # never >: equality, exact
    at_demand = m >= flow_dem  # never >: equality, exact
    ready = np.logical_or.reduceat(ready_link[el], fstart) | at_demand
    if not any_true(ready):  # impossible for valid input (see the module docstring)
        raise ValueError("solve_coo made no progress: NaN in the capacities, weights or demands?")
    return m, entry_m, ready, at_demand
