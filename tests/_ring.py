"""The 3-rank ring the ring-window tests share (test_ring_window*.py): GPUs 0, 1, 2 on leaves 0, 1, 2, one host
each, joined by two spines, a ring AllReduce after 1 ms of compute, no latency; read as every sub-flow's remainder
in "C ms" (the bytes a 10 Gb/s uplink moves in a millisecond) at chosen times."""

from __future__ import annotations

from ainet_gym.fabric.record import Fabric
from ainet_gym.sim.engine import BatchSim

C = 10e9 / 8  # bytes/s of a 10 Gb/s uplink (link_efficiency 1); the NICs are 20 Gb/s (2 C)
MS = C * 1e-3  # one "C ms" of bytes


def ring_scenario(
    name: str,
    hop: float,
    routing: dict | None = None,
    dynamics: dict | None = None,
    nic_gbps: float = 20,
    uplink_gbps: float = 10,
) -> dict:
    """The ring's scenario dict with ``hop`` bytes per ring hop (an AllReduce of 3/4 ``hop``: 2 (p - 1) / p of
    its bytes per hop with p = 3, four steps of ``hop`` / 4)."""
    sc = {
        "name": name,
        "fabric": {"topology": "spine_leaf", "leaves": 3, "spines": 2, "hosts_per_leaf": 1, "gpus_per_host": 1,
                   "nic_gbps": nic_gbps, "uplink_gbps": uplink_gbps, "hop_latency_us": 0.0,
                   "link_efficiency": 1.0},
        "workload": {"jobs": [{"name": "r", "gpus": 3, "compute_ms": 1.0,
                               "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": 0.75 * hop}]}]},
        "dynamics": {"episode_steps": 4, "decision_interval_ms": 100.0, **(dynamics or {})},
    }  # fmt: skip
    if routing:
        sc["routing"] = routing
    return sc


def remainders(sim: BatchSim) -> dict[str, float]:
    """Each sub-flow's remainder in C ms: A (GPU 0 -> 1), B (1 -> 2), C (2 -> 0), path 0 (spine 0) or 1."""
    hop = {0: "A", 1: "B", 2: "C"}
    return {
        f"{hop[int(sim.conn_src[c])]}{int(q)}": float(sim.state.rem[p]) / MS
        for p, c, q in zip(sim.parts, sim.part_conn, sim.part_path, strict=True)
    }


def remainders_at(sim: BatchSim, times_ms: list[float]) -> list[dict[str, float]]:
    """:func:`remainders` at each time (ms after the communication starts, at 1 ms)."""
    out, now = [], 0.0
    for t in times_ms:
        sim.run_interval((t + 1.0 - now) * 1e-3)
        now = t + 1.0
        out.append(remainders(sim))
    return out


def slow_uplink(sim: BatchSim, fabric: Fabric, factor: float) -> None:
    """The uplink leaf0 -> spine1 (one direction) at ``factor`` x its rate."""
    up = int(fabric.link_ids("leaf0-spine1")[0])
    assert fabric.node_names[fabric.link_src[up]] == "leaf0"
    sim.engine_state.capacity_bytes_per_s[0, up] *= factor
