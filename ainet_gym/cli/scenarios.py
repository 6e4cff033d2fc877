"""The subcommands that read scenarios without learning: ``scenarios``, ``simulate``, ``export-fabric``."""

from __future__ import annotations

import argparse
import json

from ainet_gym.cli.args import SCENARIO, SEED_MAX, Subparsers, int_arg

__all__ = ["add_export_fabric", "add_scenarios", "add_simulate"]


def add_scenarios(sub: Subparsers) -> None:
    """``ainet-gym scenarios [--env-ids]``: the shipped scenarios, or the registered env ids."""
    s = sub.add_parser("scenarios", help="list the shipped scenarios (--env-ids: the registered env ids)")
    s.add_argument(
        "--env-ids",
        action="store_true",
        help="list the registered env ids instead: id, action mode, default scenario, max_episode_steps",
    )
    s.set_defaults(func=_cmd_scenarios)


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from ainet_gym.scenario.loader import list_scenarios

    if args.env_ids:
        return _print_env_ids()
    rows = list_scenarios()
    width = max((len(n) for n, _ in rows), default=0)
    for name, desc in rows:
        print(f"{name:<{width}}  {desc}")
    return 0


def _print_env_ids() -> int:
    """The registered env ids: id, action mode, action space, default scenario, max_episode_steps."""
    import gymnasium as gym

    import ainet_gym  # noqa: F401  (registers the ids)
    from ainet_gym.envs.registration import env_ids

    rows = [("env id", "action mode", "default scenario", "max_episode_steps")]
    for env_id, (_base, mode) in env_ids().items():
        spec = gym.spec(env_id)
        rows.append((env_id, mode, str(spec.kwargs["scenario"]), str(spec.max_episode_steps)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def add_simulate(sub: Subparsers) -> None:
    """``ainet-gym simulate SCENARIO``: a scenario under a routing policy, without RL."""
    s = sub.add_parser("simulate", help="run a scenario under a routing policy, without RL")
    s.add_argument("scenario", type=SCENARIO, help="shipped scenario name or YAML path")
    s.add_argument(
        "--policy",
        default="ecmp",
        help="ecmp, spray, wcmp, greedy, lp, predictive-lp, ...; NAME+bg routes background too",
    )
    s.add_argument("--steps", type=int_arg(1, 10_000_000), default=1, help="decision intervals to run")
    s.add_argument("--seed", type=int_arg(0, SEED_MAX), default=0)
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--links", action="store_true", help="with --json: per-link records in every step")
    s.add_argument("--flows", action="store_true", help="with --json: per-connection records in every step")
    s.add_argument(
        "--link-windows",
        type=int_arg(1, 1000),
        default=10,
        help="windows per interval for peak link utilisation (--links; at most 1000: "
        "LIMITS['link_windows_max'])",
    )
    s.set_defaults(func=_cmd_simulate)


def _fmt(x: float | None, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _cmd_simulate(args: argparse.Namespace) -> int:
    from ainet_gym.sim.simulate import simulate

    if (args.links or args.flows) and not args.json:
        raise ValueError("--links and --flows add records to the JSON output: use them with --json")
    out = simulate(
        args.scenario,
        policy=args.policy,
        steps=args.steps,
        seed=args.seed,
        links=args.links,
        flows=args.flows,
        link_windows=args.link_windows,
    )
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


def add_export_fabric(sub: Subparsers) -> None:
    """``ainet-gym export-fabric SCENARIO --graphml FILE``: the fabric as GraphML."""
    s = sub.add_parser("export-fabric", help="write a scenario's fabric as GraphML, to edit and load back")
    s.add_argument("scenario", type=SCENARIO, help="shipped scenario name or YAML path")
    s.add_argument("--graphml", required=True, help="output file (.graphml)")
    s.add_argument("--overwrite", action="store_true", help="allow --graphml to replace an existing file")
    s.set_defaults(func=_cmd_export_fabric)


def _cmd_export_fabric(args: argparse.Namespace) -> int:
    from ainet_gym.agents.outputs import check_out_file
    from ainet_gym.fabric.topology import build_fabric, write_fabric_graph
    from ainet_gym.scenario.loader import load_scenario

    sc = load_scenario(args.scenario)
    inputs = [sc.source] if sc.source and not sc.source.startswith("<") else []
    fab = sc.raw.get("fabric")
    if isinstance(fab, dict) and isinstance(fab.get("file"), str):
        inputs.append(fab["file"])
    check_out_file(args.graphml, args.overwrite, inputs, flag="--graphml")
    fabric = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    write_fabric_graph(fabric, args.graphml)
    print(
        f"{args.graphml}: {len(fabric.node_names)} nodes, {fabric.n_links} directed links, {fabric.n_gpus} GPUs; "
        f"use it with fabric: {{topology: graph, file: {args.graphml}}}"
    )
    return 0
