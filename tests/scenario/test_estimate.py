"""The iteration estimate of the loader never refuses valid work: for every message size from 8 B to 8 GB
and every interval from 1 ms to 10 s it lies within [true / 2, true], true = interval / the ideal step of
the job on the ideal twin (the engine alone on the non-blocking fabric, the independent reference)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario.loader import LIMITS, ScenarioError, iteration_estimate, load_scenario
from ainet_gym.sim.ideal import IdealTimes
from ainet_gym.sim.placement import place_job

FABRICS = {
    "spine-leaf": {
        "topology": "spine_leaf", "leaves": 4, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 8,
        "nic_gbps": 400, "uplink_gbps": 400,
    },
    "shared-nic": {
        "topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 8,
        "gpus_per_nic": 4, "nic_gbps": 400, "uplink_gbps": 400, "profile": "roce",
    },
}  # fmt: skip
COLLECTIVES = {
    "ring": {"op": "allreduce", "algorithm": "ring"},
    "halving-doubling": {"op": "allreduce", "algorithm": "halving_doubling"},
    "tree": {"op": "allreduce", "algorithm": "tree"},
    "hierarchical x16": {"op": "allreduce", "algorithm": "hierarchical", "chunks": 16},
    "alltoall": {"op": "alltoall"},
    "sendrecv": {"op": "sendrecv", "pattern": "shift:8"},
}
SIZES = [8 * 10**k for k in range(10)]  # 8 B .. 8 GB
INTERVALS_MS = [1.0, 10.0, 100.0, 1000.0, 10000.0]


def _scenario(fabric: dict, coll: dict, size: float, interval_ms: float, gpus: int = 16) -> dict:
    return {
        "name": "sweep",
        "fabric": fabric,
        "workload": {
            "jobs": [{"name": "a", "gpus": gpus, "compute_ms": 0.0, "collectives": [{**coll, "bytes": size}]}]
        },
        "dynamics": {"decision_interval_ms": interval_ms},
    }


def sweep_rows(fabrics=FABRICS, collectives=COLLECTIVES, sizes=SIZES, intervals=INTERVALS_MS):
    """(fabric, collective, bytes, interval ms, true iterations, estimate) for the whole grid."""
    rows = []
    saved = LIMITS["iterations_per_interval"]
    LIMITS["iterations_per_interval"] = float("inf")  # measure, do not refuse
    try:
        for fname, fab in fabrics.items():
            for cname, coll in collectives.items():
                for size in sizes:
                    sc = load_scenario(_scenario(fab, coll, size, intervals[0]))
                    f = build_fabric(sc.fabric)
                    job = sc.jobs[0]
                    gpus = place_job(f, job, np.ones(f.n_gpus, bool), np.random.default_rng(0))
                    ideal = IdealTimes(f, sc.routing.max_paths, "numpy").times(job, gpus)[0]
                    for interval in intervals:  # the same scenario with each interval
                        dyn = replace(sc.dynamics, decision_interval_ms=interval)
                        est = iteration_estimate(replace(sc, dynamics=dyn))
                        rows.append(
                            (fname, cname, size, interval, interval * 1e-3 / ideal, est["iterations"])
                        )
    finally:
        LIMITS["iterations_per_interval"] = saved
    return rows


def test_the_estimate_lies_within_half_and_all_of_the_true_count() -> None:
    """Fails on the old code: the fastest link and no latency made an 8 KB ring 240x too fast."""
    rows = sweep_rows()
    assert len(rows) == len(FABRICS) * len(COLLECTIVES) * len(SIZES) * len(INTERVALS_MS)
    bad = [r for r in rows if not r[4] / 2 <= r[5] <= r[4]]
    assert not bad, bad[:5]


def test_a_short_ring_and_a_long_rail_interval_are_accepted_and_a_real_overload_is_refused() -> None:
    # an 8 KB ring AllReduce (0.140 ms a step on 128 GPUs) with a 7 ms interval: 50 iterations, accepted
    sc = load_scenario("spine-leaf-2to1")
    raw = dict(sc.raw)
    raw["workload"] = {
        "jobs": [
            {"name": "a", "gpus": 128, "compute_ms": 0, "collectives": [{"op": "allreduce", "bytes": 8192}]}
        ]
    }
    raw["dynamics"] = {"decision_interval_ms": 7}
    est = iteration_estimate(load_scenario(raw))
    assert 20 < est["iterations"] < 60
    # a 1 GiB hierarchical AllReduce on a rail fabric with a 1 s interval: a few hundred iterations
    rail = {
        "topology": "rail_optimized", "hosts": 4, "gpus_per_host": 8, "spines": 2, "nic_gbps": 400,
        "uplink_gbps": 400,
    }  # fmt: skip
    coll = {"op": "allreduce", "algorithm": "hierarchical"}
    est = iteration_estimate(load_scenario(_scenario(rail, coll, 2**30, 1000.0, gpus=32)))
    assert 50 < est["iterations"] < 1000
    # 8 B every 10 s is far above the limit: refused, naming the interval and the key
    with pytest.raises(ScenarioError, match=r"decision_interval_ms.*LIMITS\['iterations_per_interval'\]"):
        load_scenario(_scenario(FABRICS["spine-leaf"], COLLECTIVES["ring"], 8, 10000.0))


def test_a_yaml_merge_key_with_an_override_is_accepted(tmp_path) -> None:
    """Fails on the old code: the merged key and its override were reported as a duplicate key."""
    f = tmp_path / "m.yaml"
    f.write_text(
        "name: m\n"
        "fabric: {topology: single_switch, hosts: 4, gpus_per_host: 4, nic_gbps: 400}\n"
        "workload:\n  jobs:\n"
        "    - &a {name: a, gpus: 8, compute_ms: 10, collectives: [{op: allreduce, bytes: 1.0e8}]}\n"
        "    - <<: *a\n      name: b\n      compute_ms: 20\n"
    )
    sc = load_scenario(f)
    assert [(j.name, j.compute_ms, j.gpus) for j in sc.jobs] == [("a", 10.0, 8), ("b", 20.0, 8)]
    f.write_text(f.read_text() + "      name: c\n")  # a key written twice by hand is still a duplicate
    with pytest.raises(ScenarioError, match="duplicate key 'name'"):
        load_scenario(f)
