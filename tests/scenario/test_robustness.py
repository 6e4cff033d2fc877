"""Bad scenarios never crash: ``load_scenario`` raises ``ScenarioError`` naming the field, or the scenario
runs. The cases of issue 10 one by one, then a property test over scenario dicts around the schema."""

from __future__ import annotations

import copy
import json
import re
import tracemalloc
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ainet_gym.scenario import loader as scenario_mod
from ainet_gym.scenario.loader import ScenarioError, fabric_size, load_scenario
from ainet_gym.sim.simulate import simulate
from tests._scenarios import spine_leaf_fabric


def base() -> dict[str, Any]:
    """16 GPUs on 4 leaves x 2 spines, two ring jobs."""
    return {
        "name": "t",
        "fabric": spine_leaf_fabric(4, 2, 2, 2),
        "workload": {
            "jobs": [
                {
                    "name": "a",
                    "gpus": 8,
                    "compute_ms": 10,
                    "collectives": [{"op": "allreduce", "bytes": 1e8}],
                },
                {"name": "b", "gpus": 4, "compute_ms": 5, "collectives": [{"op": "allgather", "bytes": 1e7}]},
            ]
        },
        "dynamics": {"episode_steps": 4},
    }


def edit(**sections: Any) -> dict[str, Any]:
    d = base()
    for k, v in sections.items():
        d[k] = v
    return d


def job(**kw: Any) -> dict[str, Any]:
    d = base()
    d["workload"]["jobs"][0].update(kw)
    return d


def fabric(**kw: Any) -> dict[str, Any]:
    d = base()
    d["fabric"] = kw
    return d


CASES = [
    # (scenario, field named, words of the message)
    (job(compute_ms=0, collectives=[]), "workload.jobs[0].compute_ms", "takes no time"),
    (
        job(gpus=1, compute_ms=0, placement="contiguous"),
        "workload.jobs[0].compute_ms",
        "1-GPU job moves no bytes",
    ),
    (
        edit(dynamics={"link_failures": {"scheduled": [{"link": "leaf99-spine1", "at_step": 1}]}}),
        "dynamics.link_failures.scheduled[0].link",
        "no switch 'leaf99' (leaf0..leaf3)",
    ),
    (
        edit(dynamics={"link_failures": {"scheduled": [{"link": "leaf0-leaf1", "at_step": 1}]}}),
        "dynamics.link_failures.scheduled[0].link",
        "not linked",
    ),
    (
        edit(
            fabric={"topology": "fat_tree", "k": 4, "gpus_per_host": 2},
            dynamics={"link_failures": {"scheduled": [{"link": "edge0-agg2", "at_step": 1}]}},
        ),
        "dynamics.link_failures.scheduled[0].link",
        "not linked in the fat_tree fabric",
    ),
    (edit(seed=2**70), "seed", "[0, 9223372036854775807]"),
    (
        job(collectives=[{"op": "allreduce", "bytes": 1e300}]),
        "workload.jobs[0].collectives[0].bytes",
        "1e+300",
    ),
    (edit(routing={"max_paths": 1e9}), "routing.max_paths", "[1, 256]"),
    (
        fabric(topology="spine_leaf", leaves=4, hosts_per_leaf=2500, gpus_per_host=1000),
        "fabric",
        "LIMITS['gpus']",
    ),
    (fabric(topology="fat_tree", k=1000), "fabric", "250,000,000 GPUs"),
    (
        fabric(topology="spine_leaf", leaves=8, links_per_spine=100000),
        "fabric",
        "lower fabric.links_per_spine",
    ),
    (edit(dynamics={"decision_interval_ms": 1e12}), "dynamics.decision_interval_ms", "(0, 10000000]"),
    (
        edit(dynamics={"decision_interval_ms": 1e6}),
        "dynamics.decision_interval_ms",
        "iterations_per_interval",
    ),
    (
        edit(dynamics={"link_failures": {"rate_per_step": 0.5, "tiers": ["agg_core"]}}),
        "dynamics.link_failures.tiers[0]",
        "has no 'agg_core' links",
    ),
    (
        edit(
            fabric={"topology": "single_switch", "hosts": 8, "gpus_per_host": 2},
            dynamics={"link_failures": {"rate_per_step": 0.5}},
        ),
        "dynamics.link_failures.rate_per_step",
        "nothing would ever fail",
    ),
    (
        edit(
            fabric={
                "topology": "spine_leaf",
                "leaves": 64,
                "spines": 8,
                "hosts_per_leaf": 8,
                "gpus_per_host": 8,
            },
            workload={
                "jobs": [{"name": "a", "gpus": 4096, "collectives": [{"op": "alltoall", "bytes": 1e9}]}]
            },
        ),
        "workload",
        "16,773,120 connections",
    ),
]


