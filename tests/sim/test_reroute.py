"""``routing.reroute``: what a new split does to the transfers in flight (no ns-3 needed).

``in_flight`` (the default, the model's behaviour before the field existed): a transfer's remaining bytes
follow the new split at once. ``new_transfers``: a transfer keeps the split it started with; transfers that
start after the decision take the new split. References: hand-computed times of one transfer whose split
changes while it is in flight; the numpy and numba backends against each other; snapshots and restarts."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
from _scenarios import (
    alternating_rollout,
    slow_then_even_rollout,
    small_spine_leaf,
    two_path_exchange,
)

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
C = 10e9 / 8  # bytes/s of a 10 Gb/s link (link_efficiency 1)
S = 20e6  # bytes per transfer


def _two_paths(reroute: str | None) -> dict:
    """Two GPUs on two leaves joined by two spines, exchanging S bytes (sendrecv shift:1) after 5 ms of
    compute, every 15 ms interval; the leaf0-spine0 link (both directions) at half rate. No latency."""
    fail = {"link": "leaf0-spine0", "at_step": 0, "factor": 0.5}
    return two_path_exchange(
        "reroute-two-paths", fail, {"reroute": reroute} if reroute is not None else None, S
    )


def _run_switching(reroute: str | None, backend: str) -> list[tuple[int, float]]:
    """Interval 0: every connection on its path through the half-rate link; then 50/50 over both paths.
    Returns per interval (iterations completed, mean communication time in ms or nan)."""
    return slow_then_even_rollout(_two_paths(reroute), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_flight_moves_the_remaining_bytes_at_the_boundary(backend: str) -> None:
    """Iteration 1 communicates from 5 ms: 10 ms at C/2 on the slow path, then the rest at C over both
    paths (C/2 each): 10 ms + (S - C/2 * 10 ms) / C = 5 ms + S / C = 21 ms, ending at 26 ms (interval 1).
    Iteration 2 communicates from 31 ms at C: S / C = 16 ms, ending at 47 ms (interval 3)."""
    for reroute in (None, "in_flight"):  # the default is in_flight
        (i0, _), (i1, c1), (i2, _), (i3, c3) = _run_switching(reroute, backend)
        assert (i0, i1, i2, i3) == (0, 1, 0, 1)
        assert c1 == pytest.approx((5e-3 + S / C) * 1e3, rel=1e-12)
        assert c3 == pytest.approx(S / C * 1e3, rel=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_transfers_keep_their_split_until_they_end(backend: str) -> None:
    """Iteration 1 (from 5 ms) keeps the slow path it started on: S / (C/2) = 32 ms, ending at 37 ms
    (interval 2), though the split is 50/50 from 15 ms on. Iteration 2 starts its transfer at 42 ms, after
    the decision, and takes the 50/50 split: S / C = 16 ms, ending at 58 ms (interval 3)."""
    (i0, _), (i1, _), (i2, c2), (i3, c3) = _run_switching("new_transfers", backend)
    assert (i0, i1, i2, i3) == (0, 0, 1, 1)
    assert c2 == pytest.approx(2 * S / C * 1e3, rel=1e-12)
    assert c3 == pytest.approx(S / C * 1e3, rel=1e-12)


def _alternating(sc: dict | str, reroute: str, backend: str, steps: int = 8, batch: int = 2) -> np.ndarray:
    scn = load_scenario(sc)
    return alternating_rollout(
        replace(scn, routing=replace(scn.routing, reroute=reroute)), batch, steps, backend
    )


@pytest.mark.skipif(len(BACKENDS) < 2, reason="numba not installed")
def test_backends_agree_under_new_transfers() -> None:
    """Two drifting jobs with background bursts and a degraded link (periodic-interference's shape), the
    split changing at every boundary: communication times and link bytes of both backends to 1e-9."""
    a = _alternating("scenarios/crosscheck/xc-periodic-interference.yaml", "new_transfers", "numpy")
    b = _alternating("scenarios/crosscheck/xc-periodic-interference.yaml", "new_transfers", "numba")
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-6)
    c = _alternating("scenarios/crosscheck/xc-periodic-interference.yaml", "in_flight", "numba")
    assert not np.allclose(b, c)  # the two semantics differ on this episode


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_transfers_equal_in_flight_when_the_split_never_changes(backend: str) -> None:
    """With one split for the whole episode nothing is carried over: both semantics give the same run."""
    scn = load_scenario("scenarios/crosscheck/xc-periodic-interference.yaml")
    runs = []
    for reroute in ("in_flight", "new_transfers"):
        core = EnvCore(replace(scn, routing=replace(scn.routing, reroute=reroute)), batch=1, backend=backend)
        core.reset([0])
        split = get_policy("spray")(core.world, None)
        res = []
        for _ in range(6):
            core.step_split(split)
            r = core.last_result
            res.append(np.concatenate([np.nan_to_num(r.comm_time_s).ravel(), r.link_bytes.ravel()]))
        runs.append(np.array(res))
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12, atol=1e-3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_transfers_snapshot_restores_the_pinned_splits(backend: str) -> None:
    sc = small_spine_leaf(8, name="reroute-snap")
    sc["routing"] = {"reroute": "new_transfers"}
    core = EnvCore(sc, batch=2, action_mode="split", backend=backend)
    core.reset([1, 2])
    sp = core.action_space
    sp.seed(0)
    for _ in range(2):
        core.step(np.stack([sp.sample() for _ in range(2)]))
    snap = core.snapshot()
    acts = [np.stack([sp.sample() for _ in range(2)]) for _ in range(4)]
    first = [core.step(a)[1].copy() for a in acts]
    core.restore(snap)
    again = [core.step(a)[1].copy() for a in acts]
    np.testing.assert_array_equal(np.array(first), np.array(again))


def test_loader_validates_reroute_naming_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"routing\.reroute.*in_flight, new_transfers"):
        load_scenario(_two_paths("moved"))
    sc = copy.deepcopy(_two_paths("new_transfers"))
    sc["workload"]["jobs"][0]["collectives"] = [
        {"op": "allreduce", "algorithm": "tree", "bytes": 2e6, "chunks": 4}
    ]
    with pytest.raises(ScenarioError, match=r"routing\.reroute.*chunks = 4"):
        load_scenario(sc)
    assert load_scenario(_two_paths(None)).routing.reroute == "in_flight"


def test_compare_reports_both_semantics_and_the_share_of_the_gain() -> None:
    """Static splits (ECMP's hash, spray) never change between intervals, so they move nothing in flight:
    the same GPU utilisation under both semantics, and no share of spray's gain from moving transfers."""
    from ainet_gym.checks.reroute import compare, markdown

    out = compare(small_spine_leaf(4, name="reroute-compare"), ["spray"], seeds=[1, 2], steps=4)
    assert out["scenario"] == "reroute-compare" and out["seeds"] == [1, 2]
    for name in ("ecmp", "spray"):
        row = out["policies"][name]
        assert row["in_flight"]["gpu_utilization"] == pytest.approx(row["new_transfers"]["gpu_utilization"])
    assert out["policies"]["ecmp"]["in_flight"]["gain"] == 0.0
    spray = out["policies"]["spray"]
    assert spray["share"] is None or abs(spray["share"]) < 1e-9
    table = markdown([out])
    assert "| reroute-compare | spray |" in table


def test_compare_measures_gains_over_the_given_base() -> None:
    """With ``base="spray"`` every gain is the policy's utilisation minus spray's under the same semantics:
    spray's own gain is 0, and each policy's gain over ECMP is its gain over spray plus spray's over ECMP
    (the two runs are the same episodes). A base that is ignored (gains over ECMP again) breaks the first."""
    from ainet_gym.checks.reroute import compare, markdown

    sc = small_spine_leaf(4, name="reroute-base")
    over_ecmp = compare(sc, ["spray", "lp"], seeds=[1, 2], steps=4)
    over_spray = compare(sc, ["lp"], seeds=[1, 2], steps=4, base="spray")
    assert over_spray["base"] == "spray" and {"spray", "lp"} <= set(over_spray["policies"])
    for mode in ("in_flight", "new_transfers"):
        assert over_spray["policies"]["spray"][mode]["gain"] == 0.0
        spray_gain = over_ecmp["policies"]["spray"][mode]["gain"]
        assert abs(spray_gain) > 1e-3  # spray differs from ECMP here, so the base shows
        assert over_spray["policies"]["lp"][mode]["gain"] == pytest.approx(
            over_ecmp["policies"]["lp"][mode]["gain"] - spray_gain, abs=1e-12
        )
    assert "gain over `spray`, in_flight" in markdown([over_spray])
    assert "gain over ECMP, in_flight" in markdown([over_ecmp])
