"""``workload.background[].upstream: demand``: a background flow held below its demand is charged its demand on the
links before its bottleneck (docs/model.md, "Background upstream of its bottleneck").

In the max-min fluid model a demand-capped flow carries one rate on every link of its path, so a background flow
squeezed at a downstream port (a checkpoint into slow storage ports) takes only its share upstream too. A paced
sender keeps offering its demand and the excess queues at the bottleneck port, so the links before that port
carry the demand (docs/fidelity-learning.md, issue-27zz (a), issue-27zzp). With ``upstream: demand`` the rates
of an event are solved in two stages (:func:`upstream_rates`):

1. the max-min allocation of today (``share``): rates ``r``;
2. every *charged* flow (a background flow of a ``demand`` source, active, with a finite demand ``d`` and
   ``r < d (1 - UPSTREAM_TOL)``) is split at its bottleneck. Its *bottleneck links* are the links of the flow that
   are saturated in stage 1 (load >= capacity (1 - UPSTREAM_TOL)) and on which no flow has a larger level
   ``rate / weight`` (within UPSTREAM_TOL). On each path p of its split with a share, the links at hops before the
   path's first bottleneck link are *upstream*; a path that crosses no bottleneck link has no upstream links.
   The flow keeps its stage-1 rate ``r`` on its bottleneck and every link after it (a fixed load, taken off
   those links' capacities), and its upstream piece (coefficient on each link: the summed shares of its
   upstream hops there) is a flow of its own with demand ``d`` and the flow's weight. Stage 2 is the max-min
   allocation of the upstream pieces and every other active flow on the capacities left.

The charged flow's rate (the one the engine advances and meters) is ``r``; its upstream piece's rate ``D``
(normally ``d``) is what its upstream links carry, and the link bytes count ``(D - r) x`` the piece's
coefficient on them as well. The excess ``(D - r)`` is queued at the bottleneck without bound while the source is
on (no state, no event of its own: the rule changes the rates only where an allocation changes, at the engine's
events) and is forgotten when the source stops (its drain on the bottleneck is not charged). The numpy backend
runs it; a backend that does not is refused when the units are stacked (:func:`check_upstream`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.scenario.spec import BACKGROUND_UPSTREAM
from ainet_gym.sim.water_filling import solve_coo

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ainet_gym.sim.batch import BatchSim
    from ainet_gym.sim.unit import CompiledUnit

__all__ = [
    "UPSTREAM_TOL",
    "UpstreamPlan",
    "UpstreamRates",
    "check_upstream",
    "demand_sources",
    "upstream_plan",
    "upstream_rates",
]

#: a flow is held below its demand when its rate is below demand x (1 - this); a link is saturated when its load
#: is within this fraction of its capacity; a flow is bottlenecked there when its level is within this fraction
#: of the link's largest
UPSTREAM_TOL = 1e-9


def _demand_mode(unit: CompiledUnit) -> bool:
    return unit.is_background and unit.bg_spec is not None and unit.bg_spec.upstream == "demand"


def check_upstream(units: Sequence[Sequence[CompiledUnit]], modes: tuple[str, ...], backend: str) -> None:
    """Refuse a background source whose ``upstream`` the backend does not run (``modes``: the backend's
    :attr:`~ainet_gym.sim.backends.base.SimBackend.background_upstream`)."""
    for inst in units:
        for u in inst:
            if u.is_background and u.bg_spec is not None and u.bg_spec.upstream not in modes:
                m = re.match(r"background(\d+):", u.name)
                where = f"workload.background[{m.group(1)}].upstream" if m else f"{u.name}: upstream"
                raise ValueError(
                    f"{where} = {u.bg_spec.upstream!r}: not built on backend {backend!r}; allowed on it: "
                    f"{', '.join(modes)} (all: {', '.join(BACKGROUND_UPSTREAM)}; 'demand' runs on the numpy "
                    "backend: backend='numpy' or AINET_GYM_BACKEND=numpy)"
                )


@dataclass(frozen=True)
class UpstreamPlan:
    """The hops of the flows of ``upstream: demand`` sources under the interval's split (fixed within it): one
    row per (flow, path with a share, hop)."""

    flows: np.ndarray  # (K,) int64 global ids of the flows of demand sources, sorted
    row_flow: np.ndarray  # (rows,) int64 flow of each row
    row_group: np.ndarray  # (rows,) int64 its (flow, path) group
    row_hop: np.ndarray  # (rows,) int64 hop index along the path
    row_link: np.ndarray  # (rows,) int64 global link id
    row_coef: np.ndarray  # (rows,) float64 the path's coefficient (its share under the split)
    n_groups: int


def demand_sources(sim: BatchSim) -> np.ndarray:
    """(units,) bool: which of ``sim``'s stacked units are background sources with ``upstream: demand``."""
    units = sim.flat_units
    return np.fromiter((_demand_mode(u) for u in units), dtype=bool, count=len(units))


