"""The cross-check's configuration: the ns-3 experiment's constants (:class:`CrosscheckConfig`), the TCP
header fraction the fluid side is scaled by, the errors, and the checks that refuse a bad constant or a
scenario outside the supported subset (naming the field, its value and what is allowed)."""

from __future__ import annotations

from dataclasses import dataclass

from ainet_gym.errors import check_choice
from ainet_gym.fabric.topology import Fabric
from ainet_gym.scenario.spec import Scenario

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


#: The topologies the replay builds (``fabric.topology``).
SUPPORTED_TOPOLOGIES: tuple[str, ...] = ("single_switch", "spine_leaf", "fat_tree")


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
        TCP send and receive buffer per socket (``ns3::TcpSocket::SndBufSize`` and ``RcvBufSize``): the
        receive buffer bounds a connection's window, so it bounds the bytes a connection can hold queued in
        the switches, which the fluid model does not store. With the default (1 MiB) the windows are not
        what limits that backlog (issue-27zn's case D: about 32 KB per connection; 128 KiB gave the 1 MiB
        figures to the digit), and ns-3 drains it over a bundle the fluid leaves idle while a ring is bound
        by its NIC; 16 KiB cut that gain from 3.45% to 0.8% per iteration in case D
        (docs/fidelity-learning.md, issue-27zn; copy C's twin in issue-27zo). Allowed: an
        integer >= ``mss`` (a window of at least one full segment).
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
        flows and ran them with SACK off; :func:`~.report.calibration` runs every case in a process of its own, so
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
        of the policy to multiples of 1/K (largest remainders, :func:`~.fluid.quantize_split`) before it runs it,
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
    device_counter_bin_s
        ``None`` (default): no device counters. A width in seconds: every link's sending device in ns-3
        counts the wire bytes (PPP framing included) of the packets it finishes sending, per bin of this
        width from the start of the run: data segments (packets above 200 bytes) by their (source,
        destination) endpoint pair, the rest (ACKs, handshakes) in one total. The details' ``device_bytes``
        then hold them per link id, with each pair's job or background source: measured per-link bytes,
        where the details' ``link_bytes["ns3"]`` are the sub-flows' received bytes laid on their paths
        (a sprayed sub-flow's spread evenly). The decision interval as the bin gives per-interval
        counters; a finer bin resolves backlogs and phases. Costs one callback per packet and hop.
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
    device_counter_bin_s: float | None = None
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


def check_config(cfg: CrosscheckConfig) -> None:
    """Refuse a bad constant of ``cfg``, naming the field, its value and what is allowed."""
    check_choice("spray_mode", cfg.spray_mode, ("packet", "subflows"), error=CrosscheckError)
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
        ("max_gpus", 1),
        ("fq_flows", 1),
        ("fq_perturbation", 0),
    ):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise CrosscheckError(f"{name} = {v!r}: allowed: an integer >= {low}")
    if cfg.mss + 52 > 65535:
        raise CrosscheckError(f"mss = {cfg.mss}: allowed: at most 65483 (an MTU of mss + 52 <= 65535 bytes)")
    tb = cfg.tcp_buffer_bytes
    if isinstance(tb, bool) or not isinstance(tb, int) or tb < cfg.mss:
        raise CrosscheckError(
            f"tcp_buffer_bytes = {tb!r}: allowed: an integer >= mss = {cfg.mss} (a window of one full segment)"
        )
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
    dc = cfg.device_counter_bin_s
    if dc is not None and (
        isinstance(dc, bool) or not isinstance(dc, (int, float)) or not 0 < dc < float("inf")
    ):
        raise CrosscheckError(
            f"device_counter_bin_s = {dc!r}: allowed: None (no counters) or a finite width > 0 (s)"
        )
    for name in ("min_rto_ms", "del_ack_timeout_ms", "wall_limit_s", "max_ns3_bytes"):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise CrosscheckError(f"{name} = {v!r}: allowed: a finite number > 0")
    if not cfg.del_ack_timeout_ms < cfg.min_rto_ms:
        raise CrosscheckError(
            f"del_ack_timeout_ms = {cfg.del_ack_timeout_ms!r}: allowed: below min_rto_ms = {cfg.min_rto_ms!r} "
            "(a delayed ACK held past the RTO makes every lone segment a spurious timeout)"
        )


def check_supported(sc: Scenario, fabric: Fabric, steps: int, cfg: CrosscheckConfig) -> None:
    """Refuse a scenario outside the replay's supported subset (topology, size, NICs, failures, churn,
    collectives) or a ``steps`` outside ``[1, cfg.max_steps]``, naming the field and what is allowed."""
    where = f"scenario {sc.name!r}"
    f = sc.fabric
    check_choice(
        f"{where}: fabric.topology",
        f.topology,
        SUPPORTED_TOPOLOGIES,
        problem="not supported by the cross-check",
        error=CrosscheckError,
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
