"""Lookahead labels over the plans of ``choose_bg`` and behaviour cloning
(:mod:`ainet_gym.agents.imitate`). References: the env itself (the recorded observations are those of an
env playing the same plans), the scores (each label is the first best plan), and a lookahead of one
interval against each plan's own interval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _scenarios import FP_GRAPH_EDGES as _EDGES
from _scenarios import fp_graph_scenario as _graph_scenario
from _scenarios import fp_graph_two_fabrics as _two_fabrics
from _scenarios import scenario_fingerprint as _fingerprint

from ainet_gym.agents.imitate import behaviour_clone, lookahead_labels
from ainet_gym.envs.env import EnvCore


def _small() -> dict:
    from _scenarios import small_spine_leaf

    return small_spine_leaf(6, name="imitate-small")


def test_labels_are_the_best_plan_and_the_record_is_the_env_s_episode() -> None:
    sc = _small()
    lab = lookahead_labels(sc, [3, 4], h=3)
    T = 6
    assert lab["obs"].shape[0] == 2 * T and lab["scores"].shape == (2 * T, 6)
    best = lab["scores"].max(axis=1)
    assert np.all(lab["scores"][np.arange(2 * T), lab["label"]] >= best - 1e-9 * np.abs(best))
    # the same plans played by the env give the same observations and rewards
    core = EnvCore(sc, batch=2, action_mode="choose_bg", obs_features=("phase",))
    obs, _ = core.reset([3, 4])
    labels = lab["label"].reshape(2, T)
    for t in range(T):
        np.testing.assert_array_equal(obs, lab["obs"].reshape(2, T, -1)[:, t])
        obs, r, *_ = core.step(labels[:, t])
        np.testing.assert_array_equal(r, lab["reward"].reshape(2, T)[:, t])


def test_a_one_interval_lookahead_scores_each_plan_by_its_own_interval() -> None:

    sc = _small()
    lab = lookahead_labels(sc, [5], h=1)
    core = EnvCore(sc, batch=1, action_mode="choose_bg")
    core.reset([5])
    snap = core.snapshot()
    for k in range(6):  # the first decision: each plan for one interval from the reset state
        core.restore(snap)
        before = core.job_progress().sum()
        core.step(np.array([k]))
        assert lab["scores"][0, k] == pytest.approx(core.job_progress().sum() - before, rel=1e-12)


def test_a_held_plan_is_scored_as_the_env_playing_it_for_hold_intervals() -> None:
    # issue-26zz: --hold k: each plan held k intervals of the lookahead (recomputed each interval, as the env
    # does), then the base; hold = h is the env playing the plan over the whole horizon, hold = 1 today's
    sc = _small()
    core = EnvCore(sc, batch=1, action_mode="choose_bg")
    core.reset([5])
    snap = core.snapshot()

    def by_hand(k: int, hold: int, h: int) -> float:
        core.restore(snap)
        before = core.job_progress().sum()
        for i in range(h):
            core.step(np.array([k if i < hold else 1]))  # plan 1 is the base, spray+bg
        return float(core.job_progress().sum() - before)

    assert lookahead_labels(sc, [5], h=1)["plans"][1] == "spray+bg"
    held = {hold: lookahead_labels(sc, [5], h=3, hold=hold)["scores"][0] for hold in (1, 2, 3, 9)}
    for k in range(6):
        for hold in (1, 2, 3):
            assert held[hold][k] == pytest.approx(by_hand(k, hold, 3), rel=1e-12), (k, hold)
    np.testing.assert_array_equal(held[9], held[3])  # held past the horizon: the whole horizon
    assert not np.allclose(held[3], held[1])  # (the two differ on this scenario)
    assert "hold" in lookahead_labels(sc, [5], h=2, hold=2) and "hold" not in lookahead_labels(sc, [5], h=2)
    with pytest.raises(ValueError, match="hold = 0"):
        lookahead_labels(sc, [5], h=2, hold=0)


def test_a_given_policy_is_played_and_its_states_labelled() -> None:
    lab = lookahead_labels(_small(), [3], h=2, policy=lambda o: np.zeros(len(o), dtype=np.int64))
    assert (lab["played"] == 0).all() and lab["label"].shape == (6,)


def test_pick_label_by_hand() -> None:
    from ainet_gym.agents.imitate import pick_label

    score = np.array([[10.0, 9.0, 8.0], [5.0, 5.0, 7.0], [3.0, 2.0, 1.0]])
    excess = np.array([[0.5, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(pick_label(score, excess), [0, 2, 0])  # default: the best score
    np.testing.assert_array_equal(pick_label(score, excess, "util", 100.0), [0, 2, 0])
    # hard constraint: the best score without excess; a row where every plan has some keeps the best score
    np.testing.assert_array_equal(pick_label(score, excess, "tail"), [1, 0, 0])
    # penalty: 10 - 0.5 w against 9; 7 - w against 5 (ties: the first plan)
    np.testing.assert_array_equal(pick_label(score, excess, "tail", 1.0), [0, 2, 0])
    np.testing.assert_array_equal(pick_label(score, excess, "tail", 2.0), [0, 0, 0])
    np.testing.assert_array_equal(pick_label(score, excess, "tail", 3.0), [1, 0, 0])
    np.testing.assert_array_equal(pick_label(score, excess, "tail", 0.0), pick_label(score, excess))
    with pytest.raises(ValueError, match="objective = 'p99'"):
        pick_label(score, excess, "p99")


def test_the_tail_objective_relabels_a_plan_that_buys_gpu_time_with_slower_steps() -> None:
    from ainet_gym.agents.imitate import pick_label

    def spray(o):  # every run plays spray+bg, so that all of them label the same states
        return np.ones(len(o), dtype=np.int64)

    kw = {"h": 4, "policy": spray}
    util = lookahead_labels("unequal-jobs-jitter", [100], **kw)
    tail = lookahead_labels("unequal-jobs-jitter", [100], objective="tail", **kw)
    n = np.arange(len(util["label"]))
    for k in ("obs", "scores", "tail", "excess", "reward", "step_ratio"):
        np.testing.assert_array_equal(util[k], tail[k])
    # the default labels: the first best score, whatever the tails
    best = util["scores"].max(axis=1)
    assert np.all(util["scores"][n, util["label"]] >= best - 1e-9 * np.abs(best))
    # decisions where the plan of the best score steps slower than spray+bg (index 1) at some interval
    worse = util["excess"][n, util["label"]] > 0
    assert worse.any()
    assert np.all(util["tail"][worse, util["label"][worse]] > util["tail"][worse, 1])
    # there the tail objective labels another plan, one without excess; elsewhere the same label
    assert np.all(tail["label"][worse] != util["label"][worse])
    assert np.all(tail["excess"][n, tail["label"]] == 0)
    np.testing.assert_array_equal(tail["label"][~worse], util["label"][~worse])
    assert len(util["meta"]) == 7 and len(tail["meta"]) == 10  # the default's metadata unchanged
    assert list(tail["meta"][7:]) == ["tail", "0.0", "inf"]
    # a finite weight: the best of score - weight x excess
    pen = lookahead_labels("unequal-jobs-jitter", [100], objective="tail", tail_weight=3.0, **kw)
    np.testing.assert_array_equal(pen["label"], pick_label(util["scores"], util["excess"], "tail", 3.0))
    zero = lookahead_labels("unequal-jobs-jitter", [100], objective="tail", tail_weight=0.0, **kw)
    np.testing.assert_array_equal(zero["label"], util["label"])


@pytest.mark.parametrize(
    "kw, must",
    [
        ({"objective": "p99"}, "objective = 'p99'"),
        ({"objective": "tail", "tail_weight": -1.0}, "tail_weight = -1.0"),
        ({"objective": "tail", "tail_slack": float("nan")}, "tail_slack = nan"),
        ({"objective": "tail", "base": "spray"}, "base = 'spray'"),
    ],
)
def test_a_bad_label_objective_is_refused_by_name(kw, must) -> None:
    with pytest.raises(ValueError, match=must):
        lookahead_labels(_small(), [3], h=1, **kw)


def test_cloning_saves_a_model_that_evaluate_plays(tmp_path) -> None:
    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.sb3_agents import read_metadata

    sc = _small()
    lab = lookahead_labels(sc, [3, 4], h=2)
    res = behaviour_clone(lab, tmp_path / "bc.zip", val=lab, epochs=3, n_envs=2, scenario=sc)
    assert 0 <= res["train_accuracy"] <= 1 and res["val_accuracy"] == res["train_accuracy"]
    meta = read_metadata(res["model_path"])
    assert meta["obs_features"] == ["phase"] and meta["action_mode"] == "choose_bg"
    out = evaluate(EvalConfig(sc, policies=[f"ppo:{res['model_path']}"], seeds=[1], out=None))
    assert out["policies"][f"ppo:{res['model_path']}"]["controls"] == "jobs+bg"
    plain = behaviour_clone(lab, tmp_path / "plain.zip", epochs=1, n_envs=1, scenario=sc, obs_features=())
    assert "obs_features" not in read_metadata(plain["model_path"])


def test_knn_votes_of_the_nearest_decisions_by_hand(tmp_path) -> None:
    from types import SimpleNamespace

    from ainet_gym.agents.imitate import KnnAgent

    x = np.array([[0, 0], [0, 1], [0, 2], [5, 5], [5, 6], [5, 7], [9, 9]], dtype=np.float32)
    y = np.array([1, 1, 3, 3, 4, 4, 0])
    np.savez(
        tmp_path / "p.npz", x=x, y=y, k=np.int64(3), block=np.array("job_phase"),
        meta=np.array(["s", "choose_bg", "phase", "4", "8", "spray+bg", "8"]), plans=np.arange(6).astype(str),
    )  # fmt: skip
    agent = KnnAgent(str(tmp_path / "p.npz"))
    core = SimpleNamespace(obs_layout={"job_phase": slice(1, 3)})
    obs = np.array([[7.0, 0.0, 0.4], [7.0, 5.0, 6.2], [7.0, 9.0, 9.0]])  # column 0: another block
    # nearest three: (0,0) (0,1) (0,2) -> 1, 1, 3; (5,6) (5,7) (5,5) -> 4, 4, 3; (9,9) (5,7) (5,6) -> 0, 4, 4
    np.testing.assert_array_equal(agent.act(core, obs), [1, 4, 4])
    agent.k = 1
    np.testing.assert_array_equal(agent.act(core, obs), [1, 4, 0])
    agent.k = 2  # (9,9) (5,7): one vote each for 0 and 4, the tie to the lower plan
    assert agent.act(core, obs)[2] == 0


def test_knn_value_vote_plays_the_best_mean_value_not_the_majority_by_hand(tmp_path) -> None:
    from types import SimpleNamespace

    from ainet_gym.agents.imitate import KnnAgent, fit_knn, knn_values, load_knn

    # three decisions, one per plan pair; plan 1 is the majority label (two of three), but the third
    # neighbour loses 1.0 under plan 1 while the first two lose only 0.1 under plan 2
    # (plans 3-5 score 0, as plan 0)
    scores = np.pad(np.array([[0.0, 1.0, 0.9], [0.0, 2.0, 1.9], [0.0, 3.0, 4.0]]), ((0, 0), (0, 3)))
    excess = np.pad(np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.5]]), ((0, 0), (0, 3)))
    meta = np.array(["imitate-small", "choose_bg", "phase", "4", "6", "spray+bg", "8", "tail", "0.0", "1.0"])
    lab = {"scores": scores, "excess": excess, "meta": meta}
    # weight 1 (the labels' own): plan 2 of row 3 is worth 4.0 - 0.5 = 3.5, still above plan 1's 3.0
    np.testing.assert_allclose(
        knn_values(lab)[:, :3], [[-1.0, 0.0, -0.1], [-2.0, 0.0, -0.1], [-3.5, -0.5, 0.0]], rtol=1e-6
    )
    # weight 4: row 3's plan 2 falls to 2.0, below plan 1
    np.testing.assert_allclose(knn_values(lab, 4.0)[2, :3], [-3.0, 0.0, -1.0], rtol=1e-6)
    for bad in (float("inf"), -1.0, float("nan")):
        with pytest.raises(ValueError, match="value weight"):
            knn_values(lab, bad)
    with pytest.raises(ValueError, match="value weight"):  # labels of weight inf: an explicit weight
        knn_values({**lab, "meta": np.array([*meta[:9], "inf"])})
    x = np.array([[0.0, 0.0], [0.0, 0.1], [0.0, 0.2]], dtype=np.float32)
    sc = _small()
    labels = {
        **lab, "label": np.array([1, 1, 2]), "seed": np.array([1, 1, 1]),
        "plans": np.array(["ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"]),
    }  # fmt: skip
    core = EnvCore(sc, action_mode="choose_bg", obs_features=("phase",))
    sl = core.obs_layout["job_phase"]
    labels["obs"] = np.zeros((3, core.obs_layout["job_phase"].stop), dtype=np.float32)
    labels["obs"][:, sl.start : sl.start + 2] = x
    path = fit_knn(labels, tmp_path / "v.npz", k=3, scenario=sc, vote="value")
    assert load_knn(path)["q"].shape == (3, 6)
    agent = KnnAgent(str(path))
    view = SimpleNamespace(obs_layout=core.obs_layout)
    q = labels["obs"][:1]
    # label votes: 1, 1, 2 -> plan 1; values: plan 1 mean -0.5/3, plan 2 mean -0.2/3 -> plan 2
    assert agent.act(view, q)[0] == 2
    assert KnnAgent(str(fit_knn(labels, tmp_path / "l.npz", k=3, scenario=sc))).act(view, q)[0] == 1
    agent.k = 1  # the nearest decision alone: its best plan, 1
    assert agent.act(view, q)[0] == 1
    with pytest.raises(ValueError, match="vote = 'mean'"):
        fit_knn(labels, tmp_path / "m.npz", k=3, scenario=sc, vote="mean")


def test_knn_values_tail_cap_penalises_the_tail_above_the_cap_and_the_base_by_hand(tmp_path) -> None:
    from ainet_gym.agents.imitate import fit_knn, knn_values, load_knn

    # plans 0, 1 (spray+bg, the base), 2; values without the cap: scores (weight 0)
    scores = np.pad(np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]), ((0, 0), (0, 3)))
    tail = np.pad(np.array([[2.0, 1.5, 1.9], [1.0, 1.8, 1.9], [1.0, 1.5, 1.6]]), ((0, 0), (0, 3)))
    meta = np.array(["imitate-small", "choose_bg", "phase", "4", "6", "spray+bg", "8"])
    plans = np.array(["ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"])
    lab = {"scores": scores, "excess": np.zeros_like(scores), "tail": tail, "meta": meta, "plans": plans}
    off = knn_values(lab)
    np.testing.assert_array_equal(off, knn_values(lab, None, None, 0.0))  # no cap: unchanged (default off)
    for half in ({"tail_penalty": 100.0}, {"tail_cap": 1.7}):  # one without the other would do nothing
        with pytest.raises(ValueError, match="allowed: both"):
            knn_values(lab, **half)
    v = knn_values(lab, tail_cap=1.7, tail_penalty=10.0)
    # row 1: reference max(1.7, 1.5) = 1.7: plan 0 loses 10 * 0.3 = 3, plan 2 10 * 0.2 = 2 -> -3, 1, 0, and
    # plans 3-5 0 (tail 0), minus the row's maximum 1; row 2: reference the base's 1.8: plan 2 loses
    # 10 * 0.1 = 1 -> 0, 1, 1, 0 (minus 1); row 3: every tail below the cap: unchanged (minus 2)
    np.testing.assert_allclose(v[:, :3], [[-4.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [-2.0, -1.0, 0.0]], atol=1e-6)
    np.testing.assert_allclose(v[:, 3:], [[-1.0] * 3, [-1.0] * 3, [-2.0] * 3], atol=1e-6)
    for bad in ({"tail_cap": 0.0, "tail_penalty": 1.0}, {"tail_cap": float("inf"), "tail_penalty": 1.0},
                {"tail_cap": 1.7, "tail_penalty": -1.0}):  # fmt: skip
        with pytest.raises(ValueError, match="tail_"):
            knn_values(lab, **bad)
    with pytest.raises(ValueError, match="no 'tail'"):
        knn_values({k: a for k, a in lab.items() if k != "tail"}, tail_cap=1.7, tail_penalty=1.0)
    sc = _small()
    core = EnvCore(sc, action_mode="choose_bg", obs_features=("phase",))
    labels = {
        **lab, "label": np.array([1, 2, 2]), "seed": np.array([1, 1, 1]),
        "obs": np.zeros((3, core.obs_layout["job_phase"].stop), dtype=np.float32),
    }  # fmt: skip
    path = fit_knn(
        labels, tmp_path / "c.npz", k=3, scenario=sc, vote="value", tail_cap=1.7, tail_penalty=10.0
    )
    np.testing.assert_allclose(load_knn(path)["q"], v, atol=1e-6)
    with pytest.raises(ValueError, match="tail_cap = 1\\.7, tail_penalty = 10\\.0 with vote = 'label'"):
        fit_knn(labels, tmp_path / "l.npz", k=3, scenario=sc, tail_cap=1.7, tail_penalty=10.0)


def test_a_value_vote_margin_falls_back_where_the_best_plan_gains_little_over_the_fallback(tmp_path) -> None:
    from types import SimpleNamespace

    from ainet_gym.agents.imitate import KnnAgent, fit_knn, load_knn

    # the three decisions of the test above: mean values over the three neighbours, by hand,
    # plan 0 -6.5/3, plan 1 -0.5/3, plan 2 -0.2/3, plans 3-5 -6.5/3: plan 2 is best, 0.3/3 = 0.1 above
    # plan 1 and 6.3/3 = 2.1 above plans 0 and 3-5
    scores = np.pad(np.array([[0.0, 1.0, 0.9], [0.0, 2.0, 1.9], [0.0, 3.0, 4.0]]), ((0, 0), (0, 3)))
    excess = np.pad(np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.5]]), ((0, 0), (0, 3)))
    meta = np.array(["imitate-small", "choose_bg", "phase", "4", "6", "spray+bg", "8", "tail", "0.0", "1.0"])
    plans = np.array(["ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"])
    sc = _small()
    core = EnvCore(sc, action_mode="choose_bg", obs_features=("phase",))
    sl = core.obs_layout["job_phase"]
    obs = np.zeros((3, sl.stop), dtype=np.float32)
    obs[:, sl.start + 1] = [0.0, 0.1, 0.2]
    labels = {
        "scores": scores, "excess": excess, "meta": meta, "plans": plans, "obs": obs,
        "label": np.array([1, 1, 2]), "seed": np.array([1, 1, 1]),
    }  # fmt: skip
    view = SimpleNamespace(obs_layout=core.obs_layout)

    def play(**kw) -> int:
        return int(
            KnnAgent(str(fit_knn(labels, tmp_path / "m.npz", k=3, scenario=sc, vote="value", **kw))).act(
                view, obs[:1]
            )[0]
        )

    assert play() == 2 and play(margin=0.0) == 2 and play(margin=0.09) == 2  # 0.1 apart: not below
    assert play(margin=0.11) == 1  # below the margin: the default fallback, spray+bg (plan 1)
    # against the fallback's own value, not the second best's (plan 1): 2.1 above ecmp and lp+bg
    assert play(margin=0.11, fallback="ecmp") == 2 and play(margin=2.09, fallback="lp+bg") == 2
    assert play(margin=2.11, fallback="ecmp") == 0 and play(margin=2.11, fallback="lp+bg") == 4
    z = load_knn(tmp_path / "m.npz")
    assert z["margin"] == pytest.approx(2.11) and z["plans"][z["fallback"]] == "lp+bg"
    for kw, must in (
        ({"margin": -0.1}, "margin = -0.1"),
        ({"margin": float("nan")}, "margin = nan"),
        ({"margin": 0.1, "fallback": "spray"}, "fallback = 'spray'"),
        ({"margin": 0.1, "vote": "label"}, "with vote = 'label'"),
    ):
        with pytest.raises(ValueError, match=must.replace("(", r"\(")):
            fit_knn(labels, tmp_path / "bad.npz", k=3, scenario=sc, **{"vote": "value", **kw})
    # vote plans: the best mean value among them only (plan 2 left out: plan 1, then plans 0 and 3-5 tie: 0)
    assert play(vote_plans=["spray+bg", "greedy+bg"]) == 1 and play(vote_plans=["greedy+bg", "lp+bg"]) == 3
    assert play(vote_plans=["wcmp+bg"]) == 2 and play(vote_plans=["ecmp", "lp+bg"]) == 0
    assert play(vote_plans=["lp+bg", "ecmp"], margin=0.11) == 1  # the margin's fallback may lie outside them
    z = load_knn(tmp_path / "m.npz")
    assert z["vote_plans"].tolist() == [True, False, False, False, True, False]
    assert [str(v) for v in np.load(tmp_path / "m.npz")["vote_plans"]] == ["ecmp", "lp+bg"]  # plan order
    for kw, must in (
        ({"vote_plans": []}, "vote_plans = []"),
        ({"vote_plans": ["greedy+bg", "greedy+bg"]}, "one or more distinct plans"),
        ({"vote_plans": ["spray"]}, "vote_plans = 'spray'"),
        ({"vote_plans": ["spray+bg"], "vote": "label"}, "with vote = 'label'"),
    ):
        with pytest.raises(
            ValueError, match=must.replace("(", r"\(").replace("+", r"\+").replace("[", r"\[")
        ):
            fit_knn(labels, tmp_path / "bad.npz", k=3, scenario=sc, **{"vote": "value", **kw})


def test_a_cooldown_plays_the_fallback_after_a_switch_and_restarts_on_reset(tmp_path) -> None:
    from types import SimpleNamespace

    from ainet_gym.agents.imitate import KnnAgent, fit_knn, label_player, load_knn

    # one labelled decision per plan row: the nearest decision's best plan is played (k = 1)
    sc = _small()
    core = EnvCore(sc, action_mode="choose_bg", obs_features=("phase",))
    sl = core.obs_layout["job_phase"]
    obs = np.zeros((2, sl.stop), dtype=np.float32)
    obs[1, sl.start + 1] = 1.0
    scores = np.array([[0.0, 1.0, 0.0, 2.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 3.0, 0.0]])
    labels = {
        "scores": scores, "excess": np.zeros_like(scores), "label": np.array([3, 4]), "seed": np.array([1, 1]),
        "meta": np.array(["imitate-small", "choose_bg", "phase", "4", "6", "spray+bg", "8", "util", "0.0", "inf"]),
        "plans": np.array(["ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"]), "obs": obs,
    }  # fmt: skip
    view = SimpleNamespace(obs_layout=core.obs_layout)
    path = fit_knn(labels, tmp_path / "c.npz", k=1, scenario=sc, vote="value", cooldown=2)
    agent = KnnAgent(str(path))
    assert load_knn(path)["cooldown"] == (2, 1)  # two steps of spray+bg (plan 1)
    played = [agent.act(view, obs).tolist() for _ in range(5)]
    assert played == [[3, 4], [1, 1], [1, 1], [3, 4], [1, 1]]
    agent.reset(core)  # a new batch of episodes: no cooldown left
    assert agent.act(view, obs[:1]).tolist() == [3]
    margined = fit_knn(
        labels, tmp_path / "m.npz", k=1, scenario=sc, vote="value", margin=0.5, fallback="ecmp", cooldown=1
    )
    agent = KnnAgent(str(margined))
    assert [agent.act(view, obs).tolist() for _ in range(3)] == [
        [3, 4],
        [0, 0],
        [3, 4],
    ]  # the margin's fallback
    assert KnnAgent(str(fit_knn(labels, tmp_path / "n.npz", k=1, scenario=sc, vote="value"))).cooldown == 0
    with pytest.raises(ValueError, match="cooldown = -1"):
        fit_knn(labels, tmp_path / "bad.npz", k=1, scenario=sc, vote="value", cooldown=-1)
    with pytest.raises(ValueError, match="keeps state per episode"):
        label_player(str(path), sc, "choose_bg", ("phase",))


def test_knn_policy_evaluates_as_a_learned_policy_of_its_class(tmp_path) -> None:
    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.imitate import KnnAgent, fit_knn

    sc = _small()
    lab = lookahead_labels(sc, [3, 4], h=2)
    path = fit_knn(lab, tmp_path / "knn", k=1, scenario=sc)
    agent = KnnAgent(str(path))
    assert agent.env_kwargs == {"action_mode": "choose_bg", "history": 4, "obs_features": ("phase",)}
    core = EnvCore(sc, batch=len(lab["label"]), action_mode="choose_bg", obs_features=("phase",))
    block = lab["obs"][:, core.obs_layout["job_phase"]]
    got = agent.act(core, lab["obs"])  # k = 1: a label of a labelled decision at distance 0
    for i, g in enumerate(got):
        assert g in lab["label"][(block == block[i]).all(axis=1)]
    out = evaluate(EvalConfig(sc, policies=[f"knn:{path}", "spray+bg"], seeds=[1, 2], out=None))
    assert out["policies"][f"knn:{path}"]["controls"] == "jobs+bg"


# ---------------------------------------------------------------------- knn policy files: checked, never run


class _Evil:
    """Unpickling this runs ``touch MARKER``."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize(
    ("change", "must"),
    [
        (lambda a: a.pop("y"), "no field y"),
        (lambda a: a.update(x=np.zeros(3)), "field 'x' is a 1-d"),
        (lambda a: a.update(x=np.zeros((3, 2), dtype=np.int64)), "field 'x' is a 2-d int64"),
        (lambda a: a.update(y=np.array([1, 1])), "'x' has 3 rows and 'y' 2"),
        (lambda a: a.update(y=np.array([1, 1, 6])), "labels 1..6; allowed: 0..5"),
        (lambda a: a.update(y=np.array([1.0, 1.0, 3.0])), "field 'y' is a 1-d float64"),
        (lambda a: a.update(k=np.int64(0)), "field 'k' = 0"),
        (lambda a: a.update(x=np.array([[0.0, np.nan], [0, 1], [5, 5]])), "non-finite"),
        (lambda a: a.update(meta=np.array(["s", "choose_bg", "phase", "four", "8"])), "field 'meta'"),
        (lambda a: a.update(plans=np.array([], dtype=str)), "field 'plans' is empty"),
        (lambda a: a.update(q=np.zeros((3, 5))), "field 'q' is a 2-d float64 array of shape (3, 5)"),
        (lambda a: a.update(q=np.zeros((3, 6), dtype=np.int64)), "field 'q' is a 2-d int64"),
        (lambda a: a.update(q=np.full((3, 6), 0.5)), "field 'q' holds non-finite or positive"),
        (lambda a: a.update(margin=np.float64(0.1), fallback=np.array("1")), "field 'margin' without 'q'"),
        (
            lambda a: a.update(q=np.zeros((3, 6)), margin=np.float64(0.1)),
            "field fallback missing beside margin",
        ),
        (
            lambda a: a.update(q=np.zeros((3, 6)), margin=np.float64(-1), fallback=np.array("1")),
            "'margin' = -1.0",
        ),
        (
            lambda a: a.update(q=np.zeros((3, 6)), margin=np.zeros(2), fallback=np.array("1")),
            "'margin' is a 1-d",
        ),
        (
            lambda a: a.update(q=np.zeros((3, 6)), margin=np.float64(0.1), fallback=np.array("9")),
            "'fallback' = '9'",
        ),
        (lambda a: a.update(vote_plans=np.array(["spray+bg"])), "field 'vote_plans' without 'q'"),
        (lambda a: a.update(q=np.zeros((3, 6)), vote_plans=np.array([1])), "'vote_plans' is a 1-d int64"),
        (lambda a: a.update(q=np.zeros((3, 6)), vote_plans=np.array(["9", "9"])), "one or more distinct"),
        (lambda a: a.update(q=np.zeros((3, 6)), vote_plans=np.array(["9"])), "'vote_plans' = '9'"),
        (lambda a: a.update(cooldown=np.int64(0)), "field 'cooldown' is a 0-d int64"),
        (lambda a: a.update(cooldown=np.array([1])), "field 'cooldown' is a 1-d"),
        (
            lambda a: a.update(cooldown=np.int64(1), plans=np.array(["0", "1", "2", "3", "4", "5"])),
            "cooldown plan",
        ),
        (lambda a: a.update(fabric=np.array(["fab1-0"])), "field 'fabric' is a 1-d"),
        (lambda a: a.update(fabric=np.array("")), "allowed: a 0-d non-empty string"),
        (lambda a: a.update(**{"ainet_gym.json": np.array("[1, 2]")}), "is not a JSON object"),
        (lambda a: a.update(**{"ainet_gym.json": np.array("{")}), "is not JSON"),
    ],
)
def test_a_knn_file_is_checked_field_by_field(refused_model_file, knn_arrays, change, must) -> None:
    from ainet_gym.agents.imitate import KnnAgent, load_knn

    refused_model_file(knn_arrays, load_knn, KnnAgent, change, must)


