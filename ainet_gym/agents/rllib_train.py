"""``ainet-gym train --framework rllib``: PPO on Ray RLlib's new API stack, from one machine to a cluster.

Each of ``num_env_runners`` env runners holds one native
:class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` of ``envs_per_runner`` copies (see
:mod:`ainet_gym.envs.rllib`); the learner runs in the driver process (``num_learners = 0``). One training
iteration samples one episode per copy, then runs the PPO update. ``address=None`` starts a local Ray;
``"auto"`` or ``"HOST:PORT"`` joins a cluster started with ``ray start --head`` (env runners are then
placed on every node that has a free CPU).

Logged like the SB3 path (:mod:`ainet_gym.agents.train`): the run directory ``{logdir}/{run name}/`` gets
TensorBoard event files with the fabric's scalars (``fabric/gpu_utilization``, ``fabric/step_time_ratio``,
``fabric/max_link_utilization``, ``fabric/collisions``, ``fabric/efficiency``, ``fabric/episodes``:
means over the last 100 finished episodes, computed per episode exactly as
:class:`ainet_gym.agents.callbacks.FabricMetricsCallback` does) beside ``rollout/ep_rew_mean``, ``train/...``
and ``time/fps``; ``progress.csv`` holds one row per iteration. The checkpoint
(``Algorithm.save_to_path``) goes to ``--out DIR`` with ``ainet_gym.json`` (what the policy was trained
on, with the fingerprint of its fabric); ``--resume DIR`` restores weights, optimiser and step counter into a new
run (any runner count) and writes to a new ``--out``. A checkpoint that records another fabric than the scenario's
is refused before Ray starts unless ``--allow-other-fabric`` (the new checkpoint then records both).

Modules: this one is the run (:class:`RLlibTrainConfig`, :func:`train_rllib`, :class:`RLlibTrainResult`) and
``ainet-gym train --framework rllib``'s handler (:func:`train_rllib_main`); the checkpoint folder (its metadata,
writing it, ``ainet-gym convert-rllib``) is :mod:`ainet_gym.agents.rllib_checkpoint`, what an iteration logs (the
fabric callback, the scalars, the loop, ``progress.csv``) is :mod:`ainet_gym.agents.rllib_logging`.
"""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ainet_gym.agents.rllib_checkpoint import (
    META_FILE,
    checkpoint_metadata,
    read_checkpoint_metadata,
    save_checkpoint,
    scenario_fabric,
)
from ainet_gym.agents.rllib_logging import make_fabric_callback, train_loop, write_progress_csv
from ainet_gym.agents.sb3_agents import space_signature
from ainet_gym.agents.train_report import report_run, run_name, train_arguments
from ainet_gym.scenario.loader import load_scenario

if TYPE_CHECKING:
    import argparse

__all__ = [
    "RLlibTrainConfig",
    "RLlibTrainResult",
    "train_rllib",
    "train_rllib_main",
]


RLLIB_ALGOS = ("ppo",)


