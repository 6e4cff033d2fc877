"""The benchmark suite: allocator, batching, environments, scaling.

Run ``ainet-gym bench [--quick] [--out DIR]`` or ``python -m ainet_gym.bench [--quick] [--out DIR]``. It prints
tables on the terminal (a progress bar on stderr while it runs), and writes ``DIR/bench.json`` (every figure),
``DIR/scaling.png`` (cost of one decision interval against fabric size and transfers) and ``DIR/bench.md``
(the tables with the command and the machine, ready to quote in the README). ``--quick`` runs the small sizes
only (under a minute on a 2-core CPU); the full run takes a few minutes.

What is measured
----------------
1. **Allocator.** :func:`ainet_gym.sim.allocator.solve_coo` (the engine's hot path) against two baselines run in
   the same process on the same instances: :func:`progressive_filling_py`, a deliberately simple pure-Python
   progressive filling (all active flows rise together to the next saturation, the flows that hit it
   freeze; the algorithm of :func:`ainet_gym.sim.reference.max_min_fair_reference` on adjacency lists, because
   the dense list-of-lists version costs O(rounds x flows x links) and already takes seconds at 1,000
   flows), and :func:`ainet_gym.sim.reference.max_min_fair_global_min`, numpy progressive filling that freezes
   only the flows at the global minimum level each iteration. Instances:

   * *fabric-shaped* (:func:`fabric_instance`): the real incidence the engine builds (``compile_job`` ->
     ``BatchSim.set_split`` with static ECMP hashing) for a snapshot of 3D-parallel MoE training on every
     GPU of a 2:1 spine-leaf or a fat-tree: per host a tensor-parallel ring AllReduce over NVLink; per
     group of 8 hosts spread over the leaves and per local rank, a data-parallel ring AllReduce and an
     expert-parallel AllToAll over the 8 GPUs; and a pipeline-parallel ``sendrecv shift`` to the same local
     rank of the next host (on another leaf). All of them communicate at once. On 1,024 GPUs this is
     8,448 flows (ring AllReduce flows are coupled rings: one flow per ring).
   * *random tiered* (:func:`tiered_instance`): random flows over a 3-tier link set (access up / down,
     aggregation, core) with mixed link speeds, 5% of flows crossing a link twice, weights in {1, 2, 4}
     and 20% demand-capped flows, so weighted and capped max-min are exercised too.

   Reported: ms per solve (best of repeats), flows per second, iterations per solve, the speed-ups, and
   the largest relative difference to the reference.
2. **Exactness.** Every mode that claims max-min fairness (``solve_coo``, ``max_min_fair`` on a sparse
   matrix, ``max_min_fair_batched`` in list and stacked form, the engine's stacked ``solve_coo`` and the
   global-min baseline) is compared with the pure-Python reference (or, where that is skipped for size,
   with the global-min filling) to 1e-9 relative.
3. **Batching.** One ``solve_coo`` over B stacked independent instances (the engine's batched form) and the
   public ``max_min_fair_batched`` against a Python loop over the single call.
4. **Environments.** Env steps per second of :class:`~ainet_gym.envs.env.FabricRoutingEnv` and of the native
   :class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` (default ``split`` action mode, random actions,
   autoreset included) on the default scenario and on 1,024 / 4,096 / 16,384-GPU scenarios; construction
   time (topology; env with every candidate path, compiled job and ideal step time, and the first reset)
   and peak resident memory, each size in a fresh subprocess.
5. **Scaling.** Wall time of one decision interval (``FabricWorld.step`` with the static ECMP split)
   against fabric size (128 to 16,384 GPUs, 8 data-parallel ring AllReduce jobs of N/8 GPUs), against the
   number of transfers on a fixed 1,024-GPU fabric (8 expert-parallel AllToAll jobs whose size grows, so
   transfers grow as p(p-1)), and against the number of independently clocked jobs sharing the same GPUs
   (events, and so allocator calls, grow with the jobs), with fitted log-log exponents.

Large scenarios: a shipped scenario with the wanted number of GPUs is used when one exists; otherwise
:func:`cluster_scenario` builds one (a 2:1 spine-leaf of 8-GPU hosts running 8 data-parallel ring
AllReduce jobs of N/8 GPUs spread over the leaves, 60-130 ms of compute, so the jobs drift).

Speed is never asserted in the tests; the targets of the issue are printed beside each figure with PASS or
MISS and the ratio to the target.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gc
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "BenchConfig",
    "Instance",
    "bench_main",
    "cluster_scenario",
    "fabric_instance",
    "progressive_filling_py",
    "run_bench",
    "spine_leaf_shape",
    "tiered_instance",
]

EXACT_RTOL = 1e-9
SECTIONS = ("allocator", "batching", "env", "construction", "startup", "scaling")


# ----------------------------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchConfig:
    """What the bench runs. :meth:`quick` and :meth:`full` are the two presets of the command line."""

    quick: bool = False
    #: GPU counts of the fabric-shaped allocator instances on a 2:1 spine-leaf.
    spine_leaf_gpus: tuple[int, ...] = (64, 1024, 16384)
    #: k of the fabric-shaped allocator instances on a fat-tree (k=8: 128 GPUs, k=16: 1,024).
    fat_tree_k: tuple[int, ...] = (8, 16)
    #: flow counts of the random tiered allocator instances.
    tiered_flows: tuple[int, ...] = (1_000, 10_000, 100_000)
    #: the pure-Python reference is skipped on larger instances (it needs one pass per bottleneck level).
    reference_max_flows: int = 10_000
    #: the numpy global-min filling is skipped on larger instances (one iteration per bottleneck level).
    gmin_max_flows: int = 50_000
    #: batch sizes of the batching section, and the GPUs of its (fabric-shaped) instances.
    batch_sizes: tuple[int, ...] = (1, 8, 64, 256)
    batch_instance_gpus: int = 64
    #: environment sizes (0 = the default scenario) and the batch sizes of the vector env at each size.
    env_sizes: tuple[tuple[int, tuple[int, ...]], ...] = (
        (0, (1, 16, 64, 256)),
        (1024, (1, 16, 64, 256)),
        (4096, (1, 16, 64)),
        (16384, (1, 16)),
    )
    #: simulation backends of the environment section, side by side (the first is the headline one).
    env_backends: tuple[str, ...] = ("numba", "numpy")
    #: the numpy backend is measured only up to this many GPUs (it is the slow reference).
    numpy_env_max_gpus: int = 128
    #: sizes whose construction time and peak memory are probed in a subprocess (0 = default scenario).
    construction_gpus: tuple[int, ...] = (0, 1024, 4096, 16384)
    #: scenario size (0 = default) of the start-up probe: cold start (empty kernel cache) and cached start.
    startup_gpus: int = 0
    #: include the cold start (kernels compiled into an empty cache: ~10 s of CPU); else only the start
    #: with the machine's own kernel cache.
    startup_cold: bool = True
    #: fabric sizes of the scaling curve (8 ring AllReduce jobs of N/8 GPUs) ...
    scaling_gpus: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
    #: ... the fixed fabric and the AllToAll job sizes of the transfers curve (8 jobs) ...
    transfers_fabric_gpus: int = 1024
    transfers_job_gpus: tuple[int, ...] = (8, 16, 32, 64, 128)
    #: ... and the job counts of the jobs curve (ring AllReduce jobs sharing the fixed fabric's GPUs).
    scaling_jobs: tuple[int, ...] = (8, 16, 32, 64, 128)
    #: minimum measured time per figure (seconds); repeats stop after this much or max_repeats.
    min_time_s: float = 0.5
    max_repeats: int = 25
    #: sections to run.
    sections: tuple[str, ...] = SECTIONS

    @classmethod
    def full(cls) -> BenchConfig:
        return cls()

    @classmethod
    def quick_preset(cls) -> BenchConfig:
        return cls(
            quick=True,
            spine_leaf_gpus=(64, 1024),
            fat_tree_k=(8,),
            tiered_flows=(1_000,),
            batch_sizes=(1, 8, 64, 256),
            env_sizes=((0, (1, 16, 64)), (1024, (1, 16))),
            construction_gpus=(0, 1024),
            scaling_gpus=(128, 256, 512, 1024),
            transfers_job_gpus=(8, 16, 32, 64),
            scaling_jobs=(8, 16, 32),
            min_time_s=0.25,
            max_repeats=15,
        )


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------


def _numba_version() -> str | None:
    try:
        import numba
    except ImportError:
        return None
    return str(numba.__version__)


def machine_info() -> dict[str, Any]:
    """CPU model, core count, memory, Python and library versions of this machine."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):  # not Linux: keep platform's answer
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gib = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
                break
    import scipy

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": _numba_version(),
        "load_avg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def _timeit(
    fn: Callable[[], Any], min_time: float, max_repeats: int, stat: str = "min"
) -> tuple[float, int, Any]:
    """Wall time of ``fn()`` over repeats (at least one, until ``min_time`` is spent), and its last result.

    ``stat="min"`` (the best repeat) for identical repeated work, as :mod:`timeit` does: other load on
    the machine only ever adds time. ``stat="median"`` where the repeats differ (successive intervals).
    """
    times = []
    total = 0.0
    out = None
    while True:
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        total += dt
        if total >= min_time or len(times) >= max_repeats:
            break
    return float(np.min(times) if stat == "min" else np.median(times)), len(times), out


