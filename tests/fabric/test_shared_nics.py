"""GPUs that share a NIC (``gpus_per_nic``, ``pcie_gbps``): the fabric's links and paths, and the time of a
transfer through a shared NIC.

Every expected number is recomputed here from a closed form, never taken from the engine:

- a ring over hosts that each have one NIC of bandwidth B: 2 (p-1)/p S / B (the p - 1 NVLink hops of a
  host are faster; the one hop that leaves a host crosses the NIC); hierarchical AllReduce on g GPUs x h
  hosts with one NIC per host: 2 (g-1)/g S / B_nvlink + 2 (h-1)/h S / B_nic (the g rail rings share it);
- k GPUs behind one NIC, each sending S off the host: S / min(B_pcie, B_nic / k); alpha counts 4 links.
"""

from __future__ import annotations

import numpy as np
import pytest
from _scenarios import S, bps, one_job, one_job_on_a_switch, step_world

import ainet_gym
from ainet_gym.fabric.topology import TIERS, build_fabric
from ainet_gym.scenario.loader import ScenarioError, load_scenario

ONE_NIC = {"gpus_per_host": 8, "gpus_per_nic": 8, "nic_gbps": 100.0, "nvlink_gbps": 3600.0}


TWO_HOST_FABRICS = {
    "single_switch": {"topology": "single_switch", "hosts": 2},
    "spine_leaf": {"topology": "spine_leaf", "leaves": 2, "hosts_per_leaf": 1, "spines": 2},
    "rail_optimized": {"topology": "rail_optimized", "hosts": 2, "spines": 2},
}


@pytest.mark.parametrize("topology", sorted(TWO_HOST_FABRICS))
def test_one_nic_per_host_flat_ring_runs_at_the_nic_rate(topology):
    """2 hosts x 8 GPUs, one 100 Gb/s NIC per host: a flat 16-rank ring takes 2(p-1)/p S / B_nic = 150 ms."""
    p = 16
    expected = 2 * (p - 1) / p * S / bps(100.0)
    assert expected == pytest.approx(0.150)
    d = one_job(
        {**TWO_HOST_FABRICS[topology], **ONE_NIC},
        {"gpus": p, "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": S}]},
        interval_ms=3.5 * (1.0 + expected * 1e3),
    )
    _, res = step_world(d)
    assert res.iterations[0, 0] >= 3
    assert res.comm_time_s[0, 0] == pytest.approx(expected, rel=1e-9)


def test_one_nic_per_host_hierarchical_allreduce_shares_the_nic_between_rails():
    g, h, nvl = 8, 2, 3600.0
    expected = 2 * (g - 1) / g * S / bps(nvl) + 2 * (h - 1) / h * S / bps(100.0)
    d = one_job(
        {**TWO_HOST_FABRICS["single_switch"], **ONE_NIC},
        {"gpus": g * h, "collectives": [{"op": "allreduce", "algorithm": "hierarchical", "bytes": S}]},
        interval_ms=3.5 * (1.0 + expected * 1e3),
    )
    _, res = step_world(d)
    assert res.comm_time_s[0, 0] == pytest.approx(expected, rel=1e-9)
    flat = 2 * 15 / 16 * S / bps(100.0)
    assert flat / expected == pytest.approx(0.150 / (0.080 + 2 * 7 / 8 / 450.0), rel=1e-9)  # 1.788


