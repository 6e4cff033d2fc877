"""``ainet-gym train``: train a stable-baselines3 agent on the native vector env.

The run is named CleanRL-style ``{scenario}__{algo}__{seed}__{unix time}`` (``{algo}-{action mode}``
when the mode is not the algorithm's default) and logs to
``{logdir}/{run name}/``: TensorBoard event files (SB3's curves plus the fabric's own under
``fabric/``, see :mod:`ainet_gym.agents.callbacks`) and ``progress.csv``. The model is saved with its metadata
(:func:`ainet_gym.agents.sb3_agents.save_model`) to ``--out`` (a ``.zip`` path is the model file, any other path a
directory that receives ``model.zip``; an existing model is replaced only with ``--overwrite``, and never
the one being resumed) or ``{logdir}/{run name}/model.zip``; ``--resume MODEL.zip`` continues training it (the step counter and the optimiser state carry on, the curves go
to a new run directory).

Seeds: model ``seed``; the training envs start from episode seeds ``1_000_000 + seed + i`` and draw
later ones from a generator seeded the same way, so the small seeds that ``ainet-gym evaluate`` uses
(1, 2, 3, ...) stay held out.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ainet_gym.agents.outputs import MODEL_FILE, check_model_out, fresh_dir, model_path, scenario_files
from ainet_gym.agents.sb3_agents import (
    algo_class,
    default_hyperparameters,
    load_model,
    read_metadata,
    resolve_action_mode,
    save_model,
    space_signature,
)
from ainet_gym.envs.registration import TRAIN_SEED_OFFSET
from ainet_gym.scenario.loader import load_scenario

__all__ = [
    "TRAIN_SEED_OFFSET",
    "TrainConfig",
    "TrainResult",
    "meta_maker",
    "report_run",
    "run_name",
    "select_checkpoint",
    "train",
    "train_arguments",
    "train_main",
]


@dataclass
class TrainConfig:
    """What to train, where, and for how long."""

    scenario: Any = "spine-leaf-2to1"
    """Shipped scenario name, YAML path, dict or Scenario."""
    algo: str = "ppo"
    """ppo | a2c | sac | maskable_ppo."""
    action_mode: str | None = None
    """path | split | ecmp_weights | split_bg; None: the algorithm's default (split; path for maskable_ppo)."""
    timesteps: int = 20_000
    """Environment steps to train (summed over the vector env's copies)."""
    seed: int = 0
    """Seed of the model and of the training episodes."""
    n_envs: int = 16
    """Copies in the native vector env (one batched engine call per step). 16 rather than 8: twice
    the samples per PPO update for the same wall time per step (the engine is batched); measured on
    spine-leaf-2to1 and periodic-interference it learns as fast and drifts less."""
    logdir: str | Path = "runs"
    """TensorBoard log directory; the run gets its own sub-directory."""
    out: str | Path | None = None
    """Where to save the model: a path ending in ``.zip`` is the model file, any other path a directory
    that receives ``model.zip``; default ``{logdir}/{run name}/model.zip`` (a fresh run folder)."""
    overwrite: bool = False
    """Allow ``out`` to replace an existing model (never the one ``resume`` reads)."""
    resume: str | Path | None = None
    """A saved model to continue training."""
    progress: bool = True
    """Show a progress bar (tqdm + rich)."""
    history: int = 4
    """Intervals of link-utilisation history in the observation."""
    episode_steps: int | None = None
    """Override the scenario's episode length."""
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    """Overrides of :func:`ainet_gym.agents.sb3_agents.default_hyperparameters`."""
    verbose: int = 0
    """SB3 verbosity (1 also prints the SB3 log table)."""
    torch_threads: int | None = 1
    """torch intra-op threads; small MLPs run fastest on one (None: leave torch's default)."""
    residual: str | None = None
    """A base routing the policy adjusts instead of routing from scratch (``ecmp_weights`` and
    ``split_bg`` modes; :class:`~ainet_gym.envs.env.FabricRoutingEnv`'s ``residual``), e.g. ``lp+bg``."""
    residual_scale: float | None = None
    """``residual_scale`` of the env (None: its default, log 4)."""
    save_every: int | None = None
    """Also save the model every this many steps, as ``{run dir}/checkpoints/model_{steps}.zip`` with
    its metadata, to pick a checkpoint on validation seeds (:func:`select_checkpoint`)."""
    log_std_init: float | None = None
    """Initial log standard deviation of a Gaussian policy's actions (None: the algorithm's default, -1
    for PPO): a residual policy explores close to its base with a smaller one."""
    learning_rate: float | None = None
    """Initial learning rate (None: the algorithm's default). PPO's decays linearly to a tenth of it, as
    its default does (3e-4 to 3e-5); the other algorithms keep it constant. A residual policy over
    hundreds of action dimensions with a small log std needs a smaller one: each Adam step moves every
    mean by about the same amount, and the policy ratio is a product over all dimensions."""
    target_kl: float | None = None
    """PPO only: stop an update's epochs early when the approximate KL divergence to the rollout's policy
    exceeds 1.5 times this (None: no limit, SB3's default)."""
    ent_coef: float | None = None
    """PPO and A2C: weight of the entropy bonus in the loss (None: the default, 0), to keep a discrete
    policy (the ``choose`` modes) from collapsing onto one plan before it has tried the others."""
    gamma: float | None = None
    """Discount factor (None: the default of :func:`~ainet_gym.agents.sb3_agents.default_hyperparameters`,
    0.9); a resumed model keeps its own."""
    obs_features: tuple[str, ...] = ()
    """Optional observation blocks of the env (:class:`~ainet_gym.envs.env.FabricRoutingEnv`'s
    ``obs_features``, e.g. ``("phase",)``), recorded in the model's metadata; a resumed model keeps its
    own."""
    obs_blocks: tuple[str, ...] = ()
    """Observation blocks the policy and value networks read, e.g. ``("job_phase",)`` (a
    :class:`~ainet_gym.agents.block_features.BlockFeatures` extractor; empty: every input, the default),
    recorded in the model's metadata; a resumed or initialised model keeps its own."""
    extra_plans: tuple[str, ...] = ()
    """A ``choose`` mode's plans past its own (the env's ``extra_plans``, e.g. ``isolate0+bg``), recorded in the
    model's metadata; a resumed or initialised model keeps its own."""
    init_from: str | Path | None = None
    """A saved model whose policy (architecture and weights: e.g. a behaviour-cloned one, ``python -m
    ainet_gym.agents.imitate clone``) starts a new run: its env settings, this run's hyperparameters (e.g. a small
    ``learning_rate``), a fresh optimiser and step counter. Not with ``resume``."""


