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

The package, one concern per module: :mod:`.config` (:class:`CrosscheckConfig`, the errors and the checks
that refuse what the replay does not support), :mod:`.fluid` (the fluid run and what it records for the
replay), :mod:`.ns3` (the ns-3 replay and its C++ orchestrator, ``ainet_gym/checks/ns3_driver.cc``),
:mod:`.compare` (:func:`crosscheck`: one scenario, policy and seed in both; :class:`CrosscheckDetails`) and :mod:`.report` (the
calibration and learning tables, ``python -m ainet_gym.checks.crosscheck``).
"""

from __future__ import annotations

from ainet_gym.checks.crosscheck.compare import CrosscheckDetails, crosscheck, crosscheck_in_subprocess
from ainet_gym.checks.crosscheck.config import (
    TCP_HEADER_EFFICIENCY,
    CrosscheckConfig,
    CrosscheckError,
    Ns3NotInstalledError,
    tcp_header_efficiency,
)
from ainet_gym.checks.crosscheck.fluid import Conn, ecmp_set_size, quantize_split, run_fluid
from ainet_gym.checks.crosscheck.ns3 import routing_of
from ainet_gym.checks.crosscheck.report import (  # noqa: F401 (the single module's public names, kept here)
    CALIBRATION_CASES,
    CALIBRATION_POLICIES,
    LEARNING_CASES,
    LEARNING_POLICIES,
    PPO_DIR,
    calibration,
    case_policy,
    inversions,
    learning,
    main,
    markdown,
    markdown_learning,
    rankings,
    step_rankings,
)

# the names the single module had before the split (tests and docs import them from here)
_Conn = Conn
_crosscheck_in_subprocess = crosscheck_in_subprocess
_ecmp_set_size = ecmp_set_size
_inversions = inversions
_quantize_split = quantize_split
_routing_of = routing_of
_run_fluid = run_fluid

__all__ = [
    "TCP_HEADER_EFFICIENCY",
    "CrosscheckConfig",
    "CrosscheckDetails",
    "CrosscheckError",
    "Ns3NotInstalledError",
    "crosscheck",
    "tcp_header_efficiency",
]
