"""The ns-3 side of the cross-check: the fluid run's episode replayed in packets (the optional extra
``ns3``). :func:`run_ns3` builds the fabric as ns-3 nodes and point-to-point links, pins every routed
(connection, path) to its own address pair with static host routes, hands the jobs, background sources
and link degradations to the C++ orchestrator (``ainet_gym/checks/ns3_driver.cc``, compiled at the first
:func:`import_ns` by cppyy's JIT), runs the span and reads back each job's iterations and times, the
links' payload bytes, FqCoDel's buckets and the per-transfer and per-sub-flow logs."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.checks.crosscheck.config import CrosscheckConfig, Ns3NotInstalledError
from ainet_gym.checks.crosscheck.fluid import Conn, FluidRun
from ainet_gym.fabric.topology import Fabric

#: The orchestrator's C++ source, package data of ``ainet_gym.checks``.
DRIVER_SOURCE: Path = Path(__file__).resolve().parent.parent / "ns3_driver.cc"

_NS = None  # ns-3's ``ns`` with the driver compiled into it, once imported


def routing_of(split_row: np.ndarray, conn: Conn, spray_mode: str) -> tuple[str, list[tuple[int, float]]]:
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


def import_ns() -> Any:
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
    ns.cppyy.cppdef(DRIVER_SOURCE.read_text(encoding="utf-8"))
    _NS = ns
    return ns


def ip_pair(n: int) -> tuple[str, str]:
    """The n-th connection address pair: the two hosts of the /30 subnet 11.0.0.0 + 4n. Being in one
    subnet makes ns-3's source-address selection pick the pair's own address on the sending GPU."""
    out = []
    for host in (1, 2):
        i = 4 * n + host
        out.append(f"{11 + (i >> 24)}.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}")
    return out[0], out[1]


def endpoint_node(fabric: Fabric, e: int) -> int:
    """Node id of endpoint ``e`` (a GPU, or a storage host ``n_gpus + i``): the source of its NIC link."""
    return int(fabric.link_src[fabric.endpoint_up[e]])


@dataclass
class _Net:
    """The ns-3 fabric: nodes by fabric node id, and per link id its two ends and sending device."""

    node_of: dict[int, Any]  # fabric node id -> ns-3 node (every GPU, storage host and switch)
    is_switch: np.ndarray  # (fabric nodes,) bool
    end: dict[int, tuple[int, str, int, str]]  # link id -> (src ifindex, src ip, dst ifindex, dst ip)
    host_if: dict[int, tuple[int, str]]  # endpoint node -> (NIC ifindex, leaf-side ip)
    device: dict[int, Any]  # link id -> the ns-3 device that sends on it
    static: dict[int, Any]  # fabric node id -> its Ipv4StaticRouting


def _set_defaults(ns: Any, cfg: CrosscheckConfig, spray: bool) -> None:
    """The run's random seed and the TCP, device and queue-disc defaults of ``cfg``."""
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


def _build_nodes(ns: Any, f: Fabric) -> tuple[dict[int, Any], np.ndarray]:
    """One ns-3 node with an IPv4 stack per GPU, storage host and switch of ``f`` (no NVLink switches)."""
    built = [i for i, k in enumerate(f.node_kind) if k != "nvswitch"]
    is_switch = np.asarray([k not in ("gpu", "storage", "nvswitch") for k in f.node_kind])
    nodes = ns.NodeContainer()
    nodes.Create(len(built))
    node_of = {fid: nodes.Get(i) for i, fid in enumerate(built)}
    stack = ns.InternetStackHelper()
    stack.SetIpv6StackInstall(False)
    stack.Install(nodes)
    return node_of, is_switch


