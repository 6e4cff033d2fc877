"""Hypothesis strategies shared by the event-loop property tests (the incremental allocator's and the group
clocks'): small spine-leaf scenarios whose events stress the lazy kernel."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st


@st.composite
def event_scenarios(
    draw,
    name: str = "random-incremental",
    weights: tuple[float, ...] = (0.25, 1.0, 2.0, 3.0, 7.5),
    storage: bool = False,
) -> dict:
    """A small spine-leaf with a few jobs: AllToAll (skewed or not), ring AllReduce, sendrecv shifts; half of
    them with share weights per job drawn from ``weights`` (the lazy kernel's weighted levels, issue-28zc); with
    ``storage``, storage background traffic in half of them (flows with no end: progress only)."""
    leaves, hosts, gpn = draw(st.integers(2, 4)), draw(st.integers(1, 2)), draw(st.sampled_from([2, 4]))
    n = leaves * hosts * gpn
    jobs, used, weighted = [], 0, draw(st.booleans())
    for j in range(draw(st.integers(1, 3))):
        g = draw(st.integers(2, max(2, n // 2)))
        if used + g > n:
            break
        op = draw(st.sampled_from(["alltoall", "alltoall", "allreduce", "sendrecv"]))
        coll = {"op": op, "bytes": draw(st.sampled_from([1e7, 3.3e7, 1e8]))}
        if op == "alltoall":
            coll["skew"] = draw(st.sampled_from([0.0, 0.5, 1.0]))
        if op == "sendrecv":
            coll["pattern"] = f"shift:{draw(st.integers(1, g - 1))}"
        jobs.append({"name": f"j{j}", "gpus": g, "placement": list(range(used, used + g)),
                     "compute_ms": draw(st.sampled_from([0.1, 1.0, 2.0, 3.5])), "collectives": [coll],
                     # overlap 1 without latency: the last flows complete and the next iteration's start at
                     # one event (a flow leaves and joins the active set at once)
                     "overlap": draw(st.sampled_from([0.0, 0.5, 1.0]))})  # fmt: skip
        if weighted:
            jobs[-1]["share_weight"] = draw(st.sampled_from(list(weights)))
        used += g
    fabric = {"topology": "spine_leaf", "leaves": leaves, "spines": draw(st.integers(1, 3)),
              "hosts_per_leaf": hosts, "gpus_per_host": gpn, "nic_gbps": 400,
              "uplink_gbps": draw(st.sampled_from([100, 200, 400])),
              "hop_latency_us": draw(st.sampled_from([0.0, 0.25]))}  # fmt: skip
    workload: dict = {"jobs": jobs}
    if storage and draw(st.booleans()):
        fabric["storage"] = {"hosts": 1, "gbps": 400}
        workload["background"] = [{"kind": draw(st.sampled_from(["storage", "checkpoint"])),
                                   "gbps": draw(st.sampled_from([50.0, 400.0])), "pattern": "periodic",
                                   "period_steps": 2, "duration_steps": 1}]  # fmt: skip
    return {"name": name, "fabric": fabric, "workload": workload,
            "dynamics": {"decision_interval_ms": 5.0}, "routing": {"max_paths": 4}}  # fmt: skip


def random_splits(scenario: dict, seed: int, split_seed: int, n: int = 4) -> list[np.ndarray]:
    """``n`` splits for ``scenario``'s first ``n`` intervals (episode seed ``seed``): each, with odds 0.7, a
    random split over the live paths (rows normalised), else the default: random splits move flows between
    rates, groups and levels from one interval to the next."""
    from ainet_gym.sim.world import FabricWorld

    probe = FabricWorld(scenario, 1)
    probe.reset(seeds=[seed])
    rng = np.random.default_rng(split_seed)
    splits = []
    for _ in range(n):
        s = probe.default_split()
        if rng.random() < 0.7:
            x = rng.random(s.shape) * probe.live_paths()
            tot = x.sum(axis=1, keepdims=True)
            s = np.where(tot > 0, x / np.maximum(tot, 1e-300), s)
        splits.append(s)
    return splits
