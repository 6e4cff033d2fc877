"""A closed-form upper bound of a job's ideal step time, for the size checks of :mod:`ainet_gym.scenario.loader`.

The ideal step of a job is the job alone on the non-blocking twin of its fabric (every NIC on one switch;
NVLink, NICs and PCIe links as in the fabric): ``step = compute + max(0, comm - overlap * compute)``,
``comm`` the sum of its collectives' phases. This module bounds it from above without building the
fabric or simulating anything, from the alpha-beta cost of each phase (Thakur, Rabenseifner and Gropp,
2005) at the phase's bottleneck link:

- **latency term**: the phase's algorithm steps x the links of its longest path (2 inside a host, 2 or,
  through a shared NIC, 4 between hosts) x the largest per-link latency;
- **bandwidth term**: the most bytes a flow of the phase moves, over a lower bound of its max-min fair
  rate: on every link ``l`` a max-min fair allocation gives each flow at least ``c_l / W_l`` (capacity
  over the crossings of the phase's flows on it), so a flow moves at least at the smallest such share
  along its members' links (NVLink inside a host; PCIe, the NIC up and down, PCIe between hosts).

The ranks' hosts follow the job's placement and rank order the way :func:`ainet_gym.sim.placement.place_job`
does in an empty fabric (contiguous from the job's first free GPU, explicit ids as listed, spread and
random: consecutive ranks on different hosts; a shuffled rank order is drawn with a fixed seed). Pipelined
chunks (``chunks: N``): a chunk's stage takes at most its alpha plus the per-chunk bytes time of every
stage on its link class (NVLink or NIC: they may run at once and share), and the pipeline ``N - 1`` more
of the largest such time after the first chunk. Jobs above :data:`EXPLICIT_RANKS_MAX` ranks fall back to the
coarser bound of the loader.

For the shipped kinds of job the bound lies within a factor 2 of the ideal twin's step, so the loader's
iteration estimate ``interval / bound`` lies within ``[true / 2, true]`` (``tests/scenario/test_estimate.py``
sweeps 8 B to 8 GB and 1 ms to 10 s).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ainet_gym.scenario.collectives import decompose
from ainet_gym.scenario.spec import FabricSpec, JobSpec, fabric_gpu_count
from ainet_gym.units import GBPS_TO_BYTES_PER_S

__all__ = ["EXPLICIT_RANKS_MAX", "IdealLinks", "ideal_links", "ideal_step_upper_s", "rank_layout"]

#: ranks up to which the phases are decomposed member by member (above: the loader's coarse bound).
EXPLICIT_RANKS_MAX = 4096
#: AllToAll ranks up to which its p^2 members are counted one by one (above: by host counts).
ALLTOALL_EXPLICIT_MAX = 512


class IdealLinks:
    """Capacities (bytes/s) and latency (s) of the links a job uses on the non-blocking twin."""

    def __init__(self, nvlink: float, nic: float, pcie: float, gpus_per_nic: int, latency_s: float) -> None:
        self.nvlink = nvlink
        self.nic = nic
        self.pcie = pcie
        self.gpus_per_nic = gpus_per_nic
        self.latency_s = latency_s


def ideal_links(f: FabricSpec) -> IdealLinks:
    """The link speeds of ``f``'s non-blocking twin: NVLink (no efficiency factor), NIC and PCIe (times
    ``link_efficiency``); for a graph fabric the slowest of each kind and the largest latency."""
    eff = f.link_efficiency
    lat = f.hop_latency_us * 1e-6
    if f.topology == "graph" and f.graph is not None:
        G = f.graph
        role = {n: d.get("role") for n, d in G.nodes(data=True)}
        nvl, nic, pcie, lat_max = [], [], [], lat
        for u, v, d in G.edges(data=True):
            pair = {role.get(u), role.get(v)}
            try:
                gbps = float(d.get("gbps", 0))
                lat_max = max(lat_max, float(d.get("latency_us", f.hop_latency_us)) * 1e-6)
            except (TypeError, ValueError):
                continue
            if pair == {"gpu", "nvswitch"}:
                nvl.append(gbps)
            elif pair == {"gpu", "nic"}:
                pcie.append(gbps)
            elif pair in ({"gpu", "switch"}, {"nic", "switch"}):
                nic.append(gbps)
        k = f.gpus_per_host if pcie else 1  # GPUs behind a NIC node: at worst a host's
        return IdealLinks(
            (min(nvl) if nvl else f.nvlink_gbps) * GBPS_TO_BYTES_PER_S,
            min(nic or [1.0]) * eff * GBPS_TO_BYTES_PER_S,
            min(pcie or [1.0]) * eff * GBPS_TO_BYTES_PER_S,
            k,
            lat_max,
        )
    nic = f.link_gbps if f.topology == "fat_tree" else f.nic_gbps
    return IdealLinks(
        f.nvlink_gbps * GBPS_TO_BYTES_PER_S,
        nic * eff * GBPS_TO_BYTES_PER_S,
        f.pcie_gbps * eff * GBPS_TO_BYTES_PER_S,
        f.gpus_per_nic,
        lat,
    )


def rank_layout(f: FabricSpec, job: JobSpec, offset: int = 0) -> np.ndarray:
    """GPU ids of the job's ranks, as :func:`~ainet_gym.sim.placement.place_job` gives them in a fabric
    whose first ``offset`` GPUs are taken (spread and random: consecutive ranks on different hosts)."""
    p, gph = job.gpus, max(f.gpus_per_host, 1)
    n = fabric_gpu_count(f)
    if not isinstance(job.placement, str):
        g = np.asarray(job.placement, dtype=np.int64)
    elif job.placement == "contiguous":
        start = offset if offset + p <= n else 0
        g = start + np.arange(p, dtype=np.int64)
    else:
        hosts = max(n // gph, 1)
        r = np.arange(p, dtype=np.int64)
        g = (r % hosts) * gph + (r // hosts) % gph
    order = job.rank_order
    if order == "sorted":
        g = np.sort(g)
    elif order == "shuffled":
        g = g[np.random.default_rng(0).permutation(p)]
    elif order == "by_host":
        g = g[np.lexsort((g, g // gph))]
    return g


def _members_time(
    links: IdealLinks, gph: int, gpus: np.ndarray, flow_of: np.ndarray, src: np.ndarray, dst: np.ndarray,
    flow_bytes: np.ndarray,
) -> tuple[float, bool]:  # fmt: skip
    """(bandwidth time bound, any member between hosts) of one phase given its members (rank pairs)."""
    if src.size == 0:
        return 0.0, False
    gs, gd = gpus[src], gpus[dst]
    cross = (gs // gph) != (gd // gph)
    k = links.gpus_per_nic
    n_gpu = int(max(gs.max(), gd.max())) + 1
    # link keys: kind * n + id; kinds 0 nvlink up, 1 nvlink down, 2 pcie up, 3 pcie down, 4 nic up, 5 nic down
    keys, caps = [], []
    inner = ~cross
    keys.append((np.flatnonzero(inner), 0 * n_gpu + gs[inner], links.nvlink))
    keys.append((np.flatnonzero(inner), 1 * n_gpu + gd[inner], links.nvlink))
    out = np.flatnonzero(cross)
    if k > 1:
        keys.append((out, 2 * n_gpu + gs[cross], links.pcie))
        keys.append((out, 3 * n_gpu + gd[cross], links.pcie))
    keys.append((out, 4 * n_gpu + gs[cross] // k, links.nic))
    keys.append((out, 5 * n_gpu + gd[cross] // k, links.nic))
    member_share = np.full(src.size, np.inf)
    all_keys = np.concatenate([kk for _, kk, _ in keys]) if keys else np.zeros(0, np.int64)
    if all_keys.size:
        uniq, inv, counts = np.unique(all_keys, return_inverse=True, return_counts=True)
        pos = 0
        for idx, kk, cap in keys:
            w = counts[inv[pos : pos + kk.size]]
            np.minimum.at(member_share, idx, cap / w)
            pos += kk.size
        caps.append(uniq)
    n_flows = int(flow_of.max()) + 1
    rate = np.full(n_flows, np.inf)
    np.minimum.at(rate, flow_of, member_share)
    t = float(np.max(flow_bytes / rate)) if n_flows else 0.0
    return t, bool(cross.any())


def _alltoall_time(
    links: IdealLinks, gph: int, gpus: np.ndarray, S: float, skew: float
) -> tuple[float, bool]:
    p = gpus.size
    w_max = 1.0
    if skew > 0:
        w = (1.0 + np.arange(p)) ** (-skew)
        w_max = float(w.max() * p / w.sum())
    per_host = np.bincount(gpus // gph)
    g_h = int(per_host.max())
    off = p - int(per_host[per_host > 0].min())  # off-host destinations of a rank, at most
    k = links.gpus_per_nic
    shares = []
    if g_h > 1:
        shares.append(links.nvlink / (g_h - 1))
    if off > 0:
        shares.append(links.nic / (min(k, g_h) * off))
        if k > 1:
            shares.append(links.pcie / off)
    if skew > 0 and off > 0:  # every rank sends its hottest share to one rank: that rank's NIC down
        shares.append(links.nic / (min(k, g_h) * (p - 1)))
    rate = min(shares) if shares else math.inf
    return S / p * w_max / rate, off > 0


def _phases(c, p: int, host_of_rank: list[int]):
    return decompose(replace(c, chunks=1), p, host_of_rank)


def _collective_time(links: IdealLinks, f: FabricSpec, c, gpus: np.ndarray) -> float:
    """Upper bound (s) of one collective on the non-blocking twin."""
    p = gpus.size
    gph = max(f.gpus_per_host, 1)
    two_chain = 4 if links.gpus_per_nic > 1 else 2
    if c.op == "alltoall" and p > ALLTOALL_EXPLICIT_MAX:
        t, cross = _alltoall_time(links, gph, gpus, float(c.bytes), c.skew)
        return t + (p - 1) * (two_chain if cross else 2) * links.latency_s
    stages = []  # (bandwidth time, alpha, link class)
    for ph in _phases(c, p, list((gpus // gph).tolist())):
        src, dst, flow_of, fb = [], [], [], []
        for i, fl in enumerate(ph.flows):
            fb.append(fl.bytes)
            for a, b in fl.members:
                src.append(a)
                dst.append(b)
                flow_of.append(i)
        t, cross = _members_time(
            links, gph, gpus, np.asarray(flow_of, np.int64), np.asarray(src, np.int64),
            np.asarray(dst, np.int64), np.asarray(fb, np.float64),
        )  # fmt: skip
        stages.append((t, ph.steps * (two_chain if cross else 2) * links.latency_s, cross))
    n = int(c.chunks)
    if n == 1 or not stages:
        return sum(t + a for t, a, _ in stages)
    # a chunk's stage runs beside the other chunks' stages on the same links (NVLink inside a host, NICs
    # between hosts): at worst it moves at its share, so it takes its alpha plus its class's bytes time
    cls = {x: sum(t / n for t, _, y in stages if y == x) for x in (True, False)}
    per = [a + cls[x] for _, a, x in stages]
    return sum(per) + (n - 1) * max(per)


def ideal_step_upper_s(f: FabricSpec, job: JobSpec, offset: int = 0) -> float | None:
    """Upper bound (s) of ``job``'s ideal step on the non-blocking twin of ``f`` (its first rank at GPU
    ``offset`` for a contiguous placement); None above :data:`EXPLICIT_RANKS_MAX` ranks or when the layout
    cannot be derived (the caller then uses a coarser bound)."""
    p = job.gpus
    compute = job.compute_ms * 1e-3
    if p < 2 or not job.collectives:
        return compute
    if p > EXPLICIT_RANKS_MAX:
        return None
    try:
        gpus = rank_layout(f, job, offset)
        links = ideal_links(f)
        comm = sum(_collective_time(links, f, c, gpus) for c in job.collectives)
    except (ValueError, IndexError, ZeroDivisionError):
        return None
    return compute + max(0.0, comm - job.overlap * compute)
