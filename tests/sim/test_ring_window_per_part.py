"""``routing.ring_window_bytes`` with ``routing.part_share: per_part`` (issue-27zzx; no ns-3).

Under ``per_part`` a part of fraction f carries f of its connection's bytes at coefficient 1, so its remainder and
rate are its bytes on its path. The window reads them in connection bytes, as the replay's ``Allow`` /
``Distribute`` do (a sub-flow of fraction f may have sent f x (the feeding hop's delivered bytes + one step)):
``p_k = B - rem_k / f_k``, ``P_h = B - sum_j rem_j``, and a part at a bound moves at f_k x its reference hop's
summed rate. References: hand-computed timelines of test_ring_window.py's 3-rank ring (one uplink direction,
leaf0 -> spine1, at a quarter rate; the one-step bound alone, W = 1e12), read as every sub-flow's remainder."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario import load_scenario
from ainet_gym.sim.engine import BatchSim, compile_job
from ainet_gym.sim.ring_window import WindowSolve

C = 10e9 / 8  # bytes/s of a 10 Gb/s uplink (link_efficiency 1); the NICs are 20 Gb/s (2 C)
MS = C * 1e-3  # one "C ms" of bytes
H = 24 * MS  # bytes per ring hop (3 ranks: 4 steps, S = 6 C ms)


def _scenario(routing: dict | None = None) -> dict:
    """GPUs 0, 1, 2 on leaves 0, 1, 2 joined by two spines; a ring AllReduce of H bytes per hop after 1 ms of
    compute; no latency (test_ring_window.py's)."""
    sc = {
        "name": "ring-window-per-part",
        "fabric": {"topology": "spine_leaf", "leaves": 3, "spines": 2, "hosts_per_leaf": 1, "gpus_per_host": 1,
                   "nic_gbps": 20, "uplink_gbps": 10, "hop_latency_us": 0.0, "link_efficiency": 1.0},
        "workload": {"jobs": [{"name": "r", "gpus": 3, "compute_ms": 1.0,
                               "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": 0.75 * H}]}]},
        "dynamics": {"episode_steps": 4, "decision_interval_ms": 100.0},
    }  # fmt: skip
    if routing:
        sc["routing"] = routing
    return sc


def _sim(share: str, f0: float, chunk: float | None = None) -> BatchSim:
    """The ring on the numpy backend with the one-step bound alone (W = 1e12; ``chunk``:
    ``ring_window_chunk_bytes``), every connection split f0 / 1 - f0 over spines 0 / 1, leaf0 -> spine1 at a quarter
    rate, communication starting at 1 ms."""
    sc = load_scenario(_scenario())
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    unit = compile_job(
        fabric, sc.jobs[0], np.arange(3), split_flows="independent", ring_window_bytes=1e12, part_share=share,
        ring_window_chunk_bytes=chunk,
    )  # fmt: skip
    sim = BatchSim(fabric, [[unit]], backend="numpy")
    up = int(fabric.link_ids("leaf0-spine1")[0])
    sim.engine_state.capacity_bytes_per_s[0, up] *= 0.25
    split = np.zeros((sim.n_conns, fabric.max_paths))
    split[:, 0], split[:, 1] = f0, 1.0 - f0
    sim.set_split(split)
    return sim


def _rems(sim: BatchSim, times_ms: list[float]) -> list[dict[str, float]]:
    """Each sub-flow's remainder in C ms (A: GPU 0 -> 1, B: 1 -> 2, C: 2 -> 0; path 0 or 1) at each time (ms
    after the communication starts)."""
    hop = {0: "A", 1: "B", 2: "C"}
    out, now = [], 0.0
    for t in times_ms:
        sim.run_interval((t + 1.0 - now) * 1e-3)
        now = t + 1.0
        out.append(
            {
                f"{hop[int(sim.conn_src[c])]}{int(q)}": float(sim.state.rem[p]) / MS
                for p, c, q in zip(sim.parts, sim.part_conn, sim.part_path, strict=True)
            }
        )
    return out


def _check(got: dict[str, float], want: dict[str, float]) -> None:
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-8, abs=1e-8), (k, got)


