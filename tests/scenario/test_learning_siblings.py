"""The siblings of ``spine-leaf-2to1-jitter`` surveyed for learning headroom (docs/learning.md, "Two more
scenarios?"): each loads, builds the fabric its header describes (GPUs, oversubscription by hand), has the
ideal ring times and start windows its header states, and its seed changes the episode under a fixed
routing (``spray+bg`` hashes nothing, so what varies is the jobs' drawn phases)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ainet_gym import load_scenario, simulate
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.sim.world import FabricWorld

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"

#: name -> (GPUs, leaf oversubscription by hand: down capacity / up capacity; None for the graph fabric)
SIBLINGS: dict[str, tuple[int, float | None]] = {
    "spine-leaf-4to1-jitter": (128, 16 * 400 / (4 * 1 * 400)),
    "spine-leaf-4to1-200g-jitter": (128, 16 * 400 / (4 * 2 * 200)),
    "spine-leaf-3to1-bundle-jitter": (128, 16 * 400 / (4 * 2 * 266.667)),
    "spine-leaf-3to1-jitter": (96, 24 * 400 / (4 * 2 * 400)),
    "spine-leaf-2to1-mixed-jitter": (128, 2.0),
    "spine-leaf-2to1-four-sizes-jitter": (128, 2.0),
    "spine-leaf-4to1-mixed-jitter": (128, 4.0),
    "spine-leaf-4to1-64-jitter": (64, 4.0),
    "clos3-2pods-dp-jitter": (64, None),
    "clos3-2pods-4to1-dp-jitter": (64, None),
    "dual-plane-4to1-dp-jitter": (32, None),
}


def _path(name: str) -> Path:
    return SCENARIO_DIR / f"{name}.yaml"


@pytest.mark.parametrize("name", sorted(SIBLINGS))
def test_fabric_size_and_oversubscription_by_hand(name: str) -> None:
    sc = load_scenario(_path(name))
    f = build_fabric(sc.fabric)
    gpus, oversub = SIBLINGS[name]
    assert f.n_gpus == gpus
    assert sum(j.gpus for j in sc.jobs) == gpus, "every GPU runs a job"
    if oversub is not None:
        assert f.oversubscription() == pytest.approx(oversub, rel=1e-4)


@pytest.mark.parametrize("name", sorted(SIBLINGS))
def test_ideal_ring_times_and_start_windows_as_the_header_states(name: str) -> None:
    sc = load_scenario(_path(name))
    world = FabricWorld(sc, batch=1)
    world.reset(seeds=[0])
    n = len(sc.jobs)
    comm_ms = world.job_ideal_comm_s[0, :n] * 1e3
    step_ms = world.job_ideal_step_s[0, :n] * 1e3
    for j, c, s in zip(sc.jobs, comm_ms, step_ms, strict=True):
        (coll,) = j.collectives
        # ring AllReduce on a non-blocking fabric: 2 (p-1)/p S over a 400G (50 GB/s) NIC, plus the ring's
        # latency (at most 1.6e-3 of it on these scenarios, measured 2026-12-05: about 2x)
        assert c == pytest.approx(2 * (j.gpus - 1) / j.gpus * coll.bytes / 50e9 * 1e3, rel=3.5e-3), j.name
        assert s == pytest.approx(j.compute_ms + c, rel=1e-6), j.name
        # the start window: one ideal step, rounded up to 10 ms
        assert j.start_jitter_ms == 10 * math.ceil(s / 10), (j.name, j.start_jitter_ms, s)


@pytest.mark.parametrize("name", sorted(SIBLINGS))
def test_the_seed_changes_the_episode_under_a_fixed_routing(name: str) -> None:
    utils = []
    for seed in range(3):
        out = simulate(_path(name), policy="spray+bg", steps=8, seed=seed)
        utils.append(
            np.nanmean([j["gpu_utilization"] for st in out["steps"] for j in st["jobs"]], dtype=float)
        )
    assert np.unique(np.round(utils, 9)).size == 3, utils


@pytest.mark.parametrize("name", ["clos3-2pods-dp-jitter", "clos3-2pods-4to1-dp-jitter"])
def test_clos3_jobs_cross_the_core_at_every_ring_hop(name: str) -> None:
    sc = load_scenario(_path(name))
    f = build_fabric(sc.fabric)
    pods = np.where(np.arange(f.n_gpus) < 32, 0, 1)  # clos3-2pods.edges: gpu0-31 in pod 0, gpu32-63 in pod 1
    used = np.concatenate([np.asarray(j.placement) for j in sc.jobs])
    assert np.sort(used).tolist() == list(range(64))
    for j in sc.jobs:
        ranks = np.asarray(j.placement)
        # ring neighbours (with the wrap-around) always sit in different pods
        assert (pods[ranks] != pods[np.roll(ranks, -1)]).all(), j.name
        # and on every leaf (8 GPUs each) of both pods, two GPUs per job
        assert np.bincount(ranks // 8, minlength=8).tolist() == [2] * 8, j.name


@pytest.mark.parametrize(
    ("name", "ratio"), [("clos3-2pods-dp-jitter", 2.0), ("clos3-2pods-4to1-dp-jitter", 4.0)]
)
def test_clos3_pod_to_core_oversubscription_by_hand(name: str, ratio: float) -> None:
    """Per pod, the GPUs' NIC capacity over the capacity from its aggregation switches up to the cores: 2:1
    in `clos3-2pods`, 4:1 in the thin-core copy (the same graph, every aggregation-core link at 200G)."""
    f = build_fabric(load_scenario(_path(name)).fabric)
    names = list(f.node_names)
    src = [names[s] for s in f.link_src]
    dst = [names[d] for d in f.link_dst]
    for pod in ("p0", "p1"):
        nic = sum(
            g
            for s, d, g in zip(src, dst, f.link_gbps, strict=True)
            if s.startswith("gpu") and d.startswith(pod)
        )
        up = sum(
            g
            for s, d, g in zip(src, dst, f.link_gbps, strict=True)
            if s.startswith(f"{pod}agg") and d.startswith("core")
        )
        assert nic == 32 * 400
        assert nic / up == pytest.approx(ratio), (pod, nic, up)


def _links(name: str) -> list[tuple[str, str, float]]:
    """(source node, destination node, Gb/s) of every directed link of ``name``'s built fabric."""
    f = build_fabric(load_scenario(_path(name)).fabric)
    names = list(f.node_names)
    return [
        (names[s], names[d], float(g)) for s, d, g in zip(f.link_src, f.link_dst, f.link_gbps, strict=True)
    ]


