"""Direct policy search (``python -m ainet_gym.agents.search``, ``dps:PATH``): the linear scorer picks the plan of
the highest score, the score is the closed-loop one with its tail penalty, the search plays every candidate on the
same episodes (its static rows are ``evaluate``'s episodes), and ``evaluate`` plays the file in its class."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ainet_gym.agents.search import (
    SearchAgent,
    SearchConfig,
    candidate_score,
    cem_search,
    load_search_policy,
    plan_scores,
    pooled_tail,
    save_search_policy,
)

SCEN = "ingest-bursts"


def _cfg(**kw: object) -> SearchConfig:
    base = {"episodes": 2, "population": 3, "elite": 2, "generations": 2, "episode_steps": 3, "seed": 5}
    return SearchConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_the_scorer_plays_the_plan_of_the_highest_score() -> None:
    # plans (ref, a, b); two columns: a scores x0 - 0.5, b scores x1 - 0.5, the reference 0
    theta = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5]])
    x = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.8]])
    s = plan_scores(theta, x)
    np.testing.assert_allclose(s[:, 0], 0.0)
    assert np.argmax(s, axis=1).tolist() == [0, 1, 2, 1]
    per_row = plan_scores(np.repeat(theta[None], 4, axis=0), x)  # one theta per row: the same scores
    np.testing.assert_allclose(per_row, s)


def test_the_tail_is_evaluates_pooled_p99_and_the_penalty_starts_at_the_target() -> None:
    rng = np.random.default_rng(0)
    ratio = 1.0 + rng.random((3, 5, 2))
    iters = rng.integers(0, 3, (3, 5, 2))
    p99, frac = pooled_tail(ratio, iters, 1.5)
    samples = np.repeat(ratio.reshape(-1), iters.reshape(-1))
    assert p99 == pytest.approx(np.percentile(samples, 99))
    assert frac == pytest.approx((samples > 1.5).mean())
    cfg = SearchConfig(tail_weight=2.0, tail_target=0.01)
    assert candidate_score(0.77, 0.005, cfg) == pytest.approx(0.77)
    assert candidate_score(0.77, 0.03, cfg) == pytest.approx(0.77 - 2.0 * 0.02)


def test_the_search_is_seeded_and_its_static_rows_are_evaluates_episodes(tmp_path: Path) -> None:
    from ainet_gym.agents.evaluate import run_policy
    from ainet_gym.agents.registry import make_agent
    from ainet_gym.envs.env import EnvCore

    cfg = _cfg(checkpoints=(1,))
    a = cem_search(cfg, tmp_path / "a")
    b = cem_search(cfg)
    np.testing.assert_array_equal(a["mean"], b["mean"])
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["final.npz", "gen-1.npz", "log.jsonl"]
    from ainet_gym.fabric.topology import fabric_fingerprint

    fabric = fabric_fingerprint(EnvCore(SCEN).fabric)  # the files carry the fabric searched on (issue-26zh2)
    assert load_search_policy(tmp_path / "a" / "final.npz")["fabric"] == fabric
    assert len((tmp_path / "a" / "log.jsonl").read_text().splitlines()) == 2
    rec = a["history"][1]  # generation 2 plays seeds first_seed + 2, + 3 (common to every candidate)
    assert rec["seeds"] == [cfg.first_seed + 2, cfg.first_seed + 3]
    for plan in (cfg.tail_plan, cfg.mean_plan):
        run = run_policy(
            make_agent(plan), EnvCore(SCEN, batch=2, episode_steps=3, info_keys=("collisions",)), rec["seeds"]
        )
        assert rec[plan]["util"] == pytest.approx(run.gpu.mean(), abs=1e-12)


def test_evaluate_plays_the_file_in_its_class(tmp_path: Path, evaluate_json: Callable) -> None:
    cfg = _cfg()
    theta = np.zeros((len(cfg.plans) - 1, 13))
    theta[0, -1] = 10.0  # favour0+bg always scores above the reference and the others
    path = save_search_policy(tmp_path / "f0.npz", theta, cfg)
    pol = evaluate_json(SCEN, f"dps:{path},favour0+bg", "--seeds", "1,2", "--steps", "3")["policies"]
    assert pol[f"dps:{path}"]["controls"] == "jobs+bg+weights"
    assert pol[f"dps:{path}"]["gpu_utilization"] == pol["favour0+bg"]["gpu_utilization"]


def test_bad_files_and_other_envs_are_refused_in_one_line(tmp_path: Path) -> None:
    from ainet_gym.agents.model_files import ModelFileError
    from ainet_gym.envs.env import EnvCore

    cfg = _cfg()
    good = save_search_policy(tmp_path / "g.npz", np.zeros((3, 13)), cfg)
    assert load_search_policy(good)["plans"] == list(cfg.plans)
    z = dict(np.load(good))
    cases = {
        "theta": {**z, "theta": np.zeros((2, 13))},
        "non-finite": {**z, "theta": np.full((3, 13), np.nan)},
        "no field plans": {k: v for k, v in z.items() if k != "plans"},
    }
    for words, arrays in cases.items():
        bad = tmp_path / "bad.npz"
        np.savez(bad, **arrays)
        with pytest.raises(ModelFileError, match=words):
            load_search_policy(bad)
    np.savez(tmp_path / "obj.npz", **{**z, "theta": np.array([None, 1], dtype=object)})
    with pytest.raises(ModelFileError, match="pickled"):
        load_search_policy(tmp_path / "obj.npz")
    wide = save_search_policy(tmp_path / "w.npz", np.zeros((3, 14)), cfg)
    core = EnvCore(SCEN, action_mode="choose_bg", extra_plans=cfg.extra_plans, obs_features=("phase",))
    with pytest.raises(ValueError, match="reads 13 columns"):
        SearchAgent(str(wide)).check(core)
    with pytest.raises(ValueError, match="plans"):
        SearchAgent(str(good)).check(EnvCore(SCEN, action_mode="choose_bg", obs_features=("phase",)))
    # a file searched on another fabric (its fingerprint is not this scenario's) is refused naming both; a file
    # without one (every older file, as ``good``) is not checked
    from ainet_gym.fabric.topology import fabric_fingerprint

    core = EnvCore(SCEN, action_mode="choose_bg", extra_plans=cfg.extra_plans, obs_features=("phase",))
    other = save_search_policy(tmp_path / "o.npz", np.zeros((3, 13)), cfg, fabric="fab1-0123456789abcdef")
    with pytest.raises(
        ValueError,
        match=f"o.npz: field 'fabric' = 'fab1-0123456789abcdef'.*{fabric_fingerprint(core.fabric)}",
    ):
        SearchAgent(str(other)).check(core)
    assert load_search_policy(good)["fabric"] is None
    SearchAgent(str(good)).check(core)
    np.savez(tmp_path / "f.npz", **{**z, "fabric": np.array(["x"])})
    with pytest.raises(ModelFileError, match="field 'fabric' is a 1-d"):
        load_search_policy(tmp_path / "f.npz")


def test_a_gate_plays_its_base_or_the_override_and_its_search_logs_the_base(
    tmp_path: Path, evaluate_json: Callable
) -> None:
    # the base: a dps file that always plays favour2+bg (issue-26zt's gate over a passing policy)
    base = save_search_policy(tmp_path / "b.npz", np.full((3, 13), -1.0), _cfg())
    cfg = _cfg(plans=("base", "favour0+bg"), base=f"dps:{base}")
    never = np.zeros((1, 13))
    never[0, -1] = -1.0
    always = np.zeros((1, 13))
    always[0, -1] = 1.0
    g0 = save_search_policy(tmp_path / "never.npz", never, cfg)
    g1 = save_search_policy(tmp_path / "always.npz", always, cfg)
    assert load_search_policy(g0)["base"] == f"dps:{base}"
    pol = evaluate_json(SCEN, f"dps:{g0},dps:{g1},favour0+bg,favour2+bg", "--seeds", "1,2", "--steps", "3")
    u = {k: v["gpu_utilization"] for k, v in pol["policies"].items()}
    assert u[f"dps:{g0}"] == u["favour2+bg"] and u[f"dps:{g1}"] == u["favour0+bg"]
    rec = cem_search(_cfg(plans=("base", "favour0+bg"), base=f"dps:{base}", population=4, antithetic=True))
    last = rec["history"][-1]
    assert last["base"]["util"] == pytest.approx(last["favour2+bg"]["util"], abs=1e-12)
    with pytest.raises(ValueError, match="base"):
        cem_search(_cfg(plans=("base", "favour0+bg")))  # a base plan without a base policy
    with pytest.raises(ValueError, match="even"):
        cem_search(_cfg(plans=("base", "favour0+bg"), base=f"dps:{base}", antithetic=True))


def test_a_gate_file_without_its_base_string_is_refused(tmp_path: Path) -> None:
    from ainet_gym.agents.model_files import ModelFileError

    cfg = _cfg(plans=("base", "favour0+bg"), base="dps:x.npz")
    z = dict(np.load(save_search_policy(tmp_path / "g.npz", np.zeros((1, 13)), cfg)))
    np.savez(tmp_path / "nobase.npz", **{k: v for k, v in z.items() if k != "base"})
    with pytest.raises(ModelFileError, match="base"):
        load_search_policy(tmp_path / "nobase.npz")


def test_the_floor_score_ranks_the_tail_above_the_floor_and_the_mean_below_it() -> None:
    from ainet_gym.agents.search import floor_score, mean_floor

    u = np.array([0.76, 0.77, 0.78, 0.77])
    assert mean_floor(u, 1.96) == pytest.approx(u.mean() + 1.96 * u.std(ddof=1) / 2.0)
    assert mean_floor(u, 0.0) == pytest.approx(u.mean())
    floor = 0.765
    above_small, above_big = floor_score(0.766, 0.010, floor), floor_score(0.800, 0.020, floor)
    below_near, below_far = floor_score(0.764, 0.0, floor), floor_score(0.700, 0.0, floor)
    assert above_small == pytest.approx(-0.010) and above_small > above_big  # above: the smaller tail wins
    assert above_big > below_near > below_far  # any candidate at the floor beats one below; below: the mean
    assert floor_score(floor, 0.5, floor) == pytest.approx(-0.5)  # at the floor counts as reaching it


def test_the_floor_search_logs_its_floor_and_refuses_an_unknown_score() -> None:
    from ainet_gym.agents.search import mean_floor

    cfg = _cfg(score="floor", generations=1)
    rec = cem_search(cfg)["history"][0]
    assert rec["mean_policy"]["score"] <= 0.0  # -frac above the floor, < -1 below it
    assert rec["floor"] >= rec[cfg.mean_plan]["util"]
    assert mean_floor(np.array([rec[cfg.mean_plan]["util"]] * 2), 1.96) == pytest.approx(
        rec[cfg.mean_plan]["util"]
    )
    with pytest.raises(ValueError, match="score = 'mean'"):
        cem_search(_cfg(score="mean"))
