"""``ainet-gym sweep``: a Ray Tune grid of RLlib PPO runs (scenarios x seeds x learning rates), one table.

Every trial is a Tune function trainable that builds :func:`ainet_gym.envs.rllib.ppo_config` and trains for
``timesteps`` env steps, then saves its checkpoint (with ``ainet_gym.json``, so it is an ``rllib:DIR``
policy). By default a trial samples in its own process (``num_env_runners = 0``) and reserves one CPU,
so ``max_concurrent`` trials run at once: 2 on a 2-core machine. On a cluster (``--address auto``) give
each trial env runners (``--num-env-runners``) and Tune spreads trials over the nodes.

When every trial is done, the driver evaluates each checkpoint and static ECMP deterministically on the
same held-out seeds (:func:`ainet_gym.agents.evaluate.evaluate`; training episodes use seeds >= 1,000,000) and
writes one table, ``results.md`` and ``results.csv`` in ``--out``: per trial the scenario, seed,
learning rate, env steps, wall time, the last training GPU utilisation and the held-out GPU
utilisation with its 95% CI and the paired margin over ECMP.
"""

from __future__ import annotations

import csv
import importlib
import itertools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

__all__ = [
    "DEFAULT_OUT",
    "SWEEP_FILES",
    "SweepConfig",
    "format_table",
    "sweep",
    "sweep_main",
    "trial_scenarios",
]

#: Parent of the default output folders of ``ainet-gym sweep`` (``out/sweep/sweep__YYYYmmdd-HHMMSS``).
DEFAULT_OUT = "out/sweep"
#: What a sweep writes into its output directory (files and folders).
SWEEP_FILES = ("results.md", "results.csv", "checkpoints", "tune")


@dataclass
class SweepConfig:
    """The grid and what each trial gets."""

    scenarios: list[str] = field(default_factory=lambda: ["periodic-interference"])
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    lrs: list[float] = field(default_factory=lambda: [3e-4])
    timesteps: int = 10_000
    """Env steps per trial (whole iterations: rounded up)."""
    num_env_runners: int = 0
    """Env runners per trial (0: sample in the trial's process, one CPU per trial)."""
    envs_per_runner: int = 16
    max_concurrent: int = 2
    """Trials at once (each reserves 1 + num_env_runners CPUs)."""
    eval_seeds: list[int] = field(default_factory=lambda: [1, 2, 3])
    address: str | None = None
    out: str | Path = "out/sweep"
    """Directory of the table, the checkpoints and Tune's files (``ainet-gym sweep`` default: a fresh
    ``out/sweep/sweep__TIME``)."""
    overwrite: bool = False
    """Allow ``out`` to hold an earlier sweep's results."""


def _trial(config: dict[str, Any]) -> None:
    """One Tune trial: PPO on one scenario, seed and learning rate."""
    import torch
    from ray import tune

    from ainet_gym.agents.rllib_checkpoint import checkpoint_metadata, save_checkpoint, scenario_fabric
    from ainet_gym.agents.rllib_logging import iteration_scalars, make_fabric_callback
    from ainet_gym.envs import rllib as arl

    config = config["trial"]
    torch.set_num_threads(1)
    conf = arl.ppo_config(
        config["scenario"],
        num_env_runners=config["num_env_runners"],
        envs_per_runner=config["envs_per_runner"],
        seed=config["seed"],
        lr=config["lr"],
        lr_final=config["lr"] / 10,
        decay_steps=config["timesteps"],
        callbacks=make_fabric_callback(),
    )
    algo = conf.build_algo()
    steps, t0 = 0, time.time()
    sc: dict[str, float] = {}
    while steps < config["timesteps"]:
        result = algo.train()
        steps += int(result["env_runners"]["num_env_steps_sampled"])
        sc = iteration_scalars(result)
        if steps < config["timesteps"]:
            tune.report({"timesteps": steps, **sc})
    ckpt = Path(config["out"]) / "checkpoints" / config["name"]
    meta = checkpoint_metadata(
        algo,
        scenario_fabric(config["scenario"]),  # rllib:DIR refuses another fabric (issue-26zk2)
        algo="ppo",
        action_mode="split",
        history=4,
        observation="flat",
        episode_steps=conf.env_config["episode_steps"],
        scenario=config["scenario"],
        seed=config["seed"],
        timesteps=steps,
        num_env_runners=config["num_env_runners"],
        envs_per_runner=config["envs_per_runner"],
        lr=config["lr"],
        lr_final=config["lr"] / 10,
        run_name=config["name"],
        resumed_from=None,
    )
    save_checkpoint(algo, ckpt, meta)
    algo.stop()
    tune.report({"timesteps": steps, "seconds": time.time() - t0, "checkpoint_dir": str(ckpt), **sc})


