"""The subcommands that check and measure the model: ``bench``, ``crosscheck`` (ns-3) and ``soak``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from ainet_gym.cli.args import (
    SCENARIO,
    Subparsers,
    add_output,
    add_seed_steps_args,
    deferred,
    float_arg,
    int_arg,
    seconds_arg,
)
from ainet_gym.errors import names_message

__all__ = ["add_bench", "add_crosscheck", "add_soak"]


def add_bench(sub: Subparsers) -> None:
    """``ainet-gym bench``: the allocator and the environments, as ratios against references of the same run."""
    s = sub.add_parser(
        "bench",
        help="measure the allocator and the environments",
        description="Measure the allocator and the environments. Env rows give env steps per wall second (the "
        "targets' figure) and, beside it, per CPU second of the process (time.process_time: every thread "
        "counts, the compiled backend's worker included) with the CPU seconds per wall second: on a shared "
        "machine compare runs by the CPU figure.",
    )
    s.add_argument("--quick", action="store_true", help="small sizes only")
    add_output(
        s,
        "a directory",
        "directory for the JSON and the plot (default: a fresh bench-results/bench__TIME)",
        "allow --out to hold earlier results",
    )
    s.add_argument("--sections", default=None, help="comma list of sections to run (default: all)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument(
        "--clock",
        default=None,
        help="the clock every row is timed by: wall (default) or cpu (CPU seconds of the process, every thread, "
        "and of its finished child processes; field names unchanged, meta.clock records it; compare with "
        "NUMBA_NUM_THREADS=1 on both sides)",
    )
    s.set_defaults(func=deferred("ainet_gym.bench", "bench_main"))


def add_crosscheck(sub: Subparsers) -> None:
    """``ainet-gym crosscheck SCENARIO``: the fluid model against ns-3 packets (extra: ns3)."""
    s = sub.add_parser("crosscheck", help="compare the fluid model with ns-3 packets (extra: ns3)")
    s.add_argument("scenario", help="scenario name or YAML path (cross-check cases: xc-ring-8, ...)")
    s.add_argument(
        "--policy",
        default="ecmp",
        help="any policy of evaluate: ecmp, spray, lp, lp+bg, pretrained, ppo:PATH, ...",
    )
    add_seed_steps_args(s, "decision intervals to simulate in both (default: dynamics.episode_steps)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument(
        "--mss",
        type=int_arg(1),
        default=None,
        help="TCP segment size, bytes (default 1448; 8948: jumbo frames, cheaper)",
    )
    s.add_argument(
        "--del-ack-count", type=int_arg(1), default=None, help="segments per delayed ACK (default 2)"
    )
    s.add_argument("--max-gpus", type=int_arg(1), default=None, help="largest fabric accepted (default 64)")
    s.add_argument(
        "--split-qps",
        type=int_arg(1),
        default=None,
        help="carry every connection as K TCP connections (QPs), K*f of them on a path of fraction f, the "
        "policy's splits rounded to multiples of 1/K on both sides (default: one TCP connection per path)",
    )
    s.add_argument(
        "--fq-flows",
        type=int_arg(1),
        default=None,
        help="hash buckets of every link's FqCoDel queue (default 65536; ns-3's own default 1024 shares a "
        "bucket between colliding connections, which the fluid model and RoCE switches do not)",
    )
    s.add_argument(
        "--wall-limit-s",
        type=seconds_arg,
        default=None,
        help="ns-3 wall-clock limit, s (default 900; raise it on a loaded machine or for a long replay)",
    )
    s.add_argument(
        "--max-ns3-gb",
        type=float_arg("a size in GB"),
        default=None,
        help="largest estimated transfer volume the ns-3 run may carry, GB (default 8)",
    )
    s.set_defaults(func=_cmd_crosscheck)


def _cmd_crosscheck(args: argparse.Namespace) -> int:
    from ainet_gym.checks.crosscheck import (
        CrosscheckConfig,
        Ns3NotInstalledError,
        crosscheck,
        tcp_header_efficiency,
    )
    from ainet_gym.checks.crosscheck.report import text_report

    given = {
        "mss": args.mss,
        "del_ack_count": args.del_ack_count,
        "max_gpus": args.max_gpus,
        "split_qps": args.split_qps,
        "fq_flows": args.fq_flows,
        "wall_limit_s": args.wall_limit_s,
        "max_ns3_bytes": None if args.max_ns3_gb is None else args.max_ns3_gb * 1e9,
    }
    cfg = replace(CrosscheckConfig(), **{k: v for k, v in given.items() if v is not None})
    if args.mss is not None or args.del_ack_count is not None:  # the TCP payload fraction of these segments
        cfg = replace(cfg, header_efficiency=tcp_header_efficiency(cfg.mss, cfg.del_ack_count))
    try:
        out = crosscheck(args.scenario, policy=args.policy, seed=args.seed, steps=args.steps, config=cfg)
    except Ns3NotInstalledError as e:
        print(f"ainet-gym crosscheck: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out))
        return 0
    print(text_report(out))
    return 0


def add_soak(sub: Subparsers) -> None:
    """``ainet-gym soak``: random and malformed actions on the vector env, invariants checked every step."""
    s = sub.add_parser(
        "soak", help="random actions in every mode on the vector env, every invariant checked every step"
    )
    s.add_argument(
        "scenarios", nargs="*", type=SCENARIO, help="scenarios (default: the shipped dynamic scenarios)"
    )
    s.add_argument("--steps", type=int_arg(1), default=10_000, help="env steps per scenario and action mode")
    s.add_argument("--num-envs", type=int_arg(1, 4096), default=32, help="copies in the vector env")
    s.add_argument("--modes", default=None, help="comma list of action modes (default: every mode)")
    s.add_argument("--seed", type=int_arg(0, 2**62), default=0)
    s.add_argument(
        "--max-seconds",
        type=seconds_arg,
        default=None,
        help="stop each scenario and mode after this wall time (the steps checked are printed)",
    )
    s.set_defaults(func=_cmd_soak)


def _cmd_soak(args: argparse.Namespace) -> int:
    from ainet_gym.checks.soak import ACTION_MODES, DYNAMIC_SCENARIOS, soak

    scenarios = args.scenarios or list(DYNAMIC_SCENARIOS)
    if args.modes is None:  # every mode, the discrete and background ones included
        modes = list(ACTION_MODES)
    else:
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes:
        raise ValueError(f"--modes {args.modes!r}: empty; give a comma list of {', '.join(ACTION_MODES)}")
    if any(m not in ACTION_MODES for m in modes):
        raise ValueError(names_message("--modes", modes, ACTION_MODES))
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
