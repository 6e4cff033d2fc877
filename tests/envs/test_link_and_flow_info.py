"""The env's ``info_keys`` ``links`` and ``flows``: per-link bytes that add up to the NIC tier's, per-slot flow
bytes and rates, and the per-iteration GPU utilisation (compute / step time); an unknown key is refused."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.fabric.topology import TIERS


def test_env_info_links_and_flows():
    import gymnasium as gym

    env = gym.make("ainet_gym/SpineLeaf-v0", info_keys=["links", "flows"])
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.action_space.sample())
    core = env.unwrapped.core
    f = core.world.fabric
    assert info["link_bytes"].shape == (f.n_links,)
    nic_tier = f.link_tier == TIERS.index("nic")
    assert info["link_bytes"][nic_tier].sum() == pytest.approx(info["tier_bytes_nic"], rel=1e-12)
    dur = core.world.decision_interval_s
    assert info["throughput_gbps"] == pytest.approx(info["tier_bytes_nic"] / 2 / dur * 8e-9, rel=1e-12)
    assert info["flow_bytes"].shape == (core.n_slots,)
    assert info["flow_rate_gbps"] == pytest.approx(info["flow_bytes"] * 8e-9 / dur)
    for _ in range(3):
        _, _, _, _, info = env.step(env.action_space.sample())
    jobs = core.world.scenario.jobs
    done = info["iterations"][: len(jobs)] > 0
    assert done.any()
    expected = np.array([j.compute_ms for j in jobs]) / info["step_time_ms"][: len(jobs)]
    assert info["iteration_gpu_utilization"][: len(jobs)][done] == pytest.approx(expected[done], rel=1e-12)
    with pytest.raises(ValueError, match=r"info_keys = \['link'\]: unknown 'link'; allowed: links, flows"):
        gym.make("ainet_gym/SpineLeaf-v0", info_keys=["link"])
