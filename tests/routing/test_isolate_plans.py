"""The isolating plans ``isolate{j}+bg`` (:func:`ainet_gym.routing.policies.isolate_slot_all`) and the
``extra_plans`` of the ``choose`` modes that carry them. References: the split by hand, and the step time of
a ring confined to one spine by hand (two 400G hops per leaf on one 400G uplink: half the NIC rate). (Agents
over these plans: ``tests/agents/test_isolating_candidates.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.isolate import ISOLATE_PLANS
from ainet_gym.routing.plans import EXTRA_PLANS, plans_of_mode
from ainet_gym.routing.policies import POLICIES

ISO = ("isolate0+bg", "isolate1+bg")


def test_the_isolated_job_is_on_its_first_path_and_the_rest_on_the_others(four_spines: dict) -> None:
    core = EnvCore(four_spines, batch=1)
    core.reset([0])
    w = core.routing_context
    sim = w.sim
    assert (sim.conn_npaths == 4).all()  # every ring hop leaves its leaf: 4 spines to choose from
    a = sim.conn_unit == w.job_unit[0, 0]
    s = ISOLATE_PLANS["isolate0+bg"](w, None)
    np.testing.assert_array_equal(s[a], np.tile([1.0, 0.0, 0.0, 0.0], (a.sum(), 1)))
    np.testing.assert_allclose(s[~a], np.tile([0.0, 1 / 3, 1 / 3, 1 / 3], ((~a).sum(), 1)), rtol=1e-15)
    # an empty slot (or one past the world's slots): spray+bg, exactly
    np.testing.assert_array_equal(ISOLATE_PLANS["isolate5+bg"](w, None), POLICIES["spray+bg"](w, None))


@pytest.mark.parametrize(("slot", "hand"), [(0, [34.0, 33.5]), (1, [27.0, 37.0])])
def test_the_isolated_ring_runs_at_half_rate_and_the_other_at_its_ideal(
    four_spines: dict, slot: int, hand: list[float]
) -> None:
    """Isolated job: compute + twice its ideal communication (2 hops per leaf share one 400G uplink);
    the other job on 3 spines, 2 hops per leaf at 2/3 of a 400G uplink each: its ideal step."""
    core = EnvCore(four_spines, batch=1)
    core.reset([0])
    pol = ISOLATE_PLANS[f"isolate{slot}+bg"]
    for _ in range(2):  # the second interval: one whole iteration of each job under the plan
        _, _, _, _, info = core.step_split(pol(core.routing_context, core.last_result))
    np.testing.assert_allclose(np.asarray(info["step_time_ms"])[0], hand, rtol=1e-9)
    spray = EnvCore(four_spines, batch=1)
    spray.reset([0])
    for _ in range(2):
        _, _, _, _, info = spray.step_split(POLICIES["spray+bg"](spray.routing_context, spray.last_result))
    np.testing.assert_allclose(np.asarray(info["step_time_ms"])[0], [27.0, 33.5], rtol=1e-9)


def test_extra_plans_follow_the_mode_s_and_choosing_one_plays_its_split(four_spines: dict) -> None:
    cls, plans = plans_of_mode("choose_bg", ISO)
    assert cls == "jobs+bg" and plans[-2:] == ISO and plans[:-2] == plans_of_mode("choose_bg")[1]
    assert all(EXTRA_PLANS[p][1] == "jobs+bg" for p in ISOLATE_PLANS)
    sc = four_spines
    env = EnvCore(sc, batch=2, action_mode="choose_bg", extra_plans=ISO)
    ref = EnvCore(sc, batch=2)
    env.reset([1, 2])
    ref.reset([1, 2])
    k = plans.index("isolate1+bg")
    for _ in range(3):
        _, r, *_ = env.step(np.array([k, k]))
        _, r_ref, *_ = ref.step_split(ISOLATE_PLANS["isolate1+bg"](ref.routing_context, ref.last_result))
        np.testing.assert_array_equal(r, r_ref)


@pytest.mark.parametrize(
    ("mode", "extra", "match"),
    [
        ("choose_bg", ("isolate0+bg", "isolate0+bg"), "distinct"),
        ("choose_bg", ("lp+bg",), "not an extra plan"),
        ("choose", ("isolate0+bg",), "not an extra plan"),
        ("split", ("isolate0+bg",), "only in a choose mode"),
    ],
)
def test_wrong_extra_plans_are_refused(
    four_spines: dict, mode: str, extra: tuple[str, ...], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        EnvCore(four_spines, action_mode=mode, extra_plans=extra)
