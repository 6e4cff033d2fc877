"""Agents over the isolating plans ``isolate{j}+bg``: a k-NN fitted on labels with these ``extra_plans`` plays in
an env that has them, and the twin with isolating candidates is at least each pure candidate (the plans'
splits and step times by hand: ``tests/routing/test_isolate_plans.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ainet_gym.envs.env import EnvCore

ISO = ("isolate0+bg", "isolate1+bg")


def test_a_knn_on_labels_with_extra_plans_plays_in_an_env_with_them(
    four_spines: dict, tmp_path: Path
) -> None:
    from ainet_gym.agents.evaluate import run_policy
    from ainet_gym.agents.imitate import KnnAgent, fit_knn, lookahead_labels

    sc = four_spines
    lab = lookahead_labels(sc, [1, 2], h=2, extra_plans=ISO)
    assert list(lab["plans"][-2:]) == list(ISO) and lab["scores"].shape[1] == 8
    agent = KnnAgent(str(fit_knn(lab, tmp_path / "k.npz", k=1, scenario=sc)))
    assert agent.env_kwargs["extra_plans"] == ISO
    core = EnvCore(sc, batch=2, info_keys=("collisions",), **agent.env_kwargs)
    agent.check(core)
    run = run_policy(agent, core, [1, 2])  # k = 1 on its own labelled states: the labels' episodes
    np.testing.assert_allclose(run.gpu.mean(axis=1), lab["gpu_utilization"], rtol=1e-12)


def test_the_twin_with_isolating_candidates_is_at_least_each_pure_candidate(four_spines: dict) -> None:
    from ainet_gym.agents.evaluate import run_policy
    from ainet_gym.agents.registry import make_agent
    from ainet_gym.agents.twin import PURE_CANDIDATES, TwinAgent, parse_twin_arg

    assert parse_twin_arg("k7-h2-iso")["isolate"] and not parse_twin_arg("k7-h2")["isolate"]
    sc, seeds = four_spines, [1, 2]
    twin = TwinAgent("k7-h2-iso")
    g = run_policy(twin, EnvCore(sc, batch=2, info_keys=("collisions",)), seeds).gpu.mean(axis=1)
    for name in PURE_CANDIDATES:
        core = EnvCore(sc, batch=2, info_keys=("collisions",))
        core.reset(seeds)
        ref = run_policy(make_agent(name), core, seeds).gpu.mean(axis=1)
        assert np.all(g >= ref - 1e-12), name
