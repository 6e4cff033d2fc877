"""Ray RLlib integration: the fabric env on RLlib's new API stack (optional extra ``rllib``).

Import this module only when you use RLlib (``pip install 'ainet-gym[rllib]'``); importing it without
Ray raises an :class:`ImportError` that names the extra.

:func:`register` registers the env under :data:`ENV_NAME` with ``ray.tune.registry.register_env``.
RLlib's ``SingleAgentEnvRunner`` then builds it through Gymnasium's vector entry point
(``gym_env_vectorize_mode="vector_entry_point"``): the creator gets the ``env_config`` plus
``num_envs = num_envs_per_env_runner`` and returns one native
:class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv`, so every env runner steps its copies in one
batched engine call. Its infos are Gymnasium's vector form (a dict of arrays with ``_key`` masks),
which RLlib's ``DictInfoToList`` wrapper splits per copy. Without ``num_envs`` (the ``sync`` and
``async`` modes) the creator returns a single :class:`~ainet_gym.envs.env.FabricRoutingEnv`.

``env_config`` keys are the env constructor's arguments (``scenario``, ``action_mode``, ``history``,
``observation``, ``reward``, ``episode_steps``, ...) plus ``num_envs``; an unknown key is an error
naming the allowed ones. Pass the scenario as a mapping (:func:`scenario_config`) so that env runners on
other nodes need no scenario file.

:func:`ppo_config` is the ``PPOConfig`` used by ``ainet-gym train --framework rllib``: the same
network, discount, GAE, clipping and rollout length (one episode per env per update) as the SB3 PPO
defaults in :func:`ainet_gym.agents.sb3_agents.default_hyperparameters`.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.envs.gym_env import FabricRoutingEnv
from ainet_gym.envs.vector_env import FabricRoutingVectorEnv
from ainet_gym.errors import names_message
from ainet_gym.scenario.loader import load_scenario
from ainet_gym.scenario.spec import Scenario

try:
    import ray
    import torch
    from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
    from ray.tune.registry import register_env
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"ainet_gym.envs.rllib needs Ray RLlib, the optional extra 'rllib': pip install 'ainet-gym[rllib]' ({e})"
    ) from e

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

__all__ = [
    "ENV_NAME",
    "RLLIB_ACTION_MODES",
    "FabricPPOTorchRLModule",
    "RLlibVectorEnv",
    "env_config_keys",
    "init_ray",
    "make_env",
    "ppo_config",
    "register",
    "scenario_config",
]

#: the name the env is registered under with ``ray.tune.registry.register_env``.
ENV_NAME = "ainet_gym-FabricRouting"
#: action modes RLlib's default PPO module can act in (Box: diagonal Gaussian; MultiDiscrete: one
#: categorical per slot, without masks: indices past a connection's paths wrap, as the env defines;
#: Discrete: one categorical over the plans of the choose modes).
RLLIB_ACTION_MODES = ("split", "ecmp_weights", "path", "choose", "choose_bg")


def env_config_keys() -> tuple[str, ...]:
    """The ``env_config`` keys the creator accepts: the vector env's constructor arguments."""
    params = inspect.signature(FabricRoutingVectorEnv.__init__).parameters
    return tuple(k for k in params if k != "self")


def make_env(env_config: Mapping[str, Any] | None = None) -> FabricRoutingVectorEnv | FabricRoutingEnv:
    """The env creator registered with RLlib.

    With ``num_envs`` in ``env_config`` (RLlib's ``vector_entry_point`` mode) returns a native
    :class:`FabricRoutingVectorEnv` of that many copies; without it a single :class:`FabricRoutingEnv`.
    ``env_config`` may be RLlib's ``EnvContext`` (a dict with ``worker_index`` etc. as attributes).

    Raises
    ------
    ValueError
        If a key is not a constructor argument, or ``num_envs`` is not an integer >= 1.
    """
    cfg = dict(env_config or {})
    allowed = env_config_keys()
    if any(k not in allowed for k in cfg):
        raise ValueError(names_message("env_config keys", list(cfg), allowed))
    if "num_envs" in cfg:
        n = cfg["num_envs"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"env_config num_envs = {n!r}: must be an integer >= 1")
        return RLlibVectorEnv(**cfg)
    return FabricRoutingEnv(**cfg)


