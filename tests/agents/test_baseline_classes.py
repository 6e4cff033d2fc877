"""Evaluation of the baselines of every class: each policy's table row beside the LP of its class (the
routing side of these baselines, what they route and the LP's own objective:
``tests/routing/test_policy_classes.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.agents.evaluate import EvalConfig, evaluate, markdown_table
from tests._scenarios import simulated_gpu_utilization, small_spine_leaf

JOBS_BG_ROUTERS = ("greedy+bg", "lp+bg", "predictive-greedy+bg", "predictive-lp+bg")


def test_the_jobs_bg_routers_run_through_evaluate_with_the_lp_of_their_class() -> None:
    res = evaluate(
        EvalConfig(small_spine_leaf(6), policies=["spray", *JOBS_BG_ROUTERS], seeds=[1, 2], out=None)
    )
    pol = res["policies"]
    assert list(pol) == ["spray", *JOBS_BG_ROUTERS, "ecmp", "lp"]  # given order, then the references
    # every row's figure is the mean over the two seeds' episodes, each recomputed from simulate's per-step
    # JSON (one world, batch 1)
    per = {n: [simulated_gpu_utilization(small_spine_leaf(6), n, s, 6) for s in (1, 2)] for n in pol}
    for name, d in pol.items():
        assert d["gpu_utilization"]["mean"] == pytest.approx(np.mean(per[name]), rel=1e-9), name
    for name in JOBS_BG_ROUTERS:
        d = pol[name]
        assert d["controls"] == "jobs+bg" and d["lp_reference"] == "lp+bg", name
        # ECMP's hash collides on both seeds here (0.610, 0.690) and every router of the class spreads the
        # jobs (0.714 to 0.774): one that left ECMP's split in place would tie it
        assert all(a > e + 0.02 for a, e in zip(per[name], per["ecmp"])), (name, per[name], per["ecmp"])
        lpbg = pol["lp+bg"]["gpu_utilization"]["mean"]
        assert d["gap_to_lp"] == pytest.approx((lpbg - d["gpu_utilization"]["mean"]) / lpbg)
    assert pol["spray"]["lp_reference"] == "lp" and pol["lp+bg"]["gap_to_lp"] == 0.0
    # rows by class: ecmp (none), the jobs class, then the jobs+bg class
    lines = markdown_table(res).splitlines()
    body = lines[2:]
    assert [r.split("|")[1].strip() for r in body] == ["ecmp", "spray", "lp", *JOBS_BG_ROUTERS]
    # a GFM table: one delimiter cell per header cell (8 without a twin), and as many cells in every row
    assert len(lines[0].strip("|").split("|")) == len(lines[1].strip("|").split("|")) == 8
    assert all(len(r.strip("|").split("|")) == 8 for r in body)


def test_a_jobs_plus_bg_policy_brings_its_lp_along() -> None:
    res = evaluate(EvalConfig(small_spine_leaf(4), policies=["spray+bg"], seeds=[1, 2], out=None))
    assert list(res["policies"]) == ["spray+bg", "ecmp", "lp", "lp+bg"]
    assert res["policies"]["spray+bg"]["lp_reference"] == "lp+bg"