@pytest.mark.parametrize(("kind", "made", "field"), [("knn", "labelled", "x"), ("qnet", "fitted", "mean")])
def test_a_plan_model_refuses_an_env_it_was_not_made_for(
    tmp_path, request, refuses_other_envs, kind, made, field
):
    from ainet_gym.agents.registry import make_agent

    path = tmp_path / f"{kind}.npz"
    np.savez(path, **request.getfixturevalue(f"{kind}_arrays")())
    refuses_other_envs(make_agent(f"{kind}:{path}"), f"{kind}:{path}", made, field, 2)


def test_a_knn_file_with_a_pickle_is_refused_and_never_runs(tmp_path, knn_arrays) -> None:
    from ainet_gym.agents.imitate import load_knn
    from ainet_gym.agents.model_files import ModelFileError

    marker = tmp_path / "pwned"
    a = knn_arrays()
    a["x"] = np.array([_Evil(str(marker))], dtype=object)
    np.savez(tmp_path / "evil.npz", **a)  # np.savez pickles an object array
    with pytest.raises(ModelFileError, match="refusing an object"):
        load_knn(tmp_path / "evil.npz")
    assert not marker.exists()
    (tmp_path / "not.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match=r"not an \.npz archive"):
        load_knn(tmp_path / "not.npz")


def test_a_knn_policy_exported_as_pretrained_is_listed_and_played(tmp_path, monkeypatch) -> None:
    import ainet_gym.pretrained as shipped
    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.imitate import fit_knn
    from ainet_gym.agents.pretrained import KNN_ALGORITHM, export_knn

    sc = _small()
    lab = lookahead_labels(sc, [3, 4], h=2)
    src = fit_knn(lab, tmp_path / "knn.npz", k=1, scenario=sc)
    folder = tmp_path / "shipped"
    cmds = [
        "python -m ainet_gym.agents.imitate label imitate-small",
        "python -m ainet_gym.agents.imitate knn x",
    ]
    with pytest.raises(ValueError, match="labelled on scenario 'imitate-small', not 'other'"):
        export_knn(src, "other", cmds, 0, folder / "other.npz")
    dst = export_knn(src, "imitate-small", cmds, 7, folder / "imitate-small.npz")
    monkeypatch.setattr(shipped, "PRETRAINED_DIR", folder)
    meta = shipped.list_pretrained()["imitate-small"]
    assert meta["algorithm"] == KNN_ALGORITHM and meta["controls"] == "jobs+bg" and meta["training_seed"] == 7
    assert meta["vote"] == "label"
    valued = fit_knn(lab, tmp_path / "v.npz", k=1, scenario=sc, vote="value")
    valued = export_knn(valued, "imitate-small", cmds, 7, tmp_path / "v" / "imitate-small.npz")
    assert shipped.pretrained_metadata(valued)["vote"] == "value"
    assert "margin" not in shipped.pretrained_metadata(valued)
    margined = fit_knn(lab, tmp_path / "m.npz", k=1, scenario=sc, vote="value", margin=0.5, fallback="ecmp")
    margined = export_knn(margined, "imitate-small", cmds, 7, tmp_path / "m" / "imitate-small.npz")
    mm = shipped.pretrained_metadata(margined)
    assert mm["margin"] == 0.5 and mm["fallback"] == "ecmp" and "vote_plans" not in mm
    voted = fit_knn(
        lab, tmp_path / "p.npz", k=1, scenario=sc, vote="value", vote_plans=["greedy+bg", "spray+bg"]
    )
    voted = export_knn(voted, "imitate-small", cmds, 7, tmp_path / "p" / "imitate-small.npz")
    assert shipped.pretrained_metadata(voted)["vote_plans"] == ["spray+bg", "greedy+bg"]
    assert (
        meta["commands"] == cmds and meta["command"] == cmds[-1] and meta["size_bytes"] == dst.stat().st_size
    )
    assert shipped.pretrained_path("imitate-small") == dst
    out = evaluate(EvalConfig(sc, policies=["pretrained", f"knn:{src}"], seeds=[1, 2], steps=6, out=None))
    p, k = out["policies"]["pretrained"], out["policies"][f"knn:{src}"]
    assert p["controls"] == "jobs+bg" and p["learned"]
    assert p["gpu_utilization"] == k["gpu_utilization"]  # the same policy, played through `pretrained`
    (folder / "imitate-small.zip").write_bytes(b"")
    with pytest.raises(ValueError, match="2 shipped policies"):
        shipped.pretrained_path("imitate-small")


@pytest.mark.parametrize(
    ("scenario", "vote"),
    [
        ("spine-leaf-2to1-jitter", "value"),
        ("spine-leaf-3to1-bundle-jitter", "value"),
        ("spine-leaf-4to1-200g-jitter", "value"),
        ("spine-leaf-4to1-jitter", "value"),
        ("dual-plane-4to1-dp-jitter", "value"),
    ],
)
def test_the_shipped_knn_policy_records_how_it_was_made_and_plays_its_file(scenario, vote) -> None:
    # the shipped file is played by `pretrained` exactly as `knn:PATH` plays it, and its record names the
    # algorithm, class, training seed and the commands (labels, then the fit) that made it
    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.imitate import load_knn
    from ainet_gym.pretrained import list_pretrained, pretrained_path

    p = pretrained_path(scenario)
    assert p is not None and p.suffix == ".npz"
    meta = list_pretrained()[scenario]
    z = load_knn(p)
    assert meta == {**z["metadata"], "size_bytes": p.stat().st_size, "file": p.name}
    assert meta["algorithm"] == "knn-imitation" and meta["controls"] == "jobs+bg"
    assert isinstance(meta["training_seed"], int) and meta["k"] == z["k"] and meta["plans"] == z["plans"]
    assert meta["commands"][0].startswith(f"python -m ainet_gym.agents.imitate label {scenario} ")
    # a value vote is recorded and carries its values; a label vote carries none
    assert meta.get("vote", "label") == vote and (z["q"] is not None) == (vote == "value")
    assert meta["command"] == meta["commands"][-1]
    assert meta["command"].startswith("python -m ainet_gym.agents.imitate knn ")
    pols = ["pretrained", f"knn:{p}"]
    out = evaluate(EvalConfig(scenario, policies=pols, seeds=[3], steps=8, out=None))
    assert out["policies"]["pretrained"]["gpu_utilization"] == out["policies"][f"knn:{p}"]["gpu_utilization"]


def test_knn_blocks_are_recorded_and_joined_and_the_default_reads_job_phase_only(tmp_path) -> None:
    from types import SimpleNamespace

    from ainet_gym.agents.imitate import KnnAgent, fit_knn, knn_columns, load_knn

    sc = _small()
    lab = lookahead_labels(sc, [3], h=2)
    core = EnvCore(sc, batch=len(lab["label"]), action_mode="choose_bg", obs_features=("phase",))
    lay = core.obs_layout
    assert "background" in lay and lay["background"].stop > lay["background"].start
    default = load_knn(fit_knn(lab, tmp_path / "a.npz", k=1, scenario=sc))
    assert default["block"] == "job_phase"
    np.testing.assert_array_equal(default["x"], lab["obs"][:, lay["job_phase"]].astype(np.float32))
    both = load_knn(fit_knn(lab, tmp_path / "b.npz", k=1, block="job_phase,background", scenario=sc))
    assert both["block"] == "job_phase,background"
    want = np.concatenate([lab["obs"][:, lay["job_phase"]], lab["obs"][:, lay["background"]]], axis=1)
    np.testing.assert_array_equal(both["x"], want.astype(np.float32))
    agent = KnnAgent(str(tmp_path / "b.npz"))
    agent.check(core)
    got = agent.act(core, lab["obs"])  # k = 1: a label of a decision at distance 0 in both blocks
    for i, g in enumerate(got):
        assert g in lab["label"][(want == want[i]).all(axis=1)]
    # the columns by hand: blocks joined in the order given; one block is its slice, as before
    layout = {"job_phase": slice(1, 3), "background": slice(4, 5)}
    assert knn_columns(layout, "job_phase") == slice(1, 3)
    np.testing.assert_array_equal(knn_columns(layout, "background,job_phase"), [4, 1, 2])
    for bad in ("", "job_phase,job_phase", "job_phase,nope"):
        with pytest.raises(ValueError, match="block = "):
            knn_columns(layout, bad)
    with pytest.raises(ValueError, match="block = "):
        fit_knn(lab, tmp_path / "c.npz", block="job_phase,nope", scenario=sc)
    # a file of two blocks acts on the joined columns: nearest (0, 1 | 1) -> 2, not (0, 1 | 0) -> 5
    np.savez(
        tmp_path / "h.npz", x=np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 1.0]]), y=np.array([5, 2]), k=np.int64(1),
        block=np.array("job_phase,background"), plans=np.arange(6).astype(str),
        meta=np.array(["s", "choose_bg", "phase", "4", "8", "spray+bg", "8"]),
    )  # fmt: skip
    hand = KnnAgent(str(tmp_path / "h.npz"))
    obs = np.array([[9.0, 0.0, 1.0, 9.0, 1.0], [9.0, 0.0, 1.0, 9.0, 0.0]])
    np.testing.assert_array_equal(hand.act(SimpleNamespace(obs_layout=layout), obs), [2, 5])


