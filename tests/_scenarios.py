"""Small scenario dicts shared by the env and agent tests, and the rollouts and splits several test files run
on them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: 400G NICs and spine uplinks, one uplink per spine, no hop latency: a flow alone runs at 50 GB/s, so
#: the closed forms of the tests are bytes / 5e10
LOSSLESS_400G: dict = {"links_per_spine": 1, "nic_gbps": 400.0, "uplink_gbps": 400.0, "hop_latency_us": 0.0}


def spine_leaf_fabric(
    leaves: int, spines: int, hosts_per_leaf: int, gpus_per_host: int = 1, **extra: object
) -> dict:
    """The ``fabric`` section of a spine-leaf scenario (the loader's defaults where not given)."""
    return {
        "topology": "spine_leaf",
        "leaves": leaves,
        "spines": spines,
        "hosts_per_leaf": hosts_per_leaf,
        "gpus_per_host": gpus_per_host,
        **extra,
    }


def two_ring_jobs(b_gpus: int = 4) -> list[dict]:
    """Job a: 8 GPUs spread over the leaves; job b: ``b_gpus`` GPUs placed at random; ring AllReduce."""
    return [
        {
            "name": "a",
            "gpus": 8,
            "placement": "spread",
            "compute_ms": 20,
            "collectives": [{"op": "allreduce", "bytes": 2.0e8}],
        },
        {
            "name": "b",
            "gpus": b_gpus,
            "placement": "random",
            "compute_ms": 30,
            "collectives": [{"op": "allreduce", "bytes": 1.0e8}],
        },
    ]


def small_spine_leaf(episode_steps: int = 12, name: str = "small", **dynamics: object) -> dict:
    """16 GPUs on 4 leaves x 2 spines (2:1), two ring jobs, a periodic storage background."""
    return {
        "name": name,
        "description": "test fabric",
        "fabric": spine_leaf_fabric(
            4, 2, 2, 2, nic_gbps=400, uplink_gbps=400, storage={"hosts": 1, "gbps": 400}
        ),
        "workload": {
            "jobs": two_ring_jobs(),
            "background": [{"kind": "storage", "gbps": 200, "pattern": "periodic", "period_steps": 3}],
        },
        "dynamics": {"episode_steps": episode_steps, **dynamics},
        "routing": {"max_paths": 4},
    }


def churn_dynamics(arrival_rate: float, mean_steps: int) -> dict:
    """The ``dynamics`` of a changing :func:`small_spine_leaf`: random link failures (0.3 a step, repaired
    after 3 steps) and job churn (``arrival_rate`` jobs a step, ``mean_steps`` steps long, at most 4 jobs) of
    two templates, a 4-GPU AllReduce and a 2-GPU AllGather of 50 MB."""
    return {
        "link_failures": {"rate_per_step": 0.3, "repair_steps": 3},
        "job_churn": {
            "arrival_rate": arrival_rate,
            "mean_steps": mean_steps,
            "max_jobs": 4,
            "templates": [
                {
                    "name": "t1",
                    "gpus": 4,
                    "compute_ms": 10,
                    "collectives": [{"op": "allreduce", "bytes": 5e7}],
                },
                {
                    "name": "t2",
                    "gpus": 2,
                    "compute_ms": 15,
                    "collectives": [{"op": "allgather", "bytes": 5e7}],
                },
            ],
        },
    }


def collision_scenario() -> dict:
    """Two leaves joined by two spines (one 400G uplink each) and two 2-GPU jobs whose rings each send
    one 400G connection from leaf 0 to leaf 1 and back: on one spine they collide (half rate)."""
    job = {
        "gpus": 2,
        "compute_ms": 10,
        "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": 4e8}],
    }
    return {
        "name": "collision",
        "fabric": spine_leaf_fabric(2, 2, 2, hop_latency_us=0.0),
        "workload": {
            "jobs": [{**job, "name": "a", "placement": [0, 2]}, {**job, "name": "b", "placement": [1, 3]}]
        },
        "dynamics": {"episode_steps": 4, "decision_interval_ms": 30},
        "routing": {"max_paths": 2},
    }


def two_path_exchange(name: str, failure: dict, routing: dict | None = None, nbytes: float = 20e6) -> dict:
    """Two GPUs on two leaves joined by two spines (10 Gb/s everywhere, no latency, efficiency 1) exchange
    ``nbytes`` (sendrecv shift:1) after 5 ms of compute, every 15 ms interval, for 4 intervals; ``failure``,
    one scheduled link failure (e.g. leaf0-spine0 at a factor of its rate), makes one of the two paths slow."""
    sc = {
        "name": name,
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 1,
                   "gpus_per_host": 1, "nic_gbps": 10, "uplink_gbps": 10, "hop_latency_us": 0.0,
                   "link_efficiency": 1.0},
        "workload": {"jobs": [{"name": "x", "gpus": 2, "compute_ms": 5.0,
                               "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": nbytes}]}]},
        "dynamics": {"episode_steps": 4, "decision_interval_ms": 15.0,
                     "link_failures": {"scheduled": [failure]}},
    }  # fmt: skip
    if routing:
        sc["routing"] = routing
    return sc