@dataclass
class RLlibTrainConfig:
    """What to train on RLlib, where, and for how long."""

    scenario: Any = "spine-leaf-2to1"
    """Shipped scenario name, YAML path, dict or Scenario."""
    algo: str = "ppo"
    """Only ppo."""
    action_mode: str | None = None
    """split (default) | ecmp_weights | path."""
    timesteps: int = 20_000
    """Environment steps to sample in this run (whole iterations: rounded up)."""
    seed: int = 0
    """Seed of RLlib (torch, env runners) and of the training episodes (>= 1,000,000)."""
    num_env_runners: int = 2
    """Env runner actors (0: sample in the driver)."""
    envs_per_runner: int = 16
    """Copies of the native vector env in each runner (the RLlib form of ``--n-envs``)."""
    address: str | None = None
    """None: local Ray; "auto" or "HOST:PORT": join a running cluster."""
    logdir: str | Path = "runs"
    """TensorBoard log directory; the run gets its own sub-directory."""
    out: str | Path | None = None
    """Checkpoint directory; default ``{logdir}/{run name}/checkpoint``."""
    resume: str | Path | None = None
    """A checkpoint directory to continue from (never overwritten)."""
    overwrite: bool = False
    """Allow ``out`` to replace an existing checkpoint directory."""
    trust_checkpoint: bool = False
    """``resume`` restores RLlib's pickled state (which can run code): only with this set, for folders the
    user trusts (``--trust-checkpoint``)."""
    allow_other_fabric: bool = False
    """Let ``resume`` take a checkpoint whose metadata records another fabric fingerprint (``fabric``) than the
    scenario's (``--allow-other-fabric``): training it on from another fabric on purpose. Without it such a
    checkpoint is refused before Ray starts; the new checkpoint records the scenario's fabric as ``fabric`` and
    the source's as ``source_fabric``. A checkpoint without a fingerprint is never checked."""
    lr: float = 3e-4
    """Initial learning rate."""
    lr_final: float | None = 3e-5
    """Learning rate at the end of this run (linear decay over ``timesteps``, as the SB3 PPO default);
    None: constant ``lr``."""
    history: int = 4
    """Intervals of link-utilisation history in the observation."""
    episode_steps: int | None = None
    """Override the scenario's episode length."""
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    """Extra ``PPOConfig.training`` keywords."""
    progress: bool = True
    """Print one line per iteration."""
    torch_threads: int | None = 1
    """torch intra-op threads in the driver (learner); None: torch's default."""


@dataclass
class RLlibTrainResult:
    """What a training run produced."""

    checkpoint: Path
    run_dir: Path
    run_name: str
    total_timesteps: int  # env steps sampled, resumed steps included
    seconds: float
    steps_per_second: float
    final: dict[str, float]
    interrupted: bool
    history: list[dict[str, float]] = field(default_factory=list)


def _check(cfg: RLlibTrainConfig) -> str:
    if cfg.algo not in RLLIB_ALGOS:
        raise ValueError(f"algo = {cfg.algo!r}: --framework rllib supports {', '.join(RLLIB_ALGOS)}")
    if isinstance(cfg.timesteps, bool) or not isinstance(cfg.timesteps, int) or cfg.timesteps < 1:
        raise ValueError(f"timesteps = {cfg.timesteps!r}: must be an integer >= 1")
    if not (isinstance(cfg.lr, int | float) and math.isfinite(cfg.lr) and cfg.lr > 0):
        raise ValueError(f"lr = {cfg.lr!r}: must be a finite number > 0")
    if cfg.allow_other_fabric and cfg.resume is None:
        raise ValueError(
            "allow_other_fabric = True without a source model: allowed: with resume (it lets its checkpoint come "
            "from another fabric), or leave it out"
        )
    if cfg.out is not None:
        o = Path(cfg.out)
        if cfg.resume is not None and o.resolve() == Path(cfg.resume).resolve():
            raise ValueError(
                f"out = {str(o)!r}: is the checkpoint being resumed, never overwritten; pass a new --out"
            )
        if o.exists() and (not o.is_dir() or any(o.iterdir())):
            if not cfg.overwrite:
                raise ValueError(
                    f"out = {str(o)!r}: exists and is not empty; pass --overwrite to replace a checkpoint, "
                    "or choose a new directory"
                )
            if not (o / "rllib_checkpoint.json").is_file():
                raise ValueError(f"out = {str(o)!r}: is not an RLlib checkpoint directory; not replacing it")
            from ainet_gym.agents.outputs import scenario_files

            for f in scenario_files(cfg.scenario):  # --overwrite replaces the folder: never an input in it
                if Path(f).resolve().is_relative_to(o.resolve()):
                    raise ValueError(
                        f"out = {str(o)!r}: holds this command's input {f!r}; it is never overwritten, even "
                        "with --overwrite: choose another --out"
                    )
    return cfg.action_mode or "split"