def test_knn_standardize_weighs_every_column_alike_and_the_default_reads_raw_columns(tmp_path) -> None:
    from types import SimpleNamespace

    from ainet_gym.agents.imitate import KnnAgent, fit_knn, load_knn
    from ainet_gym.agents.model_files import ModelFileError

    sc = _small()
    core = EnvCore(sc, action_mode="choose_bg", obs_features=("phase",))
    lay = core.obs_layout
    sl = lay["job_phase"]
    # two decisions, (0, 0) -> plan 1 and (1, 0.1) -> plan 3 in job_phase's first two columns (the others
    # constant): spreads 0.5 and 0.05, so column 1 weighs ten times less in the raw distance
    obs = np.zeros((2, sl.stop), dtype=np.float32)
    obs[1, sl.start : sl.start + 2] = [1.0, 0.1]
    labels = {
        "obs": obs, "label": np.array([1, 3]), "seed": np.ones(2, dtype=np.int64),
        "meta": np.array(["imitate-small", "choose_bg", "phase", "4", "6", "spray+bg", "8"]),
        "plans": np.array(["ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"]),
    }  # fmt: skip
    raw = load_knn(fit_knn(labels, tmp_path / "raw.npz", k=1, scenario=sc))
    assert raw["scale"] is None  # the default: raw columns, as every older file
    std = load_knn(fit_knn(labels, tmp_path / "std.npz", k=1, scenario=sc, standardize=True))
    want = np.ones(sl.stop - sl.start)
    want[:2] = [0.5, 0.05]  # population standard deviations; constant columns keep 1
    np.testing.assert_allclose(std["scale"], want, rtol=1e-6)
    np.testing.assert_allclose(std["x"][1, :2], [2.0, 2.0], rtol=1e-6)
    view = SimpleNamespace(obs_layout=lay)
    a_raw, a_std = KnnAgent(str(tmp_path / "raw.npz")), KnnAgent(str(tmp_path / "std.npz"))
    q = np.zeros((2, sl.stop))
    q[0, sl.start : sl.start + 2] = [0.9, 0.0]  # raw: (1, 0.1) at 0.14, (0, 0) at 0.9 -> 3
    q[1, sl.start : sl.start + 2] = [1.0, 0.1]  # the second decision itself -> 3 either way
    # standardised: (1.8, 0) is 1.8 from (0, 0) and 2.01 from (2, 2) -> 1; (2, 2) is the second decision
    np.testing.assert_array_equal(a_raw.act(view, q), [3, 3])
    np.testing.assert_array_equal(a_std.act(view, q), [1, 3])
    # the field is checked: one positive finite float per column of x
    arrays = dict(np.load(tmp_path / "std.npz", allow_pickle=False))
    for bad, must in ((np.ones(3), "shape (3,)"), (np.zeros_like(want), "non-positive")):
        np.savez(tmp_path / "bad.npz", **{**arrays, "scale": bad})
        with pytest.raises(ModelFileError, match="field 'scale'") as e:
            KnnAgent(str(tmp_path / "bad.npz"))
        assert must in str(e.value)


