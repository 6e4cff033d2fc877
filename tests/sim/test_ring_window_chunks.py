"""``routing.ring_window_chunk_bytes``: the ring window's upstream bound in whole chunks, as the replay rounds it
(``Allow`` in ``ainet_gym/checks/ns3_driver.cc``; issue-27zzu). No ns-3.

A part of a ring hop may lead ``floor(P_feeding / c) x c`` by at most one ring step S (c = min(chunk, S)), and
waits at that bound (rate 0) until the feeding hop completes its next chunk. Reference: a hand-computed timeline
of test_ring_window.py's 3-rank ring (two sub-flows per hop, leaf0 -> spine1 at a quarter rate, no fed-hop bound),
read as every sub-flow's remainder at chosen times; unset is the window without rounding; bad values refused."""

from __future__ import annotations

import numpy as np
import pytest
from _ring import MS, remainders_at, ring_scenario, slow_uplink

from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.engine import BatchSim, compile_job

H = 24 * MS  # bytes per ring hop (3 ranks: 4 steps, S = 6 C ms)


def _scenario(routing: dict | None = None) -> dict:
    """The shared 3-rank ring (``tests/_ring.py``, test_ring_window.py's) with H bytes per hop."""
    return ring_scenario("ring-window-chunks", H, routing)


def _sim(chunk: float | None) -> BatchSim:
    """The ring on the numpy backend with the one-step bound alone (W = 1e12), every connection split 1/2-1/2,
    leaf0 -> spine1 at a quarter rate, communication starting at 1 ms."""
    sc = load_scenario(_scenario())
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    unit = compile_job(
        fabric, sc.jobs[0], np.arange(3), split_flows="independent", ring_window_bytes=1e12,
        ring_window_chunk_bytes=chunk,
    )  # fmt: skip
    sim = BatchSim(fabric, [[unit]], backend="numpy")
    slow_uplink(sim, fabric, 0.25)
    split = np.zeros((sim.n_conns, fabric.max_paths))
    split[:, :2] = 0.5
    sim.set_split(split)
    return sim


def test_upstream_bound_in_whole_chunks_by_hand() -> None:
    """Chunk 2 C ms (< S = 6). Free: A0 at 2C, A1 at C/2 (the quarter-rate uplink), B and C at 2C; A's summed
    progress P_A = 1.25 t. B may lead floor(P_A / 2) x 2 by 6: B = 2t meets that bound at 6 ms (B 12, P_A 7.5 ->
    6 + 6) and waits until P_A = 8 (6.4 ms); then 14 at 7.4 ms (P_A 9.25 -> 8), waits until P_A = 10 (8 ms), 16 at
    9 ms, waits until 9.6 ms, 18 at 10.6 ms, waits until 11.2 ms. C's lead over B rounded stays below 6 until 11.2
    ms (4.4 then) and A0's over C below 6: A and C run free. Without rounding (test_ring_window.py) B reaches its
    bound at 8 ms with 16 C ms sent, and then moves at R_A = 1.25 C."""
    t = [6.0, 6.4, 7.4, 8.0, 9.0, 10.6, 11.2]
    b = [12, 12, 10, 10, 8, 6, 6]
    got = remainders_at(_sim(2 * MS), t)
    for ti, bi, g in zip(t, b, got, strict=True):
        want = {
            "A0": 24 - 2 * ti,
            "A1": 24 - 0.5 * ti,
            "B0": bi,
            "B1": bi,
            "C0": 24 - 2 * ti,
            "C1": 24 - 2 * ti,
        }
        for k, v in want.items():
            assert g[k] == pytest.approx(v, rel=1e-8, abs=1e-8), (ti, k, g)
    free = remainders_at(_sim(None), [8.0])[0]  # the window unrounded: B at its bound 16 at 8 ms
    assert free["B0"] == pytest.approx(8.0, rel=1e-8) and free["B1"] == pytest.approx(8.0, rel=1e-8)


def test_chunk_is_at_most_one_step_and_unset_is_unrounded() -> None:
    """The chunk of a hop is min(chunk, its ring step); unset builds no rounding (the window as before)."""
    w = _sim(2 * MS).ring_window
    assert w is not None and w.chunk_bytes is not None
    np.testing.assert_allclose(w.chunk_bytes, 2 * MS)
    big = _sim(1e12).ring_window
    assert big is not None and big.chunk_bytes is not None
    np.testing.assert_allclose(big.chunk_bytes, big.step_bytes)
    np.testing.assert_allclose(big.step_bytes, 6 * MS)
    none = _sim(None).ring_window
    assert none is not None and none.chunk_bytes is None
    assert load_scenario(_scenario()).routing.ring_window_chunk_bytes is None


@pytest.mark.parametrize(
    ("routing", "words"),
    [
        ({"split_flows": "independent", "ring_window_chunk_bytes": 524288},
         ["ring_window_chunk_bytes", "524288", "ring_window_bytes"]),
        ({"split_flows": "independent", "ring_window_bytes": 4e6, "ring_window_chunk_bytes": 0},
         ["ring_window_chunk_bytes", "0"]),
        ({"split_flows": "independent", "ring_window_bytes": 4e6, "ring_window_chunk_bytes": -1},
         ["ring_window_chunk_bytes", "-1"]),
        ({"split_flows": "independent", "ring_window_bytes": 4e6, "ring_window_chunk_bytes": "512KiB"},
         ["ring_window_chunk_bytes", "512KiB"]),
    ],
)  # fmt: skip
def test_bad_values_refused_naming_the_field(routing: dict, words: list[str]) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(_scenario(routing))
    msg = str(e.value)
    assert all(w in msg for w in words), msg
    assert "allowed" in msg, msg


def test_engine_refuses_a_chunk_without_a_window() -> None:
    sc = load_scenario(_scenario())
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    with pytest.raises(
        ValueError, match=r"routing\.ring_window_chunk_bytes = 524288.*ring_window_bytes = None"
    ):
        compile_job(
            fabric, sc.jobs[0], np.arange(3), split_flows="independent", ring_window_chunk_bytes=524288
        )