class RLlibVectorEnv(FabricRoutingVectorEnv):
    """The native vector env with disjoint episode seeds per env runner.

    RLlib seeds env runner ``w`` with ``config.seed + w``; the native env seeds copy ``i`` with
    ``seed + i``, so two runners would start 15 of 16 copies on the same episodes. Here an integer
    seed ``s`` seeds copy ``i`` with ``s * num_envs + i`` (disjoint blocks per runner); everything
    else is :class:`FabricRoutingVectorEnv`.
    """

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if isinstance(seed, int) and not isinstance(seed, bool):
            seed = [int(seed) * self.num_envs + i for i in range(self.num_envs)]
            obs, info = super().reset(seed=seed, options=options)
            self._rng = np.random.default_rng(seed[0])
            return obs, info
        return super().reset(seed=seed, options=options)


class FabricPPOTorchRLModule(DefaultPPOTorchRLModule):
    """RLlib's default PPO module, with the Gaussian's initial log std from ``model_config``.

    ``model_config["log_std_init"]`` (with ``free_log_std=True``) sets the state-independent log std
    the policy starts from, as SB3's ``log_std_init`` does: -1.0 (std 0.37) in the fabric defaults,
    because with hundreds of action dimensions in [-1, 1] RLlib's default (std 1) mostly samples
    clipped noise (measured: no progress over 27k steps on periodic-interference).
    """

    def setup(self) -> None:
        super().setup()
        init = self.model_config.get("log_std_init") if isinstance(self.model_config, dict) else None
        log_std = getattr(self.pi, "log_std", None)
        if init is not None and isinstance(log_std, torch.nn.Parameter):
            with torch.no_grad():
                log_std.fill_(float(init))


def register(name: str = ENV_NAME) -> str:
    """Register :func:`make_env` with Ray Tune's registry under ``name``; returns ``name``."""
    register_env(name, make_env)
    return name


def scenario_config(scenario: str | os.PathLike | Mapping | Scenario) -> dict[str, Any]:
    """The scenario as a plain mapping (its validated YAML content), to ship in ``env_config``.

    Raises
    ------
    ScenarioError
        If the scenario does not load.
    """
    sc = load_scenario(scenario)
    return dict(sc.raw)


def init_ray(
    address: str | None = None,
    num_env_runners: int = 0,
    object_store_mb: int | None = 256,
    temp_dir: str | os.PathLike | None = None,
) -> None:
    """Start local Ray (``address=None``) or join a cluster (``"auto"`` or ``"HOST:PORT"``).

    Local Ray gets ``max(cores, num_env_runners + 1)`` logical CPUs: each env runner and the driver
    (which runs the learner when ``num_learners = 0``) reserve one, so 2 env runners can run on a
    2-core machine (oversubscribed, not deadlocked). ``object_store_mb`` caps the local object store
    (Ray's default is 30% of RAM; episodes of the fabric envs are small), so a command that starts Ray
    runs under a 4 GB address-space limit (``ulimit -v 4194304``; tested). ``temp_dir`` (default:
    ``$AINET_GYM_RAY_TMPDIR``, else Ray's own) is Ray's session folder, e.g. one per user or test run
    beside other Ray instances on the host. Does nothing if Ray is already initialised.
    """
    if ray.is_initialized():
        return
    if address is not None:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        return
    cpus = max(os.cpu_count() or 1, int(num_env_runners) + 1)
    kw: dict[str, Any] = {}
    temp_dir = temp_dir if temp_dir is not None else os.environ.get("AINET_GYM_RAY_TMPDIR")
    if temp_dir:
        kw["_temp_dir"] = str(Path(temp_dir).resolve())
    if object_store_mb is not None:
        kw["object_store_memory"] = int(object_store_mb) * 1024 * 1024
    # address="local": a new local instance even if this host ran `ray start` before (Ray would otherwise
    # try to join the cluster recorded in /tmp/ray, live or not)
    ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False, **kw)


