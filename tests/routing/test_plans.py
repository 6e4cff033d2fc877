"""The plan tables of :mod:`ainet_gym.routing.plans`: the plans of each ``choose`` mode are the baselines of one
controls class in the documented order, and a weighted plan's name gives its class and weight. (Playing the
plans in an env: ``tests/envs/test_choose.py``; the weighted plans through agents:
``tests/agents/test_weighted_plans.py``.)"""

from __future__ import annotations

from ainet_gym.routing.plans import CHOOSE_MODES, FAVOUR_WEIGHT, PLANS, plans_of_mode, weighted_plan
from ainet_gym.routing.policies import CONTROLS, POLICIES, PREDICTIVE


def test_plans_are_the_baselines_of_one_class_in_the_documented_order() -> None:
    assert PLANS["jobs"] == ("ecmp", "spray", "wcmp", "greedy", "lp")
    assert PLANS["jobs+bg"][:3] == ("ecmp", "spray+bg", "wcmp+bg")
    for mode, cls in CHOOSE_MODES.items():
        got_cls, plans = plans_of_mode(mode)
        assert got_cls == cls and plans == PLANS[cls]
        assert plans[0] == "ecmp"  # action 0: the default routing
        assert all(p in POLICIES and CONTROLS[p] == cls for p in plans[1:])
    # every baseline of a class is a plan of its mode (no baseline left out), but the predict-then-route
    # ones, whose forecast needs every interval (routing.plans)
    for cls in PLANS:
        assert {p for p, c in CONTROLS.items() if c == cls and p not in PREDICTIVE} <= set(PLANS[cls])


def test_plain_plans_keep_their_class_and_the_default_weight_is_16() -> None:
    assert plans_of_mode("choose_bg", ("isolate0+bg",))[0] == "jobs+bg"
    assert plans_of_mode("choose_bg", ("isolate0+bg", "favour1+bg"))[0] == "jobs+bg+weights"
    assert weighted_plan("favour1+bg").weight == FAVOUR_WEIGHT == 16.0
    assert weighted_plan("favour2-w4.5+bg").weight == 4.5
    assert weighted_plan("lp+bg") is None
