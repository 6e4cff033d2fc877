"""The ``ainet-gym`` command line: scenarios, simulate, train, evaluate, bench, demo, leaderboard."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Sequence

__all__ = ["main"]


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


def _deferred(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The subcommand ``module.name(args)``, its module (agents, torch, the bench) imported only when it runs."""

    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), name)(args)

    return run


def _cmd_train(args: argparse.Namespace) -> int:
    if args.framework == "rllib":
        from ainet_gym.agents.rllib_train import train_rllib_main

        return train_rllib_main(args)
    from ainet_gym.agents.train import train_main

    return train_main(args)


def _cmd_crosscheck(args: argparse.Namespace) -> int:
    from ainet_gym.checks.crosscheck import (
        CrosscheckConfig,
        Ns3NotInstalledError,
        crosscheck,
        tcp_header_efficiency,
    )

    cfg = CrosscheckConfig()
    if args.mss is not None or args.del_ack_count is not None or args.max_gpus is not None:
        mss = cfg.mss if args.mss is None else args.mss
        dack = cfg.del_ack_count if args.del_ack_count is None else args.del_ack_count
        cfg = CrosscheckConfig(
            mss=mss,
            del_ack_count=dack,
            # the TCP payload fraction of these segments (a bad value is refused by crosscheck, naming it)
            header_efficiency=tcp_header_efficiency(mss, dack)
            if mss > 0 and dack > 0
            else cfg.header_efficiency,
            max_gpus=cfg.max_gpus if args.max_gpus is None else args.max_gpus,
        )
    if args.split_qps is not None:
        from dataclasses import replace

        cfg = replace(cfg, split_qps=args.split_qps)
    try:
        out = crosscheck(args.scenario, policy=args.policy, seed=args.seed, steps=args.steps, config=cfg)
    except Ns3NotInstalledError as e:
        print(f"ainet-gym crosscheck: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"scenario {out['scenario']}  policy {out['policy']}  seed {out['seed']}  intervals {out['steps']}")
    print(
        f"  {'job':<16}{'fluid ms':>10}{'ns-3 ms':>10}{'error':>9}   (mean communication time per iteration)"
    )
    for j in out["jobs"]:
        print(
            f"  {j['name']:<16}{j['fluid_comm_ms']:>10.3f}{j['ns3_comm_ms']:>10.3f}{100 * j['rel_error']:>+8.2f}%"
        )
    if out["steps"] > 1:
        print("  per interval (iterations fluid/ns-3, fluid ms, ns-3 ms, error):")
        for j in out["jobs"]:
            cells = []
            for iv in j["intervals"]:
                a, b, e = iv["fluid_comm_ms"], iv["ns3_comm_ms"], iv["rel_error"]
                cells.append(
                    f"{iv['fluid_iterations']}/{iv['ns3_iterations']} "
                    + (f"{a:.2f}" if a is not None else "-") + " " + (f"{b:.2f}" if b is not None else "-")
                    + (f" {100 * e:+.1f}%" if e is not None else "")
                )  # fmt: skip
            print(f"  {j['name']:<16}" + " | ".join(cells))
    print(f"  wall: fluid {out['fluid_wall_s'] * 1e3:.2f} ms, ns-3 {out['ns3_wall_s']:.2f} s")
    return 0


#: Shown in the ``--help`` of every command that loads a model file.
TRUST = (
    "Model files hold pickled Python objects and unpickling a crafted file can run code: the loader checks "
    "that a file is a model of the expected algorithm and unpickles it with an allowlist of classes, but "
    "load only model files you trust."
)
_SEED_MAX = 2**63 - 1
_TRAIN_SEED_MAX = 2**31 - 1  # torch and numpy's legacy seeding take 32-bit seeds (plus the episode offset)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``ainet-gym CMD: error: ...``, exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int_arg(lo: int, hi: int | None = None) -> type:
    """An argparse type: an integer in [lo, hi]; argparse names the flag in the message."""

    def parse(text: str) -> int:
        rng = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text):,} characters)"
        if len(text.strip()) > 100:  # Python refuses integers above 4,300 digits; none fits a flag
            raise argparse.ArgumentTypeError(f"{shown} is out of range; allowed: {rng}")
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown!r} is not an integer") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{shown} is out of range; allowed: {rng}")
        return v

    parse.__name__ = "integer"
    return parse  # type: ignore[return-value]


