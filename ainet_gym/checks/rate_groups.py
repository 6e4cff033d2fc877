"""Bottleneck groups of the exact max-min rates, event by event: what a per-group rate clock would save.

The lazy exact kernel (:func:`ainet_gym.sim.backends.numba.lazy.run_interval_lazy`) writes every flow whose rate an event
changes. A *bottleneck group* is the set of flows frozen at the same level by the same saturated link (a
flow's bottleneck: a saturated link on which no flow has a higher level, the max-min certificate of
Bertsekas and Gallager, *Data Networks*, 6.5.2); a flow at its demand is a group of its own. If the rates
were held per group (one service clock per group), an event would cost one update per group whose level
changed plus one per flow that changes group, arrives or leaves, instead of one per changed rate. This
module measures both on the numpy reference's rates (a full re-solve per event), for the design of such a
representation (docs/engine-alltoall.md, "Bottleneck groups of interval 5"); nothing in the engine uses it.

Group assignment is sticky, as a group clock would keep it: a flow keeps its last group while that link is
still one of its bottlenecks (ties: a flow at the top of two saturated links), else it takes its
lowest-index bottleneck link. A flow with no bottleneck and below its demand is
:data:`NO_BOTTLENECK`: the allocation is then not max-min fair (a check of the rates, too).

Command (the 1,024-GPU AllToAll of the bench; intervals before ``--interval`` on the compiled backend,
then that interval on the numpy backend from a snapshot)::

    python -m ainet_gym.checks.rate_groups --interval 5 --events 1000
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "COLUMNS",
    "NO_BOTTLENECK",
    "RTOL",
    "RateGroupTrace",
    "bottleneck_groups",
    "rate_groups_main",
    "trace_rate_groups",
]

#: relative tolerance of "saturated" (load >= capacity (1 - RTOL)), "at the top level of a link" and
#: "at its demand"; a rate "changed" when it moved by more than 1e-12 relative (the kernels' count)
RTOL = 1e-9
CHANGE_RTOL = 1e-12
#: the group of a flow below its demand without a bottleneck (not max-min fair)
NO_BOTTLENECK = int(np.iinfo(np.int64).max)
#: one row per solve after the first of the interval
COLUMNS = (
    "active",  # flows active at the solve
    "arrived",  # of them, not active at the previous solve
    "departed",  # active at the previous solve, not at this one
    "rates_changed",  # flows active at both whose rate moved by more than CHANGE_RTOL relative
    "changed_group_kept",  # of them, in the same group as at the previous solve
    "group_moved",  # flows active at both whose group changed (rate changed or not)
    "groups_level_changed",  # distinct kept groups among the flows of changed_group_kept
    "groups",  # distinct groups among the active flows
    "distinct_rates",  # distinct rates among the active flows (bitwise)
    "no_bottleneck",  # flows below their demand without a bottleneck (0 for max-min rates)
    "changed_entries",  # incidence entries of the flows of rates_changed (what a per-flow re-fill touches)
    "group_links_changed",  # distinct (group, link) pairs of the groups of groups_level_changed, over all
    # their flows' entries (what a fill over groups, each group one flow of summed coefficients, touches)
)


def bottleneck_groups(
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    entry_coef: np.ndarray,
    capacity: np.ndarray,
    rates: np.ndarray,
    demand: np.ndarray | None = None,
    prev_group: np.ndarray | None = None,
    rtol: float = RTOL,
) -> np.ndarray:
    """(flows,) int64: each flow's bottleneck group for the rates ``rates`` (unit weights, as the
    simulator's flows): the index of a saturated link on which it is at the largest rate (the previous
    group ``prev_group[f]`` if it is still one, else the lowest such link), ``-2 - f`` for a flow at its
    demand that has no such link, :data:`NO_BOTTLENECK` for a flow with neither.

    ``entry_*``: the incidence as COO entries (flow, link, coefficient: traffic per unit of rate), flows
    ``0..len(rates) - 1``; ``capacity`` (links,), ``np.inf`` for an unconstrained link."""
    rates = np.asarray(rates, dtype=np.float64)
    n = rates.shape[0]
    ef = np.asarray(entry_flow, dtype=np.int64)
    el = np.asarray(entry_link, dtype=np.int64)
    ec = np.asarray(entry_coef, dtype=np.float64)
    cap = np.asarray(capacity, dtype=np.float64)
    if not (ef.shape == el.shape == ec.shape):
        raise ValueError(
            f"bottleneck_groups: entry_flow, entry_link and entry_coef have shapes {ef.shape}, {el.shape} and "
            f"{ec.shape}: they must be equal (one COO entry each)"
        )
    if ef.size and (ef.min() < 0 or ef.max() >= n):
        raise ValueError(f"bottleneck_groups: entry_flow holds {ef.min()}..{ef.max()}, allowed 0..{n - 1}")
    n_links = cap.shape[0]
    if el.size and (el.min() < 0 or el.max() >= n_links):
        raise ValueError(
            f"bottleneck_groups: entry_link holds {el.min()}..{el.max()}, allowed 0..{n_links - 1}"
        )
    load = np.bincount(el, weights=ec * rates[ef], minlength=n_links)
    sat = np.isfinite(cap) & (load >= cap * (1.0 - rtol))
    top = np.full(n_links, -np.inf)
    np.maximum.at(top, el, np.where(ec > 0, rates[ef], -np.inf))
    cand = sat[el] & (ec > 0) & (rates[ef] >= top[el] * (1.0 - rtol))
    ce = np.flatnonzero(cand)
    grp = np.full(n, NO_BOTTLENECK, dtype=np.int64)
    np.minimum.at(grp, ef[ce], el[ce])
    if prev_group is not None:
        pg = np.asarray(prev_group, dtype=np.int64)
        keep_e = el[ce] == pg[ef[ce]]
        grp[ef[ce][keep_e]] = pg[ef[ce][keep_e]]
    if demand is not None:
        dem = np.asarray(demand, dtype=np.float64)
        at_dem = np.isfinite(dem) & (rates >= dem * (1.0 - rtol)) & (grp == NO_BOTTLENECK)
        grp[at_dem] = -2 - np.flatnonzero(at_dem)
    return grp


@dataclass(frozen=True)
class RateGroupTrace:
    """The per-solve counts of :func:`trace_rate_groups`: ``rows`` (solves, len(:data:`COLUMNS`)) int64,
    one row per solve after the first of the interval; ``events`` run (the cap if ``capped``); ``cpu_s``
    of the process for the interval (the numpy re-solves and the counting)."""

    rows: np.ndarray
    events: int
    capped: bool
    cpu_s: float

    def column(self, name: str) -> np.ndarray:
        """One column of ``rows`` by its name in :data:`COLUMNS`."""
        if name not in COLUMNS:
            raise ValueError(f"RateGroupTrace.column: name = {name!r}, allowed {', '.join(COLUMNS)}")
        return self.rows[:, COLUMNS.index(name)]

    def per_flow_updates(self) -> int:
        """Rate writes of a per-flow representation: the changed rates and the arrivals (sum over solves)."""
        return int(self.column("rates_changed").sum() + self.column("arrived").sum())

    def per_group_updates(self) -> int:
        """Updates of a group clock: a level change per group, plus each flow that changed group, arrived
        or left (sum over solves)."""
        return int(
            sum(self.column(c).sum() for c in ("groups_level_changed", "group_moved", "arrived", "departed"))
        )

    def summary(self) -> str:
        """The table the command prints: sum, mean, median and max of each column, then the two totals."""
        lines = [f"{'per solve':22s} {'sum':>14s} {'mean':>10s} {'median':>8s} {'max':>8s}"]
        for j, c in enumerate(COLUMNS):
            x = self.rows[:, j] if self.rows.size else np.zeros(1, dtype=np.int64)
            lines.append(
                f"{c:22s} {int(x.sum()):>14,d} {x.mean():>10.1f} {np.median(x):>8.0f} {int(x.max()):>8,d}"
            )
        pf, pg = self.per_flow_updates(), self.per_group_updates()
        ce, gl = int(self.column("changed_entries").sum()), int(self.column("group_links_changed").sum())
        lines.append(
            f"per-flow rate writes {pf:,d}; group-clock updates {pg:,d} (ratio {pf / max(pg, 1):.1f}); "
            f"{self.rows.shape[0]:,d} solves, {self.events:,d} events{' (capped)' if self.capped else ''}, "
            f"{self.cpu_s:.1f} s CPU\nentries of the changed flows {ce:,d}; (group, link) pairs of the groups whose "
            f"level changed {gl:,d} (ratio {ce / max(gl, 1):.1f})"
        )
        return "\n".join(lines)


def _active_now(sim: Any) -> np.ndarray:
    """The flows the reference solves for at this moment of a batch-1 simulation: the numpy backend's rule
    (a job flow whose phase runs and has paid its latency and has bytes left; a background flow switched
    on), read from the state; :func:`_wrapped_reference` checks it against the solve's flow count."""
    from ainet_gym.sim.engine import EPS_T
    from ainet_gym.sim.state import RUNNING

    st = sim.state
    ready = np.append((st.phase_state == RUNNING) & (st.phase_lat_left <= EPS_T), False)
    return np.flatnonzero((ready[sim.flow_gphase] & (st.rem > 0)) | (sim.flow_bg & st.bg_on[sim.flow_unit]))


