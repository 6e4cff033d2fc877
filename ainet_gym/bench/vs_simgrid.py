"""``max_min_fair`` against SimGrid on one ring phase of 1,024 GPUs: same makespan, and how much faster.

    python -m ainet_gym.bench.vs_simgrid [--gpus 1024] [--bytes 1e9] [--repeats 5] [--python /usr/bin/python3]

The phase: one step of a ring AllReduce over every GPU of the bench's 2:1 spine-leaf
(:func:`ainet_gym.bench.instances.spine_leaf_shape`), the ranks in the spread host order (consecutive ranks
on hosts of different leaves, so every transfer crosses a leaf uplink and a spine), each rank sending
``bytes / gpus`` (whole bytes) to the next, routed by static ECMP (one path per transfer, hash seed 0), all
starting at time 0, no latency. Both sides compute the phase's makespan in the fluid max-min model:

- here, :func:`ainet_gym.max_min_fair` (the compiled backend when numba imports), called once per distinct
  completion time: rates of the transfers still running, time to the next completion, bytes advanced, the
  completed ones dropped (a transfer completes when at most 1e-9 of its bytes are left);
- SimGrid (:mod:`ainet_gym.bench.simgrid_phase`, run as a subprocess with the Python that has SimGrid's
  bindings: Debian's ``python3-simgrid``) simulating the same transfers on the same links and capacities.

Prints both makespans, their relative difference (goal <= 1e-9) and the ratio of SimGrid's ``Engine.run``
seconds to ``max_min_fair``'s (the median of ``--repeats`` runs of the whole makespan loop; goal >= 5,000x),
with SimGrid's platform build beside it, and the same with SimGrid running an actor pair per transfer
(``Mailbox.put`` / ``get``: how an S4U simulation of the ranks is written) instead of its cheapest form. ``--out FILE`` also writes the figures as JSON.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

#: a transfer of the phase completes when at most this share of its bytes is left (the engine's
#: completion tolerance, ``EPS_B``, is of the same order)
COMPLETE_RTOL = 1e-9
#: the Python with SimGrid's bindings (Debian's python3-simgrid installs them for the system Python)
SIMGRID_PYTHON = "/usr/bin/python3"


def ring_phase(n_gpus: int = 1024, total_bytes: float = 1e9, seed: int = 0) -> dict[str, Any]:
    """The transfers of one ring step over ``n_gpus`` GPUs of the bench's spine-leaf: ``capacity`` (bytes/s
    per link, the links the phase uses), ``routes`` (per transfer, its links in path order), ``bytes`` (per
    transfer, whole bytes), ``src`` / ``dst`` (GPUs).

    Raises
    ------
    ValueError
        If the ECMP split is not one path per transfer (SimGrid routes a transfer over one path).
    """
    from ainet_gym.bench.instances import spine_leaf_shape, spread_host_order
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.routing.split import ecmp_split
    from ainet_gym.scenario.spec import FabricSpec

    fspec = FabricSpec(**spine_leaf_shape(n_gpus))
    fabric = build_fabric(fspec, max_paths=8)
    g = fspec.gpus_per_host
    hosts = spread_host_order(fabric, g)
    order = (np.arange(g)[:, None] + hosts[None, :] * g).ravel()  # local rank outer: hosts cycle the leaves
    src, dst = order, np.roll(order, -1)
    conn_key = src * n_gpus + dst
    paths, npaths = fabric_paths(fabric, src, dst)
    split = ecmp_split(npaths, conn_key, paths.shape[1], 1, seed)
    if not np.all((split == 0) | (split == 1)):
        raise ValueError("split: static ECMP with one queue pair gives one path per transfer; got fractions")
    pick = split.argmax(axis=1)
    chosen = paths[np.arange(src.shape[0]), pick]  # (transfers, hops), -1 padded
    used = np.unique(chosen[chosen >= 0])
    remap = {int(lk): i for i, lk in enumerate(used)}
    routes = [[remap[int(lk)] for lk in row if lk >= 0] for row in chosen]
    cap = np.asarray(fabric.capacity_bytes_per_s, dtype=float)[used]
    size = float(int(total_bytes / n_gpus))
    return {
        "capacity": cap.tolist(),
        "routes": routes,
        "bytes": [size] * src.shape[0],
        "src": src.tolist(),
        "dst": dst.tolist(),
        "gpus": n_gpus,
        "fabric": fspec.topology,
    }


def fabric_paths(fabric: Any, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The candidate paths of each (src, dst) pair (:meth:`ainet_gym.fabric.topology.Fabric.paths`), as
    (pairs, max_paths, hops) link ids padded with -1, and their count per pair."""
    per = [fabric.paths(int(a), int(b)) for a, b in zip(src, dst, strict=True)]
    hops = max(len(p) for ps in per for p in ps)
    out = np.full((len(per), max(len(ps) for ps in per), hops), -1, dtype=np.int64)
    for i, ps in enumerate(per):
        for j, p in enumerate(ps):
            out[i, j, : len(p)] = p
    return out, np.array([len(ps) for ps in per], dtype=np.int64)


