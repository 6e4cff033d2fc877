"""Characterisation of :func:`lookahead_labels`, :func:`behaviour_clone` and :func:`fit_knn` on a tiny
scenario (issue 31: their split into steps of one concern must not change what they produce). The expected
values were recorded from main at 21b61d2, before the split, into ``imitate_recorded.json`` (from a checkout
whose values are the reference: ``cd tests/agents; PYTHONPATH=CHECKOUT:.. python -c "import json, tempfile,
pathlib, test_imitate_recorded as t; print(json.dumps(t.record(pathlib.Path(tempfile.mkdtemp())),
indent=1))"``); a step passed the wrong array or dropped an option changes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _recorded import approx_tree, load_recorded

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


#: the k-NN files compared (file name, options): the label vote on two blocks (a name without .npz), a
#: standardised value vote with a margin, vote plans, a cooldown and metadata, a value vote with a tail cap
KNN_FILES: dict[str, tuple[str, dict[str, Any]]] = {
    "label": ("a", {"k": 2, "block": "job_phase,background"}),
    "value": ("b.npz", {"k": 3, "vote": "value", "value_weight": 1.5, "margin": 0.01, "fallback": "ecmp",
                        "standardize": True, "vote_plans": ["ecmp", "spray+bg", "lp+bg"], "cooldown": 2,
                        "metadata": {"made": "test"}}),
    "capped": ("c.npz", {"k": 1, "vote": "value", "value_weight": 0.5, "tail_cap": 1.1, "tail_penalty": 3.0}),
}  # fmt: skip


def knn_summary(labels: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The k-NN files of ``labels`` (:data:`KNN_FILES`): what each saved."""
    sc = _small()
    files = {name: fit_knn(labels, folder / f, scenario=sc, **kw) for name, (f, kw) in KNN_FILES.items()}
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


def record(folder: Path) -> dict[str, Any]:
    """Every summary the tests compare, computed by the ``ainet_gym`` imported (files in ``folder``)."""
    util = lookahead_labels(_small(), SEEDS, h=2)
    tail = lookahead_labels(
        _small(), SEEDS, h=3, objective="tail", tail_slack=0.05, tail_weight=2.0, policy=_cycle
    )
    out = {"util": label_summary(util), "tail": label_summary(tail), "knn": knn_summary(tail, folder)}
    for name, kw in CLONES.items():  # as test_clones_are_those_recorded
        kw = {**kw, "val": util if kw.get("val") else None}
        out[f"clone_{name}"] = clone_summary(util, folder / f"{name}.zip", **kw)
    return out


#: the summaries on main at 21b61d2, before the split (imitate_recorded.json, written by :func:`record`)
RECORDED: dict[str, Any] = load_recorded(__file__)


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