@contextlib.contextmanager
def _wrapped_reference(sim: Any, rows: list[tuple[int, ...]], rtol: float) -> Iterator[None]:
    """The numpy backend's solver wrapped so that each solve is counted (``rows``)."""
    from ainet_gym.sim.backends import numpy_ref

    solve0 = numpy_ref.solve_coo
    n_flows = sim.n_flows
    prev_rate = np.full(n_flows, np.nan)  # nan: not active at the last solve
    prev_grp = np.full(n_flows, -1, dtype=np.int64)
    first = [True]

    def solve(ef: np.ndarray, el: np.ndarray, ec: np.ndarray, cap: np.ndarray, n: int, **kw: Any) -> Any:
        out = solve0(ef, el, ec, cap, n, **kw)
        rates = out[0] if isinstance(out, tuple) else out
        g_act = _active_now(sim)
        if g_act.shape[0] != n:
            raise RuntimeError(
                f"trace_rate_groups: the numpy backend solved {n} flows, its active rule as read here gives "
                f"{g_act.shape[0]}: the reference's rule changed; update _active_now"
            )
        pg = prev_grp[g_act]
        grp = bottleneck_groups(ef, el, ec, cap, rates, kw.get("demand"), pg, rtol)
        own = grp <= -2  # a flow at its demand: its own group, named by its global flow id across solves
        grp[own] = -2 - g_act[-2 - grp[own]]
        pr = prev_rate[g_act]
        was = ~np.isnan(pr)
        changed = was & (np.abs(rates - pr) > CHANGE_RTOL * np.maximum(np.abs(pr), np.abs(rates)))
        moved = was & (grp != pg)
        kept = changed & ~moved
        now = np.zeros(n_flows, dtype=bool)
        now[g_act] = True
        departed = int((~now[np.flatnonzero(~np.isnan(prev_rate))]).sum())
        ch_e = changed[ef]
        in_g = np.isin(grp[ef], np.unique(grp[kept])) & (grp[ef] != NO_BOTTLENECK)
        pair = (grp[ef[in_g]] + n_flows + 2) * cap.shape[0] + el[in_g]
        if not first[0]:
            rows.append((
                n, int((~was).sum()), departed, int(changed.sum()), int(kept.sum()), int(moved.sum()),
                np.unique(grp[kept]).size, np.unique(grp).size, np.unique(rates).size,
                int((grp == NO_BOTTLENECK).sum()), int(ch_e.sum()), np.unique(pair).size,
            ))  # fmt: skip
        first[0] = False
        prev_rate[:] = np.nan
        prev_rate[g_act] = rates
        prev_grp[:] = -1
        prev_grp[g_act] = grp
        return out

    numpy_ref.solve_coo = solve
    try:
        yield
    finally:
        numpy_ref.solve_coo = solve0


