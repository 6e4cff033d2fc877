"""Fidelity cross-check: the same scenario, policy and seed in the fluid model and in ns-3 (packets).

:func:`crosscheck` runs a scenario for its decision intervals in the fluid engine under a policy (any
policy string that ``ainet-gym evaluate`` takes: ``ecmp``, ``spray``, ``lp``, ``lp+bg``, ``pretrained``,
``ppo:PATH`` ...), records the routing split the policy chose for every connection in every interval,
then replays the same episode in ns-3 (the optional extra ``ns3``: ``pip install "ainet-gym[ns3]"``) on
the same fabric with the same routing, and reports each job's mean communication and step time per
completed iteration in both, over the whole span and per interval, with the wall time each simulator
took for the same simulated span (docs/fidelity-learning.md).

How the scenario becomes an ns-3 experiment:

- **Fabric.** One ns-3 node per GPU, storage host and switch of
  :class:`~ainet_gym.fabric.topology.Fabric`, one point-to-point link per duplex pair of fabric links
  (parallel links stay parallel), at the links' nominal rates (``link_gbps``, per direction) and a
  propagation delay of the link's latency (``fabric.hop_latency_us``). NVLink is not built: a transfer
  between GPUs of one host is refused.
- **Transport.** Every transfer is bulk TCP: TCP Cubic, MSS ``mss`` (1448: a 1500-byte MTU less 20 IP,
  20 TCP and 12 timestamp-option bytes), send/receive buffers ``tcp_buffer_bytes``, ``min_rto_ms``,
  FqCoDel queues (ns-3's default root queue disc, which shares a link max-min fairly between flows;
  DropTail splits unfairly by about 6%) over a device FIFO of ``device_queue_packets`` (a NIC ring kept
  short, as Linux's byte queue limits do, so that a flow's ACKs do not wait behind another flow's data).
  A sender keeps at most ``backlog_bytes`` unsent in its socket. There is no RDMA-like UDP sender.
- **Routing.** The split the fluid policy chose for a connection in an interval decides how ns-3
  carries it: a connection on one path is *pinned* (static /32 host routes on every switch of the path,
  for the data and, on the reverse path, for the ACKs; each (connection, path) has its own address pair
  on the two endpoints, so routes are per connection, not per destination); any other split is carried
  as one pinned TCP sub-flow per path, each with its share of the bytes (a static multipath transport).
  A connection split evenly over its whole ECMP set (spray) is carried so too by default; with
  ``spray_mode="packet"`` it is sprayed per packet instead (ns-3's random ECMP,
  ``Ipv4GlobalRouting::RandomEcmpRouting``, with a duplicate-ACK threshold of ``reorder_threshold``).
  ECMP hashing is therefore exactly the fluid's hash.
- **Route changes between intervals.** The fluid model (``routing.reroute: in_flight``, its default)
  applies a new split to the transfers in flight at once. The replay does the same with what TCP can
  move: at each interval boundary every transfer in flight whose connection's split changed moves its
  not-yet-sent bytes to the new split (the bytes a sub-flow has handed to its socket, on the wire or at
  most ``backlog_bytes`` queued behind them, stay on that sub-flow; a path that joins gets a new TCP
  connection, a path that leaves finishes what it holds). Transfers that start after the boundary take
  the new split from their start. Under ``routing.reroute: new_transfers`` nothing moves, on both sides:
  a transfer keeps the sub-flows it started with.
- **Background.** Each source's connections (storage host to GPU or back) are paced TCP senders at the
  fluid flow's demand (payload rate) over the connection's routed sub-flows, on in the intervals where the
  source's schedule (with the seed's offset) is on and silent otherwise: a demand cap that TCP shares
  fairly when links are congested, as the fluid's max-min with demand caps does.
- **Link degradations.** ``dynamics.link_failures.scheduled`` entries with a factor in (0, 1] change the
  rate of both directions' devices at the start of their intervals (and back at ``until_step``).
- **Jobs.** The fluid engine's timeline, from the episode's start times (``start_ms`` plus the seed's
  ``start_jitter_ms`` draw): compute, communication from ``(1 - overlap)`` of it, phases in order (a
  phase's transfers start together when the previous phase's have all been received), the next iteration
  when compute and communication are both done. A pipelined ring is one TCP connection per hop, coupled
  chunk by chunk as NCCL's ring is (a hop forwards a chunk of ``ring_chunk_bytes`` once it has received
  it, one ring step ahead, and at most ``ring_buffer_steps`` chunks ahead of what the hop it feeds has
  sent), so it moves at its slowest hop's pace on average. Latency is the packets' own, not an alpha term.
- **Fluid side.** The same scenario with ``fabric.link_efficiency`` set to ``header_efficiency`` (TCP/IP
  headers and framing, :data:`TCP_HEADER_EFFICIENCY`), so that both simulators carry the same payload
  per wire bit. The shipped scenarios are not changed: the factor applies to the cross-check only.

Supported subset (anything else raises :class:`CrosscheckError` naming the field): topologies
``single_switch``, ``spine_leaf`` and ``fat_tree`` of at most ``max_gpus`` GPUs, one NIC per GPU; no
random link failures and no failed (factor 0) scheduled ones; no job churn; no periodic AllToAll skew;
no chunked stage pipelines; no transfer between GPUs of one host; at most ``max_steps`` intervals; an
estimated ns-3 cost within ``max_ns3_bytes`` bytes.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.fabric.topology import Fabric
from ainet_gym.scenario.loader import load_scenario
from ainet_gym.scenario.spec import Scenario
from ainet_gym.sim.workload import decompose

__all__ = [
    "TCP_HEADER_EFFICIENCY",
    "CrosscheckConfig",
    "CrosscheckError",
    "Ns3NotInstalledError",
    "crosscheck",
    "tcp_header_efficiency",
]

#: Payload bytes per wire byte of bulk TCP in ns-3 when every link also carries the ACKs of the traffic
#: flowing the other way (collectives are permutations: every GPU sends and receives). A 1448-byte segment
#: (1500 MTU - 20 IP - 20 TCP - 12 timestamp option) costs 1448 + 52 + 2 (PPP framing of ns-3's
#: point-to-point device) wire bytes, and the receiver's delayed ACK (one 54-byte ACK per 2 segments) adds
#: 27 bytes per segment on the reverse direction: 1448 / 1529 = 0.9470. Measured here (docs/fidelity.md):
#: the slope of ns-3 transfer time over size (4-16 MB, 2 GPUs exchanging on a 10 Gb/s switch) gives 0.9468.
#: Real Ethernet frames add 38 bytes (header, FCS, preamble, gap) instead of PPP's 2: 1448 / (1538 + 45) = 0.915.
TCP_HEADER_EFFICIENCY: float = 1448.0 / (1448.0 + 54.0 + 54.0 / 2.0)


def tcp_header_efficiency(mss: int, del_ack_count: int = 2) -> float:
    """Payload bytes per wire byte of bulk TCP in the replay with segments of ``mss`` bytes and one ACK
    per ``del_ack_count`` segments: ``mss / (mss + 54 + 54 / del_ack_count)`` (52 bytes of IP, TCP and
    timestamp headers and 2 of PPP framing per data segment; a 54-byte ACK on the reverse direction,
    which collectives always use). ``tcp_header_efficiency(1448) == TCP_HEADER_EFFICIENCY``."""
    return mss / (mss + 54.0 + 54.0 / del_ack_count)


_SUPPORTED_TOPOLOGIES = ("single_switch", "spine_leaf", "fat_tree")


class CrosscheckError(ValueError):
    """The scenario or the request is outside the cross-check's supported subset."""


class Ns3NotInstalledError(ImportError):
    """ns-3's Python bindings (the optional extra ``ns3``) are not installed."""


