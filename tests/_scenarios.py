"""Small scenario dicts shared by the env and agent tests."""

from __future__ import annotations


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
        "fabric": {
            "topology": "spine_leaf",
            "leaves": 4,
            "spines": 2,
            "hosts_per_leaf": 2,
            "gpus_per_host": 2,
            "nic_gbps": 400,
            "uplink_gbps": 400,
            "storage": {"hosts": 1, "gbps": 400},
        },
        "workload": {
            "jobs": two_ring_jobs(),
            "background": [{"kind": "storage", "gbps": 200, "pattern": "periodic", "period_steps": 3}],
        },
        "dynamics": {"episode_steps": episode_steps, **dynamics},
        "routing": {"max_paths": 4},
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
        "fabric": {
            "topology": "spine_leaf",
            "leaves": 2,
            "spines": 2,
            "hosts_per_leaf": 2,
            "gpus_per_host": 1,
            "hop_latency_us": 0.0,
        },
        "workload": {
            "jobs": [{**job, "name": "a", "placement": [0, 2]}, {**job, "name": "b", "placement": [1, 3]}]
        },
        "dynamics": {"episode_steps": 4, "decision_interval_ms": 30},
        "routing": {"max_paths": 2},
    }