def split_slow_or_even(core: object, slow_only: bool) -> np.ndarray:
    """A (connections, P) split for ``core`` (an EnvCore after reset): every connection on its paths through
    a link below full rate in instance 0 (``slow_only``), or evenly over its candidate paths."""
    sim = core.world.sim
    L = core.world.fabric.n_links
    slow = np.flatnonzero(core.world.links.cap_factor[0] < 1)
    split = np.zeros((sim.n_conns, core.P))
    for c in range(sim.n_conns):
        n = int(sim.conn_npaths[c])
        via = [bool(np.isin(sim.conn_paths[c, p] % L, slow).any()) for p in range(n)]
        split[c, :n] = np.asarray(via, float) if slow_only else 1.0 / n
    return split


def slow_then_even_rollout(sc: dict, backend: str, steps: int = 4) -> list[tuple[int, float]]:
    """Interval 0 with every connection on its paths through the slow link only (``split_slow_or_even``),
    then every connection evenly over its paths: per interval (iterations completed, mean communication
    time in ms or nan) of instance 0."""
    from ainet_gym.envs.env import EnvCore

    core = EnvCore(sc, batch=1, episode_steps=steps, backend=backend)
    core.reset([0])
    out = []
    for k in range(steps):
        core.step_split(split_slow_or_even(core, slow_only=k == 0))
        r = core.last_result
        out.append((int(r.iterations[0, 0]), float(r.comm_time_s[0, 0]) * 1e3))
    return out


def assert_restore_replays(scn: object, backend: str, policies: tuple[str, ...]) -> None:
    """Two intervals of ``scn`` (a Scenario) under ``policies[0:2]``, a snapshot, two more under
    ``policies[2:4]``; after a restore of the snapshot the same two intervals give the same communication
    times and link bytes, bit for bit."""
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.routing.policies import get_policy

    core = EnvCore(scn, backend=backend)
    core.reset([1])
    chosen = [get_policy(p) for p in policies]

    def steps(k0: int) -> np.ndarray:
        out = []
        for k in range(k0, k0 + 2):
            core.step_split(chosen[k](core.world, None))
            r = core.last_result
            out.append(np.concatenate([np.nan_to_num(r.comm_time_s).ravel(), r.link_bytes.ravel()]))
        return np.array(out)

    steps(0)
    snap = core.world.snapshot()
    a = steps(2)
    core.world.restore(snap)
    np.testing.assert_array_equal(steps(2), a)


def alternating_rollout(scn: object, batch: int, steps: int, backend: str) -> np.ndarray:
    """(steps, ...) each interval's communication times (nan as 0) and link bytes of ``scn`` (a Scenario)
    when the split changes at every boundary: spray, then the jobs' LP, and so on."""
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.routing.policies import get_policy

    core = EnvCore(scn, batch=batch, episode_steps=steps, backend=backend)
    core.reset(list(range(batch)))
    out = []
    for k in range(steps):
        core.step_split(get_policy("lp" if k % 2 else "spray")(core.world, None))
        r = core.last_result
        out.append(np.concatenate([np.nan_to_num(r.comm_time_s).ravel(), r.link_bytes.ravel()]))
    return np.array(out)


def _interval_gpu_utilization(utilization: object, gpus: object) -> float:
    """One interval's GPU-weighted mean utilisation of its running jobs (0 with none), from per-job figures."""
    u, g = np.asarray(utilization, dtype=float), np.asarray(gpus, dtype=float)
    ok = np.isfinite(u) & (g > 0)
    return float((u[ok] * g[ok]).sum() / g[ok].sum()) if ok.any() else 0.0


def simulated_gpu_utilization(scenario: object, policy: object, seed: int, steps: int) -> float:
    """An episode's mean GPU utilisation recomputed from ``ainet_gym.simulate``'s per-step JSON (one world,
    batch 1, ``policy`` an engine-level name or callable): each interval's GPU-weighted mean of its jobs'
    ``gpu_utilization``, then the mean over the intervals. The reference against which the tests check the
    per-policy figure of ``evaluate`` (batched episodes, its own summary)."""
    import ainet_gym

    out = ainet_gym.simulate(scenario, policy=policy, steps=steps, seed=seed)
    per = [
        _interval_gpu_utilization(
            [np.nan if j["gpu_utilization"] is None else j["gpu_utilization"] for j in s["jobs"]],
            [j["gpus"] for j in s["jobs"]],
        )
        for s in out["steps"]
    ]
    return float(np.mean(per))


