"""``routing.reroute_held_weight``: what a held part of ``routing.reroute_held_bytes`` weighs on its path's links,
``one`` (coefficient 1, the default) or ``part`` (the fraction its path part had before the split change that
handed it bytes, so it shares a link as that sub-flow did; no ns-3).

References: a hand-computed closed form of a held part at coefficient 1/2 sharing the NIC with the path part that
takes the moved bytes; ``one`` equal to the setting omitted; the held bytes carried in full whatever the weight;
the two backends against each other; a snapshot; bad values refused with the field named."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _scenarios import alternating_rollout, two_path_exchange

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
C = 10e9 / 8  # bytes/s of a 10 Gb/s link (link_efficiency 1)
S = 20e6  # bytes per transfer
R = S - C * 10e-3  # bytes left at the first boundary (15 ms), the transfer having run 10 ms at C


def _scenario(held: float, weight: str | None) -> dict:
    """Two GPUs on two leaves joined by two spines exchange S bytes (sendrecv shift:1) after 5 ms of compute,
    every 15 ms interval; leaf0-spine0 (both directions) at half rate for good."""
    routing: dict = {"split_flows": "independent", "reroute_held_bytes": held}
    if weight is not None:
        routing["reroute_held_weight"] = weight
    return two_path_exchange(
        "reroute-held-weight", {"link": "leaf0-spine0", "at_step": 0, "factor": 0.5}, routing, nbytes=S
    )


def _run(sc: dict, backend: str) -> tuple[list[tuple[int, float]], np.ndarray, EnvCore]:
    """Interval 0 50/50 over the slow and the fast path, then the fast path only: per interval (iterations
    completed, mean communication time in ms or nan), each interval's bytes on the slow links, the env."""
    core = EnvCore(sc, batch=1, episode_steps=3, backend=backend)
    core.reset([0])
    sim, L = core.world.sim, core.world.fabric.n_links
    slow = np.flatnonzero(core.world.links.cap_factor[0] < 1)
    out, slow_bytes = [], []
    for k in range(3):
        split = np.zeros((sim.n_conns, core.P))
        for c in range(sim.n_conns):
            via = np.array([np.isin(sim.conn_paths[c, p] % L, slow).any() for p in range(2)], float)
            split[c, :2] = 0.5 if k == 0 else 1.0 - via
        core.step_split(split)
        r = core.last_result
        out.append((int(r.iterations[0, 0]), float(r.comm_time_s[0, 0]) * 1e3))
        slow_bytes.append(np.asarray(r.link_bytes)[0, slow])
    return out, np.array(slow_bytes), core


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("held", [0.0, 2e6, 3e6, 1e9])
@pytest.mark.parametrize("weight", ["one", "part"])
def test_held_part_drains_at_its_weight(backend: str, held: float, weight: str) -> None:
    """Interval 0: both parts (coefficient 1/2) of each connection run at C (the NIC, C, and the slow link, C/2,
    both full), so at 15 ms R bytes are left, R/2 on the slow path. The split becomes fast-path only: the slow
    path loses share (1/2 -> 0) and its held part keeps h = min(H, R/2) there; the fast part (coefficient 1)
    takes R - h. A held part at coefficient w shares the NIC with the fast part: equal max-min rates r with
    (w + 1) r = C. ``one`` (w = 1): the held part drains at C/2 (the slow link's whole rate too), the fast part
    at C/2; the held part ends at 2h/C <= R/C, the fast part at R/C (NIC bound). ``part`` (w = 1/2, its part's
    fraction before the change): r = 2C/3, the held part drains at C/3 and the fast part at 2C/3; if 3h <= R
    the held part ends first and the transfer at R/C; else the fast part ends at 1.5 (R - h)/C and the held
    part's rest, (3h - R)/2, goes at C/2 (the slow link): (R + 3h)/(2C). comm = 10 ms + that. Either way the
    slow links carry exactly h in interval 1."""
    h = min(held, R / 2)
    tail = max(R, 2 * h) if weight == "one" else max(R, (R + 3 * h) / 2)
    out, slow_bytes, _ = _run(_scenario(held, weight), backend)
    assert out[0][0] == 0 and out[1][0] == 1
    assert out[1][1] == pytest.approx((10e-3 + tail / C) * 1e3, rel=1e-12)
    np.testing.assert_allclose(slow_bytes[0], C / 2 * 10e-3, rtol=1e-12)
    np.testing.assert_allclose(slow_bytes[1], h, rtol=1e-12, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_is_the_setting_omitted(backend: str) -> None:
    """``one`` keeps 27zq's held parts bit for bit (no held_weight in the engine state)."""
    a, a_bytes, core = _run(_scenario(3e6, None), backend)
    b, b_bytes, _ = _run(_scenario(3e6, "one"), backend)
    assert core.world.sim.engine_state.held_weight is None
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a_bytes, b_bytes)


