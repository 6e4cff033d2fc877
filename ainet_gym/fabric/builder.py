"""A fabric under construction: the nodes and directed links that a built-in topology
(:mod:`.builtin`), a graph (:mod:`.graph_input`) or the non-blocking reference (:mod:`.nonblocking`) adds,
and :func:`~ainet_gym.fabric.flatten.flatten` turns into a :class:`~ainet_gym.fabric.record.Fabric`."""

from __future__ import annotations

from ainet_gym.fabric.record import TIER_INDEX
from ainet_gym.scenario.spec import FabricSpec

__all__ = ["Builder"]


class Builder:
    """Nodes and directed links of a fabric under construction (the input of :func:`flatten`)."""

    def __init__(self, spec: FabricSpec) -> None:
        self.spec = spec
        self.names: list[str] = []
        self.kinds: list[str] = []
        self.src: list[int] = []
        self.dst: list[int] = []
        self.gbps: list[float] = []
        self.tier: list[int] = []
        self.latency_s: list[float] = []
        self.parallel: dict[tuple[int, int], list[int]] = {}
        self.gpus: list[int] = []  # node id of each GPU, GPU id order (host-major)
        self.gpu_host: list[int] = []
        self.storage: list[int] = []  # node id of each storage host
        self.leaves: list[int] | None = None  # leaf switches in leaf-id order (None: derived)

    def node(self, name: str, kind: str) -> int:
        i = len(self.names)
        self.names.append(name)
        self.kinds.append(kind)
        return i

    def link(self, u: int, v: int, gbps: float, tier: str, latency_s: float | None = None) -> int:
        i = len(self.src)
        self.src.append(u)
        self.dst.append(v)
        self.gbps.append(float(gbps))
        self.tier.append(TIER_INDEX[tier])
        self.latency_s.append(self.spec.hop_latency_us * 1e-6 if latency_s is None else float(latency_s))
        self.parallel.setdefault((u, v), []).append(i)
        return i

    def duplex(self, u: int, v: int, gbps: float, tier: str) -> tuple[int, int]:
        return self.link(u, v, gbps, tier), self.link(v, u, gbps, tier)

    def host(self, h: int, gpus: int, attach: list[int], nic_gbps: float) -> None:
        """Host ``h``: an NVLink switch, ``gpus`` GPUs, and one NIC per ``gpus_per_nic`` GPUs, NIC i on
        leaf node ``attach[i]`` (with ``gpus_per_nic: 1`` the GPU is its NIC: one link to the leaf)."""
        spec = self.spec
        k = spec.gpus_per_nic
        nvs = self.node(f"nvswitch{h}", "nvswitch")
        nic = -1
        for r in range(gpus):
            g = len(self.gpus)
            gn = self.node(f"gpu{g}", "gpu")
            self.gpus.append(gn)
            self.gpu_host.append(h)
            self.duplex(gn, nvs, spec.nvlink_gbps, "nvlink")
            if k == 1:
                self.duplex(gn, attach[r], nic_gbps, "nic")
                continue
            if r % k == 0:
                nic = self.node(f"nic{h}.{r // k}", "nic")
                self.duplex(nic, attach[r // k], nic_gbps, "nic")
            self.duplex(gn, nic, spec.pcie_gbps, "pcie")
