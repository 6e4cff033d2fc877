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

Modules: this one is the run (:func:`train`), ``ainet-gym train``'s handler (:func:`train_main`) and ``python -m
ainet_gym.agents.train select`` (:func:`main`); the rest lives in modules of one concern:
:mod:`ainet_gym.agents.train_config` (:class:`~ainet_gym.agents.train_config.TrainConfig`,
:class:`~ainet_gym.agents.train_config.TrainResult`), :mod:`ainet_gym.agents.train_model` (the env and the model),
:mod:`ainet_gym.agents.train_meta` (the saved metadata, the checkpoints, the choice of one) and
:mod:`ainet_gym.agents.train_report` (the run name, the shared arguments and the closing lines of both frameworks).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ainet_gym.agents.outputs import MODEL_FILE, check_model_out, fresh_dir, model_path, scenario_files
from ainet_gym.agents.sb3_agents import resolve_action_mode, save_model
from ainet_gym.agents.train_config import TrainConfig, TrainResult
from ainet_gym.agents.train_meta import SaveEvery, meta_maker, select_checkpoint
from ainet_gym.agents.train_model import env_and_model, run_settings
from ainet_gym.agents.train_report import report_run, run_name, train_arguments
from ainet_gym.scenario.loader import load_scenario

__all__ = [
    "train",
    "train_main",
]


def _check_config(cfg: TrainConfig) -> None:
    if cfg.resume is not None and cfg.init_from is not None:
        raise ValueError(
            "resume and init_from: allowed: one of them (resume continues a run, init_from starts one)"
        )
    if cfg.allow_other_fabric and cfg.resume is None and cfg.init_from is None:
        raise ValueError(
            "allow_other_fabric = True without a source model: allowed: with resume or init_from (it lets their "
            "model come from another fabric), or leave it out"
        )
    if not isinstance(cfg.timesteps, int) or cfg.timesteps < 1:
        raise ValueError(f"timesteps = {cfg.timesteps!r}: must be an integer >= 1")
    if not isinstance(cfg.n_envs, int) or cfg.n_envs < 1:
        raise ValueError(f"n_envs = {cfg.n_envs!r}: must be an integer >= 1")


def train(cfg: TrainConfig) -> TrainResult:
    """Train (or resume) an agent; returns where the model and the logs went.

    Raises
    ------
    ValueError
        Bad arguments, an algorithm that cannot act in the action mode, or a resumed (initialising) model
        that does not fit the scenario, or that records another fabric than the scenario's (without
        ``allow_other_fabric``; refused before any step).
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
    action_mode, history, observation, residual, res_kw, meta_in = run_settings(cfg)
    if cfg.resume is not None or cfg.init_from is not None:  # the source model's own blocks and plans
        cfg = replace(
            cfg,
            obs_blocks=tuple(meta_in.get("obs_blocks", ())),
            extra_plans=tuple(meta_in.get("extra_plans", ())),
        )
    env, core, model = env_and_model(cfg, scenario, action_mode, history, observation, res_kw, meta_in)

    run_dir = _fresh_run_dir(cfg, action_mode, residual, scenario.name)
    name = run_dir.name
    formats = ["tensorboard", "csv"] + (["stdout"] if cfg.verbose else [])
    model.set_logger(configure(str(run_dir), formats))
    meta_of = meta_maker(
        cfg, algo, action_mode, history, observation, core, scenario.name, name, env, residual,
        source_fabric=meta_in.get("fabric"),
    )  # fmt: skip
    callbacks: list[Any] = [FabricMetricsCallback()]
    if cfg.save_every:
        callbacks.append(SaveEvery(int(cfg.save_every), run_dir / "checkpoints", meta_of))
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
        allow_other_fabric=bool(getattr(args, "allow_other_fabric", False)),
    )
    res = train(cfg)
    return report_run(res, cfg.logdir, f"model: {res.model_path}")


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.train select FOLDER SCENARIO --seeds 100-199``: the checkpoint of
    ``FOLDER`` (``ainet-gym train --save-every``) with the best mean GPU utilisation on validation seeds."""
    from ainet_gym.agents.evaluate import parse_seeds
    from ainet_gym.agents.module_cli import OneLineParser, run_module_cli  # one-line errors, as ainet-gym's

    p = OneLineParser(prog="python -m ainet_gym.agents.train", description=main.__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("select", help="pick a checkpoint on validation seeds")
    s.add_argument("folder")
    s.add_argument("scenario")
    s.add_argument("--seeds", default="100-199", help="validation seeds (never the held-out 1-10)")
    a = p.parse_args(argv)

    def run() -> int:
        best, scores = select_checkpoint(a.folder, a.scenario, parse_seeds(a.seeds))
        for path, value in scores:
            print(f"{path.name}  {value:.4f}")
        print(f"best: {best}")
        return 0

    return run_module_cli("python -m ainet_gym.agents.train select", run)


if __name__ == "__main__":
    raise SystemExit(main())