def test_held_weight_is_stored() -> None:
    """After the change, the slow path's (connection, path) weighs 1/2 (its old fraction), the others 1; the
    held part stores 2h (h bytes at coefficient 1/2), and member_share gives its weight."""
    _, _, core = _run(_scenario(1e9, "part"), "numpy")
    sim = core.world.sim
    hw = sim.engine_state.held_weight
    assert hw is not None and sorted(np.unique(hw).tolist()) == [0.5, 1.0]
    assert np.count_nonzero(hw == 0.5) == sim.n_conns  # one slow path per connection
    share = sim.member_share()
    hm = np.searchsorted(sim.member_flow, sim.held)
    assert sorted(np.unique(share[hm]).tolist()) == [0.5, 1.0]


def _alternating(weight: str, backend: str, steps: int = 6) -> np.ndarray:
    scn = load_scenario("scenarios/crosscheck/xc-periodic-interference.yaml")
    routing = replace(
        scn.routing, split_flows="independent", reroute_held_bytes=1e6, reroute_held_weight=weight
    )
    return alternating_rollout(replace(scn, routing=routing), 2, steps, backend)


@pytest.mark.skipif(len(BACKENDS) < 2, reason="numba not installed")
def test_backends_agree_with_part_weight() -> None:
    """Two rings with background bursts and a degraded link, the split changing at every boundary, 1 MB held
    at the part's weight: communication times and link bytes of both backends to 1e-9; and the weight changes
    the run."""
    b = _alternating("part", "numba")
    np.testing.assert_allclose(_alternating("part", "numpy"), b, rtol=1e-9, atol=1e-6)
    assert not np.allclose(b, _alternating("one", "numba"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_snapshot_restores_the_held_weights(backend: str) -> None:
    """A snapshot taken mid-run, the split changing at every boundary, 1 MB held at the part's weight: the
    steps after a restore give what the steps after the snapshot gave, bit for bit."""
    scn = load_scenario("scenarios/crosscheck/xc-ingest-bursts.yaml")
    routing = replace(
        scn.routing, split_flows="independent", reroute_held_bytes=1e6, reroute_held_weight="part"
    )
    core = EnvCore(replace(scn, routing=routing), backend=backend)
    core.reset([1])
    policies = [get_policy(p) for p in ("lp", "spray", "lp", "spray")]

    def steps(k0: int) -> np.ndarray:
        out = []
        for k in range(k0, k0 + 2):
            core.step_split(policies[k](core.world, None))
            r = core.last_result
            out.append(np.concatenate([np.nan_to_num(r.comm_time_s).ravel(), r.link_bytes.ravel()]))
        return np.array(out)

    steps(0)
    snap = core.world.snapshot()
    a = steps(2)
    core.world.restore(snap)
    np.testing.assert_array_equal(steps(2), a)


@pytest.mark.parametrize("bad", ["1/8", "ONE", 1, 0.125, True])
def test_bad_held_weight_refused_with_the_field_named(bad: object) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(_scenario(2e5, bad))  # type: ignore[arg-type]
    msg = str(e.value)
    assert "routing.reroute_held_weight" in msg and "one, part" in msg and repr(bad) in msg


def test_compile_job_refuses_bad_held_weight() -> None:
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.sim.engine import compile_job

    sc = load_scenario(_scenario(0.0, None))
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    with pytest.raises(ValueError, match=r"routing.reroute_held_weight = 'half': allowed: one, part"):
        compile_job(
            fabric, sc.jobs[0], np.arange(2), split_flows="independent", reroute_held_bytes=1.0,
            reroute_held_weight="half",
        )  # fmt: skip