@dataclass
class TrainResult:
    """What a training run produced."""

    model_path: Path
    run_dir: Path
    run_name: str
    total_timesteps: int  # the model's step counter (includes resumed steps)
    seconds: float
    steps_per_second: float
    final: dict[str, float]  # fabric/ means of the last finished episodes
    interrupted: bool
    model: Any = None


def run_name(scenario: str, algo: str, seed: int, when: float | None = None) -> str:
    """CleanRL-style run name ``{scenario}__{algo}__{seed}__{unix time}``."""
    return f"{scenario}__{algo}__{seed}__{int(time.time() if when is None else when)}"


def _check_config(cfg: TrainConfig) -> None:
    if cfg.resume is not None and cfg.init_from is not None:
        raise ValueError(
            "resume and init_from: allowed: one of them (resume continues a run, init_from starts one)"
        )
    if not isinstance(cfg.timesteps, int) or cfg.timesteps < 1:
        raise ValueError(f"timesteps = {cfg.timesteps!r}: must be an integer >= 1")
    if not isinstance(cfg.n_envs, int) or cfg.n_envs < 1:
        raise ValueError(f"n_envs = {cfg.n_envs!r}: must be an integer >= 1")


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


def train(cfg: TrainConfig) -> TrainResult:
    """Train (or resume) an agent; returns where the model and the logs went.

    Raises
    ------
    ValueError
        Bad arguments, an algorithm that cannot act in the action mode, or a resumed model that does
        not fit the scenario.
    FileNotFoundError
        If ``resume`` does not exist.
    """
    import torch
    from stable_baselines3.common.logger import configure

    from ainet_gym.agents.callbacks import FabricMetricsCallback

    _check_config(cfg)
    model_out = None
    if cfg.out is not None:  # refuse a bad destination before spending the training time
        model_out = model_path(cfg.out)
        check_model_out(model_out, cfg.overwrite, cfg.resume, scenario_files(cfg.scenario))
    if cfg.torch_threads is not None:
        torch.set_num_threads(cfg.torch_threads)
    scenario = load_scenario(cfg.scenario)
    algo = cfg.algo
    action_mode, history, observation, residual, res_kw, meta_in = _run_settings(cfg)
    if cfg.resume is not None or cfg.init_from is not None:  # the source model's own blocks and plans
        cfg = replace(
            cfg,
            obs_blocks=tuple(meta_in.get("obs_blocks", ())),
            extra_plans=tuple(meta_in.get("extra_plans", ())),
        )
    env, core, model = _env_and_model(cfg, scenario, action_mode, history, observation, res_kw, meta_in)

    run_dir = _fresh_run_dir(cfg, action_mode, residual, scenario.name)
    name = run_dir.name
    formats = ["tensorboard", "csv"] + (["stdout"] if cfg.verbose else [])
    model.set_logger(configure(str(run_dir), formats))
    meta_of = meta_maker(
        cfg, algo, action_mode, history, observation, core, scenario.name, name, env, residual
    )
    callbacks: list[Any] = [FabricMetricsCallback()]
    if cfg.save_every:
        callbacks.append(_SaveEvery(int(cfg.save_every), run_dir / "checkpoints", meta_of))
    cb = callbacks[0]
    start_steps = int(model.num_timesteps)
    seconds, interrupted = _learn(model, cfg, callbacks)
    model.logger.dump(model.num_timesteps)
    out = model_out if model_out is not None else run_dir / MODEL_FILE
    meta = meta_of(int(model.num_timesteps))
    path = save_model(model, out, meta)
    model.logger.close()  # the run's CSV and TensorBoard files, flushed and closed (not left to the GC)
    env.close()
    done = int(model.num_timesteps) - start_steps
    return TrainResult(
        model_path=path,
        run_dir=run_dir,
        run_name=name,
        total_timesteps=int(model.num_timesteps),
        seconds=seconds,
        steps_per_second=done / max(seconds, 1e-9),
        final=dict(cb.last),
        interrupted=interrupted,
        model=model,
    )