@dataclass(frozen=True)
class CrosscheckConfig:
    """Every constant of the ns-3 experiment, documented and overridable.

    Attributes
    ----------
    mss
        TCP segment size in bytes (``ns3::TcpSocket::SegmentSize``; ns-3's default is 536). The devices'
        MTU is ``mss + 52`` (IP, TCP and timestamp headers): 1500 for the default, 9000 for jumbo frames
        (``mss=8948``).
    del_ack_count
        Segments per delayed ACK (``ns3::TcpSocket::DelAckCount``; 2, TCP's default). Fewer ACKs make
        the replay cheaper.
    header_efficiency
        Capacity factor applied to the fluid model's network links for the cross-check (payload per
        wire byte of TCP/IP over ns-3's PPP framing, :func:`tcp_header_efficiency` of ``mss`` and
        ``del_ack_count``; change it with them); ``None`` keeps the scenario's ``link_efficiency``.
    tcp_buffer_bytes
        TCP send and receive buffer per socket.
    min_rto_ms
        TCP minimum retransmission timeout (ns-3's default is 1 s, a wide-area value).
    del_ack_timeout_ms
        Longest time a receiver holds back a delayed ACK (``ns3::TcpSocket::DelAckTimeout``; ns-3's default
        is 200 ms, Linux's 40-200 ms). It must be below ``min_rto_ms``, as Linux's 40 ms is below its 200 ms
        minimum RTO: with ns-3's 200 ms and a 5 ms minimum RTO, a sender with one segment in flight (a
        ring hop waiting for credit, or a window cut to one segment) got no ACK before its RTO fired; every
        segment then cost a spurious timeout that reset the window to one segment, and the sender stayed in
        that loop (xc-ingest-bursts under ECMP: two jobs moved one segment per 5 ms for the rest of the run,
        docs/fidelity-learning.md).
    spray_mode
        How a connection the policy splits evenly over its whole ECMP set is carried: ``"subflows"``
        (default): one pinned TCP sub-flow per path with an equal share of the bytes (what the fluid
        split means: a multipath transport, or one QP per path); ``"packet"``: per-packet random ECMP
        (``Ipv4GlobalRouting::RandomEcmpRouting``) with TCP's ``reorder_threshold`` and ``spray_sack``.
        Per-packet spraying over TCP measures how much reordering costs (docs/fidelity.md).
    spray_sack
        SACK (``TcpSocketBase::Sack``) on sprayed connections (it is always on otherwise). An earlier
        version of the driver saw ns-3.44 segfault in ``TcpTxBuffer::Update`` on the SACK blocks of sprayed
        flows and ran them with SACK off; :func:`calibration` runs every case in a process of its own, so
        such a crash is reported as the row's error.
    reorder_threshold
        Duplicate ACKs before fast retransmit (``ReTxThreshold``) when a connection is sprayed per packet;
        3 (TCP's default) otherwise. Per-packet spraying reorders segments; with the default threshold
        reordering triggers spurious retransmits (docs/fidelity.md).
    send_size
        Bytes handed to the socket per write by the bulk sender.
    ring_chunk_bytes
        Chunk size of a pipelined ring (NCCL's Simple protocol: a 4 MiB buffer of 8 steps, 512 KiB per
        step). A ring's hops are coupled as NCCL couples them: one TCP connection per hop, which may send
        a chunk only once it has received it from the previous hop, one ring step (the bytes of one of the
        ring's ``steps``) ahead: its first step is its own data. The ring then moves at its slowest hop's
        pace, as in the fluid model. ``None`` or 0: a ring's hops are independent bulk transfers.
    backlog_bytes
        Unsent bytes a sender keeps in its TCP socket beyond what is on the wire (it writes more only
        below this). What a route change at an interval boundary leaves on the old sub-flow, and what a
        paced background sender may queue while its share is below its rate; 64 KiB is 52 us at 10 Gb/s.
    ring_buffer_steps
        Back-pressure of a pipelined ring: a hop may send at most this many chunks beyond what the hop it
        feeds has sent (the receiver's buffer: NCCL's ``NCCL_STEPS`` = 8 slots, each freed when the
        receiver has forwarded it). ``None``: no such bound (a hop is held back only by its predecessor).
    split_qps
        How a connection whose split uses several paths competes for the links. ``None`` (default): one
        TCP connection per path of the split, carrying the path's share of the bytes (a multipath
        transport with one QP per path); each competes as one connection on its links (FqCoDel shares a
        link per connection), so the part of a split connection on a path gets a whole connection's share
        there, however small its fraction. The fluid model carries a split connection as one flow with a
        fixed ratio between its paths, whose traffic on a link counts in proportion to its fraction there:
        a connection's share of a link is proportional to its traffic on it. An integer K >= 1: every
        connection (jobs' and background) is K TCP connections (QPs) of 1/K of its bytes (of its rate, for
        a background source), K * f of them on a path of fraction f, and the fluid run rounds every split
        of the policy to multiples of 1/K (largest remainders, :func:`_quantize_split`) before it runs it,
        so both sides carry the same split. With ring coupling (every QP of a ring at the ring's pace) the
        packet side's per-connection sharing is then the fluid model's weighted sharing, exactly for
        splits in multiples of 1/K: a flow of fraction f on a link holds K f of the link's connections.
        What a WCMP switch does with a connection of K QPs hashed by weight (docs/fidelity-learning.md, the
        LP's uneven splits).
    max_gpus
        Largest fabric (GPUs) accepted.
    max_steps
        Most decision intervals accepted (the cost is bounded by ``max_ns3_bytes``).
    max_ns3_bytes
        Largest estimated number of transfer bytes the ns-3 run may carry (its cost grows with bytes:
        about 40 ms of wall time per MB over 4 hops on one core).
    wall_limit_s
        ns-3 stops and the cross-check fails past this much wall time.
    fluid_repeats
        Timed replays of the fluid span (the same seed and the recorded splits, in the same process) whose
        median is the fluid wall and CPU time; 0: the recorded run's own time (which includes the
        policy's first calls). A span takes about a millisecond, which one measurement on a shared
        machine does not resolve (1-9 ms seen for the same span).
    device_queue_packets
        Packets of the FIFO of every ns-3 point-to-point device, below the FqCoDel queue disc (ns-3's
        default is 100). The queue disc schedules flows fairly only if this FIFO is short (Linux's byte
        queue limits keep a NIC ring to a few packets): with 100 packets, 150 KB of one flow's data sat in
        front of the other flows' ACKs on every link that carries both (120 us at 10 Gb/s), and a 2 MB
        transfer whose ACKs shared links with another flow's data took 1.914 ms instead of 1.711 ms
        (docs/fidelity.md).
    fq_flows
        Hash buckets of every FqCoDel queue disc (``ns3::FqCoDelQueueDisc::Flows``; ns-3's and Linux's
        default is 1024, this replay's 65536). FqCoDel puts a packet in bucket hash(5-tuple) mod
        ``fq_flows`` and shares the link fairly between buckets, not between connections: connections that
        hash to one bucket share one connection's share (and the details' ``flow_buckets`` say which did).
        With n connections on a link each collides with another with probability about 1 - (1 - 1 /
        fq_flows)^(n - 1): 7% for n = 76 with 1024 buckets, 0.1% with 65536. The fluid model shares a link
        per flow, with no such collisions, and so does a RoCE switch's fabric as far as the replay models it
        (a switch hashes a flow to a path, which the replay pins, but its egress queues are per traffic
        class, not per hashed flow; per-QP fairness comes from the senders' congestion control), so
        collisions are an artefact of the replay's queue disc. They grow with the number of connections
        (``split_qps``): with 1024 buckets and ``split_qps=6``, ``xc-periodic-interference`` under ECMP missed
        llm-a by -9.82% (+0.01% with 65536) and ``xc-ingest-bursts`` under ``lp+bg`` llm-c by -14.95%
        (-0.50%), one QP of a hop ending 7 ms after its siblings (docs/fidelity-learning.md). Tables measured
        before 2026-12-02 17:00 UTC used 1024 (``fq_flows=1024`` reproduces them).
    fq_perturbation
        Salt of FqCoDel's flow hash (``ns3::FqCoDelQueueDisc::Perturbation``, ns-3's default 0): a
        different value changes which connections collide, not how many on average.
    """

    mss: int = 1448
    del_ack_count: int = 2
    header_efficiency: float | None = TCP_HEADER_EFFICIENCY
    tcp_buffer_bytes: int = 1 << 20
    min_rto_ms: float = 5.0
    del_ack_timeout_ms: float = 1.0
    device_queue_packets: int = 4
    fq_flows: int = 1 << 16
    fq_perturbation: int = 0
    spray_mode: str = "subflows"
    reorder_threshold: int = 64
    spray_sack: bool = True
    send_size: int = 14480
    ring_chunk_bytes: int | None = 1 << 19
    ring_buffer_steps: int | None = 8
    backlog_bytes: int = 1 << 16
    split_qps: int | None = None
    max_gpus: int = 64
    max_steps: int = 64
    max_ns3_bytes: float = 8e9
    wall_limit_s: float = 900.0
    fluid_repeats: int = 5


# ---------------------------------------------------------------------------------------------- checks
def _check_supported(sc: Scenario, fabric: Fabric, steps: int, cfg: CrosscheckConfig) -> None:
    where = f"scenario {sc.name!r}"
    f = sc.fabric
    if f.topology not in _SUPPORTED_TOPOLOGIES:
        raise CrosscheckError(
            f"{where}: fabric.topology = {f.topology!r} is not supported by the cross-check; "
            f"allowed: {', '.join(_SUPPORTED_TOPOLOGIES)}"
        )
    if fabric.n_gpus > cfg.max_gpus:
        raise CrosscheckError(
            f"{where}: the fabric has {fabric.n_gpus} GPUs; the cross-check supports at most {cfg.max_gpus} "
            "(max_gpus, --max-gpus)"
        )
    if f.gpus_per_nic != 1:
        raise CrosscheckError(
            f"{where}: fabric.gpus_per_nic = {f.gpus_per_nic}: a NIC shared over PCIe is not built by the "
            "cross-check; allowed: 1"
        )
    lf = sc.dynamics.link_failures
    if lf.rate_per_step > 0:
        raise CrosscheckError(
            f"{where}: dynamics.link_failures.rate_per_step = {lf.rate_per_step:g}: random link failures "
            "are not supported by the cross-check; allowed: 0 (scheduled degradations are)"
        )
    for i, sf in enumerate(lf.scheduled):
        if not sf.factor > 0:
            raise CrosscheckError(
                f"{where}: dynamics.link_failures.scheduled[{i}].factor = {sf.factor:g}: a failed link is "
                "not supported by the cross-check; allowed: a degradation, factor in (0, 1]"
            )
    if sc.dynamics.job_churn.arrival_rate > 0:
        raise CrosscheckError(
            f"{where}: dynamics.job_churn is not supported by the cross-check; allowed: none"
        )
    for job in sc.jobs:
        for i, c in enumerate(job.collectives):
            if getattr(c, "chunks", 1) != 1:
                raise CrosscheckError(
                    f"{where}: workload.jobs[{job.name}].collectives[{i}].chunks = {c.chunks}: chunked "
                    "stage pipelines are not supported by the cross-check; allowed: 1"
                )
            if c.group_size is not None:
                raise CrosscheckError(
                    f"{where}: workload.jobs[{job.name}].collectives[{i}].group_size = {c.group_size}: "
                    "collectives in rank groups are not replayed by the cross-check; allowed: none (one "
                    "group of all the job's ranks)"
                )
            if c.op == "alltoall" and c.skew > 0 and c.skew_period_steps:
                raise CrosscheckError(
                    f"{where}: workload.jobs[{job.name}].collectives[{i}].skew_period_steps = "
                    f"{c.skew_period_steps}: a moving AllToAll skew is not supported; allowed: none"
                )
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= cfg.max_steps:
        raise CrosscheckError(f"steps = {steps!r}: must be an integer in [1, {cfg.max_steps}]")


# ---------------------------------------------------------------------------------------------- fluid
@dataclass
class _Conn:
    src: int  # source endpoint (GPU id, or storage host id n_gpus + i)
    dst: int
    paths: list[list[int]]  # candidate paths (link ids), the columns of the split
    full_ecmp: int  # size of the uncapped ECMP set


@dataclass
class _JobPlan:
    name: str
    compute_s: float
    overlap: float
    start_s: float  # the episode's start (start_ms plus the seed's start_jitter_ms draw)
    # per phase, per flow: (global connection id, bytes, index of the feeding hop in the flow or -1, lag bytes)
    phases: list[list[list[tuple[int, float, int, float]]]]


@dataclass
class _BackgroundPlan:
    """One background source of the episode: its connections, each one's payload rate while on, and
    the intervals in which it is on (its schedule with the seed's offset)."""

    name: str
    conns: list[int]  # connection ids
    rate_bytes_per_s: list[float]  # (conns,) payload bytes/s of each connection while on
    on: np.ndarray  # (steps,) bool


