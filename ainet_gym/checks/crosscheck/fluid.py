"""The fluid side of the cross-check: run the scenario's episode under the policy in the fluid engine and
record what the ns-3 replay needs (:class:`FluidRun`): every connection's split in every interval, the
jobs' phases of transfers, the background sources with their schedule, the links' capacity factors, and
the fluid model's own figures per job and interval, with the wall time of the fluid span alone."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ainet_gym.checks.crosscheck.config import CrosscheckConfig, CrosscheckError
from ainet_gym.fabric.topology import Fabric
from ainet_gym.scenario.collectives import decompose
from ainet_gym.scenario.spec import Scenario


@dataclass
class Conn:
    """One connection of the episode (a job's (source, destination) GPU pair, or a background flow)."""

    src: int  # source endpoint (GPU id, or storage host id n_gpus + i)
    dst: int
    paths: list[list[int]]  # candidate paths (link ids), the columns of the split
    full_ecmp: int  # size of the uncapped ECMP set


@dataclass
class JobPlan:
    """One job as the replay runs it: compute time, overlap, start and its phases of transfers."""

    name: str
    compute_s: float
    overlap: float
    start_s: float  # the episode's start (start_ms plus the seed's start_jitter_ms draw)
    # per phase, per flow: (global connection id, bytes, index of the feeding hop in the flow or -1, lag bytes)
    phases: list[list[list[tuple[int, float, int, float]]]]


@dataclass
class BackgroundPlan:
    """One background source of the episode: its connections, each one's payload rate while on, and
    the intervals in which it is on (its schedule with the seed's offset)."""

    name: str
    conns: list[int]  # connection ids
    rate_bytes_per_s: list[float]  # (conns,) payload bytes/s of each connection while on
    on: np.ndarray  # (steps,) bool


@dataclass
class IterationLog:
    """One job's completed iterations in order (s; the episode's clock, 0 at its start): each one's
    communication time ``comm_s``, end time ``end_s`` and the communication times of iterations ``0..i``
    summed, ``comm_cum_s``. ns-3's log is complete. The fluid's is read per interval from what the engine
    keeps (:func:`iteration_log`): NaN marks what it cannot tell apart, the single iterations of an
    interval in which three or more ended (all but the last two ends and all but the last comm time; the
    sum up to the one before the last stays known)."""

    comm_s: np.ndarray  # (iterations,) float64
    end_s: np.ndarray  # (iterations,) float64
    comm_cum_s: np.ndarray  # (iterations,) float64


def iteration_log(
    iters: np.ndarray,
    comm_sum_s: np.ndarray,
    last_comm_s: np.ndarray,
    last_step_s: np.ndarray,
    last_end_s: np.ndarray,
) -> IterationLog:
    """One job's :class:`IterationLog` from its per-interval figures (each (steps,)): the iterations that
    ended in each interval ``iters``, their communication times summed ``comm_sum_s``, and after the
    interval the last one's communication and step time and its end (the engine state's ``last_comm_s``,
    ``last_step_s`` and ``iter_start``, which an iteration's end sets to its end time).

    With ``n`` iterations ending in an interval: the last is known (its comm and end); the one before it
    ends at the last one's end less its step time, and the communication of the ``n - 1`` before the
    last sums to the interval's sum less the last one's, so with ``n = 2`` both are known, and with
    ``n >= 3`` the single ones before the last are NaN (their sum, in ``comm_cum_s``, is not).

    Examples
    --------
    >>> lg = iteration_log(np.array([1, 0, 2]), np.array([3.0, 0.0, 9.0]), np.array([3.0, np.nan, 5.0]),
    ...                    np.array([10.0, np.nan, 12.0]), np.array([10.0, np.nan, 32.0]))
    >>> lg.comm_s.tolist(), lg.end_s.tolist(), lg.comm_cum_s.tolist()
    ([3.0, 4.0, 5.0], [10.0, 20.0, 32.0], [3.0, 7.0, 12.0])
    """
    n_total = int(np.sum(iters))
    comm = np.full(n_total, np.nan)
    end = np.full(n_total, np.nan)
    cum = np.full(n_total, np.nan)
    done, before = 0, 0.0  # iterations so far and their communication summed
    for k in np.flatnonzero(np.asarray(iters) > 0):  # per interval with an iteration (not per event)
        n = int(iters[k])
        last = done + n - 1
        comm[last], end[last] = last_comm_s[k], last_end_s[k]
        cum[last] = before + comm_sum_s[k]
        if n >= 2:
            end[last - 1] = last_end_s[k] - last_step_s[k]
            cum[last - 1] = cum[last] - last_comm_s[k]
        if n == 2:
            comm[last - 1] = comm_sum_s[k] - last_comm_s[k]
        done += n
        before = cum[last]
    return IterationLog(comm, end, cum)


@dataclass
class FluidRun:
    """What the fluid run recorded: the replay's input (splits, connections, jobs, background, link
    factors) and the fluid model's figures (sums in s over the iterations that ended, per job and per
    interval) and wall times."""

    fabric: Fabric
    interval_s: float
    splits: list[np.ndarray]  # per step: (connections, max_paths)
    conns: dict[int, Conn]
    jobs: list[JobPlan]
    backgrounds: list[BackgroundPlan]
    link_factor: np.ndarray  # (steps, links) capacity factor of each link in each interval
    iterations: np.ndarray  # (jobs,)
    comm_sum_s: np.ndarray  # (jobs,)
    step_sum_s: np.ndarray  # (jobs,)
    step_iterations: np.ndarray  # (steps, jobs) iterations that ended in each interval
    step_comm_sum_s: np.ndarray  # (steps, jobs) their communication times, summed
    step_step_sum_s: np.ndarray  # (steps, jobs) their step times, summed
    link_bytes: np.ndarray  # (steps, links) payload bytes each link carried in each interval
    iteration_log: list[IterationLog]  # per job: its iterations' communication and end times
    wall_s: float  # median of the timed replays (the recorded run if there are none)
    cpu_s: float  # CPU time of the span, the same median
    first_wall_s: float  # the recorded run (the policy acting), first call of the kernels included
    reroute: str = "in_flight"  # routing.reroute: what a new split does to the transfers in flight


def ecmp_set_size(fabric: Fabric, src: int, dst: int) -> int:
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


def quantize_split(split: np.ndarray, qps: int) -> np.ndarray:
    """Each row of ``split`` (connections, paths) rounded to multiples of ``1 / qps``: the row normalised,
    ``floor(qps * f)`` QPs per path, and the remaining QPs to the paths with the largest remainders (ties
    to the lower path index); a row of zeros stays zero. What a connection of ``qps`` QPs hashed by
    weight carries (:attr:`CrosscheckConfig.split_qps`).

    Examples
    --------
    >>> quantize_split(np.array([[0.199, 0.801], [0.6, 0.4], [0.0, 0.0]]), 3).tolist()
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


@dataclass
class _Recorded:
    """The recorded run's per-interval input and figures (``steps`` intervals, ``J`` job slots)."""

    splits: list[np.ndarray]  # per step: (connections, max_paths) the split the fluid run applied
    iterations: np.ndarray  # (J,) iterations completed over the span
    comm_sum_s: np.ndarray  # (J,) their communication times, summed
    step_sum_s: np.ndarray  # (J,) their step times, summed
    step_iterations: np.ndarray  # (steps, J) iterations that ended in each interval
    step_comm_sum_s: np.ndarray  # (steps, J)
    step_step_sum_s: np.ndarray  # (steps, J)
    link_bytes: np.ndarray  # (steps, links) payload bytes per link and interval
    link_factor: np.ndarray  # (steps, links) capacity factor per link and interval
    bg_on: np.ndarray  # (steps, background sources) bool
    last_comm_s: np.ndarray  # (steps, J) after each interval: the last completed iteration's comm time
    last_step_s: np.ndarray  # (steps, J) its step time
    last_end_s: np.ndarray  # (steps, J) its end (the episode's clock)
    wall_s: float  # wall time of the stepping alone (the policy's own time excluded)
    cpu_s: float


def _record(core: Any, agent: Any, obs: Any, steps: int, n_bg: int, cfg: CrosscheckConfig) -> _Recorded:
    """Step ``core`` (reset) for ``steps`` intervals under ``agent``, the splits rounded to
    ``cfg.split_qps`` if set, and record each interval's dynamics (link factors, background on/off, set
    before the policy acts), split and figures."""
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
    bg_on = np.zeros((steps, n_bg), dtype=bool)
    last = np.full((3, steps, J), np.nan)  # after each interval: last iteration's comm, step and end time
    splits: list[np.ndarray] = []
    wall = cpu = 0.0
    assert world.sim is not None
    t_zero = float(world.sim.state.time_s[0])  # the episode's clock origin
    for k in range(steps):
        sim = world.sim
        assert sim is not None
        # the dynamics of interval k are set: capacities and background sources as the interval will run
        link_factor[k] = world.links.cap_factor[0]
        bg_on[k] = sim.state.bg_on[world.bg_unit[0]] if n_bg else bg_on[k]
        a = agent.act(core, obs)
        split = np.asarray(a if agent.level == "engine" else core.decode(core.validate(a)), dtype=np.float64)
        if cfg.split_qps is not None:
            split = quantize_split(split, cfg.split_qps)
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
        # what the engine keeps of the last iteration that ended (outside the timed span; per job slot)
        st, fu = world.sim.state, world.job_unit[0]
        u = np.maximum(fu, 0)
        has = (fu >= 0) & done
        last[0, k] = np.where(has, st.last_comm_s[u], np.nan)
        last[1, k] = np.where(has, st.last_step_s[u], np.nan)
        last[2, k] = np.where(has, st.iter_start[u] - t_zero, np.nan)
    return _Recorded(
        splits, iters, comm, step_t, per_iters, per_comm, per_step, link_bytes, link_factor, bg_on, *last,
        wall, cpu,
    )  # fmt: skip


def _log_of(rec: _Recorded, j: int) -> IterationLog:
    """Job slot ``j``'s :class:`IterationLog` from the recorded run's per-interval figures."""
    return iteration_log(
        rec.step_iterations[:, j],
        rec.step_comm_sum_s[:, j],
        rec.last_comm_s[:, j],
        rec.last_step_s[:, j],
        rec.last_end_s[:, j],
    )


def _job_plans(sc: Scenario, core: Any) -> tuple[dict[int, Conn], list[JobPlan]]:
    """The jobs' transfers, in the connection order of the engine's compiled units (collectives ->
    phases -> flows -> members, first appearance of each (src, dst) pair), and their connections."""
    world = core.world
    fabric = world.fabric
    conns: dict[int, Conn] = {}
    jobs: list[JobPlan] = []
    for j in range(world.n_job_slots):
        job = world.state.jobs[0][j]
        if job is None:
            continue
        gpus = np.asarray(world.state.gpus[0][j], dtype=np.int64)
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
                            conns[c] = Conn(key[0], key[1], paths, ecmp_set_size(fabric, *key))
                        pred = dst_of[sr] if ring else -1
                        transfers.append((c, float(fl.bytes), pred, lag))
                    flows.append(transfers)
                phases.append(flows)
        if int((slots >= 0).sum()) != len(local):
            raise RuntimeError(
                f"job {job.name!r}: {len(local)} connections rebuilt, the world has {(slots >= 0).sum()}"
            )
        jobs.append(JobPlan(job.name, job.compute_ms * 1e-3, job.overlap, job.start_ms * 1e-3, phases))
    return conns, jobs


def _background_plans(core: Any, bg_on: np.ndarray, conns: dict[int, Conn]) -> list[BackgroundPlan]:
    """One demand-capped flow per connection of each background source's unit, its connections added
    to ``conns``, on in the intervals of ``bg_on`` (steps, sources)."""
    world = core.world
    fabric = world.fabric
    sim = world.sim
    assert sim is not None
    backgrounds: list[BackgroundPlan] = []
    for i in range(bg_on.shape[1]):
        u = int(world.bg_unit[0, i])
        lo, n = int(sim.conn_off[u]), int(sim.unit_nconns[u])
        ids = list(range(lo, lo + n))
        unit = sim.flat_units[u]  # a background unit: flow i is connection i, its demand the rate cap
        for c in ids:
            s, d = int(sim.conn_src[c]), int(sim.conn_dst[c])
            conns[c] = Conn(s, d, fabric.paths(s, d), ecmp_set_size(fabric, s, d))
        rates = [float(x) for x in unit.flow_demand_bytes_per_s[:n]]
        backgrounds.append(BackgroundPlan(unit.name, ids, rates, bg_on[:, i].copy()))
    return backgrounds


def _timed_replays(core: Any, seed: int, rec: _Recorded, cfg: CrosscheckConfig) -> tuple[float, float]:
    """Median wall and CPU time of the fluid span. The span takes about a millisecond, so one measurement
    is at the mercy of the scheduler on a shared machine: time ``cfg.fluid_repeats`` replays of the same
    span (same seed, the recorded splits) and keep the median (the recorded run's time if there are none);
    every replay must reproduce the recorded iterations."""
    walls, cpus = [rec.wall_s], [rec.cpu_s]
    for _ in range(cfg.fluid_repeats):
        core.reset([seed])
        again = np.zeros_like(rec.iterations)
        t0, c0 = time.perf_counter(), time.process_time()
        for split in rec.splits:
            core.step_split(split)
            again += core.last_result.iterations[0]
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        if not np.array_equal(again, rec.iterations):
            raise RuntimeError(
                f"a replay of the fluid span completed {again} iterations, the run {rec.iterations}"
            )
    timed = slice(1, None) if cfg.fluid_repeats > 0 else slice(None)
    return float(np.median(walls[timed])), float(np.median(cpus[timed]))


def run_fluid(sc: Scenario, policy: str, seed: int, steps: int, cfg: CrosscheckConfig) -> FluidRun:
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
    rec = _record(core, agent, obs, steps, len(sc.background), cfg)
    conns, jobs = _job_plans(sc, core)
    backgrounds = _background_plans(core, rec.bg_on, conns)
    world = core.world
    alive = [j for j in range(world.n_job_slots) if world.state.jobs[0][j] is not None]
    wall_s, cpu_s = _timed_replays(core, seed, rec, cfg)
    return FluidRun(
        fabric=world.fabric,
        interval_s=world.decision_interval_s,
        splits=rec.splits,
        conns=conns,
        jobs=jobs,
        backgrounds=backgrounds,
        link_factor=rec.link_factor,
        iterations=rec.iterations[alive],
        comm_sum_s=rec.comm_sum_s[alive],
        step_sum_s=rec.step_sum_s[alive],
        step_iterations=rec.step_iterations[:, alive],
        step_comm_sum_s=rec.step_comm_sum_s[:, alive],
        step_step_sum_s=rec.step_step_sum_s[:, alive],
        link_bytes=rec.link_bytes,
        iteration_log=[_log_of(rec, j) for j in alive],
        wall_s=wall_s,
        cpu_s=cpu_s,
        first_wall_s=rec.wall_s,
        reroute=sc.routing.reroute,
    )


def estimated_bytes(run: FluidRun) -> float:
    """Bytes the ns-3 run will carry: each job's bytes per iteration times the iterations the fluid model
    completed, plus one, and each background source's rate over the intervals it is on."""
    total = 0.0
    for jp, it in zip(run.jobs, run.iterations):
        per_iter = sum(t[1] for ph in jp.phases for fl in ph for t in fl)
        total += per_iter * (int(it) + 1)
    for bg in run.backgrounds:
        total += sum(bg.rate_bytes_per_s) * run.interval_s * int(bg.on.sum())
    return total
