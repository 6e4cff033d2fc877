"""``routing.split_flows``: how a connection split over several paths shares the links (no ns-3 needed).

``coupled`` (the default): the connection is one flow with a fixed ratio over its paths, so all its parts
finish together. ``independent``: each path's part of a transfer is a flow of its own in the max-min
allocation (coefficient: the path's fraction, as in the coupled flow), and the transfer ends with its last
part. References: hand-computed times of one transfer split 50/50 over a path that is congested for a while
and a free one; a split change in flight, whose bytes must be conserved; the two backends against each
other; bad settings refused with the field named."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _scenarios import alternating_rollout, assert_restore_replays, split_slow_or_even, two_path_exchange

from ainet_gym.envs.env import EnvCore
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
C = 10e9 / 8  # bytes/s of a 10 Gb/s link (link_efficiency 1)
S = 20e6  # bytes per transfer


def _two_paths(split_flows: str | None, factor: float, until_step: int | None) -> dict:
    """Two GPUs on two leaves joined by two spines exchange S bytes (sendrecv shift:1) after 5 ms of compute,
    every 15 ms interval; leaf0-spine0 (both directions) at ``factor`` of its rate from step 0 to
    ``until_step`` (None: for good). No latency."""
    fail = {"link": "leaf0-spine0", "at_step": 0, "factor": factor}
    if until_step is not None:
        fail["until_step"] = until_step
    routing = {"split_flows": split_flows} if split_flows is not None else None
    return two_path_exchange("split-flows-two-paths", fail, routing, nbytes=S)


def _run(sc: dict, backend: str, slow_first: bool) -> list[tuple[int, float, np.ndarray]]:
    """Every connection 50/50 over its two paths (``slow_first``: interval 0 on the degraded path only).
    Returns per interval (iterations completed, mean communication time in ms or nan, bytes per connection)."""
    core = EnvCore(sc, batch=1, episode_steps=4, backend=backend, info_keys=("flows",))
    core.reset([0])
    out = []
    for k in range(4):
        core.step_split(split_slow_or_even(core, slow_only=k == 0 and slow_first))
        r = core.last_result
        out.append((int(r.iterations[0, 0]), float(r.comm_time_s[0, 0]) * 1e3, r.conn_bytes.copy()))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_independent_parts_finish_at_their_own_pace(backend: str) -> None:
    """leaf0-spine0 at a quarter rate (C/4) in interval 0 only; each connection 50/50. Coupled: the flow's
    rate r puts r/2 on the slow link, so r = C/2 until 15 ms, then C (the NIC): 10 ms + (S - C/2 x 10 ms) / C
    = 5 ms + S / C = 21 ms. Independent: the slow part moves C/4 and the free part takes the rest of the NIC,
    3C/4, so the connection moves at C throughout (after 15 ms the parts share the NIC, then the slow part,
    alone, takes all of it): S / C = 16 ms."""
    for mode, want in ((None, 5e-3 + S / C), ("coupled", 5e-3 + S / C), ("independent", S / C)):
        (i0, _, _), (i1, c1, _), *_ = _run(_two_paths(mode, 0.25, 1), backend, slow_first=False)
        assert (i0, i1) == (0, 1), mode
        assert c1 == pytest.approx(want * 1e3, rel=1e-12), mode


@pytest.mark.parametrize("backend", BACKENDS)
def test_independent_parts_take_over_the_unsent_bytes_at_a_split_change(backend: str) -> None:
    """leaf0-spine0 at half rate for good; interval 0 on the slow path only, then 50/50. At 15 ms the
    connection has S - C/2 x 10 ms left; the new split hands half to each part, which then share the NIC
    (C/2 each): 10 ms + (S - C/2 x 10 ms) / C = 5 ms + S / C = 21 ms under both settings (a part that lost
    its bytes at the change would end sooner). The bytes each connection moves per interval are the same."""
    runs = {m: _run(_two_paths(m, 0.5, None), backend, slow_first=True) for m in ("coupled", "independent")}
    for mode, out in runs.items():
        (i0, _, _), (i1, c1, _), (i2, _, _), (i3, c3, _) = out
        assert (i0, i1, i2, i3) == (0, 1, 0, 1), mode
        assert c1 == pytest.approx((5e-3 + S / C) * 1e3, rel=1e-12), mode
        assert c3 == pytest.approx(S / C * 1e3, rel=1e-12), mode
    for (_, _, a), (_, _, b) in zip(runs["coupled"], runs["independent"]):
        np.testing.assert_allclose(b, a, rtol=1e-9)
    assert sum(x[2].sum() for x in runs["independent"]) > 2 * S  # the check above compares bytes moved


def _alternating(split_flows: str, backend: str, steps: int = 6) -> np.ndarray:
    scn = load_scenario("scenarios/crosscheck/xc-periodic-interference.yaml")
    return alternating_rollout(
        replace(scn, routing=replace(scn.routing, split_flows=split_flows)), 2, steps, backend
    )


@pytest.mark.skipif(len(BACKENDS) < 2, reason="numba not installed")
def test_backends_agree_with_independent_parts() -> None:
    """Two rings with background bursts and a degraded link, the split changing at every boundary:
    communication times and link bytes of both backends to 1e-9; and the setting changes the run."""
    a = _alternating("independent", "numpy")
    b = _alternating("independent", "numba")
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-6)
    assert not np.allclose(b, _alternating("coupled", "numba"))


def test_bad_split_flows_refused_with_the_field_named() -> None:
    sc = _two_paths(None, 0.5, None)
    sc["routing"] = {"split_flows": "per_path"}
    with pytest.raises(ScenarioError) as e:
        load_scenario(sc)
    msg = str(e.value)
    assert "routing.split_flows" in msg and "per_path" in msg and "coupled, independent" in msg
    sc["routing"] = {"split_flows": "independent", "reroute": "new_transfers"}
    with pytest.raises(ScenarioError) as e:
        load_scenario(sc)
    msg = str(e.value)
    assert "routing.split_flows" in msg and "independent" in msg and "in_flight" in msg


def test_compile_job_refuses_an_unknown_split_flows() -> None:
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.sim.engine import compile_job

    sc = load_scenario(_two_paths(None, 0.5, None))
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    with pytest.raises(ValueError, match=r"routing.split_flows = 'per_path': allowed: coupled, independent"):
        compile_job(fabric, sc.jobs[0], np.arange(2), split_flows="per_path")
    with pytest.raises(ValueError, match=r"routing.split_flows = 'independent' with routing.reroute"):
        compile_job(fabric, sc.jobs[0], np.arange(2), carry=True, split_flows="independent")


@pytest.mark.parametrize("backend", BACKENDS)
def test_snapshot_restores_the_parts(backend: str) -> None:
    """A snapshot taken mid-transfer, with the split changing at every boundary: the steps after a restore
    give what the steps after the snapshot gave, bit for bit (the parts' remainders and their split)."""
    scn = load_scenario("scenarios/crosscheck/xc-ingest-bursts.yaml")
    assert_restore_replays(
        replace(scn, routing=replace(scn.routing, split_flows="independent")),
        backend,
        ("spray", "lp", "ecmp", "lp"),
    )