def trial_scenarios(scenarios: list[str]) -> dict[str, str]:
    """What each trial is given for each scenario of the grid: a shipped name as is, a file as its
    absolute path (trials run in Tune's own working directory, where a relative path means nothing).

    Raises
    ------
    ScenarioError
        If a scenario does not load (here, at the driver, before Ray starts).
    """
    from ainet_gym.scenario.loader import load_scenario

    where: dict[str, str] = {}
    for s in scenarios:
        sc = load_scenario(s)
        src = Path(sc.source)
        where[s] = (
            str(src.resolve())
            if not sc.source.startswith("<")
            and src.is_file()
            and (os.sep in s or "/" in s or s.endswith((".yaml", ".yml")))
            else s
        )
    return where


def _check_sweep(cfg: SweepConfig) -> None:
    """The grid and the counts of ``cfg`` (ValueError naming the field otherwise)."""
    for name in ("scenarios", "seeds", "lrs", "eval_seeds"):
        if not getattr(cfg, name):
            raise ValueError(f"{name}: empty; give at least one value")
    bad = [x for x in cfg.lrs if not (isinstance(x, int | float) and 0 < x < float("inf"))]
    if bad:
        raise ValueError(f"lrs {bad}: learning rates must be finite and > 0")
    bad = [x for x in cfg.seeds if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < 2**31]
    if bad:
        raise ValueError(f"seeds {bad}: training seeds must be integers in [0, 2147483647]")
    for name, lo in (("timesteps", 1), ("max_concurrent", 1), ("num_env_runners", 0), ("envs_per_runner", 1)):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= 100_000:
            raise ValueError(f"{name} = {v!r}: must be an integer in [{lo}, 100000]")


def _trial_row(r: Any, eval_seeds: list[int]) -> dict[str, Any]:
    """A finished trial's row: its settings and training figures, and, when it left a checkpoint, the
    checkpoint against ECMP on ``eval_seeds`` (:func:`~ainet_gym.agents.evaluate.evaluate`)."""
    from ainet_gym.agents.evaluate import EvalConfig, evaluate

    trial = r.config["trial"]
    m = r.metrics or {}
    row: dict[str, Any] = {
        "scenario": trial.get("label", trial["scenario"]),
        "seed": trial["seed"],
        "lr": trial["lr"],
        "timesteps": m.get("timesteps"),
        "seconds": m.get("seconds"),
        "train_gpu_utilization": m.get("fabric/gpu_utilization"),
        "checkpoint": m.get("checkpoint_dir"),
        "error": None if r.error is None else str(r.error).strip().splitlines()[-1],
    }
    if row["checkpoint"] and r.error is None:
        ev = evaluate(
            EvalConfig(
                trial["scenario"],
                policies=["ecmp", f"rllib:{row['checkpoint']}"],
                seeds=eval_seeds,
                out=None,
            )
        )
        pol = ev["policies"]
        mine = pol[f"rllib:{row['checkpoint']}"]  # evaluate keys a policy as given
        g = mine["gpu_utilization"]
        row |= {
            "eval_gpu_utilization": g["mean"],
            "eval_ci95": g["ci95"],
            "ecmp_gpu_utilization": pol["ecmp"]["gpu_utilization"]["mean"],
            "vs_ecmp": mine["gpu_utilization_vs_ecmp"],
        }
    return row


