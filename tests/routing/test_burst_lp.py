"""``burst-lp+bg`` (:func:`ainet_gym.routing.policies.burst_lp_all`): ``solo-lp+bg`` in the intervals for which a
background source is scheduled on, ``lp+bg`` in the others, checked against the schedule the scenario file
writes down (not against the policy's own output); it reads only what the routing protocols list. (As a
baseline agent that ``evaluate`` runs: ``tests/agents/test_burst_baseline.py``.)"""

from __future__ import annotations

import numpy as np

import ainet_gym
from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.lp import background_active, burst_lp_all
from ainet_gym.routing.policies import POLICIES
from tests._scenarios import BURST_DURATION, BURST_PERIOD, burst_scheduled, bursty_spine_leaf


def test_burst_lp_plays_solo_lp_inside_bursts_and_lp_between_them() -> None:
    seeds = [1, 2, 3]
    core = EnvCore(ainet_gym.load_scenario(bursty_spine_leaf()), batch=len(seeds))
    core.reset(seeds)
    seen = {True: 0, False: 0}
    differ = {True: False, False: False}  # lp+bg and solo-lp+bg differ somewhere, inside and outside
    for t in range(core.episode_steps):
        w = core.world
        on = burst_scheduled(t)
        assert background_active(w).tolist() == [on] * len(seeds), t
        got = burst_lp_all(core.routing_context, core.last_result)
        lp, solo = POLICIES["lp+bg"](w, core.last_result), POLICIES["solo-lp+bg"](w, core.last_result)
        np.testing.assert_array_equal(got, solo if on else lp, err_msg=f"interval {t}")
        seen[on] += 1
        differ[on] |= bool(np.abs(lp - solo).max() > 1e-6)
        # step with another routing than the baseline's, so its choice cannot feed its own test
        core.step_split(POLICIES["spray+bg"](w, core.last_result))
    assert seen == {True: 5, False: 5}  # t = 1, 2, 5, 6, 9 on
    assert differ[True] and differ[False]  # the two plans are not the same split: the test can fail


def test_burst_lp_switches_per_instance_and_is_lp_without_bursts() -> None:
    # per-seed burst phases (offset jitter): instances in and out of a burst in one batched call
    sc = bursty_spine_leaf(8)
    sc["workload"]["background"][0]["offset_jitter_steps"] = 3
    core = EnvCore(ainet_gym.load_scenario(sc), batch=6)
    core.reset(list(range(6)))
    mixed = False
    for _ in range(core.episode_steps):
        w, sim = core.world, core.world.sim
        step, offset = w.state.step_count, w.state.bg_offset[:, 0]
        on = (step >= offset) & (
            (step - offset) % BURST_PERIOD < BURST_DURATION
        )  # the file's formula, per instance
        assert background_active(w).tolist() == on.tolist()
        mixed |= bool(on.any() and not on.all())
        want = np.where(
            on[sim.unit_inst[sim.conn_unit]][:, None],
            POLICIES["solo-lp+bg"](w, core.last_result),
            POLICIES["lp+bg"](w, core.last_result),
        )
        np.testing.assert_array_equal(burst_lp_all(core.routing_context, core.last_result), want)
        core.step_split(POLICIES["ecmp"](w, core.last_result))
    assert mixed
    # no background at all: lp+bg in every interval; a constant source, on in every interval: solo-lp+bg
    for bg, want in (
        ([], "lp+bg"),
        ([{"kind": "storage", "gbps": 400, "pattern": "constant"}], "solo-lp+bg"),
    ):
        sc = bursty_spine_leaf(4)
        sc["workload"]["background"] = bg
        core = EnvCore(ainet_gym.load_scenario(sc), batch=2)
        core.reset([1, 2])
        for _ in range(core.episode_steps):
            w = core.world
            assert background_active(w).tolist() == [bool(bg)] * 2
            np.testing.assert_array_equal(
                burst_lp_all(core.routing_context, core.last_result), POLICIES[want](w, core.last_result)
            )
            core.step_split(POLICIES["ecmp"](w, core.last_result))


def test_burst_lp_reads_only_what_the_routing_protocols_list() -> None:
    # as tests/routing/test_routing_context.py checks every policy of POLICIES: on a view of the world with the
    # protocols' members only, the same split, in and out of a burst (seeds 3, 4: the two cases in one batch)
    from ainet_gym.routing import context
    from tests.routing.test_routing_context import _Only

    core = EnvCore("ingest-bursts", batch=2, episode_steps=8)
    core.reset([3, 4])
    seen = set()
    for _ in range(6):
        view = _Only(core.routing_context, context.RoutingContext)
        last = None if core.last_result is None else _Only(core.last_result, context.LastInterval)
        seen |= set(background_active(core.routing_context).tolist())
        np.testing.assert_array_equal(
            burst_lp_all(view, last), burst_lp_all(core.routing_context, core.last_result)
        )
        core.step_split(POLICIES["spray+bg"](core.routing_context, core.last_result))
    assert seen == {True, False}
