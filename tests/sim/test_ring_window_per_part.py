"""``routing.ring_window_bytes`` with ``routing.part_share: per_part`` (issue-27zzy): the NCCL window of a ring's
sub-flows when each path part is a TCP connection of its own (coefficient 1, f of the bytes), as in the default
replay. A per_part part's progress in its hop's bytes is its bytes sent / its fraction and its rate there is its
rate / its fraction, so the replay's rule (a sub-flow of fraction f may have sent f x (the feeding hop's delivered
bytes + one step), ``Allow`` in ``ainet_gym/checks/ns3_driver.cc``) is the fraction rule's in those units. No ns-3.

Reference: a hand-computed timeline of test_ring_window.py's 3-rank ring (leaf0 -> spine1 at a quarter rate, the
one-step bound alone), every connection split 1/4 (path 0, spine 0) and 3/4 (path 1, spine 1); and, with an even
split, where both share rules give the same rates, the fraction run's remainders halved."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _ring import MS, remainders_at, ring_scenario, slow_uplink

from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario import load_scenario
from ainet_gym.sim.engine import BatchSim, compile_job

H = 24 * MS  # bytes per ring hop (3 ranks: 4 steps, S = 6 C ms)


def _scenario(routing: dict | None = None, nic_gbps: float = 20, uplink_gbps: float = 10) -> dict:
    """The shared 3-rank ring (``tests/_ring.py``, test_ring_window.py's) with H bytes per hop."""
    return ring_scenario("ring-window-per-part", H, routing, nic_gbps=nic_gbps, uplink_gbps=uplink_gbps)


def _sim(
    share: str, f0: float, nic_bound: bool = False, window: float | None = 1e12, chunk: float | None = None
) -> BatchSim:
    """The ring on the numpy backend with the one-step bound alone (W = 1e12), every connection split f0 on path 0
    and 1 - f0 on path 1, leaf0 -> spine1 at a quarter rate, communication starting at 1 ms. ``nic_bound``: 10
    Gb/s NICs (C) and 20 Gb/s uplinks at full rate instead, so each GPU's NIC is the parts' shared bottleneck.
    ``chunk``: ``routing.ring_window_chunk_bytes`` (None: not rounded)."""
    sc = load_scenario(_scenario(nic_gbps=10, uplink_gbps=20) if nic_bound else _scenario())
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    unit = compile_job(
        fabric,
        sc.jobs[0],
        np.arange(3),
        split_flows="independent",
        ring_window_bytes=window,
        part_share=share,
        ring_window_chunk_bytes=chunk,
    )
    sim = BatchSim(fabric, [[unit]], backend="numpy")
    if not nic_bound:
        slow_uplink(sim, fabric, 0.25)
    split = np.zeros((sim.n_conns, fabric.max_paths))
    split[:, 0], split[:, 1] = f0, 1.0 - f0
    sim.set_split(split)
    return sim


def _sent(t: Fraction, pieces: list[tuple[Fraction, Fraction]]) -> Fraction:
    """Bytes (C ms) sent by time t at the rate of each piece (start, rate), each until the next one starts."""
    out = Fraction(0)
    for i, (ts, r) in enumerate(pieces):
        hi = t if i + 1 == len(pieces) else min(t, pieces[i + 1][0])
        out += r * max(hi - ts, 0)
    return out


def test_per_part_window_by_hand() -> None:
    """Split 1/4-3/4, per_part: each part weighs 1 and carries its fraction of H (6 and 18 C ms). Free (real
    rates, C ms per ms): A0 1 (its uplink), A1 1/4 (the quarter-rate uplink), B0 = B1 = C0 = C1 = 1, so in hop
    bytes (/ f) a path-0 part moves at 4 and the summed progress P_A at 5/4, P_B = P_C at 2.

    - B0 leads P_A by 4t - 5/4 t = 6 at t1 = 24/11 and then moves at R_A x 1/4 = 5/16 (R_B = 21/16).
    - C0's lead 4t - P_B reaches 6 at t2 = t1 + (6 - 2 t1) / (4 - 21/16); it then moves at 21/64 (R_C = 85/64).
    - A0's lead 4t - P_C reaches 6 at t3 = t2 + (6 - 2 t2) / (4 - 85/64).
    - From t3 the three path-0 parts are all at their bounds: R_A = R_C / 4 + 1/4, R_B = R_A / 4 + 1, R_C = R_B / 4
      + 1, so R_A = 4/7, R_B = 8/7, R_C = 9/7 and A0, B0, C0 move at 9/28, 1/7, 2/7.

    The path-1 parts stay behind their bounds (B1's lead over P_A is below 2 C ms by 6 ms). No two parts share a
    link here, so the fraction rule gives the same bytes per second; its remainders count connection bytes, so
    its path-0 remainder / 4 is per_part's (the two code paths agree on the units)."""
    t1 = Fraction(24, 11)
    t2 = t1 + (6 - 2 * t1) / (4 - Fraction(21, 16))
    t3 = t2 + (6 - 2 * t2) / (4 - Fraction(85, 64))
    ts = [2.0, 2.5, 2.9, 4.0, 6.0]
    got = remainders_at(_sim("per_part", 0.25), ts)
    for t_ms, g in zip(ts, got, strict=True):
        t = Fraction(t_ms).limit_denominator(1000)
        want = {
            "A0": 6 - _sent(t, [(Fraction(0), Fraction(1)), (t3, Fraction(9, 28))]),
            "A1": 18 - t / 4,
            "B0": 6 - _sent(t, [(Fraction(0), Fraction(1)), (t1, Fraction(5, 16)), (t3, Fraction(1, 7))]),
            "B1": 18 - t,
            "C0": 6 - _sent(t, [(Fraction(0), Fraction(1)), (t2, Fraction(21, 64)), (t3, Fraction(2, 7))]),
            "C1": 18 - t,
        }
        for k, v in want.items():
            assert g[k] == pytest.approx(float(v), rel=1e-8, abs=1e-8), (t_ms, k, g)
    frac = remainders_at(_sim("fraction", 0.25), [4.0])[0]
    assert frac["A0"] / 4 == pytest.approx(got[3]["A0"], rel=1e-9)
    assert frac["A1"] * 3 / 4 == pytest.approx(got[3]["A1"], rel=1e-9)


def test_per_part_window_on_a_shared_nic_by_hand() -> None:
    """Where the share rules differ: 10 Gb/s NICs (C) shared by a hop's two parts, 20 Gb/s uplinks, split 1/4-3/4.
    per_part: each part gets C/2 of its NIC (its own share), so a path-0 part (6 C ms) moves at 2 C in hop bytes
    and a path-1 part (18 C ms) at 2/3 C; every hop's summed rate is C. The path-0 parts lead by 2t - t = S = 6 at
    t = 6, all at once, and are capped at R x 1/4 = C/4 real; the path-1 part takes the NIC's rest, 3/4 C, so R
    stays C. Path 0 then ends at 6 + 3 / (1/4) = 18; path 1 has 15 - 9 = 6 left and ends at 24. Without the window
    path 0 ends at 12 and path 1 at 24; under fraction both parts move at C in connection bytes (C/4 and 3/4 C
    real), lead nothing and end at 24."""
    ts = [4.0, 10.0, 17.0, 20.0]
    want = {  # (path 0, path 1) remainders in C ms, the same on every hop
        "window": [(4.0, 16.0), (2.0, 12.0), (0.25, 6.75), (0.0, 4.0)],
        "free": [(4.0, 16.0), (1.0, 13.0), (0.0, 7.0), (0.0, 4.0)],
    }
    for key, sim in (("window", _sim("per_part", 0.25, True)), ("free", _sim("per_part", 0.25, True, None))):
        for t, g, (w0, w1) in zip(ts, remainders_at(sim, ts), want[key], strict=True):
            for h in "ABC":
                assert g[f"{h}0"] == pytest.approx(w0, rel=1e-8, abs=1e-8), (key, t, g)
                assert g[f"{h}1"] == pytest.approx(w1, rel=1e-8, abs=1e-8), (key, t, g)
    frac = remainders_at(_sim("fraction", 0.25, True), [10.0])[0]  # connection bytes: 24 - t on both paths
    assert all(v == pytest.approx(14.0, rel=1e-8) for v in frac.values()), frac


def test_even_split_is_the_fraction_run_halved() -> None:
    """With an even split both share rules give the same rates (model.md), and a per_part part carries half its
    connection's bytes, so its remainder is half the fraction part's at every time, the window's bounds and the
    rounded and unrounded phases included (test_ring_window_chunks.py's timeline without rounding)."""
    ts = [4.0, 6.0, 8.0, 10.0, 14.0]
    a, b = remainders_at(_sim("fraction", 0.5), ts), remainders_at(_sim("per_part", 0.5), ts)
    for x, y in zip(a, b, strict=True):
        for k in x:
            assert y[k] == pytest.approx(x[k] / 2, rel=1e-9, abs=1e-9), (k, x, y)


def test_window_scale_only_for_per_part() -> None:
    """The window's per_part parts are marked (``RingWindow.per_part``) only under per_part; under fraction the
    scale is None, so the fraction window runs its code path unchanged."""
    from ainet_gym.sim.ring_window import WindowSolve

    w = _sim("fraction", 0.25).ring_window
    assert w is not None and w.per_part is None
    share = WindowSolve.shares(w, np.tile([0.25, 0.75], (3, 1)))
    assert WindowSolve.scales(w, share) is None
    p = _sim("per_part", 0.25).ring_window
    assert p is not None and p.per_part is not None and p.per_part.all()
    sp = np.zeros((3, 2))
    sp[:, 0], sp[:, 1] = 0.25, 0.75
    g = WindowSolve.scales(p, WindowSolve.shares(p, sp))
    assert g is not None
    np.testing.assert_allclose(np.sort(g), np.sort(np.tile([4.0, 4.0 / 3.0], 3)))


def test_loader_accepts_per_part_with_a_window() -> None:
    sc = load_scenario(
        _scenario({"split_flows": "independent", "ring_window_bytes": 4e6, "part_share": "per_part"})
    )
    assert sc.routing.part_share == "per_part" and sc.routing.ring_window_bytes == 4e6


def test_even_split_in_whole_chunks_is_the_chunk_timeline_halved() -> None:
    """``ring_window_chunk_bytes`` 2 C ms with an even split (issue-27zzx): test_ring_window_chunks.py's hand
    timeline (B waits at floor(P_A / 2) x 2 + 6 from 6 ms; its remainder 12 12 10 10 8 6 6 at 6 6.4 7.4 8 9 10.6
    11.2 ms; A0 and C at 24 - 2t, A1 at 24 - t / 2), each per_part part's remainder halved."""
    t = [6.0, 6.4, 7.4, 8.0, 9.0, 10.6, 11.2]
    b = [12, 12, 10, 10, 8, 6, 6]
    got = remainders_at(_sim("per_part", 0.5, chunk=2 * MS), t)
    for ti, bi, g in zip(t, b, got, strict=True):
        full = {
            "A0": 24 - 2 * ti,
            "A1": 24 - ti / 2,
            "B0": bi,
            "B1": bi,
            "C0": 24 - 2 * ti,
            "C1": 24 - 2 * ti,
        }
        for k, v in full.items():
            assert g[k] == pytest.approx(v / 2, rel=1e-8, abs=1e-8), (ti, k, g)