def trace_rate_groups(world: Any, max_events: int = 1000, rtol: float = RTOL) -> RateGroupTrace:
    """Step ``world`` (a :class:`~ainet_gym.sim.world.FabricWorld` of batch 1 on the numpy backend) one
    interval with its default split, at most ``max_events`` events, counting each solve's rates and
    bottleneck groups against the previous solve's (:data:`COLUMNS`). A capped interval stops there
    (:class:`~ainet_gym.sim.engine.TooManyEvents` caught): the world's state is then mid-interval, so use it
    no further."""
    from ainet_gym.sim.engine import TooManyEvents

    if getattr(world, "backend", None) != "numpy":
        raise ValueError(
            f"trace_rate_groups: world.backend = {getattr(world, 'backend', None)!r}; the trace reads the numpy "
            "backend's solves, so 'numpy' is needed"
        )
    if world.batch != 1:
        raise ValueError(f"trace_rate_groups: world.batch = {world.batch}, allowed 1")
    if max_events < 1:
        raise ValueError(f"trace_rate_groups: max_events = {max_events}, allowed >= 1")
    sim = world.sim
    if sim is None:
        raise ValueError("trace_rate_groups: the world has no state yet (reset it first)")
    rows: list[tuple[int, ...]] = []
    t0 = time.process_time()
    with _wrapped_reference(sim, rows, rtol):
        try:
            res = world.step(world.default_split(), max_events=max_events)
            events, capped = int(res.events), False
        except TooManyEvents:
            events, capped = max_events, True
    arr = np.array(rows, dtype=np.int64).reshape(-1, len(COLUMNS))
    return RateGroupTrace(rows=arr, events=events, capped=capped, cpu_s=time.process_time() - t0)