def rel_err(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest relative difference of finite rates; inf if the infinite rates differ or shapes do."""
    a, b = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if a.shape != b.shape or not np.array_equal(np.isinf(a), np.isinf(b)) or np.isnan(a).any():
        return math.inf
    fin = np.isfinite(b)
    if not fin.any():
        return 0.0
    scale = np.maximum(np.abs(b[fin]), 1e-300)
    return float(np.max(np.abs(a[fin] - b[fin]) / scale))


def _fit_exponent(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Slope of log(y) against log(x) (least squares); None with fewer than 2 points."""
    if len(x) < 2:
        return None
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


# ----------------------------------------------------------------------------------------------------------
# the pure-Python reference
# ----------------------------------------------------------------------------------------------------------


def progressive_filling_py(
    entry_flow: Sequence[int] | np.ndarray,
    entry_link: Sequence[int] | np.ndarray,
    entry_coef: Sequence[float] | np.ndarray,
    capacity: Sequence[float] | np.ndarray,
    n_flows: int,
    weights: Sequence[float] | np.ndarray | None = None,
    demand: Sequence[float] | np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Weighted max-min fair rates by textbook progressive filling, in pure Python (lists and loops).

    All active flows share one level ``t`` (rate ``w_f * t``). Each round recomputes every link's load
    from the active flows, finds the smallest level at which a link saturates or an active flow reaches
    its demand, and freezes the flows that reach it. The algorithm of
    :func:`ainet_gym.sim.reference.max_min_fair_reference`, on adjacency lists instead of a dense matrix.

    Returns
    -------
    rates : ndarray of float64, shape (n_flows,)
        The rates (``inf`` for unconstrained flows).
    rounds : int
        Number of rounds (distinct bottleneck levels).

    Examples
    --------
    >>> r, rounds = progressive_filling_py([0, 0, 1, 2], [0, 1, 0, 1], [1.0] * 4, [1.0, 1.0], 3)
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
    used = [0.0] * n_links
    active = list(range(n))
    rounds = 0
    while active:
        rounds += 1
        load = [0.0] * n_links
        for f in active:
            wf = w[f]
            for lk, c in paths[f]:
                load[lk] += c * wf
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
    return np.array(rate, dtype=np.float64), rounds


# ----------------------------------------------------------------------------------------------------------
# instances
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Instance:
    """One max-min fair instance as COO entries (the allocator's hot-path input)."""

    name: str
    family: str  # "fabric" | "tiered"
    entry_flow: np.ndarray  # (entries,) flow index
    entry_link: np.ndarray  # (entries,) link index
    entry_coef: np.ndarray  # (entries,) traffic per unit rate
    capacity: np.ndarray  # (links,)
    n_flows: int
    weights: np.ndarray | None = None  # (flows,)
    demand: np.ndarray | None = None  # (flows,)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_links(self) -> int:
        return int(self.capacity.shape[0])

    @property
    def n_entries(self) -> int:
        return int(self.entry_flow.shape[0])

    def csr(self) -> sp.csr_matrix:
        """The incidence as a (flows, links) sparse matrix (duplicate entries add)."""
        return sp.csr_matrix(
            (self.entry_coef, (self.entry_flow, self.entry_link)), shape=(self.n_flows, self.n_links)
        )


def spine_leaf_shape(n_gpus: int) -> dict[str, Any]:
    """A 2:1 oversubscribed spine-leaf of 8-GPU hosts with ``n_gpus`` GPUs (400G NICs and uplinks).

    2 hosts per leaf up to 512 GPUs, 4 up to 4,096, 8 beyond; each leaf has half as many 400G uplinks as
    GPU NICs, one per spine up to 32 spines (parallel links beyond).

    Raises
    ------
    ValueError
        If ``n_gpus`` is not a multiple of the GPUs of one leaf.
    """
    hpl = 2 if n_gpus <= 512 else (4 if n_gpus <= 4096 else 8)
    per_leaf = 8 * hpl
    if n_gpus % per_leaf or n_gpus < per_leaf:
        raise ValueError(f"n_gpus = {n_gpus}: must be a positive multiple of {per_leaf} (GPUs of one leaf)")
    uplinks = per_leaf // 2
    spines = min(uplinks, 32)
    return {
        "topology": "spine_leaf",
        "leaves": n_gpus // per_leaf,
        "spines": spines,
        "links_per_spine": uplinks // spines,
        "hosts_per_leaf": hpl,
        "gpus_per_host": 8,
        "nic_gbps": 400,
        "uplink_gbps": 400,
        "nvlink_gbps": 3600,
        "profile": "infiniband",
    }


def _spread_host_order(fabric: Any, gpus_per_host: int) -> np.ndarray:
    """Host ids ordered round-robin over the leaves (first host of every leaf, then the second, ...)."""
    n_hosts = fabric.n_gpus // gpus_per_host
    host_leaf = fabric.endpoint_leaf[np.arange(n_hosts) * gpus_per_host]
    within = np.zeros(n_hosts, dtype=np.int64)
    for lf in np.unique(host_leaf):
        sel = np.flatnonzero(host_leaf == lf)
        within[sel] = np.arange(sel.shape[0])
    return np.lexsort((host_leaf, within))


def fabric_instance(topology: str, size: int, seed: int = 0) -> tuple[Instance, Any]:
    """The engine's own max-min instance of a 3D-parallel MoE training snapshot on every GPU.

    ``topology`` is ``"spine_leaf"`` (``size`` GPUs, :func:`spine_leaf_shape`) or ``"fat_tree"``
    (``size`` = k; 8-GPU hosts, 4-GPU hosts for k < 16). Workload: per host a tensor-parallel ring
    AllReduce (NVLink); hosts taken 8 at a time round-robin over the leaves, and for each such group and
    local rank a data-parallel ring AllReduce and an expert-parallel AllToAll over its 8 GPUs; a
    pipeline-parallel ``sendrecv shift:gpus_per_host`` over all GPUs in that spread host order (each GPU
    sends to the same local rank of the next host, on another leaf). Split: static ECMP hashing (seed
    ``seed``). Returns the instance and the :class:`~ainet_gym.sim.engine.BatchSim` it came from.
    """
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.routing.split import ecmp_split
    from ainet_gym.scenario.spec import CollectiveSpec, FabricSpec, JobSpec
    from ainet_gym.sim.engine import BatchSim, compile_job

    if topology == "spine_leaf":
        fdict = spine_leaf_shape(size)
    elif topology == "fat_tree":
        fdict = {"topology": "fat_tree", "k": size, "link_gbps": 400, "gpus_per_host": 8 if size >= 16 else 4}
    else:
        raise ValueError(f"topology = {topology!r}: allowed spine_leaf, fat_tree")
    fspec = FabricSpec(**fdict)  # infiniband profile: the dataclass defaults are the profile's values
    fabric = build_fabric(fspec, max_paths=8)
    g = fspec.gpus_per_host
    n = fabric.n_gpus
    order = _spread_host_order(fabric, g)
    tp = (CollectiveSpec("allreduce", 2.5e8),)
    dp = (CollectiveSpec("allreduce", 1e9),)
    ep = (CollectiveSpec("alltoall", 5e8),)
    pp = (CollectiveSpec("sendrecv", 1e8, pattern=f"shift:{g}"),)
    units = []
    for h in range(n // g):
        units.append(compile_job(fabric, JobSpec(f"tp{h}", g, collectives=tp), np.arange(h * g, (h + 1) * g)))
    gs = min(8, order.shape[0])
    for gi in range(order.shape[0] // gs):
        hosts = order[gi * gs : (gi + 1) * gs]
        for r in range(g):
            gpus = hosts * g + r
            units.append(compile_job(fabric, JobSpec(f"dp{gi}.{r}", gs, collectives=dp), gpus))
            units.append(compile_job(fabric, JobSpec(f"ep{gi}.{r}", gs, collectives=ep), gpus))
    pp_gpus = (order[:, None] * g + np.arange(g)[None, :]).ravel()
    units.append(compile_job(fabric, JobSpec("pp", n, collectives=pp), pp_gpus))
    sim = BatchSim(fabric, [units])
    sim.set_split(ecmp_split(sim.conn_npaths, sim.conn_key, fabric.max_paths, 1, seed))
    label = f"{n} GPUs" if topology == "spine_leaf" else f"k={size}, {n} GPUs"
    inst = Instance(
        name=f"{topology.replace('_', '-')} {label}",
        family="fabric",
        entry_flow=sim.e_flow.copy(),
        entry_link=sim.e_link.copy(),
        entry_coef=sim.e_coef.copy(),
        capacity=sim.capacity_bytes_per_s.reshape(-1).copy(),
        n_flows=sim.n_flows,
        meta={
            "topology": topology,
            "gpus": n,
            "transfers": int(sim.member_flow.shape[0]),
            "workload": "3D-parallel MoE snapshot (TP ring AllReduce, DP ring AllReduce, EP AllToAll, "
            "PP sendrecv), static ECMP",
        },
    )
    return inst, sim


def tiered_instance(n_flows: int, seed: int = 0) -> Instance:
    """Random flows over a 3-tier link set, with weights and demand caps.

    Links: ``2 F/4`` access links (100/200/400), ``2 F/32`` aggregation links (3,200/6,400) and ``F/256``
    core links (25,600/51,200), ``F = n_flows``. Every flow crosses an up and a down access link; 70% of
    them cross an aggregation pair and 30% a core link too; 5% put twice their rate on their links;
    weights 1/2/4 (70/20/10%); 20% are capped at a demand uniform in [1, 200].
    """
    rng = np.random.default_rng(seed)
    f = int(n_flows)
    l0, l1, l2 = max(f // 4, 4), max(f // 32, 4), max(f // 256, 2)
    cap = np.concatenate(
        [
            rng.choice([100.0, 200.0, 400.0], 2 * l0),
            rng.choice([800.0, 1600.0], 2 * l1) * 4,
            rng.choice([3200.0, 6400.0], l2) * 8,
        ]
    )
    depth = rng.choice([0, 1, 2], f, p=[0.3, 0.4, 0.3])
    coef = np.where(rng.random(f) < 0.05, 2.0, 1.0)
    hops = (
        (rng.integers(0, l0, f), np.ones(f, dtype=bool)),
        (l0 + rng.integers(0, l0, f), np.ones(f, dtype=bool)),
        (2 * l0 + rng.integers(0, l1, f), depth >= 1),
        (2 * l0 + l1 + rng.integers(0, l1, f), depth >= 1),
        (2 * l0 + 2 * l1 + rng.integers(0, l2, f), depth >= 2),
    )
    ef = np.concatenate([np.flatnonzero(m) for _, m in hops])
    el = np.concatenate([lk[m] for lk, m in hops])
    ec = np.concatenate([coef[m] for _, m in hops])
    order = np.argsort(ef, kind="stable")
    weights = rng.choice([1.0, 2.0, 4.0], f, p=[0.7, 0.2, 0.1])
    demand = np.where(rng.random(f) < 0.2, rng.uniform(1.0, 200.0, f), np.inf)
    return Instance(
        name=f"random tiered {f:,} flows",
        family="tiered",
        entry_flow=ef[order],
        entry_link=el[order],
        entry_coef=ec[order],
        capacity=cap,
        n_flows=f,
        weights=weights,
        demand=demand,
        meta={"workload": "random 3-tier, weights and demand caps"},
    )


# ----------------------------------------------------------------------------------------------------------
# scenarios for the environment and scaling sections
# ----------------------------------------------------------------------------------------------------------


def cluster_scenario(
    n_gpus: int, n_jobs: int = 8, job_gpus: int | None = None, op: str = "allreduce"
) -> dict[str, Any]:
    """A scenario dict: ``n_jobs`` training jobs on a 2:1 spine-leaf of ``n_gpus`` GPUs.

    Jobs of ``job_gpus`` GPUs (default ``n_gpus / n_jobs``) placed spread over the leaves, each running
    one collective of 1 GB per iteration: ``op="allreduce"`` (data parallel, ring) or ``"alltoall"``
    (expert parallel); compute 60, 70, ... ms (cycling over 8 values, so the jobs' communication phases
    drift against each other); static ECMP (``max_paths`` 8, one QP); default decision interval (the ideal
    step of the slowest job).
    """
    job_gpus = n_gpus // n_jobs if job_gpus is None else job_gpus
    coll = (
        {"op": "allreduce", "algorithm": "ring", "bytes": 1.0e9}
        if op == "allreduce"
        else {"op": op, "bytes": 1.0e9}
    )
    jobs = [
        {
            "name": f"job{j}",
            "gpus": job_gpus,
            "placement": "spread",
            "compute_ms": 60.0 + 10.0 * (j % 8),
            "collectives": [coll],
        }
        for j in range(n_jobs)
    ]
    tag = "" if (n_jobs, job_gpus) == (8, n_gpus // 8) else f"-{n_jobs}x{job_gpus}"
    tag += "" if op == "allreduce" else f"-{op}"
    what = "ring AllReduce" if op == "allreduce" else op
    return {
        "name": f"bench-cluster-{n_gpus}{tag}",
        "description": f"{n_gpus} GPUs, 2:1 spine-leaf, {n_jobs} {what} jobs of {job_gpus} GPUs",
        "seed": 0,
        "fabric": spine_leaf_shape(n_gpus),
        "workload": {"jobs": jobs},
        "dynamics": {"episode_steps": 64},
        "routing": {"max_paths": 8, "qps_per_connection": 1},
        "reward": {"kind": "gpu_utilization"},
    }


def _env_scenario(n_gpus: int) -> tuple[str, str | dict[str, Any]]:
    """(label, scenario) of an environment size: 0 = the default scenario; else a shipped scenario with
    that many GPUs (spine-leaf first, then by name) or :func:`cluster_scenario`."""
    from ainet_gym.envs.registration import ENV_IDS
    from ainet_gym.scenario.loader import fabric_gpu_count, list_scenarios, load_scenario

    if n_gpus == 0:
        name = next(iter(ENV_IDS.values()))
        return name, name
    found = []
    for name, _ in list_scenarios():
        try:
            sc = load_scenario(name)
        except Exception:  # a scenario another helper is still writing: not ours to judge here
            continue
        if fabric_gpu_count(sc.fabric) == n_gpus:
            found.append((sc.fabric.topology != "spine_leaf", name))
    if found:
        name = sorted(found)[0][1]
        return name, name
    d = cluster_scenario(n_gpus)
    return d["name"], d


def _scenario_gpus(scenario: str | dict[str, Any]) -> int:
    from ainet_gym.scenario.loader import fabric_gpu_count, load_scenario

    return fabric_gpu_count(load_scenario(scenario).fabric)


# ----------------------------------------------------------------------------------------------------------
# sections
# ----------------------------------------------------------------------------------------------------------


class _Progress:
    """A tqdm bar on stderr (or nothing)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="bench", unit="task", file=sys.stderr, dynamic_ncols=True)

    def start(self, desc: str) -> None:
        if self.bar is not None:
            self.bar.set_description(desc[:48])

    def done(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _allocator_instances(cfg: BenchConfig) -> list[tuple[str, Callable[[], Instance]]]:
    out: list[tuple[str, Callable[[], Instance]]] = []
    for n in cfg.spine_leaf_gpus:
        out.append((f"spine-leaf {n} GPUs", lambda n=n: fabric_instance("spine_leaf", n)[0]))
    for k in cfg.fat_tree_k:
        out.append((f"fat-tree k={k}", lambda k=k: fabric_instance("fat_tree", k)[0]))
    for f in cfg.tiered_flows:
        out.append((f"tiered {f} flows", lambda f=f: tiered_instance(f)))
    return out


def bench_allocator(cfg: BenchConfig, progress: _Progress) -> tuple[list[dict], list[dict]]:
    """Section 1 (allocator against the baselines) and the exactness rows of its instances."""
    from ainet_gym.sim.allocator import max_min_fair, solve_coo
    from ainet_gym.sim.reference import max_min_fair_global_min

    rows: list[dict] = []
    exact: list[dict] = []
    for label, make in _allocator_instances(cfg):
        progress.start(f"allocator: {label}")
        t0 = time.perf_counter()
        inst = make()
        build_s = time.perf_counter() - t0
        args = (inst.entry_flow, inst.entry_link, inst.entry_coef, inst.capacity, inst.n_flows)
        kw = {"weights": inst.weights, "demand": inst.demand}
        solve_s, reps, (rates, its) = _timeit(
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
        gmin = ref = None
        if inst.n_flows <= cfg.gmin_max_flows:
            g_s, g_reps, (gmin, g_its) = _timeit(
                lambda args=args, kw=kw: max_min_fair_global_min(*args, **kw, return_iterations=True),
                cfg.min_time_s,
                cfg.max_repeats,
            )
            row.update(gmin_ms=g_s * 1e3, gmin_iterations=int(g_its), speedup_vs_gmin=g_s / solve_s)
        else:
            row.update(gmin_ms=None, gmin_iterations=None, speedup_vs_gmin=None)
            row["gmin_skipped"] = f"more than {cfg.gmin_max_flows:,} flows (one iteration per level)"
        if inst.n_flows <= cfg.reference_max_flows:
            t0 = time.perf_counter()
            ref, rounds = progressive_filling_py(*args, **kw)
            r_s = time.perf_counter() - t0
            row.update(reference_ms=r_s * 1e3, reference_rounds=rounds, speedup_vs_reference=r_s / solve_s)
        else:
            row.update(reference_ms=None, reference_rounds=None, speedup_vs_reference=None)
            row["reference_skipped"] = f"more than {cfg.reference_max_flows:,} flows (pure Python, too slow)"
        truth, truth_name = (ref, "reference") if ref is not None else (gmin, "global-min")
        if truth is not None:
            errs = {"solve_coo": rel_err(rates, truth)}
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


def _stack(insts: Sequence[Instance]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Block-diagonal stacking of instances (flow and link ids offset), as the engine batches them."""
    fo = np.cumsum([0] + [i.n_flows for i in insts])
    lo = np.cumsum([0] + [i.n_links for i in insts])
    ef = np.concatenate([i.entry_flow + fo[k] for k, i in enumerate(insts)])
    el = np.concatenate([i.entry_link + lo[k] for k, i in enumerate(insts)])
    ec = np.concatenate([i.entry_coef for i in insts])
    cap = np.concatenate([i.capacity for i in insts])
    return ef, el, ec, cap, int(fo[-1])


def bench_batching(cfg: BenchConfig, progress: _Progress) -> tuple[list[dict], list[dict]]:
    """Section 2: B independent instances in one call against a loop of single calls."""
    from ainet_gym.sim.allocator import max_min_fair, max_min_fair_batched, solve_coo
    from ainet_gym.sim.reference import max_min_fair_global_min

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

        stacked = _stack(insts)

        def batched(stacked: tuple = stacked) -> np.ndarray:
            return solve_coo(*stacked)

        def loop_public(b: int = b) -> list[np.ndarray]:
            return [max_min_fair(csrs[k], pool[k].capacity) for k in range(b)]

        def batched_public(b: int = b) -> list[np.ndarray]:
            return max_min_fair_batched(csrs[:b], [pool[k].capacity for k in range(b)])

        t_loop, _, r_loop = _timeit(loop, cfg.min_time_s, cfg.max_repeats)
        t_bat, _, r_bat = _timeit(batched, cfg.min_time_s, cfg.max_repeats)
        t_lp, _, _ = _timeit(loop_public, cfg.min_time_s, cfg.max_repeats)
        t_bp, _, r_bp = _timeit(batched_public, cfg.min_time_s, cfg.max_repeats)
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
    # the loop itself against the references, on the first instances
    progress.start("batching: exactness")
    k = min(8, b_max)
    err_ref = max(
        rel_err(
            r,
            progressive_filling_py(i.entry_flow, i.entry_link, i.entry_coef, i.capacity, i.n_flows)[0],
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
    progress.done()
    return rows, exact


def _steps_per_second(env: Any, batch: int, vector: bool, min_time: float) -> tuple[float, int]:
    """Env steps per second (batch x vector steps / s) with seeded random actions, autoreset included."""
    space = env.single_action_space if vector else env.action_space
    rng = np.random.default_rng(0)
    shape = (batch, *space.shape) if vector else space.shape
    actions = [rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) for _ in range(4)]
    env.reset(seed=0)
    env.step(actions[0])  # warm-up
    steps = 0
    t0 = time.perf_counter()
    while True:
        out = env.step(actions[steps % 4])
        steps += 1
        if not vector and (out[2] or out[3]):
            env.reset()
        dt = time.perf_counter() - t0
        if (dt >= min_time and steps >= 3) or dt >= 20 * min_time:
            break
    return batch * steps / dt, steps


def bench_env(cfg: BenchConfig, progress: _Progress) -> list[dict]:
    """Section 3: steps per second of the single env and of the native vector env, per backend.

    Rows of the same scenario, env and batch on the two backends are measured one after the other in
    this process; ``x_numpy`` is the ratio of the compiled backend to the numpy one.
    """
    from ainet_gym.envs.env import FabricRoutingEnv
    from ainet_gym.envs.vector_env import FabricRoutingVectorEnv

    rows: list[dict] = []
    for size, batches in cfg.env_sizes:
        label, scenario = _env_scenario(size)
        gpus = _scenario_gpus(scenario)
        for backend in cfg.env_backends:
            if backend == "numpy" and gpus > cfg.numpy_env_max_gpus:
                continue
            progress.start(f"env: {label} single {backend}")
            t0 = time.perf_counter()
            env = FabricRoutingEnv(scenario, backend=backend)
            make_s = time.perf_counter() - t0
            sps, n = _steps_per_second(env, 1, False, cfg.min_time_s * 2)
            single = sps
            last = env.unwrapped.core.last_result
            rows.append(
                {"scenario": label, "gpus": gpus, "backend": backend, "env": "single", "batch": 1,
                 "env_steps_per_s": sps, "steps_timed": n, "construct_s": make_s, "speedup_vs_single": 1.0,
                 "action_dim": int(np.prod(env.action_space.shape)),
                 "events_per_step": int(last.events) if last is not None else None}
            )  # fmt: skip
            del env
            gc.collect()
            progress.done()
            for b in batches:
                progress.start(f"env: {label} vector B={b} {backend}")
                t0 = time.perf_counter()
                venv = FabricRoutingVectorEnv(b, scenario, backend=backend)
                make_s = time.perf_counter() - t0
                sps, n = _steps_per_second(venv, b, True, cfg.min_time_s * 2)
                last = venv.core.last_result
                rows.append(
                    {"scenario": label, "gpus": gpus, "backend": backend, "env": "vector", "batch": b,
                     "env_steps_per_s": sps, "steps_timed": n, "construct_s": make_s,
                     "speedup_vs_single": sps / single,
                     "events_per_step": int(last.events) if last is not None else None}
                )  # fmt: skip
                del venv
                gc.collect()
                progress.done()
    for r in rows:  # compiled vs numpy on the same scenario, env and batch
        ref = next((q for q in rows if q["backend"] == "numpy" and q["scenario"] == r["scenario"]
                    and q["env"] == r["env"] and q["batch"] == r["batch"]), None)  # fmt: skip
        r["x_numpy"] = r["env_steps_per_s"] / ref["env_steps_per_s"] if ref is not None else None
    return rows


def _probe(spec: dict[str, Any], env: dict[str, str] | None = None) -> tuple[dict[str, Any], float]:
    """Run :mod:`ainet_gym._bench_probe` in a fresh process; (its JSON result or an error row, wall s)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ainet_gym._bench_probe"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]}, wall
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def bench_construction(cfg: BenchConfig, progress: _Progress) -> list[dict]:
    """Section 3b: construction time and peak memory, each size in a fresh subprocess."""
    rows: list[dict] = []
    for size in cfg.construction_gpus:
        label, scenario = _env_scenario(size)
        progress.start(f"construction: {label}")
        gpus = _scenario_gpus(scenario)
        res, wall = _probe({"probe": "construction", "scenario": scenario})
        rows.append({"scenario": label, "gpus": gpus, **res, "subprocess_wall_s": wall})
        progress.done()
    return rows


def bench_startup(cfg: BenchConfig, progress: _Progress) -> list[dict]:
    """Section 3c: a fresh process up to its first env step: cold (the compiled kernels are built into an
    empty cache directory) and again with that on-disk cache; the numpy backend for comparison."""
    import tempfile

    label, scenario = _env_scenario(cfg.startup_gpus)
    gpus = _scenario_gpus(scenario)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ainet-gym-numba-cache-") as cache:
        runs: list[tuple[str, str, dict[str, str] | None]] = [
            ("numba", "cold (empty kernel cache)", {"NUMBA_CACHE_DIR": cache}),
            ("numba", "cached (second process)", {"NUMBA_CACHE_DIR": cache}),
            ("numpy", "numpy backend", None),
        ]
        if not cfg.startup_cold:
            runs = [("numba", "cached (this machine's cache)", None), runs[2]]
        for backend, what, env in runs:
            progress.start(f"startup: {what}")
            res, wall = _probe({"probe": "startup", "scenario": scenario, "backend": backend}, env=env)
            row = {"scenario": label, "gpus": gpus, "run": what, **res, "process_wall_s": wall}
            if "error" not in row:  # interpreter start and imports: the rest of the process's wall time
                row["start_imports_s"] = wall - res["construct_s"] - res["first_step_s"]
            rows.append(row)
            progress.done()
    if cfg.startup_cold and "error" not in rows[0] and "error" not in rows[1]:
        rows[0]["compile_s"] = rows[0]["process_wall_s"] - rows[1]["process_wall_s"]
    return rows


def calibrate(repeats: int = 5) -> dict[str, float]:
    """Machine calibration printed beside the figures, so runs on different machines can be compared:
    best-of-``repeats`` ms of a fixed pure-Python loop (1e6 integer multiply-adds) and of a fixed numpy
    kernel (sort of 1e6 seeded float64 plus a bincount of 1e6 entries into 1e4 bins)."""

    def py_loop() -> int:
        acc = 0
        for i in range(1_000_000):
            acc += i * i
        return acc

    x = np.random.default_rng(0).random(1_000_000)
    idx = (x * 10_000).astype(np.int64)

    def np_kernel() -> float:
        return float(np.sort(x)[500_000] + np.bincount(idx, weights=x, minlength=10_000).max())

    out = {}
    for name, fn in (("python_loop_ms", py_loop), ("numpy_kernel_ms", np_kernel)):
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        out[name] = best * 1e3
    return out


def _interval_cost(scenario: dict[str, Any], min_time: float, max_repeats: int) -> dict[str, Any]:
    """Median wall time of one decision interval (``FabricWorld.step`` with the static ECMP split)."""
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario(scenario)
    t0 = time.perf_counter()
    world = FabricWorld(sc, 1)
    world.reset(seeds=[0])
    build_s = time.perf_counter() - t0
    events: list[int] = []
    world.step(world.default_split())  # warm-up

    def one() -> None:
        res = world.step(world.default_split())
        events.append(int(res.events))

    t, reps, _ = _timeit(one, min_time, max_repeats, stat="median")
    sim = world.sim
    assert sim is not None
    return {
        "scenario": sc.name,
        "gpus": int(world.fabric.n_gpus),
        "links": int(world.fabric.n_links),
        "jobs": len(sc.jobs),
        "transfers": int(sim.member_flow.shape[0]),
        "flows": int(sim.n_flows),
        "entries": int(sim.e_flow.shape[0]),
        "events_per_interval": float(np.mean(events)),
        "interval_ms": t * 1e3,
        "repeats": reps,
        "build_s": build_s,
    }


def bench_scaling(cfg: BenchConfig, progress: _Progress) -> dict[str, Any]:
    """Section 4: cost of one interval against fabric size and against transfers, with fitted exponents."""
    size_rows = []
    for n in cfg.scaling_gpus:
        progress.start(f"scaling: {n} GPUs")
        size_rows.append(_interval_cost(cluster_scenario(n), cfg.min_time_s, cfg.max_repeats))
        gc.collect()
        progress.done()
    tr_rows = []
    nf = cfg.transfers_fabric_gpus
    for jg in cfg.transfers_job_gpus:
        progress.start(f"scaling: {nf} GPUs, 8 AllToAll x {jg}")
        tr_rows.append(
            {**_interval_cost(cluster_scenario(nf, 8, jg, op="alltoall"), cfg.min_time_s, cfg.max_repeats),
             "job_gpus": jg}
        )  # fmt: skip
        gc.collect()
        progress.done()
    job_rows = []
    for nj in cfg.scaling_jobs:
        progress.start(f"scaling: {nf} GPUs, {nj} jobs")
        job_rows.append(_interval_cost(cluster_scenario(nf, nj), cfg.min_time_s, cfg.max_repeats))
        gc.collect()
        progress.done()
    ms = [r["interval_ms"] for r in size_rows]
    tr_x = [r["transfers"] for r in tr_rows]
    tr_y = [r["interval_ms"] for r in tr_rows]
    return {
        "fabric_size": size_rows,
        "exponent_vs_gpus": _fit_exponent([r["gpus"] for r in size_rows], ms),
        "exponent_vs_transfers_fabric_sweep": _fit_exponent([r["transfers"] for r in size_rows], ms),
        "transfers": tr_rows,
        "transfers_fabric_gpus": nf,
        "exponent_vs_transfers": _fit_exponent(tr_x, tr_y),
        "exponent_vs_transfers_last_two": _fit_exponent(tr_x[-2:], tr_y[-2:]),
        "jobs": job_rows,
        "exponent_vs_jobs": _fit_exponent(
            [r["jobs"] for r in job_rows], [r["interval_ms"] for r in job_rows]
        ),
    }


# ----------------------------------------------------------------------------------------------------------
# targets
# ----------------------------------------------------------------------------------------------------------


def _target(name: str, value: float | None, target: float, better: str, unit: str, note: str = "") -> dict:
    """A target row: ``better`` is ">=" or "<="; ratio = how far past (> 1) or short of (< 1) the target."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return {"target": name, "value": None, "goal": f"{better} {target:g}", "unit": unit,
                "status": "n/a", "ratio": None, "note": note}  # fmt: skip
    if better == ">=":
        ok, ratio = value >= target, (value / target if target else math.inf)
    else:
        ok, ratio = value <= target, (target / value if value else math.inf)
    return {"target": name, "value": value, "goal": f"{better} {target:g}", "unit": unit,
            "status": "PASS" if ok else "MISS", "ratio": ratio, "note": note}  # fmt: skip


def evaluate_targets(results: dict[str, Any]) -> list[dict]:
    """The targets of the issue, each with its figure, PASS/MISS and the ratio to the target."""
    out = []
    exact = results.get("exactness", [])
    if exact:
        worst = max(e["max_rel_err"] for e in exact)
        out.append(_target("exact: every max-min mode vs reference (max rel. err.)", worst, EXACT_RTOL,
                           "<=", "", f"{len(exact)} checks"))  # fmt: skip
    alloc = {(r.get("topology"), r.get("gpus")): r for r in results.get("allocator", [])}
    r = alloc.get(("spine_leaf", 1024))
    note = f"{r['instance']}, {r['flows']:,} flows" if r else "instance not run"
    out.append(_target("allocator vs pure-Python reference (1,024-GPU spine-leaf)",
                       r and r.get("speedup_vs_reference"), 100, ">=", "x", note))  # fmt: skip
    out.append(_target("allocator vs numpy global-min filling (1,024-GPU spine-leaf)",
                       r and r.get("speedup_vs_gmin"), 50, ">=", "x", note))  # fmt: skip
    env = results.get("env", [])

    def env_rows(gpus: int) -> list[dict]:
        return [e for e in env if e["gpus"] == gpus]

    def pick(backend: str, env_kind: str, batch: int) -> dict | None:
        small = [e for e in env if 64 <= e["gpus"] <= 128 and e.get("backend", "numpy") == backend]
        return next((e for e in small if e["env"] == env_kind and e["batch"] == batch), None)

    head = env[0].get("backend", "numpy") if env else "numba"
    v64 = pick(head, "vector", 64)
    note = f"{v64['scenario']}, {head}" if v64 else "not run"
    out.append(_target("vector env B=64, 64-128 GPUs (env steps/s)", v64 and v64["env_steps_per_s"],
                       10_000, ">=", "steps/s", note))  # fmt: skip
    out.append(_target("vector env B=64 vs single env (same backend)", v64 and v64["speedup_vs_single"], 10,
                       ">=", "x", note))  # fmt: skip
    out.append(_target("compiled vs numpy backend, vector B=64 (one run)", v64 and v64.get("x_numpy"), 5,
                       ">=", "x", note if v64 and v64.get("x_numpy") else "numpy backend not run"))  # fmt: skip
    for gpus, goal in ((1024, 200), (16384, 30)):
        rows = [e for e in env_rows(gpus) if e.get("backend", "numpy") == head]
        best = max(rows, key=lambda e: e["env_steps_per_s"]) if rows else None
        single = next((e for e in rows if e["env"] == "single"), None)
        note = (f"{best['scenario']}, {head}, best at {best['env']} B={best['batch']}; single env "
                f"{single['env_steps_per_s']:.1f}/s") if best and single else "not run"  # fmt: skip
        out.append(_target(f"env steps/s at {gpus:,} GPUs (best B)", best and best["env_steps_per_s"],
                           goal, ">=", "steps/s", note))  # fmt: skip
    st = results.get("startup") or []
    warm = next((r for r in st if r.get("run", "").startswith("cached (second") and "error" not in r), None)
    cold = next((r for r in st if r.get("run", "").startswith("cold") and "error" not in r), None)
    out.append(_target("second process start to first step, on-disk kernel cache", warm and
                       warm["process_wall_s"], 2, "<=", "s", (f"cold start {cold['process_wall_s']:.1f} s, of which "
                       f"compiling ~{cold.get('compile_s', 0):.1f} s") if cold else "not run"))  # fmt: skip
    con = next((c for c in results.get("construction", []) if c.get("gpus") == 16384 and "env_s" in c), None)
    out.append(_target("construction at 16,384 GPUs (time)", con and con["env_s"], 60, "<=", "s",
                       "env: topology, paths, jobs, ideal steps, first reset" if con else "not run"))  # fmt: skip
    out.append(_target("construction at 16,384 GPUs (peak RSS)", con and con["peak_rss_mib"] / 1024, 4,
                       "<=", "GiB", "whole process" if con else "not run"))  # fmt: skip
    sc = results.get("scaling") or {}
    rows = sc.get("fabric_size") or []
    big = max(rows, key=lambda r: r["gpus"]) if rows else None
    out.append(_target(f"one interval, every job communicating ({big['gpus']:,} GPUs)" if big else
                       "one interval, every job communicating", big and big["interval_ms"] / 1e3, 1, "<=", "s",
                       f"{big['jobs']} jobs, {big['transfers']:,} transfers" if big else "not run"))  # fmt: skip
    note = (f"fixed {sc['transfers_fabric_gpus']:,}-GPU fabric, 8 AllToAll jobs; last two points "
            f"{_fmt(sc['exponent_vs_transfers_last_two'], '.2f')}") if sc else "not run"  # fmt: skip
    out.append(_target("cost per interval vs transfers (fitted exponent)", sc.get("exponent_vs_transfers"),
                       1.1, "<=", "", note))  # fmt: skip
    every = [r for k in ("fabric_size", "transfers", "jobs") for r in sc.get(k) or []]
    worst = max(every, key=lambda r: r["interval_ms"]) if every else None
    out.append(_target("slowest interval measured (any scaling scenario)", worst and worst["interval_ms"] / 1e3,
                       1, "<=", "s", f"{worst['scenario']}: {worst['transfers']:,} transfers, "
                       f"{worst['events_per_interval']:.0f} events" if worst else "not run"))  # fmt: skip
    a2a = next((r for r in sc.get("transfers") or [] if r.get("job_gpus") == 128), None)
    out.append(_target("slowest interval: 8 AllToAll x 128 GPUs (exact event mode)",
                       a2a and a2a["interval_ms"] / 1e3, 1, "<=", "s",
                       f"{a2a['transfers']:,} transfers, {a2a['events_per_interval']:.0f} events"
                       if a2a else "not run (full bench only)"))  # fmt: skip
    out.append(_target("cost vs transfers, marginal exponent (last two points)",
                       sc.get("exponent_vs_transfers_last_two"), 1.1, "<=", "",
                       "same sweep; shows whether the curve bends up" if sc else "not run"))  # fmt: skip
    return out


# ----------------------------------------------------------------------------------------------------------
# output
# ----------------------------------------------------------------------------------------------------------


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return str(x)
    if isinstance(x, int | np.integer):
        return f"{int(x):,}"
    return format(x, spec)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))
    out = [line, "-" * len(line)]
    for r in rows:
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out)


def format_report(results: dict[str, Any]) -> str:
    """The terminal tables of a results dict."""
    parts: list[str] = []
    m = results["meta"]
    mc = m["machine"]
    parts.append(
        f"ainet-gym bench{' --quick' if m['quick'] else ''}  ({m['date']})\n"
        f"machine: {mc['cpu']}, {mc['cores']} cores, {mc['memory_gib']} GiB; Python {mc['python']}, "
        f"numpy {mc['numpy']}, scipy {mc['scipy']}, numba {mc.get('numba') or 'not installed'}; load average "
        f"at start {_fmt(mc.get('load_avg_1min'), '.2f')}"
        + (f", at end {m['load_avg_1min_end']:.2f}" if m.get("load_avg_1min_end") is not None else "")
    )
    cal = m.get("calibration")
    if cal:
        parts.append(
            f"calibration: pure-Python loop (1e6 multiply-adds) {cal['python_loop_ms']:.1f} ms, numpy kernel "
            f"(sort + bincount of 1e6) {cal['numpy_kernel_ms']:.1f} ms (best of 5; compare runs across "
            "machines by these)"
        )
    if results.get("allocator"):
        parts.append("\n1. Allocator: solve_coo vs pure-Python progressive filling (ref) and numpy global-min "
                     "filling (gmin)")  # fmt: skip
        rows = []
        for r in results["allocator"]:
            rows.append([
                r["instance"], _fmt(r["flows"]), _fmt(r["links"]), _fmt(r["entries"]),
                _fmt(r["solve_ms"]), _fmt(r["flows_per_s"], ".3g"), _fmt(r["iterations"]),
                _fmt(r["gmin_ms"]) if r["gmin_ms"] is not None else "skipped",
                _fmt(r["gmin_iterations"]),
                _fmt(r["reference_ms"]) if r["reference_ms"] is not None else "skipped",
                _fmt(r["reference_rounds"]),
                _fmt(r["speedup_vs_reference"], ".0f"), _fmt(r["speedup_vs_gmin"], ".1f"),
                _fmt(r["max_rel_err"], ".1e"),
            ])  # fmt: skip
        parts.append(_table(
            ["instance", "flows", "links", "entries", "ms/solve", "flows/s", "iters", "gmin ms", "gmin its",
             "ref ms", "ref rounds", "x ref", "x gmin", "rel err"], rows))  # fmt: skip
        notes = {r.get("workload") for r in results["allocator"] if r.get("workload")}
        for n in sorted(notes):
            parts.append(f"  workload: {n}")
        skipped = [r for r in results["allocator"] if r.get("reference_skipped") or r.get("gmin_skipped")]
        for r in skipped:
            why = "; ".join(
                f"{k.split('_')[0]} skipped: {r[k]}"
                for k in ("reference_skipped", "gmin_skipped")
                if r.get(k)
            )
            parts.append(f"  {r['instance']}: {why}")
    if results.get("exactness"):
        parts.append(f"\nExactness (target: max relative error <= {EXACT_RTOL:g})")
        by_mode: dict[str, dict] = {}
        for e in results["exactness"]:
            d = by_mode.setdefault(e["mode"], {"n": 0, "err": 0.0, "against": set()})
            d["n"] += 1
            d["err"] = max(d["err"], e["max_rel_err"])
            d["against"].add(e["against"])
        parts.append(_table(
            ["mode", "checks", "against", "max rel err", "status"],
            [[k, d["n"], ", ".join(sorted(d["against"])), f"{d['err']:.1e}",
              "PASS" if d["err"] <= EXACT_RTOL else "MISS"] for k, d in by_mode.items()]))  # fmt: skip
    if results.get("batching"):
        b0 = results["batching"][0]
        parts.append(f"\n2. Batching: B independent instances in one call vs a Python loop "
                     f"({b0['instance']})")  # fmt: skip
        parts.append(_table(
            ["B", "loop ms/inst", "batched ms/inst", "speed-up", "public loop", "public batched", "speed-up"],
            [[r["batch"], _fmt(r["loop_ms_per_instance"]), _fmt(r["batched_ms_per_instance"]),
              _fmt(r["speedup"], ".2f"), _fmt(r["public_loop_ms_per_instance"]),
              _fmt(r["public_batched_ms_per_instance"]), _fmt(r["public_speedup"], ".2f")]
             for r in results["batching"]]))  # fmt: skip
        parts.append("  engine form: one solve_coo over stacked entries; public: max_min_fair_batched(list of "
                     "CSR) vs max_min_fair per instance")  # fmt: skip
    if results.get("env"):
        parts.append("\n3. Environments: env steps/s (split actions, random, autoreset included)")
        parts.append(_table(
            ["scenario", "GPUs", "backend", "env", "B", "env steps/s", "x single", "x numpy", "events/step",
             "construct s"],
            [[r["scenario"], r["gpus"], r.get("backend", "-"), r["env"], r["batch"],
              _fmt(r["env_steps_per_s"], ".4g"), _fmt(r["speedup_vs_single"], ".1f"),
              _fmt(r.get("x_numpy") if r.get("backend") != "numpy" else None, ".1f"),
              _fmt(r.get("events_per_step")), _fmt(r["construct_s"], ".2f")]
             for r in results["env"]]))  # fmt: skip
    if results.get("construction"):
        parts.append(
            "\n   Construction (fresh subprocess): topology; env = paths, jobs, ideal steps, first reset"
        )
        parts.append(_table(
            ["scenario", "GPUs", "links", "connections", "topology s", "env s", "peak RSS MiB"],
            [[r["scenario"], r["gpus"], _fmt(r.get("links")), _fmt(r.get("connections")),
              _fmt(r.get("topology_s"), ".2f"), _fmt(r.get("env_s"), ".2f"),
              _fmt(r.get("peak_rss_mib"), ".0f")] for r in results["construction"]]))  # fmt: skip
    if results.get("startup"):
        parts.append("\n   Start-up (fresh process to its first env step; kernels compiled into an empty cache, "
                     "then loaded from it)")  # fmt: skip
        parts.append(_table(
            ["scenario", "run", "backend", "process s", "start+imports s", "construct s", "first step s",
             "compile s"],
            [[r["scenario"], r["run"], r.get("backend", "-"), _fmt(r.get("process_wall_s"), ".2f"),
              _fmt(r.get("start_imports_s"), ".2f"), _fmt(r.get("construct_s"), ".2f"),
              _fmt(r.get("first_step_s"), ".3f"), _fmt(r.get("compile_s"), ".1f")]
             for r in results["startup"]]))  # fmt: skip
        for r in results["startup"]:
            if "error" in r:
                parts.append(f"  {r['run']}: ERROR {r['error']}")
    if results.get("construction"):
        for r in results["construction"]:
            if "error" in r:
                parts.append(f"  construction {r['scenario']}: ERROR {r['error']}")
    sc = results.get("scaling")
    if sc:
        parts.append("\n4. Scaling: wall time of one decision interval (FabricWorld.step, static ECMP)")
        cols = ["scenario", "GPUs", "jobs", "transfers", "flows", "entries", "events", "ms/interval"]

        def srow(r: dict) -> list:
            return [r["scenario"], r["gpus"], r["jobs"], r["transfers"], r["flows"], r["entries"],
                    _fmt(r["events_per_interval"], ".1f"), _fmt(r["interval_ms"], ".3g")]  # fmt: skip

        parts.append(_table(cols, [srow(r) for r in sc["fabric_size"]]))
        parts.append(
            f"  fitted exponent: cost ~ GPUs^{_fmt(sc['exponent_vs_gpus'], '.2f')}, "
            f"~ transfers^{_fmt(sc['exponent_vs_transfers_fabric_sweep'], '.2f')}"
        )
        parts.append(_table(cols, [srow(r) for r in sc["transfers"]]))
        parts.append(
            f"  fitted exponent on the fixed {sc['transfers_fabric_gpus']:,}-GPU fabric (8 AllToAll jobs): cost ~ "
            f"transfers^{_fmt(sc['exponent_vs_transfers'], '.2f')} (last two points: "
            f"{_fmt(sc['exponent_vs_transfers_last_two'], '.2f')})"
        )
        if sc.get("jobs"):
            parts.append(_table(cols, [srow(r) for r in sc["jobs"]]))
            parts.append(
                f"  fitted exponent against independently clocked jobs (same GPUs and transfers): cost ~ "
                f"jobs^{_fmt(sc['exponent_vs_jobs'], '.2f')} (events grow with the jobs)"
            )
    if results.get("targets"):
        parts.append("\nTargets (2-core CPU)")
        parts.append(_table(
            ["target", "value", "goal", "status", "ratio", "note"],
            [[t["target"], _fmt(t["value"], ".3g") + (f" {t['unit']}" if t["unit"] else ""), t["goal"],
              t["status"], _fmt(t["ratio"], ".3g"), t["note"]] for t in results["targets"]]))  # fmt: skip
    if "wall_s" in m:
        parts.append(f"\nwall time: {m['wall_s']:.1f} s")
    return "\n".join(parts)


def plot_scaling(scaling: dict[str, Any], path: Path) -> None:
    """The scaling curves (log-log, with fits): ms per interval against GPUs, transfers and jobs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("gpus", "GPUs (2:1 spine-leaf)", "cost vs fabric size",
         [(scaling["fabric_size"], "8 ring AllReduce jobs of N/8 GPUs", "exponent_vs_gpus")]),
        ("transfers", "transfers per iteration (src, dst pairs)", "cost vs transfers",
         [(scaling["fabric_size"], "fabric sweep (ring jobs)", "exponent_vs_transfers_fabric_sweep"),
          (scaling["transfers"], f"fixed {scaling['transfers_fabric_gpus']:,} GPUs, 8 AllToAll jobs",
           "exponent_vs_transfers")]),
    ]  # fmt: skip
    if scaling.get("jobs"):
        panels.append(("jobs", "jobs (independent clocks)", "cost vs jobs",
                       [(scaling["jobs"], f"fixed {scaling['transfers_fabric_gpus']:,} GPUs, ring AllReduce",
                         "exponent_vs_jobs")]))  # fmt: skip
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2))
    for ax, (key, xlabel, title, series) in zip(np.atleast_1d(axes), panels):
        for rows, label, exp_key in series:
            x = np.array([r[key] for r in rows], float)
            y = np.array([r["interval_ms"] for r in rows], float)
            k = scaling.get(exp_key)
            (line,) = ax.loglog(x, y, "o-", label=f"{label}: ~{key}^{k:.2f}" if k is not None else label)
            if k is not None and x.size >= 2:
                c = np.polyfit(np.log(x), np.log(y), 1)
                ax.loglog(x, np.exp(np.polyval(c, np.log(x))), "--", color=line.get_color(), alpha=0.5)
        x0 = np.array([r[key] for r in series[-1][0]], float)
        if x0.size >= 2:
            y0 = series[-1][0][0]["interval_ms"]
            ax.loglog(x0, y0 * x0 / x0[0], ":", color="gray", label="linear (from the first point)")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("ms per decision interval")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("ainet-gym: wall time of one decision interval (FabricWorld.step, static ECMP)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        x = float(x)
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return None
    return x


# ----------------------------------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------------------------------


def _n_tasks(cfg: BenchConfig) -> int:
    n = 0
    s = set(cfg.sections)
    if "allocator" in s:
        n += len(_allocator_instances(cfg))
    if "batching" in s:
        n += len(cfg.batch_sizes) + 2
    if "env" in s:
        n += sum(1 + len(b) for _, b in cfg.env_sizes) * len(cfg.env_backends)
    if "construction" in s:
        n += len(cfg.construction_gpus)
    if "startup" in s:
        n += 3 if cfg.startup_cold else 2
    if "scaling" in s:
        n += len(cfg.scaling_gpus) + len(cfg.transfers_job_gpus) + len(cfg.scaling_jobs)
    return n


def run_bench(
    cfg: BenchConfig, out: str | os.PathLike | None = None, progress: bool = True, command: str | None = None
) -> dict[str, Any]:
    """Run the sections of ``cfg``; write ``bench.json``, ``scaling.png`` and ``bench.md`` to ``out``.

    Returns the results dict (the content of ``bench.json``).

    Raises
    ------
    ValueError
        If ``cfg.sections`` names an unknown section.
    """
    bad = [s for s in cfg.sections if s not in SECTIONS]
    if bad:
        raise ValueError(f"sections {bad}: unknown; allowed: {', '.join(SECTIONS)}")
    t_start = time.perf_counter()
    results: dict[str, Any] = {
        "meta": {
            "command": command or ("ainet-gym bench --quick" if cfg.quick else "ainet-gym bench"),
            "quick": cfg.quick,
            "date": _dt.datetime.now().isoformat(timespec="seconds"),
            "machine": machine_info(),
            "calibration": calibrate(),
            "config": asdict(cfg),
        }
    }
    bar = _Progress(_n_tasks(cfg), progress)
    exact: list[dict] = []
    try:
        if "allocator" in cfg.sections:
            results["allocator"], ex = bench_allocator(cfg, bar)
            exact += ex
        if "batching" in cfg.sections:
            results["batching"], ex = bench_batching(cfg, bar)
            exact += ex
        if exact:
            results["exactness"] = exact
        if "env" in cfg.sections:
            results["env"] = bench_env(cfg, bar)
        if "construction" in cfg.sections:
            results["construction"] = bench_construction(cfg, bar)
        if "startup" in cfg.sections:
            results["startup"] = bench_startup(cfg, bar)
        if "scaling" in cfg.sections:
            results["scaling"] = bench_scaling(cfg, bar)
    finally:
        bar.close()
    results["targets"] = evaluate_targets(results)
    results["meta"]["wall_s"] = time.perf_counter() - t_start
    if hasattr(os, "getloadavg"):
        results["meta"]["load_avg_1min_end"] = round(os.getloadavg()[0], 2)
    results = _jsonable(results)
    if out is not None:
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        (d / "bench.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        if results.get("scaling"):
            plot_scaling(results["scaling"], d / "scaling.png")
        report = format_report(results)
        (d / "bench.md").write_text(
            f"Produced by `{results['meta']['command']}` on {results['meta']['machine']['cpu']} "
            f"({results['meta']['machine']['cores']} cores).\n\n```text\n{report}\n```\n",
            encoding="utf-8",
        )
    return results


def bench_main(args: argparse.Namespace) -> int:
    """Entry point of ``ainet-gym bench`` (``args.quick``, ``args.out``)."""
    cfg = BenchConfig.quick_preset() if args.quick else BenchConfig.full()
    sections = getattr(args, "sections", None)
    if sections:
        cfg = replace(cfg, sections=tuple(s.strip() for s in sections.split(",") if s.strip()))
    command = "ainet-gym bench" + (" --quick" if args.quick else "")
    results = run_bench(cfg, out=args.out, progress=not getattr(args, "no_progress", False), command=command)
    print(format_report(results))
    print(f"\nwrote {Path(args.out) / 'bench.json'}" + (f", {Path(args.out) / 'scaling.png'}"
          if results.get("scaling") else "") + f", {Path(args.out) / 'bench.md'}")  # fmt: skip
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ainet_gym.bench [--quick] [--out DIR] [--sections LIST] [--no-progress]``."""
    p = argparse.ArgumentParser(prog="python -m ainet_gym.bench", description="ainet-gym benchmark suite")
    p.add_argument("--quick", action="store_true", help="small sizes only (under a minute)")
    p.add_argument("--out", default="bench-results", help="directory for bench.json, scaling.png, bench.md")
    p.add_argument("--sections", default=None, help=f"comma list of {', '.join(SECTIONS)} (default: all)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return bench_main(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
