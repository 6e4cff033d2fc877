"""The env and the model of an SB3 training run (:mod:`ainet_gym.agents.train`): what the run trains in, from
its config or from the resumed (or initialising) model's metadata (:func:`run_settings`), the monitored native
vector env and the model, new with the run's hyperparameters, resumed, or initialised from another model's
policy (:func:`env_and_model`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ainet_gym.agents.sb3_agents import (
    algo_class,
    default_hyperparameters,
    load_model,
    read_metadata,
    resolve_action_mode,
    space_signature,
)
from ainet_gym.agents.train_config import TrainConfig
from ainet_gym.envs.registration import TRAIN_SEED_OFFSET

__all__ = [
    "env_and_model",
    "run_settings",
]


def _source_model(
    path: str | Path, flag: str, algo: str, env: Any, scenario: str, meta_in: dict[str, Any]
) -> Any:
    """The model of ``path`` (``--resume`` or ``--init-from``: ``flag``), checked to fit ``env``'s spaces."""
    try:
        model, _ = load_model(path, algo)
    except ValueError as e:
        raise ValueError(f"--{flag} {str(path)!r}: {e}") from None
    want = (space_signature(model.observation_space), space_signature(model.action_space))
    got = (space_signature(env.observation_space), space_signature(env.action_space))
    if want != got:
        raise ValueError(
            f"{flag}: model {str(path)!r} does not fit scenario {scenario!r}: it was trained "
            f"on {meta_in.get('scenario', '?')!r} with observations {want[0]} and actions {want[1]}; "
            f"this scenario gives observations {got[0]} and actions {got[1]}"
        )
    return model


def _check_source_fabric(cfg: TrainConfig, meta_in: dict[str, Any], fabric: Any) -> None:
    """Refuse the model of ``cfg.resume`` or ``cfg.init_from`` whose metadata ``meta_in`` records another
    fabric fingerprint than ``fabric`` (the run's env's), before any step, unless ``cfg.allow_other_fabric``;
    a model without one (saved before issue-26zh2) is not checked
    (:func:`~ainet_gym.agents.model_files.check_source_fabric`).

    Raises
    ------
    ValueError
        One line naming the flag, the file, both fingerprints and what is allowed; :class:`ModelFileError` if
        the recorded value is not a non-empty string.
    """
    from ainet_gym.agents.model_files import check_source_fabric
    from ainet_gym.agents.sb3_files import META_MEMBER

    source, flag = (cfg.resume, "resume") if cfg.init_from is None else (cfg.init_from, "init-from")
    if source is not None:
        check_source_fabric(flag, source, meta_in, fabric, cfg.allow_other_fabric, META_MEMBER)


def _resumed_model(cfg: TrainConfig, algo: str, env: Any, scenario: str, meta_in: dict[str, Any]) -> Any:
    """The model of ``cfg.resume`` on ``env``, checked to fit its spaces, seeded with ``cfg.seed``."""
    model = _source_model(cfg.resume, "resume", algo, env, scenario, meta_in)  # type: ignore[arg-type]
    model.set_env(env)
    model.set_random_seed(cfg.seed)
    return model


def _initialised_model(
    cfg: TrainConfig,
    cls: type,
    policy: str,
    env: Any,
    hp: dict[str, Any],
    scenario: str,
    meta_in: dict[str, Any],
) -> Any:
    """A new model on ``env`` with this run's hyperparameters ``hp`` whose policy (its ``policy_kwargs``: the
    architecture, the features extractor) and weights are those of ``cfg.init_from``: a fresh optimiser and step
    counter, seeded with ``cfg.seed``."""
    src = _source_model(cfg.init_from, "init-from", cfg.algo, env, scenario, meta_in)  # type: ignore[arg-type]
    hp = {**hp, "policy_kwargs": dict(src.policy_kwargs)}
    model = cls(policy, env, seed=cfg.seed, device="cpu", verbose=cfg.verbose, **hp)
    model.policy.load_state_dict(src.policy.state_dict())
    return model


def _hyperparameters(cfg: TrainConfig, algo: str, episode_steps: int) -> dict[str, Any]:
    """The algorithm's defaults for this episode length and vector size, ``cfg.hyperparameters`` over them,
    then the options given one by one (each refused for an algorithm that has no such option)."""
    from stable_baselines3.common.utils import LinearSchedule

    hp = default_hyperparameters(algo, episode_steps, cfg.n_envs) | dict(cfg.hyperparameters)
    if cfg.log_std_init is not None:
        hp["policy_kwargs"] = {**hp.get("policy_kwargs", {}), "log_std_init": float(cfg.log_std_init)}
    if cfg.learning_rate is not None:
        lr = float(cfg.learning_rate)
        hp["learning_rate"] = LinearSchedule(lr, lr / 10, 1.0) if algo in ("ppo", "maskable_ppo") else lr
    if cfg.target_kl is not None:
        if algo not in ("ppo", "maskable_ppo"):
            raise ValueError(f"target_kl: {algo} has no KL limit; it is a PPO option (--algo ppo)")
        hp["target_kl"] = float(cfg.target_kl)
    if cfg.ent_coef is not None:
        if algo not in ("ppo", "maskable_ppo", "a2c"):
            raise ValueError(f"ent_coef: {algo} has no entropy coefficient; it is a PPO or A2C option")
        if not (math.isfinite(cfg.ent_coef) and cfg.ent_coef >= 0):
            raise ValueError(f"ent_coef = {cfg.ent_coef}: allowed: a finite number >= 0")
        hp["ent_coef"] = float(cfg.ent_coef)
    if cfg.gamma is not None:
        if not (math.isfinite(cfg.gamma) and 0 < cfg.gamma <= 1):
            raise ValueError(f"gamma = {cfg.gamma}: allowed: a number in (0, 1]")
        hp["gamma"] = float(cfg.gamma)
    return hp


