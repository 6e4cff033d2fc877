"""``routing.ring_window_bytes`` (side ``nccl_part``): the NCCL window of a ring's sub-flows (no ns-3).

Each path part (sub-flow) of a ring hop may lead the summed progress of the hop feeding it by at most one ring step
S and that of the hop it feeds by at most W; a part at a bound moves at its reference hop's summed rate; the hop's
sum is not bounded (:mod:`ainet_gym.sim.ring_window`). References: two hand-computed timelines of a 3-rank ring on
three leaves, each hop split 1/2-1/2 over two spines (two sub-flows per hop), one uplink direction slowed, read as
every sub-flow's remainder at chosen times and against the unbounded ring (``split_flows: independent`` alone);
unset is the engine without it bit for bit; bad and unsupported combinations refused, naming the field."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _ring import MS, remainders_at, ring_scenario, slow_uplink

from ainet_gym.envs.env import EnvCore
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.backends.numba import jit as _jit
from ainet_gym.sim.engine import BatchSim, compile_job
from ainet_gym.sim.ring_window import build_ring_window

H = 16 * MS  # bytes per ring hop: 2 (p - 1) / p x bytes with p = 3, so bytes = 3/4 H; S = H / 4 (4 steps)


def _scenario(routing: dict | None = None, hop: float = H, dynamics: dict | None = None) -> dict:
    """The shared 3-rank ring (``tests/_ring.py``) with ``hop`` bytes per hop."""
    return ring_scenario("ring-window", hop, routing, dynamics)


def _sim(window: float | None, slow: float, hop: float = H) -> BatchSim:
    """The ring on the numpy backend, every connection split 1/2-1/2 over its two spines, the uplink
    leaf0 -> spine1 (one direction) at ``slow`` x its rate, communication starting at 1 ms."""
    sc = load_scenario(_scenario(hop=hop))
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    unit = compile_job(fabric, sc.jobs[0], np.arange(3), split_flows="independent", ring_window_bytes=window)
    sim = BatchSim(fabric, [[unit]], backend="numpy")
    slow_uplink(sim, fabric, slow)
    split = np.zeros((sim.n_conns, fabric.max_paths))
    split[:, :2] = 0.5
    assert (sim.conn_npaths == 2).all()
    sim.set_split(split)
    return sim


def _check(got: dict[str, float], want: dict[str, float]) -> None:
    """Each remainder to 1e-8 C ms: the fixed point settles to 1e-9 of a rate."""
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-8, abs=1e-8), (k, got)


def test_fed_hop_window_by_hand() -> None:
    """W = 1 C ms, leaf0 -> spine1 at half rate. Free: A0 at 2C (its uplink, C, carries half its rate), A1 at C
    (the half-rate link), B and C's parts at 2C; summed rates R_A = 1.5 C, R_B = R_C = 2C. Leads over the fed
    hop (bound W): C's over A grow at 0.5 C and reach W at 2 ms: C's parts move at R_A = 1.5 C; B's over C then
    reach W at 4 ms (B at 1.5 C); A0's over B at 6 ms: A0 at R_B, and the chain A0 -> C -> B -> A0 settles at C
    (R_A = C/2 + C/2). Progress at 6 ms (C ms): A0 12, A1 6, B 8 + 3 = 11, C 4 + 6 = 10. Then all at C until A0
    ends at 10 ms; R_A = C/2 (A1 alone), so C's parts (at their bound over A) and B's (at theirs over C) move at
    C/2: B (15 at 10 ms) ends at 12 ms, C (14) at 14 ms, A1 (the slow sub-flow, never held) at 16 ms. The leads
    over the feeding hop stay below S = 4. Unbounded: A0, B and C end at 8 ms, A1 at 16 ms."""
    t = [2.0, 6.0, 12.0, 14.0]
    win = remainders_at(_sim(MS, 0.5), t)
    free = remainders_at(_sim(None, 0.5), t)
    rem = {k: 16.0 - v for k, v in {"A0": 4, "A1": 2, "B0": 4, "C0": 4}.items()}
    _check(win[0], {**rem, "B1": rem["B0"], "C1": rem["C0"]})
    _check(win[1], {"A0": 4, "A1": 10, "B0": 5, "B1": 5, "C0": 6, "C1": 6})
    _check(win[2], {"A0": 0, "A1": 4, "B0": 0, "B1": 0, "C0": 1, "C1": 1})
    _check(win[3], {"A1": 2, "C0": 0, "C1": 0})
    _check(free[0], {"A0": 12, "A1": 14, "B0": 12, "C1": 12})
    _check(free[1], {"A0": 4, "A1": 10, "B0": 4, "B1": 4, "C0": 4, "C1": 4})
    _check(free[2], {"A0": 0, "A1": 4, "B0": 0, "B1": 0, "C0": 0, "C1": 0})


def test_feeding_hop_step_by_hand() -> None:
    """The one-step bound alone (W = 1e12 bytes), leaf0 -> spine1 at a quarter rate, H = 24 C ms (S = 6). Free:
    A0 at 2C, A1 at C/2, B and C at 2C; R_A = 1.25 C. B's parts lead A by 0.75 C per ms and reach S at 8 ms
    (progress A0 16, A1 4, B 16, C 16): they move at R_A = 1.25 C. C's lead over B grows at 0.75 C from 0, A0's
    over C stays 0. A0 and C's parts end at 12 ms (B at 21, A1 at 6, P_A = 15); R_A = C/4 (A1 at C/2, its half),
    so B moves at C/4 and ends at 24 ms. A1, never held, ends at 12 + 18 / 0.5 = 48 ms. Unbounded: B ends at
    12 ms."""
    hop = 24 * MS
    t = [8.0, 12.0, 20.0, 24.0]
    win = remainders_at(_sim(1e12, 0.25, hop), t)
    free = remainders_at(_sim(None, 0.25, hop), t)
    _check(win[0], {"A0": 8, "A1": 20, "B0": 8, "B1": 8, "C0": 8, "C1": 8})
    _check(win[1], {"A0": 0, "A1": 18, "B0": 3, "B1": 3, "C0": 0, "C1": 0})
    _check(win[2], {"A1": 14, "B0": 1, "B1": 1})
    _check(win[3], {"A1": 12, "B0": 0, "B1": 0})
    _check(free[1], {"A0": 0, "A1": 18, "B0": 0, "B1": 0})


def test_the_window_is_built_on_rings_only() -> None:
    """Hops, their feeding and fed hops and the ring step of the 3-rank ring; no window: None."""
    sim = _sim(MS, 0.5)
    w = sim.ring_window
    assert w is not None and w.n_hops == 3 and w.part.size == 6
    src = sim.conn_src[w.conn[np.searchsorted(w.hop, np.arange(3))]]
    for h in range(3):
        assert src[w.up[h]] == (src[h] - 1) % 3 and src[w.down[h]] == (src[h] + 1) % 3
    np.testing.assert_allclose(w.step_bytes, H / 4)
    np.testing.assert_allclose(w.window_bytes, MS)
    assert _sim(None, 0.5).ring_window is None
    none = build_ring_window(np.zeros(1), *(np.zeros(1, dtype=np.int64),) * 3, np.ones(1), np.ones(1),
                             np.zeros(1), np.zeros(1), np.zeros(0, dtype=np.int64), *(np.zeros(0, dtype=np.int64),) * 3)  # fmt: skip
    assert none is None


def _figures(sc: dict, backend: str = "numpy") -> list[np.ndarray]:
    core = EnvCore(sc, batch=1, episode_steps=4, backend=backend)
    core.reset([0])
    out = []
    for _ in range(4):
        core.step_split(core.world.default_split())
        r = core.last_result
        out += [np.array(r.iterations), np.array(r.comm_time_s), np.array(r.step_time_s)]
    return out


def test_unset_is_the_engine_without_it_bit_for_bit() -> None:
    """Unset (and so every shipped scenario) builds no window; a window that never binds (W and S above a hop's
    bytes) gives the unbounded ring's figures bit for bit."""
    base = _scenario({"split_flows": "independent"}, dynamics={"decision_interval_ms": 10.0})
    assert load_scenario(base).routing.ring_window_bytes is None
    never = _scenario(
        {"split_flows": "independent", "ring_window_bytes": 1e12}, dynamics={"decision_interval_ms": 10.0}
    )
    a, b = _figures(base), _figures(never)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    ("routing", "dyn", "words"),
    [
        ({"split_flows": "independent", "ring_window_bytes": 0}, None, ["ring_window_bytes", "0", "(0, "]),
        ({"split_flows": "independent", "ring_window_bytes": -1}, None, ["ring_window_bytes", "-1"]),
        ({"split_flows": "independent", "ring_window_bytes": "4MiB"}, None, ["ring_window_bytes", "4MiB"]),
        ({"ring_window_bytes": 4e6}, None, ["ring_window_bytes", "4e+06", "coupled", "independent"]),
        ({"split_flows": "independent", "ring_window_bytes": 4e6, "ring_run_ahead_bytes": 1e6}, None,
         ["ring_window_bytes", "ring_run_ahead_bytes", "null"]),
        ({"split_flows": "independent", "ring_window_bytes": 4e6, "reroute_held_bytes": 1e5}, None,
         ["ring_window_bytes", "reroute_held_bytes", "0"]),
        ({"split_flows": "independent", "ring_window_bytes": 4e6}, {"rate_updates": "phase"},
         ["ring_window_bytes", "rate_updates", "event"]),
        ({"split_flows": "independent", "ring_window_bytes": 4e6}, {"rate_quantum_us": 5.0},
         ["ring_window_bytes", "rate_quantum_us", "0"]),
        ({"split_flows": "independent", "ring_window_side": "nccl_part"}, None,
         ["ring_window_side", "ring_window_bytes"]),
        ({"split_flows": "independent", "ring_window_bytes": 4e6, "ring_window_side": "nccl"}, None,
         ["ring_window_side", "nccl_part"]),
    ],
)  # fmt: skip
def test_bad_values_refused_naming_the_field(routing: dict, dyn: dict | None, words: list[str]) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(_scenario(routing, dynamics=dyn))
    msg = str(e.value)
    assert all(w in msg for w in words), msg
    assert "allowed" in msg, msg