def _float_arg(what: str, *, zero_ok: bool = False) -> type:
    """An argparse type: a finite number > 0 (>= 0 with ``zero_ok``; ``what`` names it in the message)."""
    bound = ">= 0" if zero_ok else "> 0"

    def parse(text: str) -> float:
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text):,} characters)"
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown!r} is not a number; expected {what}, {bound}") from None
        if not math.isfinite(v) or v < 0 or (v == 0 and not zero_ok):
            raise argparse.ArgumentTypeError(
                f"{shown} is out of range; allowed: {what}, a finite number {bound}"
            )
        return v

    parse.__name__ = what
    return parse  # type: ignore[return-value]


def _text_arg(what: str) -> type:
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"empty; expected {what}")
        return text

    parse.__name__ = what
    return parse  # type: ignore[return-value]


def _seeds_arg(text: str) -> str:
    from ainet_gym.agents.evaluate import parse_seeds

    try:
        parse_seeds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


_SCENARIO = _text_arg("a shipped scenario name or a YAML path")


def _seconds_arg(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (at most 1e9)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v < 1e9:
        raise argparse.ArgumentTypeError(f"{text} is out of range; allowed: a number of seconds in (0, 1e9)")
    return v


def _add_leaderboard(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("leaderboard", help="every env id x every baseline and shipped policy, one table")
    s.add_argument("--quick", action="store_true", help="2 seeds x 3 intervals (a smoke test)")
    s.add_argument("--seeds", type=_seeds_arg, default=None, help="held-out seeds (default 1-10)")
    s.add_argument(
        "--steps", type=_int_arg(1), default=None, help="intervals per episode (default: the scenario's)"
    )
    s.add_argument("--env-ids", default=None, help="comma list of env ids ('none'; default: all registered)")
    s.add_argument("--policies", default=None, help="extra registered agents to rank (comma list)")
    s.add_argument(
        "--scenarios",
        default=None,
        help="scenarios ranked beside the env ids (comma list of names or files; 'none'; default: those "
        "of the shipped checkpoints that no env id covers)",
    )
    s.add_argument(
        "--out",
        type=_text_arg("a directory"),
        default=None,
        help="directory for the table, CSV, JSON and figure (default: a fresh out/leaderboard/leaderboard__TIME)",
    )
    s.add_argument("--overwrite", action="store_true", help="allow --out to hold earlier results")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_deferred("ainet_gym.agents.leaderboard", "leaderboard_main"))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ainet-gym", description=__doc__)
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("scenarios", help="list the shipped scenarios (--env-ids: the registered env ids)")
    s.add_argument(
        "--env-ids",
        action="store_true",
        help="list the registered env ids instead: id, action mode, default scenario, max_episode_steps",
    )
    s.set_defaults(func=_cmd_scenarios)

    s = sub.add_parser("simulate", help="run a scenario under a routing policy, without RL")
    s.add_argument("scenario", type=_SCENARIO, help="shipped scenario name or YAML path")
    s.add_argument(
        "--policy",
        default="ecmp",
        help="ecmp, spray, wcmp, greedy, lp, predictive-lp, ...; NAME+bg routes background too",
    )
    s.add_argument("--steps", type=_int_arg(1, 10_000_000), default=1, help="decision intervals to run")
    s.add_argument("--seed", type=_int_arg(0, _SEED_MAX), default=0)
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--links", action="store_true", help="with --json: per-link records in every step")
    s.add_argument("--flows", action="store_true", help="with --json: per-connection records in every step")
    s.add_argument(
        "--link-windows",
        type=_int_arg(1, 1000),
        default=10,
        help="windows per interval for peak link utilisation (--links; at most 1000: "
        "LIMITS['link_windows_max'])",
    )
    s.set_defaults(func=_cmd_simulate)

    s = sub.add_parser("export-fabric", help="write a scenario's fabric as GraphML, to edit and load back")
    s.add_argument("scenario", type=_SCENARIO, help="shipped scenario name or YAML path")
    s.add_argument("--graphml", required=True, help="output file (.graphml)")
    s.add_argument("--overwrite", action="store_true", help="allow --graphml to replace an existing file")
    s.set_defaults(func=_cmd_export_fabric)

    s = sub.add_parser("train", help="train an RL routing policy (stable-baselines3)", epilog=TRUST)
    s.add_argument("scenario", type=_SCENARIO)
    s.add_argument("--algo", default="ppo", help="ppo | a2c | sac | maskable_ppo")
    s.add_argument(
        "--action-mode",
        default=None,
        help="path | split | ecmp_weights | split_bg | choose | choose_bg (default: per algo)",
    )
    s.add_argument(
        "--residual",
        default=None,
        help="a base routing the policy adjusts (ecmp_weights or split_bg modes), e.g. lp+bg or solo-lp+bg",
    )
    s.add_argument(
        "--residual-scale",
        type=float,
        default=None,
        help="log of the largest factor per action (default log 4)",
    )
    s.add_argument(
        "--log-std-init",
        type=float,
        default=None,
        help="initial log std of Gaussian actions (PPO default -1)",
    )
    s.add_argument(
        "--learning-rate",
        type=_float_arg("a learning rate"),
        default=None,
        help="initial learning rate (PPO: decays linearly to a tenth of it; default 3e-4)",
    )
    s.add_argument(
        "--target-kl",
        type=_float_arg("a KL divergence"),
        default=None,
        help="PPO: stop an update's epochs when the approximate KL exceeds 1.5x this (default: no limit)",
    )
    s.add_argument(
        "--ent-coef",
        type=_float_arg("an entropy coefficient", zero_ok=True),
        default=None,
        help="PPO, A2C: weight of the entropy bonus (default 0)",
    )
    s.add_argument(
        "--gamma",
        type=float,
        default=None,
        help="discount factor (default 0.9)",
    )
    s.add_argument(
        "--obs-features",
        default=None,
        type=lambda v: [x for x in v.split(",") if x],
        help="optional observation blocks, comma-separated (phase: each job's position in its iteration)",
    )
    s.add_argument(
        "--save-every",
        type=_int_arg(1),
        default=None,
        help="also save a checkpoint every N steps (RUN/checkpoints)",
    )
    s.add_argument("--timesteps", type=_int_arg(1), default=20_000)
    s.add_argument("--seed", type=_int_arg(0, _TRAIN_SEED_MAX), default=0)
    s.add_argument("--n-envs", type=_int_arg(1, 100_000), default=16, help="copies in the native vector env")
    s.add_argument("--logdir", default="runs", help="TensorBoard log directory")
    s.add_argument(
        "--out",
        type=_text_arg("a directory or a .zip model path"),
        default=None,
        help="X.zip: the model file; any other path: a directory that receives model.zip "
        "(default: LOGDIR/RUN_NAME/model.zip, a fresh run folder); --framework rllib: the checkpoint directory",
    )
    s.add_argument("--overwrite", action="store_true", help="allow --out to replace an existing model")
    s.add_argument(
        "--resume",
        type=_text_arg("a model path"),
        default=None,
        help="a saved model (rllib: a checkpoint directory) to continue training (never overwritten)",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--framework", default="sb3", choices=("sb3", "rllib"), help="sb3 (one machine) | rllib")
    s.add_argument("--num-env-runners", type=_int_arg(0, 100_000), default=2, help="rllib: env runner actors")
    s.add_argument(
        "--envs-per-runner", type=_int_arg(1, 100_000), default=16, help="rllib: vector env copies per runner"
    )
    s.add_argument("--address", default=None, help="rllib: join a Ray cluster (auto or HOST:PORT)")
    s.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="rllib --resume: I trust this checkpoint folder (resuming unpickles RLlib's state, which can run code)",
    )
    s.set_defaults(func=_cmd_train)

    s = sub.add_parser(
        "convert-rllib",
        help="add plain weights to an RLlib checkpoint written before 0.3, so rllib:DIR loads it (rllib extra)",
        epilog="Converting unpickles the folder's RLlib module, which can run code: only for folders you trust.",
    )
    s.add_argument("checkpoint", type=_text_arg("a checkpoint directory"), help="checkpoint directory")
    s.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="required: I trust this folder (converting unpickles RLlib's module, which can run code)",
    )
    s.add_argument("--overwrite", action="store_true", help="write the plain weights again if present")
    s.set_defaults(func=_deferred("ainet_gym.agents.rllib_train", "convert_main"))

    s = sub.add_parser("evaluate", help="compare policies on the same seeds", epilog=TRUST)
    s.add_argument("scenario", type=_SCENARIO)
    s.add_argument("--policies", default="ecmp,spray,wcmp,greedy,lp", help="comma list; ppo:PATH for a model")
    s.add_argument("--episodes", type=_int_arg(1, 10_000), default=1, help="episodes per seed")
    s.add_argument("--seeds", type=_seeds_arg, default="1,2,3", help="e.g. 1,2,3 or 1-10")
    s.add_argument(
        "--steps",
        type=_int_arg(1, 10_000_000),
        default=None,
        help="steps per episode (default: the scenario's)",
    )
    s.add_argument(
        "--out",
        type=_text_arg("a directory"),
        default=None,
        help="directory for the table, CSV, JSON and figure (default: a fresh out/eval/SCENARIO__TIME)",
    )
    s.add_argument("--overwrite", action="store_true", help="allow --out to hold earlier results")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_deferred("ainet_gym.agents.evaluate", "evaluate_main"))

    s = sub.add_parser("sweep", help="Ray Tune grid of RLlib PPO runs, one results table (rllib extra)")
    s.add_argument("--scenarios", default="periodic-interference", help="comma list of scenarios")
    s.add_argument("--seeds", default="0,1", help="comma list of training seeds")
    s.add_argument("--lrs", default="3e-4", help="comma list of learning rates")
    s.add_argument("--timesteps", type=_int_arg(1, 10**12), default=10_000, help="env steps per trial")
    s.add_argument(
        "--num-env-runners",
        type=_int_arg(0, 100_000),
        default=0,
        help="env runners per trial (0: in-process)",
    )
    s.add_argument("--envs-per-runner", type=_int_arg(1, 100_000), default=16)
    s.add_argument(
        "--max-concurrent",
        type=_int_arg(1, 100_000),
        default=2,
        help="trials at once (1 + runners CPUs each)",
    )
    s.add_argument("--eval-seeds", type=_seeds_arg, default="1,2,3", help="held-out evaluation seeds")
    s.add_argument("--address", default=None, help="join a Ray cluster (auto or HOST:PORT)")
    s.add_argument(
        "--out",
        type=_text_arg("a directory"),
        default=None,
        help="directory for the table, checkpoints and Tune's files (default: a fresh out/sweep/sweep__TIME)",
    )
    s.add_argument("--overwrite", action="store_true", help="allow --out to hold an earlier sweep")
    s.set_defaults(func=_deferred("ainet_gym.agents.rllib_sweep", "sweep_main"))

    s = sub.add_parser("bench", help="measure the allocator and the environments")
    s.add_argument("--quick", action="store_true", help="small sizes only")
    s.add_argument(
        "--out",
        type=_text_arg("a directory"),
        default=None,
        help="directory for the JSON and the plot (default: a fresh bench-results/bench__TIME)",
    )
    s.add_argument("--overwrite", action="store_true", help="allow --out to hold earlier results")
    s.add_argument("--sections", default=None, help="comma list of sections to run (default: all)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=_deferred("ainet_gym.bench", "bench_main"))

    s = sub.add_parser("crosscheck", help="compare the fluid model with ns-3 packets (extra: ns3)")
    s.add_argument("scenario", help="scenario name or YAML path (cross-check cases: xc-ring-8, ...)")
    s.add_argument(
        "--policy",
        default="ecmp",
        help="any policy of evaluate: ecmp, spray, lp, lp+bg, pretrained, ppo:PATH, ...",
    )
    s.add_argument("--seed", type=int, default=0)
    s.add_argument(
        "--steps",
        type=int,
        default=None,
        help="decision intervals to simulate in both (default: dynamics.episode_steps)",
    )
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument(
        "--mss",
        type=int,
        default=None,
        help="TCP segment size, bytes (default 1448; 8948: jumbo frames, cheaper)",
    )
    s.add_argument("--del-ack-count", type=int, default=None, help="segments per delayed ACK (default 2)")
    s.add_argument("--max-gpus", type=int, default=None, help="largest fabric accepted (default 64)")
    s.add_argument(
        "--split-qps",
        type=int,
        default=None,
        help="carry every connection as K TCP connections (QPs), K*f of them on a path of fraction f, the "
        "policy's splits rounded to multiples of 1/K on both sides (default: one TCP connection per path)",
    )
    s.set_defaults(func=_cmd_crosscheck)

    s = sub.add_parser(
        "demo", help="the main job: train PPO on periodic-interference and compare", epilog=TRUST
    )
    s.add_argument("--scenario", type=_SCENARIO, default="periodic-interference")
    s.add_argument("--timesteps", type=_int_arg(1), default=None)
    s.add_argument(
        "--out",
        type=_text_arg("a directory or a .zip model path"),
        default=None,
        help="a directory (model.zip, results, logs), or X.zip (the model; results and logs in X/); "
        "default: a fresh out/demo/RUN_NAME",
    )
    s.add_argument("--overwrite", action="store_true", help="allow --out to hold an earlier model or results")
    s.add_argument("--seed", type=_int_arg(0, _TRAIN_SEED_MAX), default=0, help="training seed")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument(
        "--quick", action="store_true", help="a smoke run (4,096 steps, 2 seeds): what CI runs, not a result"
    )
    s.set_defaults(func=_deferred("ainet_gym.agents.demo", "demo_main"))

    s = sub.add_parser(
        "soak", help="random actions in every mode on the vector env, every invariant checked every step"
    )
    s.add_argument(
        "scenarios", nargs="*", type=_SCENARIO, help="scenarios (default: the shipped dynamic scenarios)"
    )
    s.add_argument("--steps", type=_int_arg(1), default=10_000, help="env steps per scenario and action mode")
    s.add_argument("--num-envs", type=_int_arg(1, 4096), default=32, help="copies in the vector env")
    s.add_argument("--modes", default=None, help="comma list of action modes (default: every mode)")
    s.add_argument("--seed", type=_int_arg(0, 2**62), default=0)
    s.add_argument(
        "--max-seconds",
        type=_seconds_arg,
        default=None,
        help="stop each scenario and mode after this wall time (the steps checked are printed)",
    )
    s.set_defaults(func=_cmd_soak)
    _add_leaderboard(sub)
    for s in sub.choices.values():  # --debug also after the command (default: the top-level value)
        s.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of an error"
        )
    return p


