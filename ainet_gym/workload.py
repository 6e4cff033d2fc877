"""Workload: jobs -> collectives -> phases of transfers.

A collective of ``p`` ranks is decomposed, at the rank level, into *phases* run one after the other.
A phase holds *flows*; a flow is the unit of bandwidth allocation and has one or more *member*
transfers (source rank, destination rank) that all move ``flow.bytes`` each at the flow's common rate.
A pipelined ring is one flow whose members are its hops: it moves at the pace of its slowest hop.
Each phase also carries its algorithm's step count, the number of latency (alpha) terms it pays.

Sizes follow the nccl-tests convention: ``S`` is the buffer size. Per-rank bytes on the wire:

=================  ===================  =============================  ================
op                 algorithm            bytes per rank                 alpha steps
=================  ===================  =============================  ================
allreduce          ring                 2 (p-1)/p S                    2 (p-1)
allreduce          halving_doubling     2 (p-1)/p S (log2 p each way)  2 log2 p
allreduce          tree (binomial)      2 ceil(log2 p) S               2 ceil(log2 p)
allreduce          hierarchical         NVLink RS + rail ring + AG     (g-1)+2(h-1)+(g-1)
reducescatter      ring                 (p-1)/p S                      p-1
allgather          ring                 (p-1)/p S                      p-1
alltoall           pairwise             (p-1)/p S                      p-1
sendrecv shift:k   -                    S                              1
=================  ===================  =============================  ================

These match Thakur, Rabenseifner and Gropp (2005) for the bandwidth and latency terms (the reduction
compute term gamma is not modelled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ainet_gym.spec import CollectiveSpec

__all__ = ["CollectivePhase", "Flow", "bus_bandwidth_factor", "decompose"]


@dataclass(frozen=True)
class Flow:
    bytes: float  # bytes each member moves
    members: tuple[tuple[int, int], ...]  # (src rank, dst rank) transfers coupled at one rate


@dataclass(frozen=True)
class CollectivePhase:
    steps: int  # algorithm steps: latency terms paid by this phase
    flows: tuple[Flow, ...]


def bus_bandwidth_factor(op: str, p: int) -> float:
    """nccl-tests factor busbw / algbw for ``op`` on ``p`` ranks (PERFORMANCE.md of nccl-tests)."""
    if op == "allreduce":
        return 2.0 * (p - 1) / p
    if op in ("reducescatter", "allgather", "alltoall"):
        return (p - 1) / p
    if op == "sendrecv":
        return 1.0
    raise ValueError(f"op {op!r}: no bus bandwidth factor")


def _ring(ranks: list[int], nbytes: float) -> Flow:
    p = len(ranks)
    return Flow(nbytes, tuple((ranks[i], ranks[(i + 1) % p]) for i in range(p)))


def _alltoall_weights(p: int, skew: float, rotation: int) -> np.ndarray:
    """Relative load per destination rank: (1 + ((j - rotation) mod p))^-skew, mean 1."""
    order = (np.arange(p) - rotation) % p
    w = (1.0 + order) ** (-skew)
    return w * p / w.sum()


def decompose(
    spec: CollectiveSpec, p: int, host_of_rank: list[int] | None = None, rotation: int = 0
) -> list[CollectivePhase]:
    """Phases of one collective on ranks ``0..p-1``.

    Parameters
    ----------
    spec : CollectiveSpec
        The collective (op, algorithm, buffer size S in bytes, pattern, skew).
    p : int
        Number of ranks.
    host_of_rank : list of int, optional
        Host of each rank (needed by ``hierarchical``).
    rotation : int
        AllToAll skew rotation (which expert is hot).

    Raises
    ------
    ValueError
        If the algorithm does not apply (e.g. ``halving_doubling`` on a non-power-of-two ``p``).
    """
    S = float(spec.bytes)
    if p <= 1:
        return []
    ranks = list(range(p))
    op, alg = spec.op, spec.algorithm
    if op == "allreduce" and alg == "ring":
        return [CollectivePhase(2 * (p - 1), (_ring(ranks, 2.0 * (p - 1) / p * S),))]
    if op in ("reducescatter", "allgather"):
        return [CollectivePhase(p - 1, (_ring(ranks, (p - 1) / p * S),))]
    if op == "allreduce" and alg == "halving_doubling":
        if p & (p - 1):
            raise ValueError(f"halving_doubling needs a power-of-two number of ranks, got {p}")
        log_p = p.bit_length() - 1
        phases = []
        # reduce-scatter by recursive halving: distance p/2, p/4, ..., size S/2, S/4, ...
        for k in range(log_p):
            d = p >> (k + 1)
            phases.append(CollectivePhase(1, tuple(Flow(S / 2 ** (k + 1), ((i, i ^ d),)) for i in ranks)))
        # all-gather by recursive doubling: distance 1, 2, ..., size S/p, 2S/p, ...
        for k in range(log_p):
            d = 1 << k
            phases.append(CollectivePhase(1, tuple(Flow(S * d / p, ((i, i ^ d),)) for i in ranks)))
        return phases
    if op == "allreduce" and alg == "tree":
        rounds = math.ceil(math.log2(p))
        reduce_phases = []
        for k in range(rounds):
            step = 1 << k
            pairs = [(i, i - step) for i in ranks if i % (2 * step) == step]
            reduce_phases.append(CollectivePhase(1, tuple(Flow(S, (pr,)) for pr in pairs)))
        bcast = [
            CollectivePhase(1, tuple(Flow(S, ((d, s),)) for f in ph.flows for (s, d) in f.members))
            for ph in reversed(reduce_phases)
        ]
        return reduce_phases + bcast
    if op == "allreduce" and alg == "hierarchical":
        if host_of_rank is None:
            raise ValueError("hierarchical allreduce needs the host of every rank")
        hosts: dict[int, list[int]] = {}
        for r, h in enumerate(host_of_rank):
            hosts.setdefault(h, []).append(r)
        groups = list(hosts.values())
        g = len(groups[0])
        if any(len(x) != g for x in groups):
            raise ValueError(
                f"hierarchical allreduce needs the same number of ranks on every host, got "
                f"{sorted({len(x) for x in groups})}"
            )
        h = len(groups)
        phases = []
        if g > 1:
            phases.append(CollectivePhase(g - 1, tuple(_ring(x, (g - 1) / g * S) for x in groups)))
        if h > 1:
            rails = [[grp[r] for grp in groups] for r in range(g)]
            phases.append(
                CollectivePhase(2 * (h - 1), tuple(_ring(x, 2.0 * (h - 1) / h * S / g) for x in rails))
            )
        if g > 1:
            phases.append(CollectivePhase(g - 1, tuple(_ring(x, (g - 1) / g * S) for x in groups)))
        return phases
    if op == "alltoall":
        w = _alltoall_weights(p, spec.skew, rotation) if spec.skew > 0 else np.ones(p)
        flows = tuple(Flow(S / p * float(w[j]), ((i, j),)) for i in ranks for j in ranks if i != j)
        return [CollectivePhase(p - 1, flows)]
    if op == "sendrecv":
        k = int(str(spec.pattern).split(":")[1])
        if k % p == 0:
            raise ValueError(f"sendrecv shift:{k} on {p} ranks sends every rank to itself")
        return [CollectivePhase(1, tuple(Flow(S, ((i, (i + k) % p),)) for i in ranks))]
    raise ValueError(f"unsupported collective op={op!r} algorithm={alg!r}")