@dataclass
class _FluidRun:
    fabric: Fabric
    interval_s: float
    splits: list[np.ndarray]  # per step: (connections, max_paths)
    conns: dict[int, _Conn]
    jobs: list[_JobPlan]
    backgrounds: list[_BackgroundPlan]
    link_factor: np.ndarray  # (steps, links) capacity factor of each link in each interval
    iterations: np.ndarray  # (jobs,)
    comm_sum_s: np.ndarray  # (jobs,)
    step_sum_s: np.ndarray  # (jobs,)
    step_iterations: np.ndarray  # (steps, jobs) iterations that ended in each interval
    step_comm_sum_s: np.ndarray  # (steps, jobs) their communication times, summed
    step_step_sum_s: np.ndarray  # (steps, jobs) their step times, summed
    link_bytes: np.ndarray  # (steps, links) payload bytes each link carried in each interval
    wall_s: float  # median of the timed replays (the recorded run if there are none)
    cpu_s: float
    first_wall_s: float  # the recorded run (the policy acting), first call of the kernels included
    reroute: str = "in_flight"  # routing.reroute: what a new split does to the transfers in flight


def _ecmp_set_size(fabric: Fabric, src: int, dst: int) -> int:
    """Number of equal-cost shortest paths from endpoint ``src`` to ``dst``, parallel links counted
    (the set ns-3's global routing sprays over; the fluid's candidate set may be capped)."""
    if fabric.n_gpus > max(src, dst) and fabric.gpu_host[src] == fabric.gpu_host[dst]:
        return 1
    a, b = int(fabric.leaf_node[fabric.endpoint_leaf[src]]), int(fabric.leaf_node[fabric.endpoint_leaf[dst]])
    if a == b:
        return 1
    switch = np.asarray([k not in ("gpu", "storage", "nvswitch") for k in fabric.node_kind])
    m = switch[fabric.link_src] & switch[fabric.link_dst]
    s, d = fabric.link_src[m], fabric.link_dst[m]
    n = len(fabric.node_names)
    dist = np.full(n, -1)
    count = np.zeros(n)
    dist[a], count[a] = 0, 1.0
    frontier = [a]
    while frontier and dist[b] < 0:  # BFS by levels over switches (construction-time graph walk)
        nxt: set[int] = set()
        for u in frontier:
            for v in d[s == u]:
                if dist[v] < 0 or dist[v] == dist[u] + 1:
                    if dist[v] < 0:
                        dist[v] = dist[u] + 1
                        nxt.add(int(v))
                    count[v] += count[u]
        frontier = sorted(nxt)
    return int(count[b])


def _endpoint_node(fabric: Fabric, e: int) -> int:
    """Node id of endpoint ``e`` (a GPU, or a storage host ``n_gpus + i``): the source of its NIC link."""
    return int(fabric.link_src[fabric.endpoint_up[e]])


def _quantize_split(split: np.ndarray, qps: int) -> np.ndarray:
    """Each row of ``split`` (connections, paths) rounded to multiples of ``1 / qps``: the row normalised,
    ``floor(qps * f)`` QPs per path, and the remaining QPs to the paths with the largest remainders (ties
    to the lower path index); a row of zeros stays zero. What a connection of ``qps`` QPs hashed by
    weight carries (:attr:`CrosscheckConfig.split_qps`).

    Examples
    --------
    >>> _quantize_split(np.array([[0.199, 0.801], [0.6, 0.4], [0.0, 0.0]]), 3).tolist()
    [[0.3333333333333333, 0.6666666666666666], [0.6666666666666666, 0.3333333333333333], [0.0, 0.0]]
    """
    split = np.asarray(split, dtype=np.float64)
    tot = split.sum(axis=1, keepdims=True)
    w = np.divide(split, tot, out=np.zeros_like(split), where=tot > 0)
    exact = w * qps
    n = np.floor(exact + 1e-9)
    rem = exact - n
    short = np.where(tot[:, 0] > 0, qps - n.sum(axis=1), 0).astype(np.int64)
    order = np.argsort(-rem, axis=1, kind="stable")
    for r in np.flatnonzero(short > 0):
        n[r, order[r, : short[r]]] += 1
    return n / qps


def _run_fluid(sc: Scenario, policy: str, seed: int, steps: int, cfg: CrosscheckConfig) -> _FluidRun:
    """Run ``steps`` intervals of ``sc`` under ``policy`` in the fluid engine and record what the ns-3
    replay needs: every connection's split in every interval, the jobs' phases, the background sources
    with their schedule, the links' capacity factors, and the per-interval figures of the fluid run."""
    from ainet_gym.agents.registry import make_agent
    from ainet_gym.envs.env import EnvCore

    agent = make_agent(policy)
    core = EnvCore(sc, batch=1, episode_steps=steps, **agent.env_kwargs)
    obs, _ = core.reset([seed])
    agent.check(core)
    agent.reset(core)
    world = core.world
    fabric = world.fabric
    J = world.n_job_slots
    iters = np.zeros(J, dtype=np.int64)
    comm = np.zeros(J)
    step_t = np.zeros(J)
    per_iters = np.zeros((steps, J), dtype=np.int64)
    per_comm = np.zeros((steps, J))
    per_step = np.zeros((steps, J))
    link_bytes = np.zeros((steps, fabric.n_links))
    link_factor = np.ones((steps, fabric.n_links))
    n_bg = len(sc.background)
    bg_on = np.zeros((steps, n_bg), dtype=bool)
    splits: list[np.ndarray] = []
    wall = cpu = 0.0
    for k in range(steps):
        sim = world.sim
        assert sim is not None
        # the dynamics of interval k are set: capacities and background sources as the interval will run
        link_factor[k] = world.links.cap_factor[0]
        bg_on[k] = sim.state.bg_on[world.bg_unit[0]] if n_bg else bg_on[k]
        a = agent.act(core, obs)
        split = np.asarray(a if agent.level == "engine" else core.decode(core.validate(a)), dtype=np.float64)
        if cfg.split_qps is not None:
            split = _quantize_split(split, cfg.split_qps)
        splits.append(split.copy())
        t0, c0 = time.perf_counter(), time.process_time()
        obs, *_ = core.step_split(split)
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        res = core.last_result
        assert res is not None
        it = res.iterations[0]
        iters += it
        done = it > 0
        comm += np.where(done, np.nan_to_num(res.comm_time_s[0]) * it, 0.0)
        step_t += np.where(done, np.nan_to_num(res.step_time_s[0]) * it, 0.0)
        per_iters[k] = it
        per_comm[k] = np.where(done, np.nan_to_num(res.comm_time_s[0]) * it, 0.0)
        per_step[k] = np.where(done, np.nan_to_num(res.step_time_s[0]) * it, 0.0)
        link_bytes[k] = res.link_bytes[0]
    # the jobs' transfers, in the connection order of the engine's compiled units
    # (collectives -> phases -> flows -> members, first appearance of each (src, dst) pair)
    sim = world.sim
    assert sim is not None
    conns: dict[int, _Conn] = {}
    jobs: list[_JobPlan] = []
    for j in range(J):
        job = world.jobs[0][j]
        if job is None:
            continue
        gpus = np.asarray(world.gpus[0][j], dtype=np.int64)
        hosts = fabric.gpu_host[gpus].tolist()
        lay = core.slot_layout
        slots = core.slot_connection[0, lay.offset[j] : lay.offset[j] + lay.width[j]]
        local: dict[tuple[int, int], int] = {}
        phases: list[list[list[tuple[int, float, int, float]]]] = []
        for coll in job.collectives:
            for ph in decompose(coll, len(gpus), hosts):
                flows = []
                for fl in ph.flows:
                    transfers = []
                    # a pipelined ring: hop i forwards what hop pred(i) (the one into its source) delivered,
                    # one ring step (bytes / steps) ahead of it
                    dst_of = {dr: i for i, (_, dr) in enumerate(fl.members)}
                    ring = len(fl.members) > 1 and all(sr in dst_of for sr, _ in fl.members)
                    lag = float(fl.bytes) / max(ph.steps, 1)
                    for sr, dr in fl.members:
                        key = (int(gpus[sr]), int(gpus[dr]))
                        c = int(slots[local.setdefault(key, len(local))])
                        if c not in conns:
                            if fabric.gpu_host[key[0]] == fabric.gpu_host[key[1]]:
                                raise CrosscheckError(
                                    f"scenario {sc.name!r}: job {job.name!r} sends from GPU {key[0]} to GPU "
                                    f"{key[1]} of the same host (NVLink), which the cross-check does not "
                                    "build; allowed: one GPU per host in the job, or fabric.gpus_per_host: 1"
                                )
                            paths = fabric.paths(*key)
                            conns[c] = _Conn(key[0], key[1], paths, _ecmp_set_size(fabric, *key))
                        pred = dst_of[sr] if ring else -1
                        transfers.append((c, float(fl.bytes), pred, lag))
                    flows.append(transfers)
                phases.append(flows)
        if int((slots >= 0).sum()) != len(local):
            raise RuntimeError(
                f"job {job.name!r}: {len(local)} connections rebuilt, the world has {(slots >= 0).sum()}"
            )
        jobs.append(_JobPlan(job.name, job.compute_ms * 1e-3, job.overlap, job.start_ms * 1e-3, phases))
    # background sources: one demand-capped flow per connection of the source's unit
    backgrounds: list[_BackgroundPlan] = []
    for i in range(n_bg):
        u = int(world.bg_unit[0, i])
        lo, n = int(sim.conn_off[u]), int(sim.unit_nconns[u])
        ids = list(range(lo, lo + n))
        unit = sim.flat_units[u]  # a background unit: flow i is connection i, its demand the rate cap
        for c in ids:
            s, d = int(sim.conn_src[c]), int(sim.conn_dst[c])
            conns[c] = _Conn(s, d, fabric.paths(s, d), _ecmp_set_size(fabric, s, d))
        rates = [float(x) for x in unit.flow_demand_bytes_per_s[:n]]
        backgrounds.append(_BackgroundPlan(unit.name, ids, rates, bg_on[:, i].copy()))
    alive = [j for j in range(J) if world.jobs[0][j] is not None]
    # the fluid span takes about a millisecond, so one measurement is at the mercy of the scheduler on a
    # shared machine: time `fluid_repeats` replays of the same span (same seed, the recorded splits) and
    # keep the median; every replay must reproduce the recorded iterations
    walls, cpus = [wall], [cpu]
    for _ in range(cfg.fluid_repeats):
        core.reset([seed])
        again = np.zeros(J, dtype=np.int64)
        t0, c0 = time.perf_counter(), time.process_time()
        for split in splits:
            core.step_split(split)
            again += core.last_result.iterations[0]
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        if not np.array_equal(again, iters):
            raise RuntimeError(f"a replay of the fluid span completed {again} iterations, the run {iters}")
    timed = slice(1, None) if cfg.fluid_repeats > 0 else slice(None)
    return _FluidRun(
        fabric=fabric,
        interval_s=world.decision_interval_s,
        splits=splits,
        conns=conns,
        jobs=jobs,
        backgrounds=backgrounds,
        link_factor=link_factor,
        iterations=iters[alive],
        comm_sum_s=comm[alive],
        step_sum_s=step_t[alive],
        step_iterations=per_iters[:, alive],
        step_comm_sum_s=per_comm[:, alive],
        step_step_sum_s=per_step[:, alive],
        link_bytes=link_bytes,
        wall_s=float(np.median(walls[timed])),
        cpu_s=float(np.median(cpus[timed])),
        first_wall_s=wall,
        reroute=sc.routing.reroute,
    )


