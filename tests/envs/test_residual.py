"""Residual policies (``residual=`` on the env): the action adjusts a base routing's split instead of
setting one. Reference: the base policy's own split (actions of 0), and the factor a single knob link's
action puts on the paths through it, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.policies import POLICIES


@pytest.mark.parametrize("mode", ["ecmp_weights", "split_bg"])
@pytest.mark.parametrize("base", ["lp+bg", "solo-lp+bg", "spray+bg"])
def test_zero_action_is_the_base_routing(mode: str, base: str) -> None:
    core = EnvCore("ingest-bursts", batch=2, action_mode=mode, residual=base)
    core.reset([1, 2])
    for _ in range(3):
        want = POLICIES[base](core.world, core.last_result)
        zero = np.zeros((2, *core.action_space.shape), dtype=np.float32)
        np.testing.assert_allclose(core.decode(core.validate(zero)), want, rtol=0, atol=1e-15)
        core.step(zero)


def test_a_knob_action_scales_the_paths_through_its_link_by_hand() -> None:
    core = EnvCore("periodic-interference-jitter", batch=1, action_mode="ecmp_weights", residual="spray+bg")
    core.reset([3])
    sim = core.world.sim
    a = np.zeros((1, *core.action_space.shape))
    a[0, 0] = 0.5  # knob link 0: paths through it get exp(0.5 * log 4) = 2 times their share, renormalised
    link = core.wcmp_links[0]
    split = core.decode(core.validate(a))
    base = POLICIES["spray+bg"](core.world, None)
    paths = sim.conn_paths_global  # (C, P, hops)
    through = (paths == link).any(axis=2)  # (C, P)
    c = int(np.flatnonzero(through.any(axis=1) & (sim.conn_npaths > 1))[0])
    n = int(sim.conn_npaths[c])
    k = int(through[c, :n].sum())
    # an even split over n paths, k of them through the link: those get 2 / (2k + n - k), the rest 1 / (...)
    want = np.where(through[c, :n], 2.0, 1.0) / (2 * k + (n - k))
    np.testing.assert_allclose(split[c, :n], want, rtol=1e-12)
    np.testing.assert_allclose(base[c, :n], 1.0 / n)


def test_bad_residual_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match=r"residual = 'lp': not a base policy; allowed: .*lp\+bg"):
        EnvCore("ingest-bursts", action_mode="ecmp_weights", residual="lp")
    with pytest.raises(ValueError, match=r"with action_mode = 'split': a residual policy acts in"):
        EnvCore("ingest-bursts", action_mode="split", residual="lp+bg")
    with pytest.raises(ValueError, match=r"residual_scale = 0: allowed"):
        EnvCore("ingest-bursts", action_mode="split_bg", residual="lp+bg", residual_scale=0)


def test_a_residual_model_trains_saves_checkpoints_and_evaluates_with_its_base(tmp_path) -> None:
    from _scenarios import small_spine_leaf

    from ainet_gym.agents.evaluate import EvalConfig, evaluate
    from ainet_gym.agents.sb3_agents import SB3Agent, read_metadata
    from ainet_gym.agents.train import train
    from ainet_gym.agents.train_config import TrainConfig
    from ainet_gym.agents.train_meta import select_checkpoint

    sc = small_spine_leaf(8, name="res-small")
    res = train(
        TrainConfig(
            scenario=sc, action_mode="split_bg", residual="lp+bg", residual_scale=0.5, timesteps=32,
            n_envs=2, logdir=tmp_path, out=tmp_path / "m.zip", progress=False, save_every=16,
            log_std_init=-2.0, hyperparameters={"n_steps": 8, "batch_size": 8, "n_epochs": 1},
        )
    )  # fmt: skip
    meta = read_metadata(res.model_path)
    assert (meta["residual"], meta["residual_scale"]) == ("lp+bg", 0.5)
    agent = SB3Agent(res.model_path)
    assert agent.env_kwargs["residual"] == "lp+bg" and agent.env_kwargs["action_mode"] == "split_bg"
    assert res.model.policy.log_std.detach().numpy().max() < -1.5  # log_std_init -2, barely trained
    ckpts = sorted((res.run_dir / "checkpoints").glob("*.zip"))
    assert [p.name for p in ckpts] == ["model_000000016.zip", "model_000000032.zip"]
    best, scores = select_checkpoint(res.run_dir / "checkpoints", sc, [100, 101])
    assert best in ckpts and len(scores) == 2
    out = evaluate(EvalConfig(sc, policies=[f"ppo:{best}"], seeds=[1], out=None))
    assert (
        out["policies"][f"ppo:{best}"]["controls"] == "jobs+bg"
        and out["policies"][f"ppo:{best}"]["lp_reference"] == "lp+bg"
    )


def test_learning_rate_and_target_kl_reach_ppo(tmp_path) -> None:
    # --learning-rate sets the start of PPO's linear decay (to a tenth, like the default 3e-4 -> 3e-5) and
    # --target-kl stops an update's epochs early: with a limit no step can respect, one epoch of 4 runs
    from _scenarios import small_spine_leaf

    from ainet_gym.agents.train import train
    from ainet_gym.agents.train_config import TrainConfig

    sc = small_spine_leaf(8, name="lr-small")
    hp = {"n_steps": 8, "batch_size": 4, "n_epochs": 4}
    runs = {}
    for kl in (None, 1e-9):
        runs[kl] = train(
            TrainConfig(
                scenario=sc, action_mode="split_bg", residual="lp+bg", timesteps=16, n_envs=2,
                logdir=tmp_path, out=tmp_path / f"m{kl}.zip", progress=False, learning_rate=1e-3,
                target_kl=kl, hyperparameters=hp,
            )
        ).model  # fmt: skip
    m = runs[1e-9]
    assert m.lr_schedule(1.0) == pytest.approx(1e-3) and m.lr_schedule(0.0) == pytest.approx(1e-4)
    assert m.target_kl == 1e-9 and runs[None].target_kl is None
    assert runs[None]._n_updates == 4  # one rollout of 16 steps, 4 epochs
    assert m._n_updates == 1  # stopped after the first epoch


def test_target_kl_is_refused_outside_ppo(tmp_path) -> None:
    from _scenarios import small_spine_leaf

    from ainet_gym.agents.train import train
    from ainet_gym.agents.train_config import TrainConfig

    with pytest.raises(ValueError, match="target_kl: a2c has no KL limit"):
        train(
            TrainConfig(
                scenario=small_spine_leaf(4), algo="a2c", timesteps=8, n_envs=1, logdir=tmp_path,
                out=tmp_path / "a.zip", progress=False, target_kl=0.02,
            )
        )  # fmt: skip


def test_ent_coef_reaches_the_loss_of_a_choose_policy(tmp_path) -> None:
    # --ent-coef weights the entropy bonus of PPO's loss (the model carries it; default 0); SAC, whose
    # entropy weight is a temperature of another meaning, refuses it
    from _scenarios import small_spine_leaf

    from ainet_gym.agents.train import train
    from ainet_gym.agents.train_config import TrainConfig

    sc = small_spine_leaf(8, name="ent-small")
    hp = {"n_steps": 8, "batch_size": 4, "n_epochs": 1}
    runs = {}
    for ent in (None, 0.05):
        runs[ent] = train(
            TrainConfig(
                scenario=sc, action_mode="choose_bg", timesteps=16, n_envs=2, logdir=tmp_path,
                out=tmp_path / f"e{ent}.zip", progress=False, ent_coef=ent, hyperparameters=hp,
            )
        ).model  # fmt: skip
    assert runs[0.05].ent_coef == 0.05 and runs[None].ent_coef == 0.0
    with pytest.raises(ValueError, match="ent_coef: sac has no entropy coefficient"):
        train(
            TrainConfig(
                scenario=sc, algo="sac", timesteps=8, n_envs=1, logdir=tmp_path, out=tmp_path / "s.zip",
                progress=False, ent_coef=0.01,
            )
        )  # fmt: skip
