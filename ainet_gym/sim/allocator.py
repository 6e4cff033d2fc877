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
reference of the simulator's numpy backend); :func:`prepare_incidence` checks an incidence once into a
:class:`PreparedIncidence` that :func:`max_min_fair` takes without checking it again (for a loop of solves
of one matrix or of subsets of its flows, :meth:`PreparedIncidence.rows`).

Backends: the public functions take ``backend=None|"numba"|"numpy"`` with the rule of the envs
(:func:`ainet_gym.sim.backends.resolve_backend`: the keyword, else ``$AINET_GYM_BACKEND``, else ``numba`` when
it imports). ``numba`` solves by sequential progressive filling with a heap of link shares
(:func:`ainet_gym.sim.backends.numba.fill.fill_levels`: each flow frozen once, O(entries log links)); ``numpy`` by the
parallel rule above (:func:`solve_coo`). Both are exact; their rates agree to round-off (1e-12 relative on
the test instances; the contract is 1e-9).

Modules: this one is the public API and the backend choice (:func:`max_min_fair`, :func:`max_min_fair_batched`,
the batched forms' shapes); the numpy solver is :mod:`ainet_gym.sim.water_filling` (:func:`solve_coo`,
re-exported here, the same object) and the input checks :mod:`ainet_gym.sim.allocator_checks`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ainet_gym.sim.allocator_checks import (
    CAPACITY_HINT,
    DEMAND_HINT,
    PreparedIncidence,
    as_float_array,
    check_values,
    checked_vector,
    incidence_to_coo,
    issparse,
    prepare_incidence,
)
from ainet_gym.sim.water_filling import FloatArray, solve_coo

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["PreparedIncidence", "max_min_fair", "max_min_fair_batched", "prepare_incidence", "solve_coo"]


def max_min_fair(
    incidence: npt.ArrayLike | sp.spmatrix | sp.sparray | PreparedIncidence,
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
        sparse matrix add. Or a :class:`PreparedIncidence` (:func:`prepare_incidence`): a matrix checked
        and converted once, for many solves of it or of subsets of its flows (``prepared.rows(idx)``); its
        solve equals the matrix's bit for bit, without the per-call check and conversion.
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
    prepare_incidence : an incidence checked once, for repeated solves.

    Examples
    --------
    Keshav's single-link example: capacity 10 shared by demands 2, 2.6, 4 and 5.

    >>> max_min_fair([[1], [1], [1], [1]], [10.0], demand=[2, 2.6, 4, 5]).round(6).tolist()
    [2.0, 2.6, 2.7, 2.7]

    Weighted sharing of one link of capacity 6:

    >>> max_min_fair([[1], [1], [1]], [6.0], weights=[1, 2, 3]).tolist()
    [1.0, 2.0, 3.0]
    """
    flow, link, coef, (n_flows, n_links) = incidence_to_coo(incidence, "incidence")
    cap = checked_vector(capacity, "capacity", n_links, "link", allow_inf=True, hint=CAPACITY_HINT)
    dem = None
    if demand is not None:
        dem = checked_vector(demand, "demand", n_flows, "flow", allow_inf=True, hint=DEMAND_HINT)
    w = None
    if weights is not None:
        w = checked_vector(weights, "weights", n_flows, "flow", allow_inf=False, positive=True)
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
    arr = as_float_array(x, name)
    if arr.shape != (n,) and arr.shape != (batch, n):
        raise ValueError(
            f"{name} has shape {arr.shape}; expected ({batch}, {n}) (batch, {what}s) or ({n},) shared"
        )
    check_values(arr, name, allow_inf=allow_inf, positive=positive, hint=hint)
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
        Stacked dense form, or a list (or tuple) of per-instance matrices, dense or scipy.sparse (or
        :class:`PreparedIncidence`), whose sizes may differ. Same meaning and rules as in :func:`max_min_fair`.
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
    if issparse(incidence) or isinstance(incidence, PreparedIncidence):
        kind = "sparse matrix" if issparse(incidence) else "PreparedIncidence"
        raise ValueError(
            f"incidence: a single {kind} is one instance; pass a list of matrices, or call "
            "max_min_fair on a block-diagonal matrix"
        )
    inc = as_float_array(incidence, "incidence")
    if inc.ndim != 3:
        raise ValueError(
            f"incidence must be 3-D (batch, flows, links) or a list of 2-D matrices; got shape {inc.shape}"
        )
    check_values(inc, "incidence", allow_inf=False)
    batch, n_flows, n_links = inc.shape
    cap = _batched_vectors(capacity, "capacity", batch, n_links, "link", allow_inf=True, hint=CAPACITY_HINT)
    dem = None
    if demand is not None:
        dem = _batched_vectors(
            demand, "demand", batch, n_flows, "flow", allow_inf=True, hint=DEMAND_HINT
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
        f, lk, c, (n_flows, n_links) = incidence_to_coo(incidence[i], f"incidence[{i}]")
        caps.append(
            checked_vector(capacity[i], f"capacity[{i}]", n_links, "link", allow_inf=True, hint=CAPACITY_HINT)
        )
        if any_demand:
            dems.append(
                np.full(n_flows, np.inf)
                if demand[i] is None
                else checked_vector(
                    demand[i], f"demand[{i}]", n_flows, "flow", allow_inf=True, hint=DEMAND_HINT
                )
            )
        if any_weights:
            ws.append(
                np.ones(n_flows)
                if weights[i] is None
                else checked_vector(
                    weights[i], f"weights[{i}]", n_flows, "flow", allow_inf=False, positive=True
                )
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