def incidence(phase: dict[str, Any]) -> sp.csr_matrix:
    """The phase's (transfers, links) incidence: 1 on every link of a transfer's route."""
    rows = np.repeat(np.arange(len(phase["routes"])), [len(r) for r in phase["routes"]])
    cols = np.concatenate([np.asarray(r, dtype=np.int64) for r in phase["routes"]])
    return sp.csr_matrix(
        (np.ones(rows.shape[0]), (rows, cols)), shape=(len(phase["routes"]), len(phase["capacity"]))
    )


def makespan(
    inc: sp.csr_matrix, cap: np.ndarray, size: np.ndarray, backend: str | None = None
) -> tuple[float, int]:
    """The makespan of transfers of ``size`` bytes all starting at 0 under max-min fair sharing, re-solved
    by :func:`ainet_gym.max_min_fair` at every completion; and the number of solves.

    The incidence is checked once (:func:`ainet_gym.sim.allocator.prepare_incidence`, inside the timed loop of
    :func:`compare`) and each solve takes the running transfers' rows of it (``prepared.rows(alive)``), as
    the allocator's documentation advises for a loop of solves of one matrix (issue-28zr; before, each solve
    took ``inc[alive]``, scipy's row selection, and checked it again: the same rates bit for bit)."""
    from ainet_gym import max_min_fair
    from ainet_gym.sim.allocator import prepare_incidence

    prepared = prepare_incidence(inc)
    left = np.asarray(size, dtype=float).copy()
    alive = np.arange(left.shape[0])
    t = 0.0
    solves = 0
    while alive.shape[0]:
        rate = max_min_fair(prepared.rows(alive), cap, backend=backend)
        solves += 1
        dt = float(np.min(left[alive] / rate))
        t += dt
        left[alive] -= rate * dt
        alive = alive[left[alive] > COMPLETE_RTOL * size[alive]]
    return t, solves