def replayed_gpu_utilization(spec: str, scenario: object, seed: int, steps: int) -> float:
    """An episode's mean GPU utilisation of the agent ``spec`` (e.g. ``ppo:PATH``, ``pretrained``) replayed
    here on its own env (batch 1, seed ``seed``): each interval's GPU-weighted mean of the jobs' utilisation
    in the engine's result, then the mean over the intervals (the learned-policy counterpart of
    :func:`simulated_gpu_utilization`)."""
    import ainet_gym
    from ainet_gym.agents.registry import make_agent
    from ainet_gym.envs.env import EnvCore

    scn = ainet_gym.load_scenario(scenario)
    agent = make_agent(spec)
    if hasattr(agent, "bind"):
        agent.bind(scn)
    core = EnvCore(scn, batch=1, episode_steps=steps, **agent.env_kwargs)
    obs, _ = core.reset([seed])
    agent.check(core)
    agent.reset(core)
    per = []
    for _ in range(steps):
        a = agent.act(core, obs)
        obs = (core.step_split if agent.level == "engine" else core.step)(a)[0]
        r = core.last_result
        per.append(_interval_gpu_utilization(r.gpu_utilization[0], r.job_gpus[0]))
    return float(np.mean(per))


#: the burst schedule of :func:`bursty_spine_leaf`: on in the intervals t with (t - OFFSET) mod PERIOD < DURATION
BURST_PERIOD, BURST_DURATION, BURST_OFFSET = 4, 2, 1


def bursty_spine_leaf(steps: int = 10) -> dict:
    """The small spine-leaf with one periodic storage source at 400G (twice the shared file's, so the
    burst moves the LPs), no per-seed jitter: the schedule is the file's."""
    sc = small_spine_leaf(steps, name="bursty")
    sc["workload"]["background"] = [
        {"kind": "storage", "gbps": 400, "pattern": "periodic", "period_steps": BURST_PERIOD,
         "duration_steps": BURST_DURATION, "offset_steps": BURST_OFFSET},
    ]  # fmt: skip
    return sc


def burst_scheduled(t: int) -> bool:
    """Whether :func:`bursty_spine_leaf`'s schedule has the burst on in interval ``t`` (the spec's formula, by
    hand)."""
    return t >= BURST_OFFSET and (t - BURST_OFFSET) % BURST_PERIOD < BURST_DURATION


def four_spines_two_rings() -> dict:
    """4 leaves x 4 spines, 4 GPUs per leaf, 400G everywhere, no hop latency (1:1); two 8-GPU jobs spread
    2 GPUs per leaf, so each ring has 2 hops leaving every leaf: a: 20 ms compute, 2e8 B (per hop 3.5e8 B,
    7 ms at 50 GB/s, ideal 27 ms); b: 30 ms, 1e8 B (3.5 ms, ideal 33.5 ms). The isolating plans' tests."""
    job = {"placement": "spread", "gpus": 8}
    return {
        "name": "isolate-small",
        "fabric": spine_leaf_fabric(4, 4, 1, 4, **LOSSLESS_400G),
        "workload": {
            "jobs": [
                {**job, "name": "a", "compute_ms": 20, "collectives": [{"op": "allreduce", "bytes": 2.0e8}]},
                {**job, "name": "b", "compute_ms": 30, "collectives": [{"op": "allreduce", "bytes": 1.0e8}]},
            ]
        },
        "dynamics": {"episode_steps": 3},
        "routing": {"max_paths": 4},
    }


#: the bytes of one collective in the closed-form tests of shared NICs, rank order, graph fabrics and records
S = 1.0e9


def bps(gbps: float) -> float:
    """Bytes per second of a link of ``gbps`` Gb/s."""
    return gbps * 1e9 / 8.0


def one_job(fabric: dict, job: dict, interval_ms: float, latency_us: float = 0.0, **extra: object) -> dict:
    """A scenario of one job (1 ms compute, no overlap unless ``job`` says) on ``fabric``, hop latency
    ``latency_us``, decision interval ``interval_ms``; ``extra`` adds top-level sections."""
    return {
        "name": "breadth",
        "fabric": {"hop_latency_us": latency_us, **fabric},
        "workload": {"jobs": [{"name": "j", "compute_ms": 1.0, "overlap": 0.0, **job}]},
        "dynamics": {"decision_interval_ms": interval_ms},
        **extra,
    }


