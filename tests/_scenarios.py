"""Small scenario dicts shared by the env and agent tests."""

from __future__ import annotations

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
