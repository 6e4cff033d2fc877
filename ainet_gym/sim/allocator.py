"""Exact (weighted) max-min fair bandwidth allocation with per-flow demand caps.

A *flow* (a transfer, or a share of one on one path) crosses *links*; ``incidence[f, l]`` is the traffic
that flow ``f`` puts on link ``l`` per unit of its rate (1 for a plain path, 2 for a flow that crosses the
link twice, a fraction for a flow split over several paths). An allocation is max-min fair when no flow's
rate can grow without shrinking the rate of a flow whose rate is already no larger. With weights, the
*level* ``rate_f / w_f`` is what is made max-min fair; with demands, a flow never gets more than it asks.

The solver is vectorised over flows and links; it loops only over *iterations* of the parallel
water-filling rule below, which needs about twenty of them on typical fabric instances.

Each iteration, over the still-active (unfrozen) flows:

1. every link's fair share level is ``share_l = remaining_l / sum_{active f} coef_fl * w_f``;
2. every active flow's path minimum is ``m_f = min(min_{l in f} share_l, demand_f / w_f)``;
3. a link is *ready* when no active flow through it has ``m_f < share_l``; a flow is *ready* when it
   crosses a ready link or when its demand level is its ``m_f``;
4. every ready flow is frozen at level ``m_f`` (rate ``w_f * m_f``, or exactly ``demand_f``) and its
   traffic is taken off the remaining capacity of its links.

Freezing a flow at a level no higher than the share of any of its links never lowers a share, so a ready
link is a true bottleneck of its flows and the result is the exact max-min fair allocation. The link
with the globally smallest share (or the flow with the smallest demand level) is always ready, so every
iteration makes progress. The equality test of step 3 is exact in floating point: ``m_f`` is computed
with ``min`` only, so it *is* one of the share or demand-level values, bit for bit.

Conventions
-----------
* A link of capacity 0 is a failed link: every flow through it gets rate 0.
* ``np.inf`` capacity means an unconstrained link.
* A flow that crosses no finite-capacity link and has no finite demand is unconstrained and gets rate
  ``np.inf`` (this includes a flow with an all-zero incidence row and no demand).

Public functions: :func:`max_min_fair` (one instance, validated), :func:`max_min_fair_batched`
(many independent instances in one solve) and :func:`solve_coo` (the unvalidated numpy solver, the
reference of the simulator's numpy backend).

Backends: the public functions take ``backend=None|"numba"|"numpy"`` with the rule of the envs
(:func:`ainet_gym.sim.backends.resolve_backend`: the keyword, else ``$AINET_GYM_BACKEND``, else ``numba`` when
it imports). ``numba`` solves by sequential progressive filling with a heap of link shares
(:func:`ainet_gym.sim.backends.numba.fill.fill_levels`: each flow frozen once, O(entries log links)); ``numpy`` by the
parallel rule above (:func:`solve_coo`). Both are exact; their rates agree to round-off (1e-12 relative on
the test instances; the contract is 1e-9).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["max_min_fair", "max_min_fair_batched", "solve_coo"]

FloatArray = npt.NDArray[np.float64]


# ----------------------------------------------------------------------------------------------------------
# core solver
# ----------------------------------------------------------------------------------------------------------


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
    if not (ec > 0).all():
        keep = ec > 0
        ef, el, ec = ef[keep], el[keep], ec[keep]
    if ef.size > 1 and (ef[1:] < ef[:-1]).any():
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
    fstart = np.flatnonzero(np.concatenate(([True], ef[1:] != ef[:-1]))) if ef.size else ef
    flows, fcount = ef[fstart], np.diff(np.append(fstart, ef.size))
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
        if not keep.any():
            break
        lcount -= np.bincount(frozen_link, minlength=n_links)
        new_index = np.cumsum(keep) - 1
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
    entry_frozen = np.repeat(ready, fcount)
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
    np.cumsum(fcount[:-1], out=fstart[1:])
    links = np.flatnonzero(lcount)
    lstart = np.zeros(links.size, dtype=np.intp)
    np.cumsum(lcount[links[:-1]], out=lstart[1:])

    # 1. fair share level of every link (inf where no active flow crosses it)
    denom = np.bincount(el, weights=cw, minlength=n_links)
    share = np.full(n_links, np.inf)
    np.divide(remaining, denom, out=share, where=denom > 0)

    # 2. path minimum of every active flow
    m = np.minimum.reduceat(share[el], fstart)
    np.minimum(m, flow_dem, out=m)
    entry_m = np.repeat(m, fcount)

    # 3. ready links: the smallest path minimum among their flows equals their share
    link_min = np.minimum.reduceat(entry_m[lperm], lstart)
    ready_link = np.zeros(n_links, dtype=bool)
    ready_link[links] = link_min >= share[links]  # never >: equality, exact
    at_demand = m >= flow_dem  # never >: equality, exact
    ready = np.logical_or.reduceat(ready_link[el], fstart) | at_demand
    if not ready.any():  # impossible for valid input (see the module docstring)
        raise ValueError("solve_coo made no progress: NaN in the capacities, weights or demands?")
    return m, entry_m, ready, at_demand


# ----------------------------------------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------------------------------------


def _format_index(name: str, index: tuple[int, ...] | tuple[Any, ...]) -> str:
    return f"{name}[{', '.join(str(int(i)) for i in index)}]"


def _check_values(
    values: np.ndarray,
    name: str,
    *,
    allow_inf: bool,
    positive: bool = False,
    indices: Sequence[np.ndarray] | None = None,
    hint: str = "",
) -> None:
    """Raise ValueError naming the first bad value of `values` (NaN, negative, inf if not allowed)."""
    with np.errstate(invalid="ignore"):
        bad = np.isnan(values) | ((values <= 0) if positive else (values < 0))
        if not allow_inf:
            bad |= np.isinf(values)
    if not bad.any():
        return
    where = np.argwhere(bad)
    first = tuple(where[0])
    value = float(values[first])
    if indices is not None:  # values are the data of a sparse matrix: report (row, col)
        first = tuple(idx[first[0]] for idx in indices)
    rule = ("finite and " if not allow_inf else "") + ("> 0" if positive else ">= 0")
    more = f" (and {len(where) - 1} more bad values)" if len(where) > 1 else ""
    raise ValueError(f"{_format_index(name, first)} = {value!r}: must be {rule}{hint}{more}")


def _as_float_array(x: Any, name: str) -> np.ndarray:
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of numbers: {exc}") from None


def _issparse(x: Any) -> bool:
    """``scipy.sparse.issparse(x)`` without importing scipy: a sparse matrix exists only once its
    module is loaded (this keeps scipy off the import path of the envs and the engine)."""
    mod = sys.modules.get("scipy.sparse")
    return mod is not None and bool(mod.issparse(x))


def _incidence_to_coo(
    incidence: Any, name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """Validated (flow, link, coef) entries (coef > 0) and the shape of a dense or sparse incidence."""
    if _issparse(incidence):
        if len(incidence.shape) != 2:
            raise ValueError(f"{name} must be 2-D (flows, links); got shape {incidence.shape}")
        coo = incidence.tocoo(copy=True)
        coo.sum_duplicates()
        data = np.asarray(coo.data, dtype=np.float64)
        rows = np.asarray(coo.row, dtype=np.intp)
        cols = np.asarray(coo.col, dtype=np.intp)
        _check_values(data, name, allow_inf=False, indices=(rows, cols))
        keep = data > 0
        return rows[keep], cols[keep], data[keep], (int(coo.shape[0]), int(coo.shape[1]))
    arr = _as_float_array(incidence, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (flows, links); got shape {arr.shape}")
    _check_values(arr, name, allow_inf=False)
    rows, cols = np.nonzero(arr)
    return rows, cols, arr[rows, cols], (arr.shape[0], arr.shape[1])


_CAPACITY_HINT = " (0 = failed link, inf = unconstrained)"
_DEMAND_HINT = " (inf = no cap)"


def _vector(
    x: Any, name: str, n: int, what: str, *, allow_inf: bool, positive: bool = False, hint: str = ""
) -> np.ndarray:
    arr = _as_float_array(x, name)
    if arr.shape != (n,):
        raise ValueError(f"{name} has shape {arr.shape}; expected ({n},): one value per {what}")
    _check_values(arr, name, allow_inf=allow_inf, positive=positive, hint=hint)
    return arr


# ----------------------------------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------------------------------


def max_min_fair(
    incidence: npt.ArrayLike | sp.spmatrix | sp.sparray,
    capacity: npt.ArrayLike,
    demand: npt.ArrayLike | None = None,
    weights: npt.ArrayLike | None = None,
    backend: str | None = None,
) -> FloatArray:
    """Exact (weighted) max-min fair rates of flows sharing links, with optional demand caps.

    Parameters
    ----------
    incidence : array_like or scipy.sparse matrix, shape (flows, links)
        Nonnegative, finite. ``incidence[f, l]`` is the traffic flow ``f`` puts on link ``l`` per
        unit of its rate: 1 for a plain path, 2 for a flow that crosses the link twice, a fraction for
        a flow split over paths, 0 where the flow does not cross the link. Duplicate entries of a
        sparse matrix add.
    capacity : array_like, shape (links,)
        Link capacities, ``>= 0``. 0 is a failed link (its flows get rate 0); ``np.inf`` is allowed.
    demand : array_like, shape (flows,), optional
        Per-flow rate caps, ``>= 0``; ``np.inf`` means no cap. Default: no caps.
    weights : array_like, shape (flows,), optional
        Finite positive weights for weighted max-min fairness: the levels ``rate_f / weights[f]`` are
        max-min fair, so on a single bottleneck rates are proportional to the weights. Default: all 1.
    backend : {None, "numba", "numpy"}, optional
        The solver: compiled progressive filling (``"numba"``) or the numpy parallel rule (``"numpy"``,
        :func:`solve_coo`); None picks as the envs do (``$AINET_GYM_BACKEND``, else numba when it imports).
        Both are exact; rates agree to 1e-9 relative (round-off in practice).

    Returns
    -------
    ndarray of float64, shape (flows,)
        The max-min fair rates. A flow that crosses no finite-capacity link and has no finite demand
        (for example an all-zero incidence row) is unconstrained and gets ``np.inf``.

    Raises
    ------
    ValueError
        If an argument has the wrong shape, or holds a NaN, a negative value, an infinite incidence
        coefficient or a weight that is not finite and positive; or ``backend`` names no backend. The message names the argument, the
        offending index and value and what is allowed, e.g. ``capacity[3] = -1.0: must be >= 0``.

    See Also
    --------
    max_min_fair_batched : many independent instances in one solve.
    solve_coo : the unvalidated core, taking COO entries.

    Examples
    --------
    Keshav's single-link example: capacity 10 shared by demands 2, 2.6, 4 and 5.

    >>> max_min_fair([[1], [1], [1], [1]], [10.0], demand=[2, 2.6, 4, 5]).round(6).tolist()
    [2.0, 2.6, 2.7, 2.7]

    Weighted sharing of one link of capacity 6:

    >>> max_min_fair([[1], [1], [1]], [6.0], weights=[1, 2, 3]).tolist()
    [1.0, 2.0, 3.0]
    """
    flow, link, coef, (n_flows, n_links) = _incidence_to_coo(incidence, "incidence")
    cap = _vector(capacity, "capacity", n_links, "link", allow_inf=True, hint=_CAPACITY_HINT)
    dem = None
    if demand is not None:
        dem = _vector(demand, "demand", n_flows, "flow", allow_inf=True, hint=_DEMAND_HINT)
    w = None
    if weights is not None:
        w = _vector(weights, "weights", n_flows, "flow", allow_inf=False, positive=True)
    return _solve(flow, link, coef, cap, n_flows, w, dem, backend)


def _solve(
    flow: np.ndarray,
    link: np.ndarray,
    coef: np.ndarray,
    cap: np.ndarray,
    n_flows: int,
    weights: np.ndarray | None,
    demand: np.ndarray | None,
    backend: str | None,
    blocks: tuple[np.ndarray, np.ndarray] | None = None,
) -> FloatArray:
    """Validated COO entries (coef > 0) solved on ``backend`` (:func:`ainet_gym.sim.backends.resolve_backend`;
    :meth:`~ainet_gym.sim.backends.base.SimBackend.solve_entries`).

    ``blocks``: the (instances + 1,) flow and link offsets of independent stacked instances; the compiled
    backend then fills each instance on its own (:func:`ainet_gym.sim.backends.numba.fill.solve_fill_blocks`), so a
    batched call equals a loop of single calls bit for bit."""
    from ainet_gym.sim.backends import get_backend

    return get_backend(backend).solve_entries(flow, link, coef, cap, n_flows, weights, demand, blocks)


def _batched_vectors(
    x: Any,
    name: str,
    batch: int,
    n: int,
    what: str,
    *,
    allow_inf: bool,
    positive: bool = False,
    hint: str = "",
) -> np.ndarray:
    """A (batch, n) array from a (batch, n) or shared (n,) argument of the stacked batched form."""
    arr = _as_float_array(x, name)
    if arr.shape != (n,) and arr.shape != (batch, n):
        raise ValueError(
            f"{name} has shape {arr.shape}; expected ({batch}, {n}) (batch, {what}s) or ({n},) shared"
        )
    _check_values(arr, name, allow_inf=allow_inf, positive=positive, hint=hint)
    return np.broadcast_to(arr, (batch, n))


def max_min_fair_batched(
    incidence: npt.ArrayLike | Sequence[npt.ArrayLike | sp.spmatrix | sp.sparray],
    capacity: npt.ArrayLike | Sequence[npt.ArrayLike],
    demand: npt.ArrayLike | Sequence[npt.ArrayLike | None] | None = None,
    weights: npt.ArrayLike | Sequence[npt.ArrayLike | None] | None = None,
    backend: str | None = None,
) -> FloatArray | list[FloatArray]:
    """Max-min fair rates of many independent instances, solved together in one call.

    The instances are stacked block-diagonally (link and flow ids offset per instance) and solved in
    one call: on the numpy backend by one :func:`solve_coo` (the number of rounds is the largest over
    the instances, not their sum), on the compiled backend by one progressive filling per instance
    inside one compiled loop. Results equal a loop of :func:`max_min_fair` calls, bit for bit.

    Parameters
    ----------
    incidence : ndarray of shape (batch, flows, links), or list of (flows_b, links_b) matrices
        Stacked dense form, or a list (or tuple) of per-instance matrices, dense or scipy.sparse,
        whose sizes may differ. Same meaning and rules as in :func:`max_min_fair`.
    capacity : array_like of shape (batch, links) or (links,), or list of (links_b,) arrays
        Stacked form: per-instance capacities, or one (links,) vector shared by all instances.
        List form: one vector per instance.
    demand : optional
        Stacked form: (batch, flows) or shared (flows,). List form: a list with one (flows_b,) vector
        or None per instance. Default: no caps.
    weights : optional
        As `demand`, for weights. Default: all 1.
    backend : {None, "numba", "numpy"}, optional
        As in :func:`max_min_fair`.

    Returns
    -------
    ndarray of float64, shape (batch, flows), or list of ndarray
        An array for the stacked form, a list of (flows_b,) arrays for the list form.

    Raises
    ------
    ValueError
        On a shape mismatch, a batch-length mismatch, or a bad value; the message names the argument
        and the offending index, e.g. ``capacity[1, 3] = -1.0: must be >= 0`` (stacked form) or
        ``capacity[1][3] = -1.0: must be >= 0`` (list form).

    Examples
    --------
    >>> import numpy as np
    >>> inc = np.array([[[1.0], [1.0]], [[1.0], [2.0]]])  # 2 instances, 2 flows, 1 link
    >>> max_min_fair_batched(inc, [[2.0], [3.0]]).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    >>> [r.tolist() for r in max_min_fair_batched([[[1.0]], [[1.0, 1.0], [0.0, 1.0]]],
    ...                                             [[4.0], [1.0, 3.0]])]
    [[4.0], [1.0, 2.0]]
    """
    if isinstance(incidence, (list, tuple)):
        return _batched_list(incidence, capacity, demand, weights, backend)
    return _batched_stacked(incidence, capacity, demand, weights, backend)


def _batched_stacked(
    incidence: Any, capacity: Any, demand: Any, weights: Any, backend: str | None
) -> FloatArray:
    """:func:`max_min_fair_batched` of the stacked form: a (batch, flows, links) incidence, validated, solved as
    one block-diagonal instance; (batch, flows) rates."""
    if _issparse(incidence):
        raise ValueError(
            "incidence: a single sparse matrix is one instance; pass a list of matrices, or call "
            "max_min_fair on a block-diagonal matrix"
        )
    inc = _as_float_array(incidence, "incidence")
    if inc.ndim != 3:
        raise ValueError(
            f"incidence must be 3-D (batch, flows, links) or a list of 2-D matrices; got shape {inc.shape}"
        )
    _check_values(inc, "incidence", allow_inf=False)
    batch, n_flows, n_links = inc.shape
    cap = _batched_vectors(capacity, "capacity", batch, n_links, "link", allow_inf=True, hint=_CAPACITY_HINT)
    dem = None
    if demand is not None:
        dem = _batched_vectors(
            demand, "demand", batch, n_flows, "flow", allow_inf=True, hint=_DEMAND_HINT
        ).ravel()
    w = None
    if weights is not None:
        w = _batched_vectors(
            weights, "weights", batch, n_flows, "flow", allow_inf=False, positive=True
        ).ravel()
    b, f, lk = np.nonzero(inc)
    rates = _solve(
        b * n_flows + f, b * n_links + lk, inc[b, f, lk], np.ascontiguousarray(cap).ravel(), batch * n_flows,
        w, dem, backend, (np.arange(batch + 1) * n_flows, np.arange(batch + 1) * n_links),
    )  # fmt: skip
    return rates.reshape(batch, n_flows)


def _per_instance(x: Any, name: str, batch: int) -> Sequence[Any]:
    if x is None:
        return [None] * batch
    if len(x) != batch:
        raise ValueError(f"{name} has {len(x)} entries; expected {batch}: one per instance of incidence")
    return x


def _batched_list(
    incidence: Sequence[Any], capacity: Any, demand: Any, weights: Any, backend: str | None
) -> list[FloatArray]:
    """:func:`max_min_fair_batched` of the list form: each instance validated on its own (messages name
    ``incidence[i]``), offset and stacked, solved in one call; one (flows_i,) array per instance."""
    batch = len(incidence)
    capacity = _per_instance(capacity, "capacity", batch)
    demand = _per_instance(demand, "demand", batch)
    weights = _per_instance(weights, "weights", batch)
    flows, links, coefs, caps, dems, ws, sizes = [], [], [], [], [], [], []
    flow_offset = link_offset = 0
    any_demand = any(d is not None for d in demand)
    any_weights = any(w is not None for w in weights)
    for i in range(batch):
        f, lk, c, (n_flows, n_links) = _incidence_to_coo(incidence[i], f"incidence[{i}]")
        caps.append(
            _vector(capacity[i], f"capacity[{i}]", n_links, "link", allow_inf=True, hint=_CAPACITY_HINT)
        )
        if any_demand:
            dems.append(
                np.full(n_flows, np.inf)
                if demand[i] is None
                else _vector(demand[i], f"demand[{i}]", n_flows, "flow", allow_inf=True, hint=_DEMAND_HINT)
            )
        if any_weights:
            ws.append(
                np.ones(n_flows)
                if weights[i] is None
                else _vector(weights[i], f"weights[{i}]", n_flows, "flow", allow_inf=False, positive=True)
            )
        flows.append(f + flow_offset)
        links.append(lk + link_offset)
        coefs.append(c)
        sizes.append(n_flows)
        flow_offset += n_flows
        link_offset += n_links
    if batch == 0:
        return []
    rates = _solve(
        np.concatenate(flows),
        np.concatenate(links),
        np.concatenate(coefs),
        np.concatenate(caps),
        flow_offset,
        np.concatenate(ws) if any_weights else None,
        np.concatenate(dems) if any_demand else None,
        backend,
        (np.concatenate([[0], np.cumsum(sizes)]), np.concatenate([[0], np.cumsum([len(c) for c in caps])])),
    )
    return [r.copy() for r in np.split(rates, np.cumsum(sizes)[:-1])]  # type: ignore[arg-type]