def test_imitate_commands_never_replace_a_file_unasked(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The output rule of the ainet-gym commands holds for ``python -m ainet_gym.agents.imitate``: an existing
    ``--out`` (also given without its suffix) is refused in one line naming the flag and the path and left as
    it was; a label file read is never the output, even with ``--overwrite``."""
    from ainet_gym.agents.imitate import main

    labels = tmp_path / "train.npz"
    labels.write_bytes(b"labels")
    old = tmp_path / "policy.npz"
    old.write_bytes(b"keep me")
    for cmd, out in (("knn", old), ("qfit", old), ("knn", tmp_path / "policy")):
        assert main([cmd, str(labels), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "--out" in err and "policy.npz" in err and "--overwrite" in err, err
        assert old.read_bytes() == b"keep me"
    assert main(["knn", str(labels), "--out", str(labels), "--overwrite"]) == 2
    assert "input" in capsys.readouterr().err
    assert labels.read_bytes() == b"labels"
    (tmp_path / "model.zip").write_bytes(b"model")
    assert main(["clone", str(labels), "--out", str(tmp_path / "model")]) == 2
    assert "model.zip" in capsys.readouterr().err


def test_knn_of_labels_made_on_a_yaml_scenario_takes_it_with_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Labels record their scenario's name; a scenario that is not shipped (a YAML copy, e.g. with another
    ``routing.reroute``) cannot be found by that name, so ``knn`` refuses it in one line naming it, and
    ``--scenario PATH`` fits the same policy the Python API fits from that scenario."""
    import yaml

    from ainet_gym.agents.imitate import fit_knn, load_knn, main

    sc = _small()
    path = tmp_path / "copy.yaml"
    path.write_text(yaml.safe_dump(sc))
    labels = tmp_path / "lab.npz"
    assert main(["label", str(path), "--seeds", "3-4", "--h", "2", "--out", str(labels)]) == 0
    capsys.readouterr()
    assert main(["knn", str(labels), "--k", "1", "--out", str(tmp_path / "no.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "imitate-small" in err, err
    assert (
        main(["knn", str(labels), "--k", "1", "--scenario", str(path), "--out", str(tmp_path / "k.npz")]) == 0
    )
    cli = load_knn(tmp_path / "k.npz")
    api = load_knn(fit_knn(dict(np.load(labels)), tmp_path / "api.npz", k=1, scenario=sc))
    assert np.array_equal(cli["x"], api["x"]) and np.array_equal(cli["y"], api["y"])


def test_knn_command_tail_cap_fits_the_values_the_api_fits(tmp_path: Path) -> None:
    """``knn --vote value --tail-cap C --tail-penalty V`` writes the ``q`` of :func:`fit_knn` with the same cap and
    penalty (labels of a real lookahead, so their ``tail`` and base plan are the lookahead's)."""
    import yaml

    from ainet_gym.agents.imitate import fit_knn, load_knn, main

    sc = _small()
    path = tmp_path / "copy.yaml"
    path.write_text(yaml.safe_dump(sc))
    labels = tmp_path / "lab.npz"
    assert main(["label", str(path), "--seeds", "3-4", "--h", "2", "--out", str(labels)]) == 0
    args = ["knn", str(labels), "--k", "2", "--scenario", str(path), "--vote", "value", "--value-weight", "0"]
    assert main([*args, "--tail-cap", "1.01", "--tail-penalty", "30", "--out", str(tmp_path / "c.npz")]) == 0
    lab = dict(np.load(labels))
    api = fit_knn(lab, tmp_path / "a.npz", k=2, scenario=sc, vote="value", value_weight=0.0, tail_cap=1.01,
                  tail_penalty=30.0)  # fmt: skip
    np.testing.assert_array_equal(load_knn(tmp_path / "c.npz")["q"], load_knn(api)["q"])
    assert (
        main([*args[:-4], "--tail-cap", "1.01", "--out", str(tmp_path / "l.npz")]) == 2
    )  # label vote: refused
    assert (
        main([*args, "--tail-cap", "1.01", "--out", str(tmp_path / "h.npz")]) == 2
    )  # a cap without a penalty


# ---------------------------------------------------------------------- the previous_plan block (issue-26zp)


def _previous_plan_labels() -> tuple[dict, EnvCore]:
    """Two episodes of two decisions: the first decisions differ (their plans 3 and 5 are played), the second
    ones have the same observation and are labelled 4 after plan 3, 2 after plan 5."""
    sc = _small()
    core = EnvCore(sc, action_mode="choose_bg", obs_features=("phase",))
    sl = core.obs_layout["job_phase"]
    obs = np.zeros((4, sl.stop), dtype=np.float32)
    obs[0, sl.start] = 1.0  # episode 1, t = 0
    obs[2, sl.start] = 2.0  # episode 2, t = 0
    obs[[1, 3], sl.start + 1] = 5.0  # t = 1: the same state in both episodes
    labels = {
        "obs": obs, "label": np.array([3, 4, 5, 2]), "played": np.array([3, 4, 5, 2]),
        "seed": np.array([1, 1, 2, 2]), "t": np.array([0, 1, 0, 1]),
        "meta": np.array(["imitate-small", "choose_bg", "phase", "4", "6", "spray+bg", "8"]),
        "plans": np.array(["ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"]),
    }  # fmt: skip
    return labels, core


def test_previous_plans_and_their_one_hot_by_hand() -> None:
    from ainet_gym.agents.imitate import plan_one_hot, previous_plans

    labels, _ = _previous_plan_labels()
    np.testing.assert_array_equal(previous_plans(labels), [-1, 3, -1, 5])
    # a DAgger file: the plan played, not the label; an episode cut (t not one more) has no previous plan
    dag = {**labels, "played": np.array([1, 4, 0, 2]), "t": np.array([0, 1, 0, 2])}
    np.testing.assert_array_equal(previous_plans(dag), [-1, 1, -1, -1])
    np.testing.assert_array_equal(plan_one_hot(np.array([-1, 2]), 3, 0.5), [[0, 0, 0], [0, 0, 0.5]])
    with pytest.raises(ValueError, match="no played"):
        previous_plans({k: v for k, v in labels.items() if k != "played"})


def test_the_previous_plan_block_tells_apart_states_identical_but_the_previous_plan(tmp_path) -> None:
    from types import SimpleNamespace

    from ainet_gym.agents.imitate import KnnAgent, fit_knn, load_knn

    labels, core = _previous_plan_labels()
    sc = _small()
    view = SimpleNamespace(obs_layout=core.obs_layout)
    block = "job_phase,previous_plan"
    path = fit_knn(labels, tmp_path / "p.npz", k=1, block=block, scenario=sc, previous_plan_scale=0.5)
    z = load_knn(path)
    width = core.obs_layout["job_phase"].stop - core.obs_layout["job_phase"].start
    assert z["block"] == block and z["previous_plan"] == 0.5 and z["x"].shape == (4, width + 6)
    np.testing.assert_array_equal(z["x"][:, width:][[1, 3]], [[0, 0, 0, 0.5, 0, 0], [0, 0, 0, 0, 0, 0.5]])
    assert not z["x"][[0, 2], width:].any()  # first decisions: no previous plan
    agent = KnnAgent(str(path))
    agent.check(core)
    first, second = labels["obs"][[0, 2]], labels["obs"][[1, 3]]
    assert agent.act(view, first).tolist() == [3, 5]  # each episode's first decision, as labelled
    assert agent.act(view, second).tolist() == [4, 2]  # the same state: the label after its own previous plan
    agent.reset(core)
    agent.act(view, first[::-1])  # plays 5, 3: the previous plans swap, and so do the plans
    assert agent.act(view, second).tolist() == [2, 4]
    # without the block (an older file's fit): the same state gets the same plan whatever came before
    old = KnnAgent(str(fit_knn(labels, tmp_path / "o.npz", k=1, scenario=sc)))
    assert old.prev_scale is None and load_knn(tmp_path / "o.npz")["previous_plan"] is None
    old.act(view, first)
    a = old.act(view, second).tolist()
    old.act(view, first[::-1])
    assert old.act(view, second).tolist() == a and a[0] == a[1]
    # standardised: the one-hot columns keep their scale
    std = load_knn(fit_knn(labels, tmp_path / "s.npz", k=1, block=block, scenario=sc, standardize=True))
    assert std["previous_plan"] == 1.0 and (std["scale"][width:] == 1.0).all()
    assert KnnAgent(str(tmp_path / "s.npz")).act(view, first).tolist() == [3, 5]


@pytest.mark.parametrize(
    ("kw", "must"),
    [
        ({"block": "job_phase", "previous_plan_scale": 1.0}, "without the block 'previous_plan'"),
        ({"block": "previous_plan"}, "beside one or more blocks"),
        ({"block": "job_phase,previous_plan,previous_plan"}, "'previous_plan' once"),
        ({"block": "job_phase,previous_plan", "previous_plan_scale": 0.0}, "previous_plan_scale = 0.0"),
    ],
)
def test_a_bad_previous_plan_option_is_refused_by_name(tmp_path, kw, must) -> None:
    from ainet_gym.agents.imitate import fit_knn

    labels, _ = _previous_plan_labels()
    with pytest.raises(ValueError, match=must):
        fit_knn(labels, tmp_path / "x.npz", k=1, scenario=_small(), **kw)


def test_a_previous_plan_file_is_checked(tmp_path) -> None:
    from ainet_gym.agents.imitate import KnnAgent, fit_knn
    from ainet_gym.agents.model_files import ModelFileError

    labels, _ = _previous_plan_labels()
    path = fit_knn(labels, tmp_path / "p.npz", k=1, block="job_phase,previous_plan", scenario=_small())
    arrays = dict(np.load(path, allow_pickle=False))
    for change, must in (
        ({"block": np.array("job_phase")}, "both or neither"),
        ({"previous_plan": np.float64(-1.0)}, "field 'previous_plan'"),
        ({"x": arrays["x"][:, :6]}, "more than the 6 plans"),
    ):
        np.savez(tmp_path / "bad.npz", **{**arrays, **change})
        with pytest.raises(ModelFileError, match=must.replace("(", r"\(")):
            KnnAgent(str(tmp_path / "bad.npz"))
    arrays.pop("previous_plan")
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ModelFileError, match="both or neither"):
        KnnAgent(str(tmp_path / "bad.npz"))


def test_a_previous_plan_student_plays_the_same_in_labels_evaluate_and_pretrained(tmp_path) -> None:
    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.imitate import KnnAgent, fit_knn, label_player
    from ainet_gym.agents.pretrained import export_knn
    from ainet_gym.pretrained import pretrained_metadata

    sc = _small()
    lab = lookahead_labels(sc, [3, 4], h=2)
    path = fit_knn(lab, tmp_path / "p.npz", k=1, block="job_phase,previous_plan", scenario=sc, vote="value")
    play = label_player(str(path), sc, "choose_bg", ("phase",))
    first = lookahead_labels(sc, [5, 6], h=2, policy=play)
    again = lookahead_labels(sc, [5, 6], h=2, policy=play)  # the player starts each batch afresh
    np.testing.assert_array_equal(first["played"], again["played"])
    agent, core = KnnAgent(str(path)), EnvCore(sc, batch=2, action_mode="choose_bg", obs_features=("phase",))
    obs, _ = core.reset([5, 6])
    agent.reset(core)
    played = []
    for _ in range(core.episode_steps):
        a = agent.act(core, obs)
        played.append(a)
        obs, *_ = core.step(a)
    np.testing.assert_array_equal(np.stack(played, axis=1).reshape(-1), first["played"])
    out = evaluate(EvalConfig(sc, policies=[f"knn:{path}"], seeds=[5, 6], out=None))
    assert out["policies"][f"knn:{path}"]["gpu_utilization"]["mean"] == pytest.approx(
        first["gpu_utilization"].mean(), rel=1e-12
    )
    dst = export_knn(path, "imitate-small", ["label", "knn"], 0, tmp_path / "x" / "imitate-small.npz")
    assert pretrained_metadata(dst)["previous_plan_scale"] == 1.0


def test_label_reads_its_scenario_once_so_an_edit_between_batches_does_not_mix_fabrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``label --batch 1`` over two seeds while the scenario file is edited after the first batch (here: the
    uplinks' capacity halved) labels the second episode on the fabric it started with: its arrays equal a run of
    that seed alone on the unedited file (issue-26ze2: a run re-read the file per batch and mixed one batch
    labelled on an edited edges file into its labels)."""
    import yaml

    import ainet_gym.agents.imitate.cli as cli
    from ainet_gym.agents.imitate import main

    sc = _small()
    path = tmp_path / "copy.yaml"
    path.write_text(yaml.safe_dump(sc))
    alone = tmp_path / "alone.npz"
    assert main(["label", str(path), "--seeds", "4", "--h", "2", "--out", str(alone)]) == 0
    edited = yaml.safe_load(path.read_text())
    edited["fabric"]["uplink_gbps"] = edited["fabric"]["uplink_gbps"] / 2
    real = cli.lookahead_labels

    def label_then_edit(*args: object, **kw: object) -> dict:
        out = real(*args, **kw)
        path.write_text(yaml.safe_dump(edited))
        return out

    monkeypatch.setattr(cli, "lookahead_labels", label_then_edit)
    both = tmp_path / "both.npz"
    assert main(["label", str(path), "--seeds", "3-4", "--batch", "1", "--h", "2", "--out", str(both)]) == 0
    a, b = np.load(alone), np.load(both)
    T = a["label"].shape[0]
    for key in ("obs", "scores", "label", "reward"):
        np.testing.assert_array_equal(b[key][T:], a[key], err_msg=key)
    # and the edit is one the labels would show: the edited file alone labels that episode otherwise
    again = tmp_path / "again.npz"
    assert main(["label", str(path), "--seeds", "4", "--h", "2", "--out", str(again)]) == 0
    assert not np.array_equal(np.load(again)["scores"], a["scores"])


# ---------------------------------------------------------------------- the fabric fingerprint (issue-26zf2)


def test_the_fabric_fingerprint_changes_with_a_link_capacity_not_with_the_seed_or_the_workload(
    tmp_path: Path,
) -> None:
    base = _fingerprint(_graph_scenario(tmp_path / "base"))
    assert base.startswith("fab1-") and len(base) == 21
    same = {
        "seed": _graph_scenario(tmp_path / "seed", seed=7),
        "workload": _graph_scenario(tmp_path / "work", compute_ms=35),
        "line order": _graph_scenario(tmp_path / "order", edges=_EDGES[:4] + _EDGES[4:][::-1]),
    }
    for what, path in same.items():
        assert _fingerprint(path) == base, what
    from dataclasses import replace

    from ainet_gym.fabric.topology import build_fabric, fabric_fingerprint
    from ainet_gym.scenario.spec import FabricSpec

    # link_efficiency is a modelling constant, not the fabric (crosscheck replays at the TCP header efficiency)
    spec = FabricSpec(leaves=2, spines=2, hosts_per_leaf=1)
    assert fabric_fingerprint(build_fabric(spec)) == fabric_fingerprint(
        build_fabric(replace(spec, link_efficiency=0.9))
    )
    edited = [e.replace("gbps=100", "gbps=200") if e.startswith("l0 s1") else e for e in _EDGES]
    other = {
        "one link's capacity": _graph_scenario(tmp_path / "cap", edges=edited),
        "one link's latency": _graph_scenario(
            tmp_path / "lat", edges=[*_EDGES[:-1], _EDGES[-1] + " latency_us=2"]
        ),
        "one link less": _graph_scenario(tmp_path / "less", edges=_EDGES[:-1]),
    }
    for what, path in other.items():
        assert _fingerprint(path) != base, what


def test_label_files_of_two_fabrics_are_refused_naming_both_and_one_fabric_is_joined(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Two ``label`` runs on one scenario, the second after its edges file's ``l0-s1`` link went from 100G to
    200G (issue-26ze2's mixed batch): ``knn`` and :func:`concat_labels` refuse the pair in one line naming both
    files and both fingerprints; two runs on the unedited file (other seeds) are joined and the knn file
    carries their fingerprint."""
    from ainet_gym.agents.imitate import load_knn, main
    from ainet_gym.agents.imitate.label_files import concat_labels, load_labels

    path = _graph_scenario(tmp_path / "sc")
    a, b, c = (tmp_path / f"{n}.npz" for n in "abc")
    for seeds, out in (("1", a), ("2", b)):
        assert main(["label", str(path), "--seeds", seeds, "--h", "1", "--out", str(out)]) == 0
    before = _fingerprint(path)
    edges = path.parent / "f.edges"
    edges.write_text(edges.read_text().replace("l0 s1 gbps=100", "l0 s1 gbps=200"))
    assert main(["label", str(path), "--seeds", "2", "--h", "1", "--out", str(c)]) == 0
    after = _fingerprint(path)
    assert before != after
    assert (
        str(np.load(a)["fabric"]) == str(np.load(b)["fabric"]) == before
        and str(np.load(c)["fabric"]) == after
    )
    capsys.readouterr()
    knn = ["knn", "--k", "1", "--scenario", str(path)]
    assert main([knn[0], f"{a},{c}", *knn[1:], "--out", str(tmp_path / "mixed.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "field 'fabric'" in err, err
    for must in (before, after, str(a), str(c)):
        assert must in err, (must, err)
    assert not (tmp_path / "mixed.npz").exists()
    with pytest.raises(ValueError, match=f"{before}.*{after}"):
        concat_labels([load_labels(a), load_labels(c)], sources=[str(a), str(c)])
    with pytest.raises(ValueError, match=f"{after}.*{before}"):  # in either order, also a third file
        concat_labels([load_labels(x) for x in (c, c, a)])
    # one fabric, but fitted with --scenario the edited file: refused at the fit, naming both fingerprints
    assert main([knn[0], f"{a},{b}", *knn[1:], "--out", str(tmp_path / "one.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "field 'fabric'" in err and before in err and after in err, err
    assert not (tmp_path / "one.npz").exists()
    # one fabric and its own scenario: joined, and the fingerprint goes with the labels into the knn file
    edges.write_text(edges.read_text().replace("l0 s1 gbps=200", "l0 s1 gbps=100"))
    assert _fingerprint(path) == before
    assert str(concat_labels([load_labels(a), load_labels(b)])["fabric"]) == before
    assert main([knn[0], f"{a},{b}", *knn[1:], "--out", str(tmp_path / "one.npz")]) == 0
    assert load_knn(tmp_path / "one.npz")["fabric"] == before


def test_a_knn_file_plays_only_on_its_labels_fabric_and_an_old_file_anywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``knn:PATH`` (evaluate) and DAgger's ``label --policy`` refuse a knn file whose labels were made on
    another fabric, in one line naming the field, both fingerprints and what to do; label and knn files of
    before the field (no ``fabric``) still load, join with any and play on any fabric, unchecked."""
    from ainet_gym.agents.imitate import KnnAgent, fit_knn, load_knn, main
    from ainet_gym.agents.imitate.label_files import concat_labels, load_labels
    from ainet_gym.cli import main as cli_main

    path = _graph_scenario(tmp_path / "sc")
    lab = tmp_path / "lab.npz"
    assert main(["label", str(path), "--seeds", "1", "--h", "1", "--out", str(lab)]) == 0
    pol = tmp_path / "pol.npz"
    assert main(["knn", str(lab), "--k", "1", "--scenario", str(path), "--out", str(pol)]) == 0
    before = load_knn(pol)["fabric"]
    dagger = ["label", str(path), "--seeds", "2", "--h", "1", "--policy", str(pol)]
    assert main([*dagger, "--out", str(tmp_path / "d0.npz")]) == 0  # its own fabric: played
    edges = path.parent / "f.edges"
    edges.write_text(edges.read_text().replace("l0 s1 gbps=100", "l0 s1 gbps=200"))
    after = _fingerprint(path)
    capsys.readouterr()
    assert main([*dagger, "--out", str(tmp_path / "d1.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "field 'fabric'" in err and before in err and after in err, err
    assert "fit the policy again" in err
    ev = ["evaluate", str(path), "--policies", f"knn:{pol}", "--seeds", "1", "--json"]
    assert cli_main(ev) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "field 'fabric'" in err and before in err and after in err, err
    # files of before the field: loaded, joined with either fabric (the join then claims none), played anywhere
    old = tmp_path / "old.npz"
    np.savez(old, **{k: v for k, v in np.load(lab).items() if k != "fabric"})
    labels = load_labels(old)
    assert "fabric" not in labels
    assert "fabric" not in concat_labels([labels, load_labels(lab)])
    unchecked = fit_knn(labels, tmp_path / "old-pol.npz", k=1, scenario=str(path))
    assert load_knn(unchecked)["fabric"] is None
    assert cli_main(["evaluate", str(path), "--policies", f"knn:{unchecked}", "--seeds", "1", "--json"]) == 0
    arrays = {k: v for k, v in np.load(pol).items() if k != "fabric"}
    np.savez(tmp_path / "old-knn.npz", **arrays)
    KnnAgent(str(tmp_path / "old-knn.npz"))  # an old knn file loads
    assert load_knn(tmp_path / "old-knn.npz")["fabric"] is None


# ------------------------------------- the fabric fingerprint of qnet, cloned and trained models (issue-26zh2)


def _one_line_error(capsys: pytest.CaptureFixture, *must: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "field 'fabric'" in err, err
    for m in must:
        assert m in err, (m, err)
    return err


def _without_fabric(src: Path, dst: Path) -> Path:
    """A copy of a policy file of before issue-26zh2: a qnet .npz without the field ``fabric``, an SB3 zip whose
    ``ainet_gym.json`` has no key ``fabric``."""
    import json
    import zipfile

    if src.suffix == ".npz":
        np.savez(dst, **{k: v for k, v in np.load(src).items() if k != "fabric"})
        return dst
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            blob = zin.read(info.filename)
            if info.filename == "ainet_gym.json":
                meta = json.loads(blob)
                del meta["fabric"]
                blob = json.dumps(meta).encode()
            zout.writestr(info.filename, blob)
    return dst


def test_qnet_and_cloned_files_carry_their_labels_fabric_and_refuse_another(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``qfit`` and ``clone`` of labels made on a 4:1 fabric: the qnet file and the model's metadata carry the
    labels' fingerprint; fitting them with ``--scenario`` the 2:1 copy is refused (exit 2, nothing written);
    ``evaluate qnet:``/``ppo:`` and DAgger's ``--policy`` refuse them on the 2:1 copy in one line naming the
    file, both fingerprints and what to do, and play them on their own fabric; the same files without the field
    (written before it) load and play on the 2:1 copy, unchecked."""
    from ainet_gym.agents.imitate import main
    from ainet_gym.agents.qnet import load_qnet
    from ainet_gym.agents.sb3_agents import read_metadata
    from ainet_gym.cli import main as cli_main

    four, two = _two_fabrics(tmp_path)
    fp4, fp2 = _fingerprint(four), _fingerprint(two)
    assert fp4 != fp2
    lab = tmp_path / "lab.npz"
    assert main(["label", str(four), "--seeds", "1", "--h", "1", "--out", str(lab)]) == 0
    assert str(np.load(lab)["fabric"]) == fp4
    fits = {
        "qnet": ["qfit", str(lab), "--hidden", "4", "--epochs", "1", "--out"],
        "ppo": ["clone", str(lab), "--epochs", "1", "--out"],
    }
    files = {}
    for kind, args in fits.items():
        suffix = ".npz" if kind == "qnet" else ".zip"
        bad = tmp_path / f"{kind}-on-2to1{suffix}"
        capsys.readouterr()
        assert main([*args, str(bad), "--scenario", str(two)]) == 2, kind  # refused at the fit
        _one_line_error(capsys, fp4, fp2)
        assert not bad.exists()
        files[kind] = tmp_path / f"{kind}{suffix}"
        assert main([*args, str(files[kind]), "--scenario", str(four)]) == 0, kind
    assert load_qnet(files["qnet"])["fabric"] == fp4
    assert read_metadata(files["ppo"])["fabric"] == fp4
    capsys.readouterr()
    for kind, f in files.items():
        ev = ["evaluate", "--policies", f"{kind}:{f}", "--seeds", "1", "--json"]
        assert cli_main([ev[0], str(two), *ev[1:]]) == 2, kind
        _one_line_error(capsys, f"{kind}:{f}", fp4, fp2, "allowed: the scenario it was")
        dagger = ["label", str(two), "--seeds", "2", "--h", "1", "--policy", str(f), "--out"]
        assert main([*dagger, str(tmp_path / f"d-{kind}.npz")]) == 2, kind
        _one_line_error(capsys, str(f), fp4, fp2)
        assert cli_main([ev[0], str(four), *ev[1:]]) == 0, kind
        old = _without_fabric(f, tmp_path / f"old-{f.name}")
        assert cli_main([ev[0], str(two), "--policies", f"{kind}:{old}", *ev[3:]]) == 0, kind  # unchecked
    assert load_qnet(tmp_path / "old-qnet.npz")["fabric"] is None
    assert "fabric" not in read_metadata(tmp_path / "old-ppo.zip")


def test_a_trained_model_carries_its_scenario_s_fabric_and_a_clone_of_unknown_labels_none(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``ainet-gym train`` saves the fingerprint of its scenario's fabric in the model's metadata, and
    ``evaluate ppo:`` refuses the model on the 2:1 copy; labels without a fingerprint (of before it) clone to a
    model without one, played on either fabric; a metadata ``fabric`` that is not a string is refused by name."""
    import json
    import zipfile

    from ainet_gym.agents.imitate import main
    from ainet_gym.agents.model_files import ModelFileError
    from ainet_gym.agents.sb3_agents import SB3Agent, read_metadata
    from ainet_gym.agents.train import train
    from ainet_gym.agents.train_config import TrainConfig
    from ainet_gym.cli import main as cli_main
    from ainet_gym.envs.env import EnvCore

    four, two = _two_fabrics(tmp_path)
    fp4, fp2 = _fingerprint(four), _fingerprint(two)
    cfg = TrainConfig(
        scenario=str(four), algo="ppo", timesteps=16, n_envs=2, logdir=tmp_path / "runs", progress=False,
        out=tmp_path / "t.zip",
    )  # fmt: skip
    model = train(cfg).model_path
    assert read_metadata(model)["fabric"] == fp4
    capsys.readouterr()
    ev = ["--policies", f"ppo:{model}", "--seeds", "1", "--json"]
    assert cli_main(["evaluate", str(two), *ev]) == 2
    _one_line_error(capsys, f"ppo:{model}", fp4, fp2, "train a model on this fabric")
    assert cli_main(["evaluate", str(four), *ev]) == 0
    lab = tmp_path / "lab.npz"
    assert main(["label", str(four), "--seeds", "1", "--h", "1", "--out", str(lab)]) == 0
    old = tmp_path / "old-lab.npz"
    np.savez(old, **{k: v for k, v in np.load(lab).items() if k != "fabric"})
    bc = tmp_path / "bc.zip"
    assert main(["clone", str(old), "--epochs", "1", "--scenario", str(two), "--out", str(bc)]) == 0
    assert "fabric" not in read_metadata(bc)
    assert cli_main(["evaluate", str(four), "--policies", f"ppo:{bc}", "--seeds", "1", "--json"]) == 0
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(model) as zin, zipfile.ZipFile(bad, "w") as zout:
        for info in zin.infolist():
            blob = zin.read(info.filename)
            if info.filename == "ainet_gym.json":
                blob = json.dumps({**json.loads(blob), "fabric": 5}).encode()
            zout.writestr(info.filename, blob)
    agent = SB3Agent(bad)
    with pytest.raises(ModelFileError, match=r"bad\.zip.*field 'fabric' = 5; allowed: a 0-d non-empty"):
        agent.check(EnvCore(str(four), **agent.env_kwargs))