def test_engine_refusals_name_the_field() -> None:
    """What the loader refuses is refused by the engine too (a Scenario built in code, a unit compiled by hand):
    the compiled backend (it does not run the window), held parts, phase rate updates (per-part sharing runs,
    issue-27zzy: tests/sim/test_ring_window_per_part.py)."""
    sc = load_scenario(_scenario({"split_flows": "independent", "ring_window_bytes": 4e6}))
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    job, gpus = sc.jobs[0], np.arange(3)
    unit = compile_job(fabric, job, gpus, split_flows="independent", ring_window_bytes=4e6)
    if _jit.HAVE_NUMBA:
        with pytest.raises(ValueError, match=r"routing\.ring_window_bytes = 4e\+06: backend 'numba'.*numpy"):
            BatchSim(fabric, [[unit]], backend="numba")
    with pytest.raises(ValueError, match=r"routing\.ring_window_bytes.*rate_updates"):
        BatchSim(fabric, [[unit]], backend="numpy", rate_updates="phase")
    held = compile_job(
        fabric, job, gpus, split_flows="independent", ring_window_bytes=4e6, reroute_held_bytes=1e5
    )
    with pytest.raises(ValueError, match=r"routing\.ring_window_bytes.*held parts"):
        BatchSim(fabric, [[held]], backend="numpy")
    with pytest.raises(ValueError, match=r"routing\.ring_window_bytes = 4000000.0 with routing\.split_flows"):
        compile_job(fabric, job, gpus, ring_window_bytes=4e6)
    bad = replace(sc, routing=replace(sc.routing, split_flows="coupled"))
    with pytest.raises(ValueError, match=r"routing\.ring_window_bytes"):
        EnvCore(bad, batch=1, episode_steps=2, backend="numpy").reset([0])