def env_and_model(
    cfg: TrainConfig,
    scenario: Any,
    action_mode: str,
    history: int,
    observation: str,
    res_kw: dict[str, Any],
    meta_in: dict[str, Any],
) -> tuple[Any, Any, Any]:
    """The run's SB3 vector env (monitored), its ``EnvCore`` and the model: the one ``cfg.resume`` names, or a
    new one with the run's hyperparameters; the env's seeds set after SB3's own (small seeds held out). A
    source model of another fabric is refused here, before any step (:func:`_check_source_fabric`)."""
    from stable_baselines3.common.vec_env import VecMonitor

    from ainet_gym.envs.sb3_vec_env import SB3VecEnv

    algo = cfg.algo
    cls = algo_class(algo)
    venv = SB3VecEnv(
        num_envs=cfg.n_envs,
        scenario=scenario,
        action_mode=action_mode,
        history=history,
        observation=observation,
        episode_steps=cfg.episode_steps,
        **res_kw,
    )
    env = VecMonitor(venv)
    core = venv.core
    _check_source_fabric(cfg, meta_in, getattr(core, "fabric", None))  # before the model is read
    if cfg.resume is not None:
        return env, core, _resumed_model(cfg, algo, env, scenario.name, meta_in)
    hp = _hyperparameters(cfg, algo, core.episode_steps)
    if cfg.obs_blocks:  # a features extractor over the named blocks only
        from ainet_gym.agents.block_features import block_policy_kwargs

        hp["policy_kwargs"] = hp.get("policy_kwargs", {}) | block_policy_kwargs(
            core.obs_layout, cfg.obs_blocks
        )
    policy = "MultiInputPolicy" if observation == "graph" else "MlpPolicy"
    if cfg.init_from is not None:
        model = _initialised_model(cfg, cls, policy, env, hp, scenario.name, meta_in)
    else:
        model = cls(policy, env, seed=cfg.seed, device="cpu", verbose=cfg.verbose, **hp)
    env.seed(TRAIN_SEED_OFFSET + cfg.seed)  # after SB3's own env.seed(seed): keep small seeds held out
    return env, core, model


def run_settings(cfg: TrainConfig) -> tuple[str, int, str, str | None, dict[str, Any], dict[str, Any]]:
    """What a run trains in: the action mode, history, observation, residual base and the env keywords
    (``residual``, ``residual_scale``, ``obs_features``, ``extra_plans``) of ``cfg``, or of the resumed (or
    initialising) model's metadata (also returned) with ``cfg.resume`` (``cfg.init_from``)."""
    algo, action_mode, history, observation = cfg.algo, cfg.action_mode, cfg.history, "flat"
    meta_in: dict[str, Any] = {}
    source, flag = (cfg.resume, "resume") if cfg.init_from is None else (cfg.init_from, "init-from")
    if source is not None:
        try:
            meta_in = read_metadata(source)
        except (ValueError, FileNotFoundError) as e:
            raise type(e)(f"--{flag} {str(source)!r}: {e}") from None
        trained = meta_in.get("algo", algo)
        if trained != algo:
            raise ValueError(f"{flag}: {str(source)!r} was trained with {trained}; pass --algo {trained}")
        action_mode = meta_in.get("action_mode", action_mode)
        history = int(meta_in.get("history", history))
        observation = meta_in.get("observation", observation)
    action_mode = resolve_action_mode(algo, action_mode)
    residual = cfg.residual if source is None else meta_in.get("residual")
    scale = cfg.residual_scale if source is None else meta_in.get("residual_scale")
    res_kw: dict[str, Any] = {} if residual is None else {"residual": residual}
    if residual is not None and scale is not None:
        res_kw["residual_scale"] = float(scale)
    obs_features = tuple(cfg.obs_features if source is None else meta_in.get("obs_features", ()))
    if obs_features:
        res_kw["obs_features"] = obs_features
    extra = tuple(cfg.extra_plans if source is None else meta_in.get("extra_plans", ()))
    if extra:
        res_kw["extra_plans"] = extra
    return action_mode, history, observation, residual, res_kw, meta_in