def _cmd_soak(args: argparse.Namespace) -> int:
    from ainet_gym.checks.soak import ACTION_MODES, DYNAMIC_SCENARIOS, soak

    scenarios = args.scenarios or list(DYNAMIC_SCENARIOS)
    if args.modes is None:  # every mode, the discrete and background ones included
        modes = list(ACTION_MODES)
    else:
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes:
        raise ValueError(f"--modes {args.modes!r}: empty; give a comma list of {', '.join(ACTION_MODES)}")
    bad = [m for m in modes if m not in ACTION_MODES]
    if bad:
        raise ValueError(f"--modes: {bad[0]!r} is not an action mode; allowed: {', '.join(ACTION_MODES)}")
    total = violations = 0
    for sc in scenarios:
        for mode in modes:
            r = soak(
                sc, mode, args.steps, num_envs=args.num_envs, seed=args.seed, max_seconds=args.max_seconds
            )
            total += r.steps
            violations += r.violations
            print(
                f"{r.scenario:<24} {r.action_mode:<13} {r.steps:>9,} steps  {r.job_checks:>10,} job checks  "
                f"{r.bad_actions:>5} bad actions refused  {r.violations} violations  {r.seconds:7.1f} s",
                flush=True,
            )
            for ex in r.examples:
                print(f"  {ex}")
    print(f"soak: {total:,} env steps checked, {violations} violations")
    return 0 if violations == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ainet-gym`` console script.

    The project's own errors (a bad scenario, argument, action, model or output path: ``ValueError``,
    ``OSError``, ``ImportError``, ``RuntimeError``, ``gymnasium.error.Error``) print one line,
    ``ainet-gym COMMAND: error: ...``, and exit with status 2; ``--debug`` shows the traceback instead. A
    reader that closes the pipe early (``ainet-gym scenarios | head -3``) ends the command quietly with
    status 141 (128 + SIGPIPE, as shell tools do).
    """
    from gymnasium import error as gym_error

    from ainet_gym.scenario.loader import ScenarioError

    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # block-buffered output (a pipe) is written here, where a closed pipe is caught
        return code
    except KeyboardInterrupt:
        print(f"ainet-gym {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader is gone: point stdout at /dev/null so the interpreter's final flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (ScenarioError, ValueError, OSError, ImportError, RuntimeError, gym_error.Error) as e:
        if args.debug:
            raise
        text = " ".join(str(e).split()) or type(e).__name__
        print(f"ainet-gym {args.command}: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