def _build_links(
    ns: Any, f: Fabric, cfg: CrosscheckConfig, node_of: dict[int, Any], is_switch: np.ndarray
) -> _Net:
    """One point-to-point channel per duplex pair of fabric links, each direction at its link's rate and
    latency, a /30 subnet each; the endpoints' NIC interfaces."""
    p2p = ns.PointToPointHelper()
    p2p.SetQueue("ns3::DropTailQueue", "MaxSize", ns.StringValue(f"{cfg.device_queue_packets}p"))
    latency = getattr(f, "link_latency_s", None)  # per-link latencies where the fabric has them
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
    end: dict[int, tuple[int, str, int, str]] = {}
    host_if: dict[int, tuple[int, str]] = {}
    device: dict[int, Any] = {}
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
    return _Net(node_of, is_switch, end, host_if, device, {})


def _schedule_degradations(orch: Any, run: FluidRun, net: _Net) -> None:
    """Scheduled degradations and repairs: each direction's device sends at its link's rate times the
    interval's factor (a factor that changes from the previous interval, or differs from 1 at the start)."""
    f = run.fabric
    for k in range(len(run.splits)):
        prev = run.link_factor[k - 1] if k > 0 else np.ones(f.n_links)
        for lk in np.flatnonzero(run.link_factor[k] != prev):
            if int(lk) in net.device:
                d = orch.AddDevice(net.device[int(lk)])
                orch.AddRateChange(k, d, float(f.link_gbps[lk] * 1e9 * run.link_factor[k, lk]))


def _static_routing(ns: Any, net: _Net, spray: bool) -> None:
    """Global routing tables when a connection is sprayed; every node's static routing, the endpoints'
    default route to their leaf."""
    if spray:
        ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
    srh = ns.Ipv4StaticRoutingHelper()
    net.static.update(
        {fid: srh.GetStaticRouting(node.GetObject[ns.Ipv4]()) for fid, node in net.node_of.items()}
    )
    for fid, (ifidx, leaf_ip) in net.host_if.items():
        net.static[fid].SetDefaultRoute(ns.Ipv4Address(leaf_ip), ifidx)


def _add_subflows(
    ns: Any,
    orch: Any,
    run: FluidRun,
    cfg: CrosscheckConfig,
    net: _Net,
    routing: dict[tuple[int, int], tuple[str, list[tuple[int, float]]]],
) -> None:
    """Every (connection, interval)'s sub-flows to the orchestrator: one address pair per routed
    (connection, path), /32 host routes along the path (data) and back (ACKs), made at its first use."""
    f = run.fabric
    node_of, end, host_if, is_switch, static = net.node_of, net.end, net.host_if, net.is_switch, net.static
    pair_addr: dict[tuple[int, int], tuple[str, str]] = {}
    mask30 = ns.Ipv4Mask("255.255.255.252")

    def address_pair(c: int, k: int) -> tuple[str, str]:
        if (c, k) in pair_addr:
            return pair_addr[(c, k)]
        conn = run.conns[c]
        s_ip, d_ip = ip_pair(len(pair_addr))
        for e, ip in ((conn.src, s_ip), (conn.dst, d_ip)):
            en = endpoint_node(f, e)
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
        sn, dn = endpoint_node(f, conn.src), endpoint_node(f, conn.dst)
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
            # split_qps = K: the fluid split is in multiples of 1/K (quantize_split); K * frac TCP
            # connections of 1/K of the bytes each on this path
            for q in range(round(frac * cfg.split_qps)):
                orch.AddSub(c, k, sid, s_ip, did, d_ip, 1.0 / cfg.split_qps, p, q)


def _add_workload(orch: Any, run: FluidRun) -> None:
    """The jobs (phases of flows of transfers) and the background sources with their on intervals."""
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


def _job_figures(orch: Any, n_jobs: int, steps: int) -> dict[str, Any]:
    """Iterations and communication and step time sums (s) per job, over the span and per interval, and
    each job's per-iteration log (``iter_comm_s``, ``iter_end_s``: per job, an array over its completed
    iterations in order of their communication time and end time, s)."""
    J = n_jobs
    n = [int(orch.Iterations(j)) for j in range(J)]
    return {
        "iter_comm_s": [
            np.asarray([orch.IterComm(j, i) for i in range(n[j])], dtype=np.float64) for j in range(J)
        ],
        "iter_end_s": [
            np.asarray([orch.IterEnd(j, i) for i in range(n[j])], dtype=np.float64) for j in range(J)
        ],
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
    }