def _check_ppo_counts(num_env_runners: int, envs_per_runner: int, action_mode: str) -> None:
    """:func:`ppo_config`'s counts (integers, ``>= 0`` runners, ``>= 1`` envs per runner) and action mode."""
    for name, v, lo in (("num_env_runners", num_env_runners, 0), ("envs_per_runner", envs_per_runner, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} = {v!r}: must be an integer >= {lo}")
    if action_mode not in RLLIB_ACTION_MODES:
        raise ValueError(f"action_mode = {action_mode!r}: RLlib PPO supports {', '.join(RLLIB_ACTION_MODES)}")


def _ppo_sizes(num_env_runners: int, envs_per_runner: int, steps: int) -> tuple[int, int, int]:
    """(rollout fragment, train batch, minibatch) of :func:`ppo_config`: one episode (at least 16 steps, as
    SB3's ``n_steps``) per env copy, the batch all of them, the largest minibatch of at most 256 dividing it."""
    runners = max(1, num_env_runners)
    fragment = max(steps, 16)  # as SB3's n_steps
    batch = runners * envs_per_runner * fragment
    minibatch = max(d for d in range(1, min(256, batch) + 1) if batch % d == 0)
    return fragment, batch, minibatch


def _lr_schedule(lr: float, lr_final: float | None, decay_steps: int | None) -> float | list[list[float]]:
    """``lr``, or with ``lr_final`` and ``decay_steps`` RLlib's piecewise-linear schedule from ``lr`` to
    ``lr_final`` over ``decay_steps`` sampled env steps."""
    if lr_final is not None and decay_steps is not None:
        if decay_steps < 1 or not lr_final > 0:
            raise ValueError(f"lr_final = {lr_final!r}, decay_steps = {decay_steps!r}: must be > 0 and >= 1")
        return [[0, lr], [int(decay_steps), lr_final]]
    return lr


def _ppo_env_config(
    scenario: str | os.PathLike | Mapping | Scenario,
    action_mode: str,
    history: int,
    episode_steps: int | None,
) -> dict[str, Any]:
    """:func:`ppo_config`'s ``env_config``: the scenario as a mapping (:func:`scenario_config`), the action
    mode, the history and the episode length (the scenario's ``dynamics.episode_steps`` unless given)."""
    sc = load_scenario(scenario)
    steps = int(episode_steps if episode_steps is not None else sc.dynamics.episode_steps)
    return {
        "scenario": scenario_config(sc),
        "action_mode": action_mode,
        "history": int(history),
        "episode_steps": steps,
    }


def _ppo_model_config(action_mode: str) -> dict[str, Any]:
    """:func:`ppo_config`'s module: two hidden layers of 128 (tanh) for policy and value, not shared, as SB3's
    ``MlpPolicy``; Box actions (every mode but ``path``) a free log std starting at -1, SB3's
    ``log_std_init`` (:class:`FabricPPOTorchRLModule`)."""
    model: dict[str, Any] = {
        "fcnet_hiddens": [128, 128],
        "fcnet_activation": "tanh",
        "vf_share_layers": False,
    }
    if action_mode != "path":
        model |= {"free_log_std": True, "log_std_init": -1.0}
    return model


def _ppo_training(rate: float | list[list[float]], batch: int, minibatch: int) -> dict[str, Any]:
    """:func:`ppo_config`'s ``training(...)`` keywords, each SB3 PPO's default: learning rate ``rate``
    (:func:`_lr_schedule`), discount and GAE lambda 0.9, clip 0.2, no entropy bonus, no KL penalty, gradient
    norm clipped at 0.5, value loss weight 0.5, 10 epochs over the ``batch`` in minibatches of ``minibatch``
    (:func:`_ppo_sizes`)."""
    return {
        "lr": rate,
        "gamma": 0.9,
        "lambda_": 0.9,
        "clip_param": 0.2,
        "entropy_coeff": 0.0,
        "use_kl_loss": False,
        "grad_clip": 0.5,
        "grad_clip_by": "global_norm",
        "vf_loss_coeff": 0.5,
        "num_epochs": 10,
        "train_batch_size_per_learner": batch,
        "minibatch_size": minibatch,
    }


def ppo_config(
    scenario: str | os.PathLike | Mapping | Scenario,
    *,
    num_env_runners: int = 2,
    envs_per_runner: int = 16,
    seed: int = 0,
    action_mode: str = "split",
    history: int = 4,
    episode_steps: int | None = None,
    lr: float = 3e-4,
    lr_final: float | None = None,
    decay_steps: int | None = None,
    env_name: str = ENV_NAME,
    callbacks: type | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
) -> PPOConfig:
    """An RLlib ``PPOConfig`` on the native vector env, matching the SB3 PPO defaults: the arguments
    checked (:func:`_check_ppo_counts`, :func:`_lr_schedule`), the env config (:func:`_ppo_env_config`), the
    rollout sizes (:func:`_ppo_sizes`), the module (:func:`_ppo_model_config`) and the training keywords
    (:func:`_ppo_training`, each the SB3 default it mirrors), then one builder chain.

    One training iteration samples one episode from every copy: ``train_batch_size_per_learner =
    max(1, num_env_runners) * envs_per_runner * episode_steps`` (``rollout_fragment_length =
    episode_steps``), 10 epochs of minibatches of at most 256, ``gamma`` 0.9, ``lambda`` 0.9, clip 0.2,
    two hidden layers of 128 for policy and value (not shared), no KL penalty, gradient norm clipped at
    0.5, value loss weight 0.5 and (Box actions) a free log std starting at -1 (:class:`FabricPPOTorchRLModule`),
    as SB3's PPO. ``seed`` seeds RLlib (torch, the env
    runners); training episodes use seeds ``TRAIN_SEED_OFFSET + seed + ...`` so the small evaluation
    seeds stay held out. With ``lr_final`` and ``decay_steps`` the learning rate falls linearly from ``lr``
    to ``lr_final`` over ``decay_steps`` sampled env steps (SB3's default is 3e-4 to 3e-5 over the run).
    ``hyperparameters`` are extra ``config.training(...)`` keywords.

    Raises
    ------
    ValueError
        Bad counts or an action mode RLlib cannot act in.
    """
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from ainet_gym.envs.registration import TRAIN_SEED_OFFSET

    _check_ppo_counts(num_env_runners, envs_per_runner, action_mode)
    env_config = _ppo_env_config(scenario, action_mode, history, episode_steps)
    fragment, batch, minibatch = _ppo_sizes(num_env_runners, envs_per_runner, env_config["episode_steps"])
    rate = _lr_schedule(lr, lr_final, decay_steps)
    register(env_name)
    spec = RLModuleSpec(module_class=FabricPPOTorchRLModule, model_config=_ppo_model_config(action_mode))
    cfg = (
        PPOConfig()
        .environment(env=env_name, env_config=env_config)
        .env_runners(
            num_env_runners=num_env_runners,
            num_envs_per_env_runner=envs_per_runner,
            gym_env_vectorize_mode="vector_entry_point",
            rollout_fragment_length=fragment,
            num_cpus_per_env_runner=1,
        )
        .learners(num_learners=0)
        .training(**_ppo_training(rate, batch, minibatch), **dict(hyperparameters or {}))
        .rl_module(rl_module_spec=spec)
        .debugging(seed=TRAIN_SEED_OFFSET + int(seed))
    )
    if callbacks is not None:
        cfg = cfg.callbacks(callbacks)
    return cfg
