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
    from ainet_gym.agents.train import TrainConfig, select_checkpoint, train

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
        out["policies"]["ppo"]["controls"] == "jobs+bg" and out["policies"]["ppo"]["lp_reference"] == "lp+bg"
    )
