"""``routing.ring_run_ahead_bytes``: a ring whose independent hops run apart by at most one segment (no ns-3).

With ``routing.split_flows: independent`` each hop of a ring is a flow of its own (an unbounded run-ahead);
``ring_run_ahead_bytes`` cuts the ring into sequential segments of at most that many bytes per hop, so the
hops run apart within a segment and meet at its end. References: a hand-computed two-rank ring whose two
hops are slow (a quarter rate) one after the other, where the segmented time lies strictly between the
coupled and the unbounded ones; a coupled ring cut in segments takes the uncut time (the alpha terms are
unchanged); the two backends against each other; bad values refused with the field named."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ainet_gym.envs.env import EnvCore
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.scenario.collectives import decompose
from ainet_gym.scenario.spec import CollectiveSpec, Scenario
from ainet_gym.sim.backends.numba import jit as _jit
from ainet_gym.sim.workload import segment_rings

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
C = 10e9 / 8  # bytes/s of a 10 Gb/s link (link_efficiency 1)
H = C * 20e-3  # bytes per ring hop: 2 (p-1)/p S with p = 2 is S


def _ring(routing: dict | None, latency_us: float = 0.0) -> dict:
    """Two GPUs on two leaves joined by two spines run an AllReduce ring of H bytes per hop after 5 ms of
    compute, 15 ms intervals. leaf0-spine0 at a quarter rate in interval 0, leaf0-spine1 in interval 1
    (both directions); hop A (GPU 0 -> 1) goes by spine 0 and hop B (1 -> 0) by spine 1 (:func:`_split`),
    so A is slow in [5, 15) ms and B in [15, 30) ms."""
    fails = [
        {"link": "leaf0-spine0", "at_step": 0, "until_step": 1, "factor": 0.25},
        {"link": "leaf0-spine1", "at_step": 1, "until_step": 2, "factor": 0.25},
    ]
    sc = {
        "name": "ring-run-ahead",
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 1,
                   "gpus_per_host": 1, "nic_gbps": 10, "uplink_gbps": 10, "hop_latency_us": latency_us,
                   "link_efficiency": 1.0},
        "workload": {"jobs": [{"name": "r", "gpus": 2, "compute_ms": 5.0,
                               "collectives": [{"op": "allreduce", "algorithm": "ring", "bytes": H}]}]},
        "dynamics": {"episode_steps": 4, "decision_interval_ms": 15.0,
                     "link_failures": {"scheduled": fails}},
    }  # fmt: skip
    if routing:
        sc["routing"] = routing
    return sc


def _split(core: EnvCore) -> np.ndarray:
    """Connection 0 -> 1 on its path through leaf0 -> spine0, connection 1 -> 0 on its path through
    spine1 -> leaf0."""
    sim, fabric = core.world.sim, core.world.fabric
    L = fabric.n_links
    want = {
        0: set(fabric.link_ids("leaf0-spine0").tolist()),
        1: set(fabric.link_ids("leaf0-spine1").tolist()),
    }
    split = np.zeros((sim.n_conns, core.P))
    for c in range(sim.n_conns):
        links = want[int(sim.conn_src[c])]
        via = [bool(links & set((sim.conn_paths[c, q] % L).tolist())) for q in range(int(sim.conn_npaths[c]))]
        assert sum(via) == 1, via
        split[c, : len(via)] = via
    return split


def _comm_ms(sc: dict | Scenario, backend: str) -> float:
    """Communication time (ms) of the one iteration that ends in interval 2 (30-45 ms)."""
    core = EnvCore(sc, batch=1, episode_steps=4, backend=backend)
    core.reset([0])
    its, comm = [], []
    for _ in range(3):
        core.step_split(_split(core))
        r = core.last_result
        its.append(int(r.iterations[0, 0]))
        comm.append(float(r.comm_time_s[0, 0]) * 1e3)
    assert its == [0, 0, 1], its
    return comm[2]


def _coupled(sc: dict) -> Scenario:
    """``sc`` loaded, then its routing set to coupled with the run-ahead kept (the loader refuses that
    pair; the engine must still give the uncut time)."""
    s = load_scenario(sc)
    return replace(s, routing=replace(s.routing, split_flows="coupled"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_segmented_ring_lies_between_coupled_and_unbounded(backend: str) -> None:
    """From 5 ms, A moves at C/4 until 15 ms and C after; B at C until 15 ms, C/4 until 30 ms, C after.
    Coupled (one rate, the slower hop's): C/4 x 25 ms by 30 ms, then the rest, C x 13.75 ms, at C:
    38.75 ms. Unbounded (independent): A has C x 2.5 ms at 15 ms and ends at 32.5 ms; B has C x 13.75 ms at
    30 ms and ends at 36.25 ms: 31.25 ms. Run-ahead H/2 (two segments of C x 10 ms): segment 1, A ends at
    15 + 7.5 = 22.5 ms (B at 15 ms); segment 2 from 22.5 ms, B moves C/4 x 7.5 ms by 30 ms and the rest,
    C x 8.125 ms, at C: 38.125 ms, so 33.125 ms."""
    got = {
        "coupled": _comm_ms(_ring(None), backend),
        "unbounded": _comm_ms(_ring({"split_flows": "independent"}), backend),
        "bounded": _comm_ms(_ring({"split_flows": "independent", "ring_run_ahead_bytes": H / 2}), backend),
        "one segment": _comm_ms(_ring({"split_flows": "independent", "ring_run_ahead_bytes": H}), backend),
    }
    want = {"coupled": 38.75, "unbounded": 31.25, "bounded": 33.125, "one segment": 31.25}
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-12), k


@pytest.mark.parametrize("backend", BACKENDS)
def test_coupled_ring_cut_in_segments_takes_the_uncut_time(backend: str) -> None:
    """With 50 us per link a 2-rank ring pays 2 alpha steps of 4 links, a = 0.4 ms, before its bytes: C/4
    over [5.4, 30) ms, the rest at C, 38.75 + a/4 = 38.85 ms. A coupled ring in 4 segments takes the uncut
    time to 1e-9 (segments that each paid the alpha would add 3 x 0.4 ms)."""
    uncut = _comm_ms(_ring(None, latency_us=50.0), backend)
    cut = _comm_ms(
        _coupled(_ring({"split_flows": "independent", "ring_run_ahead_bytes": H / 4}, 50.0)), backend
    )
    assert uncut == pytest.approx(38.85, rel=1e-12)
    assert cut == pytest.approx(uncut, rel=1e-9)


def test_backends_agree() -> None:
    if len(BACKENDS) < 2:
        pytest.skip("numba not installed")
    for ra in (H / 2, H / 3, H / 7):
        sc = _ring({"split_flows": "independent", "ring_run_ahead_bytes": ra}, latency_us=10.0)
        a, b = (_comm_ms(sc, be) for be in BACKENDS)
        assert a == pytest.approx(b, rel=1e-9), ra


def test_segment_rings_keeps_bytes_and_alpha() -> None:
    """A ring of 8 ranks (per hop 2 x 7/8 x 10 MB = 17.5 MB) under a 4 MiB run-ahead: 5 segments of 3.5 MB,
    the 14 alpha steps on the first; each ring phase of a hierarchical AllReduce cut on its own; a
    halving-doubling AllReduce (no ring) and None are left alone."""
    ring = decompose(CollectiveSpec(op="allreduce", algorithm="ring", bytes=10e6), 8)
    cut = segment_rings(ring, 4 * 2**20)
    assert [ph.steps for ph in cut] == [14, 0, 0, 0, 0]
    assert all(ph.flows[0].bytes == pytest.approx(3.5e6) and ph.after is None for ph in cut)
    assert all(ph.flows[0].members == ring[0].flows[0].members for ph in cut)
    # hierarchical, 4 hosts of 2: host rings of 4 MB per hop, rails of 2 x 3/4 x 8 MB / 2 = 6 MB: 2 segments each
    hier = decompose(
        CollectiveSpec(op="allreduce", algorithm="hierarchical", bytes=8e6), 8, [0, 0, 1, 1, 2, 2, 3, 3]
    )
    cut = segment_rings(hier, 3e6)
    assert [ph.steps for ph in cut] == [1, 0, 6, 0, 1, 0]
    assert [ph.flows[0].bytes for ph in cut] == pytest.approx([2e6, 2e6, 3e6, 3e6, 2e6, 2e6])
    hd = decompose(CollectiveSpec(op="allreduce", algorithm="halving_doubling", bytes=10e6), 8)
    assert segment_rings(hd, 1e3) == hd
    assert segment_rings(ring, None) == ring


def test_bad_run_ahead_refused_with_the_field_named() -> None:
    for bad in (0, -4, "4MiB"):
        with pytest.raises(ScenarioError) as e:
            load_scenario(_ring({"split_flows": "independent", "ring_run_ahead_bytes": bad}))
        msg = str(e.value)
        assert "routing.ring_run_ahead_bytes" in msg and str(bad) in msg and "bytes" in msg, msg
    with pytest.raises(ScenarioError) as e:  # under coupled the hops move at one rate
        load_scenario(_ring({"ring_run_ahead_bytes": 4e6}))
    msg = str(e.value)
    assert "routing.ring_run_ahead_bytes" in msg and "independent" in msg and "coupled" in msg, msg
    with pytest.raises(ScenarioError) as e:  # 25 MB per hop in 1-byte segments: 50 M flows
        load_scenario(_ring({"split_flows": "independent", "ring_run_ahead_bytes": 1}))
    msg = str(e.value)
    assert "routing.ring_run_ahead_bytes" in msg and "segments" in msg and "chunk_flows" in msg, msg
    assert load_scenario(_ring({"split_flows": "independent", "ring_run_ahead_bytes": None})).routing == (
        load_scenario(_ring({"split_flows": "independent"})).routing
    )


def test_policies_see_the_uncut_ring() -> None:
    """The LP's peak demand per connection (:func:`connection_peak_rate`, max over a job's phases) is that
    of the uncut ring: a segment counts its whole ring's bytes, so the run-ahead bound changes the fluid
    model's physics, not the demand a policy routes (the crosscheck case; 4 MiB cuts its rings in 3)."""
    from ainet_gym.routing.loads import connection_demand, connection_peak_rate

    sc = load_scenario("scenarios/crosscheck/xc-ingest-bursts.yaml")
    out = []
    for ra in (None, 4 * 2**20):
        s = replace(sc, routing=replace(sc.routing, split_flows="independent", ring_run_ahead_bytes=ra))
        core = EnvCore(s, batch=1, episode_steps=2, backend="numpy")
        core.reset([0])
        w = core.world
        out.append((connection_peak_rate(w), connection_demand(w), int(w.sim.phase_segments.max())))
    (p0, d0, n0), (p1, d1, n1) = out
    assert (n0, n1) == (1, 3)
    np.testing.assert_allclose(p1, p0, rtol=1e-12)
    np.testing.assert_allclose(d1, d0, rtol=1e-12)
