"""The mixture-of-experts (MoE) scenario family: expert-parallel AllToAll with shifting hot experts, inside a
3D-parallel training job (tensor parallel within a host, expert parallel across hosts, data parallel across
all hosts), on a spine-leaf or a rail-optimised fabric of 8-GPU hosts.

:func:`moe_scenario` builds the scenario dict; the shipped files ``scenarios/moe-3d-*.yaml`` are its output
(``python -m ainet_gym.scenario.moe scenarios`` writes them again). One job on ``N`` GPUs, ranks host-major
(8 per host), with expert-parallel groups of ``E`` GPUs (the same local rank of ``E`` consecutive hosts);
each iteration computes, then runs, each in all its groups at once (``group_size`` / ``group_stride`` of a
collective):

1. token dispatch: AllToAll in every expert-parallel group (size ``E``, stride 8), whose per-destination
   load follows a Zipf law of exponent ``skew`` (the hot experts), rotating by one rank every
   ``skew_period_steps`` decision intervals;
2. token combine: the same AllToAll back;
3. tensor-parallel AllReduce: a ring over the 8 GPUs of every host (NVLink);
4. data-parallel AllReduce of the dense gradients: a ring over the same local rank of every host (size
   ``N / 8``, stride 8);
5. with two expert groups or more, data-parallel AllReduce of the expert gradients across the expert
   groups (size ``N / (8 E)``, stride ``8 E``).

The iteration ends when the slowest group is done (one synchronous job). Per-seed variation: the job starts
after a jitter drawn from the episode seed (``start_jitter_ms``, 500 ms by default: more than one iteration
of every shipped member, about 403 ms at 256 GPUs); with one job that shifts its phase against the interval
grid over a whole iteration, and the hot experts move with the step count (the rotation), so two seeds see
the hot expert at different points of the iteration.

Sizes (per GPU, per iteration; every figure an argument):

- expert-parallel groups of at most 64 GPUs (8 at 256 and 1,024 GPUs, 32 at 16,384 with 4 candidate paths
  per connection, which keeps the scenario under the loader's memory limit): DeepSeek-V3 trains with 64-way expert parallelism over 8
  nodes (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, section 3.2); Mixtral 8x7B has 8 experts per
  layer (Jiang et al., "Mixtral of Experts", 2024), so 8-way expert parallelism places one expert per GPU;
- token dispatch bytes ``tokens x hidden x 2 (BF16) x top_k``, summed over ``layers``: 4,096 tokens per GPU,
  hidden 4,096, top-2 routing and 32 layers are Mixtral 8x7B's; the combine moves the same bytes back;
- hot experts: Zipf exponent 1.0 (the hottest of 8 experts gets ~2.9x the mean load), the imbalance seen
  without (or early in) load balancing (Fedus et al., "Switch Transformers", 2021; Lepikhin et al.,
  "GShard", 2020), shifting to the next expert every interval;
- tensor-parallel activations ``tokens x hidden x 2 x 2 x layers`` (two AllReduces per layer, Megatron-LM:
  Shoeybi et al., 2019); dense gradients ~1.3e9 parameters in BF16 over the 8 tensor-parallel GPUs;
  expert gradients 3.5e8 bytes per GPU;
- compute 150 ms per iteration: communication about as long as computation, the 1:1 ratio DeepSeek-V3
  reports for cross-node expert parallelism (section 3.2.2).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ainet_gym.errors import choice_message

__all__ = ["MOE_FAMILY", "moe_scenario", "write_family"]

GPUS_PER_HOST = 8

#: the shipped members: file name -> (GPUs, topology, expert-parallel group size)
MOE_FAMILY: dict[str, tuple[int, str, int]] = {
    "moe-3d-256-spine-leaf": (256, "spine_leaf", 8),
    "moe-3d-256-rail": (256, "rail_optimized", 8),
    "moe-3d-1024-spine-leaf": (1024, "spine_leaf", 8),
    "moe-3d-1024-rail": (1024, "rail_optimized", 8),
    "moe-3d-16k-spine-leaf": (16384, "spine_leaf", 32),
    "moe-3d-16k-rail": (16384, "rail_optimized", 32),
}


def _fabric(n_gpus: int, topology: str) -> dict[str, Any]:
    """A 2:1 fabric of 8-GPU hosts with 400G NICs: spine-leaf (2, 4 or 16 hosts per leaf by size) or
    rail-optimised (one rail leaf per local rank, half as many 400G uplinks as hosts)."""
    hosts = n_gpus // GPUS_PER_HOST
    if topology == "spine_leaf":
        hpl = 2 if n_gpus <= 512 else (4 if n_gpus <= 4096 else 16)
        uplinks = hpl * GPUS_PER_HOST // 2
        spines = min(uplinks, 32)
        return {"topology": "spine_leaf", "leaves": hosts // hpl, "spines": spines,
                "links_per_spine": uplinks // spines, "hosts_per_leaf": hpl, "gpus_per_host": GPUS_PER_HOST,
                "nic_gbps": 400, "uplink_gbps": 400, "nvlink_gbps": 3600, "profile": "infiniband"}  # fmt: skip
    if topology == "rail_optimized":
        uplinks = max(hosts // 2, 1)
        spines = min(uplinks, 64)
        return {"topology": "rail_optimized", "hosts": hosts, "gpus_per_host": GPUS_PER_HOST, "spines": spines,
                "links_per_spine": uplinks // spines, "nic_gbps": 400, "uplink_gbps": 400, "nvlink_gbps": 3600,
                "profile": "infiniband"}  # fmt: skip
    raise ValueError(choice_message("topology", topology, ("spine_leaf", "rail_optimized")))


def moe_scenario(
    n_gpus: int,
    topology: str = "spine_leaf",
    ep: int = 8,
    *,
    tokens_per_gpu: int = 4096,
    hidden: int = 4096,
    top_k: int = 2,
    layers: int = 32,
    tp_bytes: float | None = None,
    dense_bytes: float = 1.3e9 * 2 / GPUS_PER_HOST,
    expert_bytes: float = 3.5e8,
    compute_ms: float = 150.0,
    skew: float = 1.0,
    skew_period_steps: int = 1,
    start_jitter_ms: float = 500.0,
    episode_steps: int = 48,
    max_paths: int | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """The scenario dict of one MoE training job on ``n_gpus`` GPUs (see the module docstring).

    Raises
    ------
    ValueError
        If ``ep`` is not in 2..64, or ``n_gpus`` is not a multiple of ``8 * ep`` (whole host groups).
    """
    tp_bytes = float(tokens_per_gpu * hidden * 2 * 2 * layers) if tp_bytes is None else tp_bytes
    if not 2 <= ep <= 64:
        raise ValueError(f"ep = {ep!r}: allowed: 2..64 GPUs per expert-parallel group")
    if n_gpus % (GPUS_PER_HOST * ep) or n_gpus <= 0:
        raise ValueError(f"n_gpus = {n_gpus!r}: must be a positive multiple of {GPUS_PER_HOST * ep} (8 x ep)")
    a2a_bytes = float(tokens_per_gpu * hidden * 2 * top_k * layers)
    groups = n_gpus // (GPUS_PER_HOST * ep)
    a2a = {"op": "alltoall", "bytes": a2a_bytes, "skew": skew, "skew_period_steps": skew_period_steps,
           "group_size": ep, "group_stride": GPUS_PER_HOST}  # fmt: skip
    colls: list[dict[str, Any]] = [
        dict(a2a),  # dispatch
        dict(a2a),  # combine
        {"op": "allreduce", "algorithm": "ring", "bytes": tp_bytes, "group_size": GPUS_PER_HOST},
        {
            "op": "allreduce",
            "algorithm": "ring",
            "bytes": dense_bytes,
            "group_size": n_gpus // GPUS_PER_HOST,
            "group_stride": GPUS_PER_HOST,
        },
    ]
    if groups > 1:
        colls.append({"op": "allreduce", "algorithm": "ring", "bytes": expert_bytes, "group_size": groups,
                      "group_stride": GPUS_PER_HOST * ep})  # fmt: skip
    jobs = [{"name": "moe", "gpus": n_gpus, "placement": "contiguous", "compute_ms": compute_ms,
             "start_jitter_ms": start_jitter_ms, "collectives": colls}]  # fmt: skip
    label = f"{n_gpus // 1024}k" if n_gpus >= 16384 else str(n_gpus)
    topo = "spine-leaf" if topology == "spine_leaf" else "rail"
    return {
        "name": name or f"moe-3d-{label}-{topo}",
        "description": (
            f"{n_gpus:,} GPUs ({topo}, 2:1), one MoE job in 3D parallelism: TP 8 within hosts, EP {ep} across "
            f"hosts (hot experts shift every {skew_period_steps} interval), DP across hosts"
        ),
        "seed": 0,
        "fabric": _fabric(n_gpus, topology),
        "workload": {"jobs": jobs},
        "dynamics": {"episode_steps": episode_steps},
        "routing": {"max_paths": max_paths or (4 if n_gpus > 4096 else 8), "qps_per_connection": 1},
        "reward": {"kind": "gpu_utilization"},
    }


def _header(name: str, n: int, topo: str, ep: int) -> str:
    """The comment block of a shipped member (what it models, what ECMP and a good policy do, the numbers)."""
    fabric = (
        "a 2:1 spine-leaf"
        if topo == "spine_leaf"
        else "a rail-optimised fabric (one rail leaf per local rank, 2:1)"
    )
    lines = [
        f"{name}: generated by `python -m ainet_gym.scenario.moe scenarios` (ainet_gym/scenario/moe.py).",
        "",
        f"What it models: one mixture-of-experts training job on {n:,} GPUs of 8-GPU hosts with 400G NICs, on",
        f"{fabric}, in 3D parallelism: each iteration dispatches and combines tokens by AllToAll in",
        f"expert-parallel groups of {ep} GPUs (the same local rank of {ep} consecutive hosts), with Zipf-skewed",
        "expert loads whose hot expert moves to the next rank every interval, then a tensor-parallel ring",
        "AllReduce within each host (NVLink) and data-parallel ring AllReduces across hosts.",
        *(
            [
                "What static ECMP does: hashes the AllToAll connections onto the uplinks without regard to which",
                "expert is hot; the hot expert's incast shares uplinks with other groups' traffic, and which ones",
                "changes every interval.",
                "What a good policy does: spreads the traffic towards the hot expert's host over the uplinks and",
                "moves with it; the rotation is periodic, so it can be anticipated.",
            ]
            if topo == "spine_leaf"
            else [
                "What static ECMP does: nothing to choose for the expert and data-parallel groups: they are",
                "rail-aligned (one local rank), so their traffic stays on its rail leaf; the hot expert's incast",
                "is bounded by its NIC whatever the routing. This is the reference of the spine-leaf twin.",
                "What a good policy does: the same as ECMP (the spines carry no traffic of this job); a learned",
                "policy must not do worse.",
            ]
        ),
        "Numbers: Mixtral 8x7B-like sizes (hidden 4096, top-2, 32 layers, 4096 tokens per GPU, BF16),",
        "expert-parallel groups of at most 64 GPUs (DeepSeek-V3 trains with 64-way EP), Zipf skew 1.0,",
        "compute 150 ms (communication about as long as computation); sources in the module docstring and",
        "docs/engine-alltoall.md.",
    ]
    return "".join(f"# {ln}\n" if ln else "#\n" for ln in lines)


def write_family(out_dir: str | Path) -> list[Path]:
    """Write every member of :data:`MOE_FAMILY` as ``<out_dir>/<name>.yaml``; the paths written."""
    import yaml

    out = Path(out_dir)
    paths = []
    for name, (n, topo, ep) in MOE_FAMILY.items():
        sc = moe_scenario(n, topo, ep, name=name)
        head = _header(name, n, topo, ep)
        p = out / f"{name}.yaml"
        p.write_text(head + yaml.safe_dump(sc, sort_keys=False, default_flow_style=None, width=120))
        paths.append(p)
    return paths


if __name__ == "__main__":  # pragma: no cover - a generator command
    for p in write_family(sys.argv[1] if len(sys.argv) > 1 else "scenarios"):
        print(p)
