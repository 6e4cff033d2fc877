"""GPU placement of jobs: which GPUs a job gets among the free ones, and in which rank order."""

from __future__ import annotations

import numpy as np

from ainet_gym.fabric.topology import Fabric
from ainet_gym.scenario.spec import JobSpec

__all__ = ["place_job", "placement_is_deterministic"]


def place_job(fabric: Fabric, job: JobSpec, free: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """GPU ids for ``job`` among the ``free`` GPUs (bool, (gpus,)) of ``fabric``, in rank order
    (``job.rank_order``).

    ``placement`` keeps the order the placement gives (ascending ids for contiguous and random,
    leaf round-robin for spread, the listed order for explicit ids); ``sorted`` ascending ids;
    ``shuffled`` a permutation drawn from the instance's generator (after the placement's own draws,
    so the GPUs are those of ``placement``); ``by_host`` host by host, hosts in the order the placement
    first uses them, each host's GPUs in ascending id (consecutive local ranks).

    Raises
    ------
    ValueError
        If too few GPUs are free, explicit GPUs are taken, or the placement or rank order is unknown.
    """
    g = _placement_gpus(fabric, job, free, rng)
    order = job.rank_order
    if order == "placement":
        return g
    if order == "sorted":
        return np.sort(g)
    if order == "shuffled":
        return g[rng.permutation(g.shape[0])]
    if order == "by_host":
        host = fabric.gpu_host[g]
        _, first = np.unique(host, return_index=True)
        host_rank = np.empty(int(host.max()) + 1, dtype=np.int64)
        host_rank[host[np.sort(first)]] = np.arange(first.shape[0])
        return g[np.lexsort((g, host_rank[host]))]
    raise ValueError(f"job {job.name!r}: unknown rank_order {order!r}")


def placement_is_deterministic(job: JobSpec) -> bool:
    """Whether :func:`place_job` gives ``job`` GPUs that depend on the free GPUs only (it draws nothing
    from the generator): every placement but ``random``, every rank order but ``shuffled``."""
    return not (isinstance(job.placement, str) and job.placement == "random") and job.rank_order != "shuffled"


def _placement_gpus(fabric: Fabric, job: JobSpec, free: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """GPU ids for ``job`` among ``free`` GPUs, in the placement's order."""
    n = job.gpus
    ids = np.flatnonzero(free)
    if ids.shape[0] < n:
        raise ValueError(f"job {job.name!r}: needs {n} GPUs, {ids.shape[0]} free")
    pl = job.placement
    if not isinstance(pl, str):
        g = np.asarray(pl, dtype=np.int64)
        if not free[g].all():
            raise ValueError(f"job {job.name!r}: explicit GPUs {g[~free[g]].tolist()} are taken")
        return g
    if pl == "contiguous":
        # first fit of a contiguous free block; else the lowest free ids (fragmented)
        run = np.convolve(free.astype(np.int64), np.ones(n, dtype=np.int64), mode="valid")
        starts = np.flatnonzero(run == n)
        return np.arange(starts[0], starts[0] + n) if starts.size else ids[:n]
    if pl == "spread":
        # round-robin over leaves: rank r on the (r mod leaves)-th leaf with free GPUs, so that
        # consecutive ranks (ring neighbours) sit on different leaves
        leaf = fabric.endpoint_leaf[ids]
        by_leaf = np.argsort(leaf, kind="stable")
        rank_in_leaf = np.empty_like(ids)
        rank_in_leaf[by_leaf] = np.arange(ids.shape[0]) - np.searchsorted(leaf[by_leaf], leaf[by_leaf])
        order = np.lexsort((leaf, rank_in_leaf))
        return ids[order[:n]]
    if pl == "random":
        return np.sort(rng.choice(ids, size=n, replace=False))
    raise ValueError(f"job {job.name!r}: unknown placement {pl!r}")
