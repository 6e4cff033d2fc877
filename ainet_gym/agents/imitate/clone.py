"""Behaviour cloning: a PPO model's policy fitted to the lookahead's labels by weighted cross-entropy
(or expected regret), its value network to the labelled trajectories' returns, saved as a model of
``ainet-gym train`` (:func:`behaviour_clone`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np


def _returns(reward: np.ndarray, steps: int, gamma: float) -> np.ndarray:
    """(N,) discounted return of each decision of episodes stored one after the other (``steps`` each)."""
    r = reward.reshape(-1, steps)
    g = np.zeros_like(r)
    acc = np.zeros(r.shape[0])
    for t in range(steps - 1, -1, -1):  # a loop over the intervals of an episode, batched over episodes
        acc = r[:, t] + gamma * acc
        g[:, t] = acc
    return g.reshape(-1)


def behaviour_clone(
    labels: dict[str, Any],
    out: str | Path,
    val: dict[str, Any] | None = None,
    epochs: int = 60,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    gamma: float | None = None,
    seed: int = 0,
    weighting: str = "inv_sqrt",
    n_envs: int = 8,
    obs_features: tuple[str, ...] | None = None,
    scenario: Any = None,
    obs_blocks: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Fit a PPO model's policy to ``labels`` (:func:`lookahead_labels`) and save it to ``out`` with the
    metadata of ``ainet-gym train`` (``evaluate ppo:OUT``, ``train --resume OUT``).

    The model is the one ``ainet-gym train`` builds for the labels' scenario, action mode and
    ``obs_features`` (:func:`~ainet_gym.agents.sb3_agents.default_hyperparameters`, ``gamma`` overriding
    its discount). Loss: cross-entropy of the labels weighted per plan (``weighting``: ``"inv_sqrt"``, the
    inverse square root of the plan's frequency, or ``"none"``), or (``"regret"``) the policy's expected
    regret, the sum over plans of its probability times the plan's shortfall to the best plan's lookahead
    score (``scores``), over the mean shortfall: a decision where the plans score alike costs nothing
    whatever the policy answers, and one with much at stake costs in proportion; plus the squared error of the value
    network against the discounted returns of the labelled trajectories. ``obs_features=()`` drops the
    labels' optional observation blocks (appended last, so the default observation is their first
    columns): the same labels, from what the default observation carries. ``scenario``: the labels'
    scenario when it is not a shipped one (a dict or path; default: the name the labels record). ``obs_blocks``:
    the observation blocks the networks read (a :class:`~ainet_gym.agents.block_features.BlockFeatures`
    extractor, e.g. ``("job_phase",)``; default every input). Labels of one block (a knn policy file,
    :func:`~ainet_gym.agents.imitate.label_files.knn_labels`) are given zeros in the other columns; without
    ``reward`` in the labels the value network is not fitted. The labels' fabric fingerprint must be the scenario's
    (:func:`_clone_env`); the metadata records it (:func:`_clone_metadata`). Returns the accuracy of the
    deterministic policy (its most likely plan) on ``labels`` and on ``val``, the accuracy of always
    answering the most frequent label of ``labels``, and the seconds.

    Raises
    ------
    ValueError
        Naming a bad ``weighting``, ``epochs`` or labels of another env or fabric.
    """
    import torch

    from ainet_gym.agents.imitate.label_files import with_full_obs
    from ainet_gym.agents.sb3_agents import save_model

    if weighting not in ("inv_sqrt", "none", "regret"):
        raise ValueError(f"weighting = {weighting!r}: allowed: inv_sqrt, none, regret")
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs = {epochs!r}: allowed: an integer >= 1")
    torch.set_num_threads(1)  # small MLPs run fastest on one thread (as ainet-gym train does)
    t0 = time.perf_counter()
    sc, venv, obs_features = _clone_env(labels, obs_features, scenario, n_envs)
    layout, dim = venv.core.obs_layout, int(venv.observation_space.shape[0])
    labels = with_full_obs(labels, layout, dim)
    val = None if val is None else with_full_obs(val, layout, dim)
    X, y = _clone_samples(labels, venv)
    model = _clone_model(venv, n_envs, gamma, obs_blocks, seed)
    K = int(venv.action_space.n)
    majority = int(np.argmax(np.bincount(y, minlength=K)))
    ret = None
    if "reward" in labels:
        ret = _returns(
            np.asarray(labels["reward"], dtype=np.float64), int(labels["meta"][4]), float(model.gamma)
        )
    if weighting == "regret" and "scores" not in labels:
        raise ValueError("weighting = 'regret': the labels hold no plan scores; allowed: inv_sqrt, none")
    weights = _sample_weights(
        y, np.asarray(labels.get("scores", np.zeros((len(y), K))), dtype=np.float64), K, weighting
    )
    _fit_policy(
        model.policy, X, y, ret, weights, weighting == "regret", epochs, batch_size, learning_rate, seed
    )
    result = _clone_report(model.policy, labels, val, X.shape[1], majority, obs_features)
    result["seconds"] = time.perf_counter() - t0
    meta = _clone_metadata(labels, sc, venv, out, seed, n_envs, epochs, weighting, result, tuple(obs_blocks))
    result["model_path"] = str(save_model(model, out, meta))
    venv.close()
    return result


