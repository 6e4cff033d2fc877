"""Characterisation of :func:`lookahead_labels`, :func:`behaviour_clone` and :func:`fit_knn` on a tiny
scenario (issue 31: their split into steps of one concern must not change what they produce). The expected
values were recorded from main at 21b61d2, before the split (``runs31zd/record.py`` prints them); a step
passed the wrong array or dropped an option changes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _recorded import approx_tree

from ainet_gym.agents.imitate import behaviour_clone, fit_knn, load_knn, lookahead_labels

SEEDS = [3, 4]


def _small() -> dict:
    from _scenarios import small_spine_leaf

    return small_spine_leaf(6, name="imitate-small")


def _cycle(obs: Any) -> np.ndarray:
    """A policy of the DAgger path: plan ``i % 6`` for the ``i``-th observation of the batch."""
    return np.arange(len(obs), dtype=np.int64) % 6


@pytest.fixture(scope="module")
def util_labels() -> dict[str, Any]:
    return lookahead_labels(_small(), SEEDS, h=2)


@pytest.fixture(scope="module")
def tail_labels() -> dict[str, Any]:
    return lookahead_labels(
        _small(), SEEDS, h=3, objective="tail", tail_slack=0.05, tail_weight=2.0, policy=_cycle
    )


def label_summary(lab: dict[str, Any]) -> dict[str, Any]:
    """What the tests compare of a label set: every integer array whole, the float arrays by column sums."""
    return {
        "label": lab["label"].tolist(),
        "played": lab["played"].tolist(),
        "seed": lab["seed"].tolist(),
        "t": lab["t"].tolist(),
        "step_iters": lab["step_iters"].sum(axis=0).tolist(),
        "meta": [str(m) for m in lab["meta"]],
        "plans": [str(p) for p in lab["plans"]],
        "shapes": {k: list(v.shape) for k, v in lab.items() if isinstance(v, np.ndarray)},
        "obs": float(lab["obs"].astype(np.float64).sum()),
        "scores": lab["scores"].sum(axis=0).tolist(),
        "tail": lab["tail"].sum(axis=0).tolist(),
        "excess": lab["excess"].sum(axis=0).tolist(),
        "reward": lab["reward"].tolist(),
        "step_ratio": lab["step_ratio"].sum(axis=0).tolist(),
        "gpu_utilization": lab["gpu_utilization"].tolist(),
    }


def clone_summary(labels: dict[str, Any], out: Path, **kw: Any) -> dict[str, Any]:
    """A clone of ``labels`` (``kw``: :func:`behaviour_clone`'s options): its result, the metadata it saved,
    the saved model's discount and its policy's probabilities on the first three observations."""
    import torch

    from ainet_gym.agents.sb3_agents import algo_class, read_metadata

    res = behaviour_clone(labels, out, scenario=_small(), **kw)
    res.pop("seconds")
    path = res.pop("model_path")
    meta = read_metadata(path)
    model = algo_class("ppo").load(path, device="cpu")
    width = int(model.observation_space.shape[0])
    with torch.no_grad():
        obs = torch.as_tensor(np.asarray(labels["obs"][:3, :width], dtype=np.float32))
        probs = model.policy.get_distribution(obs).distribution.probs.numpy()
    keys = ("action_mode", "history", "episode_steps", "scenario", "seed", "n_envs", "run_name")
    return {
        "result": res,
        "file": Path(path).name,
        "meta": {k: meta[k] for k in keys},
        "observation_space": meta["observation_space"],
        "cloning": meta["behaviour_cloning"],
        "gamma": float(model.gamma),
        "probs": probs.astype(np.float64).round(6).tolist(),
    }


#: the two clones compared: the regret loss with a discount, a seed and validation labels; the default
#: weighting on the default observation blocks only (``obs_features=()``)
CLONES = {
    "regret": {"val": True, "epochs": 2, "batch_size": 4, "gamma": 0.8, "seed": 1, "weighting": "regret",
               "n_envs": 1},
    "plain": {"epochs": 3, "n_envs": 2, "obs_features": ()},
}  # fmt: skip


def knn_summary(labels: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Three k-NN files of ``labels``: the label vote on two blocks, a standardised value vote with a
    margin, vote plans and a cooldown, and a value vote with a tail cap; what each saved."""
    sc = _small()
    files = {
        "label": fit_knn(labels, folder / "a", k=2, block="job_phase,background", scenario=sc),
        "value": fit_knn(
            labels,
            folder / "b.npz",
            k=3,
            scenario=sc,
            vote="value",
            value_weight=1.5,
            margin=0.01,
            fallback="ecmp",
            standardize=True,
            vote_plans=["ecmp", "spray+bg", "lp+bg"],
            cooldown=2,
            metadata={"made": "test"},
        ),
        "capped": fit_knn(
            labels,
            folder / "c.npz",
            k=1,
            scenario=sc,
            vote="value",
            value_weight=0.5,
            tail_cap=1.1,
            tail_penalty=3.0,
        ),
    }
    out: dict[str, Any] = {}
    for name, p in files.items():
        z = dict(np.load(p, allow_pickle=False))
        out[name] = {
            "file": p.name,
            "fields": sorted(z),
            "x": [list(z["x"].shape), float(z["x"].astype(np.float64).sum())],
            "y": z["y"].tolist(),
            "k": int(z["k"]),
            "block": str(z["block"]),
            "seeds": z["seeds"].tolist(),
            "q": None if "q" not in z else [float(v) for v in z["q"].astype(np.float64).sum(axis=0)],
            "scale": None if "scale" not in z else z["scale"].round(9).tolist(),
            "margin": None if "margin" not in z else float(z["margin"]),
            "fallback": None if "fallback" not in z else str(z["fallback"]),
            "vote_plans": None if "vote_plans" not in z else [str(v) for v in z["vote_plans"]],
            "cooldown": None if "cooldown" not in z else int(z["cooldown"]),
            "metadata": load_knn(p)["metadata"],
        }
    return out


#: the values of the summaries above on main at 21b61d2 (``runs31zd/record.py``), before the split
# fmt: off
RECORDED: dict[str, Any] = {"util": {"label": [1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1],
          "played": [1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1],
          "seed": [3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4],
          "t": [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5],
          "step_iters": [12, 10],
          "meta": ["imitate-small", "choose_bg", "phase", "4", "6", "spray+bg", "2"],
          "plans": ["ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"],
          "shapes": {"obs": [12, 305],
                     "label": [12],
                     "scores": [12, 6],
                     "reward": [12],
                     "played": [12],
                     "tail": [12, 6],
                     "excess": [12, 6],
                     "step_ratio": [12, 2],
                     "step_iters": [12, 2],
                     "seed": [12],
                     "t": [12],
                     "plans": [6],
                     "gpu_utilization": [2],
                     "meta": [7]},
          "obs": 1169.9427549913526,
          "scores": [7.8753178800000025, 8.339165628000002, 8.339165628000002, 8.203266282000001, 8.33317492245253,
                     8.32217899404441],
          "tail": [14.910041841004187, 13.539545303069573, 13.539545303069573, 13.965434887251453,
                   13.548784712614502, 13.55814340221159],
          "excess": [0.30209800000000075, 0.0, 0.0, 0.09902100000000012, 0.003992459737278105,
                     0.008036461816455124],
          "reward": [0.707006433758547, 0.8126685452837622, 0.8279853346665454, 0.686584047914836,
                     0.8279853346665454, 0.7838125826945014, 0.707006433758547, 0.8126685452837622,
                     0.8279853346665454, 0.686584047914836, 0.8279853346665454, 0.7838125826945014],
          "step_ratio": [10.770809419780058, 10.107035724025089],
          "gpu_utilization": [0.7743403798307896, 0.7743403798307896]},
 "tail": {"label": [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1],
          "played": [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
          "seed": [3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4],
          "t": [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5],
          "step_iters": [11, 10],
          "meta": ["imitate-small", "choose_bg", "phase", "4", "6", "spray+bg", "3", "tail", "0.05", "2.0"],
          "plans": ["ecmp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg"],
          "shapes": {"obs": [12, 305],
                     "label": [12],
                     "scores": [12, 6],
                     "reward": [12],
                     "played": [12],
                     "tail": [12, 6],
                     "excess": [12, 6],
                     "step_ratio": [12, 2],
                     "step_iters": [12, 2],
                     "seed": [12],
                     "t": [12],
                     "plans": [6],
                     "gpu_utilization": [2],
                     "meta": [10]},
          "obs": 1152.0078309793025,
          "scores": [10.879734564000005, 11.390081516000006, 11.390081516000006, 11.245182599500005,
                     11.381579324932886, 11.364079408488404],
          "tail": [15.149396452771505, 13.884321657348094, 13.884321657348094, 14.16021309290184,
                   13.905185193663266, 13.905185354557325],
          "excess": [0.18353354999999977, 0.0, 0.0, 0.034297500000000036, 0.0, 0.0],
          "reward": [0.707006433758547, 0.6968255411124242, 0.6765546566473754, 0.6815845024189718,
                     0.68409942530477, 0.6853568867476691, 0.707006433758547, 0.8126685452837622,
                     0.8279853346665454, 0.686584047914836, 0.8279853346665454, 0.7838125826945014],
          "step_ratio": [11.940732958121968, 10.476343059721842],
          "gpu_utilization": [0.6885712409982929, 0.7743403798307896]},
 "knn": {"label": {"file": "a.npz",
                   "fields": ["block", "k", "meta", "plans", "seeds", "x", "y"],
                   "x": [[12, 8], 32.23173123039305],
                   "y": [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1],
                   "k": 2,
                   "block": "job_phase,background",
                   "seeds": [3, 4],
                   "q": None,
                   "scale": None,
                   "margin": None,
                   "fallback": None,
                   "vote_plans": None,
                   "cooldown": None,
                   "metadata": {}},
         "value": {"file": "b.npz",
                   "fields": ["ainet_gym.json", "block", "cooldown", "fallback", "k", "margin", "meta", "plans",
                              "q", "scale", "seeds", "vote_plans", "x", "y"],
                   "x": [[12, 6], 155.96626453101635],
                   "y": [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1],
                   "k": 3,
                   "block": "job_phase",
                   "seeds": [3, 4],
                   "q": [-0.7856472749263048, 0.0, 0.0, -0.1963451630435884, -0.008502191253366043,
                         -0.026002107420936227],
                   "scale": [0.284740149, 0.351154412, 0.091107446, 0.32718153, 0.209734649, 0.019084118],
                   "margin": 0.01,
                   "fallback": "ecmp",
                   "vote_plans": ["ecmp", "spray+bg", "lp+bg"],
                   "cooldown": 2,
                   "metadata": {"made": "test"}},
         "capped": {"file": "c.npz",
                    "fields": ["block", "k", "meta", "plans", "q", "seeds", "x", "y"],
                    "x": [[12, 6], 26.231731230393052],
                    "y": [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1],
                    "k": 1,
                    "block": "job_phase",
                    "seeds": [3, 4],
                    "q": [-3.4291252195835114, 0.0, 0.0, -0.8346010404638946, -0.07109280032514409,
                          -0.08859320217743516],
                    "scale": None,
                    "margin": None,
                    "fallback": None,
                    "vote_plans": None,
                    "cooldown": None,
                    "metadata": {}}},
 "clone_regret": {"result": {"train_accuracy": 0.0,
                             "val_accuracy": 0.0,
                             "majority_plan": "spray+bg",
                             "train_majority_accuracy": 0.8333333333333334,
                             "val_majority_accuracy": 0.8333333333333334,
                             "train_other_plans": {"labels_other": 2,
                                                   "policy_other": 12,
                                                   "recall": 0.0,
                                                   "precision": 0.0},
                             "val_other_plans": {"labels_other": 2,
                                                 "policy_other": 12,
                                                 "recall": 0.0,
                                                 "precision": 0.0},
                             "obs_features": ["phase"]},
                  "file": "regret.zip",
                  "meta": {"action_mode": "choose_bg",
                           "history": 4,
                           "episode_steps": 6,
                           "scenario": "imitate-small",
                           "seed": 1,
                           "n_envs": 1,
                           "run_name": "bc-regret"},
                  "observation_space": {"kind": "Box", "shape": [305]},
                  "cloning": {"samples": 12,
                              "epochs": 2,
                              "weighting": "regret",
                              "lookahead_base": "spray+bg",
                              "lookahead_h": 2,
                              "train_accuracy": 0.0,
                              "val_accuracy": 0.0,
                              "majority_plan": "spray+bg",
                              "train_majority_accuracy": 0.8333333333333334,
                              "val_majority_accuracy": 0.8333333333333334,
                              "train_other_plans": {"labels_other": 2,
                                                    "policy_other": 12,
                                                    "recall": 0.0,
                                                    "precision": 0.0},
                              "val_other_plans": {"labels_other": 2,
                                                  "policy_other": 12,
                                                  "recall": 0.0,
                                                  "precision": 0.0},
                              "obs_features": ["phase"]},
                  "gamma": 0.8,
                  "probs": [[0.078094, 0.210102, 0.210827, 0.09013, 0.205896, 0.204952],
                            [0.076432, 0.210738, 0.211638, 0.088333, 0.206997, 0.205863],
                            [0.075276, 0.211235, 0.21208, 0.087668, 0.207569, 0.206172]]},
 "clone_plain": {"result": {"train_accuracy": 0.8333333333333334,
                            "val_accuracy": None,
                            "majority_plan": "spray+bg",
                            "train_majority_accuracy": 0.8333333333333334,
                            "val_majority_accuracy": None,
                            "train_other_plans": {"labels_other": 2,
                                                  "policy_other": 0,
                                                  "recall": 0.0,
                                                  "precision": None},
                            "val_other_plans": None,
                            "obs_features": []},
                 "file": "plain.zip",
                 "meta": {"action_mode": "choose_bg",
                          "history": 4,
                          "episode_steps": 6,
                          "scenario": "imitate-small",
                          "seed": 0,
                          "n_envs": 2,
                          "run_name": "bc-plain"},
                 "observation_space": {"kind": "Box", "shape": [299]},
                 "cloning": {"samples": 12,
                             "epochs": 3,
                             "weighting": "inv_sqrt",
                             "lookahead_base": "spray+bg",
                             "lookahead_h": 2,
                             "train_accuracy": 0.8333333333333334,
                             "val_accuracy": None,
                             "majority_plan": "spray+bg",
                             "train_majority_accuracy": 0.8333333333333334,
                             "val_majority_accuracy": None,
                             "train_other_plans": {"labels_other": 2,
                                                   "policy_other": 0,
                                                   "recall": 0.0,
                                                   "precision": None},
                             "val_other_plans": None,
                             "obs_features": []},
                 "gamma": 0.9,
                 "probs": [[0.21275, 0.216335, 0.143072, 0.142273, 0.141851, 0.14372],
                           [0.21477, 0.220285, 0.141309, 0.141134, 0.140716, 0.141785],
                           [0.216934, 0.221573, 0.140386, 0.140079, 0.139864, 0.141165]]}}
# fmt: on


def test_labels_are_those_recorded(util_labels: dict[str, Any], tail_labels: dict[str, Any]) -> None:
    assert label_summary(util_labels) == approx_tree(RECORDED["util"])
    assert label_summary(tail_labels) == approx_tree(RECORDED["tail"])


def test_knn_files_are_those_recorded(tail_labels: dict[str, Any], tmp_path: Path) -> None:
    assert knn_summary(tail_labels, tmp_path) == approx_tree(RECORDED["knn"])


@pytest.mark.parametrize("name", sorted(CLONES))
def test_clones_are_those_recorded(name: str, util_labels: dict[str, Any], tmp_path: Path) -> None:
    kw = {**CLONES[name], "val": util_labels if CLONES[name].get("val") else None}
    got = clone_summary(util_labels, tmp_path / f"{name}.zip", **kw)
    want = RECORDED[f"clone_{name}"]
    np.testing.assert_allclose(got.pop("probs"), want["probs"], rtol=0, atol=2e-6)
    assert got == approx_tree({k: v for k, v in want.items() if k != "probs"})
