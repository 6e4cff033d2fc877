"""The value-regression imitation (``imitate qfit``, ``qnet:PATH``): it plays the plan of the best fitted value,
its files are checked field by field, and ``evaluate`` plays it as a learned policy of its class."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ainet_gym.envs.env import EnvCore

PLANS = np.array(["ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"])


def _small() -> dict:
    from _scenarios import small_spine_leaf

    return small_spine_leaf(6, name="imitate-small")


def _synthetic(n: int = 400, seed: int = 0) -> tuple[dict, dict, slice]:
    """Labels whose best plan is a known function of one feature ``s`` of the job_phase block: plan 1 scores 1,
    plan 3 scores ``1 + 2 s`` and carries 0.5 GPU-seconds of excess step time. The raw column is ``5 + 0.01 s``
    (an offset and a tiny spread: unstandardised inputs would not separate it) beside a noise column."""
    sc = _small()
    core = EnvCore(sc, action_mode="choose_bg", obs_features=("phase",))
    sl = core.obs_layout["job_phase"]
    rng = np.random.default_rng(seed)
    s = rng.uniform(-1, 1, n)
    obs = np.zeros((n, sl.stop), dtype=np.float32)
    obs[:, sl.start] = 5.0 + 0.01 * s
    obs[:, sl.start + 1] = rng.normal(0, 1, n)
    scores = np.zeros((n, 6))
    scores[:, 1], scores[:, 3] = 1.0, 1.0 + 2.0 * s
    excess = np.zeros((n, 6))
    excess[:, 3] = 0.5
    meta = np.array(["imitate-small", "choose_bg", "phase", "4", "6", "spray+bg", "8", "tail", "0.0", "0.0"])
    labels = {"obs": obs, "scores": scores, "excess": excess, "meta": meta, "plans": PLANS,
              "label": np.where(s > 0, 3, 1), "seed": np.ones(n, dtype=np.int64)}  # fmt: skip
    return labels, sc, sl


def _probe(sl: slice, s: np.ndarray) -> np.ndarray:
    obs = np.zeros((len(s), sl.stop), dtype=np.float32)
    obs[:, sl.start] = 5.0 + 0.01 * s
    return obs


def test_qfit_plays_the_plan_of_the_best_value_as_a_function_of_a_feature(tmp_path) -> None:
    from ainet_gym.agents.qnet import QnetAgent, fit_qnet, load_qnet

    labels, sc, sl = _synthetic()
    view = SimpleNamespace(
        obs_layout=EnvCore(sc, action_mode="choose_bg", obs_features=("phase",)).obs_layout
    )
    s = np.array([-0.9, -0.6, -0.3, 0.25, 0.45, 0.75, 0.95])
    # weight 0: plan 3 is best where s > 0; weight 2: its value is 1 + 2 s - 1, best where s > 0.5
    for w, cut in ((0.0, 0.0), (2.0, 0.5)):
        res = fit_qnet(labels, tmp_path / f"q{w}.npz", value_weight=w, hidden="16,16", epochs=40, batch_size=32,
                       scenario=sc, seed=1)  # fmt: skip
        agent = QnetAgent(res["file"])
        want = np.where(s > cut, 3, 1)
        np.testing.assert_array_equal(agent.act(view, _probe(sl, s)), want)
        assert res["best_by_value"] > 0.9
        v = agent.values(view, _probe(sl, s))
        assert v.shape == (len(s), 6)
        assert abs(load_qnet(res["file"])["value_weight"] - w) < 1e-12


def test_qfit_is_deterministic_given_its_seed(tmp_path) -> None:
    from ainet_gym.agents.qnet import fit_qnet, load_qnet

    labels, sc, _ = _synthetic(n=120)
    kw = {"hidden": (8,), "epochs": 3, "scenario": sc, "value_weight": 0.0}
    a = load_qnet(fit_qnet(labels, tmp_path / "a.npz", seed=3, **kw)["file"])["layers"]
    b = load_qnet(fit_qnet(labels, tmp_path / "b.npz", seed=3, **kw)["file"])["layers"]
    c = load_qnet(fit_qnet(labels, tmp_path / "c.npz", seed=4, **kw)["file"])["layers"]
    for (wa, ba), (wb, bb) in zip(a, b):
        np.testing.assert_array_equal(wa, wb)
        np.testing.assert_array_equal(ba, bb)
    assert not np.array_equal(a[0][0], c[0][0])


@pytest.mark.parametrize(
    ("kw", "must"),
    [({"hidden": "64,x"}, "hidden = '64,x'"), ({"hidden": ""}, "hidden = ''"), ({"epochs": 0}, "epochs = 0"),
     ({"block": "nope"}, "block = 'nope'"), ({"value_weight": -1.0}, "value weight = -1.0")],
)  # fmt: skip
def test_qfit_refuses_bad_settings_by_name(tmp_path, kw, must) -> None:
    from ainet_gym.agents.qnet import fit_qnet

    labels, sc, _ = _synthetic(n=20)
    with pytest.raises(ValueError) as e:
        fit_qnet(labels, tmp_path / "x.npz", scenario=sc, **kw)
    assert must in str(e.value), str(e.value)


@pytest.mark.parametrize(
    ("change", "must"),
    [
        (lambda a: a.pop("mean"), "no field mean"),
        (lambda a: a.pop("b1"), "no field b1"),
        (lambda a: a.update(layers=np.int64(0)), "field 'layers' = 0; allowed: 1..8"),
        (lambda a: a.update(layers=np.float64(2)), "field 'layers' is a 0-d float64"),
        (lambda a: a.update(w0=np.zeros((3, 3))), "field 'w0' is a 2-d float64 array of shape (3, 3)"),
        (lambda a: a.update(w1=np.zeros((3, 5))), "field 'w1' is a 2-d float64 array of shape (3, 5)"),
        (lambda a: a.update(b0=np.zeros(4)), "field 'b0' is a 1-d float64 array of shape (4,)"),
        (lambda a: a.update(w0=np.full((2, 3), np.nan)), "field 'w0' or 'b0' holds non-finite"),
        (lambda a: a.update(scale=np.array([1.0, 0.0])), "field 'scale' holds non-finite or non-positive"),
        (lambda a: a.update(mean=np.zeros(3)), "fields 'mean' (3,) and 'scale' (2,)"),
        (lambda a: a.update(target_scale=np.float64(0.0)), "field 'target_scale' = 0.0"),
        (lambda a: a.update(value_weight=np.float64(np.inf)), "field 'value_weight' = inf"),
        (lambda a: a.update(meta=np.array(["s", "choose_bg", "phase", "four", "8"])), "field 'meta'"),
        (lambda a: a.update(plans=np.array([], dtype=str)), "field 'plans' is empty"),
        (lambda a: a.update(block=np.int64(1)), "field 'block' is a 0-d int64"),
        (lambda a: a.update(**{"ainet_gym.json": np.array("[1]")}), "is not a JSON object"),
        (lambda a: a.update(fabric=np.array(["fab1-0"])), "field 'fabric' is a 1-d"),
        (lambda a: a.update(fabric=np.array("")), "allowed: a 0-d non-empty string"),
    ],
)
def test_a_qnet_file_is_checked_field_by_field(refused_model_file, qnet_arrays, change, must) -> None:
    from ainet_gym.agents.qnet import QnetAgent, load_qnet

    refused_model_file(qnet_arrays, load_qnet, QnetAgent, change, must)


def test_a_qnet_file_with_a_pickle_is_refused(tmp_path, qnet_arrays) -> None:
    from ainet_gym.agents.model_files import ModelFileError
    from ainet_gym.agents.qnet import load_qnet

    a = qnet_arrays()
    a["w0"] = np.array([{"x": 1}], dtype=object)
    np.savez(tmp_path / "evil.npz", **a)
    with pytest.raises(ModelFileError, match="pickled"):
        load_qnet(tmp_path / "evil.npz")


def test_qnet_evaluates_as_a_learned_policy_of_its_class_and_plays_for_dagger(tmp_path) -> None:
    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.imitate import label_player, lookahead_labels
    from ainet_gym.agents.qnet import QnetAgent, fit_qnet, is_qnet_file

    sc = _small()
    lab = lookahead_labels(sc, [3, 4], h=2)
    path = fit_qnet(lab, tmp_path / "q.npz", value_weight=0.0, hidden=(8,), epochs=2, scenario=sc)["file"]
    assert is_qnet_file(path)
    agent = QnetAgent(path)
    assert agent.env_kwargs == {"action_mode": "choose_bg", "history": 4, "obs_features": ("phase",)}
    core = EnvCore(sc, batch=len(lab["label"]), action_mode="choose_bg", obs_features=("phase",))
    play = label_player(path, sc, "choose_bg", ("phase",))
    np.testing.assert_array_equal(play(lab["obs"]), agent.act(core, lab["obs"]))
    out = evaluate(EvalConfig(sc, policies=[f"qnet:{path}", "spray+bg"], seeds=[1, 2], out=None))
    p = out["policies"][f"qnet:{path}"]
    assert p["controls"] == "jobs+bg" and p["learned"] is True