def _link_usage(ns: Any, orch: Any, run: FluidRun, cfg: CrosscheckConfig, net: _Net) -> dict[str, Any]:
    """FqCoDel buckets per link and per sub-flow, payload bytes per link and interval, and per sub-flow the
    payload bytes it received in each interval."""
    f = run.fabric
    steps = len(run.splits)
    # FqCoDel buckets (queue disc classes) each link's device used in the run: a class is made for
    # every hash bucket a packet falls in, so fewer buckets than the link's TCP connections (data and
    # ACKs) means some of them shared a bucket (CrosscheckConfig.fq_flows)
    fq_buckets = [-1] * f.n_links
    for lk, dev in net.device.items():
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
    subflow_rx = []
    for i in range(int(orch.FlowCount())):
        conn = run.conns[int(orch.FlowConn(i))]
        p = int(orch.FlowPath(i))
        rx = np.array([orch.FlowRxIn(i, k) for k in range(steps)])
        subflow_rx.append(rx.tolist())
        payload += float(rx.sum())
        paths = [conn.paths[p]] if p >= 0 else conn.paths
        for path in paths:
            link_bytes[:, path] += rx[:, None] / len(paths)
    return {
        "fq_buckets": fq_buckets,
        "flow_buckets": flow_buckets,
        "link_bytes": link_bytes,
        "payload_bytes": payload,
        "subflow_rx": subflow_rx,
    }


def _attach_counters(ns: Any, run: FluidRun, cfg: CrosscheckConfig, net: _Net) -> dict[int, Any]:
    """A transmit counter (the driver's ``DeviceCounter``) on every link's sending device when
    ``cfg.device_counter_bin_s`` is set, keyed by link id; none otherwise."""
    b = cfg.device_counter_bin_s
    if b is None:
        return {}
    n_bins = int(np.ceil(run.interval_s * len(run.splits) / b - 1e-9))
    counters = {}
    for lk, dev in sorted(net.device.items()):
        c = ns.cppyy.gbl.ainet_xc.DeviceCounter(float(b), n_bins)
        c.Attach(dev)
        counters[lk] = c
    return counters


def pair_owners(run: FluidRun) -> dict[tuple[int, int], str]:
    """The job or background source whose connection is each (source, destination) endpoint pair of
    ``run`` (the name of the first that uses it, jobs before background sources)."""
    owners: dict[tuple[int, int], str] = {}
    for jp in run.jobs:
        for ph in jp.phases:
            for fl in ph:
                for c, *_ in fl:
                    owners.setdefault((run.conns[c].src, run.conns[c].dst), jp.name)
    for bg in run.backgrounds:
        for c in bg.conns:
            owners.setdefault((run.conns[c].src, run.conns[c].dst), bg.name)
    return owners


def _device_counts(ns: Any, run: FluidRun, cfg: CrosscheckConfig, net: _Net, counters: dict[int, Any]) -> Any:
    """What the transmit counters saw (``None`` without counters): per link id, the wire bytes per bin
    of data packets by (source, destination) endpoint pair (``"src>dst"``) and of the other packets, with
    the bin width and each pair's owner (:func:`pair_owners`)."""
    if not counters:
        return None
    f = run.fabric
    ends = {endpoint_node(f, e): e for c in run.conns.values() for e in (c.src, c.dst)}
    endpoint_of_ip: dict[int, int] = {}
    for node, e in ends.items():
        ipv4 = net.node_of[node].GetObject[ns.Ipv4]()
        ifidx = net.host_if[node][0]
        for j in range(int(ipv4.GetNAddresses(ifidx))):
            endpoint_of_ip[int(ipv4.GetAddress(ifidx, j).GetLocal().Get())] = e
    links: dict[str, Any] = {}
    for lk, c in counters.items():
        data = {}
        for key in c.Keys():
            s, d = endpoint_of_ip.get(int(key) >> 32, -1), endpoint_of_ip.get(int(key) & 0xFFFFFFFF, -1)
            name = f"{s}>{d}"
            series = np.asarray(list(c.Series(key)))
            data[name] = (np.asarray(data[name]) + series).tolist() if name in data else series.tolist()
        links[str(lk)] = {"data": data, "other": list(c.other)}
    owners = {f"{s}>{d}": name for (s, d), name in pair_owners(run).items()}
    return {"bin_s": cfg.device_counter_bin_s, "owners": owners, "links": links}