@pytest.mark.parametrize(("d", "field", "words"), CASES)
def test_each_bad_scenario_raises_naming_its_field(d: dict, field: str, words: str) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(d)
    assert e.value.field == field, str(e.value)
    assert words in str(e.value)


@pytest.mark.parametrize(
    ("topology", "key", "value"),
    [
        ("fat_tree", "nic_gbps", 400),
        ("fat_tree", "leaves", 4),
        ("fat_tree", "uplink_gbps", 400),
        ("spine_leaf", "k", 4),
        ("spine_leaf", "link_gbps", 400),
        ("single_switch", "spines", 2),
        ("rail_optimized", "leaves", 4),
    ],
)
def test_keys_the_topology_does_not_use_are_an_error(topology: str, key: str, value: Any) -> None:
    fab = {
        "fat_tree": {"topology": "fat_tree", "k": 4, "gpus_per_host": 2},
        "spine_leaf": {
            "topology": "spine_leaf",
            "leaves": 4,
            "spines": 2,
            "hosts_per_leaf": 2,
            "gpus_per_host": 2,
        },
        "single_switch": {"topology": "single_switch", "hosts": 8, "gpus_per_host": 2},
        "rail_optimized": {"topology": "rail_optimized", "hosts": 8, "gpus_per_host": 2, "spines": 2},
    }[topology]
    load_scenario(edit(fabric=fab))  # valid without the key
    with pytest.raises(ScenarioError) as e:
        load_scenario(edit(fabric={**fab, key: value}))
    assert e.value.field == f"fabric.{key}"
    assert f"key {key!r} is not used by the {topology} topology" in str(e.value)


def test_fabric_size_estimate_matches_the_built_fabric() -> None:
    from ainet_gym.fabric.topology import build_fabric

    for name in (
        "spine-leaf-2to1",
        "fat-tree-k8-stride",
        "rail-optimized-hierarchical",
        "storage-checkpoint",
    ):
        sc = load_scenario(name)
        f = build_fabric(sc.fabric, sc.routing.max_paths)
        size = fabric_size(sc.fabric)
        assert size["gpus"] == f.n_gpus and size["links"] == f.n_links, name
        assert size["leaves"] == f.n_leaves
        if f.n_leaves > 1:  # the ECMP set between two leaves of different pods / spines
            assert size["ecmp_set"] == len(f._leaf_paths(0, f.n_leaves - 1))


def test_every_shipped_scheduled_failure_link_exists() -> None:
    from ainet_gym.fabric.topology import build_fabric

    for name in ("link-failure", "degraded-link", "periodic-interference"):
        sc = load_scenario(name)
        f = build_fabric(sc.fabric)
        for sf in sc.dynamics.link_failures.scheduled:
            assert f.link_ids(sf.link).shape == (2,)


