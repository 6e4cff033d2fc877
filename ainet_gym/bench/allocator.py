"""Sections 1 and 2 of the bench: the max-min fair allocator on single instances against the references
(:func:`bench_allocator`) and batched over stacked instances (:func:`bench_batching`).
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

import numpy as np

from ainet_gym.bench.clock import now
from ainet_gym.bench.config import BenchConfig
from ainet_gym.bench.instances import (
    Instance,
    allocator_instances,
    fabric_instance,
    stack_instances,
)
from ainet_gym.bench.progress import Progress
from ainet_gym.bench.timing import rel_err, timeit

__all__ = ["bench_allocator", "bench_batching"]


def _solve_fill(inst: Instance) -> tuple[np.ndarray, int]:
    """The compiled progressive filling (:func:`ainet_gym.sim.backends.numba.fill.solve_fill`) on an instance's entries."""
    from ainet_gym.sim.backends.numba.fill import solve_fill

    order = np.argsort(inst.entry_flow, kind="stable")
    w = np.ones(inst.n_flows) if inst.weights is None else inst.weights
    d = np.full(inst.n_flows, np.inf) if inst.demand is None else inst.demand
    return solve_fill(
        inst.entry_flow[order].astype(np.int64), inst.entry_link[order].astype(np.int64),
        inst.entry_coef[order].astype(np.float64), inst.capacity.astype(np.float64), inst.n_flows,
        np.asarray(w, dtype=np.float64), np.asarray(d, dtype=np.float64),
    )  # fmt: skip


def bench_allocator(cfg: BenchConfig, progress: Progress) -> tuple[list[dict], list[dict]]:
    """Section 1 (allocator against the baselines) and the exactness rows of its instances."""
    from ainet_gym.sim.allocator import max_min_fair
    from ainet_gym.sim.reference import max_min_fair_global_min, max_min_fair_reference_coo
    from ainet_gym.sim.water_filling import solve_coo

    rows: list[dict] = []
    exact: list[dict] = []
    for label, make in allocator_instances(cfg):
        progress.start(f"allocator: {label}")
        t0 = now()
        inst = make()
        build_s = now() - t0
        args = (inst.entry_flow, inst.entry_link, inst.entry_coef, inst.capacity, inst.n_flows)
        kw = {"weights": inst.weights, "demand": inst.demand}
        solve_s, reps, (rates, its) = timeit(
            lambda args=args, kw=kw: solve_coo(*args, **kw, return_iterations=True),
            cfg.min_time_s,
            cfg.max_repeats,
        )
        row: dict[str, Any] = {
            "instance": inst.name,
            "family": inst.family,
            **inst.meta,
            "flows": inst.n_flows,
            "links": inst.n_links,
            "entries": inst.n_entries,
            "build_s": build_s,
            "solve_ms": solve_s * 1e3,
            "solve_repeats": reps,
            "flows_per_s": inst.n_flows / solve_s,
            "iterations": int(its),
        }
        fill_s, _, (fill_rates, _) = timeit(
            lambda inst=inst: _solve_fill(inst), cfg.min_time_s, cfg.max_repeats
        )  # the compiled progressive filling (max_min_fair's numba backend, the engine's exact event mode)
        row.update(fill_ms=fill_s * 1e3, fill_vs_solve_coo=solve_s / fill_s)
        gmin = ref = None
        if inst.n_flows <= cfg.gmin_max_flows:
            g_s, g_reps, (gmin, g_its) = timeit(
                lambda args=args, kw=kw: max_min_fair_global_min(*args, **kw, return_iterations=True),
                cfg.min_time_s,
                cfg.max_repeats,
            )
            row.update(gmin_ms=g_s * 1e3, gmin_iterations=int(g_its), speedup_vs_gmin=g_s / solve_s,
                       fill_vs_gmin=g_s / fill_s)  # fmt: skip
        else:
            row.update(gmin_ms=None, gmin_iterations=None, speedup_vs_gmin=None)
            row["gmin_skipped"] = f"more than {cfg.gmin_max_flows:,} flows (one iteration per level)"
        if inst.n_flows <= cfg.reference_max_flows:
            t0 = now()
            ref, rounds = max_min_fair_reference_coo(*args, **kw, return_iterations=True)
            r_s = now() - t0
            row.update(reference_ms=r_s * 1e3, reference_rounds=rounds, speedup_vs_reference=r_s / solve_s)
        else:
            row.update(reference_ms=None, reference_rounds=None, speedup_vs_reference=None)
            row["reference_skipped"] = f"more than {cfg.reference_max_flows:,} flows (pure Python, too slow)"
        truth, truth_name = (ref, "reference") if ref is not None else (gmin, "global-min")
        if truth is not None:
            errs = {"solve_coo": rel_err(rates, truth), "compiled fill": rel_err(fill_rates, truth)}
            public = max_min_fair(inst.csr(), inst.capacity, demand=inst.demand, weights=inst.weights)
            errs["max_min_fair (sparse)"] = rel_err(public, truth)
            if ref is not None and gmin is not None:
                errs["global-min (numpy)"] = rel_err(gmin, ref)
            row["max_rel_err"] = max(errs.values())
            row["checked_against"] = truth_name
            for mode, e in errs.items():
                exact.append({"mode": mode, "instance": inst.name, "against": truth_name, "max_rel_err": e})
        else:
            row["max_rel_err"] = None
            row["checked_against"] = None
        rows.append(row)
        del inst, rates, gmin, ref
        gc.collect()
        progress.done()
    return rows, exact


