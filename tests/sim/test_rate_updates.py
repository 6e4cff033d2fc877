"""The rate-update modes: phase-level (an upper bound of the exact event mode, equal for rings) and the
rate quantum (completions close together merged into one event: near the exact mode, far fewer events)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ainet_gym import ScenarioError, load_scenario
from ainet_gym.routing.policies import get_policy
from ainet_gym.sim.world import FabricWorld


def run(
    name: str, mode: str, steps: int = 4, policy: str = "ecmp", quantum_us: float = 0.0
) -> tuple[np.ndarray, int]:
    sc = load_scenario(name)
    sc = dataclasses.replace(
        sc, dynamics=dataclasses.replace(sc.dynamics, rate_updates=mode, rate_quantum_us=quantum_us)
    )
    w = FabricWorld(sc)
    w.reset(seeds=[0])
    out, events = [], 0
    for _ in range(steps):
        r = w.step(get_policy(policy)(w, None))
        out.append(r.comm_time_s)
        events += r.events
    return np.array(out), events


def test_phase_mode_is_an_upper_bound_and_cheaper_on_skewed_alltoall() -> None:
    exact, ev_exact = run("moe-alltoall-skewed", "event", steps=2)
    phase, ev_phase = run("moe-alltoall-skewed", "phase", steps=2)
    ok = np.isfinite(exact) & np.isfinite(phase)
    assert ok.any()
    # early finishers keep bandwidth they no longer use: communication can only get slower
    assert (phase[ok] >= exact[ok] * (1 - 1e-9)).all()
    assert (phase[ok] > exact[ok] * (1 + 1e-6)).any()
    assert ev_phase < ev_exact / 5


@pytest.mark.parametrize("name", ["spine-leaf-2to1", "periodic-interference"])
def test_phase_mode_equals_event_mode_for_rings(name: str) -> None:
    # a pipelined ring is one flow per phase: no early finisher, so both modes agree exactly
    exact, _ = run(name, "event")
    phase, _ = run(name, "phase")
    np.testing.assert_allclose(phase, exact, rtol=1e-9)


def test_rate_updates_is_validated() -> None:
    sc = {"name": "x", "fabric": {"topology": "single_switch", "hosts": 2, "gpus_per_host": 1}}
    sc["workload"] = {"jobs": [{"name": "a", "gpus": 2, "collectives": [{"op": "allreduce", "bytes": 1e6}]}]}
    sc["dynamics"] = {"rate_updates": "packet"}
    with pytest.raises(ScenarioError, match=r"dynamics\.rate_updates"):
        load_scenario(sc)


def test_rate_quantum_merges_close_completions_and_stays_near_the_exact_mode() -> None:
    exact, ev_exact = run("moe-alltoall-skewed", "event", steps=6)
    ok = np.isfinite(exact)
    assert ok.sum() >= 6
    # a quantum far below the gaps between completions changes nothing
    tiny, ev_tiny = run("moe-alltoall-skewed", "event", steps=6, quantum_us=1e-6)
    np.testing.assert_allclose(tiny[ok], exact[ok], rtol=1e-9)
    assert ev_tiny == ev_exact
    # 10 and 100 us: completions of the skewed AllToAll merge (fewer events, so fewer solves), and the
    # communication times stay near the exact ones (measured: at most 0.02% and 0.3% off over these 6
    # steps); phase mode is off by far more
    phase, _ = run("moe-alltoall-skewed", "phase", steps=6)
    both = ok & np.isfinite(phase)
    err_phase = np.abs(phase[both] / exact[both] - 1).max()
    for q, fewer, bound in ((10.0, 1.0, 1e-2), (100.0, 0.6, 2e-2)):
        x, ev = run("moe-alltoall-skewed", "event", steps=6, quantum_us=q)
        err = np.abs(x[ok] / exact[ok] - 1).max()
        assert ev < fewer * ev_exact, (q, ev, ev_exact)
        assert 0 < err < bound, (q, err)  # > 0: the merge moved something, the quantum is not ignored
        assert err_phase > 10 * err, (q, err, err_phase)
    # an unbounded quantum is refused by the loader, with the field named
    sc = {"name": "x", "fabric": {"topology": "single_switch", "hosts": 2, "gpus_per_host": 1}}
    sc["workload"] = {"jobs": [{"name": "a", "gpus": 2, "collectives": [{"op": "allreduce", "bytes": 1e6}]}]}
    for bad in (-1.0, float("inf"), "1us"):
        sc["dynamics"] = {"rate_quantum_us": bad}
        with pytest.raises(ScenarioError, match=r"dynamics\.rate_quantum_us"):
            load_scenario(sc)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_rate_quantum_against_hand_computed_times(backend: str) -> None:
    """Two jobs' flows of S_a < S_b bytes share one 100 Gb/s uplink (and the downlink back), both at C/2.
    Exact: a's flow ends at 2 S_a / C, then b's runs alone at C and ends at (S_a + S_b) / C. A quantum
    shorter than the gap between their completions at the shared rate, 2 (S_b - S_a) / C = 160 us, changes
    nothing; a longer one makes both one event at b's finish at the old rate, 2 S_b / C, where both
    phases end."""
    C = 100e9 / 8  # bytes/s
    s_a, s_b = 1.0e8, 1.01e8

    def comm_ms(q_us: float) -> np.ndarray:
        job = {"gpus": 2, "compute_ms": 1, "collectives": [{"op": "sendrecv", "pattern": "shift:1"}]}
        sc = {
            "name": "two-flows",
            "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
                       "gpus_per_host": 1, "nic_gbps": 100, "uplink_gbps": 100, "hop_latency_us": 0},
            "workload": {"jobs": [
                {**job, "name": "a", "placement": [0, 2],
                 "collectives": [{**job["collectives"][0], "bytes": s_a}]},
                {**job, "name": "b", "placement": [1, 3],
                 "collectives": [{**job["collectives"][0], "bytes": s_b}]},
            ]},
            # one iteration each: communication from 1 ms to about 17.2 ms at the latest
            "dynamics": {"decision_interval_ms": 17.5, "rate_quantum_us": q_us},
        }  # fmt: skip
        w = FabricWorld(load_scenario(sc), 1, backend=backend)
        w.reset(seeds=[0])
        return np.asarray(w.step(w.default_split()).comm_time_s).reshape(-1) * 1e3

    exact = np.array([2 * s_a / C, (s_a + s_b) / C]) * 1e3  # 16.00, 16.08 ms
    np.testing.assert_allclose(comm_ms(0.0), exact, rtol=1e-12)
    np.testing.assert_allclose(comm_ms(100.0), exact, rtol=1e-12)
    np.testing.assert_allclose(comm_ms(200.0), [2 * s_b / C * 1e3] * 2, rtol=1e-12)  # 16.16 ms both
