"""The ``ainet-gym`` command line: scenarios, simulate, train, evaluate, bench, demo."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from ainet_gym.scenario import list_scenarios

    rows = list_scenarios()
    width = max((len(n) for n, _ in rows), default=0)
    for name, desc in rows:
        print(f"{name:<{width}}  {desc}")
    return 0


def _fmt(x: float | None, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _cmd_simulate(args: argparse.Namespace) -> int:
    from ainet_gym.simulate import simulate

    out = simulate(args.scenario, policy=args.policy, steps=args.steps, seed=args.seed)
    if args.json:
        print(json.dumps(out))
        return 0
    print(
        f"scenario {out['scenario']}  policy {out['policy']}  seed {out['seed']}  "
        f"interval {out['decision_interval_ms']:.2f} ms"
    )
    for i, st in enumerate(out["steps"]):
        print(
            f"step {i}: max link utilisation {st['max_link_utilization']:.3f}  "
            f"stalled {st['stalled_transfers']}  failed links {st['failed_links']}"
        )
        print(
            f"  {'job':<16}{'gpus':>5}{'iters':>6}{'step ms':>10}{'comm ms':>10}{'ideal ms':>10}{'GPU util':>9}"
        )
        for j in st["jobs"]:
            print(
                f"  {j['name']:<16}{j['gpus']:>5}{j['iterations_completed']:>6}{_fmt(j['step_time_ms']):>10}"
                f"{_fmt(j['comm_time_ms']):>10}{_fmt(j['ideal_step_time_ms']):>10}{_fmt(j['gpu_utilization'], 3):>9}"
            )
        hot = ", ".join(f"{h['link']} {h['utilization']:.2f}" for h in st["hottest_links"])
        print(f"  hottest links: {hot}")
        tb = ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in st["tier_bytes"].items())
        print(f"  bytes per tier: {tb}")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from agents.train import train_main

    return train_main(args)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from agents.evaluate import evaluate_main

    return evaluate_main(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    from ainet_gym.bench import bench_main

    return bench_main(args)


def _cmd_crosscheck(args: argparse.Namespace) -> int:
    from ainet_gym.crosscheck import Ns3NotInstalledError, crosscheck

    try:
        out = crosscheck(args.scenario, policy=args.policy, seed=args.seed, steps=args.steps)
    except Ns3NotInstalledError as e:
        print(f"ainet-gym crosscheck: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"scenario {out['scenario']}  policy {out['policy']}  seed {out['seed']}")
    print(f"  {'job':<16}{'fluid ms':>10}{'ns-3 ms':>10}{'error':>9}")
    for j in out["jobs"]:
        print(
            f"  {j['name']:<16}{j['fluid_comm_ms']:>10.3f}{j['ns3_comm_ms']:>10.3f}{100 * j['rel_error']:>+8.2f}%"
        )
    print(f"  wall: fluid {out['fluid_wall_s'] * 1e3:.2f} ms, ns-3 {out['ns3_wall_s']:.2f} s")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from agents.demo import demo_main

    return demo_main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ainet-gym", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("scenarios", help="list the shipped scenarios")
    s.set_defaults(func=_cmd_scenarios)

    s = sub.add_parser("simulate", help="run a scenario under a routing policy, without RL")
    s.add_argument("scenario", help="shipped scenario name or YAML path")
    s.add_argument("--policy", default="ecmp", help="ecmp | spray | wcmp | greedy | lp")
    s.add_argument("--steps", type=int, default=1, help="decision intervals to run")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_cmd_simulate)

    s = sub.add_parser("train", help="train an RL routing policy (stable-baselines3)")
    s.add_argument("scenario")
    s.add_argument("--algo", default="ppo", help="ppo | a2c | sac | maskable_ppo")
    s.add_argument("--action-mode", default=None, help="path | split | ecmp_weights (default: per algo)")
    s.add_argument("--timesteps", type=int, default=20_000)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--n-envs", type=int, default=16, help="copies in the native vector env")
    s.add_argument("--logdir", default="runs", help="TensorBoard log directory")
    s.add_argument("--out", default=None, help="where to save the model (.zip)")
    s.add_argument("--resume", default=None, help="a saved model to continue training")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_train)

    s = sub.add_parser("evaluate", help="compare policies on the same seeds")
    s.add_argument("scenario")
    s.add_argument("--policies", default="ecmp,spray,wcmp,greedy,lp", help="comma list; ppo:PATH for a model")
    s.add_argument("--episodes", type=int, default=1, help="episodes per seed")
    s.add_argument("--seeds", default="1,2,3")
    s.add_argument("--steps", type=int, default=None, help="steps per episode (default: the scenario's)")
    s.add_argument("--out", default="out/eval", help="directory for the table, CSV, JSON and figure")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_cmd_evaluate)

    s = sub.add_parser("bench", help="measure the allocator and the environments")
    s.add_argument("--quick", action="store_true", help="small sizes only")
    s.add_argument("--out", default="bench-results", help="directory for the JSON and the plot")
    s.add_argument("--sections", default=None, help="comma list of sections to run (default: all)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_bench)

    s = sub.add_parser("crosscheck", help="compare the fluid model with ns-3 packets (extra: ns3)")
    s.add_argument("scenario", help="scenario name or YAML path (cross-check cases: xc-ring-8, ...)")
    s.add_argument("--policy", default="ecmp", help="any policy of evaluate: ecmp, spray, lp, ppo:PATH, ...")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--steps", type=int, default=1, help="decision intervals to simulate in both")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_cmd_crosscheck)

    s = sub.add_parser("demo", help="the main job: train PPO on the default scenario and compare")
    s.add_argument("--scenario", default="spine-leaf-2to1")
    s.add_argument("--timesteps", type=int, default=None)
    s.add_argument("--out", default="out/demo")
    s.add_argument("--seed", type=int, default=0, help="training seed")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ainet-gym`` console script."""
    from ainet_gym.scenario import ScenarioError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ScenarioError, ValueError, FileNotFoundError) as e:
        print(f"ainet-gym {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
