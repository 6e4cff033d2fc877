"""Hierarchical vs flat AllReduce on 2 hosts x 8 GPUs with one 100 Gb/s NIC per host, by chunk count.

A flat 16-rank ring crosses each host's single NIC at 2 (p-1)/p S / B_nic = 150 ms for S = 1 GB. The
hierarchical AllReduce (NVLink reduce-scatter, 8 rail rings sharing the NIC, NVLink all-gather) takes
t1 + t2 + t3 = 1.94 + 80 + 1.94 ms with its stages one after another, and (t1 + t2 + t3 + (N - 1) t2) / N
when ``chunks: N`` pipelines them (NCCL's behaviour, so its bus bandwidth exceeds the NIC rate on such
machines; NVIDIA's answers in nccl-tests issues #196 and #22). Every chunk pays its stage's alpha.

    python examples/pipelined_allreduce.py                  # the InfiniBand profile's 0.25 us per hop
    python examples/pipelined_allreduce.py --hop-latency-us 0
"""

from __future__ import annotations

import argparse

from ainet_gym import simulate


def comm_ms(collective: dict, hop_latency_us: float | None) -> float:
    """Communication time (ms) of one iteration of a 16-GPU job running ``collective`` alone."""
    fabric = {
        "topology": "single_switch",
        "hosts": 2,
        "gpus_per_host": 8,
        "gpus_per_nic": 8,
        "nic_gbps": 100.0,
    }
    if hop_latency_us is not None:
        fabric["hop_latency_us"] = hop_latency_us
    scenario = {
        "name": "pipelined-allreduce",
        "fabric": fabric,
        "workload": {"jobs": [{"name": "j", "gpus": 16, "compute_ms": 1.0, "collectives": [collective]}]},
        "dynamics": {"decision_interval_ms": 400.0},
    }
    return simulate(scenario)["steps"][0]["jobs"][0]["comm_time_ms"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=float, default=1.0e9, help="buffer size S (default 1 GB)")
    ap.add_argument("--hop-latency-us", type=float, default=None, help="default: the profile's (0.25)")
    ap.add_argument("--chunks", default="1,4,16,64", help="comma-separated chunk counts")
    args = ap.parse_args()
    flat = comm_ms({"op": "allreduce", "algorithm": "ring", "bytes": args.bytes}, args.hop_latency_us)
    print(f"flat ring: {flat:.4f} ms")
    print(f"{'chunks':>6}  {'hierarchical ms':>15}  {'flat / hierarchical':>19}")
    for n in (int(x) for x in args.chunks.split(",")):
        coll = {"op": "allreduce", "algorithm": "hierarchical", "bytes": args.bytes, "chunks": n}
        h = comm_ms(coll, args.hop_latency_us)
        print(f"{n:>6}  {h:>15.4f}  {flat / h:>19.4f}")


if __name__ == "__main__":
    main()
