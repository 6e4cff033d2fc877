"""``routing.reroute_held_parts``: which path parts hold bytes at a split change in flight (with
``routing.reroute_held_bytes``; no ns-3). ``all`` (the default): every part that loses share; ``queued``: only a
part whose first bottleneck along its path, in the max-min allocation at the boundary, is a switch link of its own
(one that not every candidate path of its connection crosses), where a TCP sub-flow's bytes would be queued.

References: hand-computed allocations at a boundary (which parts are queued); the 27zq closed form of a part
moved off a slow switch link, which is queued and so holds as under ``all``; a NIC-bound part that holds nothing;
``all`` equal to the setting omitted; the two backends against each other; a snapshot; bad values refused with
the field named."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _scenarios import (
    alternating_rollout,
    assert_restore_replays,
    slow_then_even_rollout,
    split_slow_or_even,
    two_path_exchange,
)

from ainet_gym.envs.env import EnvCore
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
C = 10e9 / 8  # bytes/s of a 10 Gb/s link (link_efficiency 1)
S = 20e6  # bytes per transfer


def _two_path(parts: str | None, held: float, factor: float) -> dict:
    """27zq's case: two GPUs on two leaves joined by two spines exchange S bytes after 5 ms of compute, every
    15 ms interval; leaf0-spine0 (both directions) at ``factor`` of its rate for good."""
    routing: dict = {"split_flows": "independent", "reroute_held_bytes": held}
    if parts is not None:
        routing["reroute_held_parts"] = parts
    return two_path_exchange(
        "reroute-held-parts", {"link": "leaf0-spine0", "at_step": 0, "factor": factor}, routing, nbytes=S
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("held", [2e6, 1e9])
def test_part_queued_on_a_slow_switch_link_holds(backend: str, held: float) -> None:
    """The transfer runs on the slow path alone (its switch link leaf0-spine0 at C/2, its NIC at C): its first
    bottleneck is that switch link, so it is queued and holds as under ``all`` (27zq's closed form): R = S - C/2
    x 10 ms left at 15 ms, h = min(held, R) stays on path 0 and R - h is re-split 50/50; path 0's slow link
    carries (R + h)/2 at C/2, so comm = 10 ms + (R + h)/C."""
    R = S - C / 2 * 10e-3
    h = min(held, R)
    want = 10e-3 + (R + h) / C
    out = slow_then_even_rollout(_two_path("queued", held, 0.5), backend)
    k = int((15e-3 + (R + h) / C) // 15e-3)  # the interval it completes in
    assert [i for i, _ in out[: k + 1]] == [0] * k + [1]
    assert out[k][1] == pytest.approx(want * 1e3, rel=1e-12)
    np.testing.assert_array_equal(out, slow_then_even_rollout(_two_path("all", held, 0.5), backend))


def _held_at_boundary(parts: str, backend: str, held: float = 2e6) -> tuple[np.ndarray, EnvCore]:
    """Every link at full rate (factor 1): interval 0 on path 0 alone, then the 50/50 split set at the boundary
    (15 ms): the bytes each held part got."""
    core = EnvCore(_two_path(parts, held, 1.0), batch=1, episode_steps=4, backend=backend)
    core.reset([0])
    sim = core.world.sim
    first = np.zeros((sim.n_conns, core.P))
    first[:, 0] = 1.0
    core.step_split(first)
    sim.set_split(split_slow_or_even(core, slow_only=False))
    return np.array(sim.state.rem[sim.held]), core


@pytest.mark.parametrize("backend", BACKENDS)
def test_nic_bound_part_holds_nothing(backend: str) -> None:
    """Every link at C: the transfer on path 0 alone saturates its NIC and its switch links at the same rate, so
    its first bottleneck is its NIC (hop 0), which both paths cross: not queued, nothing held, where ``all``
    holds h = min(2 MB, R) on each connection's path 0 (R = S - C x 10 ms = 7.5 MB). (The NIC binds after the
    change too, so the time is the same either way: 10 ms + R / C.)"""
    q, core = _held_at_boundary("queued", backend)
    a, _ = _held_at_boundary("all", backend)
    R = S - C * 10e-3
    assert q.shape == a.shape and q.sum() == 0.0
    assert np.sort(a)[-2:] == pytest.approx([min(2e6, R)] * 2, rel=1e-12) and np.sort(a)[:-2].sum() == 0.0
    core.step_split(core.world.sim.engine_state.split)
    assert float(core.last_result.comm_time_s[0, 0]) * 1e3 == pytest.approx((10e-3 + R / C) * 1e3, rel=1e-12)


def _three_jobs(parts: str, held: float = 1e9) -> dict:
    """Two leaves (GPUs 0, 1, 2 on leaf 0; 3, 4, 5 on leaf 1) joined by two spines, every link 10 Gb/s, no
    latency, ``per_part`` sharing: x (GPUs 0, 3), y (1, 4) and z (2, 5) each exchange 100 MB after 5 ms."""
    job = {"compute_ms": 5.0, "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": 1e8}]}
    return {
        "name": "held-parts",
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 3,
                   "gpus_per_host": 1, "nic_gbps": 10, "uplink_gbps": 10, "hop_latency_us": 0.0,
                   "link_efficiency": 1.0},
        "workload": {"jobs": [{**job, "name": "x", "gpus": 2, "placement": [0, 3]},
                              {**job, "name": "y", "gpus": 2, "placement": [1, 4]},
                              {**job, "name": "z", "gpus": 2, "placement": [2, 5]}]},
        "dynamics": {"episode_steps": 4, "decision_interval_ms": 10.0},
        "routing": {"max_paths": 2, "split_flows": "independent", "part_share": "per_part",
                    "reroute_held_bytes": held, "reroute_held_parts": parts},
    }  # fmt: skip


def _via_spine0(core: EnvCore) -> np.ndarray:
    """(connections, 2) whether each candidate path crosses spine 0."""
    sim, fabric = core.world.sim, core.world.fabric
    names = np.asarray(fabric.link_names)
    return np.array(
        [
            [
                any("spine0" in names[k % fabric.n_links] for k in sim.conn_paths[c, p] if k >= 0)
                for p in range(2)
            ]
            for c in range(sim.n_conns)
        ]
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_queued_parts_by_hand(backend: str) -> None:
    """x split 1/2-1/2 (parts A on spine 0, B on spine 1, each of coefficient 1 under ``per_part``), y and z on
    spine 0 alone, all moving at the 10 ms boundary. Max-min: the uplink leaf0->spine0 carries A, y and z, C/3
    each (the lowest share), saturated; x's NIC then gives B the rest, 2C/3, and saturates; spine 1's uplink
    carries B alone at 2C/3 < C. A's first saturated link where it has the top level is that uplink (its NIC is
    saturated too, but B has the top level there): queued. B's first is its NIC, which both of x's paths cross:
    not queued. So when x moves to 3/4-1/4 (B loses share) B holds nothing under ``queued`` and all it has on
    its path (held bytes 1 GB) under ``all``; when x moves to 1/4-3/4 (A loses) A holds under both. The same
    in the reverse direction (leaf 1's uplinks)."""
    for parts, to_spine0, want_hold in (
        ("queued", 0.75, False),
        ("all", 0.75, True),
        ("queued", 0.25, True),
        ("all", 0.25, True),
    ):
        core = EnvCore(_three_jobs(parts), batch=1, episode_steps=4, backend=backend)
        core.reset([0])
        sim = core.world.sim
        via0 = _via_spine0(core)
        x = np.arange(sim.n_conns) < sim.conn_off[1]
        split = np.where(via0, 1.0, 0.0)
        split[x] = 0.5
        core.step_split(split)
        new = split.copy()
        new[x] = np.where(via0[x], to_spine0, 1 - to_spine0)
        q = sim._queued_parts(new)
        in_x = x[sim.part_conn]
        on0 = via0[sim.part_conn, sim.part_path]
        if parts == "queued":
            assert q is not None and q[in_x & on0].all() and not q[in_x & ~on0].any()
        else:  # no unit asks for it
            assert q is None
        rem = sim.state.rem[sim.parts].copy()
        sim.set_split(new)
        got = sim.state.rem[sim.held]
        loser = in_x & (on0 if to_spine0 < 0.5 else ~on0)
        assert (got[~loser] == 0).all()
        if want_hold:  # everything the loser had on its path (held bytes 1 GB): per_part, its remainder
            np.testing.assert_allclose(got[loser], rem[loser], rtol=1e-12)
            assert (got[loser] > 0).all()
        else:
            assert (got[loser] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_is_the_setting_omitted(backend: str) -> None:
    """``all`` is 27zq's held bytes bit for bit (no queued units bound), and ``queued`` without held bytes is the
    engine without them."""
    a = slow_then_even_rollout(_two_path(None, 2e6, 0.5), backend)
    core = EnvCore(_two_path("all", 2e6, 0.5), batch=1, episode_steps=4, backend=backend)
    core.reset([0])
    assert core.world.sim.held_queued is None
    np.testing.assert_array_equal(a, slow_then_even_rollout(_two_path("all", 2e6, 0.5), backend))
    np.testing.assert_array_equal(
        slow_then_even_rollout(_two_path("queued", 0.0, 0.5), backend),
        slow_then_even_rollout(_two_path(None, 0.0, 0.5), backend),
    )


def _alternating(parts: str, backend: str, steps: int = 6) -> np.ndarray:
    scn = load_scenario("scenarios/crosscheck/xc-periodic-interference.yaml")
    routing = replace(
        scn.routing, split_flows="independent", reroute_held_bytes=1e6, part_share="per_part",
        reroute_held_parts=parts,
    )  # fmt: skip
    return alternating_rollout(replace(scn, routing=routing), 2, steps, backend)


@pytest.mark.skipif(len(BACKENDS) < 2, reason="numba not installed")
def test_backends_agree_with_queued_parts() -> None:
    """Two rings with background bursts and a degraded link, the split changing at every boundary, 1 MB held
    where queued: communication times and link bytes of both backends to 1e-9."""
    np.testing.assert_allclose(
        _alternating("queued", "numpy"), _alternating("queued", "numba"), rtol=1e-9, atol=1e-6
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_snapshot_restores_with_queued_parts(backend: str) -> None:
    scn = load_scenario("scenarios/crosscheck/xc-ingest-bursts.yaml")
    routing = replace(
        scn.routing, split_flows="independent", reroute_held_bytes=1e6, reroute_held_parts="queued"
    )
    assert_restore_replays(replace(scn, routing=routing), backend, ("lp", "spray", "lp", "spray"))


@pytest.mark.parametrize("bad", ["some", "Queued", 1, True])
def test_bad_held_parts_refused_with_the_field_named(bad: object) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(_two_path(bad, 2e6, 0.5))  # type: ignore[arg-type]
    msg = str(e.value)
    assert "routing.reroute_held_parts" in msg and "allowed: all, queued" in msg


def test_compile_job_refuses_bad_held_parts() -> None:
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.sim.engine import compile_job

    sc = load_scenario(_two_path(None, 2e6, 0.5))
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    with pytest.raises(ValueError, match=r"routing.reroute_held_parts = 'some': allowed: all, queued"):
        compile_job(fabric, sc.jobs[0], np.arange(2), split_flows="independent", reroute_held_parts="some")
