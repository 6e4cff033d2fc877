"""Typed, frozen scenario specification.

`ainet_gym.load_scenario` validates a YAML file or dict against the schema of docs/scenarios.md and returns a
:class:`Scenario`. Every field here is a documented, overridable parameter; derived values (such as the
default decision interval) are computed by the engine, never typed in here.

Units: Gbit/s for link speeds, bytes for sizes, milliseconds for time, microseconds for latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: PCIe link of a GPU to a NIC it shares with other GPUs (``fabric.pcie_gbps``): PCIe 4.0 x16, 16 GT/s
#: x 16 lanes = 256 Gbit/s per direction (nominal, before 128b/130b encoding). It exists only when
#: ``gpus_per_nic > 1``; a GPU with a NIC of its own reaches its leaf over the NIC link alone.
PCIE_GBPS_DEFAULT = 256.0

TOPOLOGIES = ("single_switch", "spine_leaf", "fat_tree", "rail_optimized", "graph")
PROFILES = ("infiniband", "roce")
PLACEMENTS = ("contiguous", "spread", "random")
#: Rank order of a job's GPUs: the placement's own order, ascending GPU ids, a seeded random permutation,
#: or host by host (hosts in the order the placement first uses them, local ranks consecutive).
RANK_ORDERS = ("placement", "sorted", "shuffled", "by_host")
OPS = ("allreduce", "reducescatter", "allgather", "alltoall", "sendrecv")
ALGORITHMS = ("ring", "halving_doubling", "tree", "hierarchical")
#: (op, algorithm) pairs made of stages that ``chunks`` pipelines (a ring is pipelined already)
CHUNKED_ALGORITHMS = (("allreduce", "hierarchical"), ("allreduce", "tree"))
BACKGROUND_KINDS = ("storage", "checkpoint")
BACKGROUND_PATTERNS = ("constant", "periodic")
#: workload.background[].upstream: what a flow held below its demand is charged on the links before its bottleneck
#: (docs/model.md, "Background upstream of its bottleneck")
BACKGROUND_UPSTREAM = ("share", "demand")
REWARD_KINDS = ("gpu_utilization", "step_time")
RATE_UPDATES = ("event", "phase")
#: What a new split does to the transfers in flight (``routing.reroute``): ``in_flight`` moves them at once
#: (their remaining bytes follow the new split); ``new_transfers`` leaves them on the split they started
#: with, and only transfers that start after the decision take the new one (docs/fidelity-learning.md).
REROUTE_MODES = ("in_flight", "new_transfers")
#: How a connection split over several paths shares the links (``routing.split_flows``): ``coupled`` (the
#: default) carries the connection as one flow with a fixed ratio over its paths, all parts finishing
#: together; ``independent`` makes each (transfer, connection, path) part a flow of its own in the max-min
#: allocation, with its share of the bytes, and a transfer ends with its last part: the parts of a split, and
#: the hops of a ring, then run at their own rates (docs/fidelity-learning.md, "Independent split parts").
SPLIT_FLOWS_MODES = ("coupled", "independent")
#: What a held part of ``routing.reroute_held_bytes`` weighs on its path's links (``routing.reroute_held_weight``):
#: ``one`` (the default) a coefficient of 1, a whole connection's share; ``part`` the fraction its path part had
#: just before the split change that handed it bytes, so it shares a link as that sub-flow did
#: (docs/model.md, "Held bytes at a route change").
REROUTE_HELD_WEIGHTS = ("one", "part")
#: How a path part of ``routing.split_flows: independent`` shares a link (``routing.part_share``): ``fraction``
#: (the default) a part of fraction f is a flow of coefficient f carrying all its connection's bytes, so it gets
#: f of a connection's share; ``per_part`` a part of fraction f > 0 is a flow of coefficient 1 carrying f of the
#: bytes, a whole connection's share, as one TCP connection per path (docs/model.md, "How split parts share a link").
PART_SHARES = ("fraction", "per_part")
#: Which path parts hold bytes at a split change in flight (``routing.reroute_held_parts``, with
#: ``routing.reroute_held_bytes`` > 0): ``all`` (the default) every part that loses share; ``queued`` only a part
#: that, in the max-min allocation at the boundary, is bottlenecked on a saturated switch link of its old path
#: (one not every candidate path of its connection crosses), where a TCP sub-flow would have a queue; the
#: others' bytes are re-split at once (docs/model.md, "Held bytes at a route change").
REROUTE_HELD_PARTS = ("all", "queued")
#: Which bounds ``routing.ring_window_bytes`` W puts on a ring's sub-flows (with ``routing.split_flows:
#: independent``): ``nccl_part`` (the only one), the replay's NCCL credit per sub-flow: each path part of a ring hop
#: may lead the summed progress of the hop feeding it by at most one ring step (the phase's bytes per step) and
#: that of the hop it feeds by at most W; the hop's sum itself is not bounded (docs/model.md, "A sliding window
#: for ring hops"). The hop-level sides measured in issue-27zzk (``upstream``, ``downstream``, ``nccl``) were
#: not merged.
RING_WINDOW_SIDES = ("nccl_part",)

# Fabric profiles: per-hop latency and an efficiency factor on network (non-NVLink) links.
#  - infiniband: ~130 ns switch port-to-port (NDR class) plus serialisation/cable: 0.25 us per link hop;
#    credit-based lossless flow control sustains line rate under contention (efficiency 1.0).
#  - roce: ~600-800 ns per Ethernet switch hop: 0.8 us per link hop; DCQCN-style congestion control is
#    modelled only as a throughput efficiency of 0.95 on network links (an assumption, not a measurement).
# Both are overridable per scenario (`fabric.hop_latency_us`, `fabric.link_efficiency`).
PROFILE_DEFAULTS: dict[str, dict[str, float]] = {
    "infiniband": {"hop_latency_us": 0.25, "link_efficiency": 1.0},
    "roce": {"hop_latency_us": 0.8, "link_efficiency": 0.95},
}


@dataclass(frozen=True)
class StorageSpec:
    """Storage hosts attached to leaf (edge) switches, each with one link of `gbps` per direction."""

    hosts: int = 0
    gbps: float = 400.0
    leaves: tuple[int, ...] = ()  # leaf ids the storage hosts attach to, round-robin; () = last leaf


@dataclass(frozen=True)
class FabricSpec:
    topology: str = "spine_leaf"
    # spine_leaf
    leaves: int = 8
    spines: int = 4
    hosts_per_leaf: int = 2
    links_per_spine: int = 1
    uplink_gbps: float = 400.0
    # single_switch / rail_optimized
    hosts: int = 16
    # fat_tree
    k: int = 8
    link_gbps: float = 400.0
    # common
    gpus_per_host: int = 8
    nic_gbps: float = 400.0
    nvlink_gbps: float = 3600.0
    profile: str = "infiniband"
    hop_latency_us: float = 0.25  # resolved: the profile's value unless the scenario overrides it
    link_efficiency: float = 1.0  # resolved: multiplies the capacity of every non-NVLink link
    # a store-and-forward packet (wire bytes): a path's latency adds this / the link's line rate per link
    # (a switch forwards a packet only once it holds all of it); 0 = propagation only
    store_and_forward_bytes: float = 0.0
    storage: StorageSpec = field(default_factory=StorageSpec)
    # k GPUs of a host share one NIC (of nic_gbps; of link_gbps on fat_tree), each over a PCIe link of
    # pcie_gbps; 1 = a NIC per GPU (no PCIe link), gpus_per_host = one NIC per host
    gpus_per_nic: int = 1
    pcie_gbps: float = PCIE_GBPS_DEFAULT
    # topology "graph": the user's fabric as a networkx graph (see ainet_gym.fabric.topology.fabric_from_graph)
    # and the file it was read from, if any; `hosts` and `gpus_per_host` are then those of the graph
    graph: Any = field(default=None, compare=False, hash=False, repr=False)
    file: str | None = None


def fabric_gpu_count(f: FabricSpec) -> int:
    """Number of GPUs of a fabric spec (ids ``0..n-1``, host-major)."""
    if f.topology == "spine_leaf":
        return f.leaves * f.hosts_per_leaf * f.gpus_per_host
    if f.topology == "fat_tree":
        return f.k**3 // 4 * f.gpus_per_nic  # one NIC per edge-switch down port
    return f.hosts * f.gpus_per_host  # single_switch, rail_optimized, graph (counted from the graph)


def fabric_host_count(f: FabricSpec) -> int:
    """Number of GPU hosts of a fabric spec."""
    return fabric_gpu_count(f) // f.gpus_per_host


@dataclass(frozen=True)
class CollectiveSpec:
    op: str  # one of OPS
    bytes: float  # buffer size S (nccl-tests convention)
    algorithm: str = "ring"  # one of ALGORITHMS (allreduce); ring for reducescatter/allgather
    pattern: str | None = None  # sendrecv: "shift:k"
    # alltoall (mixture of experts): per-destination load follows rank^-skew (Zipf); 0 = uniform.
    skew: float = 0.0
    # the hot experts rotate by one rank every `skew_period_steps` decision intervals (None = fixed)
    skew_period_steps: int | None = None
    # hierarchical / tree allreduce: the buffer is split into `chunks` pipelined through the stages
    chunks: int = 1
    # groups of a parallelism dimension (tensor, expert, data parallel): the collective runs in every group
    # of `group_size` ranks at once (None: one group of all the job's ranks); group k of block b holds the
    # ranks b * group_size * group_stride + k + group_stride * i (i < group_size), so stride 1 takes
    # consecutive ranks (a host's GPUs) and stride 8 one rank of each of group_size 8-GPU hosts
    group_size: int | None = None
    group_stride: int = 1


@dataclass(frozen=True)
class JobSpec:
    name: str
    gpus: int
    placement: str | tuple[int, ...] = "contiguous"  # one of PLACEMENTS or explicit GPU ids
    rank_order: str = "placement"  # one of RANK_ORDERS: how the placed GPUs are ordered into ranks
    compute_ms: float = 100.0
    overlap: float = 0.0  # fraction of compute that communication can hide behind, in [0, 1]
    start_ms: float = 0.0
    # each episode (reset) of an initial job starts at start_ms + u, u drawn from the episode seed uniformly
    # in [0, start_jitter_ms] on a 0.1 ms grid: the jobs' relative phases vary from seed to seed (0: every
    # episode starts at start_ms, as without the field); initial jobs only, not churn templates
    start_jitter_ms: float = 0.0
    collectives: tuple[CollectiveSpec, ...] = ()
    # the share weight of every flow of the job (its traffic class's ETS / WRR weight, as weighted max-min per
    # flow: docs/model.md, "Share weights"); the engine's initial weight of the job's unit
    share_weight: float = 1.0


@dataclass(frozen=True)
class BackgroundSpec:
    """Background traffic between storage hosts and GPUs, as demand-capped flows.

    kind `storage` reads (storage -> GPUs, data ingest), `checkpoint` writes (GPUs -> storage).
    Active in decision intervals where `pattern` is constant, or periodic with
    (step - offset) mod period_steps < duration_steps, where offset = offset_steps + k and k is drawn
    from the episode seed at each reset uniformly in 0..offset_jitter_steps (0: offset_steps exactly, as
    without the field; periodic only): the burst phase then varies from seed to seed.
    """

    kind: str = "storage"
    gbps: float = 100.0  # total offered rate, split evenly over its flows
    pattern: str = "constant"
    period_steps: int = 10
    duration_steps: int = 1
    offset_steps: int = 0
    offset_jitter_steps: int = 0
    job: str | None = None  # the GPUs of this job (None: every GPU of every initial job)
    flows_per_host: int = 1  # flows per storage host (one per target GPU, round-robin)
    # one of BACKGROUND_UPSTREAM: share (today's max-min: a flow takes its rate on every link of its path) or
    # demand (a flow held below its demand by a bottleneck link is charged its demand on the links of each path
    # before that path's first bottleneck, the excess queued there; docs/model.md, numpy backend only)
    upstream: str = "share"


@dataclass(frozen=True)
class ScheduledFailure:
    """`link: "leaf0-spine1"` (both directions of the first parallel link) degraded to `factor` of
    its capacity (0 = failed) from `at_step` until `until_step` (None = never repaired)."""

    link: str
    at_step: int
    until_step: int | None = None
    factor: float = 0.0


@dataclass(frozen=True)
class LinkFailureSpec:
    rate_per_step: float = 0.0  # probability per step that one random network link fails
    repair_steps: int = 10
    tiers: tuple[str, ...] = ("leaf_spine", "agg_core", "edge_agg", "rail_spine")
    scheduled: tuple[ScheduledFailure, ...] = ()


@dataclass(frozen=True)
class JobChurnSpec:
    arrival_rate: float = 0.0  # mean arrivals per step (Poisson)
    mean_steps: float = 50.0  # mean lifetime of an arriving job (geometric)
    max_jobs: int = 8  # job slots (bounds the action space)
    templates: tuple[JobSpec, ...] = ()  # jobs that may arrive; () = the initial jobs


@dataclass(frozen=True)
class DynamicsSpec:
    episode_steps: int = 200
    decision_interval_ms: float | None = None  # None: the ideal step time of the slowest job
    link_failures: LinkFailureSpec = field(default_factory=LinkFailureSpec)
    job_churn: JobChurnSpec = field(default_factory=JobChurnSpec)
    # "event": rates re-solved at every event, flow completions included (exact max-min fluid model);
    # "phase": a flow that finishes early keeps its bandwidth until the next non-flow event (a phase
    # ends, compute ends, latency is paid): fewer solves, an upper bound on communication time.
    rate_updates: str = "event"
    # flow completions up to this many microseconds after the first are one event, at the last of them (the
    # flows that finished earlier idle until then); 0: every completion is an event. A flow-level model
    # does not resolve times below a round trip anyway; see docs/model.md, "Modelling constants".
    rate_quantum_us: float = 0.0


@dataclass(frozen=True)
class RoutingSpec:
    max_paths: int = 8
    qps_per_connection: int = 1
    reroute: str = "in_flight"  # one of REROUTE_MODES
    split_flows: str = "coupled"  # one of SPLIT_FLOWS_MODES
    # with split_flows independent: a ring's hops may run apart by at most this many bytes (the ring is cut
    # into sequential segments of at most this many bytes per hop, sim.workload.segment_rings); None: unbounded
    ring_run_ahead_bytes: float | None = None
    # with split_flows independent and reroute in_flight: at a split change in flight, each path part that
    # loses share keeps up to this many of its bytes on its old path, as a held part of its own (the bytes a
    # sub-flow has queued in the network, bounded by its window); 0: none (every remaining byte is re-split)
    reroute_held_bytes: float = 0.0
    # with reroute_held_bytes > 0: a held part's coefficient on its path, one of REROUTE_HELD_WEIGHTS (one: 1;
    # part: its part's fraction before the change that handed it bytes); no effect without held bytes
    reroute_held_weight: str = "one"
    # with split_flows independent: how a path part shares a link, one of PART_SHARES (fraction: coefficient f,
    # all the bytes; per_part: coefficient 1, f of the bytes)
    part_share: str = "fraction"
    # with reroute_held_bytes > 0: which parts hold bytes at a split change in flight, one of REROUTE_HELD_PARTS
    # (all: every part that loses share; queued: only one bottlenecked on a saturated switch link of its old
    # path in the allocation at the boundary); no effect without held bytes
    reroute_held_parts: str = "all"
    # with split_flows independent: the NCCL window of a ring's sub-flows, in bytes per hop (the replay's
    # ring_buffer_steps x ring_chunk_bytes); each path part of a ring hop leads the hop it feeds by at most this
    # many bytes and the hop feeding it by at most one ring step (sim.ring_window); None: no window (the hops of
    # an independent ring are unbounded)
    ring_window_bytes: float | None = None
    # with ring_window_bytes: which bounds, one of RING_WINDOW_SIDES
    ring_window_side: str = "nccl_part"
    # with ring_window_bytes: the replay's chunk (ring_chunk_bytes) in bytes: a part leads the feeding hop's
    # progress rounded down to whole chunks of min(this, one ring step) by at most one step, and waits at that bound
    # until the feeding hop completes its next chunk (ns3_driver.cc, Allow); None: no rounding (sim.ring_window)
    ring_window_chunk_bytes: float | None = None


@dataclass(frozen=True)
class RewardSpec:
    kind: str = "gpu_utilization"


@dataclass(frozen=True)
class Scenario:
    name: str
    fabric: FabricSpec
    jobs: tuple[JobSpec, ...]
    description: str = ""
    seed: int = 0
    background: tuple[BackgroundSpec, ...] = ()
    dynamics: DynamicsSpec = field(default_factory=DynamicsSpec)
    routing: RoutingSpec = field(default_factory=RoutingSpec)
    reward: RewardSpec = field(default_factory=RewardSpec)
    source: str = "<dict>"  # file the scenario was loaded from
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def ring_segments(hop_bytes: float, run_ahead_bytes: float) -> int:
    """Segments of a ring whose hops move ``hop_bytes`` each under a run-ahead of ``run_ahead_bytes``
    (``routing.ring_run_ahead_bytes``; the loader's limit and the engine's cut read it):
    ``ceil(hop_bytes / run_ahead_bytes)``, at least 1."""
    return max(1, math.ceil(hop_bytes / run_ahead_bytes))
