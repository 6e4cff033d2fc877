""":func:`ainet_gym.envs.rllib.ppo_config` on stub Ray modules (the main suite has no Ray): the builder chain
it makes, each call with its keywords, and its refusals. Written before its split (issue 31) and passing on
main (21b61d2): the split must build the same chain; ``make check-rllib`` builds it on real RLlib."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

import ainet_gym.envs
from ainet_gym.envs.registration import TRAIN_SEED_OFFSET

#: the stub modules: every package on the way to the names ainet_gym.envs.rllib imports
RAY_MODULES = (
    "ray",
    "ray.rllib",
    "ray.rllib.algorithms",
    "ray.rllib.algorithms.ppo",
    "ray.rllib.algorithms.ppo.torch",
    "ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module",
    "ray.rllib.core",
    "ray.rllib.core.rl_module",
    "ray.rllib.core.rl_module.rl_module",
    "ray.tune",
    "ray.tune.registry",
)


class _Config:
    """A ``PPOConfig`` that records each builder call (its name and keywords) and returns itself."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        def builder(*args: Any, **kw: Any) -> _Config:
            assert not args or name == "callbacks", f"{name}: positional arguments {args}"
            self.calls.append((name, {"args": list(args)} if args else kw))
            return self

        return builder


@pytest.fixture
def stub_rllib(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[tuple[str, dict[str, Any]]]]]:
    """:mod:`ainet_gym.envs.rllib` imported on stub Ray modules, and the list of the calls its ``PPOConfig``,
    ``RLModuleSpec`` and ``register_env`` receive; the real (absent) module is back afterwards."""
    calls: list[tuple[str, dict[str, Any]]] = []
    mods = {name: types.ModuleType(name) for name in RAY_MODULES}
    mods["ray.rllib.algorithms.ppo"].PPOConfig = lambda: _Config(calls)  # type: ignore[attr-defined]
    mods["ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module"].DefaultPPOTorchRLModule = type(  # type: ignore[attr-defined]
        "DefaultPPOTorchRLModule", (), {}
    )
    mods["ray.rllib.core.rl_module.rl_module"].RLModuleSpec = lambda **kw: ("RLModuleSpec", kw)  # type: ignore[attr-defined]
    mods["ray.tune.registry"].register_env = lambda name, creator: calls.append(  # type: ignore[attr-defined]
        ("register_env", {"name": name, "creator": creator.__name__})
    )
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delitem(sys.modules, "ainet_gym.envs.rllib", raising=False)
    monkeypatch.delattr(ainet_gym.envs, "rllib", raising=False)
    arl = importlib.import_module("ainet_gym.envs.rllib")
    yield arl, calls
    sys.modules.pop("ainet_gym.envs.rllib", None)  # monkeypatch puts back what was there before
    if getattr(ainet_gym.envs, "rllib", None) is arl:
        delattr(ainet_gym.envs, "rllib")


