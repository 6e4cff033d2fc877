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
on); ``--resume DIR`` restores weights, optimiser and step counter into a new run (any runner count)
and writes to a new ``--out``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ainet_gym.agents.sb3_agents import space_signature
from ainet_gym.agents.train import format_final, report_run, run_name, train_arguments
from ainet_gym.scenario.loader import load_scenario

if TYPE_CHECKING:
    import argparse

__all__ = [
    "META_FILE",
    "RLlibTrainConfig",
    "RLlibTrainResult",
    "checkpoint_metadata",
    "convert_checkpoint",
    "convert_main",
    "iteration_scalars",
    "make_fabric_callback",
    "read_checkpoint_metadata",
    "save_checkpoint",
    "train_rllib",
    "train_rllib_main",
]

META_FILE = "ainet_gym.json"
RLLIB_ALGOS = ("ppo",)
#: finished episodes the fabric/ scalars are averaged over (as RLlib's episode_return_mean).
METRICS_WINDOW = 100


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


def make_fabric_callback() -> type:
    """The ``RLlibCallback`` class logging the fabric metrics per finished episode (built lazily so
    that importing this module does not import Ray)."""
    from ray.rllib.callbacks.callbacks import RLlibCallback

    from ainet_gym.agents.callbacks import FABRIC_SCALARS, step_metrics

    class FabricMetricsRLlibCallback(RLlibCallback):
        """Per-episode means of :func:`ainet_gym.agents.callbacks.step_metrics`, logged as ``fabric/<name>``."""

        def on_episode_step(self, *, episode: Any, **kwargs: Any) -> None:
            info = episode.get_infos(-1)
            m = step_metrics([info])
            acc = episode.custom_data.setdefault("fabric", {"steps": 0.0})
            for k, v in m.items():
                acc[k] = acc.get(k, 0.0) + float(v[0])
            acc["steps"] += 1.0

        def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
            acc = episode.custom_data.get("fabric")
            if not acc or metrics_logger is None:
                return
            n = max(acc["steps"], 1.0)
            ep = {
                "gpu_utilization": acc["gpu_utilization"] / n,
                "max_link_utilization": acc["max_link_utilization"] / n,
                "collisions": acc["collisions"] / n,
                "efficiency": acc["efficiency"] / n,
                "step_time_ratio": acc["step_time_ratio_sum"] / max(acc["step_time_ratio_n"], 1.0),
            }
            for k in FABRIC_SCALARS:
                metrics_logger.log_value(f"fabric/{k}", float(ep[k]), reduce="mean", window=METRICS_WINDOW)
            metrics_logger.log_value("fabric/episodes", 1, reduce="lifetime_sum")

    return FabricMetricsRLlibCallback