def test_scheduled_links_accepted_iff_the_fabric_has_them() -> None:
    """Against the built fat-tree: every switch pair is accepted exactly when build_fabric links it."""
    from ainet_gym.fabric.topology import build_fabric

    fab = {"topology": "fat_tree", "k": 4, "gpus_per_host": 2}
    f = build_fabric(load_scenario(edit(fabric=fab)).fabric)
    names = [n for n, k in zip(f.node_names, f.node_kind) if k in ("edge", "agg", "core")]
    for a in names[:8]:
        for b in names:
            if a == b:
                continue
            d = edit(
                fabric=fab, dynamics={"link_failures": {"scheduled": [{"link": f"{a}-{b}", "at_step": 1}]}}
            )
            try:
                f.link_ids(f"{a}-{b}")
                exists = True
            except KeyError:
                exists = False
            if exists:
                load_scenario(d)
            else:
                with pytest.raises(ScenarioError):
                    load_scenario(d)


# --------------------------------------------------------------------------- property test

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 40),
    st.sampled_from([0, 1, 2, 3, 7, 2**31, 2**63, 2**70, 10**7, 100000]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 0.5, 1e-9, 1e9, 1e12, 1e300, -1.0]),
    st.sampled_from(
        ["", "x", "ring", "alltoall", "fat_tree", "leaf0-spine1", "leaf99-spine0", "shift:1", "1GB"]
    ),
    st.just([]),
    st.just({}),
    st.lists(st.integers(-1, 20), max_size=4),
)
_KEYS = st.sampled_from(
    [
        "name",
        "seed",
        "fabric",
        "topology",
        "leaves",
        "spines",
        "hosts_per_leaf",
        "links_per_spine",
        "k",
        "hosts",
        "gpus_per_host",
        "nic_gbps",
        "link_gbps",
        "uplink_gbps",
        "nvlink_gbps",
        "hop_latency_us",
        "link_efficiency",
        "storage",
        "workload",
        "jobs",
        "gpus",
        "compute_ms",
        "placement",
        "overlap",
        "collectives",
        "op",
        "bytes",
        "algorithm",
        "pattern",
        "skew",
        "dynamics",
        "episode_steps",
        "decision_interval_ms",
        "link_failures",
        "rate_per_step",
        "tiers",
        "scheduled",
        "link",
        "at_step",
        "job_churn",
        "arrival_rate",
        "max_jobs",
        "templates",
        "routing",
        "max_paths",
        "qps_per_connection",
        "bogus",
    ]
)


def _containers(d: Any, out: list) -> list:
    if isinstance(d, dict):
        out.append(d)
        for v in d.values():
            _containers(v, out)
    elif isinstance(d, list):
        out.append(d)
        for v in d:
            _containers(v, out)
    return out


@st.composite
def scenario_dicts(draw: st.DrawFn) -> dict:
    d = base()
    if draw(st.booleans()):
        d["dynamics"] = {
            "episode_steps": 4,
            "link_failures": {"rate_per_step": 0.5, "scheduled": [{"link": "leaf0-spine1", "at_step": 1}]},
            "job_churn": {"arrival_rate": 0.5, "mean_steps": 3, "max_jobs": 4},
        }
    for _ in range(draw(st.integers(1, 4))):
        spots = _containers(d, [])
        c = spots[draw(st.integers(0, len(spots) - 1))]
        action = draw(st.sampled_from(["set", "set", "delete", "add"]))
        if isinstance(c, dict):
            if action == "delete" and c:
                del c[draw(st.sampled_from(sorted(c)))]
            elif action == "add":
                c[draw(_KEYS)] = copy.deepcopy(draw(_VALUES))
            elif c:
                c[draw(st.sampled_from(sorted(c)))] = copy.deepcopy(draw(_VALUES))
        elif c:
            i = draw(st.integers(0, len(c) - 1))
            if action == "delete":
                del c[i]
            else:
                c[i] = copy.deepcopy(draw(_VALUES))
    return d