def _env_and_model(
    cfg: TrainConfig,
    scenario: Any,
    action_mode: str,
    history: int,
    observation: str,
    res_kw: dict[str, Any],
    meta_in: dict[str, Any],
) -> tuple[Any, Any, Any]:
    """The run's SB3 vector env (monitored), its ``EnvCore`` and the model: the one ``cfg.resume`` names, or a
    new one with the run's hyperparameters; the env's seeds set after SB3's own (small seeds held out)."""
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


def _learn(model: Any, cfg: TrainConfig, callbacks: list[Any]) -> tuple[float, bool]:
    """``model.learn`` for ``cfg.timesteps`` (counting on from a resumed model's); (seconds, whether Ctrl-C
    ended it)."""
    t0 = time.time()
    interrupted = False
    try:
        model.learn(
            total_timesteps=cfg.timesteps,
            callback=callbacks,
            progress_bar=cfg.progress,
            reset_num_timesteps=cfg.resume is None,
        )
    except KeyboardInterrupt:
        interrupted = True
    return time.time() - t0, interrupted


def _fresh_run_dir(cfg: TrainConfig, action_mode: str, residual: str | None, scenario: str) -> Path:
    """The run's log folder under ``cfg.logdir``, named after the scenario, the algorithm (with the action
    mode when it is not the algorithm's default, and the residual's base) and the seed; ``-2``, ``-3``, ...
    when a run of the same second exists."""
    tag = cfg.algo if action_mode == resolve_action_mode(cfg.algo, None) else f"{cfg.algo}-{action_mode}"
    if residual is not None:
        tag += f"-res-{residual.replace('+', '')}"
    return fresh_dir(cfg.logdir, run_name(scenario, tag, cfg.seed))