def read_checkpoint_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``ainet_gym.json`` of a checkpoint directory written by :func:`train_rllib`.

    Raises
    ------
    ModelNotFoundError
        If the directory or its metadata does not exist (also a ``FileNotFoundError``).
    ModelFileError
        If the metadata is too large or not a JSON object.
    """
    from ainet_gym.agents.model_files import ModelNotFoundError, existing, read_json

    p = existing(path, f"RLlib checkpoint directory {str(path)!r}", folder=True)
    meta = p / META_FILE
    if not meta.is_file():
        raise ModelNotFoundError(
            f"{str(path)!r} has no {META_FILE}: not a checkpoint of 'ainet-gym train --framework rllib'"
        )
    return read_json(meta, f"rllib:{path}: {META_FILE}")


def save_checkpoint(algo: Any, out: str | os.PathLike, meta: dict[str, Any]) -> Path:
    """``algo.save_to_path(out)`` (RLlib's own files, for ``--resume --trust-checkpoint``), the policy
    network as plain weights (``policy_weights.pt``, :func:`ainet_gym.agents.rllib_policy.export_policy`) and
    ``out/ainet_gym.json`` (``meta`` plus ``policy_module``, the network's constructor arguments); returns
    ``out``."""
    from ainet_gym.agents.rllib_policy import export_policy

    p = Path(out)
    p.mkdir(parents=True, exist_ok=True)
    algo.save_to_path(str(p.resolve()))
    spec = export_policy(algo.get_module(), p)
    (p / META_FILE).write_text(json.dumps({**meta, "policy_module": spec}, indent=1))
    return p


def checkpoint_metadata(algorithm: Any, /, **fields: Any) -> dict[str, Any]:
    """``ainet_gym.json`` of a checkpoint: ``fields`` plus the module's observation and action spaces."""
    import ray

    module = algorithm.get_module()
    return {
        "framework": "rllib",
        **fields,
        "ray_version": ray.__version__,
        "observation_space": space_signature(module.observation_space),
        "action_space": space_signature(module.action_space),
    }


def _check(cfg: RLlibTrainConfig) -> str:
    if cfg.algo not in RLLIB_ALGOS:
        raise ValueError(f"algo = {cfg.algo!r}: --framework rllib supports {', '.join(RLLIB_ALGOS)}")
    if isinstance(cfg.timesteps, bool) or not isinstance(cfg.timesteps, int) or cfg.timesteps < 1:
        raise ValueError(f"timesteps = {cfg.timesteps!r}: must be an integer >= 1")
    if not (isinstance(cfg.lr, int | float) and math.isfinite(cfg.lr) and cfg.lr > 0):
        raise ValueError(f"lr = {cfg.lr!r}: must be a finite number > 0")
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


def _scalar(d: dict[str, Any], *keys: str) -> float | None:
    x: Any = d
    for k in keys:
        if not isinstance(x, dict) or k not in x:
            return None
        x = x[k]
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def iteration_scalars(result: dict[str, Any]) -> dict[str, float]:
    """TensorBoard scalars of one ``Algorithm.train()`` result, named as SB3 names its curves."""
    from ainet_gym.agents.callbacks import FABRIC_SCALARS

    er = result.get("env_runners", {})
    out: dict[str, float | None] = {
        "rollout/ep_rew_mean": _scalar(er, "episode_return_mean"),
        "rollout/ep_len_mean": _scalar(er, "episode_len_mean"),
        "time/iterations": _scalar(result, "training_iteration"),
        "time/time_this_iter_s": _scalar(result, "time_this_iter_s"),
    }
    for k in (*FABRIC_SCALARS, "episodes"):
        out[f"fabric/{k}"] = _scalar(er, f"fabric/{k}")
    pol = result.get("learners", {}).get("default_policy", {})
    for src, dst in (
        ("policy_loss", "train/policy_gradient_loss"),
        ("vf_loss", "train/value_loss"),
        ("entropy", "train/entropy"),
        ("mean_kl_loss", "train/approx_kl"),
        ("vf_explained_var", "train/explained_variance"),
    ):
        out[dst] = _scalar(pol, src)
    return {k: v for k, v in out.items() if v is not None}


def _train_loop(
    algo: Any, writer: Any, start: int, target: int, progress: bool
) -> tuple[int, list[dict[str, float]], dict[str, float], bool]:
    """``algo.train()`` until ``target`` env steps (from ``start``), every iteration's scalars to TensorBoard
    (``writer``, closed at the end) and to the returned rows; returns (steps, rows, the last fabric
    figures, interrupted). Ctrl-C ends the loop early (``interrupted``), keeping what was trained."""
    rows: list[dict[str, float]] = []
    steps = start
    t0 = time.time()
    final: dict[str, float] = {}
    try:
        while steps < target:
            result = algo.train()
            # the per-iteration count (the lifetime counter may or may not survive a restore)
            steps += int(_scalar(result, "env_runners", "num_env_steps_sampled") or 0)
            sc = iteration_scalars(result)
            elapsed = time.time() - t0
            sc["time/fps"] = (steps - start) / max(elapsed, 1e-9)
            for k, v in sc.items():
                writer.add_scalar(k, v, steps)
            writer.flush()
            rows.append({"timesteps": steps, "seconds": elapsed, **sc})
            final = {k.removeprefix("fabric/"): v for k, v in sc.items() if k.startswith("fabric/")}
            if progress:
                it = int(sc.get("time/iterations", len(rows)))
                ret = sc.get("rollout/ep_rew_mean")
                print(
                    f"iter {it:4d}  steps {steps:>8d}/{target}  {sc['time/fps']:6.0f} steps/s  "
                    f"return {ret if ret is None else f'{ret:.3f}'}  {format_final(final)}",
                    flush=True,
                )
    except KeyboardInterrupt:
        return steps, rows, final, True
    finally:
        writer.close()
    return steps, rows, final, False


def _write_progress_csv(path: Path, rows: list[dict[str, float]]) -> None:
    """The training rows as CSV (``timesteps`` first, then the other columns sorted); nothing without rows."""
    if not rows:
        return
    with open(path, "w", newline="") as f:
        keys = sorted({k for r in rows for k in r}, key=lambda k: (k != "timesteps", k))
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


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
    name: str,
) -> dict[str, Any]:  # fmt: skip
    """The metadata saved with the run's checkpoint (:func:`checkpoint_metadata`)."""
    return checkpoint_metadata(
        algo,
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
        Bad arguments, or a resumed checkpoint that does not fit the scenario.
    FileNotFoundError
        If ``resume`` is not a checkpoint directory.
    ImportError
        If Ray RLlib (the extra ``rllib``) is not installed.
    """
    action_mode = _check(cfg)
    meta_in = _resume_metadata(cfg)
    from ainet_gym.envs import rllib as arl  # raises ImportError naming the extra

    scenario = load_scenario(cfg.scenario)
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
    steps, rows, final, interrupted = _train_loop(
        algo, SummaryWriter(str(run_dir)), start, start + cfg.timesteps, cfg.progress
    )
    seconds = time.time() - t0
    _write_progress_csv(run_dir / "progress.csv", rows)
    out = Path(cfg.out) if cfg.out is not None else run_dir / "checkpoint"
    if out.exists() and cfg.overwrite:
        shutil.rmtree(out)  # checked in _check: an RLlib checkpoint the user asked to replace
    save_checkpoint(
        algo, out, _run_metadata(algo, cfg, conf, action_mode, history, scenario.name, steps, name)
    )
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


def _resume_metadata(cfg: RLlibTrainConfig) -> dict[str, Any]:
    """The metadata of the checkpoint ``cfg.resume`` continues from (``{}`` without one), read before Ray is
    imported: a folder that is no checkpoint fails in one line, before the trust question
    (:func:`~ainet_gym.agents.model_files.require_trust`), and an untrusted one at it."""
    if cfg.resume is None:
        return {}
    from ainet_gym.agents.model_files import require_trust

    meta = read_checkpoint_metadata(cfg.resume)
    require_trust(cfg.resume, cfg.trust_checkpoint, "--resume")
    return meta


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
    )
    lr = getattr(args, "learning_rate", None)
    if lr is not None:  # as SB3's PPO: a linear decay to a tenth of it
        cfg = replace(cfg, lr=float(lr), lr_final=float(lr) / 10)
    res = train_rllib(cfg)
    saved = f"checkpoint: {res.checkpoint}   (evaluate with --policies ecmp,rllib:{res.checkpoint})"
    return report_run(res, cfg.logdir, saved)


def convert_checkpoint(path: str | os.PathLike, trusted: bool, overwrite: bool = False) -> Path:
    """Add the plain-weights policy (``policy_weights.pt`` and ``policy_module`` in ``ainet_gym.json``) to a
    checkpoint folder written before this format, so that ``rllib:DIR`` loads it without unpickling.

    This loads RLlib's pickled module from the folder (which can run code), so ``trusted`` must say the
    user trusts it. Nothing else in the folder changes; ``ainet_gym.json`` keeps every field it had.

    Raises
    ------
    UntrustedModelError
        If not ``trusted``.
    ModelFileError
        If the folder is not an RLlib checkpoint of ainet-gym, or is converted already (unless
        ``overwrite``).
    ImportError
        Without the extra ``rllib``.
    """
    from ainet_gym.agents.model_files import ModelFileError, require_trust
    from ainet_gym.agents.rllib_agent import MODULE_SUBDIR
    from ainet_gym.agents.rllib_policy import POLICY_FILE, export_policy

    p = Path(path)
    meta = read_checkpoint_metadata(p)
    if meta.get("framework") != "rllib":
        raise ModelFileError(f"rllib:{path}: {p / META_FILE} is not an RLlib checkpoint's")
    if ("policy_module" in meta or (p / POLICY_FILE).exists()) and not overwrite:
        raise ModelFileError(
            f"rllib:{path}: holds a plain-weights policy already ({POLICY_FILE}); pass --overwrite to write it again"
        )
    mdir = p / MODULE_SUBDIR
    if not mdir.is_dir():
        raise ModelFileError(f"rllib:{path}: no RLlib policy module in {str(mdir)!r}")
    require_trust(p, trusted, "converting")
    try:
        from ray.rllib.core.rl_module.rl_module import RLModule
    except ImportError as e:
        raise ImportError(f"convert-rllib needs the rllib extra: pip install 'ainet-gym[rllib]' ({e})") from e
    module = RLModule.from_checkpoint(str(mdir.resolve()))
    spec = export_policy(module, p)
    meta = {
        **meta,
        "observation_space": meta.get("observation_space", space_signature(module.observation_space)),
        "action_space": meta.get("action_space", space_signature(module.action_space)),
        "policy_module": spec,
    }
    (p / META_FILE).write_text(json.dumps(meta, indent=1))
    return p


def convert_main(args: argparse.Namespace) -> int:
    """``ainet-gym convert-rllib DIR --trust-checkpoint [--overwrite]``."""
    p = convert_checkpoint(args.checkpoint, args.trust_checkpoint, args.overwrite)
    print(
        f"{p}: wrote {p / 'policy_weights.pt'} and policy_module in {p / META_FILE}; evaluate with rllib:{p}"
    )
    return 0
