"""``routing.part_share``: how a path part of ``routing.split_flows: independent`` shares a link, ``fraction``
(coefficient f, all its connection's bytes: f of a connection's share, the default) or ``per_part`` (coefficient 1
where f > 0, f of the bytes: a whole connection's share, as the replay's one TCP connection per path; no ns-3).

References: hand-computed closed forms of a 1/4-3/4 split sharing an uplink with a single-path connection, in one
transfer and across a re-split in flight; ``fraction`` equal to the setting omitted; the two backends against each
other; a snapshot; bad values and combinations refused with the field named."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _scenarios import alternating_rollout

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
C = 10e9 / 8  # bytes/s of a 10 Gb/s uplink (link_efficiency 1)
S = 20e6  # bytes per connection and transfer


def _scenario(share: str | None, interval_ms: float = 50.0, split_flows: str = "independent") -> dict:
    """Two leaves (GPUs 0, 1 on leaf 0; 2, 3 on leaf 1) joined by two spines, 10 Gb/s uplinks and 100 Gb/s NICs
    (never a bottleneck), no latency: job x (GPUs 0, 2) and job y (GPUs 1, 3) each exchange S bytes (sendrecv
    shift:1, one connection each way) after 5 ms of compute."""
    job = {"compute_ms": 5.0, "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": S}]}
    routing: dict = {"max_paths": 2, "split_flows": split_flows}
    if share is not None:
        routing["part_share"] = share
    return {
        "name": "part-share",
        "fabric": {"topology": "spine_leaf", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                   "gpus_per_host": 1, "nic_gbps": 100, "uplink_gbps": 10, "hop_latency_us": 0.0,
                   "link_efficiency": 1.0},
        "workload": {"jobs": [{**job, "name": "x", "gpus": 2, "placement": [0, 2]},
                              {**job, "name": "y", "gpus": 2, "placement": [1, 3]}]},
        "dynamics": {"episode_steps": 4, "decision_interval_ms": interval_ms},
        "routing": routing,
    }  # fmt: skip


def _split(core: EnvCore, x_spine0: float) -> np.ndarray:
    """x's connections x_spine0 on their spine-0 path and the rest on the other; y's on spine 0 only."""
    sim, fabric = core.world.sim, core.world.fabric
    names = np.asarray(fabric.link_names)
    split = np.zeros((sim.n_conns, core.P))
    for c in range(sim.n_conns):
        job = int(np.searchsorted(sim.conn_off, c, side="right")) - 1  # units in job order: x, y
        via0 = [
            any("spine0" in names[k % fabric.n_links] for k in sim.conn_paths[c, p] if k >= 0)
            for p in range(2)
        ]
        f0 = x_spine0 if job == 0 else 1.0
        split[c, :2] = [f0 if v else 1.0 - f0 for v in via0]
    return split


def _comm_ms(sc: dict, backend: str, fractions: list[float]) -> tuple[np.ndarray, EnvCore]:
    """(intervals, jobs) each interval's mean communication time in ms (nan: no iteration ended), x's spine-0
    fraction ``fractions[k]`` in interval k."""
    core = EnvCore(sc, batch=1, episode_steps=len(fractions), backend=backend)
    core.reset([0])
    out = []
    for f in fractions:
        core.step_split(_split(core, f))
        out.append(np.asarray(core.last_result.comm_time_s)[0, :2] * 1e3)
    return np.array(out), core


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("share", ["fraction", "per_part"])
def test_one_transfer_closed_form(backend: str, share: str) -> None:
    """x 1/4 over spine 0 (part A) and 3/4 over spine 1 (part B); y on spine 0, so A and y share the uplink
    leaf0->spine0 (and spine0->leaf1), B is alone on spine 1's. ``fraction``: A weighs 1/4 and y 1, equal
    max-min rates r with (1/4 + 1) r = C, r = 0.8 C: A moves 0.2 C of bytes, y 0.8 C; A's S/4 and y's S both
    take 1.25 S/C; B (3/4 r <= C) takes 0.75 S/C. x = y = 1.25 S/C. ``per_part``: A and y weigh 1 and get C/2
    each; A's S/4 ends at 0.5 S/C (8 ms), B's 3S/4 at C at 0.75 S/C (12 ms, x's end). y then runs at C, but x
    starts its next transfer after 5 ms of compute (17 ms into y's): y has moved C/2 x 8 ms + C x 9 ms = 16.25 MB,
    and its last 3.75 MB share spine 0 with x's new A at C/2: 6 ms more, y = 23 ms. (Under ``fraction`` x and y
    end together at 20 ms, before either starts again.)"""
    want = [20.0, 20.0] if share == "fraction" else [12.0, 23.0]
    assert pytest.approx(16.0, rel=1e-15) == S / C * 1e3
    out, _ = _comm_ms(_scenario(share), backend, [0.25])
    np.testing.assert_allclose(out[0], want, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_resplit_in_flight_closed_form(backend: str) -> None:
    """``per_part``, 10 ms intervals: x 1/4-3/4 in interval 0, then 1/2-1/2. After 5 ms of transfer (interval 0's
    last 5 ms) A moved C/2 x 5 ms = 3.125 MB (left 1.875), B C x 5 ms = 6.25 MB (left 8.75): x's connection has
    10.625 MB left, the sum of its parts' remainders, handed out again as 5.3125 MB per part. A shares spine 0
    with y at C/2 (8.5 ms), B is alone at C (4.25 ms): x's first transfer takes 5 + 8.5 = 13.5 ms and ends in
    interval 1 (at 18.5 ms)."""
    out, _ = _comm_ms(_scenario("per_part", interval_ms=10.0), backend, [0.25, 0.5, 0.5])
    assert np.isnan(out[0, 0])
    assert out[1, 0] == pytest.approx(13.5, rel=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fraction_is_the_setting_omitted(backend: str) -> None:
    """``fraction`` is today's engine bit for bit (no per-part connections bound)."""
    a, core = _comm_ms(_scenario(None, interval_ms=10.0), backend, [0.25, 0.5, 0.75])
    b, _ = _comm_ms(_scenario("fraction", interval_ms=10.0), backend, [0.25, 0.5, 0.75])
    assert core.world.sim._conn_one is None
    np.testing.assert_array_equal(a, b)


def _alternating(share: str, backend: str, steps: int = 6) -> np.ndarray:
    scn = load_scenario("scenarios/crosscheck/xc-periodic-interference.yaml")
    routing = replace(scn.routing, split_flows="independent", part_share=share)
    return alternating_rollout(replace(scn, routing=routing), 2, steps, backend)


@pytest.mark.skipif(len(BACKENDS) < 2, reason="numba not installed")
def test_backends_agree_per_part() -> None:
    """Two rings with background bursts and a degraded link, the split changing at every boundary (spray, LP):
    communication times and link bytes of both backends to 1e-9; and per_part changes the run."""
    b = _alternating("per_part", "numba")
    np.testing.assert_allclose(_alternating("per_part", "numpy"), b, rtol=1e-9, atol=1e-6)
    assert not np.allclose(b, _alternating("fraction", "numba"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_snapshot_restores_per_part(backend: str) -> None:
    """A snapshot taken mid-run, the split changing at every boundary: the steps after a restore give what the
    steps after the snapshot gave, bit for bit."""
    scn = load_scenario("scenarios/crosscheck/xc-ingest-bursts.yaml")
    core = EnvCore(replace(scn, routing=replace(scn.routing, split_flows="independent", part_share="per_part")),
                   backend=backend)  # fmt: skip
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


@pytest.mark.parametrize("bad", ["part", "PER_PART", 1, 0.5, True])
def test_bad_part_share_refused_with_the_field_named(bad: object) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(_scenario(bad))  # type: ignore[arg-type]
    msg = str(e.value)
    assert "routing.part_share" in msg and "fraction, per_part" in msg and repr(bad) in msg


def test_per_part_refused_with_coupled_or_held_weight_part() -> None:
    with pytest.raises(ScenarioError, match=r"routing.part_share"):
        load_scenario(_scenario("per_part", split_flows="coupled"))
    sc = _scenario("per_part")
    sc["routing"]["reroute_held_bytes"] = 2e5
    load_scenario(sc)  # held parts at coefficient 1 (weight one) are allowed
    sc["routing"]["reroute_held_weight"] = "part"
    with pytest.raises(ScenarioError, match=r"routing.part_share.*reroute_held_weight"):
        load_scenario(sc)


def test_compile_job_refuses_bad_part_share() -> None:
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.sim.engine import compile_job

    sc = load_scenario(_scenario(None))
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    with pytest.raises(ValueError, match=r"routing.part_share = 'half': allowed: fraction, per_part"):
        compile_job(fabric, sc.jobs[0], np.arange(2), split_flows="independent", part_share="half")
    with pytest.raises(
        ValueError, match=r"routing.part_share = 'per_part' with routing.split_flows = 'coupled'"
    ):
        compile_job(fabric, sc.jobs[0], np.arange(2), part_share="per_part")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("held", [0.0, 2e6, 3e6, 1e9])
def test_per_part_with_held_bytes_closed_form(backend: str, held: float) -> None:
    """27zq's case (test_reroute_held_weight): 50/50 over a half-rate path and a full one, then the full path only,
    here under ``per_part``. Interval 0: two parts of S/2 bytes at coefficient 1 share the NIC at C/2 each (the
    slow link's whole rate), as the fraction parts did; at 15 ms each has R/2 left. The slow part loses its share
    and holds h = min(H, R/2) (its bytes on the path are its remainder), the fast part is handed R - h. Both weigh
    1 and share the NIC at C/2: the transfer ends at 10 ms + max(R, 2h)/C, as 27zq's ``one``."""
    from test_reroute_held_weight import R, _run
    from test_reroute_held_weight import _scenario as _held_scenario

    sc = _held_scenario(held, None)
    sc["routing"]["part_share"] = "per_part"
    h = min(held, R / 2)
    out, slow_bytes, _ = _run(sc, backend)
    assert out[0][0] == 0 and out[1][0] == 1
    assert out[1][1] == pytest.approx((10e-3 + max(R, 2 * h) / C) * 1e3, rel=1e-12)
    np.testing.assert_allclose(slow_bytes[1], h, rtol=1e-12, atol=1e-6)
