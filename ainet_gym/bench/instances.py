"""The allocator instances (fabric-shaped and random tiered, as COO entries) and the cluster scenarios of
the environment and scaling sections."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ainet_gym.bench.config import BenchConfig


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


def spread_host_order(fabric: Any, gpus_per_host: int) -> np.ndarray:
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
    order = spread_host_order(fabric, g)
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
        capacity=sim.engine_state.capacity_bytes_per_s.reshape(-1).copy(),
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


def env_scenario(n_gpus: int | str) -> tuple[str, str | dict[str, Any]]:
    """(label, scenario) of an environment size: a scenario name as given; 0 = the default scenario; else
    a shipped scenario with that many GPUs (spine-leaf first, then by name) or :func:`cluster_scenario`."""
    from ainet_gym.envs.registration import ENV_IDS
    from ainet_gym.scenario.loader import fabric_gpu_count, list_scenarios, load_scenario

    if isinstance(n_gpus, str):
        return n_gpus, n_gpus
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


def scenario_gpus(scenario: str | dict[str, Any]) -> int:
    from ainet_gym.scenario.loader import fabric_gpu_count, load_scenario

    return fabric_gpu_count(load_scenario(scenario).fabric)


def stack_instances(insts: Sequence[Instance]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Block-diagonal stacking of instances (flow and link ids offset), as the engine batches them."""
    fo = np.cumsum([0] + [i.n_flows for i in insts])
    lo = np.cumsum([0] + [i.n_links for i in insts])
    ef = np.concatenate([i.entry_flow + fo[k] for k, i in enumerate(insts)])
    el = np.concatenate([i.entry_link + lo[k] for k, i in enumerate(insts)])
    ec = np.concatenate([i.entry_coef for i in insts])
    cap = np.concatenate([i.capacity for i in insts])
    return ef, el, ec, cap, int(fo[-1])


def allocator_instances(cfg: BenchConfig) -> list[tuple[str, Callable[[], Instance]]]:
    out: list[tuple[str, Callable[[], Instance]]] = []
    for n in cfg.spine_leaf_gpus:
        out.append((f"spine-leaf {n} GPUs", lambda n=n: fabric_instance("spine_leaf", n)[0]))
    for k in cfg.fat_tree_k:
        out.append((f"fat-tree k={k}", lambda k=k: fabric_instance("fat_tree", k)[0]))
    for f in cfg.tiered_flows:
        out.append((f"tiered {f} flows", lambda f=f: tiered_instance(f)))
    return out
