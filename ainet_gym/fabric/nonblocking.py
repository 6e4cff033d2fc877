"""The non-blocking reference of ideal step times: the same hosts, NVLink domains, NICs and PCIe links as a
fabric (built-in or graph), every NIC on one non-blocking switch."""

from __future__ import annotations

from dataclasses import replace

from ainet_gym.fabric.builder import Builder
from ainet_gym.fabric.flatten import flatten
from ainet_gym.fabric.record import TIERS, Fabric
from ainet_gym.scenario.spec import FabricSpec, fabric_host_count

__all__ = ["nonblocking_fabric", "nonblocking_spec"]


def nonblocking_spec(spec: FabricSpec) -> FabricSpec:
    """The same hosts on one non-blocking switch (a built-in spec; see :func:`nonblocking_fabric`)."""
    if spec.topology == "graph":
        raise ValueError("a graph fabric has no single_switch spec: use nonblocking_fabric(fabric)")
    nic = spec.link_gbps if spec.topology == "fat_tree" else spec.nic_gbps
    storage = replace(spec.storage, leaves=())
    return replace(
        spec, topology="single_switch", hosts=fabric_host_count(spec), nic_gbps=nic, storage=storage
    )


def nonblocking_fabric(fabric: Fabric) -> Fabric:
    """The same hosts, NVLink domains, NICs and PCIe links as ``fabric``, every NIC on one non-blocking
    switch, no storage: the reference fabric of ideal step times (for any fabric, built-in or graph)."""
    spec = replace(
        fabric.spec,
        topology="single_switch",
        graph=None,
        storage=replace(fabric.spec.storage, hosts=0, leaves=()),
    )
    b = Builder(spec)
    leaf = b.node("leaf0", "leaf")
    lat = fabric.link_latency_s

    def copy(link: int, u: int, v: int) -> None:
        t = TIERS[int(fabric.link_tier[link])]
        la = None if lat is None else float(lat[link])
        b.link(u, v, float(fabric.link_gbps[link]), t, la)

    nic_node: dict[int, int] = {}
    nvs_node: dict[int, int] = {}
    for g in range(fabric.n_gpus):
        h = int(fabric.gpu_host[g])
        if h not in nvs_node:
            nvs_node[h] = b.node(fabric.node_names[int(fabric.link_dst[fabric.gpu_nvl_up[g]])], "nvswitch")
        gn = b.node(fabric.node_names[int(fabric.gpu_node[g])], "gpu")
        b.gpus.append(gn)
        b.gpu_host.append(h)
        copy(int(fabric.gpu_nvl_up[g]), gn, nvs_node[h])
        copy(int(fabric.gpu_nvl_down[g]), nvs_node[h], gn)
        ports = (
            [(int(fabric.endpoint_up[g]), int(fabric.endpoint_down[g]))]
            if fabric.endpoint_ports is None
            else [(up, down) for up, down, _ in fabric.endpoint_ports[g]]
        )
        pcie = -1 if fabric.endpoint_pcie_up is None else int(fabric.endpoint_pcie_up[g])
        if pcie < 0:
            for up, down in ports:
                copy(up, gn, leaf)
                copy(down, leaf, gn)
            continue
        nic = int(fabric.link_src[ports[0][0]])
        if nic not in nic_node:
            nic_node[nic] = b.node(fabric.node_names[nic], "nic")
            for up, down in ports:
                copy(up, nic_node[nic], leaf)
                copy(down, leaf, nic_node[nic])
        copy(pcie, gn, nic_node[nic])
        copy(int(fabric.endpoint_pcie_down[g]), nic_node[nic], gn)
    b.leaves = [leaf]
    return flatten(b, fabric.max_paths, leaf_diameter=0)