@pytest.mark.parametrize(("name", "ratio"), [("dual-plane", 1.0), ("dual-plane-4to1-dp-jitter", 4.0)])
def test_dual_plane_tor_to_spine_oversubscription_by_hand(name: str, ratio: float) -> None:
    """Per plane (a, b) and segment (ToR 0, 1): the NIC ports' capacity into the ToR over the ToR's capacity
    up to the plane's spines: 16 x 200G over 8 x 400G (1:1) in `dual-plane`, over 8 x 100G (4:1) in the
    tapered copy (the same graph, every ToR-spine link at 100G); a wrong taper or a missing link fails."""
    links = _links(name)
    for plane in "ab":
        for seg in "01":
            tor = f"tor{plane}{seg}"
            down = [g for s, d, g in links if s.startswith("gpu") and d == tor]
            up = [g for s, d, g in links if s == tor and d.startswith(f"spine{plane}")]
            assert down == [200.0] * 16, (tor, down)
            assert len(up) == 8, (tor, up)
            assert sum(down) / sum(up) == pytest.approx(ratio), (tor, sum(down), sum(up))
    # the planes share nothing but the NICs: no ToR reaches the other plane's spines
    assert not [(s, d) for s, d, _ in links if s.startswith("tora") and d.startswith("spineb")]
    assert not [(s, d) for s, d, _ in links if s.startswith("torb") and d.startswith("spinea")]


def test_dual_plane_4to1_rings_cross_the_spines_at_every_hop() -> None:
    """Each job has the same local rank on every host, and its ring alternates between the segments, so
    every ring hop (with the wrap-around) crosses the tapered spine tier and none rides NVLink."""
    sc = load_scenario(_path("dual-plane-4to1-dp-jitter"))
    links = _links("dual-plane-4to1-dp-jitter")
    seg = {int(s[3:]): int(d[-1]) for s, d, _ in links if s.startswith("gpu") and d.startswith("tor")}
    used = np.concatenate([np.asarray(j.placement) for j in sc.jobs])
    assert np.sort(used).tolist() == list(range(32)), "every GPU runs one job"
    for slot, j in enumerate(sc.jobs):
        ranks = np.asarray(j.placement)
        assert (ranks % 4 == slot).all(), j.name  # one GPU (local rank `slot`) per host, 4 GPUs a host
        segs = np.array([seg[int(r)] for r in ranks])
        assert (segs != np.roll(segs, -1)).all(), (j.name, segs)