def _run_settings(cfg: TrainConfig) -> tuple[str, int, str, str | None, dict[str, Any], dict[str, Any]]:
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


def _mode_plans(action_mode: str) -> tuple[str, ...]:
    """The plans of a ``choose`` mode without extra plans (``()`` for another mode)."""
    from ainet_gym.routing.plans import CHOOSE_MODES, PLANS

    return tuple(PLANS[CHOOSE_MODES[action_mode]]) if action_mode in CHOOSE_MODES else ()


def meta_maker(
    cfg: TrainConfig, algo: str, action_mode: str, history: int, observation: str, core: Any,
    scenario: str, name: str, env: Any, residual: str | None,
) -> Any:  # fmt: skip
    """A function of the step count giving the metadata saved with the model."""

    def meta_of(timesteps: int) -> dict[str, Any]:
        meta = {
            "algo": algo,
            "action_mode": action_mode,
            "history": history,
            "observation": observation,
            "reward": core.reward_fn.name if hasattr(core.reward_fn, "name") else str(core.reward_fn),
            "episode_steps": core.episode_steps,
            "scenario": scenario,
            "seed": cfg.seed,
            "timesteps": int(timesteps),
            "n_envs": cfg.n_envs,
            "run_name": name,
            "resumed_from": None if cfg.resume is None else str(cfg.resume),
            **({} if cfg.init_from is None else {"init_from": str(cfg.init_from)}),
            "observation_space": space_signature(env.observation_space),
            "action_space": space_signature(env.action_space),
        }
        if residual is not None:
            meta["residual"] = residual
            meta["residual_scale"] = core.residual_scale
        if core.obs_features:  # only when set: the metadata of the default env stays as it was
            meta["obs_features"] = list(core.obs_features)
        if cfg.obs_blocks:
            meta["obs_blocks"] = list(cfg.obs_blocks)
        if core.plans and len(core.plans) > len(_mode_plans(action_mode)):
            meta["extra_plans"] = list(core.plans[len(_mode_plans(action_mode)) :])
        return meta

    return meta_of


