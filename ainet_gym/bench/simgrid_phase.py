"""SimGrid's side of :mod:`ainet_gym.bench.vs_simgrid`: simulate one communication phase with SimGrid.

Run with the Python that has SimGrid's bindings (Debian's ``python3-simgrid``, SimGrid 3.32, for
``/usr/bin/python3``)::

    /usr/bin/python3 ainet_gym/bench/simgrid_phase.py PHASE.json [async|actors]

Standard library and ``simgrid`` only: this file is run outside the package's environment (no numpy).
``PHASE.json`` holds ``capacity`` (bytes/s per link), ``routes`` (the links of each transfer, in order) and
``bytes`` (per transfer). Every transfer gets a source and a destination host of its own, joined by its
route in one full-routing zone, so SimGrid's network model sees exactly these links; every transfer starts at
time 0: ``async`` (the default, SimGrid's cheapest form) starts them all with ``Comm.sendto_async`` from one
actor and waits with ``Comm.wait_all``; ``actors`` gives each transfer a sender actor (``Mailbox.put``) and a
receiver actor (``Mailbox.get``), as an S4U simulation of the ranks would. The model is made a plain fluid
max-min one, as the engine's: ``network/model:CM02`` without its sharing weights (``network/weight-S:0``)
and correction factors (``network/bandwidth-factor:1``, ``network/latency-factor:1``; the defaults 0.97 and
13.01 are LV08's), no cross traffic, link latencies 0 (so no TCP window bound either), and the precisions
tightened (``surf/precision``, on times, and ``maxmin/precision``, the solver's; defaults 1e-9 and 1e-5). Prints one JSON line: the makespan (SimGrid's clock when the last
transfer ends), the seconds of the platform build and of ``Engine.run`` (``time.perf_counter``), and the
SimGrid version.
"""

from __future__ import annotations

import json
import sys
import time

CONFIG = (
    "--cfg=network/model:CM02",
    "--cfg=network/weight-S:0",
    "--cfg=network/crosstraffic:0",
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/latency-factor:1",
    "--cfg=surf/precision:1e-15",
    "--cfg=maxmin/precision:1e-15",
    "--log=root.thres:critical",
)


def main(path: str, mode: str = "async") -> None:
    """Simulate the phase in ``path`` (``mode``: ``async`` or ``actors``) and print the JSON line."""
    import simgrid as sg

    with open(path) as fh:
        spec = json.load(fh)
    t0 = time.perf_counter()
    e = sg.Engine(["simgrid_phase", *CONFIG])
    zone = sg.NetZone.create_full_zone("phase")
    links = []
    for i, c in enumerate(spec["capacity"]):
        lk = zone.create_link(f"l{i}", float(c))
        lk.set_latency(0.0)
        links.append(lk)
    pairs = []
    for f, route in enumerate(spec["routes"]):
        src = zone.create_host(f"s{f}", 1e9)
        dst = zone.create_host(f"d{f}", 1e9)
        zone.add_route(
            src.netpoint, dst.netpoint, None, None, [sg.LinkInRoute(links[i]) for i in route], False
        )
        pairs.append((src, dst, int(spec["bytes"][f])))  # (whole bytes: the binding takes an int)
    zone.seal()

    def start_all() -> None:
        comms = [sg.Comm.sendto_async(s, d, b) for s, d, b in pairs]
        sg.Comm.wait_all(comms)

    def send(f: int, size: int) -> None:
        sg.Mailbox.by_name(f"m{f}").put(f, size)

    def receive(f: int) -> None:
        sg.Mailbox.by_name(f"m{f}").get()

    if mode == "async":
        sg.Actor.create("phase", pairs[0][0], start_all)
    elif mode == "actors":
        for f, (s, d, b) in enumerate(pairs):
            sg.Actor.create(f"send{f}", s, send, f, b)
            sg.Actor.create(f"recv{f}", d, receive, f)
    else:
        raise ValueError(f"mode = {mode!r}: allowed async, actors")
    t1 = time.perf_counter()
    e.run()
    t2 = time.perf_counter()
    print(json.dumps({"makespan_s": e.clock, "build_s": t1 - t0, "run_s": t2 - t1,
                      "transfers": len(pairs), "simgrid": sg.simgrid_version, "mode": mode}))  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:3])