def _built_algo(
    conf: Any, cfg: RLlibTrainConfig, scenario: str, meta_in: dict[str, Any], started_ray: bool
) -> Any:
    """The PPO algorithm of ``conf``, restored from ``cfg.resume`` when given, after checking that the
    checkpoint's spaces (``meta_in``) are the scenario's (else it stops the algorithm, and Ray if this run
    started it, and raises ValueError)."""
    import ray

    algo = conf.build_algo()
    module = algo.get_module()
    obs_sig, act_sig = space_signature(module.observation_space), space_signature(module.action_space)
    if cfg.resume is not None:
        want = (meta_in.get("observation_space"), meta_in.get("action_space"))
        if want != (obs_sig, act_sig):
            algo.stop()
            if started_ray:
                ray.shutdown()
            raise ValueError(
                f"resume: checkpoint {str(cfg.resume)!r} does not fit scenario {scenario!r}: it was "
                f"trained on {meta_in.get('scenario', '?')!r} with observations {want[0]} and actions "
                f"{want[1]}; this scenario gives observations {obs_sig} and actions {act_sig}"
            )
        algo.restore_from_path(str(Path(cfg.resume).resolve()))
    return algo


def _run_metadata(
    algo: Any, cfg: RLlibTrainConfig, conf: Any, action_mode: str, history: int, scenario: str, steps: int,
    name: str, fabric: str, source_fabric: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The metadata saved with the run's checkpoint (:func:`checkpoint_metadata`): ``fabric``, the fingerprint
    of the scenario's fabric, and ``source_fabric``, the resumed checkpoint's when it is another one."""
    return checkpoint_metadata(
        algo,
        fabric,
        source_fabric,
        algo=cfg.algo,
        action_mode=action_mode,
        history=history,
        observation="flat",
        episode_steps=conf.env_config["episode_steps"],
        scenario=scenario,
        seed=cfg.seed,
        timesteps=steps,
        num_env_runners=cfg.num_env_runners,
        envs_per_runner=cfg.envs_per_runner,
        lr=cfg.lr,
        lr_final=cfg.lr_final,
        run_name=name,
        resumed_from=None if cfg.resume is None else str(cfg.resume),
    )


def train_rllib(cfg: RLlibTrainConfig) -> RLlibTrainResult:
    """Train (or resume) RLlib PPO; returns where the checkpoint and the logs went.

    Raises
    ------
    ValueError
        Bad arguments, or a resumed checkpoint that does not fit the scenario, or that records another fabric
        than the scenario's (without ``allow_other_fabric``; refused before Ray is imported).
    FileNotFoundError
        If ``resume`` is not a checkpoint directory.
    ImportError
        If Ray RLlib (the extra ``rllib``) is not installed.
    """
    action_mode = _check(cfg)
    scenario = load_scenario(cfg.scenario)
    fabric = scenario_fabric(scenario)
    meta_in, source_fabric = _resume_metadata(cfg, fabric)
    from ainet_gym.envs import rllib as arl  # raises ImportError naming the extra

    action_mode = meta_in.get("action_mode", action_mode)
    history = int(meta_in.get("history", cfg.history))
    import ray
    from torch.utils.tensorboard import SummaryWriter

    started_ray = not ray.is_initialized()
    conf = _ppo_config(arl, cfg, scenario, action_mode, history, meta_in)
    algo = _built_algo(conf, cfg, scenario.name, meta_in, started_ray)
    tag = "rllib-ppo" if action_mode == "split" else f"rllib-ppo-{action_mode}"
    name = run_name(scenario.name, tag, cfg.seed)
    run_dir = Path(cfg.logdir) / name
    run_dir.mkdir(parents=True, exist_ok=True)
    start = int(meta_in.get("timesteps", 0))
    t0 = time.time()
    steps, rows, final, interrupted = train_loop(
        algo, SummaryWriter(str(run_dir)), start, start + cfg.timesteps, cfg.progress
    )
    seconds = time.time() - t0
    write_progress_csv(run_dir / "progress.csv", rows)
    out = Path(cfg.out) if cfg.out is not None else run_dir / "checkpoint"
    if out.exists() and cfg.overwrite:
        shutil.rmtree(out)  # checked in _check: an RLlib checkpoint the user asked to replace
    meta = _run_metadata(
        algo, cfg, conf, action_mode, history, scenario.name, steps, name, fabric, source_fabric
    )
    save_checkpoint(algo, out, meta)
    algo.stop()
    if started_ray:
        ray.shutdown()
    return RLlibTrainResult(
        checkpoint=out,
        run_dir=run_dir,
        run_name=name,
        total_timesteps=steps,
        seconds=seconds,
        steps_per_second=(steps - start) / max(seconds, 1e-9),
        final=final,
        interrupted=interrupted,
        history=rows,
    )


def _resume_metadata(cfg: RLlibTrainConfig, fabric: str) -> tuple[dict[str, Any], str | None]:
    """The metadata of the checkpoint ``cfg.resume`` continues from (``{}`` without one) and the fabric
    fingerprint it records (None without one), read before Ray is imported: a folder that is no checkpoint
    fails in one line, then one that records another fabric than ``fabric`` (the scenario's) unless
    ``cfg.allow_other_fabric`` (:func:`~ainet_gym.agents.model_files.check_source_fabric`), both before the
    trust question (:func:`~ainet_gym.agents.model_files.require_trust`), and an untrusted one at it."""
    if cfg.resume is None:
        return {}, None
    from ainet_gym.agents.model_files import check_source_fabric, require_trust

    meta = read_checkpoint_metadata(cfg.resume)
    recorded = check_source_fabric("resume", cfg.resume, meta, fabric, cfg.allow_other_fabric, META_FILE)
    require_trust(cfg.resume, cfg.trust_checkpoint, "--resume")
    return meta, recorded


def _ppo_config(
    arl: Any, cfg: RLlibTrainConfig, scenario: Any, action_mode: str, history: int, meta_in: dict[str, Any]
) -> Any:
    """torch's threads set, Ray started or joined (:func:`ainet_gym.envs.rllib.init_ray`) and the run's
    ``PPOConfig`` (:func:`ainet_gym.envs.rllib.ppo_config`): the learning rate decays over the resumed
    checkpoint's steps plus this run's."""
    import torch

    if cfg.torch_threads is not None:
        torch.set_num_threads(cfg.torch_threads)
    arl.init_ray(cfg.address, cfg.num_env_runners)
    return arl.ppo_config(
        scenario,
        num_env_runners=cfg.num_env_runners,
        envs_per_runner=cfg.envs_per_runner,
        seed=cfg.seed,
        action_mode=action_mode,
        history=history,
        episode_steps=cfg.episode_steps,
        lr=cfg.lr,
        lr_final=cfg.lr_final,
        decay_steps=cfg.timesteps + int(meta_in.get("timesteps", 0)),
        callbacks=make_fabric_callback(),
        hyperparameters=cfg.hyperparameters,
    )


def train_rllib_main(args: argparse.Namespace) -> int:
    """``ainet-gym train --framework rllib`` (arguments: see ``ainet_gym.cli``)."""
    cfg = RLlibTrainConfig(
        **train_arguments(args),
        num_env_runners=args.num_env_runners,
        envs_per_runner=args.envs_per_runner,
        address=args.address,
        trust_checkpoint=bool(getattr(args, "trust_checkpoint", False)),
        allow_other_fabric=bool(getattr(args, "allow_other_fabric", False)),
    )
    lr = getattr(args, "learning_rate", None)
    if lr is not None:  # as SB3's PPO: a linear decay to a tenth of it
        cfg = replace(cfg, lr=float(lr), lr_final=float(lr) / 10)
    res = train_rllib(cfg)
    saved = f"checkpoint: {res.checkpoint}   (evaluate with --policies ecmp,rllib:{res.checkpoint})"
    return report_run(res, cfg.logdir, saved)
