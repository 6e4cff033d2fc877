"""``ainet-gym demo``: the main job in a few minutes on a laptop.

1. Train PPO on ``periodic-interference`` (two drifting jobs, periodic checkpoint bursts, a half-rate
   link: congestion a policy can predict) in the ``ecmp_weights`` action mode (one weight per switch
   next hop, applied to all traffic, so it can also steer the checkpoint background), a [128, 128]
   MLP, 16 copies of the env in one batched engine, logging to TensorBoard;
2. evaluate it against every baseline on held-out seeds: ECMP, spray, WCMP, greedy and the LP route
   only the jobs' traffic (class ``jobs``); ``spray+bg``, ``wcmp+bg``, ``greedy+bg`` and ``lp+bg`` move
   the background too, as the agent does (class ``jobs+bg``, the agent's own);
3. print first the comparison of the learned policy with each baseline of its own class (difference of
   mean GPU utilisation, and whether the 95% confidence intervals separate), then with the other
   classes (which control other traffic: not like for like), then the table, the figure and the logs.

The budget (:data:`DEMO_TIMESTEPS`, 80 PPO updates of 16 x 48 steps): ``ainet-gym demo`` trained in
104 s (593 steps/s) and finished in 128 s on a 2-core machine shared with other jobs (6.3 minutes at
163 steps/s under a heavier load). Measured (training seed 0): PPO 0.700 GPU utilisation on every seed;
seeds 1-10: LP 0.672 [0.666, 0.677], wcmp+bg 0.590, greedy 0.581, spray+bg 0.574, spray 0.548; p99
step/ideal 1.37 against 1.71 for the best baseline.
On ``spine-leaf-2to1`` (``--scenario spine-leaf-2to1``) the even split is optimal and PPO only ties spray.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ainet_gym.agents.evaluate import EvalConfig, evaluate, markdown_table, report_header
from ainet_gym.agents.outputs import (
    MODEL_FILE,
    check_model_out,
    check_out_dir,
    fresh_dir,
    model_path,
    scenario_files,
)
from ainet_gym.agents.train import train
from ainet_gym.agents.train_config import TrainConfig, TrainResult
from ainet_gym.agents.train_report import format_final, run_name

__all__ = [
    "DEMO_ACTION_MODE",
    "DEMO_N_ENVS",
    "DEMO_SEEDS",
    "DEMO_TIMESTEPS",
    "QUICK_SEEDS",
    "QUICK_TIMESTEPS",
    "comparison",
    "demo_main",
]

#: PPO steps of the demo (see the module docstring for the time it takes).
DEMO_TIMESTEPS = 61_440
#: copies of the env in the batched engine (16 x 48 steps = 768 samples per PPO update).
DEMO_N_ENVS = 16
#: the action mode of the demo's agent: switch weights over all traffic (controls jobs + background).
DEMO_ACTION_MODE = "ecmp_weights"
#: held-out evaluation seeds (training episodes use seeds >= 1_000_000).
DEMO_SEEDS = [1, 2, 3, 4, 5]
#: ``--quick`` (what CI runs): a smoke run of the whole pipeline, not a result.
QUICK_TIMESTEPS = 4_096
QUICK_SEEDS = [1, 2]
BASELINE_POLICIES = [
    "ecmp", "spray", "wcmp", "greedy", "lp", "spray+bg", "wcmp+bg", "greedy+bg", "lp+bg", "solo-lp+bg",
]  # fmt: skip
#: the baselines the learned policy is compared with, in this order (those of its own class first)
COMPARE_FIRST = [
    "spray", "wcmp", "greedy", "spray+bg", "wcmp+bg", "greedy+bg", "predictive-greedy",
    "predictive-greedy+bg", "lp", "predictive-lp", "lp+bg", "predictive-lp+bg", "solo-lp+bg",
]  # fmt: skip
#: ``ainet-gym demo`` without ``--out`` writes to a fresh ``{DEFAULT_OUT}/{run name}``.
DEFAULT_OUT = "out/demo"


def comparison(result: dict, learned: str = "ppo", name: str | None = None) -> str:
    """The learned policy (its key in ``result["policies"]``, e.g. ``ppo:out/demo/ppo.zip``; printed as
    ``name``, default the key) against the baselines of :data:`COMPARE_FIRST` that were evaluated: first
    those of its own class (``controls``), then, under a line that says so, those of other classes. One line
    per baseline: ``beats``/``loses to``/``overlaps`` by the 95% confidence intervals and the difference
    of mean GPU utilisation."""
    p = result["policies"]
    me = p[learned]
    g = me["gpu_utilization"]
    lo, hi = g["ci95"] or [g["mean"], g["mean"]]
    lines = [
        f"{name or learned} (controls {me['controls']}): GPU utilisation {g['mean']:.3f} [{lo:.3f}, {hi:.3f}]"
    ]
    present = [b for b in COMPARE_FIRST if b in p]
    own = [b for b in present if p[b]["controls"] == me["controls"]]
    other = [b for b in present if b not in own]

    def line(b: str) -> str:
        bg = p[b]["gpu_utilization"]
        blo, bhi = bg["ci95"] or [bg["mean"], bg["mean"]]
        verdict = "beats" if lo > bhi else ("loses to" if hi < blo else "overlaps")
        return (
            f"  {verdict:<9} {b:<9} ({p[b]['controls']:<7}) {bg['mean']:.3f} [{blo:.3f}, {bhi:.3f}]  "
            f"difference {g['mean'] - bg['mean']:+.3f}"
        )

    if own:
        lines.append(f" its own class ({me['controls']}: the same traffic):")
        lines += [line(b) for b in own]
    if other:
        lines.append(" other classes (they control other traffic: not like for like):")
        lines += [line(b) for b in other]
    twin = next((n for n, d in p.items() if d["controls"] == "reference"), None)
    share = me.get("twin_gap_share") or {}
    if twin is not None and share.get("mean") is not None:
        lines.append(f" share of the ECMP-to-{twin} gap (clairvoyant reference): {share['mean']:.2f}")
    return "\n".join(lines)


def _demo_out(args: argparse.Namespace, seed: int, overwrite: bool) -> tuple[Path, Path]:
    """The demo's output folder and model file: ``--out X.zip`` the model file with the results and logs in
    ``X/`` beside it, ``--out DIR`` a folder (both checked before training), none a fresh run folder."""
    if getattr(args, "out", None) is None:  # the default: a fresh run folder per run
        stem = Path(str(args.scenario)).name.removesuffix(".yaml").removesuffix(".yml")
        out = fresh_dir(DEFAULT_OUT, run_name(stem, "ppo", seed), create=False)
        return out, out / MODEL_FILE
    given = Path(args.out)
    out, model = (given.with_suffix(""), given) if given.suffix == ".zip" else (given, model_path(given))
    inputs = scenario_files(args.scenario)
    check_out_dir(out, overwrite, read=inputs)
    check_model_out(model, overwrite, inputs=inputs)
    return out, model


def _print_results(result: dict[str, Any], res: TrainResult, logdir: Path) -> None:
    """The evaluation's comparison, header and table, PPO against static ECMP and the LP of its class, and
    where the files, the model and the training curves are."""
    print()
    print(comparison(result, learned=f"ppo:{res.model_path}", name="ppo"))
    print()
    print(report_header(result))
    print()
    print(markdown_table(result))
    print()
    p = result["policies"]
    ppo, ecmp = p[f"ppo:{res.model_path}"], p["ecmp"]
    lp_name = ppo["lp_reference"] or "lp"
    lp = p[lp_name]
    m = ppo["gpu_utilization_vs_ecmp"]
    ci = m["ci95"] or [m["mean"], m["mean"]]
    print(
        f"PPO ({ppo['controls']}) vs static ECMP: GPU utilisation {ppo['gpu_utilization']['mean']:.3f} vs "
        f"{ecmp['gpu_utilization']['mean']:.3f} ({m['mean']:+.3f}, 95% CI [{ci[0]:+.3f}, {ci[1]:+.3f}]); "
        f"the LP of its class, {lp_name}: {lp['gpu_utilization']['mean']:.3f} "
        f"(PPO gap to it {100 * ppo['gap_to_lp']:+.1f}%)"
    )
    f = result["files"]
    print(f"table: {f['table']}   CSV: {f['csv']}   JSON: {f['json']}")
    print(f"figure: {f['figure']}")
    print(f"model: {res.model_path}")
    print(f"training curves: tensorboard --logdir {logdir}   (run {res.run_name})")


def demo_main(args: argparse.Namespace) -> int:
    """Entry point of ``ainet-gym demo`` (``--scenario``, ``--timesteps``, ``--out``, ``--quick``)."""
    t0 = time.time()
    overwrite = bool(getattr(args, "overwrite", False))
    seed = int(getattr(args, "seed", 0))
    out, model = _demo_out(args, seed, overwrite)
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
            action_mode=DEMO_ACTION_MODE,
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
    _print_results(result, res, logdir)
    print(f"demo finished in {time.time() - t0:.0f} s")
    return 0