def test_even_split_is_half_of_the_fraction_timeline() -> None:
    """Split 1/2-1/2: every link carries one part, so each part's bytes on its path move as under ``fraction``
    (test_ring_window.py's one-step timeline: B at its bound from 8 ms at R_A = 1.25 C, A0 and C end at 12 ms, B at
    24 ms, A1 at 48 ms), and its remainder is half of the connection's there: 4 10 4 4 4 4 at 8 ms, 0 9 1.5 1.5 0 0
    at 12 ms, B 0.5 and A1 7 at 20 ms, A1 6 at 24 ms."""
    t = [8.0, 12.0, 20.0, 24.0]
    got = _rems(_sim("per_part", 0.5), t)
    ref = _rems(_sim("fraction", 0.5), t)
    _check(got[0], {"A0": 4, "A1": 10, "B0": 4, "B1": 4, "C0": 4, "C1": 4})
    _check(got[1], {"A0": 0, "A1": 9, "B0": 1.5, "B1": 1.5, "C0": 0, "C1": 0})
    _check(got[2], {"A1": 7, "B0": 0.5, "B1": 0.5})
    _check(got[3], {"A1": 6, "B0": 0, "B1": 0})
    for g, r in zip(got, ref, strict=True):
        _check(g, {k: v / 2 for k, v in r.items()})


def test_even_split_in_chunks_is_half_of_the_fraction_timeline() -> None:
    """With 2 C ms chunks (test_ring_window_chunks.py's timeline: B waits at floor(P_A / 2) x 2 + 6 from 6 ms, its
    remainder 12 12 10 10 8 6 6 at 6 6.4 7.4 8 9 10.6 11.2 ms; A0 and C at 24 - 2t, A1 at 24 - t / 2), each
    per_part part's remainder is half of it."""
    t = [6.0, 6.4, 7.4, 8.0, 9.0, 10.6, 11.2]
    b = [12, 12, 10, 10, 8, 6, 6]
    got = _rems(_sim("per_part", 0.5, 2 * MS), t)
    for ti, bi, g in zip(t, b, got, strict=True):
        full = {
            "A0": 24 - 2 * ti,
            "A1": 24 - 0.5 * ti,
            "B0": bi,
            "B1": bi,
            "C0": 24 - 2 * ti,
            "C1": 24 - 2 * ti,
        }
        _check(g, {k: v / 2 for k, v in full.items()})


def test_uneven_split_by_hand() -> None:
    """Split 3/4-1/4 under ``per_part``: parts of 18 and 6 C ms. Each link carries one part: A0, B0, C0, B1, C1 at
    C, A1 at C/4 (bytes on the path). In connection bytes (rate / f): A0, B0, C0 at 4/3 C, B1 and C1 at 4C, A1 at
    C; hop sums R_A = 1.25 C, R_B = R_C = 2C. B1 leads P_A by 2.75 C t and reaches S = 6 at 24/11 ms, then moves at
    f x R_A = 0.3125 C (R_B = 1.3125 C); C1's lead over P_B (2t = 48/11 at 24/11 ms) grows at 4 - 1.3125 C and
    reaches 6 at 1320/473 ms: C1 at f x R_B = 0.328125 C. A0 (4/3 C against R_C = 1.328125 C), A1, B0 (lead t/12)
    and C0 stay free before 4 ms. At 2 ms: A0 16, A1 5.5, B0 16, B1 4, C0 16, C1 4; at 4 ms: A0 14, A1 5, B0 14,
    B1 6 - 24/11 - 0.3125 (4 - 24/11) = 3.25, C0 14, C1 6 - 3.1875 = 2.8125 (in connection bytes at 4 ms:
    P_A = 5, p_B1 = 24 - 3.25 / 0.25 = 11, P_B = 24 - 17.25 = 6.75, p_C1 = 12.75: both leads are S)."""
    got = _rems(_sim("per_part", 0.75), [2.0, 4.0])
    _check(got[0], {"A0": 16, "A1": 5.5, "B0": 16, "B1": 4, "C0": 16, "C1": 4})
    _check(got[1], {"A0": 14, "A1": 5, "B0": 14, "B1": 3.25, "C0": 14, "C1": 2.8125})


def test_scales_are_the_per_part_fractions_and_none_under_fraction() -> None:
    """The window divides a per_part part's remainder and rate by its split fraction; under ``fraction`` it builds
    no scale (the window as before, bit for bit)."""
    sim = _sim("per_part", 0.75)
    w = sim.ring_window
    assert w is not None and w.per_part is not None and w.per_part.all()
    want = np.where(w.path == 0, 0.75, 0.25)
    np.testing.assert_allclose(WindowSolve.scales(w, sim.engine_state.split), want)
    frac = _sim("fraction", 0.75).ring_window
    assert frac is not None and frac.per_part is None
    assert WindowSolve.scales(frac, np.full((9, 8), 0.5)) is None
