"""The bottleneck-group diagnostic (ainet_gym.checks.rate_groups): groups are max-min certificates, sticky,
and the per-solve trace of a small AllToAll counts what the engine's own counters give."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.checks.rate_groups import (
    COLUMNS,
    NO_BOTTLENECK,
    bottleneck_groups,
    rate_groups_main,
    trace_rate_groups,
)
from ainet_gym.sim.allocator import max_min_fair


def _coo(inc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f, lk = np.nonzero(inc)
    return f, lk, inc[f, lk]


def test_groups_of_a_hand_solved_instance_and_stickiness() -> None:
    # link 0 (cap 1): flows 0, 1; link 1 (cap 2): flows 1, 2; link 2 (cap 1): flow 3 and flow 4 (demand 0.25)
    inc = np.zeros((5, 3))
    inc[0, 0] = inc[1, 0] = inc[1, 1] = inc[2, 1] = inc[3, 2] = inc[4, 2] = 1.0
    cap = np.array([1.0, 2.0, 1.0])
    dem = np.array([np.inf, np.inf, np.inf, np.inf, 0.25])
    rates = max_min_fair(inc, cap, demand=dem)
    np.testing.assert_allclose(rates, [0.5, 0.5, 1.5, 0.75, 0.25])
    f, lk, c = _coo(inc)
    g = bottleneck_groups(f, lk, c, cap, rates, dem)
    assert g.tolist() == [0, 0, 1, 2, -2 - 4]
    # a tie: flow 1 at the top of two saturated links keeps the group it had
    cap2 = np.array([1.0, 1.0, 1.0])
    rates2 = max_min_fair(inc, cap2, demand=dem)
    np.testing.assert_allclose(rates2[:3], [0.5, 0.5, 0.5])
    assert bottleneck_groups(f, lk, c, cap2, rates2, dem)[1] == 0  # lowest link without a previous group
    prev = np.array([-1, 1, -1, -1, -1])
    assert bottleneck_groups(f, lk, c, cap2, rates2, dem, prev)[1] == 1  # kept while still a bottleneck
    prev_gone = np.array([-1, 2, -1, -1, -1])  # link 2 is not flow 1's: it takes its lowest bottleneck
    assert bottleneck_groups(f, lk, c, cap2, rates2, dem, prev_gone)[1] == 0


@pytest.mark.parametrize("seed", range(30))
def test_every_flow_of_a_max_min_allocation_has_a_group_and_a_lowered_flow_has_none(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_f, n_l = int(rng.integers(2, 12)), int(rng.integers(1, 6))
    inc = (rng.random((n_f, n_l)) < 0.5) * rng.choice([0.5, 1.0, 2.0], size=(n_f, n_l))
    inc[np.arange(n_f), rng.integers(0, n_l, n_f)] = 1.0  # every flow crosses a link
    cap = rng.choice([1.0, 2.0, 3.0], size=n_l)
    dem = np.where(rng.random(n_f) < 0.3, rng.random(n_f) * 0.5, np.inf)
    rates = max_min_fair(inc, cap, demand=dem)
    f, lk, c = _coo(inc)
    g = bottleneck_groups(f, lk, c, cap, rates, dem)
    assert (g != NO_BOTTLENECK).all()
    for i in range(n_f):  # each group is a certificate: a saturated link with no flow above it
        if g[i] >= 0:
            on = inc[:, g[i]] > 0
            assert inc[:, g[i]] @ rates >= cap[g[i]] * (1 - 1e-9)
            assert rates[i] >= rates[on].max() * (1 - 1e-9)
        else:
            assert g[i] == -2 - i and rates[i] >= dem[i] * (1 - 1e-9)
    # lower the largest flow below its demand: it loses every bottleneck (its links are no longer
    # saturated by it, or it is no longer at their top)
    j = int(np.argmax(np.where(np.isfinite(dem), -np.inf, rates)))
    if np.isfinite(dem[j]):
        return
    low = rates.copy()
    low[j] *= 0.5
    assert bottleneck_groups(f, lk, c, cap, low, dem)[j] == NO_BOTTLENECK


def _small_alltoall_world():  # type: ignore[no-untyped-def]
    from ainet_gym.bench.instances import cluster_scenario
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    sc = load_scenario(cluster_scenario(64, 2, 8, op="alltoall"))
    w = FabricWorld(sc, 1, backend="numpy")
    w.reset(seeds=[0])
    return w


def test_trace_of_a_small_alltoall_counts_consistently() -> None:
    w = _small_alltoall_world()
    tr = trace_rate_groups(w, max_events=10_000)
    assert not tr.capped and tr.rows.shape == (tr.rows.shape[0], len(COLUMNS)) and tr.rows.shape[0] > 3
    assert (tr.column("no_bottleneck") == 0).all()  # the reference's rates are max-min: every flow has one
    assert (tr.column("changed_group_kept") <= tr.column("rates_changed")).all()
    assert (tr.column("groups") <= tr.column("active")).all()
    assert tr.column("arrived").sum() > 0  # the AllToAll phases start in the interval
    # a job's flows leave when they complete: over the interval the flows that left are at most those that
    # were active at some solve
    assert tr.column("departed").sum() <= tr.column("arrived").sum() + tr.column("active")[0]
    assert tr.per_group_updates() > 0 and tr.per_flow_updates() >= tr.column("rates_changed").sum()
    with pytest.raises(ValueError, match="name = 'nope'"):
        tr.column("nope")


def test_trace_refuses_what_it_cannot_read() -> None:
    from ainet_gym.bench.instances import cluster_scenario
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim.world import FabricWorld

    w = _small_alltoall_world()
    with pytest.raises(ValueError, match="max_events = 0"):
        trace_rate_groups(w, max_events=0)
    w2 = FabricWorld(load_scenario(cluster_scenario(64, 2, 8, op="alltoall")), 2, backend="numpy")
    with pytest.raises(ValueError, match=r"world\.batch = 2"):
        trace_rate_groups(w2)
    with pytest.raises(ValueError, match="entry_link holds"):
        bottleneck_groups([0], [3], [1.0], [1.0], [0.5])


def test_command_prints_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        rate_groups_main(
            ["--gpus", "64", "--jobs", "2", "--job-gpus", "8", "--interval", "2", "--events", "50"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "rates_changed" in out and "group-clock updates" in out