# ---------------------------------------------------------------------------------------------- routing
def _routing_of(split_row: np.ndarray, conn: _Conn, spray_mode: str) -> tuple[str, list[tuple[int, float]]]:
    """``("spray", [])`` or ``("paths", [(path index, fraction), ...])`` for one connection's split."""
    n = len(conn.paths)
    row = np.asarray(split_row[:n], dtype=np.float64)
    tot = row.sum()
    row = row / tot if tot > 0 else np.full(n, 1.0 / n)
    even = n > 1 and n == conn.full_ecmp and np.allclose(row, 1.0 / n, rtol=0, atol=1e-9)
    if even and spray_mode == "packet":
        return "spray", []
    keep = np.flatnonzero(row > 1e-9)
    return "paths", [(int(k), float(row[k])) for k in keep]


# ---------------------------------------------------------------------------------------------- ns-3
_NS = None


def _import_ns() -> Any:
    """``ns`` of the ns-3 bindings, imported once from a small working directory (the bindings scan the
    current directory at import), with the cross-check's C++ driver compiled into it."""
    global _NS
    if _NS is not None:
        return _NS
    import tempfile

    cwd = os.getcwd()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.chdir(tmp)
            try:
                from ns import ns
            except ImportError as e:
                raise Ns3NotInstalledError(
                    "the cross-check needs ns-3's Python bindings: pip install 'ainet-gym[ns3]' "
                    f"(the optional extra ns3, package ns3==3.44.post0; a C++ compiler must be present): {e}"
                ) from e
    finally:
        os.chdir(cwd)
    src = (Path(__file__).with_name("ns3_driver.cc")).read_text(encoding="utf-8")
    ns.cppyy.cppdef(src)
    _NS = ns
    return ns


def _ip_pair(n: int) -> tuple[str, str]:
    """The n-th connection address pair: the two hosts of the /30 subnet 11.0.0.0 + 4n. Being in one
    subnet makes ns-3's source-address selection pick the pair's own address on the sending GPU."""
    out = []
    for host in (1, 2):
        i = 4 * n + host
        out.append(f"{11 + (i >> 24)}.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}")
    return out[0], out[1]


