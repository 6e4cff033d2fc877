"""The shipped scenario library (scenarios/*.yaml).

Every shipped scenario loads, runs a few intervals under static ECMP and produces finite results (the two
large-scale ones are only validated and built: simulating them belongs to the benchmark). Each family's
claim, as written in the scenario's header comment, is a test. A broken copy of every scenario (a typo in a
key, a wrong unit, a placement that does not fit, a negative size) fails with a ScenarioError that names
the file and the field.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import yaml

from ainet_gym import ScenarioError, load_scenario, simulate
from ainet_gym.fabric.topology import TIERS, build_fabric
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario.loader import fabric_gpu_count
from ainet_gym.sim.world import FabricWorld

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"
ALL = sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))
LARGE = (
    "large-scale-4k",
    "large-scale-16k",
    *(f"moe-3d-{n}-{t}" for n in ("1024", "16k") for t in ("spine-leaf", "rail")),
)
SMALL = [n for n in ALL if n not in LARGE]

FAMILIES = [
    *("oversub-1to1", "oversub-2to1", "oversub-3to1", "oversub-7to1"),
    *("ecmp-collisions-qp1", "ecmp-collisions-qp4"),
    *("fat-tree-k8-stride", "fat-tree-k16-stride", "fat-tree-k8-data-parallel", "fat-tree-k16-data-parallel"),
    *("rail-optimized-hierarchical", "rail-optimized-flat-ring"),
    *("profile-infiniband", "profile-roce"),
    "multi-tenant-churn",
    *("link-failure", "degraded-link"),
    "storage-checkpoint",
    "moe-alltoall-skewed",
    *("large-scale-4k", "large-scale-16k"),
    "periodic-interference",
]


def path(name: str) -> Path:
    return SCENARIO_DIR / f"{name}.yaml"


def raw(name: str) -> dict:
    """The YAML mapping of a shipped scenario (a fresh copy)."""
    return copy.deepcopy(load_scenario(path(name)).raw)


def without(d: dict, *keys: str) -> dict:
    """``d`` without its name, description and the dotted ``keys`` (to compare the files of a family)."""
    for key in ("name", "description", *keys):
        *parents, last = key.split(".")
        cur = d
        for k in parents:
            cur = cur[k]
        cur.pop(last)
    return d


@cache
def run(name: str, policy: str = "ecmp", steps: int = 8, seed: int = 0) -> dict:
    """simulate() of a shipped scenario, cached across the tests of one worker."""
    return simulate(path(name), policy=policy, steps=steps, seed=seed)


def job_series(out: dict, key: str) -> dict[str, np.ndarray]:
    """Per-job series over the intervals of a simulate() result (NaN where None)."""
    res: dict[str, list[float]] = {}
    for st in out["steps"]:
        for j in st["jobs"]:
            v = j[key]
            res.setdefault(j["name"], []).append(np.nan if v is None else float(v))
    return {k: np.asarray(v) for k, v in res.items()}


def mean_step_ms(out: dict) -> dict[str, float]:
    """Mean step time per job over all iterations completed in the run (weighted by iterations)."""
    st = job_series(out, "step_time_ms")
    it = job_series(out, "iterations_completed")
    return {k: float(np.nansum(st[k] * it[k]) / it[k].sum()) if it[k].sum() else math.nan for k in st}


def mean_util(out: dict) -> float:
    """Mean GPU utilisation over all jobs and intervals."""
    u = job_series(out, "gpu_utilization")
    return float(np.nanmean(np.concatenate(list(u.values()))))


def world_run(name: str, policy: str, steps: int, seed: int = 0, scenario=None):
    """Step a one-instance FabricWorld under an engine policy; yields (world, step index, StepResult)."""
    world = FabricWorld(load_scenario(scenario if scenario is not None else path(name)), batch=1)
    world.reset(seeds=[seed])
    pol = get_policy(policy)
    last = None
    for i in range(steps):
        last = world.step(pol(world, last))
        yield world, i, last


# --------------------------------------------------------------------------- the library itself


def test_every_family_is_shipped():
    assert set(FAMILIES) <= set(ALL), sorted(set(FAMILIES) - set(ALL))


@pytest.mark.parametrize("name", ALL)
def test_file_name_header_and_description(name):
    text = path(name).read_text(encoding="utf-8")
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name), "file names are kebab-case"
    sc = load_scenario(path(name))
    assert sc.name == name
    assert sc.description.strip()
    header = "\n".join(ln for ln in text.splitlines() if ln.startswith("#"))
    assert text.startswith(f"# {name}:")
    for part in ("What it models", "What static ECMP does", "What a good policy does", "Numbers"):
        assert part in header, f"{name}: header lacks {part!r}"


@pytest.mark.parametrize("name", SMALL)
def test_every_scenario_runs_under_ecmp(name):
    out = run(name, "ecmp", 4)
    assert len(out["steps"]) == 4
    assert out["decision_interval_ms"] > 0
    iterations = 0
    for t, st in enumerate(out["steps"]):
        assert 0.0 <= st["max_link_utilization"] <= 1.0 + 1e-6
        assert all(math.isfinite(v) and v >= 0 for v in st["tier_bytes"].values())
        # a job may start up to its start jitter late (the MoE family: up to 500 ms, more than one interval),
        # so the first interval can be idle; from the second on, the NICs carry traffic
        assert st["tier_bytes"]["nic"] > 0 or t == 0
        for j in st["jobs"]:
            iterations += j["iterations_completed"]
            for key in ("step_time_ms", "comm_time_ms", "ideal_step_time_ms", "gpu_utilization"):
                v = j[key]
                assert v is None or math.isfinite(v), (j["name"], key, v)
            if j["gpu_utilization"] is not None:
                assert 0.0 <= j["gpu_utilization"] <= 1.0 + 1e-9
            if j["step_time_ms"] is not None:
                assert j["step_time_ms"] >= j["ideal_step_time_ms"] * (1 - 1e-9) > 0
    assert iterations > 0


@pytest.mark.parametrize("name", LARGE)
def test_large_scenarios_load_and_build(name):
    sc = load_scenario(path(name))
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    expected = {"large-scale-4k": 4096, "large-scale-16k": 16384, "1024": 1024, "16k": 16384}
    expected = expected.get(name, expected.get(name.split("-")[2]))
    assert fabric.n_gpus == fabric_gpu_count(sc.fabric) == expected
    assert sum(j.gpus for j in sc.jobs) == expected
    if name.startswith("large-scale"):
        assert fabric.oversubscription() == pytest.approx(1.0)
    # every job's hosts are whole hosts (hierarchical AllReduce needs them)
    assert all(j.gpus % sc.fabric.gpus_per_host == 0 for j in sc.jobs)


# --------------------------------------------------------------------------- 1. oversubscription sweep

RATIOS = (1, 2, 3, 7)


def test_oversubscription_sweep_differs_only_in_uplink_speed():
    base = without(raw("oversub-1to1"), "fabric.uplink_gbps")
    for r in RATIOS:
        sc = load_scenario(path(f"oversub-{r}to1"))
        assert build_fabric(sc.fabric).oversubscription() == pytest.approx(r, rel=1e-4)
        assert without(raw(f"oversub-{r}to1"), "fabric.uplink_gbps") == base


def test_step_time_rises_with_oversubscription_for_cross_leaf_jobs_only():
    ecmp = {r: mean_step_ms(run(f"oversub-{r}to1", "ecmp", 12)) for r in RATIOS}
    spray = {r: mean_step_ms(run(f"oversub-{r}to1", "spray", 12)) for r in RATIOS}
    for job in ("cross-x", "cross-y"):
        series = [ecmp[r][job] for r in RATIOS]
        assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(series)), series
        assert series[-1] > 1.3 * series[0]
        # balanced routing: on the plateau (compute time, communication hidden) at 1:1 and 2:1, off it at 7:1
        compute = {"cross-x": 100.0, "cross-y": 130.0}[job]
        assert spray[1][job] == pytest.approx(compute, rel=1e-3)
        assert spray[2][job] == pytest.approx(compute, rel=1e-3)
        assert spray[7][job] > 1.03 * compute
    for job in ("local-a", "local-b"):
        assert len({round(ecmp[r][job], 6) for r in RATIOS}) == 1, [ecmp[r][job] for r in RATIOS]


# --------------------------------------------------------------------------- 2. ECMP collisions, QP scaling


def test_ecmp_collision_pair_differs_only_in_qps():
    a, b = raw("ecmp-collisions-qp1"), raw("ecmp-collisions-qp4")
    assert (a["routing"]["qps_per_connection"], b["routing"]["qps_per_connection"]) == (1, 4)
    assert without(a, "routing.qps_per_connection") == without(b, "routing.qps_per_connection")


def test_qp_scaling_lowers_collision_loss():
    seeds = range(6)

    def comm(name, policy, seed):
        return float(np.nanmean(job_series(run(name, policy, 4, seed), "comm_time_ms")["dp-64"][1:]))

    ideal = comm("ecmp-collisions-qp1", "spray", 0)  # non-blocking fabric: spraying is collision-free
    out = run("ecmp-collisions-qp1", "spray", 4, 0)
    ideal_step = out["steps"][0]["jobs"][0]["ideal_step_time_ms"]
    assert mean_step_ms(out)["dp-64"] == pytest.approx(ideal_step, rel=1e-3)
    loss1 = np.mean([comm("ecmp-collisions-qp1", "ecmp", s) for s in seeds]) / ideal
    loss4 = np.mean([comm("ecmp-collisions-qp4", "ecmp", s) for s in seeds]) / ideal
    assert loss1 > 1.5  # 8 elephants in 8 bins: the fullest uplink carries 2-3
    assert 1.0 < loss4 < loss1 - 0.2


# --------------------------------------------------------------------------- 3. fat-tree


@pytest.mark.parametrize("k", [8, 16])
def test_fat_tree_counts(k):
    sc = load_scenario(path(f"fat-tree-k{k}-stride"))
    f = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    kinds = np.asarray(f.node_kind)
    assert f.n_gpus == k**3 // 4
    assert (kinds == "core").sum() == (k // 2) ** 2
    assert (kinds == "agg").sum() == (kinds == "edge").sum() == k * k // 2
    # stride(pod size): every flow crosses pods, with (k/2)^2 equal-cost paths, all of them candidates
    shift = int(sc.jobs[0].collectives[0].pattern.split(":")[1])
    assert shift == k**2 // 4
    assert len(f.paths(0, shift)) == (k // 2) ** 2 == sc.routing.max_paths


@pytest.mark.parametrize("k,steps", [(8, 4), (16, 4)])
def test_fat_tree_stride_ecmp_far_below_bisection(k, steps):
    name = f"fat-tree-k{k}-stride"
    job = f"stride-{k**2 // 4}"
    ecmp, spray = run(name, "ecmp", steps), run(name, "spray", steps)
    ideal = ecmp["steps"][0]["jobs"][0]["ideal_step_time_ms"]
    assert mean_step_ms(spray)[job] == pytest.approx(ideal, rel=1e-3)  # full bisection
    assert mean_step_ms(ecmp)[job] > 1.5 * ideal
    # all the traffic crosses the core
    tb = ecmp["steps"][-1]["tier_bytes"]
    assert tb["agg_core"] == pytest.approx(tb["nic"], rel=1e-6)


def test_fat_tree_data_parallel_jobs_cross_pods():
    sc = load_scenario(path("fat-tree-k8-data-parallel"))
    f = build_fabric(sc.fabric)
    pods = f.endpoint_leaf // (sc.fabric.k // 2)
    for job in sc.jobs:  # one host in each of the 8 pods
        assert sorted(set(pods[list(job.placement)].tolist())) == list(range(sc.fabric.k))
    ecmp, spray = run("fat-tree-k8-data-parallel", "ecmp", 8), run("fat-tree-k8-data-parallel", "spray", 8)
    assert ecmp["steps"][-1]["tier_bytes"]["agg_core"] > 0
    e, s = mean_step_ms(ecmp), mean_step_ms(spray)
    ideal = {j["name"]: j["ideal_step_time_ms"] for j in spray["steps"][0]["jobs"]}
    assert all(s[j] == pytest.approx(ideal[j], rel=1e-3) for j in s)
    assert max(e[j] / s[j] for j in s) > 1.1


def test_fat_tree_k16_data_parallel_runs_ecmp_vs_spray():
    e = mean_step_ms(run("fat-tree-k16-data-parallel", "ecmp", 2))
    s = mean_step_ms(run("fat-tree-k16-data-parallel", "spray", 2))
    assert all(e[j] >= s[j] * (1 - 1e-9) for j in s)
    assert max(e[j] / s[j] for j in s) > 1.1


# --------------------------------------------------------------------------- 4. rail-optimised


def test_rail_pair_differs_only_in_algorithm():
    a, b = raw("rail-optimized-hierarchical"), raw("rail-optimized-flat-ring")
    assert {j["collectives"][0]["algorithm"] for j in a["workload"]["jobs"]} == {"hierarchical"}
    assert {j["collectives"][0]["algorithm"] for j in b["workload"]["jobs"]} == {"ring"}
    for d in (a, b):
        for j in d["workload"]["jobs"]:
            j["collectives"][0].pop("algorithm")
    assert without(a) == without(b)


@pytest.mark.parametrize("policy", ["ecmp", "spray"])
def test_rail_aligned_hierarchical_allreduce_puts_zero_bytes_on_spines(policy):
    out = run("rail-optimized-hierarchical", policy, 6)
    for st in out["steps"]:
        assert st["tier_bytes"]["rail_spine"] == 0.0
        assert st["tier_bytes"]["nic"] > 0
    ideal = {j["name"]: j["ideal_step_time_ms"] for j in out["steps"][0]["jobs"]}
    assert all(v == pytest.approx(ideal[k], rel=1e-6) for k, v in mean_step_ms(out).items())


def test_flat_ring_crosses_rails_through_leaf7_up_and_leaf0_down():
    spine_tier = TIERS.index("rail_spine")
    hier = mean_step_ms(run("rail-optimized-hierarchical", "ecmp", 6))
    for world, _i, res in world_run("rail-optimized-flat-ring", "ecmp", 6):
        f = world.fabric
        used = np.flatnonzero((f.link_tier == spine_tier) & (res.link_bytes[0] > 0))
        assert used.size > 0
        for lk in used:
            src, dst = f.node_names[f.link_src[lk]], f.node_names[f.link_dst[lk]]
            assert src == "leaf7" or dst == "leaf0", (src, dst)
    flat = mean_step_ms(run("rail-optimized-flat-ring", "ecmp", 6))
    assert all(flat[j] > 1.5 * hier[j] for j in hier)


# --------------------------------------------------------------------------- 5. RoCE vs InfiniBand


def test_profile_pair_differs_only_in_profile_parameters():
    a, b = raw("profile-infiniband"), raw("profile-roce")
    assert (a["fabric"]["profile"], b["fabric"]["profile"]) == ("infiniband", "roce")
    assert without(a, "fabric.profile") == without(b, "fabric.profile")
    fa = load_scenario(path("profile-infiniband")).fabric
    fb = load_scenario(path("profile-roce")).fabric
    differ = {k for k in fa.__dataclass_fields__ if getattr(fa, k) != getattr(fb, k)}
    assert differ == {"profile", "hop_latency_us", "link_efficiency"}
    # the profiles' numbers as docs/model.md's table of constants publishes them
    assert (fa.hop_latency_us, fa.link_efficiency) == (0.25, 1.0)
    assert (fb.hop_latency_us, fb.link_efficiency) == (0.8, 0.95)


def test_roce_is_slower_than_infiniband_and_hurts_small_messages_most():
    ib, roce = run("profile-infiniband", "ecmp", 3), run("profile-roce", "ecmp", 3)
    st_ib, st_roce = mean_step_ms(ib), mean_step_ms(roce)
    assert all(st_roce[j] > st_ib[j] for j in st_ib)
    c_ib = {k: np.nanmean(v) for k, v in job_series(ib, "comm_time_ms").items()}
    c_roce = {k: np.nanmean(v) for k, v in job_series(roce, "comm_time_ms").items()}
    bulk, small = c_roce["dp-bulk"] / c_ib["dp-bulk"], c_roce["dp-buckets"] / c_ib["dp-buckets"]
    # bandwidth-bound: the efficiency factor (measured 3.3e-3 off, the latency's share; 2026-12-05)
    assert bulk == pytest.approx(1 / 0.95, rel=7e-3)
    assert small > 1.3 > bulk  # latency-bound: 3.2x the per-hop latency


# --------------------------------------------------------------------------- 6. multi-tenant churn


def test_churn_jobs_arrive_leave_and_fragment():
    arrivals = departures = fragmented = 0
    sizes: set[int] = set()
    for seed in range(4):
        prev: set[str] = set()
        seen: set[str] = set()
        for world, _i, res in world_run("multi-tenant-churn", "ecmp", 64, seed):
            assert np.isfinite(res.max_link_utilization).all()
            names = world.job_names(0)
            cur = {n for n in names if n is not None}
            departures += len(prev - cur)
            prev = cur
            assert {"tenant-a", "tenant-b"} <= cur  # the initial tenants never leave
            used = np.concatenate([g for g in world.state.gpus[0] if g is not None])
            assert np.unique(used).size == used.size  # jobs never share GPUs
            for j, n in enumerate(names):
                if n is None or n in seen or "@" not in n:
                    continue
                seen.add(n)
                g = world.state.gpus[0][j]
                arrivals += 1
                sizes.add(len(g))
                fragmented += not bool(np.all(np.diff(g) == 1))
    assert arrivals >= 20 and departures >= 10
    assert len(sizes) >= 4  # jobs of different sizes
    assert fragmented >= 1  # first fit failed and the job got scraps


# --------------------------------------------------------------------------- 7. failures


@pytest.mark.parametrize("policy", ["ecmp", "spray", "wcmp", "lp"])
def test_failed_link_carries_no_traffic_while_down(policy):
    up_bytes = []
    for world, i, res in world_run("link-failure", policy, 28):
        ids = world.fabric.link_ids("leaf0-spine1")
        b = res.link_bytes[0, ids]
        if 8 <= i < 24:
            assert (b == 0).all(), (i, b)
            assert (
                world.sim.engine_state.capacity_bytes_per_s[0, ids] == 0
            ).all() or i == 23  # repaired for interval 24
            assert res.stalled_transfers[0] == 0  # every policy routes around the dead link
        else:
            up_bytes.append(b.sum())
    if policy == "spray":  # spraying uses every path whenever it is up
        assert all(x > 0 for x in up_bytes)


def test_failed_links_in_the_record_match_the_interval():
    out = run("link-failure", "ecmp", 28)
    assert [s["failed_links"] for s in out["steps"]] == [2 if 8 <= i < 24 else 0 for i in range(28)]


def test_degraded_link_never_exceeds_half_rate_and_capacity_aware_routing_wins():
    for policy in ("ecmp", "spray"):
        for world, _i, res in world_run("degraded-link", policy, 12):
            ids = world.fabric.link_ids("leaf0-spine1")
            nominal = world.fabric.capacity_bytes_per_s[ids]
            assert np.allclose(world.sim.engine_state.capacity_bytes_per_s[0, ids], 0.5 * nominal)
            assert (res.link_bytes[0, ids] <= 0.5 * nominal * res.duration_s[0] * (1 + 1e-9)).all()
    assert mean_util(run("degraded-link", "wcmp", 16)) > mean_util(run("degraded-link", "ecmp", 16)) + 0.05


# --------------------------------------------------------------------------- 8. storage and checkpoints


def test_checkpoint_bursts_are_periodic_and_slow_training():
    sc = load_scenario(path("storage-checkpoint"))
    ingest, ckpt = sc.background
    out = run("storage-checkpoint", "ecmp", 30)
    dur = out["decision_interval_ms"] * 1e-3
    burst = np.array(
        [i >= ckpt.offset_steps and (i - ckpt.offset_steps) % ckpt.period_steps < 2 for i in range(30)]
    )
    storage = np.array([s["tier_bytes"]["storage"] for s in out["steps"]])
    expected = (ingest.gbps + ckpt.gbps * burst) * 1e9 / 8 * dur
    assert storage == pytest.approx(expected, rel=1e-12)  # background at its rate: round-off (4e-16 measured)
    util = job_series(out, "gpu_utilization")
    for job in ("llm-a", "llm-b"):
        assert np.nanmean(util[job][burst]) < np.nanmean(util[job][~burst]) - 0.03


# --------------------------------------------------------------------------- 9. mixture of experts


def test_moe_hot_expert_is_skewed_and_drifts_to_the_next_leaf():
    sc = load_scenario(path("moe-alltoall-skewed"))
    moe = np.asarray(sc.jobs[0].placement)
    period = sc.jobs[0].collectives[0].skew_period_steps
    hot = []
    for world, _i, res in world_run("moe-alltoall-skewed", "ecmp", 2 * period):
        into = res.link_bytes[0, world.fabric.endpoint_down[moe]]  # bytes into each expert's NIC
        assert into.max() > 2 * np.median(into)
        hot.append(int(moe[np.argmax(into)]))
    leaf = build_fabric(sc.fabric).endpoint_leaf
    assert len(set(hot[:period])) == 1 and len(set(hot[period:])) == 1
    assert hot[0] == moe[0] and hot[-1] == moe[1]  # rank 0 is hot, then rank 1
    assert leaf[hot[0]] != leaf[hot[-1]]


# --------------------------------------------------------------------------- periodic interference (agents)


def test_periodic_interference_is_small_cheap_and_predictable():
    sc = load_scenario(path("periodic-interference"))
    f = build_fabric(sc.fabric)
    assert 32 <= f.n_gpus <= 64 and 32 <= sc.dynamics.episode_steps <= 64
    assert f.oversubscription() == pytest.approx(2.0)
    assert len({j.compute_ms for j in sc.jobs}) == len(sc.jobs) >= 2
    (bg,) = sc.background
    assert bg.pattern == "periodic"
    (sf,) = sc.dynamics.link_failures.scheduled
    assert (sf.at_step, sf.until_step, sf.factor) == (0, None, 0.5)
    out = run("periodic-interference", "ecmp", 24)
    storage = [s["tier_bytes"]["storage"] > 0 for s in out["steps"]]
    assert storage == [
        (i - bg.offset_steps) % bg.period_steps < bg.duration_steps and i >= bg.offset_steps
        for i in range(24)
    ]
    # cheap: a generous bound (measured ~1.5-2 ms per interval on one core)
    t = time.perf_counter()
    simulate(path("periodic-interference"), policy="ecmp", steps=50, seed=1)
    assert (time.perf_counter() - t) / 50 < 0.025


def test_periodic_interference_static_ecmp_loses_clearly():
    u = {
        p: np.mean([mean_util(run("periodic-interference", p, 48, s)) for s in (0, 1)])
        for p in ("ecmp", "spray", "lp")
    }
    assert u["ecmp"] < 0.9 * u["spray"]
    assert u["ecmp"] < 0.9 * u["lp"]


# --------------------------------------------------------------------------- broken copies


def _speed_key(d: dict) -> str:
    return "link_gbps" if d["fabric"]["topology"] == "fat_tree" else "nic_gbps"


def _typo(d):
    job = d["workload"]["jobs"][0]
    job["colectives"] = job.pop("collectives")
    return "workload.jobs[0].colectives", "did you mean 'collectives'?"


def _unit(d):
    key = _speed_key(d)
    d["fabric"][key] = f"{d['fabric'].get(key, 400)}Gbps"
    return f"fabric.{key}", "Gbit/s"


def _too_big(d):
    n = fabric_gpu_count(load_scenario(d).fabric)
    job = d["workload"]["jobs"][0]
    job["gpus"] = n + 8
    return "workload.jobs[0].gpus", f"1..{n}"


def _negative(d):
    d["workload"]["jobs"][0]["collectives"][0]["bytes"] = -1.0e9
    return "workload.jobs[0].collectives[0].bytes", "a number in (0, 1000000000000000]"


def _explicit_off_fabric(d):
    n = fabric_gpu_count(load_scenario(d).fabric)
    i, job = next((i, j) for i, j in enumerate(d["workload"]["jobs"]) if isinstance(j.get("placement"), list))
    job["placement"][-1] = n
    return f"workload.jobs[{i}].placement[{len(job['placement']) - 1}]", f"0..{n - 1}"


BREAKERS = {
    "key-typo": _typo,
    "wrong-unit": _unit,
    "placement-does-not-fit": _too_big,
    "negative-size": _negative,
}
# scenarios with an explicit placement also get a GPU id that is not on the fabric
EXPLICIT = [n for n in ALL if any(isinstance(j.get("placement"), list) for j in raw(n)["workload"]["jobs"])]
CASES = [(n, b) for n in ALL for b in BREAKERS] + [(n, "explicit-gpu-off-fabric") for n in EXPLICIT]
BREAKERS["explicit-gpu-off-fabric"] = _explicit_off_fabric


@pytest.mark.parametrize("name,breaker", CASES)
def test_broken_copy_fails_naming_the_field(name, breaker, tmp_path):
    d = raw(name)
    field, allowed = BREAKERS[breaker](d)
    broken = tmp_path / f"{name}.yaml"
    broken.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenario(broken)
    err = info.value
    assert err.field == field
    assert err.source == str(broken)
    assert field in str(err) and str(broken) in str(err) and allowed in str(err)


def test_agent_wcmp_weights_never_send_on_a_failed_link():
    # a switch drops a failed port from its WCMP group whatever weight it was given: random ecmp_weights
    # actions (weight > 0 on the dead uplink too) move no byte over it and stall no transfer
    from ainet_gym.envs.env import EnvCore

    core = EnvCore("link-failure", action_mode="ecmp_weights")
    core.reset([0])
    rng = np.random.default_rng(0)
    ids = core.world.fabric.link_ids("leaf0-spine1")
    for i in range(24):
        a = rng.uniform(-0.5, 1.0, size=(1, *core.action_space.shape)).astype(np.float32)
        core.step(a)
        res = core.last_result
        if 8 <= i < 23:
            assert (res.link_bytes[0, ids] == 0).all(), i
            assert res.stalled_transfers[0] == 0, i


# --------------------------------------------------------------------------- unequal jobs (learning headroom)


def test_unequal_jobs_one_comm_bound_one_compute_bound_and_a_steady_checkpoint():
    sc = load_scenario(path("unequal-jobs-jitter"))
    f = build_fabric(sc.fabric)
    assert f.n_gpus == 64 and f.oversubscription() == pytest.approx(2.0)
    # ideal ring times by hand: 2 (p-1)/p S / 50 GB/s
    world = FabricWorld(sc, batch=1)
    world.reset(seeds=[1])
    names = [j.name for j in sc.jobs]
    comm = dict(zip(names, world.job_ideal_comm_s[0, : len(names)]))
    assert comm["big"] == pytest.approx(
        2 * 31 / 32 * 1e9 / 50e9, rel=2e-3
    )  # 38.75 ms: about its 40 ms compute (the ring's latency: 8e-4 measured, 2026-12-05)
    assert comm["small"] == pytest.approx(2 * 31 / 32 * 1e8 / 50e9, rel=0.016)  # 3.9 ms against 200 ms (8e-3)
    # the checkpoint writes at the storage rack's line rate in every interval, whatever the jobs do
    (bg,) = sc.background
    assert (bg.kind, bg.pattern, bg.job) == ("checkpoint", "constant", "small")
    out = run("unequal-jobs-jitter", "spray+bg", 8)
    dur = out["decision_interval_ms"] * 1e-3
    storage = np.array([s["tier_bytes"]["storage"] for s in out["steps"]])
    # the checkpoint at its line rate: round-off (2e-16 measured, 2026-12-05)
    assert storage == pytest.approx(np.full(8, bg.gbps * 1e9 / 8 * dur), rel=1e-12)
