"""Group clocks for the lazy kernel's progress (issue-28zl, ``settings.PROGRESS_GROUPS``): flows at one rate
share a clock. Over random scenarios and event sequences, the bytes left, the completion times (step and
communication times) and every other figure equal the per-flow path's to 1e-9 relative, and the solves are
the same ones (the rates are the solver's either way)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from _strategies import event_scenarios, random_splits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ainet_gym import load_scenario
from ainet_gym.checks.parity import max_rel_diff
from ainet_gym.sim.backends.numba import jit
from ainet_gym.sim.backends.numba import lazy as nb_lazy
from ainet_gym.sim.backends.numba import settings as nb_settings
from ainet_gym.sim.world import FabricWorld

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="numba is not installed")

RTOL = 1e-9
FIELDS = ("iterations", "step_time_s", "comm_time_s", "link_bytes", "stalled_transfers", "gpu_utilization")
#: the counters of the solves: equal on both paths when the events are the same ones
SOLVES = ("events", "incremental_solves", "full_fills", "flows_refilled", "flows_active")


@contextlib.contextmanager
def progress_mode() -> Iterator[dict]:
    """The lazy kernel with its progress per flow or on group clocks as ``mode["groups"]`` says at each call
    (the departure repair at its default)."""
    lazy = nb_lazy.run_interval_lazy
    mode = {"groups": False}
    with pytest.MonkeyPatch.context() as mp:
        # (options, the last argument: LazyOptions; grp_on its fourth field)
        mp.setattr(
            nb_lazy, "run_interval_lazy", lambda *a: lazy(*a[:-1], (*a[-1][:3], mode["groups"], *a[-1][4:]))
        )
        yield mode


def _world(sc: object, seeds: list[int]) -> FabricWorld:
    w = FabricWorld(sc, len(seeds), backend="numba")
    w.reset(seeds=seeds)
    w.sim.incremental_min_flows = 0  # the lazy kernel from the first flow on
    metrics: list = []
    run_interval = w.sim.run_interval

    def counted(*args, **kw):
        m = run_interval(*args, **kw)
        metrics.append(m)
        return m

    w.sim.run_interval = counted
    w.metrics = metrics  # type: ignore[attr-defined]
    return w


def assert_same_progress(sc: object, seeds: list[int], splits: list) -> None:
    """Step a per-flow world and a group-clock world through ``splits`` (None: the default split) and
    compare after every interval: figures, bytes left (``state.rem``) and the solves' counters."""
    with progress_mode() as mode:
        worlds = [_world(sc, seeds), _world(sc, seeds)]
        for s in splits:
            res = []
            for groups, w in zip((False, True), worlds, strict=True):
                mode["groups"] = groups
                res.append(w.step(w.default_split() if s is None else s))
            for f in FIELDS:
                assert max_rel_diff(getattr(res[0], f), getattr(res[1], f)) <= RTOL, f
            assert max_rel_diff(worlds[0].sim.state.rem, worlds[1].sim.state.rem) <= RTOL, "bytes left"
            m0, m1 = worlds[0].metrics[-1], worlds[1].metrics[-1]
            for c in SOLVES:
                assert np.array_equal(np.asarray(getattr(m0, c)), np.asarray(getattr(m1, c))), c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    event_scenarios(name="random-groups", weights=(0.25, 1.0, 2.0, 7.5), storage=True),
    st.integers(0, 3),
    st.integers(0, 2**31 - 1),
)
def test_group_clocks_equal_per_flow_progress_on_random_event_sequences(scenario, seed, split_seed):
    # every completion and phase start is an event; random splits move flows between rates and groups
    sc = load_scenario(scenario)
    assert_same_progress(sc, [seed], random_splits(sc, seed, split_seed))


@pytest.mark.parametrize("name", ["moe-alltoall-skewed", "multi-tenant-churn", "storage-checkpoint"])
def test_group_clocks_equal_per_flow_progress_on_named_scenarios(name):
    assert_same_progress(load_scenario(name), [0, 1], [None] * 6)


def test_group_clocks_match_the_numpy_reference():
    # the group-clock path against the numpy backend's full re-solve per event (the backends' contract)
    sc = load_scenario("moe-alltoall-skewed")
    with progress_mode() as mode:
        mode["groups"] = True
        w = _world(sc, [0, 1])
        ref = FabricWorld(sc, 2, backend="numpy")
        ref.reset(seeds=[0, 1])
        for _ in range(5):
            a, b = w.step(w.default_split()), ref.step(ref.default_split())
            for f in FIELDS:
                assert max_rel_diff(getattr(a, f), getattr(b, f)) <= RTOL, f
        assert sum(m.incremental_solves for m in w.metrics) > 10


def test_progress_groups_setting_is_a_bool():
    assert isinstance(nb_settings.PROGRESS_GROUPS, bool)
