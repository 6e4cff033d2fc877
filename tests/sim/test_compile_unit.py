"""compile_job's shared job tables (issue-31zi2): a job compiled again with the same collectives, GPUs, hosts,
rotation, carry flows and ring run-ahead reuses its tables; anything else they depend on gives its own."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

from ainet_gym import load_scenario
from ainet_gym.envs.env import FabricRoutingEnv
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario.spec import CollectiveSpec, JobSpec
from ainet_gym.sim import compile_unit
from ainet_gym.sim.unit import CompiledUnit

COLLECTIVES = (
    CollectiveSpec("alltoall", 1.0e8, skew=1.0, skew_period_steps=1, group_size=4, group_stride=2),
    CollectiveSpec("allreduce", 2.0e8, algorithm="hierarchical"),
    CollectiveSpec("allreduce", 3.0e8, group_size=2),
)
JOB = JobSpec("j", 8, collectives=COLLECTIVES)


def _fabric(gpus_per_host: int):
    sc = load_scenario({
        "name": "t", "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 8 // gpus_per_host,
                                "gpus_per_host": gpus_per_host},
        "workload": {"jobs": [{"name": "j", "gpus": 8, "collectives": [{"op": "allreduce", "bytes": 1.0e6}]}]},
    })  # fmt: skip
    return build_fabric(sc.fabric, max_paths=sc.routing.max_paths)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The calls of job_tables, with the shared tables emptied before and after."""
    calls: list[int] = []
    inner = compile_unit.job_tables

    def job_tables(*args: object) -> object:
        calls.append(1)
        return inner(*args)

    monkeypatch.setattr(compile_unit, "job_tables", job_tables)
    compile_unit._JOB_TABLES.clear()
    yield calls
    compile_unit._JOB_TABLES.clear()


def assert_same_unit(a: CompiledUnit, b: CompiledUnit) -> None:
    for f in dataclasses.fields(CompiledUnit):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


def test_a_job_compiled_again_on_the_same_gpus_takes_its_tables_once(counted: list[int]) -> None:
    fab, gpus = _fabric(4), np.arange(8)
    a = compile_unit.compile_job(fab, JOB, gpus)
    b = compile_unit.compile_job(fab, dataclasses.replace(JOB, name="k", start_ms=5.0), gpus, 0)
    assert len(counted) == 1
    assert_same_unit(a, dataclasses.replace(b, name="j", start_s=0.0, conn_key=a.conn_key))
    # the units' own arrays are their own (copied from the shared lists)
    assert not np.shares_memory(a.member_flow, b.member_flow) and not np.shares_memory(
        a.flow_bytes, b.flow_bytes
    )


def test_shared_job_tables_follow_what_the_tables_depend_on(counted: list[int]) -> None:
    # every argument the tables depend on, varied one at a time from the first, all compiled with the shared
    # tables kept, then each compiled alone (the shared tables emptied first): a key that left one out would
    # hand an earlier variant's tables to a later one
    four, two = _fabric(4), _fabric(2)
    perm = np.array([1, 0, 3, 2, 5, 4, 7, 6])
    variants = [
        (four, np.arange(8), 0, False, None),
        (four, np.arange(8), 1, False, None),  # the skewed AllToAll's rotation
        (four, np.arange(8), 0, True, None),  # carry flows
        (four, np.arange(8), 0, False, 5.0e7),  # rings cut into segments
        (four, perm, 0, False, None),  # other GPU ids
        (two, np.arange(8), 0, False, None),  # the same GPU ids on other hosts (the hierarchical allreduce)
    ]
    shared = [
        compile_unit.compile_job(f, JOB, g, r, carry=c, ring_run_ahead_bytes=s) for f, g, r, c, s in variants
    ]
    assert len(counted) == len(variants)
    for (f, g, r, c, s), unit in zip(variants, shared, strict=True):
        compile_unit._JOB_TABLES.clear()
        assert_same_unit(unit, compile_unit.compile_job(f, JOB, g, r, carry=c, ring_run_ahead_bytes=s))
    assert len(
        {u.flow_bytes.tobytes() + u.member_conn.tobytes() + u.conn_src.tobytes() for u in shared}
    ) == len(variants)


def test_an_env_construction_takes_its_job_tables_once(counted: list[int]) -> None:
    # the slot width, the ideal step time (on the non-blocking copy of the fabric) and the reset compile the
    # job on the same GPUs (three job_tables calls before issue-31zi2)
    sc = load_scenario({
        "name": "t", "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 4},
        "workload": {"jobs": [{"name": "j", "gpus": 16, "collectives": [
            {"op": "alltoall", "bytes": 1.0e8, "group_size": 4, "group_stride": 4},
            {"op": "allreduce", "bytes": 2.0e8, "group_size": 4}]}]},
        "dynamics": {"decision_interval_ms": 50.0},
    })  # fmt: skip
    env = FabricRoutingEnv(sc, backend="numpy")
    env.reset(seed=0)
    assert len(counted) == 1
