"""`rail-4to1-scattered-jitter` (docs/learning.md, issue-26zb2): the rail-optimised fabric its header states
(128 GPUs, 8 rail leaves, spine tier tapered 4:1, counted by hand from the built links), jobs of two GPUs on
every host whose every host-crossing ring hop changes rail, and a seed that changes the episode."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ainet_gym import load_scenario, simulate
from ainet_gym.fabric.topology import build_fabric

PATH = Path(__file__).resolve().parents[2] / "scenarios" / "rail-4to1-scattered-jitter.yaml"


def test_rail_leaf_down_over_spine_up_capacity_is_4_to_1_by_hand() -> None:
    sc = load_scenario(PATH)
    f = build_fabric(sc.fabric)
    assert f.n_gpus == 128
    names = list(f.node_names)
    src = [names[s] for s in f.link_src]
    dst = [names[d] for d in f.link_dst]
    gbps = np.asarray(f.link_gbps, dtype=float)
    leaves = sorted({d for d in dst if d.startswith("leaf")})
    assert len(leaves) == 8, leaves  # one rail leaf per local rank
    for leaf in leaves:
        # capacity from the NICs into the rail leaf, and from the rail leaf up to the spines
        down = sum(
            g for s, d, g in zip(src, dst, gbps, strict=True) if d == leaf and not s.startswith("spine")
        )
        up = sum(g for s, d, g in zip(src, dst, gbps, strict=True) if s == leaf and d.startswith("spine"))
        assert down == pytest.approx(16 * 400), (leaf, down)
        assert down / up == pytest.approx(4.0), (leaf, down, up)


def test_every_host_crossing_ring_hop_changes_rail() -> None:
    sc = load_scenario(PATH)
    used = np.concatenate([np.asarray(j.placement) for j in sc.jobs])
    assert np.sort(used).tolist() == list(range(128)), "every GPU runs exactly one job"
    for j in sc.jobs:
        ranks = np.asarray(j.placement)
        host, rail = ranks // 8, ranks % 8
        assert np.bincount(host, minlength=16).tolist() == [2] * 16, j.name
        nxt = np.roll(ranks, -1)  # ring neighbour, with the wrap-around
        crossing = host != nxt // 8
        assert crossing.sum() == 16, j.name  # one NIC hop out of every host
        assert (rail[crossing] != (nxt % 8)[crossing]).all(), j.name


def test_the_seed_changes_the_episode_under_spray() -> None:
    utils = []
    for seed in range(3):
        out = simulate(PATH, policy="spray+bg", steps=8, seed=seed)
        utils.append(
            np.nanmean([j["gpu_utilization"] for st in out["steps"] for j in st["jobs"]], dtype=float)
        )
    assert np.unique(np.round(utils, 9)).size == 3, utils