def _clone_model(venv: Any, n_envs: int, gamma: float | None, obs_blocks: tuple[str, ...], seed: int) -> Any:
    """The PPO model ``ainet-gym train`` builds for ``venv`` (:func:`behaviour_clone`): its default
    hyperparameters, ``gamma`` overriding the discount, the networks reading ``obs_blocks`` (all when empty),
    torch seeded with ``seed``."""
    import torch

    from ainet_gym.agents.block_features import block_policy_kwargs
    from ainet_gym.agents.sb3_agents import algo_class, default_hyperparameters

    hp = default_hyperparameters("ppo", venv.core.episode_steps, n_envs)
    if gamma is not None:
        hp["gamma"] = float(gamma)
    if obs_blocks:
        hp["policy_kwargs"] = hp["policy_kwargs"] | block_policy_kwargs(venv.core.obs_layout, obs_blocks)
    torch.manual_seed(seed)
    return algo_class("ppo")("MlpPolicy", venv, seed=seed, device="cpu", **hp)


def _clone_env(
    labels: dict[str, Any], obs_features: tuple[str, ...] | None, scenario: Any, n_envs: int
) -> tuple[Any, Any, tuple[str, ...]]:
    """The scenario, the SB3 vector env of ``n_envs`` copies that :func:`behaviour_clone`'s model is built
    on (the labels' scenario, or ``scenario``; their action mode, history and steps; ``obs_features``,
    default the labels'), and those observation features. Labels with a fabric fingerprint made on another
    fabric than the scenario's are refused (a ValueError, at the fit rather than at the first play, as ``imitate
    knn`` and ``qfit``)."""
    from ainet_gym.agents.imitate.features import extra_plans_of
    from ainet_gym.agents.imitate.label_files import FABRIC_FIELD, check_fabric
    from ainet_gym.envs.sb3_vec_env import SB3VecEnv
    from ainet_gym.fabric.topology import build_fabric
    from ainet_gym.scenario.loader import load_scenario

    name, mode, feats, history, steps = (str(x) for x in labels["meta"][:5])
    extra = extra_plans_of(mode, [str(p) for p in labels["plans"]])
    if obs_features is None:
        obs_features = tuple(f for f in feats.split(",") if f)
    sc = load_scenario(name if scenario is None else scenario)
    recorded = str(labels[FABRIC_FIELD]) if FABRIC_FIELD in labels else None
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    check_fabric(f"labels of scenario {name!r} cloned on {sc.name!r}", recorded, fabric)
    venv = SB3VecEnv(
        num_envs=n_envs, scenario=sc, action_mode=mode, history=int(history), episode_steps=int(steps),
        **({"obs_features": obs_features} if obs_features else {}),
        **({"extra_plans": extra} if extra else {}),
    )  # fmt: skip
    return sc, venv, obs_features


