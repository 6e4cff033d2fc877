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