def sweep(cfg: SweepConfig) -> list[dict[str, Any]]:
    """Run the grid; returns one row per trial (also written to ``out/results.{md,csv}``).

    Raises
    ------
    ValueError
        An empty grid or bad counts.
    ImportError
        Without the extra ``rllib``.
    """
    _check_sweep(cfg)
    where = trial_scenarios(cfg.scenarios)
    from ainet_gym.agents.outputs import check_out_files, scenario_files

    inputs = [f for sc in cfg.scenarios for f in scenario_files(sc)]
    out = check_out_files(cfg.out, cfg.overwrite, SWEEP_FILES, read=inputs).resolve()
    from ainet_gym.envs import rllib as arl  # first: without Ray, an ImportError naming the extra

    ray, tune = arl.ray, importlib.import_module("ray.tune")

    out.mkdir(parents=True, exist_ok=True)
    started = not ray.is_initialized()
    arl.init_ray(cfg.address, cfg.num_env_runners)
    grid = [
        {
            "scenario": where[s],
            "label": s,
            "seed": seed,
            "lr": lr,
            "name": f"{Path(s).stem}__seed{seed}__lr{lr:g}",
            "timesteps": cfg.timesteps,
            "num_env_runners": cfg.num_env_runners,
            "envs_per_runner": cfg.envs_per_runner,
            "out": str(out),
        }
        for s, seed, lr in itertools.product(cfg.scenarios, cfg.seeds, cfg.lrs)
    ]
    trainable = tune.with_resources(_trial, {"cpu": 1 + cfg.num_env_runners})
    tuner = tune.Tuner(
        trainable,
        param_space={"trial": tune.grid_search(grid)},
        tune_config=tune.TuneConfig(max_concurrent_trials=cfg.max_concurrent),
        run_config=tune.RunConfig(name="tune", storage_path=str(out), verbose=1),
    )
    results = tuner.fit()
    rows = [_trial_row(r, cfg.eval_seeds) for r in results]
    rows.sort(key=lambda x: (x["scenario"], x["seed"], x["lr"]))
    (out / "results.md").write_text(format_table(rows, cfg.eval_seeds) + "\n")
    with open(out / "results.csv", "w", newline="") as f:
        keys = sorted({k for r in rows for k in r})
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    if started:
        ray.shutdown()
    return rows


def _f(x: Any, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def format_table(rows: list[dict[str, Any]], eval_seeds: list[int]) -> str:
    """The markdown table of a sweep."""
    lines = [
        f"held-out seeds {','.join(map(str, eval_seeds))}; GPU utilisation mean [95% CI]",
        "",
        "| scenario | seed | lr | env steps | wall s | train GPU util | held-out GPU util | ECMP | vs ECMP |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ci = r.get("eval_ci95") or [None, None]
        ev = f"{_f(r.get('eval_gpu_utilization'))} [{_f(ci[0])}, {_f(ci[1])}]"
        vs = r.get("vs_ecmp") or {}
        vci = vs.get("ci95") or [None, None]
        vs_txt = "-" if vs.get("mean") is None else f"{vs['mean']:+.3f} [{_f(vci[0])}, {_f(vci[1])}]"
        if r.get("error"):
            ev = f"failed: {r['error']}"
        lines.append(
            f"| {r['scenario']} | {r['seed']} | {r['lr']:g} | {r.get('timesteps') or '-'} | "
            f"{_f(r.get('seconds'), 0)} | {_f(r.get('train_gpu_utilization'))} | {ev} | "
            f"{_f(r.get('ecmp_gpu_utilization'))} | {vs_txt} |"
        )
    return "\n".join(lines)


def _split(text: str, kind: type) -> list:
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise ValueError(f"{text!r}: expected a comma list of {kind.__name__} values ({e})") from e


def sweep_main(args: argparse.Namespace) -> int:
    """``ainet-gym sweep`` (arguments: see ``ainet_gym.cli``)."""
    from ainet_gym.agents.evaluate import parse_seeds
    from ainet_gym.agents.outputs import fresh_dir, run_stamp

    out = args.out if args.out is not None else fresh_dir(DEFAULT_OUT, f"sweep__{run_stamp()}", create=False)
    cfg = SweepConfig(
        scenarios=_split(args.scenarios, str),
        seeds=_split(args.seeds, int),
        lrs=_split(args.lrs, float),
        timesteps=args.timesteps,
        num_env_runners=args.num_env_runners,
        envs_per_runner=args.envs_per_runner,
        max_concurrent=args.max_concurrent,
        eval_seeds=parse_seeds(args.eval_seeds),
        address=args.address,
        out=out,
        overwrite=bool(getattr(args, "overwrite", False)),
    )
    rows = sweep(cfg)
    print(format_table(rows, cfg.eval_seeds))
    print(f"wrote {Path(cfg.out) / 'results.md'}, {Path(cfg.out) / 'results.csv'}")
    return 1 if any(r.get("error") for r in rows) else 0