def _clone_samples(labels: dict[str, Any], venv: Any) -> tuple[np.ndarray, np.ndarray]:
    """(N, D) float32 observations (the first D columns of the labels', those of ``venv``: with
    ``obs_features=()`` the default blocks) and (N,) int64 labels of :func:`behaviour_clone`; refuses
    labels whose observations the env does not give."""
    D = int(venv.observation_space.shape[0])
    X = np.asarray(labels["obs"], dtype=np.float32)[:, :D]  # obs_features=(): the default blocks
    if X.shape[1:] != venv.observation_space.shape:
        raise ValueError(
            f"labels: observations of shape {X.shape[1:]}, the env of their metadata gives "
            f"{venv.observation_space.shape}"
        )
    return X, np.asarray(labels["label"], dtype=np.int64)


def _clone_report(
    policy: Any,
    labels: dict[str, Any],
    val: dict[str, Any] | None,
    D: int,
    majority: int,
    obs_features: tuple[str, ...],
) -> dict[str, Any]:
    """:func:`behaviour_clone`'s result: the fitted policy's accuracy on ``labels`` and ``val``, the
    ``majority`` plan and the accuracy of always answering it, the policy on the other plans' decisions
    (:func:`_clone_minority`), and the observation features."""
    y = np.asarray(labels["label"], dtype=np.int64)
    return {
        "train_accuracy": _clone_accuracy(policy, labels, D),
        "val_accuracy": _clone_accuracy(policy, val, D),
        "majority_plan": str(labels["plans"][majority]),
        "train_majority_accuracy": float((y == majority).mean()),
        "val_majority_accuracy": None
        if val is None
        else float((np.asarray(val["label"]) == majority).mean()),
        "train_other_plans": _clone_minority(policy, labels, D, majority),
        "val_other_plans": _clone_minority(policy, val, D, majority),
        "obs_features": list(obs_features),
    }


