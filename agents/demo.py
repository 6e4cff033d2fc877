"""``ainet-gym demo``: the main job in a few minutes on a laptop.

1. Train PPO (split action mode, a [128, 128] MLP, 16 copies of the env in one batched engine) on the
   default scenario, logging to TensorBoard;
2. evaluate it against every baseline (ECMP, spray, WCMP, greedy, the LP optimum) on held-out seeds;
3. print the table, and where the figure and the logs are.

The default budget (:data:`DEMO_TIMESTEPS`, 128 PPO updates) trains in about 1.5 minutes on 2 CPU
cores (~800 env steps/s) and the evaluation takes about 15 s. It is deliberately not longer: on
spine-leaf-2to1 the even split is the optimum (spray, WCMP and the LP coincide), PPO starts next to it
(a zero action is an even split) and longer training only lets the deterministic policy drift
(measured: 65k steps 0.525-0.530 GPU utilisation over two seeds, 131k steps 0.508; spray 0.526).
Where there is something to learn, see ``periodic-interference``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from agents.evaluate import EvalConfig, _header, evaluate, markdown_table
from agents.outputs import MODEL_FILE, check_model_out, check_out_dir, fresh_dir, model_path
from agents.train import TrainConfig, format_final, run_name, train

__all__ = ["DEMO_N_ENVS", "DEMO_SEEDS", "DEMO_TIMESTEPS", "QUICK_SEEDS", "QUICK_TIMESTEPS", "demo_main"]

#: PPO steps of the demo (see the module docstring for the time it takes).
DEMO_TIMESTEPS = 65_536
#: copies of the env in the batched engine (16 x 64 steps = 1024 samples per PPO update).
DEMO_N_ENVS = 16
#: held-out evaluation seeds (training episodes use seeds >= 1_000_000).
DEMO_SEEDS = [1, 2, 3, 4, 5]
#: ``--quick`` (what CI runs): a smoke run of the whole pipeline, not a result.
QUICK_TIMESTEPS = 4_096
QUICK_SEEDS = [1, 2]
BASELINE_POLICIES = ["ecmp", "spray", "wcmp", "greedy", "lp"]
#: ``ainet-gym demo`` without ``--out`` writes to a fresh ``{DEFAULT_OUT}/{run name}``.
DEFAULT_OUT = "out/demo"


def demo_main(args: argparse.Namespace) -> int:
    """Entry point of ``ainet-gym demo`` (``--scenario``, ``--timesteps``, ``--out``, ``--quick``)."""
    t0 = time.time()
    overwrite = bool(getattr(args, "overwrite", False))
    seed = int(getattr(args, "seed", 0))
    if getattr(args, "out", None) is None:  # the default: a fresh run folder per run
        stem = Path(str(args.scenario)).name.removesuffix(".yaml").removesuffix(".yml")
        out = fresh_dir(DEFAULT_OUT, run_name(stem, "ppo", seed), create=False)
        model = out / MODEL_FILE
    else:
        given = Path(args.out)
        # --out X.zip: the model file, with the results and logs in X/ beside it; else a directory
        out, model = (given.with_suffix(""), given) if given.suffix == ".zip" else (given, model_path(given))
        check_out_dir(out, overwrite)
        check_model_out(model, overwrite)
    quick = bool(getattr(args, "quick", False))
    timesteps = args.timesteps or (QUICK_TIMESTEPS if quick else DEMO_TIMESTEPS)
    seeds = QUICK_SEEDS if quick else DEMO_SEEDS
    logdir = out / "runs"
    print(
        f"ainet-gym demo: PPO on {args.scenario} for {timesteps} steps, then every baseline on seeds "
        f"{','.join(map(str, seeds))}" + (" (--quick: a smoke run, not a result)" if quick else "")
    )
    res = train(
        TrainConfig(
            scenario=args.scenario,
            algo="ppo",
            timesteps=timesteps,
            seed=seed,
            n_envs=DEMO_N_ENVS,
            logdir=logdir,
            out=model,
            overwrite=overwrite,
            progress=not getattr(args, "no_progress", False),
        )
    )
    print(
        f"trained {res.total_timesteps} steps in {res.seconds:.0f} s ({res.steps_per_second:.0f} steps/s); "
        f"last training episodes (stochastic policy): {format_final(res.final)}"
    )
    print("evaluating ...", flush=True)
    result = evaluate(
        EvalConfig(
            scenario=args.scenario,
            policies=[*BASELINE_POLICIES, f"ppo:{res.model_path}"],
            seeds=seeds,
            episodes=1,
            out=out,
            overwrite=True,  # out was checked above; it now holds the model just trained
        )
    )
    print()
    print(_header(result))
    print()
    print(markdown_table(result))
    print()
    p = result["policies"]
    ppo, ecmp, lp = p["ppo"], p["ecmp"], p["lp"]
    m = ppo["gpu_utilization_vs_ecmp"]
    ci = m["ci95"] or [m["mean"], m["mean"]]
    print(
        f"PPO vs static ECMP: GPU utilisation {ppo['gpu_utilization']['mean']:.3f} vs "
        f"{ecmp['gpu_utilization']['mean']:.3f} ({m['mean']:+.3f}, 95% CI [{ci[0]:+.3f}, {ci[1]:+.3f}]); "
        f"LP optimum {lp['gpu_utilization']['mean']:.3f} (PPO gap to LP {100 * ppo['gap_to_lp']:+.1f}%)"
    )
    f = result["files"]
    print(f"table: {f['table']}   CSV: {f['csv']}   JSON: {f['json']}")
    print(f"figure: {f['figure']}")
    print(f"model: {res.model_path}")
    print(f"training curves: tensorboard --logdir {logdir}   (run {res.run_name})")
    print(f"demo finished in {time.time() - t0:.0f} s")
    return 0
