"""A PPO policy that reads named observation blocks only (:class:`BlockFeatures`, ``--obs-blocks``), cloned from
labels (``imitate clone --obs-blocks``, also from a knn policy file) and fine-tuned from its weights
(``train --init-from``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from ainet_gym.agents.block_features import BlockFeatures, block_columns, block_policy_kwargs
from ainet_gym.agents.imitate import behaviour_clone
from ainet_gym.envs.env import EnvCore

ISO = ("isolate0+bg", "isolate1+bg")


def _small() -> dict:
    from _scenarios import small_spine_leaf

    return small_spine_leaf(6, name="blocks-small")


def test_the_extractor_returns_the_named_columns_in_order_and_refuses_bad_ranges() -> None:
    box = spaces.Box(0.0, 1.0, shape=(10,), dtype=np.float32)
    ex = BlockFeatures(box, [[7, 9], [2, 4]], names=["b", "a"])
    obs = torch.arange(20, dtype=torch.float32).reshape(2, 10)
    assert ex.features_dim == 4
    np.testing.assert_array_equal(ex(obs).numpy(), obs[:, [7, 8, 2, 3]].numpy())
    for bad in ([], [[3, 3]], [[8, 11]]):
        with pytest.raises(ValueError, match="columns"):
            BlockFeatures(box, bad)
    layout = {"jobs": slice(0, 4), "job_phase": slice(4, 10)}
    assert block_columns(layout, "job_phase,jobs") == [[4, 10], [0, 4]]
    for bad_names in ("", "nope", "jobs,jobs"):
        with pytest.raises(ValueError, match="obs_blocks"):
            block_columns(layout, bad_names)


def _synthetic_labels(core: EnvCore, n: int, seed: int = 0) -> dict:
    """``n`` labelled decisions of ``core``'s env: random observations; the label is plan 3 where the first
    ``job_phase`` column is above 0.5, plan 1 elsewhere (a rule of the block alone; the other columns are noise)."""
    rng = np.random.default_rng(seed)
    obs = rng.random((n, core.obs_dim)).astype(np.float32)
    first = core.obs_layout["job_phase"].start
    label = np.where(obs[:, first] > 0.5, 3, 1).astype(np.int64)
    steps = core.episode_steps
    meta = [core.scenario.name, "choose_bg", "phase", "4", str(steps), "spray+bg", "2"]
    return {
        "obs": obs, "label": label, "plans": np.array(core.plans), "meta": np.array(meta),
        "reward": rng.random(n), "seed": np.repeat(np.arange(n // steps), steps), "t": np.tile(np.arange(steps), n // steps),
    }  # fmt: skip


def _core(sc: dict, extra: tuple[str, ...] = ()) -> EnvCore:
    core = EnvCore(sc, batch=1, action_mode="choose_bg", obs_features=("phase",), extra_plans=extra)
    core.reset([1])
    return core


def test_cloning_over_job_phase_learns_a_rule_of_the_block_and_ignores_every_other_input(tmp_path) -> None:
    from ainet_gym.agents.sb3_agents import load_model, read_metadata

    sc = _small()
    core = _core(sc)
    lab = _synthetic_labels(core, 200 * core.episode_steps)
    val = _synthetic_labels(core, 20 * core.episode_steps, seed=1)
    res = behaviour_clone(
        lab, tmp_path / "bc.zip", val=val, epochs=100, n_envs=1, scenario=sc, obs_blocks=("job_phase",), weighting="none"
    )  # fmt: skip
    assert res["train_accuracy"] >= 0.97 and res["val_accuracy"] >= 0.95
    meta = read_metadata(res["model_path"])
    assert meta["obs_blocks"] == ["job_phase"] and "extra_plans" not in meta
    model, _ = load_model(res["model_path"], "ppo")  # through the allowlist: the extractor is let in
    assert isinstance(model.policy.features_extractor, BlockFeatures)
    # every column outside job_phase re-drawn: the same action and the same probabilities
    obs = val["obs"][:50].copy()
    noisy = np.random.default_rng(2).random(obs.shape).astype(np.float32)
    cols = core.obs_layout["job_phase"]
    noisy[:, cols] = obs[:, cols]
    a0, _ = model.predict(obs, deterministic=True)
    a1, _ = model.predict(noisy, deterministic=True)
    np.testing.assert_array_equal(a0, a1)
    with torch.no_grad():
        p0 = model.policy.get_distribution(torch.as_tensor(obs)).distribution.probs
        p1 = model.policy.get_distribution(torch.as_tensor(noisy)).distribution.probs
    torch.testing.assert_close(p0, p1, rtol=0, atol=0)
    flipped = obs.copy()  # the block itself decides
    flipped[:, cols.start] = np.where(obs[:, cols.start] > 0.5, 0.1, 0.9)
    assert (model.predict(flipped, deterministic=True)[0] != a0).mean() > 0.9


def test_a_knn_file_is_read_as_labels_of_its_block(tmp_path) -> None:
    from ainet_gym.agents.imitate.label_files import load_label_source, with_full_obs

    sc = _small()
    core = _core(sc)
    width = core.obs_layout["job_phase"].stop - core.obs_layout["job_phase"].start
    x = np.random.default_rng(0).random((6, width))
    np.savez(
        tmp_path / "k.npz", x=x, y=np.array([1, 1, 3, 3, 1, 3]), k=np.int64(1), block=np.array("job_phase"),
        meta=np.array([sc["name"], "choose_bg", "phase", "4", "6", "spray+bg", "2"]), plans=np.array(core.plans),
        q=-np.random.default_rng(1).random((6, len(core.plans))),
    )  # fmt: skip
    lab = load_label_source(tmp_path / "k.npz")
    assert "obs" not in lab and lab["scores"].shape == (6, len(core.plans))
    full = with_full_obs(lab, core.obs_layout, core.obs_dim)
    assert full["obs"].shape == (6, core.obs_dim)
    np.testing.assert_allclose(full["obs"][:, core.obs_layout["job_phase"]], x.astype(np.float32))
    assert np.count_nonzero(full["obs"]) == np.count_nonzero(x)
    res = behaviour_clone(
        lab,
        tmp_path / "k.zip",
        epochs=2,
        n_envs=1,
        scenario=sc,
        obs_blocks=("job_phase",),
        weighting="regret",
    )
    assert 0 <= res["train_accuracy"] <= 1  # no reward: the value network is left as built


def test_init_from_starts_a_run_from_the_clone_s_weights_with_its_blocks_and_plans(tmp_path) -> None:
    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.sb3_agents import load_model, read_metadata
    from ainet_gym.agents.train import train
    from ainet_gym.agents.train_config import TrainConfig

    sc = _small()
    core = _core(sc, ISO)
    lab = _synthetic_labels(core, 4 * core.episode_steps)
    bc = behaviour_clone(lab, tmp_path / "bc.zip", epochs=1, n_envs=2, scenario=sc, obs_blocks=("job_phase",))
    assert read_metadata(bc["model_path"])["extra_plans"] == list(ISO)
    src, _ = load_model(bc["model_path"], "ppo")
    res = train(
        TrainConfig(
            scenario=sc, algo="ppo", timesteps=32, n_envs=2, init_from=bc["model_path"], learning_rate=1e-12,
            logdir=tmp_path / "runs", progress=False, out=tmp_path / "ft.zip",
        )
    )  # fmt: skip
    meta = read_metadata(res.model_path)
    assert meta["init_from"] == str(bc["model_path"]) and meta["obs_blocks"] == ["job_phase"]
    assert meta["extra_plans"] == list(ISO) and meta["action_mode"] == "choose_bg"
    ft, _ = load_model(res.model_path, "ppo")
    assert isinstance(ft.policy.features_extractor, BlockFeatures)
    for k, v in src.policy.state_dict().items():  # a learning rate of 1e-12: the clone's weights, to 1e-6
        torch.testing.assert_close(ft.policy.state_dict()[k], v, rtol=0, atol=1e-6)
    out = evaluate(EvalConfig(sc, policies=[f"ppo:{res.model_path}"], seeds=[1], out=None))
    assert out["policies"][f"ppo:{res.model_path}"]["controls"] == "jobs+bg"
    with pytest.raises(ValueError, match="one of them"):
        train(TrainConfig(scenario=sc, init_from=bc["model_path"], resume=bc["model_path"], progress=False))


def test_block_policy_kwargs_name_the_extractor_and_its_columns() -> None:
    kw = block_policy_kwargs({"a": slice(0, 2), "job_phase": slice(2, 8)}, "job_phase")
    assert kw["features_extractor_class"] is BlockFeatures
    assert kw["features_extractor_kwargs"] == {"columns": [[2, 8]], "names": ["job_phase"]}