class _SaveEvery:
    """An SB3 callback (built lazily: SB3 is imported by :func:`train`) saving the model every ``every``
    steps with its metadata."""

    def __new__(cls, every: int, folder: Path, meta_of: Any) -> Any:
        from stable_baselines3.common.callbacks import BaseCallback

        class SaveEvery(BaseCallback):
            def __init__(self) -> None:
                super().__init__()
                self.next = every

            def _on_step(self) -> bool:
                if self.num_timesteps >= self.next:
                    n = int(self.num_timesteps)
                    save_model(self.model, folder / f"model_{n:09d}.zip", meta_of(n))
                    self.next = (n // every + 1) * every
                return True

        return SaveEvery()


def select_checkpoint(
    folder: str | Path, scenario: Any, seeds: list[int], steps: int | None = None
) -> tuple[Path, list[tuple[Path, float]]]:
    """The model of ``folder`` (``*.zip``) with the highest mean GPU utilisation on ``seeds`` (validation
    seeds, e.g. 100-199: never the held-out 1-10), and every model's value, in name order.

    Raises
    ------
    FileNotFoundError
        If ``folder`` holds no model.
    """
    from ainet_gym.agents.evaluate import EvalConfig, evaluate

    paths = sorted(Path(folder).glob("*.zip"))
    if not paths:
        raise FileNotFoundError(f"no model (*.zip) in {str(folder)!r}")
    scores = []
    for p in paths:
        res = evaluate(EvalConfig(scenario, policies=[f"ppo:{p}"], seeds=seeds, steps=steps, out=None))
        scores.append((p, float(res["policies"][f"ppo:{p}"]["gpu_utilization"]["mean"])))
    best = max(scores, key=lambda x: x[1])[0]
    return best, scores


def format_final(final: dict[str, float]) -> str:
    """One line of the last episodes' fabric metrics."""
    if not final:
        return "no episode finished"
    names = {
        "gpu_utilization": "GPU util",
        "step_time_ratio": "step/ideal",
        "max_link_utilization": "max link util",
        "collisions": "collisions",
    }
    return ", ".join(f"{lbl} {final[k]:.3f}" for k, lbl in names.items() if k in final)


class _RunResult(Protocol):
    """What :func:`format_run` reads of a training result (:class:`TrainResult`, the RLlib one)."""

    total_timesteps: int
    seconds: float
    steps_per_second: float
    final: dict[str, float]
    interrupted: bool


def format_run(res: _RunResult) -> str:
    """The line ``ainet-gym train`` prints when a run ends: steps, time, speed and the last episodes'
    fabric metrics (:func:`format_final`)."""
    state = "interrupted after" if res.interrupted else "trained"
    return (
        f"{state} {res.total_timesteps} steps in {res.seconds:.1f} s ({res.steps_per_second:.0f} steps/s); "
        f"last episodes: {format_final(res.final)}"
    )


def train_main(args: argparse.Namespace) -> int:
    """Entry point of ``ainet-gym train`` (arguments: see ``ainet_gym.cli``)."""
    cfg = TrainConfig(
        **train_arguments(args),
        n_envs=args.n_envs,
        residual=getattr(args, "residual", None),
        residual_scale=getattr(args, "residual_scale", None),
        log_std_init=getattr(args, "log_std_init", None),
        save_every=getattr(args, "save_every", None),
        learning_rate=getattr(args, "learning_rate", None),
        target_kl=getattr(args, "target_kl", None),
        ent_coef=getattr(args, "ent_coef", None),
        gamma=getattr(args, "gamma", None),
        obs_features=tuple(getattr(args, "obs_features", None) or ()),
        obs_blocks=tuple(getattr(args, "obs_blocks", None) or ()),
        extra_plans=tuple(getattr(args, "extra_plans", None) or ()),
        init_from=getattr(args, "init_from", None),
    )
    res = train(cfg)
    return report_run(res, cfg.logdir, f"model: {res.model_path}")


def train_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ainet-gym train`` arguments that both frameworks' configs take (:class:`TrainConfig` and
    :class:`~ainet_gym.agents.rllib_train.RLlibTrainConfig`), by field name."""
    return {
        "scenario": args.scenario,
        "algo": args.algo,
        "action_mode": args.action_mode,
        "timesteps": args.timesteps,
        "seed": args.seed,
        "logdir": args.logdir,
        "out": args.out,
        "resume": args.resume,
        "progress": not args.no_progress,
        "overwrite": bool(getattr(args, "overwrite", False)),
    }


def report_run(res: Any, logdir: str | Path, saved: str) -> int:
    """Print the end of an ``ainet-gym train`` run (:func:`format_run`, the line ``saved`` that says where
    the result is, where its TensorBoard logs are) and return the exit code: 130 if it was interrupted."""
    print(format_run(res))
    print(saved)
    print(f"logs:  tensorboard --logdir {Path(logdir)}  (run {res.run_name})")
    return 130 if res.interrupted else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.train select FOLDER SCENARIO --seeds 100-199``: the checkpoint of
    ``FOLDER`` (``ainet-gym train --save-every``) with the best mean GPU utilisation on validation seeds."""
    from ainet_gym.agents.evaluate import parse_seeds
    from ainet_gym.agents.outputs import OneLineParser  # one-line errors, as ainet-gym's

    p = OneLineParser(prog="python -m ainet_gym.agents.train", description=main.__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("select", help="pick a checkpoint on validation seeds")
    s.add_argument("folder")
    s.add_argument("scenario")
    s.add_argument("--seeds", default="100-199", help="validation seeds (never the held-out 1-10)")
    a = p.parse_args(argv)
    best, scores = select_checkpoint(a.folder, a.scenario, parse_seeds(a.seeds))
    for path, value in scores:
        print(f"{path.name}  {value:.4f}")
    print(f"best: {best}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