@pytest.mark.parametrize(("k", "nic", "pcie"), [(2, 400.0, 50.0), (4, 400.0, 400.0), (4, 100.0, 256.0)])
def test_shared_nic_rate_is_min_of_pcie_and_nic_share(k, nic, pcie):
    """Every GPU of host 0 sends S to its peer on host 1 (shift by gpus_per_host): the k GPUs of a NIC
    share it, each behind its own PCIe link; alpha counts pcie, nic, nic, pcie = 4 links."""
    gph, lat_us = 4, 1.0
    expected = 4 * lat_us * 1e-6 + S / min(bps(pcie), bps(nic) / k)
    fabric = {
        "topology": "single_switch",
        "hosts": 2,
        "gpus_per_host": gph,
        "gpus_per_nic": k,
        "nic_gbps": nic,
        "pcie_gbps": pcie,
    }
    job = {"gpus": 2 * gph, "collectives": [{"op": "sendrecv", "pattern": f"shift:{gph}", "bytes": S}]}
    _, res = step_world(one_job(fabric, job, 3.5 * (1.0 + expected * 1e3), latency_us=lat_us))
    assert res.comm_time_s[0, 0] == pytest.approx(expected, rel=1e-9)


def test_gpus_per_nic_1_is_todays_fabric_and_one_nic_per_host_adds_pcie():
    base = {"topology": "spine_leaf", "leaves": 2, "hosts_per_leaf": 2, "gpus_per_host": 4}
    a = build_fabric(load_scenario(one_job(base, {"gpus": 2}, 10.0)).fabric)
    b = build_fabric(load_scenario(one_job({**base, "gpus_per_nic": 1}, {"gpus": 2}, 10.0)).fabric)
    for name in ("link_src", "link_dst", "link_gbps", "link_tier", "link_group", "endpoint_up"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert b.endpoint_pcie_up is None and b.max_hops == 4
    c = build_fabric(load_scenario(one_job({**base, "gpus_per_nic": 4}, {"gpus": 2}, 10.0)).fabric)
    nic = TIERS.index("nic")
    assert (c.link_tier == nic).sum() == 2 * 4  # one duplex NIC link per host
    assert (c.link_tier == TIERS.index("pcie")).sum() == 2 * 16  # one duplex PCIe link per GPU
    assert c.max_hops == 6
    assert len(c.paths(0, 4)) == 1 and len(c.paths(0, 4)[0]) == 4  # same leaf, other host
    assert len(c.paths(0, 8)[0]) == 6  # other leaf: pcie, nic, up, down, nic, pcie
    assert c.paths(0, 1) == [[int(c.gpu_nvl_up[0]), int(c.gpu_nvl_down[1])]]  # NVLink inside a host


def test_fat_tree_with_shared_nics_puts_one_nic_per_edge_port():
    d = one_job({"topology": "fat_tree", "k": 4, "gpus_per_host": 4, "gpus_per_nic": 2}, {"gpus": 2}, 10.0)
    sc = load_scenario(d)
    f = build_fabric(sc.fabric)
    assert f.n_gpus == ainet_gym.scenario.loader.fabric_gpu_count(sc.fabric) == 16 * 2
    nic_up = f.endpoint_up[: f.n_gpus]
    assert np.unique(nic_up).size == 16  # k^3/4 edge ports, one NIC each
    assert np.all(np.bincount(f.endpoint_leaf[: f.n_gpus]) == 4)  # k/2 NICs x 2 GPUs per edge switch


@pytest.mark.parametrize(
    ("fabric", "match"),
    [
        ({"gpus_per_nic": 0}, r"fabric\.gpus_per_nic: 0 is out of range; allowed: an integer in \[1, "),
        (
            {"gpus_per_nic": 3},
            r"fabric\.gpus_per_nic: gpus_per_nic=3 does not divide gpus_per_host=4.*a divisor of 4",
        ),
        (
            {"gpus_per_nic": 2, "pcie_gbps": 0},
            r"fabric\.pcie_gbps: 0 is out of range; allowed: a number in \[0\.001, ",
        ),
        ({"pcie_gbps": 100}, r"fabric\.pcie_gbps: pcie_gbps applies only to GPUs that share a NIC"),
        (
            {"file": "x.graphml"},
            r"fabric\.file: key 'file' is not used by the single_switch topology \(it applies to graph\)",
        ),
    ],
)
def test_the_nic_sharing_and_graph_file_keys_are_validated(fabric, match):
    with pytest.raises(ScenarioError, match=match):
        load_scenario(one_job_on_a_switch(**fabric))
