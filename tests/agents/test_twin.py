"""The clairvoyant ``twin``: at least as good as each of its candidates on every seed (it keeps the best
trajectory, replayed bit for bit), shown apart in tables with each policy's share of the ECMP-to-twin gap,
and the ``evaluate --json`` contract for the names given on the command line."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from _scenarios import small_spine_leaf

from ainet_gym.agents import twin as twin_module
from ainet_gym.agents.evaluate import markdown_table, run_policy
from ainet_gym.agents.registry import make_agent
from ainet_gym.agents.twin import BASE_CHOICES, PURE_CANDIDATES, TwinAgent, parse_twin_arg
from ainet_gym.envs.env import EnvCore


def scenario() -> dict:
    """16 GPUs, two ring jobs, periodic storage background, random link failures."""
    return small_spine_leaf(10, name="twin-small", link_failures={"rate_per_step": 0.2, "repair_steps": 3})


def test_twin_is_at_least_as_good_as_each_candidate_on_every_seed() -> None:
    seeds = [1, 2, 3, 4]
    sc = scenario()
    twin = TwinAgent("k7-h2")
    g_twin = run_policy(twin, EnvCore(sc, batch=len(seeds), info_keys=("collisions",)), seeds).gpu.mean(
        axis=1
    )
    for name in PURE_CANDIDATES:
        agent = make_agent(name)
        core = EnvCore(sc, batch=len(seeds), info_keys=("collisions",))
        core.reset(seeds)
        agent.check(core)
        g = run_policy(agent, core, seeds).gpu.mean(axis=1)
        assert np.all(g_twin >= g - 1e-12), (name, g_twin, g)
    # the replay is the planned trajectory: the realised episode equals the best planned score, exactly
    scores = twin.plan_stats["scores"]
    best = np.array([scores[c][i] for i, c in enumerate(twin.plan_stats["chosen"])])
    np.testing.assert_array_equal(g_twin, best)


def test_twin_in_evaluate_is_the_reference_shown_last_with_gap_shares(evaluate_json: Callable) -> None:
    out = evaluate_json(
        "periodic-interference-jitter", "twin:k7-h1,lp+bg,pretrained", "--seeds", "1,2", "--steps", "3"
    )
    pol = out["policies"]
    for name in ("twin:k7-h1", "lp+bg", "pretrained"):  # spelled as given
        g = pol[name]["gpu_utilization"]
        assert isinstance(g["mean"], float) and len(g["ci95"]) == 2
    assert pol["twin:k7-h1"]["controls"] == "reference"
    twin, ecmp = pol["twin:k7-h1"]["gpu_utilization"]["mean"], pol["ecmp"]["gpu_utilization"]["mean"]
    for d in pol.values():
        share = d["twin_gap_share"]["mean"]
        assert share == pytest.approx((d["gpu_utilization"]["mean"] - ecmp) / (twin - ecmp))
    lines = markdown_table(out).splitlines()
    rows = lines[2:]
    assert rows[-1].split("|")[1].strip() == "twin:k7-h1"  # apart, last
    assert "share of ECMP-to-twin gap" in lines[0]
    # a GFM table: the delimiter row has exactly one cell per header cell (9 with the twin column), and so
    # has every row; the class column is left-aligned, the numbers right-aligned
    header = lines[0].strip("|").split("|")
    delim = lines[1].strip("|").split("|")
    assert len(header) == 9 and len(delim) == 9
    assert delim[7] == "---" and delim[8] == "---:"
    assert all(len(r.strip("|").split("|")) == 9 for r in rows)


def test_job_progress_counts_ideal_work_by_hand() -> None:
    # one 2-GPU job alone on a switch: after its compute and half of its bytes, the work is
    # compute + comm_ideal / 2 per GPU (an independent count of what was done)
    sc = {
        "name": "one-job",
        "fabric": {"topology": "single_switch", "hosts": 2, "gpus_per_host": 1, "hop_latency_us": 0.0},
        "workload": {
            "jobs": [{"name": "a", "gpus": 2, "compute_ms": 10.0,
                      "collectives": [{"op": "sendrecv", "pattern": "shift:1", "bytes": 5e8}]}]
        },
        "dynamics": {"episode_steps": 4, "decision_interval_ms": 15.0},
    }  # fmt: skip
    core = EnvCore(sc, batch=1)
    core.reset([0])
    np.testing.assert_allclose(core.job_progress(), 0.0)
    core.step_split(core.world.default_split())
    comm = core.world.job_ideal_comm_s[0, 0]  # 5e8 bytes at 50 GB/s: 10 ms
    assert comm == pytest.approx(0.010)
    # 15 ms: 10 ms of compute, then 5 ms of a 10 ms transfer
    np.testing.assert_allclose(core.job_progress()[0, 0], 2 * (0.010 + 0.5 * comm), rtol=1e-9)


def test_twin_arguments_are_checked() -> None:
    assert parse_twin_arg("k9-h3-s2-g0.25") == {
        "k": 9, "h": 3, "seed": 2, "sigma": 0.25, "best_base": False, "isolate": False, "weights": [],
        "weight_bases": ["burst-lp+bg"], "weighted_base": False,
    }  # fmt: skip
    assert parse_twin_arg("best-w-w4.5")["weights"] == [16.0, 4.5]  # the weighted candidates (issue-26zi)
    assert parse_twin_arg("best")["best_base"] and parse_twin_arg("k9-best-h3")["h"] == 3
    assert parse_twin_arg("best-iso")["isolate"] and parse_twin_arg("best-iso")["best_base"]
    assert make_agent("twin").name == "twin" and make_agent("twin:k8-h2").name == "twin:k8-h2"
    with pytest.raises(ValueError, match=r"k = 3: needs >= 7"):
        make_agent("twin:k3")
    with pytest.raises(ValueError, match=r"'x4' is not one of kK"):
        make_agent("twin:x4")


def test_twin_best_rolls_out_each_instances_best_pure_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    # `twin:...-best`: each instance's lookahead base is its best stateless pure candidate, measured here
    # independently (each baseline's own episode), and the batched plan of an instance is the plan a twin
    # with that base alone makes for that seed alone (sigma 0: the perturbations draw nothing, so a batch
    # of one plans what the batch of eight plans for the instance)
    seeds = list(range(1, 9))
    sc = scenario()
    twin = TwinAgent("k7-h2-g0-best")
    g_twin = run_policy(twin, EnvCore(sc, batch=len(seeds), info_keys=("collisions",)), seeds).gpu.mean(
        axis=1
    )
    own = {}
    for name in BASE_CHOICES:
        core = EnvCore(sc, batch=len(seeds), info_keys=("collisions",))
        own[name] = run_policy(make_agent(name), core, seeds).gpu.mean(axis=1)
        assert np.all(g_twin >= own[name] - 1e-12), name
    table = np.stack([own[n] for n in BASE_CHOICES])
    expect = [BASE_CHOICES[i] for i in np.argmax(table, axis=0)]
    assert twin.plan_stats["bases"] == expect
    assert len(set(expect)) > 1  # the batch mixes bases: the per-instance rows are exercised
    plan = twin.plan_stats["scores"]["plan"]
    for b, seed in enumerate(seeds):
        monkeypatch.setattr(twin_module, "BASE_POLICY", expect[b])
        alone = TwinAgent("k7-h2-g0")
        run_policy(alone, EnvCore(sc, batch=1, info_keys=("collisions",)), [seed])
        assert alone.plan_stats["bases"] == [expect[b]]
        assert alone.plan_stats["scores"]["plan"][0] == pytest.approx(plan[b], abs=1e-12), (seed, expect[b])