def _batching_exactness(pool: list, csrs: list, k: int) -> list[dict]:
    """The public allocator on the first ``k`` instances of the batching pool against the references: the
    sparse form against the pure-Python reference, the stacked dense form against global-min filling."""
    from ainet_gym.sim.allocator import max_min_fair, max_min_fair_batched
    from ainet_gym.sim.reference import max_min_fair_global_min, max_min_fair_reference_coo

    exact: list[dict] = []
    err_ref = max(
        rel_err(
            r,
            max_min_fair_reference_coo(i.entry_flow, i.entry_link, i.entry_coef, i.capacity, i.n_flows),
        )
        for i, r in zip(pool[:k], [max_min_fair(c, i.capacity) for c, i in zip(csrs[:k], pool[:k])])
    )
    exact.append(
        {"mode": "max_min_fair (sparse)", "instance": f"batching pool, {k} instances", "against": "reference",
         "max_rel_err": err_ref}
    )  # fmt: skip
    # the stacked dense form of max_min_fair_batched (batch, flows, links)
    dense = np.stack([c.toarray() for c in csrs[:k]])
    r_dense = max_min_fair_batched(dense, np.stack([i.capacity for i in pool[:k]]))
    err_dense = max(
        rel_err(r_dense[j], max_min_fair_global_min(i.entry_flow, i.entry_link, i.entry_coef, i.capacity,
                                                    i.n_flows))
        for j, i in enumerate(pool[:k])
    )  # fmt: skip
    exact.append(
        {"mode": "max_min_fair_batched (stacked dense)", "instance": f"batching pool, {k} instances",
         "against": "global-min", "max_rel_err": err_dense}
    )  # fmt: skip
    return exact


def bench_batching(cfg: BenchConfig, progress: Progress) -> tuple[list[dict], list[dict]]:
    """Section 2: B independent instances in one call against a loop of single calls."""
    from ainet_gym.sim.allocator import max_min_fair, max_min_fair_batched
    from ainet_gym.sim.water_filling import solve_coo

    rows: list[dict] = []
    exact: list[dict] = []
    progress.start("batching: instances")
    b_max = max(cfg.batch_sizes)
    pool = [fabric_instance("spine_leaf", cfg.batch_instance_gpus, seed=s)[0] for s in range(b_max)]
    csrs = [i.csr() for i in pool]
    progress.done()
    name = f"{pool[0].name} ({pool[0].n_flows} flows), one ECMP seed per instance"
    for b in cfg.batch_sizes:
        progress.start(f"batching: B={b}")
        insts = pool[:b]

        def loop(insts: Sequence[Instance] = insts) -> list[np.ndarray]:
            return [solve_coo(i.entry_flow, i.entry_link, i.entry_coef, i.capacity, i.n_flows) for i in insts]

        stacked = stack_instances(insts)

        def batched(stacked: tuple = stacked) -> np.ndarray:
            return solve_coo(*stacked)

        def loop_public(b: int = b) -> list[np.ndarray]:
            return [max_min_fair(csrs[k], pool[k].capacity) for k in range(b)]

        def batched_public(b: int = b) -> list[np.ndarray]:
            return max_min_fair_batched(csrs[:b], [pool[k].capacity for k in range(b)])

        t_loop, _, r_loop = timeit(loop, cfg.min_time_s, cfg.max_repeats)
        t_bat, _, r_bat = timeit(batched, cfg.min_time_s, cfg.max_repeats)
        t_lp, _, _ = timeit(loop_public, cfg.min_time_s, cfg.max_repeats)
        t_bp, _, r_bp = timeit(batched_public, cfg.min_time_s, cfg.max_repeats)
        cut = np.cumsum([i.n_flows for i in insts])[:-1]
        parts = np.split(r_bat, cut)
        rows.append(
            {
                "batch": b,
                "instance": name,
                "loop_ms_per_instance": t_loop / b * 1e3,
                "batched_ms_per_instance": t_bat / b * 1e3,
                "speedup": t_loop / t_bat,
                "public_loop_ms_per_instance": t_lp / b * 1e3,
                "public_batched_ms_per_instance": t_bp / b * 1e3,
                "public_speedup": t_lp / t_bp,
            }
        )
        err_stack = max(rel_err(p, q) for p, q in zip(parts, r_loop))
        err_pub = max(rel_err(p, q) for p, q in zip(r_bp, r_loop))
        exact.append(
            {"mode": "solve_coo stacked (engine batch)", "instance": f"B={b}", "against": "loop of solve_coo",
             "max_rel_err": err_stack}
        )  # fmt: skip
        exact.append(
            {"mode": "max_min_fair_batched (list)", "instance": f"B={b}", "against": "loop of solve_coo",
             "max_rel_err": err_pub}
        )  # fmt: skip
        progress.done()
    progress.start("batching: exactness")
    exact += _batching_exactness(pool, csrs, min(8, b_max))
    progress.done()
    return rows, exact