def _logs(orch: Any) -> dict[str, list[tuple]]:
    """The orchestrator's per-transfer and per-sub-flow logs."""
    return {
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
        # connection id, path index, bytes it was to carry and received, launch time, last and first byte (s)
        "subflow_log": [
            (
                int(orch.FlowTransfer(i)),
                int(orch.FlowConn(i)),
                int(orch.FlowPath(i)),
                float(orch.FlowTotal(i)),
                float(orch.FlowGot(i)),
                float(orch.FlowLaunch(i)),
                float(orch.FlowLastRx(i)),
                float(orch.FlowFirstRx(i)),
            )
            for i in range(int(orch.FlowCount()))
        ],
    }


def run_ns3(run: FluidRun, cfg: CrosscheckConfig) -> dict[str, Any]:
    """Replay the jobs and the background in ns-3: iterations and comm/step time sums (s) per job, in all
    and per interval, payload bytes per link and interval, wall and CPU time of the run, whether it
    timed out, the number of TCP connections, how connections were routed and how many transfers in
    flight moved their bytes to a new split."""
    ns = import_ns()
    cpp = ns.cppyy.gbl
    f = run.fabric
    steps = len(run.splits)
    routing = {
        (c, k): routing_of(run.splits[k][c], conn, cfg.spray_mode)
        for c, conn in run.conns.items()
        for k in range(steps)
    }
    spray = any(kind == "spray" for kind, _ in routing.values())
    _set_defaults(ns, cfg, spray)
    node_of, is_switch = _build_nodes(ns, f)
    orch = cpp.ainet_xc.Orchestrator()
    n_conn_ids = max(run.conns) + 1 if run.conns else 0
    orch.Configure(
        run.interval_s, steps, n_conn_ids, cfg.send_size, cfg.wall_limit_s, float(cfg.ring_chunk_bytes or 0),
        cfg.backlog_bytes, float(cfg.ring_buffer_steps or 0),
    )  # fmt: skip
    orch.SetMoveInFlight(run.reroute == "in_flight")
    net = _build_links(ns, f, cfg, node_of, is_switch)
    _schedule_degradations(orch, run, net)
    _static_routing(ns, net, spray)
    _add_subflows(ns, orch, run, cfg, net, routing)
    _add_workload(orch, run)
    counters = _attach_counters(ns, run, cfg, net)
    orch.Start()
    ns.Simulator.Stop(ns.Seconds(run.interval_s * steps))
    t0, c0 = time.perf_counter(), time.process_time()
    ns.Simulator.Run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {
        **_job_figures(orch, len(run.jobs), steps),
        "wall_s": wall,
        "cpu_s": cpu,
        "events": int(ns.Simulator.GetEventCount()),
        "timed_out": bool(orch.timedOut),
        "transfers": int(orch.FlowCount()),
        "resplits": int(orch.resplits),
        "routing": {kind: sum(1 for k, _ in routing.values() if k == kind) for kind in ("spray", "paths")},
        **_link_usage(ns, orch, run, cfg, net),
        **_logs(orch),
        "device_bytes": _device_counts(ns, run, cfg, net, counters),
    }
    ns.Simulator.Destroy()
    return out