def rate_groups_main(argv: Sequence[str] | None = None) -> int:
    """The command: the bench's AllToAll instance (``--gpus``, ``--jobs`` x ``--job-gpus``), static ECMP from
    reset; the intervals before ``--interval`` on the compiled backend (numpy without numba), then that
    interval on the numpy backend, traced for at most ``--events`` events."""
    from ainet_gym.agents.arg_types import int_arg
    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's

    ap = OneLineParser(prog="python -m ainet_gym.checks.rate_groups", description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int_arg(1), default=1024)
    ap.add_argument("--jobs", type=int_arg(1), default=8)
    ap.add_argument("--job-gpus", type=int_arg(1), default=128)
    ap.add_argument(
        "--interval", type=int_arg(1), default=5, help="the interval traced (1: the first from reset)"
    )
    ap.add_argument("--events", type=int_arg(1), default=1000, help="at most this many events of it")
    a = ap.parse_args(argv)
    from ainet_gym.agents.module_cli import run_module_cli

    return run_module_cli("python -m ainet_gym.checks.rate_groups", lambda: _rate_groups_run(a))


def _rate_groups_run(a: argparse.Namespace) -> int:
    """The parsed command of :func:`rate_groups_main`."""
    from ainet_gym.bench.instances import cluster_scenario
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.backends.numba.jit import HAVE_NUMBA
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario(cluster_scenario(a.gpus, a.jobs, a.job_gpus, op="alltoall"))
    pre = FabricWorld(sc, 1, backend="numba" if HAVE_NUMBA else "numpy")
    pre.reset(seeds=[0])
    for _ in range(a.interval - 1):
        pre.step(pre.default_split())
    world = FabricWorld(sc, 1, backend="numpy")
    world.reset(seeds=[0])
    world.restore(pre.snapshot())
    tr = trace_rate_groups(world, a.events)
    print(f"{sc.name}, interval {a.interval}, at most {a.events} events (numpy re-solve per event)")
    print(tr.summary())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(rate_groups_main())