def _chain(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """The calls with the env config's scenario mapping replaced by its name."""
    out = []
    for name, kw in calls:
        if name == "environment":
            kw = {**kw, "env_config": {**kw["env_config"], "scenario": kw["env_config"]["scenario"]["name"]}}
        out.append((name, kw))
    return out


def test_ppo_config_builds_the_sb3_defaults_chain(stub_rllib: tuple[Any, list]) -> None:
    arl, calls = stub_rllib
    cfg = arl.ppo_config("spine-leaf-2to1", seed=3, lr_final=3e-5, decay_steps=1000)
    model = {"fcnet_hiddens": [128, 128], "fcnet_activation": "tanh", "vf_share_layers": False,
             "free_log_std": True, "log_std_init": -1.0}  # fmt: skip
    # 2 runners x 16 envs x 64 steps = 2048 a batch, minibatches of 256
    assert _chain(calls) == [
        ("register_env", {"name": arl.ENV_NAME, "creator": "make_env"}),
        ("environment", {"env": arl.ENV_NAME, "env_config": {
            "scenario": "spine-leaf-2to1", "action_mode": "split", "history": 4, "episode_steps": 64}}),
        ("env_runners", {"num_env_runners": 2, "num_envs_per_env_runner": 16,
                         "gym_env_vectorize_mode": "vector_entry_point", "rollout_fragment_length": 64,
                         "num_cpus_per_env_runner": 1}),
        ("learners", {"num_learners": 0}),
        ("training", {"lr": [[0, 3e-4], [1000, 3e-5]], "gamma": 0.9, "lambda_": 0.9, "clip_param": 0.2,
                      "entropy_coeff": 0.0, "use_kl_loss": False, "grad_clip": 0.5,
                      "grad_clip_by": "global_norm", "vf_loss_coeff": 0.5, "num_epochs": 10,
                      "train_batch_size_per_learner": 2048, "minibatch_size": 256}),
        ("rl_module", {"rl_module_spec": ("RLModuleSpec", {"module_class": arl.FabricPPOTorchRLModule,
                                                           "model_config": model})}),
        ("debugging", {"seed": TRAIN_SEED_OFFSET + 3}),
    ]  # fmt: skip
    assert isinstance(cfg, _Config)


def test_ppo_config_path_mode_small_batches_callbacks_and_extra_keywords(
    stub_rllib: tuple[Any, list],
) -> None:
    arl, calls = stub_rllib

    class Callbacks:
        pass

    arl.ppo_config(
        "spine-leaf-2to1", num_env_runners=0, envs_per_runner=3, action_mode="path", history=2,
        episode_steps=5, lr=1e-3, env_name="fabric-test", callbacks=Callbacks,
        hyperparameters={"vf_clip_param": 10.0},
    )  # fmt: skip
    chain = dict(_chain(calls))
    assert chain["register_env"] == {"name": "fabric-test", "creator": "make_env"}
    assert chain["environment"] == {"env": "fabric-test", "env_config": {
        "scenario": "spine-leaf-2to1", "action_mode": "path", "history": 2, "episode_steps": 5}}  # fmt: skip
    # one runner counted (0: the driver samples), a fragment of at least 16 steps: 3 x 16 = 48, one minibatch
    assert chain["env_runners"]["rollout_fragment_length"] == 16
    assert chain["env_runners"]["num_env_runners"] == 0
    training = chain["training"]
    assert (training["lr"], training["train_batch_size_per_learner"], training["minibatch_size"]) == (
        1e-3,
        48,
        48,
    )
    assert training["vf_clip_param"] == 10.0
    assert chain["rl_module"]["rl_module_spec"][1]["model_config"] == {
        "fcnet_hiddens": [128, 128], "fcnet_activation": "tanh", "vf_share_layers": False}  # fmt: skip
    assert [c[0] for c in calls][-2:] == ["debugging", "callbacks"]
    assert calls[-1] == ("callbacks", {"args": [Callbacks]})


@pytest.mark.parametrize(
    ("kw", "must"),
    [
        ({"num_env_runners": -1}, "num_env_runners = -1: must be an integer >= 0"),
        ({"envs_per_runner": 0}, "envs_per_runner = 0: must be an integer >= 1"),
        ({"envs_per_runner": True}, "envs_per_runner = True: must be an integer >= 1"),
        ({"action_mode": "graph"}, "action_mode = 'graph': RLlib PPO supports split, ecmp_weights, path"),
        ({"lr_final": 0.0, "decay_steps": 10}, "lr_final = 0.0, decay_steps = 10: must be > 0 and >= 1"),
        ({"lr_final": 1e-5, "decay_steps": 0}, "lr_final = 1e-05, decay_steps = 0: must be > 0 and >= 1"),
    ],
)
def test_ppo_config_refuses_bad_arguments_before_registering(
    stub_rllib: tuple[Any, list], kw: dict[str, Any], must: str
) -> None:
    arl, calls = stub_rllib
    with pytest.raises(ValueError, match="^" + must.replace("(", r"\(")):
        arl.ppo_config("spine-leaf-2to1", **kw)
    assert calls == []
