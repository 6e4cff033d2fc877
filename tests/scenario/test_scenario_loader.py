"""Scenario loader: valid scenarios map onto the spec dataclasses; every invalid one raises a ScenarioError
naming the file, the field path, the bad value and the allowed values."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re

import pytest

from ainet_gym.scenario import spec
from ainet_gym.scenario.loader import (
    FAILURE_TIERS,
    ScenarioError,
    fabric_gpu_count,
    fabric_leaf_count,
    list_scenarios,
    load_scenario,
    scenarios_dir,
)
from ainet_gym.scenario.sections import (
    BACKGROUND_RULES,
    COLLECTIVE_RULES,
    DYNAMICS_RULES,
    FABRIC_RULES,
    JOB_CHURN_RULES,
    JOB_RULES,
    LINK_FAILURE_RULES,
    REWARD_RULES,
    ROUTING_RULES,
    SCHEDULED_RULES,
    STORAGE_RULES,
)
from tests._scenarios import spine_leaf_fabric


def base() -> dict:
    """A small valid scenario: spine-leaf, 4 leaves x 2 hosts x 8 GPUs = 64 GPUs."""
    return {
        "name": "t",
        "fabric": spine_leaf_fabric(4, 2, 2, 8),
        "workload": {
            "jobs": [
                {"name": "a", "gpus": 16, "collectives": [{"op": "allreduce", "bytes": 1.0e8}]},
            ]
        },
    }


def with_(path: str, value, d: dict | None = None) -> dict:
    """Copy of `d` (default: base()) with the dotted/indexed `path` set to `value`."""
    d = copy.deepcopy(d if d is not None else base())
    keys = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    cur = d
    for k in keys[:-1]:
        if k.startswith("["):
            cur = cur[int(k[1:-1])]
        else:
            cur = cur.setdefault(k, {})
    last = keys[-1]
    if last.startswith("["):
        i = int(last[1:-1])
        if i == len(cur):
            cur.append(value)
        else:
            cur[i] = value
    else:
        cur[last] = value
    return d


def coll(**kw) -> dict:
    """base() whose job 'a' has the single collective `kw`."""
    return with_("workload.jobs[0].collectives", [kw])


def err(d) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(d)
    return info.value


# --------------------------------------------------------------------------- valid scenarios

FULL = {
    "name": "full",
    "description": "every section given\nsecond line",
    "seed": 7,
    "fabric": {
        "topology": "spine_leaf",
        "leaves": 4,
        "spines": 2,
        "hosts_per_leaf": 2,
        "links_per_spine": 2,
        "uplink_gbps": 200,
        "gpus_per_host": 8,
        "nic_gbps": 400,
        "nvlink_gbps": 3600,
        "profile": "roce",
        "storage": {"hosts": 2, "gbps": 100, "leaves": [0, 3]},
    },
    "workload": {
        "jobs": [
            {
                "name": "llm",
                "gpus": 16,
                "placement": "contiguous",
                "compute_ms": 50,
                "overlap": 0.25,
                "start_ms": 1.5,
                "collectives": [
                    {"op": "allreduce", "algorithm": "hierarchical", "bytes": 1.0e9},
                    {"op": "reducescatter", "bytes": 2e8},
                    {"op": "sendrecv", "bytes": 1e6, "pattern": "shift:3"},
                ],
            },
            {
                "name": "moe",
                "gpus": 4,
                "placement": [60, 61, 62, 63],
                "collectives": [{"op": "alltoall", "bytes": 5e7, "skew": 1.2, "skew_period_steps": 5}],
            },
        ],
        "background": [
            {
                "kind": "checkpoint",
                "gbps": 50,
                "pattern": "periodic",
                "period_steps": 20,
                "duration_steps": 2,
            },
            {"kind": "storage", "job": "moe"},
        ],
    },
    "dynamics": {
        "episode_steps": 50,
        "decision_interval_ms": 120,
        "link_failures": {
            "rate_per_step": 0.01,
            "repair_steps": 5,
            "tiers": ["leaf_spine"],
            "scheduled": [{"link": "leaf0-spine1", "at_step": 3, "until_step": 9, "factor": 0.5}],
        },
        "job_churn": {
            "arrival_rate": 0.1,
            "mean_steps": 20,
            "max_jobs": 4,
            "templates": [{"name": "small", "gpus": 8}],
        },
    },
    "routing": {"max_paths": 4, "qps_per_connection": 2},
    "reward": {"kind": "step_time"},
}


def test_full_dict_maps_onto_dataclasses():
    s = load_scenario(FULL)
    assert isinstance(s, spec.Scenario)
    assert (s.name, s.seed, s.source) == ("full", 7, "<dict>")
    assert s.description.startswith("every section")
    f = s.fabric
    assert f == spec.FabricSpec(
        topology="spine_leaf",
        leaves=4,
        spines=2,
        hosts_per_leaf=2,
        links_per_spine=2,
        uplink_gbps=200.0,
        gpus_per_host=8,
        nic_gbps=400.0,
        nvlink_gbps=3600.0,
        profile="roce",
        hop_latency_us=0.8,  # RoCE's profile (docs/model.md, table of constants)
        link_efficiency=0.95,
        storage=spec.StorageSpec(hosts=2, gbps=100.0, leaves=(0, 3)),
    )
    llm, moe = s.jobs
    assert llm.compute_ms == 50.0 and llm.overlap == 0.25 and llm.start_ms == 1.5
    assert llm.collectives == (
        spec.CollectiveSpec(op="allreduce", bytes=1e9, algorithm="hierarchical"),
        spec.CollectiveSpec(op="reducescatter", bytes=2e8),
        spec.CollectiveSpec(op="sendrecv", bytes=1e6, pattern="shift:3"),
    )
    assert moe.placement == (60, 61, 62, 63)
    assert moe.collectives[0].skew == 1.2 and moe.collectives[0].skew_period_steps == 5
    assert s.background == (
        spec.BackgroundSpec(
            kind="checkpoint", gbps=50.0, pattern="periodic", period_steps=20, duration_steps=2
        ),
        spec.BackgroundSpec(kind="storage", job="moe"),
    )
    d = s.dynamics
    assert d.episode_steps == 50 and d.decision_interval_ms == 120.0
    assert d.link_failures == spec.LinkFailureSpec(
        rate_per_step=0.01,
        repair_steps=5,
        tiers=("leaf_spine",),
        scheduled=(spec.ScheduledFailure(link="leaf0-spine1", at_step=3, until_step=9, factor=0.5),),
    )
    assert d.job_churn.max_jobs == 4 and d.job_churn.templates[0] == spec.JobSpec(name="small", gpus=8)
    assert s.routing == spec.RoutingSpec(max_paths=4, qps_per_connection=2)
    assert s.reward == spec.RewardSpec(kind="step_time")
    assert s.raw == FULL and s.raw is not FULL  # the parsed input, copied


def test_defaults_come_from_spec():
    s = load_scenario({"name": "d", "fabric": {}, "workload": {"jobs": [{"name": "j", "gpus": 1}]}})
    assert s.fabric == spec.FabricSpec()
    assert s.jobs == (spec.JobSpec(name="j", gpus=1),)
    assert s.dynamics == spec.DynamicsSpec()
    assert s.routing == spec.RoutingSpec() and s.reward == spec.RewardSpec()
    assert s.background == () and s.seed == 0 and s.description == ""


def test_profile_defaults_and_overrides():
    ib = load_scenario(with_("fabric.profile", "infiniband")).fabric
    roce = load_scenario(with_("fabric.profile", "roce")).fabric
    # the numbers docs/model.md's table of constants publishes (0.25 us and 1.0 for IB, 0.8 us and 0.95 for RoCE)
    assert (ib.hop_latency_us, ib.link_efficiency) == (0.25, 1.0)
    assert (roce.hop_latency_us, roce.link_efficiency) == (0.8, 0.95)
    d = with_("fabric.profile", "roce")
    d["fabric"]["hop_latency_us"] = 0.0  # explicit wins, even when falsy
    f = load_scenario(d).fabric
    assert f.hop_latency_us == 0.0 and f.link_efficiency == 0.95


def test_integral_float_accepted_for_int_and_scenario_passthrough():
    s = load_scenario(with_("workload.jobs[0].gpus", 16.0))
    assert s.jobs[0].gpus == 16 and isinstance(s.jobs[0].gpus, int)
    assert load_scenario(s) is s


def test_other_topologies_count_gpus_and_leaves():
    ft = spec.FabricSpec(topology="fat_tree", k=4, gpus_per_host=2)
    assert fabric_gpu_count(ft) == 16 and fabric_leaf_count(ft) == 8
    rail = spec.FabricSpec(topology="rail_optimized", hosts=4, gpus_per_host=8)
    assert fabric_gpu_count(rail) == 32 and fabric_leaf_count(rail) == 8
    one = spec.FabricSpec(topology="single_switch", hosts=2, gpus_per_host=4)
    assert fabric_gpu_count(one) == 8 and fabric_leaf_count(one) == 1
    d = with_(
        "fabric", {"topology": "rail_optimized", "hosts": 4, "gpus_per_host": 8, "storage": {"hosts": 1}}
    )
    d["fabric"]["storage"]["leaves"] = [7]
    assert load_scenario(d).fabric.storage.leaves == (7,)


def test_job_churn_without_initial_jobs():
    d = with_("workload.jobs", [])
    d["dynamics"] = {"job_churn": {"arrival_rate": 0.2, "templates": [{"name": "x", "gpus": 8}]}}
    assert load_scenario(d).jobs == ()


def test_rules_cover_every_dataclass_field():
    """The schema tables of the loader and the dataclasses of spec.py list the same keys."""
    pairs = [
        (FABRIC_RULES, spec.FabricSpec),
        (STORAGE_RULES, spec.StorageSpec),
        (JOB_RULES, spec.JobSpec),
        (COLLECTIVE_RULES, spec.CollectiveSpec),
        (BACKGROUND_RULES, spec.BackgroundSpec),
        (DYNAMICS_RULES, spec.DynamicsSpec),
        (LINK_FAILURE_RULES, spec.LinkFailureSpec),
        (SCHEDULED_RULES, spec.ScheduledFailure),
        (JOB_CHURN_RULES, spec.JobChurnSpec),
        (ROUTING_RULES, spec.RoutingSpec),
        (REWARD_RULES, spec.RewardSpec),
    ]
    for rules, cls in pairs:
        assert set(rules) == {f.name for f in dataclasses.fields(cls)}, cls.__name__
    assert set(spec.LinkFailureSpec().tiers) <= set(FAILURE_TIERS)


def test_failure_tiers_match_topology():
    topology = pytest.importorskip("ainet_gym.fabric.topology")
    assert set(FAILURE_TIERS) == set(topology.TIERS) - {"nvlink"}


# --------------------------------------------------------------------------- files and names


def test_yaml_file_loads_with_source_and_raw(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text(
        "name: x\nfabric: {topology: single_switch, hosts: 2}\n"
        "workload:\n  jobs:\n    - {name: a, gpus: 8, collectives: [{op: allreduce, bytes: 1e9}]}\n"
    )
    s = load_scenario(p)
    assert s.source == str(p) and s.raw["name"] == "x"
    assert s.jobs[0].collectives[0].bytes == 1e9  # `1e9` without a dot is a float, not a string
    assert load_scenario(str(p)) == s


def test_shipped_names_list_and_resolve(tmp_path, monkeypatch):
    (tmp_path / "beta.yaml").write_text(
        "name: beta\ndescription: |\n  Second one\n  more\nfabric: {}\nworkload: {jobs: [{name: a, gpus: 1}]}\n"
    )
    (tmp_path / "alpha.yaml").write_text(
        "name: alpha\ndescription: First\nfabric: {}\nworkload: {jobs: []}\n"
    )
    monkeypatch.setenv("AINET_GYM_SCENARIOS", str(tmp_path))
    assert scenarios_dir() == tmp_path
    assert list_scenarios() == [("alpha", "First"), ("beta", "Second one")]
    s = load_scenario("beta")
    assert s.name == "beta" and s.source == str(tmp_path / "beta.yaml")


def test_missing_file_lists_shipped_names(tmp_path, monkeypatch):
    for name in ("ring-small", "spine-leaf-2to1"):
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\n")
    monkeypatch.setenv("AINET_GYM_SCENARIOS", str(tmp_path))
    e = err("spine-leaf-2t1")
    assert e.source == "spine-leaf-2t1"
    assert re.search(
        r"^spine-leaf-2t1: no such scenario file or shipped scenario; allowed: .*ring-small, spine-leaf-2to1 "
        r"\(did you mean 'spine-leaf-2to1'\?\)$",
        str(e),
    )
    with pytest.raises(ScenarioError, match=r"no-such-dir/x\.yaml: no such scenario file.*ring-small"):
        load_scenario(tmp_path / "no-such-dir" / "x.yaml")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param(
            "name: x\nfabric: {topology: spine_leaf\nworkload: {}\n", r"line \d+, column \d+", id="syntax"
        ),
        pytest.param(
            "name: x\nfabric: {}\nfabric: {}\n", r"line 3.*duplicate key 'fabric'", id="duplicate-key"
        ),
    ],
)
def test_yaml_syntax_error_names_file_line_and_cause(tmp_path, text, where):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ScenarioError, match=rf"^{re.escape(str(p))}: YAML syntax error at {where}"):
        load_scenario(p)


@pytest.mark.parametrize(("text", "what"), [("- 1\n- 2\n", "a list, not a mapping"), ("", "empty")])
def test_top_level_not_a_mapping(tmp_path, text, what):
    p = tmp_path / "top.yaml"
    p.write_text(text)
    with pytest.raises(
        ScenarioError, match=rf"top\.yaml: the scenario is {what}; allowed: a mapping with keys name"
    ):
        load_scenario(p)


def test_error_carries_attributes_and_pickles():
    e = err(with_("fabric.topology", "spine-leaf"))
    assert (e.source, e.field, e.value) == ("<dict>", "fabric.topology", "spine-leaf")
    assert str(e) == (
        "<dict>: fabric.topology: 'spine-leaf' is not a known topology; "
        "allowed: single_switch, spine_leaf, fat_tree, rail_optimized, graph (did you mean 'spine_leaf'?)"
    )
    e2 = pickle.loads(pickle.dumps(e))
    assert str(e2) == str(e) and e2.field == e.field and isinstance(e2, ValueError)


def test_file_errors_name_the_file(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("name: x\nfabric: {topology: spine-leaf}\nworkload: {jobs: [{name: a, gpus: 1}]}\n")
    with pytest.raises(ScenarioError, match=rf"^{re.escape(str(p))}: fabric\.topology: 'spine-leaf'"):
        load_scenario(p)


# --------------------------------------------------------------------------- unknown keys, types, enums


@pytest.mark.parametrize(
    ("path", "match"),
    [
        (
            "worklaod",
            r"<dict>: worklaod: unknown key 'worklaod'; allowed: name, .* \(did you mean 'workload'\?\)",
        ),
        (
            "fabric.spine",
            r"fabric\.spine: unknown key 'spine'; allowed: topology, .* \(did you mean 'spines'\?\)",
        ),
        ("fabric.storage.host", r"fabric\.storage\.host: unknown key.*did you mean 'hosts'"),
        ("workload.jobs[0].gpu", r"workload\.jobs\[0\]\.gpu: unknown key.*did you mean 'gpus'"),
        (
            "workload.jobs[0].collectives[0].algo",
            r"collectives\[0\]\.algo: unknown key.*did you mean 'algorithm'",
        ),
        ("dynamics.link_failures.rate", r"dynamics\.link_failures\.rate: unknown key.*'rate_per_step'"),
        ("dynamics.job_churn.zzz", r"dynamics\.job_churn\.zzz: unknown key 'zzz'; allowed: arrival_rate"),
        ("routing.max_path", r"routing\.max_path: unknown key.*did you mean 'max_paths'"),
    ],
)
def test_unknown_key_with_did_you_mean(path, match):
    with pytest.raises(ScenarioError, match=match):
        load_scenario(with_(path, 1))


def test_unknown_key_without_close_match_has_no_hint():
    e = err(with_("zzzz", 1))
    assert e.field == "zzzz" and "did you mean" not in str(e)


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (
            "workload.jobs[0].collectives[0].bytes",
            "1GB",
            r"workload\.jobs\[0\]\.collectives\[0\]\.bytes: expected a number of bytes, got string '1GB'; "
            r"allowed: a number in \(0, 1000000000000000\]",
        ),
        (
            "workload.jobs[0].gpus",
            True,
            r"workload\.jobs\[0\]\.gpus: expected a number of GPUs, got boolean True",
        ),
        (
            "workload.jobs[0].gpus",
            8.5,
            r"workload\.jobs\[0\]\.gpus: expected a number of GPUs, got non-integral 8.5",
        ),
        ("fabric.nic_gbps", "400G", r"fabric\.nic_gbps: expected a link speed in Gbit/s, got string '400G'"),
        ("workload.jobs[0].compute_ms", None, r"compute_ms: expected a compute time in ms, got null"),
        ("fabric.uplink_gbps", float("nan"), r"fabric\.uplink_gbps: expected a finite number"),
        ("name", 3, r"<dict>: name: expected a scenario name, got 3"),
        ("fabric", [1], r"fabric: expected a mapping \(the fabric\), got a list"),
        ("workload.jobs", {"name": "a"}, r"workload\.jobs: expected a list \(jobs\), got a mapping"),
        ("workload.jobs[0].placement", 3, r"placement: expected a placement, got 3; allowed: contiguous"),
        ("workload.jobs[0].placement", [0, "1"], r"placement\[1\]: expected a GPU id, got string '1'"),
    ],
)
def test_wrong_type(path, value, match):
    e = err(with_(path, value))
    assert e.field.startswith(path)
    with pytest.raises(ScenarioError, match=match):
        load_scenario(with_(path, value))


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        ("fabric.topology", "fattree", r"'fattree' is not a known topology.*did you mean 'fat_tree'"),
        (
            "fabric.profile",
            "ib",
            r"fabric\.profile: 'ib' is not a known fabric profile; allowed: infiniband, roce",
        ),
        (
            "workload.jobs[0].placement",
            "spreaded",
            r"placement: 'spreaded' is not a known placement.*'spread'",
        ),
        (
            "workload.jobs[0].collectives[0].op",
            "all_reduce",
            r"'all_reduce' is not a known collective op.*'allreduce'",
        ),
        ("workload.jobs[0].collectives[0].algorithm", "rings", r"'rings' is not a known algorithm.*'ring'"),
        (
            "reward.kind",
            "utilization",
            r"reward\.kind: 'utilization' is not a known reward kind; allowed: gpu_util",
        ),
        (
            "dynamics.link_failures.tiers",
            ["leaf-spine"],
            r"tiers\[0\]: 'leaf-spine' is not a known link tier",
        ),
    ],
)
def test_bad_enum(path, value, match):
    with pytest.raises(ScenarioError, match=match):
        load_scenario(with_(path, value))


def test_bad_background_enum():
    d = with_("fabric.storage", {"hosts": 1})
    d["workload"]["background"] = [{"kind": "backup"}]
    with pytest.raises(
        ScenarioError, match=r"workload\.background\[0\]\.kind: 'backup' is not a known background kind"
    ):
        load_scenario(d)
    d["workload"]["background"] = [{"pattern": "bursty"}]
    with pytest.raises(
        ScenarioError, match=r"background\[0\]\.pattern: 'bursty'.*allowed: constant, periodic"
    ):
        load_scenario(d)


# --------------------------------------------------------------------------- ranges


@pytest.mark.parametrize(
    ("path", "value", "allowed"),
    [
        ("workload.jobs[0].gpus", 0, r"an integer in \[1, 65536\]"),
        ("fabric.leaves", 0, r"an integer in \[1, 100000\]"),
        ("fabric.gpus_per_host", -1, r"an integer in \[1, 100000\]"),
        ("fabric.nic_gbps", 0, r"a number in \[0.001, 1000000\]"),
        ("fabric.hop_latency_us", -0.1, r"a number in \[0, 1000000\]"),
        ("fabric.link_efficiency", 0, r"a number in \[0.001, 1\]"),
        ("fabric.link_efficiency", 1.5, r"a number in \[0.001, 1\]"),
        ("fabric.storage.hosts", -1, r"an integer in \[0, 100000\]"),
        ("workload.jobs[0].overlap", 1.5, r"a number in \[0, 1\]"),
        ("workload.jobs[0].compute_ms", -1, r"a number in \[0, 10000000\]"),
        ("workload.jobs[0].start_ms", -1, r"a number in \[0, 10000000\]"),
        ("workload.jobs[0].collectives[0].bytes", 0, r"a number in \(0, 1000000000000000\]"),
        ("dynamics.episode_steps", 0, r"an integer in \[1, 10000000\]"),
        ("dynamics.decision_interval_ms", 0, r"a number in \(0, 10000000\] or null"),
        ("dynamics.link_failures.rate_per_step", 1.5, r"a number in \[0, 1\]"),
        ("dynamics.job_churn.arrival_rate", -0.5, r"a number in \[0, 1000\]"),
        ("routing.max_paths", 0, r"an integer in \[1, 256\]"),
        ("routing.qps_per_connection", 0, r"an integer in \[1, 100000\]"),
        ("seed", -1, r"an integer in \[0, 9223372036854775807\]"),
    ],
)
def test_out_of_range(path, value, allowed):
    with pytest.raises(
        ScenarioError, match=rf"<dict>: {re.escape(path)}: {value} is out of range; allowed: {allowed}"
    ):
        load_scenario(with_(path, value))


def test_skew_and_scheduled_factor_ranges():
    with pytest.raises(
        ScenarioError, match=r"collectives\[0\]\.skew: -1 is out of range; allowed: a number in \[0, 16\]"
    ):
        load_scenario(coll(op="alltoall", bytes=1e6, skew=-1))
    d = with_("dynamics.link_failures.scheduled", [{"link": "leaf0-spine0", "at_step": 1, "factor": 2}])
    with pytest.raises(
        ScenarioError, match=r"scheduled\[0\]\.factor: 2 is out of range; allowed: a number in \[0, 1\]"
    ):
        load_scenario(d)


def test_fat_tree_k_must_be_even_and_fit_hosts():
    d = with_("fabric", {"topology": "fat_tree", "k": 5, "gpus_per_host": 1})
    with pytest.raises(
        ScenarioError, match=r"fabric\.k: fat_tree needs an even k, got 5; allowed: an even integer"
    ):
        load_scenario(d)
    d = with_("fabric", {"topology": "fat_tree", "k": 4, "gpus_per_host": 3})
    with pytest.raises(
        ScenarioError, match=r"fabric\.gpus_per_host: .*16 edge ports.*allowed: a divisor of 16"
    ):
        load_scenario(d)


def test_missing_required_fields():
    d = base()
    del d["name"]
    with pytest.raises(ScenarioError, match=r"<dict>: name: required field 'name' is missing"):
        load_scenario(d)
    d = base()
    del d["fabric"]
    with pytest.raises(ScenarioError, match=r"<dict>: fabric: required section 'fabric' is missing"):
        load_scenario(d)
    with pytest.raises(ScenarioError, match=r"workload\.jobs: at least one job is required"):
        load_scenario(with_("workload.jobs", []))
    with pytest.raises(ScenarioError, match=r"workload\.jobs\[0\]\.gpus: required field 'gpus' is missing"):
        load_scenario(with_("workload.jobs[0]", {"name": "a"}))
    with pytest.raises(ScenarioError, match=r"collectives\[0\]\.bytes: required field 'bytes' is missing"):
        load_scenario(coll(op="allreduce"))


# --------------------------------------------------------------------------- placement


def test_job_larger_than_fabric():
    with pytest.raises(
        ScenarioError,
        match=r"workload\.jobs\[0\]\.gpus: job 'a' asks for 65 GPUs but the spine_leaf fabric has 64; allowed: 1\.\.64",
    ):
        load_scenario(with_("workload.jobs[0].gpus", 65))


def test_initial_jobs_exceeding_fabric_name_the_job():
    d = with_("workload.jobs[1]", {"name": "b", "gpus": 40}, with_("workload.jobs[0].gpus", 32))
    with pytest.raises(
        ScenarioError,
        match=r"workload\.jobs\[1\]\.gpus: job 'b' brings the initial jobs to 72 GPUs but the fabric has 64",
    ):
        load_scenario(d)


def test_explicit_placement_out_of_range_and_wrong_length():
    d = with_("workload.jobs[0]", {"name": "a", "gpus": 2, "placement": [0, 64]})
    with pytest.raises(
        ScenarioError, match=r"placement\[1\]: GPU id 64 of job 'a' is out of range.*allowed: GPU ids 0\.\.63"
    ):
        load_scenario(d)
    d = with_("workload.jobs[0]", {"name": "a", "gpus": 3, "placement": [0, 1]})
    with pytest.raises(ScenarioError, match=r"jobs\[0\]\.placement: job 'a' lists 2 GPU ids but has gpus: 3"):
        load_scenario(d)


def test_duplicate_explicit_ids():
    d = with_("workload.jobs[0]", {"name": "a", "gpus": 3, "placement": [4, 5, 4]})
    with pytest.raises(
        ScenarioError,
        match=r"workload\.jobs\[0\]\.placement\[2\]: GPU id 4 appears twice in the placement of job 'a'",
    ):
        load_scenario(d)
    d = with_(
        "workload.jobs",
        [{"name": "a", "gpus": 2, "placement": [0, 1]}, {"name": "b", "gpus": 2, "placement": [2, 1]}],
    )
    with pytest.raises(
        ScenarioError, match=r"jobs\[1\]\.placement\[1\]: GPU 1 of job 'b' is already used by job 'a'"
    ):
        load_scenario(d)


def test_job_names_unique():
    d = with_("workload.jobs[1]", {"name": "a", "gpus": 1})
    with pytest.raises(ScenarioError, match=r"workload\.jobs\[1\]\.name: job name 'a' is used twice"):
        load_scenario(d)


# --------------------------------------------------------------------------- collectives


def test_halving_doubling_needs_power_of_two():
    d = with_("workload.jobs[0].gpus", 12, coll(op="allreduce", algorithm="halving_doubling", bytes=1e6))
    with pytest.raises(
        ScenarioError,
        match=r"collectives\[0\]\.algorithm: halving_doubling needs a power-of-two number of GPUs; job 'a' has 12",
    ):
        load_scenario(d)
    assert load_scenario(coll(op="allreduce", algorithm="halving_doubling", bytes=1e6)).jobs[0].gpus == 16


@pytest.mark.parametrize(
    ("pattern", "match"),
    [
        ("shift", r"string 'shift' is not a sendrecv pattern; allowed: shift:k"),
        ("shift:1.5", r"string 'shift:1\.5' is not a sendrecv pattern"),
        ("ring", r"string 'ring' is not a sendrecv pattern"),
        (3, r"3 is not a sendrecv pattern"),
        (
            "shift:16",
            r"shift:16 sends every rank to itself on job 'a' of 16 GPU\(s\); allowed: shift:k with k mod 16",
        ),
        ("shift:0", r"shift:0 sends every rank to itself"),
    ],
)
def test_bad_sendrecv_pattern(pattern, match):
    with pytest.raises(ScenarioError, match=r"workload\.jobs\[0\]\.collectives\[0\]\.pattern: " + match):
        load_scenario(coll(op="sendrecv", bytes=1e6, pattern=pattern))


def test_sendrecv_pattern_required_normalised_and_only_for_sendrecv():
    with pytest.raises(ScenarioError, match=r"collectives\[0\]\.pattern: sendrecv requires a pattern"):
        load_scenario(coll(op="sendrecv", bytes=1e6))
    assert load_scenario(coll(op="sendrecv", bytes=1e6, pattern="shift: -1")).jobs[0].collectives[
        0
    ].pattern == ("shift:-1")
    with pytest.raises(
        ScenarioError, match=r"collectives\[0\]\.pattern: pattern applies only to sendrecv, not to allreduce"
    ):
        load_scenario(coll(op="allreduce", bytes=1e6, pattern="shift:1"))


def test_algorithm_per_op():
    for alg in ("ring", "tree", "hierarchical", "halving_doubling"):
        assert (
            load_scenario(coll(op="allreduce", bytes=1, algorithm=alg)).jobs[0].collectives[0].algorithm
            == alg
        )
    for op in ("reducescatter", "allgather"):
        assert (
            load_scenario(coll(op=op, bytes=1, algorithm="ring")).jobs[0].collectives[0].algorithm == "ring"
        )
        with pytest.raises(
            ScenarioError, match=rf"algorithm: {op} supports only the ring algorithm, not 'tree'"
        ):
            load_scenario(coll(op=op, bytes=1, algorithm="tree"))
    with pytest.raises(ScenarioError, match=r"algorithm: alltoall takes no algorithm \(got 'ring'\)"):
        load_scenario(coll(op="alltoall", bytes=1, algorithm="ring"))
    with pytest.raises(ScenarioError, match=r"collectives\[0\]\.skew: skew applies only to alltoall"):
        load_scenario(coll(op="allreduce", bytes=1, skew=1.0))


def test_hierarchical_needs_whole_hosts():
    d = with_("workload.jobs[0].gpus", 12, coll(op="allreduce", algorithm="hierarchical", bytes=1e6))
    with pytest.raises(
        ScenarioError, match=r"algorithm: hierarchical needs whole hosts: job 'a' has 12 GPUs.*=8"
    ):
        load_scenario(d)
    d = with_("workload.jobs[0].placement", [0, 1, 8], with_("workload.jobs[0].gpus", 3, d))
    with pytest.raises(ScenarioError, match=r"hierarchical needs the same number of GPUs on every host"):
        load_scenario(d)


# --------------------------------------------------------------------------- storage, background, dynamics


def test_unknown_storage_leaf():
    with pytest.raises(
        ScenarioError,
        match=r"<dict>: fabric\.storage\.leaves\[1\]: leaf 4 does not exist: the spine_leaf fabric has 4 leaves "
        r"\(ids 0\.\.3\); allowed: leaf ids 0\.\.3",
    ):
        load_scenario(with_("fabric.storage", {"hosts": 2, "leaves": [0, 4]}))
    d = with_("fabric", {"topology": "single_switch", "hosts": 2, "storage": {"hosts": 1, "leaves": [1]}})
    with pytest.raises(ScenarioError, match=r"leaf 1 does not exist: the single_switch fabric has 1 leaf"):
        load_scenario(d)


def test_background_needs_storage_hosts_and_known_job():
    d = with_("workload.background", [{"kind": "storage", "gbps": 100}])
    with pytest.raises(
        ScenarioError,
        match=r"<dict>: workload\.background\[0\]: .*add fabric\.storage\.hosts; allowed: fabric\.storage",
    ):
        load_scenario(d)
    d = with_("fabric.storage", {"hosts": 1}, with_("workload.background", [{"job": "A"}]))
    with pytest.raises(
        ScenarioError, match=r"background\[0\]\.job: no initial job named 'A'; allowed: .* a\b"
    ):
        load_scenario(d)


def test_scheduled_failure_link_name_and_steps():
    def sched(**kw):
        return with_("dynamics.link_failures.scheduled", [kw])

    with pytest.raises(
        ScenarioError, match=r"scheduled\[0\]\.link: string 'leaf0:spine1' is not a link name"
    ):
        load_scenario(sched(link="leaf0:spine1", at_step=0))
    with pytest.raises(ScenarioError, match=r"scheduled\[0\]\.at_step: required field 'at_step' is missing"):
        load_scenario(sched(link="leaf0-spine1"))
    with pytest.raises(
        ScenarioError, match=r"scheduled\[0\]\.until_step: until_step 3 is not after at_step 3"
    ):
        load_scenario(sched(link="edge0-agg1", at_step=3, until_step=3))


def test_max_jobs_must_hold_initial_jobs():
    d = with_("workload.jobs[1]", {"name": "b", "gpus": 1}, with_("dynamics.job_churn.max_jobs", 1))
    with pytest.raises(
        ScenarioError, match=r"dynamics\.job_churn\.max_jobs: 1 job slots cannot hold the 2 initial"
    ):
        load_scenario(d)


def test_a_text_file_given_as_a_scenario_is_not_echoed_whole(tmp_path, capsys) -> None:
    """A file that is one long YAML string (e.g. /etc/passwd) is refused in one short line (fails on the old
    code: the line quoted the whole file, 1,473 characters for /etc/passwd)."""
    from ainet_gym.cli import main

    f = tmp_path / "notes.txt"
    f.write_text(" ".join(f"word{i}:x:{i}" for i in range(300)) + "\n")
    assert main(["simulate", str(f), "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the scenario is string 'word0:x:0" in err[0], err
    assert "characters)" in err[0] and len(err[0]) < 400, err[0]
