"""Learning curves of the research-code examples against the baselines of the same env id.

    python examples/learning_curves.py                      # every library at its documented budget
    python examples/learning_curves.py --only cleanrl-dqn   # one of them
    python examples/learning_curves.py --quick              # a smoke run of each (a few hundred steps)

Each library's example runs as its own process (the command it documents), at the budget of
:data:`LIBRARIES`; its training episodes' returns are read back (``episodes.csv``, or the zoo's
``*.monitor.csv``) and plotted against env steps, beside the mean return of every baseline of the env
id's controls class (the ``choose`` plans, each run alone; for an ``EcmpWeights`` id the ``jobs+bg``
baselines), measured here on 8 held-out seeds. Writes ``<out>/learning-<library>.png`` and
``<out>/learning-curves.json`` (per library: the command, the budget, the wall time, the mean return of
the first and of the last quarter of the episodes, and the baselines' returns).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CHOOSE = "ainet_gym/PeriodicInterference-Choose-v0"
ECMP_WEIGHTS = "ainet_gym/PeriodicInterference-EcmpWeights-v0"


@dataclass(frozen=True)
class Library:
    """An example: its env id, its budget in env steps, and its command (``{steps}``, ``{logdir}`` and
    ``{seed}`` filled in)."""

    env_id: str
    steps: int
    quick_steps: int
    command: tuple[str, ...]


LIBRARIES: dict[str, Library] = {
    "cleanrl-ppo-continuous": Library(
        ECMP_WEIGHTS, 98304, 384,
        ("examples/cleanrl/ppo_continuous_action.py", "--env-id", ECMP_WEIGHTS, "--total-timesteps", "{steps}",
         "--logdir", "{logdir}", "--seed", "{seed}"),
    ),
    "cleanrl-ppo-discrete": Library(
        CHOOSE, 4608, 384,
        ("examples/cleanrl/ppo.py", "--env-id", CHOOSE, "--total-timesteps", "{steps}", "--logdir", "{logdir}",
         "--seed", "{seed}"),
    ),
    "cleanrl-dqn": Library(
        CHOOSE, 4608, 192,
        ("examples/cleanrl/dqn.py", "--env-id", CHOOSE, "--total-timesteps", "{steps}", "--learning-starts",
         "{learning_starts}", "--logdir", "{logdir}", "--seed", "{seed}"),
    ),
    "rl-zoo3-ppo": Library(
        ECMP_WEIGHTS, 98304, 384,
        ("-m", "rl_zoo3.train", "--algo", "ppo", "--env", ECMP_WEIGHTS, "--gym-packages", "ainet_gym", "-conf",
         "examples/rl_zoo3/ppo.yml", "-f", "{logdir}", "--seed", "{seed}", "-n", "{steps}", "--eval-freq", "-1"),
    ),
    "tianshou-dqn": Library(
        CHOOSE, 4608, 192,
        ("examples/tianshou/dqn.py", "--env-id", CHOOSE, "--epochs", "4", "--epoch-num-steps", "{epoch_steps}",
         "--logdir", "{logdir}", "--seed", "{seed}"),
    ),
}  # fmt: skip


def command(name: str, steps: int, logdir: Path, seed: int) -> list[str]:
    """The command line of ``name`` for ``steps`` env steps, logging under ``logdir``."""
    lib = LIBRARIES[name]
    fill = {
        "steps": str(steps),
        "logdir": str(logdir),
        "seed": str(seed),
        "learning_starts": str(max(64, steps // 6)),
        "epoch_steps": str(max(48, steps // 4)),
    }
    return [sys.executable, *(part.format(**fill) for part in lib.command)]


def read_episodes(name: str, logdir: Path) -> np.ndarray:
    """(episodes, 2) env steps when each training episode ended and its return, in step order."""
    rows: list[tuple[float, float]] = []
    if name.startswith("rl-zoo3"):
        # monitor files: one per env, "r,l,t" per episode; the env steps so far are estimated as the
        # episodes' lengths summed over every env in order of their wall-clock end times
        eps = []
        for f in sorted(logdir.rglob("*.monitor.csv")):
            lines = f.read_text().splitlines()[1:]  # the first line is a JSON header
            for r in csv.DictReader(lines):
                eps.append((float(r["t"]), float(r["r"]), float(r["l"])))
        eps.sort()
        steps = np.cumsum([e[2] for e in eps])
        rows = [(float(s), e[1]) for s, e in zip(steps, eps)]
    else:
        for f in sorted(logdir.rglob("episodes.csv")):
            rows += [(float(r["global_step"]), float(r["episodic_return"])) for r in csv.DictReader(f.open())]
    out = np.array(sorted(rows), dtype=np.float64).reshape(-1, 2)
    return out


def baseline_returns(env_id: str, seeds: int = 8, episode_steps: int | None = None) -> dict[str, float]:
    """Mean episode return of each baseline of ``env_id``'s controls class, run alone at the engine level
    (``core.step_split``, as the evaluator runs them) on seeds 1000, 1001, ... in a vector core."""
    import gymnasium as gym

    import ainet_gym  # noqa: F401
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.routing.plans import PLANS
    from ainet_gym.routing.policies import get_policy

    spec = gym.spec(env_id)
    mode = spec.kwargs.get("action_mode", "split")
    names = PLANS["jobs+bg" if mode in ("ecmp_weights", "choose_bg") else "jobs"]
    out = {}
    for name in names:
        core = EnvCore(spec.kwargs["scenario"], batch=seeds, action_mode=mode, episode_steps=episode_steps)
        core.reset([1000 + i for i in range(seeds)])
        total = np.zeros(seeds)
        pol = get_policy(name)
        for _ in range(core.episode_steps):
            _, r, *_ = core.step_split(pol(core.routing_context, core.last_result))
            total += r
        out[name] = float(total.mean())
    return out


def plot(name: str, episodes: np.ndarray, baselines: dict[str, float], path: Path, title: str) -> None:
    """The curve (each episode faint, a moving mean of 16 episodes bold) and the baselines (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    if len(episodes):
        x, y = episodes[:, 0], episodes[:, 1]
        ax.plot(x, y, ".", color="tab:blue", alpha=0.25, ms=3)
        k = min(16, len(y))
        mean = np.convolve(y, np.ones(k) / k, mode="valid")
        ax.plot(x[k - 1 :], mean, color="tab:blue", lw=2, label=f"{name} (mean of {k} episodes)")
    colors = plt.cm.tab10(np.linspace(0.1, 0.9, max(len(baselines), 1)))
    for (b, v), c in zip(sorted(baselines.items(), key=lambda kv: -kv[1]), colors):
        ax.axhline(v, ls="--", lw=1, color=c, label=f"{b}: {v:.2f}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return (sum of rewards)")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help=f"comma list of {', '.join(LIBRARIES)}")
    ap.add_argument("--quick", action="store_true", help="a few hundred steps each (a smoke run)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", default="runs/learning-curves", help="where the runs log")
    ap.add_argument("--out", default="docs/img", help="where the figures and the JSON summary go")
    ap.add_argument(
        "--replot", action="store_true", help="only redraw the figures from the runs and the summary"
    )
    args = ap.parse_args(argv)
    names = list(LIBRARIES) if args.only is None else args.only.split(",")
    bad = [n for n in names if n not in LIBRARIES]
    if bad:
        ap.error(f"--only: {bad[0]!r} is not a library; allowed: {', '.join(LIBRARIES)}")
    out = Path(args.out)
    summary_path = out / "learning-curves.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() and not args.quick else {}
    baselines: dict[str, dict[str, float]] = {}
    if args.replot:
        for name in names:
            if name in summary:
                done = summary[name]
                title = f"{name} on {done['env_id']}, {done['env_steps']:,} env steps, seed {done['seed']}"
                episodes = read_episodes(name, ROOT / args.runs / name)
                plot(name, episodes, done["baselines"], out / f"learning-{name}.png", title)
        return 0
    for name in names:
        lib = LIBRARIES[name]
        steps = lib.quick_steps if args.quick else lib.steps
        logdir = Path(args.runs) / name
        cmd = command(name, steps, logdir, args.seed)
        print("$", " ".join(cmd), flush=True)
        t0 = time.time()
        # one BLAS/OpenMP thread per run: torch's thread pool spin-waits badly on a busy machine
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=env)
        wall = time.time() - t0
        episodes = read_episodes(name, ROOT / logdir)
        if lib.env_id not in baselines:
            baselines[lib.env_id] = baseline_returns(lib.env_id)
        base = baselines[lib.env_id]
        q = max(1, len(episodes) // 4)
        first = float(episodes[:q, 1].mean()) if len(episodes) else float("nan")
        last = float(episodes[-q:, 1].mean()) if len(episodes) else float("nan")
        title = f"{name} on {lib.env_id}, {steps:,} env steps, seed {args.seed}"
        if not args.quick:
            plot(name, episodes, base, out / f"learning-{name}.png", title)
        import gymnasium as gym

        summary[name] = {
            "env_id": lib.env_id,
            "scenario": str(gym.spec(lib.env_id).kwargs["scenario"]),  # the id's default scenario at the run
            "command": " ".join(["python", *cmd[1:]]).replace(sys.executable, "python"),
            "env_steps": steps,
            "seed": args.seed,
            "wall_s": round(wall, 1),
            "episodes": len(episodes),
            "first_quarter_return": round(first, 3),
            "last_quarter_return": round(last, 3),
            "baselines": {k: round(v, 3) for k, v in base.items()},
            "date": time.strftime("%Y-%m-%d %H:%M"),
        }
        print(f"{name}: {len(episodes)} episodes in {wall:.0f} s; return {first:.2f} -> {last:.2f}; "
              f"baselines " + ", ".join(f"{k} {v:.2f}" for k, v in base.items()), flush=True)  # fmt: skip
    if not args.quick:
        out.mkdir(parents=True, exist_ok=True)
        summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