def upstream_plan(sim: BatchSim, demand_unit: np.ndarray | None = None) -> UpstreamPlan | None:
    """The :class:`UpstreamPlan` of ``sim``'s current split, or None when no source has ``upstream: demand``
    (the engine then runs as without the field, bit for bit). ``demand_unit``: :func:`demand_sources` of
    ``sim`` (None: found here)."""
    demand_unit = demand_sources(sim) if demand_unit is None else demand_unit
    if not demand_unit.any():
        return None
    flows = np.flatnonzero(sim.flow_bg & demand_unit[sim.flow_unit]).astype(np.int64)
    members = np.flatnonzero(np.isin(sim.member_flow, flows))
    conn = sim.member_conn[members]
    paths = sim.conn_paths_global[conn]  # (members, P, H), hop order, -1 padded
    # (members, P) the coefficients the merge gives them (BatchSplit._coefficients): the split, or 1 where a path
    # has a share on the connections of routing.part_share per_part units
    split = np.asarray(sim.engine_state.split, dtype=np.float64)[conn]
    one = sim.unit_part_one[sim.conn_unit[conn]]
    coef = np.where(one[:, None], (split > 0) * 1.0, split)
    mi, pi, hi = np.nonzero((paths >= 0) & (coef[:, :, None] > 0))
    group = mi * paths.shape[1] + pi
    _, group = np.unique(group, return_inverse=True)
    return UpstreamPlan(
        flows=flows,
        row_flow=sim.member_flow[members][mi].astype(np.int64),
        row_group=group.astype(np.int64),
        row_hop=hi.astype(np.int64),
        row_link=paths[mi, pi, hi].astype(np.int64),
        row_coef=coef[mi, pi],
        n_groups=int(group.max(initial=-1)) + 1,
    )


@dataclass(frozen=True)
class UpstreamRates:
    """What :func:`upstream_rates` returns: the rates the engine uses and the upstream excess the links carry."""

    rates: np.ndarray  # (active flows,) stage 2's rates; a charged flow's: its stage-1 rate r
    extra_link: np.ndarray  # (upstream entries,) global link of each charged flow's upstream entry
    extra_rate: np.ndarray  # (upstream entries,) bytes/s it carries beyond r x its coefficient: (D - r) x u


def _in_sorted(keys: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each of ``q`` is in the sorted ``keys``, and its index there (0 where it is not)."""
    if keys.size == 0:
        return np.zeros(q.shape, dtype=bool), np.zeros(q.shape, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, q), keys.size - 1)
    return keys[at] == q, at


def upstream_rates(
    plan: UpstreamPlan,
    act_idx: np.ndarray,
    ef: np.ndarray,
    el: np.ndarray,
    ec: np.ndarray,
    cap: np.ndarray,
    rates: np.ndarray,
    demand: np.ndarray,
    weight: np.ndarray | None,
) -> UpstreamRates | None:
    """Stage 2 of the module docstring. ``act_idx``: (active,) global ids of the active flows (sorted); ``ef``,
    ``el``, ``ec``: their merged entries (``ef`` compact, an index into ``act_idx``); ``cap``: global link
    capacities; ``rates``: stage 1's (active,); ``demand``, ``weight``: (active,) (``weight`` None: all 1).
    None when no flow is charged (stage 1's rates stand)."""
    if act_idx.size == 0:
        return None
    on, pos = _in_sorted(act_idx, plan.flows)
    if not on.any():
        return None
    cpos = pos[on]  # compact ids of the active flows of demand sources
    held = np.isfinite(demand[cpos]) & (rates[cpos] < demand[cpos] * (1.0 - UPSTREAM_TOL))
    charged = cpos[held]
    if charged.size == 0:
        return None
    n_act = act_idx.shape[0]
    n_links = cap.shape[0]
    w = np.ones(n_act) if weight is None else weight
    load = np.bincount(el, weights=ec * rates[ef], minlength=n_links)
    saturated = load >= cap * (1.0 - UPSTREAM_TOL)
    level = rates / w
    top = np.zeros(n_links)
    np.maximum.at(top, el, level[ef])
    bn = saturated[el] & (level[ef] >= top[el] * (1.0 - UPSTREAM_TOL))
    bn_key = np.sort(act_idx[ef[bn]] * n_links + el[bn])
    # the rows of the charged flows: the first bottleneck hop of each (flow, path), the hops before it upstream
    is_charged = np.zeros(n_act, dtype=bool)
    is_charged[charged] = True
    in_act, rflow_c = _in_sorted(act_idx, plan.row_flow)
    rows = in_act & is_charged[rflow_c]
    rkey = plan.row_flow * n_links + plan.row_link
    row_bn = rows & _in_sorted(bn_key, rkey)[0]
    first = np.full(plan.n_groups, np.inf)
    np.minimum.at(first, plan.row_group, np.where(row_bn, plan.row_hop, np.inf))
    # a path without a bottleneck link has first = inf: no upstream hop
    up_row = rows & np.isfinite(first[plan.row_group]) & (plan.row_hop < first[plan.row_group])
    # the upstream coefficient of each charged entry: its upstream rows' shares summed per (flow, link)
    e_key = act_idx[ef] * n_links + el
    u_key, u_inv = np.unique(rkey[up_row], return_inverse=True)
    u_val = np.bincount(u_inv, weights=plan.row_coef[up_row], minlength=u_key.shape[0])
    e_ch = is_charged[ef]
    found, at = _in_sorted(u_key, e_key)
    u_e = np.where(e_ch & found, u_val[at] if u_val.size else 0.0, 0.0)
    u_e = np.minimum(u_e, ec)  # the shares of a flow's hops on a link sum to its merged coefficient there
    fixed = np.bincount(el[e_ch], weights=(ec[e_ch] - u_e[e_ch]) * rates[ef[e_ch]], minlength=n_links)
    cap2 = np.maximum(cap - fixed, 0.0)
    keep = ~e_ch | (u_e > 0)
    coef2 = np.where(e_ch, u_e, ec)
    rates2 = solve_coo(ef[keep], el[keep], coef2[keep], cap2, n_act, weights=weight, demand=demand)
    out = np.where(is_charged, rates, rates2)
    up = e_ch & (u_e > 0)
    extra = (rates2[ef[up]] - rates[ef[up]]) * u_e[up]
    return UpstreamRates(rates=out, extra_link=el[up], extra_rate=extra)