def run_simgrid(phase: dict[str, Any], python: str = SIMGRID_PYTHON, mode: str = "async") -> dict[str, Any]:
    """SimGrid's makespan and seconds for the phase (:mod:`ainet_gym.bench.simgrid_phase` in a subprocess).

    Raises
    ------
    RuntimeError
        If the subprocess fails (for example: no SimGrid bindings for ``python``), with its stderr.
    """
    script = Path(__file__).with_name("simgrid_phase.py")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "phase.json")
        with open(path, "w") as fh:
            json.dump({k: phase[k] for k in ("capacity", "routes", "bytes")}, fh)
        res = subprocess.run([python, str(script), path, mode], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{python} {script.name}: exit {res.returncode}: {res.stderr.strip()[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def compare(n_gpus: int = 1024, total_bytes: float = 1e9, repeats: int = 5, python: str = SIMGRID_PYTHON,
            backend: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Both makespans of the ring phase, their relative difference and the speed ratio (module docstring)."""
    phase = ring_phase(n_gpus, total_bytes)
    inc = incidence(phase)
    cap = np.asarray(phase["capacity"])
    size = np.asarray(phase["bytes"])
    makespan(inc, cap, size, backend)  # compiles, warms the caches
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ours, solves = makespan(inc, cap, size, backend)
        times.append(time.perf_counter() - t0)
    sg = run_simgrid(phase, python)
    act = run_simgrid(phase, python, "actors")
    ours_s = statistics.median(times)
    return {
        "gpus": n_gpus,
        "transfers": len(phase["routes"]),
        "links": len(phase["capacity"]),
        "bytes_per_transfer": phase["bytes"][0],
        "makespan_s": ours,
        "solves": solves,
        "max_min_fair_s": ours_s,
        "max_min_fair_runs_s": times,
        "simgrid_makespan_s": sg["makespan_s"],
        "simgrid_run_s": sg["run_s"],
        "simgrid_build_s": sg["build_s"],
        "simgrid_version": sg["simgrid"],
        "rel_diff": abs(ours - sg["makespan_s"]) / abs(sg["makespan_s"]),
        "speedup": sg["run_s"] / ours_s,
        "speedup_with_build": (sg["run_s"] + sg["build_s"]) / ours_s,
        "simgrid_actors_makespan_s": act["makespan_s"],
        "simgrid_actors_run_s": act["run_s"],
        "rel_diff_actors": abs(ours - act["makespan_s"]) / abs(act["makespan_s"]),
        "speedup_actors": act["run_s"] / ours_s,
        "load_avg_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def report(r: dict[str, Any]) -> str:
    """The lines :func:`main` prints."""
    return "\n".join([
        f"ring phase, {r['gpus']:,} GPUs (2:1 spine-leaf, static ECMP): {r['transfers']:,} transfers of "
        f"{r['bytes_per_transfer']:,.0f} bytes on {r['links']:,} links",
        f"  makespan: max_min_fair {r['makespan_s']:.15g} s ({r['solves']} solves), SimGrid {r['simgrid_version']} "
        f"{r['simgrid_makespan_s']:.15g} s; relative difference {r['rel_diff']:.2e} (<= 1e-09)",
        f"  time: max_min_fair {r['max_min_fair_s'] * 1e3:.3f} ms (median of {len(r['max_min_fair_runs_s'])}), "
        f"SimGrid Engine.run {r['simgrid_run_s'] * 1e3:.1f} ms (platform build {r['simgrid_build_s'] * 1e3:.1f} ms)",
        f"  SimGrid / max_min_fair: {r['speedup']:,.0f}x (>= 5,000x); with SimGrid's build {r['speedup_with_build']:,.0f}x",
        f"  SimGrid with an actor pair per transfer (Mailbox put/get): Engine.run {r['simgrid_actors_run_s'] * 1e3:.1f} ms, "
        f"{r['speedup_actors']:,.0f}x, makespan relative difference {r['rel_diff_actors']:.2e}",
        f"  load average (1 min) {r['load_avg_1min']:.2f}",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    from ainet_gym.agents.arg_types import float_arg, int_arg
    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's

    ap = OneLineParser(prog="python -m ainet_gym.bench.vs_simgrid", description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int_arg(1), default=1024)
    ap.add_argument(
        "--bytes",
        type=float_arg("a buffer size in bytes"),
        default=1e9,
        help="the AllReduce buffer; each transfer moves bytes / gpus",
    )
    ap.add_argument("--repeats", type=int_arg(1), default=5)
    ap.add_argument("--python", default=SIMGRID_PYTHON, help="the Python with SimGrid's bindings")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    r = compare(a.gpus, a.bytes, a.repeats, a.python)
    print(report(r))
    if a.out is not None:
        a.out.write_text(json.dumps(r, indent=2))
    return 0 if max(r["rel_diff"], r["rel_diff_actors"]) <= 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
