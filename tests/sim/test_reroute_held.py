"""``routing.reroute_held_bytes``: at a split change in flight, a path part that loses share keeps up to that
many bytes on its old path, as a held part of its own (with ``routing.split_flows: independent``; no ns-3).

The replay's transport keeps what a sub-flow has already written (its window, queued in the switches) on the
old path when the split changes; the fluid's parts hand all their bytes to the new split at once (0, the
default). References: a hand-computed closed form of one transfer moved from a slow path to 50/50 in flight;
0 equal to the setting omitted; the two backends against each other; a snapshot; bad values refused with the
field named."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _scenarios import alternating_rollout, split_slow_or_even, two_path_exchange

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import get_policy
from ainet_gym.scenario import ScenarioError, load_scenario
from ainet_gym.sim.backends.numba import jit as _jit

BACKENDS = ["numpy", "numba"] if _jit.HAVE_NUMBA else ["numpy"]
C = 10e9 / 8  # bytes/s of a 10 Gb/s link (link_efficiency 1)
S = 20e6  # bytes per transfer


def _scenario(held: float | None, split_flows: str = "independent") -> dict:
    """Two GPUs on two leaves joined by two spines exchange S bytes (sendrecv shift:1) after 5 ms of compute,
    every 15 ms interval; leaf0-spine0 (both directions) at half rate for good."""
    routing: dict = {"split_flows": split_flows}
    if held is not None:
        routing["reroute_held_bytes"] = held
    return two_path_exchange(
        "reroute-held", {"link": "leaf0-spine0", "at_step": 0, "factor": 0.5}, routing, nbytes=S
    )


def _run(sc: dict, backend: str) -> list[tuple[int, float]]:
    """Interval 0 on the slow path only, then every connection 50/50: per interval (iterations completed, mean
    communication time in ms or nan)."""
    core = EnvCore(sc, batch=1, episode_steps=4, backend=backend)
    core.reset([0])
    out = []
    for k in range(4):
        core.step_split(split_slow_or_even(core, slow_only=k == 0))
        r = core.last_result
        out.append((int(r.iterations[0, 0]), float(r.comm_time_s[0, 0]) * 1e3))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("held", [0.0, 2e6, 1e9])
def test_held_bytes_finish_on_the_old_path(backend: str, held: float) -> None:
    """The transfer starts at 5 ms on the slow path (C/2) alone: at 15 ms it has R = S - C/2 x 10 ms left, all
    on path 0. The split becomes 50/50, so path 0 loses share: h = min(held, R) stays there as a held part
    (coefficient 1), and R - h is re-split, (R - h)/2 per path. Path 0's slow link (C/2) is the bottleneck
    of everything on it from then on (the held part and path 0's part get C/3 and C/6 of it while the held
    part lasts, path 1's part runs at C/2 on the NIC's rest and ends first; then path 0's part alone C/2),
    so the transfer ends when path 0 has carried h + (R - h)/2 = (R + h)/2 bytes at C/2: comm = 10 ms +
    (R + h) / C (h = 0: 21 ms, as without the setting; h = R: the whole remainder at C/2). The next transfer
    (no split change) takes S / C."""
    R = S - C / 2 * 10e-3
    h = min(held, R)
    want = 10e-3 + (R + h) / C
    out = _run(_scenario(held), backend)
    ends = 15e-3 + (R + h) / C  # the interval it completes in
    k = int(ends // 15e-3)
    assert [i for i, _ in out[: k + 1]] == [0] * k + [1]
    assert out[k][1] == pytest.approx(want * 1e3, rel=1e-12)
    assert out[3] == (1, pytest.approx(S / C * 1e3, rel=1e-12))


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_is_the_setting_omitted(backend: str) -> None:
    """0 builds no held parts (the same flows) and runs bit for bit as the setting omitted."""
    a = EnvCore(_scenario(None), batch=1, episode_steps=4, backend=backend)
    b = EnvCore(_scenario(0.0), batch=1, episode_steps=4, backend=backend)
    a.reset([0])
    b.reset([0])
    assert a.world.sim.n_flows == b.world.sim.n_flows
    assert b.world.sim.held.size == 0
    np.testing.assert_array_equal(_run(_scenario(None), backend), _run(_scenario(0.0), backend))


def _alternating(held: float, backend: str, steps: int = 6) -> np.ndarray:
    scn = load_scenario("scenarios/crosscheck/xc-periodic-interference.yaml")
    routing = replace(scn.routing, split_flows="independent", reroute_held_bytes=held)
    return alternating_rollout(replace(scn, routing=routing), 2, steps, backend)


@pytest.mark.skipif(len(BACKENDS) < 2, reason="numba not installed")
def test_backends_agree_with_held_bytes() -> None:
    """Two rings with background bursts and a degraded link, the split changing at every boundary, 1 MB held:
    communication times and link bytes of both backends to 1e-9; and the held bytes change the run."""
    a = _alternating(1e6, "numpy")
    b = _alternating(1e6, "numba")
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-6)
    assert not np.allclose(b, _alternating(0.0, "numba"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_snapshot_restores_the_held_parts(backend: str) -> None:
    """A snapshot taken mid-transfer, the split changing at every boundary, 1 MB held: the steps after a
    restore give what the steps after the snapshot gave, bit for bit."""
    scn = load_scenario("scenarios/crosscheck/xc-ingest-bursts.yaml")
    routing = replace(scn.routing, split_flows="independent", reroute_held_bytes=1e6)
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


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "1MB", True])
def test_bad_held_bytes_refused_with_the_field_named(bad: object) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(_scenario(bad))  # type: ignore[arg-type]
    msg = str(e.value)
    assert "routing.reroute_held_bytes" in msg and "allowed: a number in [0, " in msg and repr(bad) in msg


def test_held_bytes_need_independent_parts() -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(_scenario(2e5, split_flows="coupled"))
    msg = str(e.value)
    assert "routing.reroute_held_bytes" in msg and "coupled" in msg and "split_flows: independent" in msg
    assert load_scenario(_scenario(0.0, split_flows="coupled")).routing.reroute_held_bytes == 0.0


def test_compile_job_refuses_bad_held_bytes() -> None:
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.sim.engine import compile_job

    sc = load_scenario(_scenario(None))
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    job, gpus = sc.jobs[0], np.arange(2)
    with pytest.raises(
        ValueError, match=r"routing.reroute_held_bytes = 5.0 with routing.split_flows = 'coupled'"
    ):
        compile_job(fabric, job, gpus, reroute_held_bytes=5.0)
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match=r"routing.reroute_held_bytes = .*: allowed: a finite number"):
            compile_job(fabric, job, gpus, split_flows="independent", reroute_held_bytes=bad)
