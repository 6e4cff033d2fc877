"""A collective's phases of transfers: jobs -> collectives -> phases -> flows.

A collective of ``p`` ranks is decomposed, at the rank level, into *phases* run one after the other.
A phase holds *flows*; a flow is the unit of bandwidth allocation and has one or more *member*
transfers (source rank, destination rank) that all move ``flow.bytes`` each at the flow's common rate.
A pipelined ring is one flow whose members are its hops: it moves at the pace of its slowest hop.
Each phase also carries its algorithm's step count, the number of latency (alpha) terms it pays.

Chunked (pipelined) stages: ``chunks: N`` on a collective made of stages (hierarchical and tree
AllReduce) splits the buffer into N chunks of S/N and runs the N x stages phases as a pipeline, as NCCL
does: chunk c enters stage s once chunk c-1 has left stage s and chunk c has left stage s-1
(:attr:`CollectivePhase.after`). Every (chunk, stage) phase pays its stage's alpha. With stage times t_i
that do not interfere and no latency the collective takes ``(sum_i t_i + (N - 1) max_i t_i) / N``; with
zero-size buffers it takes ``sum_i a_i + (N - 1) max_i a_i`` (a_i the alpha of stage i).

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

The decomposition reads the collective's spec and nothing else, so it lives in the scenario room: the size
estimate (:mod:`ainet_gym.scenario.estimate`) and the engine (:mod:`ainet_gym.sim.job_tables`, which then
cuts rings into run-ahead segments with :func:`ainet_gym.sim.workload.segment_rings`) read the same phases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ainet_gym.scenario.spec import CHUNKED_ALGORITHMS, CollectiveSpec

__all__ = [
    "CHUNKED_ALGORITHMS",
    "CollectivePhase",
    "Flow",
    "bus_bandwidth_factor",
    "decompose",
    "pipeline",
]


@dataclass(frozen=True)
class Flow:
    bytes: float  # bytes each member moves
    members: tuple[tuple[int, int], ...]  # (src rank, dst rank) transfers coupled at one rate


@dataclass(frozen=True)
class CollectivePhase:
    """A set of flows that start together after ``steps`` alpha terms.

    ``after`` holds the indices (in the collective's phase list) of the phases this one waits for:
    ``None`` (the default) is the previous phase, so phases run one after the other; ``()`` is the start of
    the collective (the end of the job's previous collective). The last phase of the list must end last.
    """

    steps: int  # algorithm steps: latency terms paid by this phase
    flows: tuple[Flow, ...]
    after: tuple[int, ...] | None = None


def pipeline(stages: list[CollectivePhase], chunks: int) -> list[CollectivePhase]:
    """The stages run as a pipeline of ``chunks`` chunks (phase ``c * len(stages) + s`` is chunk ``c``
    in stage ``s``): each moves 1/chunks of its stage's bytes, pays its stage's steps, and waits for
    chunk c-1 in stage s and chunk c in stage s-1. ``chunks = 1`` returns the stages unchanged."""
    if chunks == 1:
        return list(stages)
    n = len(stages)
    out = []
    for c in range(chunks):
        for s, st in enumerate(stages):
            after = tuple(i for i, ok in (((c - 1) * n + s, c > 0), (c * n + s - 1, s > 0)) if ok)
            flows = tuple(Flow(f.bytes / chunks, f.members) for f in st.flows)
            out.append(CollectivePhase(st.steps, flows, after))
    return out


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
        If the algorithm does not apply (e.g. ``halving_doubling`` on a non-power-of-two ``p``), or
        ``spec.chunks`` is not 1 on a collective that is not in :data:`CHUNKED_ALGORITHMS`.
    """
    chunks = spec.chunks
    if not isinstance(chunks, (int, np.integer)) or isinstance(chunks, bool) or chunks < 1:
        raise ValueError(f"chunks = {chunks!r}: allowed: an integer >= 1 (1 = no pipelining)")
    if chunks != 1:
        if (spec.op, spec.algorithm) not in CHUNKED_ALGORITHMS:
            allowed = " or ".join(f"{op} {alg}" for op, alg in CHUNKED_ALGORITHMS)
            what = spec.op if spec.op in ("alltoall", "sendrecv") else f"{spec.op} {spec.algorithm}"
            raise ValueError(
                f"chunks = {chunks!r} on {what}: chunks > 1 applies only to {allowed}"
                " (a ring is pipelined already); use chunks = 1"
            )
        return pipeline(_stages(spec, p, host_of_rank, rotation), int(chunks))
    return _stages(spec, p, host_of_rank, rotation)


def _stages(
    spec: CollectiveSpec, p: int, host_of_rank: list[int] | None, rotation: int
) -> list[CollectivePhase]:
    """The phases of :func:`decompose`, one after the other (no chunking)."""
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