@settings(
    max_examples=80,
    deadline=timedelta(seconds=60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenario_dicts())
def test_a_scenario_dict_is_refused_or_runs(d: dict) -> None:
    # tighter ceilings keep each example small; the property is the same
    limits = dict(scenario_mod.LIMITS)
    scenario_mod.LIMITS.update(iterations_per_interval=200, memory_gib=0.25, gpus=4096, links=50_000)
    try:
        try:
            sc = load_scenario(d)
        except ScenarioError as e:
            assert e.field is not None and str(e)
            return
        tracemalloc.start()
        try:
            out = simulate(sc, policy="ecmp", steps=2, seed=0)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(out["steps"]) == 2
        json.dumps(out, allow_nan=False)  # every figure finite (or null where no iteration completed)
        assert peak < 2 * 2**30
    finally:
        scenario_mod.LIMITS.clear()
        scenario_mod.LIMITS.update(limits)


# --------------------------------------------------------------------------- actions and seeds


@pytest.mark.parametrize("mode", ["split", "path", "ecmp_weights"])
@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda shape: np.full(shape, "0.5"), "strings"),
        (lambda shape: np.zeros(shape, dtype=complex), "complex numbers"),
        (lambda shape: np.zeros(shape, dtype=bool), "booleans"),
        (lambda shape: np.array([None] * shape[0]), "Python objects"),
    ],
)
def test_actions_of_a_non_number_dtype_are_refused(
    mode: str, make, words: str, small_spine_leaf_scenario: dict
) -> None:
    from ainet_gym.envs.env import FabricRoutingEnv

    env = FabricRoutingEnv(small_spine_leaf_scenario, action_mode=mode)
    ref = FabricRoutingEnv(small_spine_leaf_scenario, action_mode=mode)
    env.reset(seed=1)
    ref.reset(seed=1)
    allowed = "integers in 0..3" if mode == "path" else "real numbers in [-1, 1]"
    with pytest.raises(
        ValueError, match=rf"action dtype .*\({words}\): not a number type; expected {re.escape(allowed)}"
    ):
        env.step(make(env.action_space.shape))
    good = np.zeros(env.action_space.shape, dtype=env.action_space.dtype)
    a, b = env.step(good), ref.step(good)
    assert np.array_equal(a[0], b[0]) and a[1] == b[1]  # the refused action left no trace


def test_path_index_message_names_the_index_and_range(small_spine_leaf_scenario: dict) -> None:
    from ainet_gym.envs.env import FabricRoutingEnv

    env = FabricRoutingEnv(small_spine_leaf_scenario, action_mode="path")
    env.reset(seed=1)
    a = np.zeros(env.action_space.shape, dtype=float)
    a[3] = 0.5
    with pytest.raises(ValueError, match=r"^action\[3\] = 0.5: path indices must be integers in 0..3$"):
        env.step(a)
    with pytest.raises(ValueError, match=r"cannot be read as an array"):
        env.step([[1], [1, 2]])


def test_vector_env_messages_say_what_was_passed_and_what_is_expected(
    small_spine_leaf_scenario: dict,
) -> None:
    from ainet_gym.envs.vector_env import FabricRoutingVectorEnv

    venv = FabricRoutingVectorEnv(4, small_spine_leaf_scenario, "split")
    n = venv.single_action_space.shape[0]
    for seed, words in [
        (1.5, r"seed = 1.5 \(float\): not a seed"),
        (-1, r"seed = -1: out of range"),
        (True, r"seed = True \(bool\): not a seed"),
        ([1, 2], r"a list of 2 seeds for 4 envs"),
        ([1, 2, 3, 1.5], r"seed\[3\] = 1.5: not a seed"),
        (2**63, r"out of range; allowed: an integer in \[0, 9223372036854775804\]"),
    ]:
        with pytest.raises(ValueError, match=words):
            venv.reset(seed=seed)
    venv.reset(seed=0)
    with pytest.raises(
        ValueError, match=rf"action shape \({n},\) is one env's action; .* expects \(4, {n}\)"
    ):
        venv.step(np.zeros(n))
    with pytest.raises(
        ValueError, match=rf"action shape \(3, 5\): expected \({n},\) for one env, \(4, {n}\)"
    ):
        venv.step(np.zeros((3, 5)))


def test_an_empty_scenario_name_is_named() -> None:
    with pytest.raises(ScenarioError, match="the scenario name is empty"):
        load_scenario("")