def _run_ns3(run: _FluidRun, cfg: CrosscheckConfig) -> dict[str, Any]:
    """Replay the jobs and the background in ns-3: iterations and comm/step time sums (s) per job, in all
    and per interval, payload bytes per link and interval, wall and CPU time of the run, whether it
    timed out, the number of TCP connections, how connections were routed and how many transfers in
    flight moved their bytes to a new split."""
    ns = _import_ns()
    cpp = ns.cppyy.gbl
    f = run.fabric
    steps = len(run.splits)
    routing = {
        (c, k): _routing_of(run.splits[k][c], conn, cfg.spray_mode)
        for c, conn in run.conns.items()
        for k in range(steps)
    }
    spray = any(kind == "spray" for kind, _ in routing.values())

    ns.RngSeedManager.SetSeed(1)
    ns.RngSeedManager.SetRun(1)
    ns.Config.SetDefault("ns3::Ipv4GlobalRouting::RandomEcmpRouting", ns.BooleanValue(spray))
    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.TypeIdValue(ns.TcpCubic.GetTypeId()))
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(cfg.mss))
    ns.Config.SetDefault("ns3::TcpSocket::DelAckCount", ns.UintegerValue(cfg.del_ack_count))
    ns.Config.SetDefault("ns3::PointToPointNetDevice::Mtu", ns.UintegerValue(cfg.mss + 52))
    # the root queue disc Ipv4AddressHelper::Assign installs on every device (FqCoDel)
    ns.Config.SetDefault("ns3::FqCoDelQueueDisc::Flows", ns.UintegerValue(cfg.fq_flows))
    ns.Config.SetDefault("ns3::FqCoDelQueueDisc::Perturbation", ns.UintegerValue(cfg.fq_perturbation))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(cfg.tcp_buffer_bytes))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(cfg.tcp_buffer_bytes))
    ns.Config.SetDefault(
        "ns3::TcpSocketBase::ReTxThreshold", ns.UintegerValue(cfg.reorder_threshold if spray else 3)
    )
    ns.Config.SetDefault("ns3::TcpSocketBase::Sack", ns.BooleanValue(cfg.spray_sack or not spray))
    ns.Config.SetDefault("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.MicroSeconds(cfg.min_rto_ms * 1e3)))
    ns.Config.SetDefault(
        "ns3::TcpSocket::DelAckTimeout", ns.TimeValue(ns.MicroSeconds(cfg.del_ack_timeout_ms * 1e3))
    )

    # nodes: every GPU, storage host and switch of the fabric (no NVLink switches)
    built = [i for i, k in enumerate(f.node_kind) if k != "nvswitch"]
    is_switch = np.asarray([k not in ("gpu", "storage", "nvswitch") for k in f.node_kind])
    nodes = ns.NodeContainer()
    nodes.Create(len(built))
    node_of = {fid: nodes.Get(i) for i, fid in enumerate(built)}
    stack = ns.InternetStackHelper()
    stack.SetIpv6StackInstall(False)
    stack.Install(nodes)

    orch = cpp.ainet_xc.Orchestrator()
    n_conn_ids = max(run.conns) + 1 if run.conns else 0
    orch.Configure(
        run.interval_s, steps, n_conn_ids, cfg.send_size, cfg.wall_limit_s, float(cfg.ring_chunk_bytes or 0),
        cfg.backlog_bytes, float(cfg.ring_buffer_steps or 0),
    )  # fmt: skip
    orch.SetMoveInFlight(run.reroute == "in_flight")

    # links: one point-to-point channel per duplex pair of fabric links
    p2p = ns.PointToPointHelper()
    p2p.SetQueue("ns3::DropTailQueue", "MaxSize", ns.StringValue(f"{cfg.device_queue_packets}p"))
    latency = getattr(f, "link_latency_s", None)  # per-link latencies where the fabric has them
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
    end: dict[int, tuple[int, str, int, str]] = {}  # link id -> (src ifindex, src ip, dst ifindex, dst ip)
    host_if: dict[int, tuple[int, str]] = {}  # endpoint node -> (NIC ifindex, leaf-side ip)
    device: dict[int, Any] = {}  # link id -> the ns-3 device that sends on it
    rev_pool: dict[tuple[int, int], list[int]] = {}
    for lk in range(f.n_links):
        rev_pool.setdefault((int(f.link_src[lk]), int(f.link_dst[lk])), []).append(lk)
    for lk in range(f.n_links):
        u, v = int(f.link_src[lk]), int(f.link_dst[lk])
        if lk in end or u not in node_of or v not in node_of:
            continue
        rk = next(r for r in rev_pool[(v, u)] if r not in end)
        delay = f.hop_latency_s if latency is None else float(latency[lk])
        p2p.SetChannelAttribute("Delay", ns.TimeValue(ns.NanoSeconds(round(delay * 1e9))))
        devs = p2p.Install(node_of[u], node_of[v])
        devs.Get(0).SetAttribute("DataRate", ns.DataRateValue(ns.DataRate(int(f.link_gbps[lk] * 1e9))))
        devs.Get(1).SetAttribute("DataRate", ns.DataRateValue(ns.DataRate(int(f.link_gbps[rk] * 1e9))))
        device[lk], device[rk] = devs.Get(0), devs.Get(1)
        ifc = addr.Assign(devs)
        addr.NewNetwork()
        iu = node_of[u].GetObject[ns.Ipv4]().GetInterfaceForDevice(devs.Get(0))
        iv = node_of[v].GetObject[ns.Ipv4]().GetInterfaceForDevice(devs.Get(1))
        a_u, a_v = str(ifc.GetAddress(0)), str(ifc.GetAddress(1))
        end[lk] = (iu, a_u, iv, a_v)
        end[rk] = (iv, a_v, iu, a_u)
        if not is_switch[u] and is_switch[v]:
            host_if[u] = (iu, a_v)
    # scheduled degradations and repairs: each direction's device sends at its link's rate times the
    # interval's factor (a factor that changes from the previous interval, or differs from 1 at the start)
    for k in range(steps):
        prev = run.link_factor[k - 1] if k > 0 else np.ones(f.n_links)
        for lk in np.flatnonzero(run.link_factor[k] != prev):
            if int(lk) in device:
                d = orch.AddDevice(device[int(lk)])
                orch.AddRateChange(k, d, float(f.link_gbps[lk] * 1e9 * run.link_factor[k, lk]))
    if spray:
        ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
    srh = ns.Ipv4StaticRoutingHelper()
    static = {fid: srh.GetStaticRouting(node.GetObject[ns.Ipv4]()) for fid, node in node_of.items()}
    for fid, (ifidx, leaf_ip) in host_if.items():
        static[fid].SetDefaultRoute(ns.Ipv4Address(leaf_ip), ifidx)

    # one address pair per routed (connection, path), /32 host routes along the path and back
    pair_addr: dict[tuple[int, int], tuple[str, str]] = {}
    n_addr = 0
    mask30 = ns.Ipv4Mask("255.255.255.252")

    def address_pair(c: int, k: int) -> tuple[str, str]:
        nonlocal n_addr
        if (c, k) in pair_addr:
            return pair_addr[(c, k)]
        conn = run.conns[c]
        s_ip, d_ip = _ip_pair(n_addr)
        n_addr += 1
        for e, ip in ((conn.src, s_ip), (conn.dst, d_ip)):
            en = _endpoint_node(f, e)
            ipv4 = node_of[en].GetObject[ns.Ipv4]()
            ipv4.AddAddress(host_if[en][0], ns.Ipv4InterfaceAddress(ns.Ipv4Address(ip), mask30))
        for lk in conn.paths[k]:
            u, v = int(f.link_src[lk]), int(f.link_dst[lk])
            iu, _, iv, a_v = end[lk]
            a_u = end[lk][1]
            if is_switch[u]:  # data towards the destination address
                static[u].AddHostRouteTo(ns.Ipv4Address(d_ip), ns.Ipv4Address(a_v), iu)
            if is_switch[v]:  # ACKs back towards the source address, on the same links
                static[v].AddHostRouteTo(ns.Ipv4Address(s_ip), ns.Ipv4Address(a_u), iv)
        pair_addr[(c, k)] = (s_ip, d_ip)
        return s_ip, d_ip

    for (c, k), (kind, parts) in sorted(routing.items()):
        conn = run.conns[c]
        sn, dn = _endpoint_node(f, conn.src), _endpoint_node(f, conn.dst)
        sid, did = node_of[sn].GetId(), node_of[dn].GetId()
        if kind == "spray":
            s_ip = str(node_of[sn].GetObject[ns.Ipv4]().GetAddress(host_if[sn][0], 0).GetLocal())
            d_ip = str(node_of[dn].GetObject[ns.Ipv4]().GetAddress(host_if[dn][0], 0).GetLocal())
            orch.AddSub(c, k, sid, s_ip, did, d_ip, 1.0, -1, 0)
            continue
        for p, frac in parts:
            s_ip, d_ip = address_pair(c, p)
            if cfg.split_qps is None:
                orch.AddSub(c, k, sid, s_ip, did, d_ip, frac, p, 0)
                continue
            # split_qps = K: the fluid split is in multiples of 1/K (_quantize_split); K * frac TCP
            # connections of 1/K of the bytes each on this path
            for q in range(round(frac * cfg.split_qps)):
                orch.AddSub(c, k, sid, s_ip, did, d_ip, 1.0 / cfg.split_qps, p, q)
    for jp in run.jobs:
        j = orch.AddJob(jp.compute_s, jp.overlap, jp.start_s)
        for ph in jp.phases:
            orch.AddPhase(j)
            for fl in ph:
                orch.AddFlow(j)
                for c, b, pred, lag in fl:
                    orch.AddTransfer(j, c, b, pred, lag)
    for bg in run.backgrounds:
        for c, rate in zip(bg.conns, bg.rate_bytes_per_s):
            i = orch.AddBackground(c, rate)
            for k in np.flatnonzero(bg.on):
                orch.SetBackgroundOn(i, int(k), True)
    orch.Start()
    ns.Simulator.Stop(ns.Seconds(run.interval_s * steps))
    t0, c0 = time.perf_counter(), time.process_time()
    ns.Simulator.Run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    events = int(ns.Simulator.GetEventCount())
    J = len(run.jobs)
    # FqCoDel buckets (queue disc classes) each link's device used in the run: a class is made for
    # every hash bucket a packet falls in, so fewer buckets than the link's TCP connections (data and
    # ACKs) means some of them shared a bucket (CrosscheckConfig.fq_flows)
    fq_buckets = [-1] * f.n_links
    for lk, dev in device.items():
        qd = dev.GetNode().GetObject[ns.TrafficControlLayer]().GetRootQueueDiscOnDevice(dev)
        if qd:
            fq_buckets[lk] = int(qd.GetNQueueDiscClasses())
    # per sub-flow, the FqCoDel bucket of its data packets and of its ACKs (the same on every link)
    flow_buckets = [
        (
            int(orch.FlowBucket(i, False, cfg.fq_flows, cfg.fq_perturbation)),
            int(orch.FlowBucket(i, True, cfg.fq_flows, cfg.fq_perturbation)),
        )
        for i in range(int(orch.FlowCount()))
    ]
    # payload bytes per link and interval: each sub-flow's received bytes on the links of its path (a
    # sprayed sub-flow's spread evenly over its connection's candidate paths)
    link_bytes = np.zeros((steps, f.n_links))
    payload = 0.0
    for i in range(int(orch.FlowCount())):
        conn = run.conns[int(orch.FlowConn(i))]
        p = int(orch.FlowPath(i))
        rx = np.array([orch.FlowRxIn(i, k) for k in range(steps)])
        payload += float(rx.sum())
        paths = [conn.paths[p]] if p >= 0 else conn.paths
        for path in paths:
            link_bytes[:, path] += rx[:, None] / len(paths)
    out = {
        "iterations": np.asarray([orch.Iterations(j) for j in range(J)], dtype=np.int64),
        "comm_sum_s": np.asarray([orch.CommSum(j) for j in range(J)]),
        "step_sum_s": np.asarray([orch.StepSum(j) for j in range(J)]),
        "step_iterations": np.asarray(
            [[orch.IterationsIn(j, k) for j in range(J)] for k in range(steps)], dtype=np.int64
        ).reshape(steps, J),
        "step_comm_sum_s": np.asarray(
            [[orch.CommSumIn(j, k) for j in range(J)] for k in range(steps)]
        ).reshape(steps, J),
        "step_step_sum_s": np.asarray(
            [[orch.StepSumIn(j, k) for j in range(J)] for k in range(steps)]
        ).reshape(steps, J),
        "link_bytes": link_bytes,
        "wall_s": wall,
        "cpu_s": cpu,
        "events": events,
        "payload_bytes": payload,
        "timed_out": bool(orch.timedOut),
        "transfers": int(orch.FlowCount()),
        "resplits": int(orch.resplits),
        "routing": {kind: sum(1 for k, _ in routing.values() if k == kind) for kind in ("spray", "paths")},
        "fq_buckets": fq_buckets,
        "flow_buckets": flow_buckets,
        # per transfer (launch order): job, bytes, launch and completion time (s; -1: open), connection id
        "transfer_log": [
            (
                int(orch.TransferJob(i)),
                float(orch.TransferBytes(i)),
                float(orch.TransferStart(i)),
                float(orch.TransferEnd(i)),
                int(orch.TransferConn(i)),
            )
            for i in range(int(orch.TransferCount()))
        ],
        # per sub-flow (TCP connection, launch order): transfer index into transfer_log (-1: background),
        # connection id, path index, bytes it was to carry and received, launch time and last byte (s)
        "subflow_log": [
            (
                int(orch.FlowTransfer(i)),
                int(orch.FlowConn(i)),
                int(orch.FlowPath(i)),
                float(orch.FlowTotal(i)),
                float(orch.FlowGot(i)),
                float(orch.FlowLaunch(i)),
                float(orch.FlowLastRx(i)),
            )
            for i in range(int(orch.FlowCount()))
        ],
    }
    ns.Simulator.Destroy()
    return out


def _estimated_bytes(run: _FluidRun) -> float:
    """Bytes the ns-3 run will carry: each job's bytes per iteration times the iterations the fluid model
    completed, plus one, and each background source's rate over the intervals it is on."""
    total = 0.0
    for jp, it in zip(run.jobs, run.iterations):
        per_iter = sum(t[1] for ph in jp.phases for fl in ph for t in fl)
        total += per_iter * (int(it) + 1)
    for bg in run.backgrounds:
        total += sum(bg.rate_bytes_per_s) * run.interval_s * int(bg.on.sum())
    return total


# ---------------------------------------------------------------------------------------------- API
def _resolve(scenario: str | os.PathLike | dict | Scenario) -> str | os.PathLike | dict | Scenario:
    """A bare name that is not a shipped scenario may name a cross-check case (scenarios/crosscheck/)."""
    if isinstance(scenario, str) and "/" not in scenario and not Path(scenario).is_file():
        from ainet_gym.scenario.loader import scenarios_dir

        d = scenarios_dir()
        own = d / "crosscheck" / f"{scenario.removesuffix('.yaml')}.yaml"
        if not (d / f"{scenario.removesuffix('.yaml')}.yaml").is_file() and own.is_file():
            return own
    return scenario


def _ms(total_s: float, n: int) -> float | None:
    """Mean in ms of ``n`` values summing to ``total_s`` seconds (None when there are none)."""
    return float(total_s / n * 1e3) if n > 0 else None


def _rel(a: float | None, b: float | None) -> float | None:
    return (a - b) / b if a is not None and b is not None and b > 0 else None


def crosscheck(
    scenario: str | os.PathLike | dict | Scenario,
    policy: str = "ecmp",
    seed: int = 0,
    steps: int | None = None,
    config: CrosscheckConfig | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``scenario`` under ``policy`` in the fluid model and in ns-3; compare job communication times.

    Parameters
    ----------
    scenario : str, path, dict or Scenario
        A shipped scenario name, a cross-check case name (``xc-ring-8``: ``scenarios/crosscheck/``), a YAML
        path or a dict.
    policy : str
        Any policy string of ``ainet-gym evaluate`` (``ecmp``, ``spray``, ``lp``, ``lp+bg``, ``pretrained``,
        ``ppo:PATH``, ...): the agent registry's (:func:`ainet_gym.agents.registry.make_agent`).
    seed : int
        Episode seed (placement, ECMP hash, start and burst jitter), as in ``simulate`` and ``evaluate``.
    steps : int, optional
        Decision intervals simulated in both (at most ``config.max_steps``); None: the scenario's
        ``dynamics.episode_steps``.
    config : CrosscheckConfig, optional
        The ns-3 experiment's constants.
    details : dict, optional
        Filled, if given, with what the contract object leaves out: CPU times of both simulations,
        the fluid's first (recorded, untimed-median) wall time, iterations per job in each, ns-3 transfers
        (TCP connections) and ``resplits`` (transfers in flight whose bytes moved to a new split at an
        interval boundary), how connections were routed (``routing``, and per connection its candidate
        ``paths``, ``conn_ends`` and each interval's ``splits``), ``transfer_log`` (per ns-3 transfer:
        job, bytes, launch and completion time in s, -1 if it did not complete, connection id),
        ``subflow_log`` (per ns-3 sub-flow, a TCP connection: its transfer's index in ``transfer_log``, -1 for
        a background sub-flow, connection id, path index, bytes it was to carry and received, launch time
        and time of its last received byte in s, -1 if none), ``fq_buckets`` (per link, the FqCoDel hash
        buckets its device used over the run, -1 for a link not built; :attr:`CrosscheckConfig.fq_flows`),
        ``flow_buckets`` (per sub-flow of ``subflow_log``, the FqCoDel bucket of its data packets and of its
        ACKs, -1 if it never connected: two sub-flows on one link in the same bucket share one share),
        ``link_bytes`` (per simulator, (steps, links) payload bytes per link and interval),
        ``background`` (per source: its connections and the intervals it is on) and ``transfer_mb``, the
        smallest transfer of the jobs in MB.

    Returns
    -------
    dict
        ``{"scenario", "policy", "seed", "steps", "jobs": [{"name", "fluid_comm_ms", "ns3_comm_ms",
        "rel_error", "fluid_step_ms", "ns3_step_ms", "step_rel_error", "intervals": [...]}], "fluid_wall_s",
        "ns3_wall_s"}``. A job's communication (step) time is its mean per iteration over the iterations
        completed within the whole simulated span; ``rel_error = (fluid - ns3) / ns3``. ``intervals[k]``
        (one per decision interval) holds ``fluid_iterations`` and ``ns3_iterations`` (iterations that ended
        in the interval), the means of their communication times ``fluid_comm_ms`` and ``ns3_comm_ms``
        (None where none ended) and their ``rel_error`` (None unless both are there). Wall times are those
        of the simulation of the span only (no construction, no ns-3 import; the fluid's without the
        policy's own time).

    Notes
    -----
    One call per process is the tested use: ns-3 keeps global state between runs in one process, and in one
    batch a run that followed another gave a different result (docs/fidelity.md);
    :func:`calibration` runs each case in a process of its own.

    Raises
    ------
    CrosscheckError
        The scenario, policy or request is outside the supported subset, a job completed no iteration in
        one of the simulators, or ns-3 ran past ``config.wall_limit_s``.
    Ns3NotInstalledError
        The optional extra ``ns3`` is not installed.
    """
    cfg = config or CrosscheckConfig()
    _check_config(cfg)
    sc = load_scenario(_resolve(scenario))
    if cfg.header_efficiency is not None:
        sc = replace(sc, fabric=replace(sc.fabric, link_efficiency=cfg.header_efficiency))
    if steps is None:
        steps = sc.dynamics.episode_steps
        if steps > cfg.max_steps:
            raise CrosscheckError(
                f"scenario {sc.name!r}: dynamics.episode_steps = {steps}: the cross-check replays at most "
                f"{cfg.max_steps} intervals; allowed: fewer intervals (--steps)"
            )
    from ainet_gym.agents.registry import make_agent
    from ainet_gym.fabric.topology import build_fabric

    _check_supported(sc, build_fabric(sc.fabric, sc.routing.max_paths), steps, cfg)
    try:
        make_agent(policy)  # a bad policy string is refused before ns-3 is imported
    except (ValueError, FileNotFoundError) as e:
        raise CrosscheckError(str(e)) from e
    _import_ns()  # fail early (before the fluid run) when the extra is missing
    run = _run_fluid(sc, policy, seed, steps, cfg)
    names = [jp.name for jp in run.jobs]
    idle = [n for n, it in zip(names, run.iterations) if it == 0]
    if idle:
        raise CrosscheckError(
            f"scenario {sc.name!r}: job(s) {', '.join(idle)} completed no iteration in {steps} interval(s) "
            "of the fluid model; allowed: more steps (--steps)"
        )
    est = _estimated_bytes(run)
    if est > cfg.max_ns3_bytes:
        raise CrosscheckError(
            f"scenario {sc.name!r}: the ns-3 run would carry about {est / 1e9:.1f} GB of transfers; allowed: "
            f"at most {cfg.max_ns3_bytes / 1e9:.1f} GB (CrosscheckConfig.max_ns3_bytes), fewer steps or bytes"
        )
    pk = _run_ns3(run, cfg)
    if pk["timed_out"]:
        raise CrosscheckError(
            f"scenario {sc.name!r}: ns-3 ran past wall_limit_s = {cfg.wall_limit_s} s; allowed: a smaller case"
        )
    idle = [n for n, it in zip(names, pk["iterations"]) if it == 0]
    if idle:
        raise CrosscheckError(
            f"scenario {sc.name!r}: job(s) {', '.join(idle)} completed no iteration in {steps} interval(s) "
            "in ns-3; allowed: more steps (--steps)"
        )
    jobs = []
    for j, name in enumerate(names):
        fl = _ms(run.comm_sum_s[j], int(run.iterations[j]))
        pm = _ms(pk["comm_sum_s"][j], int(pk["iterations"][j]))
        fs = _ms(run.step_sum_s[j], int(run.iterations[j]))
        ps = _ms(pk["step_sum_s"][j], int(pk["iterations"][j]))
        intervals = []
        for k in range(steps):
            fi, pi = int(run.step_iterations[k, j]), int(pk["step_iterations"][k, j])
            a, b = _ms(run.step_comm_sum_s[k, j], fi), _ms(pk["step_comm_sum_s"][k, j], pi)
            intervals.append(
                {
                    "step": k,
                    "fluid_iterations": fi,
                    "ns3_iterations": pi,
                    "fluid_comm_ms": a,
                    "ns3_comm_ms": b,
                    "rel_error": _rel(a, b),
                }
            )
        jobs.append(
            {
                "name": name,
                "fluid_comm_ms": fl,
                "ns3_comm_ms": pm,
                "rel_error": _rel(fl, pm),
                "fluid_step_ms": fs,
                "ns3_step_ms": ps,
                "step_rel_error": _rel(fs, ps),
                "intervals": intervals,
            }
        )
    if details is not None:
        details.update(
            fluid_cpu_s=run.cpu_s,
            fluid_first_wall_s=run.first_wall_s,
            # the smallest transfer of the jobs (MB, before a split into sub-flows): what makes a case bulk
            transfer_mb=min(t[1] for jp in run.jobs for ph in jp.phases for fl in ph for t in fl) / 1e6,
            ns3_cpu_s=pk["cpu_s"],
            fluid_iterations=run.iterations.tolist(),
            ns3_iterations=pk["iterations"].tolist(),
            ns3_transfers=pk["transfers"],
            resplits=pk["resplits"],
            routing=pk["routing"],
            paths={c: [[int(x) for x in p] for p in conn.paths] for c, conn in run.conns.items()},
            conn_ends={c: (conn.src, conn.dst) for c, conn in run.conns.items()},
            splits=[s.tolist() for s in run.splits],
            transfer_log=pk["transfer_log"],
            subflow_log=pk["subflow_log"],
            fq_buckets=pk["fq_buckets"],
            flow_buckets=pk["flow_buckets"],
            link_bytes={"fluid": run.link_bytes.tolist(), "ns3": pk["link_bytes"].tolist()},
            background=[
                {
                    "name": bg.name,
                    "conns": bg.conns,
                    "on": bg.on.tolist(),
                    "rate_bytes_per_s": bg.rate_bytes_per_s,
                }
                for bg in run.backgrounds
            ],
            ns3_events=pk["events"],
            # payload bytes the sub-flows received (each byte once, not per hop) and carried over links
            ns3_bytes=pk["payload_bytes"],
            ns3_link_bytes=float(pk["link_bytes"].sum()),
            header_efficiency=sc.fabric.link_efficiency,
        )
    return {
        "scenario": sc.name,
        "policy": policy,
        "seed": seed,
        "steps": steps,
        "jobs": jobs,
        "fluid_wall_s": run.wall_s,
        "ns3_wall_s": pk["wall_s"],
    }


def _check_config(cfg: CrosscheckConfig) -> None:
    """Refuse a bad constant of ``cfg``, naming the field, its value and what is allowed."""
    if cfg.spray_mode not in ("packet", "subflows"):
        raise CrosscheckError(f"spray_mode = {cfg.spray_mode!r}: allowed: packet, subflows")
    rc = cfg.ring_chunk_bytes
    if rc is not None and (isinstance(rc, bool) or not isinstance(rc, (int, float)) or not rc >= 0):
        raise CrosscheckError(f"ring_chunk_bytes = {rc!r}: allowed: None, 0 (no coupling) or a size > 0")
    for name, low in (
        ("fluid_repeats", 0),
        ("device_queue_packets", 1),
        ("backlog_bytes", 1),
        ("max_steps", 1),
        ("mss", 1),
        ("del_ack_count", 1),
        ("send_size", 1),
        ("tcp_buffer_bytes", 1),
        ("max_gpus", 1),
        ("fq_flows", 1),
        ("fq_perturbation", 0),
    ):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise CrosscheckError(f"{name} = {v!r}: allowed: an integer >= {low}")
    if cfg.mss + 52 > 65535:
        raise CrosscheckError(f"mss = {cfg.mss}: allowed: at most 65483 (an MTU of mss + 52 <= 65535 bytes)")
    rb = cfg.ring_buffer_steps
    if rb is not None and (isinstance(rb, bool) or not isinstance(rb, int) or rb < 1):
        raise CrosscheckError(
            f"ring_buffer_steps = {rb!r}: allowed: None (no back-pressure) or an integer >= 1"
        )
    q = cfg.split_qps
    if q is not None and (isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= 64):
        raise CrosscheckError(
            f"split_qps = {q!r}: allowed: None (one TCP connection per path of a split) or an integer in "
            "[1, 64] (QPs per connection)"
        )
    h = cfg.header_efficiency
    if h is not None and (isinstance(h, bool) or not isinstance(h, (int, float)) or not 0 < h <= 1):
        raise CrosscheckError(f"header_efficiency = {h!r}: must be in (0, 1]")
    for name in ("min_rto_ms", "del_ack_timeout_ms", "wall_limit_s", "max_ns3_bytes"):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise CrosscheckError(f"{name} = {v!r}: allowed: a finite number > 0")
    if not cfg.del_ack_timeout_ms < cfg.min_rto_ms:
        raise CrosscheckError(
            f"del_ack_timeout_ms = {cfg.del_ack_timeout_ms!r}: allowed: below min_rto_ms = {cfg.min_rto_ms!r} "
            "(a delayed ACK held past the RTO makes every lone segment a spurious timeout)"
        )


# ---------------------------------------------------------------------------------------------- calibration
#: The calibration table's cases: (cross-check scenario, intervals). See scenarios/crosscheck/.
CALIBRATION_CASES: tuple[tuple[str, int], ...] = (
    ("xc-switch-4", 1),
    ("xc-ring-8", 1),
    ("xc-hd-8", 1),
    ("xc-perm-8", 1),
    ("xc-perm-64", 1),
    ("xc-two-jobs", 2),
)
CALIBRATION_POLICIES: tuple[str, ...] = ("ecmp", "spray", "lp", "ppo")


#: Where :func:`calibration` looks for the ``ppo`` rows' checkpoints, ``<dir>/<case>.zip`` (``make
#: crosscheck`` trains the missing ones there, see the Makefile).
PPO_DIR: str = "crosscheck-ppo"


def case_policy(case: str, policy: str, ppo_dir: str | os.PathLike = PPO_DIR) -> str:
    """The policy string of a calibration row: ``"ppo"`` names the case's own trained PPO model,
    ``<ppo_dir>/<case>.zip`` (``ainet-gym train scenarios/crosscheck/<case>.yaml --algo ppo --timesteps 8192
    --n-envs 8 --seed 0``, what ``make crosscheck`` runs); any other string is passed through."""
    if policy != "ppo":
        return policy
    path = Path(ppo_dir) / f"{case}.zip"
    if not path.is_file():
        raise CrosscheckError(
            f"policy 'ppo' of case {case!r}: no model {str(path)!r}; allowed: train it (make crosscheck) or "
            "give ppo:PATH"
        )
    return f"ppo:{path.resolve()}"


def _ranking(times: dict[str, float], tol: float) -> list[list[str]]:
    """Policies ordered by time, grouped into ties (within ``tol`` relative of the group's first)."""
    order = sorted(times, key=lambda p: times[p])
    groups: list[list[str]] = []
    for p in order:
        if groups and times[p] <= times[groups[-1][0]] * (1 + tol):
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups


def _inversions(fluid: dict[str, float], ns3: dict[str, float], tol: float) -> list[str]:
    """Pairs that the fluid model orders strictly (beyond ``tol``) and ns-3 orders the other way."""
    out = []
    pols = list(fluid)
    for i, a in enumerate(pols):
        for b in pols[i + 1 :]:
            if fluid[a] < fluid[b] * (1 - tol) and ns3[a] > ns3[b]:
                out.append(f"{a}<{b}")
            elif fluid[b] < fluid[a] * (1 - tol) and ns3[b] > ns3[a]:
                out.append(f"{b}<{a}")
    return out


def _relation(a: float, b: float, tol: float) -> str:
    """``"<"``, ``">"`` or ``"="`` (within ``tol`` relative of the smaller time: a tie)."""
    if a * (1 + tol) < b:
        return "<"
    if b * (1 + tol) < a:
        return ">"
    return "="


def _pair_differences(fluid: dict[str, float], ns3: dict[str, float], tol: float) -> list[dict[str, Any]]:
    """Pairs of policies that the two simulators rank differently, two times within ``tol`` of each other
    counting as a tie in both: ``reversed`` (each orders them strictly, the other way), ``gain lost`` (the
    fluid model orders them strictly, ns-3 ties them) or ``gain found`` (the other way round), with the
    relative gain of the first over the second in each simulator."""
    out = []
    pols = [p for p in fluid if p in ns3]
    for i, a in enumerate(pols):
        for b in pols[i + 1 :]:
            rf, rn = _relation(fluid[a], fluid[b], tol), _relation(ns3[a], ns3[b], tol)
            if rf == rn:
                continue
            kind = "reversed" if "=" not in (rf, rn) else ("gain lost" if rn == "=" else "gain found")
            out.append(
                {
                    "pair": f"{a} vs {b}",
                    "kind": kind,
                    "fluid_gain": (fluid[b] - fluid[a]) / fluid[b],
                    "ns3_gain": (ns3[b] - ns3[a]) / ns3[b],
                }
            )
    return out


def _crosscheck_in_subprocess(
    name: str | dict, policy: str, seed: int, steps: int, config: CrosscheckConfig | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`crosscheck` in a fresh interpreter. ns-3 keeps global state across runs in one process
    (simulator singletons, random-stream counters): in one batch, ``xc-hd-8`` under ``lp`` completed no
    iteration in a run that followed another, and 30.4 ms in a process of its own."""
    import dataclasses
    import json
    import subprocess
    import sys

    cfg = dataclasses.asdict(config or CrosscheckConfig())
    code = (
        "import json, sys\n"
        "from ainet_gym.checks.crosscheck import CrosscheckConfig, CrosscheckError, crosscheck\n"
        "a = json.loads(sys.argv[1])\n"
        "det = {}\n"
        "try:\n"
        "    r = crosscheck(a['name'], a['policy'], a['seed'], a['steps'], CrosscheckConfig(**a['cfg']), det)\n"
        "except CrosscheckError as e:\n"
        "    print('XC-RESULT ' + json.dumps({'error': str(e)}))\n"
        "else:\n"
        "    print('XC-RESULT ' + json.dumps({'result': r, 'details': det}))\n"
    )
    arg = json.dumps({"name": name, "policy": policy, "seed": seed, "steps": steps, "cfg": cfg})
    proc = subprocess.run(
        [sys.executable, "-c", code, arg], capture_output=True, text=True, check=False, cwd=os.getcwd()
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("XC-RESULT ")), None)
    if line is None:
        raise CrosscheckError(
            f"{name} under {policy}: the ns-3 process failed (exit {proc.returncode}): {proc.stderr[-400:]}"
        )
    out = json.loads(line.removeprefix("XC-RESULT "))
    if "error" in out:
        raise CrosscheckError(out["error"])
    return out["result"], out["details"]


def calibration(
    cases: tuple[tuple[str, int], ...] = CALIBRATION_CASES,
    policies: tuple[str, ...] = CALIBRATION_POLICIES,
    seed: int = 0,
    config: CrosscheckConfig | None = None,
    tie_tolerance: float = 0.02,
    progress: bool = True,
    ppo_dir: str | os.PathLike = PPO_DIR,
) -> dict[str, Any]:
    """Run every case under every policy, each in a process of its own; return the rows and the per-case
    ranking comparison.

    A case's policies are ranked by their mean job communication time. Two policies whose fluid times are
    within ``tie_tolerance`` of each other are a tie in the fluid model, and either order in ns-3 agrees.
    """
    rows: list[dict[str, Any]] = []
    max_steps = (config or CrosscheckConfig()).max_steps
    for name, steps0 in cases:
        for pol in policies:
            steps = steps0
            try:
                while True:  # a slow policy may need more intervals for one iteration: double them
                    try:
                        r, det = _crosscheck_in_subprocess(
                            name, case_policy(name, pol, ppo_dir), seed, steps, config
                        )
                        break
                    except CrosscheckError as e:
                        if "completed no iteration" not in str(e) or 2 * steps > max_steps:
                            raise
                        steps *= 2
            except CrosscheckError as e:  # e.g. no iteration completed in ns-3 within the span
                rows.append({"case": name, "policy": pol, "error": str(e)})
                if progress:
                    print(f"{name:<12} {pol:<8} error: {e}", flush=True)
                continue
            for j in r["jobs"]:
                rows.append(
                    {
                        "case": name,
                        "policy": pol,
                        **j,
                        "fluid_wall_s": r["fluid_wall_s"],
                        "ns3_wall_s": r["ns3_wall_s"],
                        "fluid_cpu_s": det["fluid_cpu_s"],
                        "ns3_cpu_s": det["ns3_cpu_s"],
                        "iterations": det["ns3_iterations"],
                        "steps": steps,
                        "transfer_mb": det["transfer_mb"],
                    }
                )
                if progress:
                    print(
                        f"{name:<12} {pol:<8} {j['name']:<8} fluid {j['fluid_comm_ms']:8.3f} ms  ns-3 "
                        f"{j['ns3_comm_ms']:8.3f} ms  {100 * j['rel_error']:+6.2f}%  ns-3 {r['ns3_wall_s']:.1f} s",
                        flush=True,
                    )
    return {"seed": seed, "rows": rows, "rankings": rankings(rows, tie_tolerance)}


def rankings(rows: list[dict[str, Any]], tie_tolerance: float = 0.02) -> list[dict[str, Any]]:
    """Per case: the policies ranked by mean job communication time in each simulator (ties within
    ``tie_tolerance`` of the fluid time grouped) and the pairs that ns-3 orders against the fluid model."""
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        fl: dict[str, list[float]] = {}
        pk: dict[str, list[float]] = {}
        for r in rows:
            if r["case"] == case and "error" not in r:
                fl.setdefault(r["policy"], []).append(r["fluid_comm_ms"])
                pk.setdefault(r["policy"], []).append(r["ns3_comm_ms"])
        f = {p: float(np.mean(v)) for p, v in fl.items()}
        n = {p: float(np.mean(v)) for p, v in pk.items()}
        out.append(
            {
                "case": case,
                "fluid": _ranking(f, tie_tolerance),
                "ns3": _ranking(n, tie_tolerance),
                "inversions": _inversions(f, n, tie_tolerance),
            }
        )
    return out


def _rank(groups: list[list[str]]) -> str:
    """A ranking as text: tied policies joined by ``=``, groups by ``<`` (fastest first)."""
    return " < ".join("=".join(g) for g in groups)


def markdown(result: dict[str, Any]) -> str:
    """The calibration table (docs/fidelity.md) of :func:`calibration`'s result."""

    lines = [
        "| case | MB per transfer | policy | job | fluid ms | ns-3 ms | error | ns-3 wall s | fluid wall ms |"
        " speed ratio (wall) | speed ratio (CPU) |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['case']} | | {r['policy']} | - | | | {r['error']} | | | | |")
            continue
        pol = (
            r["policy"]
            if r.get("steps", 1) == dict(CALIBRATION_CASES).get(r["case"], 1)
            else (f"{r['policy']} ({r['steps']} intervals)")
        )
        lines.append(
            f"| {r['case']} | {r['transfer_mb']:.3g} | {pol} | {r['name']} | {r['fluid_comm_ms']:.3f} | "
            f"{r['ns3_comm_ms']:.3f} | "
            f"{100 * r['rel_error']:+.2f}% | {r['ns3_wall_s']:.2f} | {1e3 * r['fluid_wall_s']:.2f} | "
            f"{r['ns3_wall_s'] / max(r['fluid_wall_s'], 1e-9):.2g} | "
            f"{r['ns3_cpu_s'] / max(r['fluid_cpu_s'], 1e-9):.2g} |"
        )
    lines += ["", "| case | fluid ranking | ns-3 ranking | inversions |", "|---|---|---|---|"]
    for k in result["rankings"]:
        inv = ", ".join(k["inversions"]) or "none"
        lines.append(f"| {k['case']} | {_rank(k['fluid'])} | {_rank(k['ns3'])} | {inv} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- learning
#: The learning cross-check's cases (docs/fidelity-learning.md): scaled copies of the scenarios where the
#: project's learning results live, each replayed over all its intervals (``dynamics.episode_steps``).
LEARNING_CASES: tuple[str, ...] = (
    "xc-periodic-interference",
    "xc-periodic-interference-jitter",
    "xc-ingest-bursts",
)
#: Its policies: the static baselines, the LP over the jobs and over jobs and background, and a PPO policy
#: trained on the case (``ppo``: ``<ppo_dir>/<case>.zip``).
LEARNING_POLICIES: tuple[str, ...] = ("ecmp", "spray", "lp", "lp+bg", "ppo")


def learning(
    cases: tuple[str, ...] = LEARNING_CASES,
    policies: tuple[str, ...] = LEARNING_POLICIES,
    seed: int = 0,
    config: CrosscheckConfig | None = None,
    tie_tolerance: float = 0.02,
    progress: bool = True,
    ppo_dir: str | os.PathLike = PPO_DIR,
    steps: int | None = None,
) -> dict[str, Any]:
    """Every case under every policy over all its intervals (or ``steps``), each run in a process of its
    own: per job its mean communication and step time in both simulators, the per-interval figures, and
    per case the ranking of the policies by mean step time (the mean over the jobs of each job's mean step
    time) in both, two policies within ``tie_tolerance`` of each other counting as tied in both."""
    rows: list[dict[str, Any]] = []
    for name in cases:
        for pol in policies:
            try:
                r, det = _crosscheck_in_subprocess(name, case_policy(name, pol, ppo_dir), seed, steps, config)
            except CrosscheckError as e:
                rows.append({"case": name, "policy": pol, "error": str(e)})
                if progress:
                    print(f"{name:<32} {pol:<8} error: {e}", flush=True)
                continue
            for j in r["jobs"]:
                errs = [abs(iv["rel_error"]) for iv in j["intervals"] if iv["rel_error"] is not None]
                rows.append(
                    {
                        "case": name,
                        "policy": pol,
                        **j,
                        "worst_interval_error": max(errs) if errs else None,
                        "steps": r["steps"],
                        "fluid_wall_s": r["fluid_wall_s"],
                        "ns3_wall_s": r["ns3_wall_s"],
                        "fluid_cpu_s": det["fluid_cpu_s"],
                        "ns3_cpu_s": det["ns3_cpu_s"],
                        "transfer_mb": det["transfer_mb"],
                        "ns3_bytes": det["ns3_bytes"],
                        "ns3_connections": det["ns3_transfers"],
                        "resplits": det["resplits"],
                    }
                )
                if progress:
                    w = rows[-1]["worst_interval_error"]
                    print(
                        f"{name:<32} {pol:<8} {j['name']:<6} comm fluid {j['fluid_comm_ms']:7.2f} ns-3 "
                        f"{j['ns3_comm_ms']:7.2f} ms {100 * j['rel_error']:+6.2f}%  step {j['fluid_step_ms']:7.2f} "
                        f"{j['ns3_step_ms']:7.2f} ms  worst interval "
                        + (f"{100 * w:.2f}%" if w is not None else "-")
                        + f"  ns-3 {r['ns3_wall_s']:.0f} s",
                        flush=True,
                    )
    return {"seed": seed, "rows": rows, "rankings": step_rankings(rows, tie_tolerance)}


def step_rankings(rows: list[dict[str, Any]], tie_tolerance: float = 0.02) -> list[dict[str, Any]]:
    """Per case: the policies ranked by mean step time (mean over the jobs) in each simulator, ties
    within ``tie_tolerance`` grouped in both, and the pairs ranked differently (:func:`_pair_differences`)."""
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        fl: dict[str, list[float]] = {}
        pk: dict[str, list[float]] = {}
        for r in rows:
            if r["case"] == case and "error" not in r:
                fl.setdefault(r["policy"], []).append(r["fluid_step_ms"])
                pk.setdefault(r["policy"], []).append(r["ns3_step_ms"])
        f = {p: float(np.mean(v)) for p, v in fl.items()}
        n = {p: float(np.mean(v)) for p, v in pk.items()}
        out.append(
            {
                "case": case,
                "fluid_step_ms": f,
                "ns3_step_ms": n,
                "fluid": _ranking(f, tie_tolerance),
                "ns3": _ranking(n, tie_tolerance),
                "differences": _pair_differences(f, n, tie_tolerance),
            }
        )
    return out


def markdown_learning(result: dict[str, Any]) -> str:
    """The tables of docs/fidelity-learning.md from :func:`learning`'s result."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:+.2f}%"

    lines = [
        "| case | policy | job | fluid comm ms | ns-3 comm ms | error | worst interval | fluid step ms |"
        " ns-3 step ms | ns-3 wall s | fluid wall ms | speed ratio |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['policy']} | - | | | {r['error']} | | | | | | |")
            continue
        w = r["worst_interval_error"]
        lines.append(
            f"| {r['case']} | {r['policy']} | {r['name']} | {r['fluid_comm_ms']:.2f} | {r['ns3_comm_ms']:.2f} | "
            f"{pct(r['rel_error'])} | {'-' if w is None else f'{100 * w:.2f}%'} | {r['fluid_step_ms']:.2f} | "
            f"{r['ns3_step_ms']:.2f} | {r['ns3_wall_s']:.0f} | {1e3 * r['fluid_wall_s']:.1f} | "
            f"{r['ns3_wall_s'] / max(r['fluid_wall_s'], 1e-9):.2g} |"
        )
    lines += [
        "",
        "| case | mean step ms, fluid | mean step ms, ns-3 | fluid ranking | ns-3 ranking | ranked differently |",
        "|---|---|---|---|---|---|",
    ]
    for k in result["rankings"]:
        f = ", ".join(f"{p} {v:.2f}" for p, v in k["fluid_step_ms"].items())
        n = ", ".join(f"{p} {v:.2f}" for p, v in k["ns3_step_ms"].items())
        diff = "; ".join(
            f"{d['pair']}: {d['kind']} (fluid {100 * d['fluid_gain']:+.1f}%, ns-3 {100 * d['ns3_gain']:+.1f}%)"
            for d in k["differences"]
        )
        lines.append(
            f"| {k['case']} | {f} | {n} | {_rank(k['fluid'])} | {_rank(k['ns3'])} | {diff or 'none'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.checks.crosscheck``: the calibration table (what ``make crosscheck`` runs), or
    with ``--learning`` the learning cross-check (docs/fidelity-learning.md)."""
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m ainet_gym.checks.crosscheck", description=main.__doc__)
    ap.add_argument(
        "--learning",
        action="store_true",
        help="the learning cross-check: cases and policies default to LEARNING_CASES and LEARNING_POLICIES, "
        "all intervals of each case, ranking by mean step time",
    )
    ap.add_argument("--policies", default=None, help="comma list (ppo:PATH too)")
    ap.add_argument("--cases", default=None, help="comma list")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=None, help="--learning: intervals (default: the case's)")
    ap.add_argument("--spray-mode", default="subflows", help="subflows | packet")
    ap.add_argument("--reorder-threshold", type=int, default=CrosscheckConfig.reorder_threshold)
    ap.add_argument("--no-spray-sack", action="store_true", help="SACK off on sprayed connections")
    ap.add_argument("--mss", type=int, default=CrosscheckConfig.mss, help="TCP segment size (bytes)")
    ap.add_argument(
        "--del-ack-count", type=int, default=CrosscheckConfig.del_ack_count, help="segments per ACK"
    )
    ap.add_argument("--max-gpus", type=int, default=CrosscheckConfig.max_gpus, help="largest fabric accepted")
    ap.add_argument(
        "--split-qps", type=int, default=None, help="QPs per connection (CrosscheckConfig.split_qps)"
    )
    ap.add_argument(
        "--fq-flows",
        type=int,
        default=CrosscheckConfig.fq_flows,
        help="FqCoDel hash buckets per link (CrosscheckConfig.fq_flows)",
    )
    ap.add_argument(
        "--wall-limit-s",
        type=float,
        default=CrosscheckConfig.wall_limit_s,
        help="ns-3 wall-clock limit per run (s; raise it on a loaded machine)",
    )
    ap.add_argument("--out", default=None, help="write the JSON result here")
    ap.add_argument("--ppo-dir", default=PPO_DIR, help="the ppo rows' models, <dir>/<case>.zip")
    ap.add_argument(
        "--from-json",
        default=None,
        help="comma list of --out files: print their rows together (rankings over all of them), run nothing",
    )
    a = ap.parse_args(argv)
    case_list = CALIBRATION_CASES if not a.learning else tuple((c, None) for c in LEARNING_CASES)
    pol_list = LEARNING_POLICIES if a.learning else CALIBRATION_POLICIES
    if a.from_json:
        rows = [
            r for f in a.from_json.split(",") for r in json.loads(Path(f).read_text(encoding="utf-8"))["rows"]
        ]
        order = {n: i for i, (n, _) in enumerate(case_list)}
        pols = {p: i for i, p in enumerate(pol_list)}
        rows.sort(key=lambda r: (order.get(r["case"], len(order)), pols.get(r["policy"], len(pols))))
        if a.learning:
            print(markdown_learning({"rows": rows, "rankings": step_rankings(rows)}))
        else:
            print(markdown({"rows": rows, "rankings": rankings(rows)}))
        return 0
    cfg = CrosscheckConfig(
        spray_mode=a.spray_mode,
        reorder_threshold=a.reorder_threshold,
        spray_sack=not a.no_spray_sack,
        mss=a.mss,
        del_ack_count=a.del_ack_count,
        header_efficiency=tcp_header_efficiency(a.mss, a.del_ack_count),
        max_gpus=a.max_gpus,
        wall_limit_s=a.wall_limit_s,
        split_qps=a.split_qps,
        fq_flows=a.fq_flows,
    )
    pols = tuple(p for p in (a.policies or ",".join(pol_list)).split(",") if p)
    names = tuple(c for c in (a.cases or ",".join(n for n, _ in case_list)).split(",") if c)
    if a.learning:
        res = learning(names, pols, a.seed, cfg, ppo_dir=a.ppo_dir, steps=a.steps)
    else:
        steps = dict(CALIBRATION_CASES)
        res = calibration(tuple((c, steps.get(c, 1)) for c in names), pols, a.seed, cfg, ppo_dir=a.ppo_dir)
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(markdown_learning(res) if a.learning else markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