def _clone_metadata(
    labels: dict[str, Any],
    sc: Any,
    venv: Any,
    out: str | Path,
    seed: int,
    n_envs: int,
    epochs: int,
    weighting: str,
    result: dict[str, Any],
    obs_blocks: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The metadata :func:`behaviour_clone` saves with its model: ``ainet-gym train``'s (so that ``evaluate
    ppo:OUT`` and ``train --resume OUT`` take it), plus ``behaviour_cloning``: the samples, epochs, weighting,
    the lookahead's base and horizon and the ``result`` (less its seconds). ``fabric``: the labels' fingerprint
    (:func:`_clone_env` checked it is the env's; ``evaluate ppo:OUT`` refuses another fabric), none for labels
    without one (not checked, as a knn or qnet file fitted on them)."""
    from ainet_gym.agents.imitate.label_files import FABRIC_FIELD
    from ainet_gym.agents.train_config import TrainConfig
    from ainet_gym.agents.train_meta import meta_maker

    mode, history = str(labels["meta"][1]), int(labels["meta"][3])
    cfg = TrainConfig(
        scenario=sc, algo="ppo", action_mode=mode, seed=seed, n_envs=n_envs, obs_blocks=obs_blocks
    )
    meta = meta_maker(
        cfg, "ppo", mode, history, "flat", venv.core, sc.name, f"bc-{Path(out).stem}", venv, None
    )(0)
    if FABRIC_FIELD not in labels:  # labels of an unknown fabric: the model claims none (not the env's)
        meta.pop("fabric", None)
    meta["behaviour_cloning"] = {
        "samples": len(labels["label"]), "epochs": epochs, "weighting": weighting,
        "lookahead_base": str(labels["meta"][5]), "lookahead_h": int(labels["meta"][6]),
        **{k: v for k, v in result.items() if k != "seconds"},
    }  # fmt: skip
    return meta


def _sample_weights(y: np.ndarray, scores: np.ndarray, K: int, weighting: str) -> np.ndarray:
    """The loss weights of :func:`behaviour_clone`: (N,) per sample, the inverse square root of its label's
    frequency (``"inv_sqrt"``) or 1 (``"none"``), normalised to mean 1; or (``"regret"``) (N, K) each plan's
    shortfall to the best plan's lookahead score, over the mean shortfall."""
    if weighting == "regret":
        short = scores.max(axis=1, keepdims=True) - scores  # (N, K) >= 0
        return short / max(float(short.mean()), 1e-300)
    freq = np.bincount(y, minlength=K).astype(np.float64)
    cw = (
        np.where(freq > 0, 1.0 / np.sqrt(np.maximum(freq, 1.0)), 0.0)
        if weighting == "inv_sqrt"
        else np.ones(K)
    )
    return (cw / cw[y].mean())[y]  # mean weight 1 over the samples


def _fit_policy(
    policy: Any,
    X: np.ndarray,
    y: np.ndarray,
    ret: np.ndarray | None,
    weights: np.ndarray,
    regret: bool,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
) -> None:
    """The training loop of :func:`behaviour_clone`: Adam over shuffled minibatches of the weighted
    cross-entropy of the labels ``y`` (``weights`` (N,) per sample), or with ``regret`` the expected regret
    (``weights`` (N, K), each plan's normalised shortfall), plus half the squared error of the value network
    against the returns ``ret`` (none without them)."""
    import torch

    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    wt = torch.as_tensor(weights, dtype=torch.float32)
    rt = None if ret is None else torch.as_tensor(ret, dtype=torch.float32)
    opt = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    policy.set_training_mode(True)
    for _ in range(epochs):
        for idx in np.array_split(rng.permutation(len(y)), max(1, len(y) // batch_size)):
            i = torch.as_tensor(idx)
            values, logp, _ = policy.evaluate_actions(Xt[i], yt[i])
            if regret:
                probs = policy.get_distribution(Xt[i]).distribution.probs
                fit = (probs * wt[i]).sum(dim=1).mean()
            else:
                fit = -(wt[i] * logp).mean()
            loss = fit if rt is None else fit + 0.5 * ((values.flatten() - rt[i]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    policy.set_training_mode(False)


def _clone_predict(policy: Any, d: dict[str, Any], D: int) -> np.ndarray:
    """The deterministic policy's plan (its most likely) for each observation of the labels ``d``."""
    import torch

    with torch.no_grad():
        dist = policy.get_distribution(torch.as_tensor(np.asarray(d["obs"], dtype=np.float32)[:, :D]))
        return dist.distribution.probs.argmax(dim=1).numpy()


def _clone_accuracy(policy: Any, d: dict[str, Any] | None, D: int) -> float | None:
    """The share of the labels ``d`` that the deterministic policy answers (``None`` without labels)."""
    if d is None:
        return None
    return float((_clone_predict(policy, d, D) == np.asarray(d["label"])).mean())


def _clone_minority(policy: Any, d: dict[str, Any] | None, D: int, majority: int) -> dict[str, Any] | None:
    """Of the decisions labelled with another plan than the majority's: how many the policy gets right
    (recall), and of those it answers with another plan, how many are right (precision)."""
    if d is None:
        return None
    pred, lab = _clone_predict(policy, d, D), np.asarray(d["label"])
    other, says = lab != majority, pred != majority
    return {
        "labels_other": int(other.sum()),
        "policy_other": int(says.sum()),
        "recall": float((pred == lab)[other].mean()) if other.any() else None,
        "precision": float((pred == lab)[says].mean()) if says.any() else None,
    }