def one_job_on_a_switch(**fabric: object) -> dict:
    """:func:`one_job` of 2 GPUs on a single switch of 2 hosts x 4 GPUs, ``fabric`` keys added (the
    validation tests edit it)."""
    return one_job({"topology": "single_switch", "hosts": 2, "gpus_per_host": 4, **fabric}, {"gpus": 2}, 10.0)


def step_world(d: object, policy: str = "ecmp", steps: int = 1, seed: int = 0) -> tuple[object, object]:
    """A one-instance world of scenario ``d`` reset with ``seed`` and stepped ``steps`` intervals under the
    engine-level ``policy``: the world and its last interval's result."""
    from ainet_gym.routing.policies import get_policy
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    w = FabricWorld(load_scenario(d), batch=1)
    w.reset(seeds=[seed])
    res = None
    for _ in range(steps):
        res = w.step(get_policy(policy)(w, res))
    return w, res


def assert_close_nested(a: object, b: object, path: str = "") -> None:
    """Two JSON-like values equal: the same keys and lengths, floats to 1e-12 relative, the rest exactly."""
    import pytest

    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            assert_close_nested(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close_nested(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-300), path
    else:
        assert a == b, path


def as_graph_scenario(name: str, fabric: dict) -> dict:
    """Scenario ``name`` with its fabric replaced by a graph fabric (``fabric``: its ``file`` or ``graph``),
    keeping the profile, hop latency and link efficiency of the original."""
    import copy

    from ainet_gym.scenario.loader import load_scenario

    raw = copy.deepcopy(load_scenario(name).raw)
    keep = {
        k: raw["fabric"][k] for k in ("profile", "hop_latency_us", "link_efficiency") if k in raw["fabric"]
    }
    raw["fabric"] = {"topology": "graph", **fabric, **keep}
    return raw


# ------------------------------------------------- two fabrics of one scenario (the fabric fingerprint's tests)

#: a graph fabric of 4 GPUs (one per host), 2 leaves and 2 spines; the leaf-spine links 100G (2:1)
FP_GRAPH_EDGES = [
    *(f"node g{i} role=gpu host={i}" for i in range(4)),
    *(f"g{i} l{i // 2} gbps=200 tier=nic" for i in range(4)),
    *(f"l{a} s{b} gbps=100 tier=leaf_spine" for a in (0, 1) for b in (0, 1)),
]


def fp_graph_scenario(
    folder: Path, edges: list[str] = FP_GRAPH_EDGES, seed: int = 0, compute_ms: float = 20
) -> Path:
    """A YAML scenario ``fp-graph`` of two ring jobs on the graph fabric ``edges`` (written beside it as
    ``f.edges``), four steps an episode; returns its path."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "f.edges").write_text("# 2 leaves x 2 spines\n" + "\n".join(edges) + "\n")
    job = {"gpus": 2, "compute_ms": compute_ms, "collectives": [{"op": "allreduce", "bytes": 2.0e8}]}
    sc = {
        "name": "fp-graph",
        "seed": seed,
        "fabric": {"topology": "graph", "file": "f.edges"},
        "workload": {"jobs": [{"name": "a", "placement": "spread", **job}, {"name": "b", **job}]},
        "dynamics": {"episode_steps": 4},
    }
    (folder / "s.yaml").write_text(yaml.safe_dump(sc))
    return folder / "s.yaml"


def scenario_fingerprint(path: Path) -> str:
    """The fingerprint of the fabric the scenario file ``path`` builds."""
    from ainet_gym.fabric.topology import build_fabric, fabric_fingerprint
    from ainet_gym.scenario.loader import load_scenario

    sc = load_scenario(str(path))
    return fabric_fingerprint(build_fabric(sc.fabric, max_paths=sc.routing.max_paths))


def fp_graph_two_fabrics(folder: Path) -> tuple[Path, Path]:
    """The graph scenario ``fp-graph`` with its leaf-spine links at 50G (4:1: two 200G NICs a leaf over two
    uplinks) and a copy with them at 100G (2:1): the same name, nodes and spaces, another fabric."""
    four = fp_graph_scenario(
        folder / "4to1", edges=[e.replace("gbps=100", "gbps=50") for e in FP_GRAPH_EDGES]
    )
    return four, fp_graph_scenario(folder / "2to1")


def zip_without_fabric(src: Path, dst: Path) -> Path:
    """A copy of the model zip ``src`` at ``dst`` whose ``ainet_gym.json`` has no ``fabric`` key: a model saved
    before the fingerprint (which loads unchecked)."""
    import json
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            blob = zin.read(info.filename)
            if info.filename == "ainet_gym.json":
                blob = json.dumps({k: v for k, v in json.loads(blob).items() if k != "fabric"}).encode()
            zout.writestr(info.filename, blob)
    return dst
