"""The subcommands that train and compare policies: ``train``, ``convert-rllib``, ``evaluate``, ``sweep``,
``demo`` and ``leaderboard`` (their handlers live in ``ainet_gym.agents``, imported when a command runs)."""

from __future__ import annotations

import argparse

from ainet_gym.cli.args import (
    SCENARIO,
    TRAIN_SEED_MAX,
    TRUST,
    Subparsers,
    add_episode_steps_arg,
    add_output,
    deferred,
    float_arg,
    int_arg,
    seeds_arg,
    text_arg,
    unit_interval_arg,
)

__all__ = ["add_convert_rllib", "add_demo", "add_evaluate", "add_leaderboard", "add_sweep", "add_train"]


def add_train(sub: Subparsers) -> None:
    """``ainet-gym train SCENARIO``: an RL routing policy with stable-baselines3 or RLlib. The flags in
    ``--help`` order, by group: the policy and its hyperparameters (:func:`_add_train_policy_flags`), the
    run (:func:`_add_train_run_flags`), RLlib's (:func:`_add_train_rllib_flags`)."""
    s = sub.add_parser("train", help="train an RL routing policy (stable-baselines3)", epilog=TRUST)
    s.add_argument("scenario", type=SCENARIO)
    _add_train_policy_flags(s)
    _add_train_run_flags(s)
    _add_train_rllib_flags(s)
    s.set_defaults(func=_cmd_train)


def _add_train_policy_flags(s: argparse.ArgumentParser) -> None:
    """``train``'s flags of the policy: algorithm, action mode, residual base, hyperparameters,
    observation blocks."""
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
    # the optional float hyperparameters (None: the algorithm's default): flag, what the value is, the
    # float_arg options and the help text
    for flag, what, allow, text in (
        ("--residual-scale", "a log factor", {}, "log of the largest factor per action (default log 4)"),
        (
            "--log-std-init",
            "a log standard deviation",
            {"negative_ok": True},
            "initial log std of Gaussian actions (PPO default -1)",
        ),
        (
            "--learning-rate",
            "a learning rate",
            {},
            "initial learning rate (PPO: decays linearly to a tenth of it; default 3e-4)",
        ),
        (
            "--target-kl",
            "a KL divergence",
            {},
            "PPO: stop an update's epochs when the approximate KL exceeds 1.5x this (default: no limit)",
        ),
        (
            "--ent-coef",
            "an entropy coefficient",
            {"zero_ok": True},
            "PPO, A2C: weight of the entropy bonus (default 0)",
        ),
    ):
        s.add_argument(flag, type=float_arg(what, **allow), default=None, help=text)
    s.add_argument(
        "--gamma",
        type=unit_interval_arg("a discount factor"),
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
        "--obs-blocks",
        default=None,
        type=lambda v: [x for x in v.split(",") if x],
        help="the observation blocks the networks read, comma-separated (e.g. job_phase with --obs-features "
        "phase; default: every input)",
    )
    s.add_argument(
        "--extra-plans",
        default=None,
        type=lambda v: [x for x in v.split(",") if x],
        help="choose modes: plans appended to the mode's, comma-separated (e.g. isolate0+bg,isolate1+bg)",
    )


def _add_train_run_flags(s: argparse.ArgumentParser) -> None:
    """``train``'s flags of the run: checkpoints, length, seed, vector env size, where it writes, resuming."""
    s.add_argument(
        "--save-every",
        type=int_arg(1),
        default=None,
        help="also save a checkpoint every N steps (RUN/checkpoints)",
    )
    s.add_argument("--timesteps", type=int_arg(1), default=20_000)
    s.add_argument("--seed", type=int_arg(0, TRAIN_SEED_MAX), default=0)
    s.add_argument("--n-envs", type=int_arg(1, 100_000), default=16, help="copies in the native vector env")
    s.add_argument("--logdir", default="runs", help="TensorBoard log directory")
    add_output(
        s,
        "a directory or a .zip model path",
        "X.zip: the model file; any other path: a directory that receives model.zip "
        "(default: LOGDIR/RUN_NAME/model.zip, a fresh run folder); --framework rllib: the checkpoint directory",
        "allow --out to replace an existing model",
    )
    s.add_argument(
        "--resume",
        type=text_arg("a model path"),
        default=None,
        help="a saved model (rllib: a checkpoint directory) to continue training (never overwritten)",
    )
    s.add_argument(
        "--init-from",
        type=text_arg("a model path"),
        default=None,
        help="sb3: a saved model (e.g. imitate clone's) whose policy starts a new run with this run's "
        "hyperparameters (e.g. a small --learning-rate)",
    )
    s.add_argument(
        "--allow-other-fabric",
        action="store_true",
        help="--resume/--init-from (rllib: --resume): accept a model trained on another fabric (refused "
        "otherwise: its recorded fingerprint must be the scenario's); the new model records both",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_train_rllib_flags(s: argparse.ArgumentParser) -> None:
    """``train``'s flags of the framework choice and of RLlib."""
    s.add_argument("--framework", default="sb3", choices=("sb3", "rllib"), help="sb3 (one machine) | rllib")
    s.add_argument("--num-env-runners", type=int_arg(0, 100_000), default=2, help="rllib: env runner actors")
    s.add_argument(
        "--envs-per-runner", type=int_arg(1, 100_000), default=16, help="rllib: vector env copies per runner"
    )
    s.add_argument("--address", default=None, help="rllib: join a Ray cluster (auto or HOST:PORT)")
    s.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="rllib --resume: I trust this checkpoint folder (resuming unpickles RLlib's state, which can run code)",
    )


# ``train``'s flags that only one framework reads, with their parser defaults (a flag left at its default was
# not given): the other framework refuses them rather than ignoring them
_SB3_ONLY = {
    "residual": None,
    "residual_scale": None,
    "log_std_init": None,
    "target_kl": None,
    "ent_coef": None,
    "gamma": None,
    "obs_features": None,
    "obs_blocks": None,
    "extra_plans": None,
    "save_every": None,
    "n_envs": 16,
    "init_from": None,
}
_RLLIB_ONLY = {"num_env_runners": 2, "envs_per_runner": 16, "address": None, "trust_checkpoint": False}


def _refuse_other_framework_flags(args: argparse.Namespace) -> None:
    """Raise ``ValueError`` naming the first flag given that ``args.framework`` does not read (each framework's
    flags are listed in ``--help``: RLlib's say ``rllib:``); ``--learning-rate`` and ``--allow-other-fabric``
    are read by both."""
    other = _SB3_ONLY if args.framework == "rllib" else _RLLIB_ONLY
    for name, default in other.items():
        value = getattr(args, name, default)
        if value != default:
            flag = "--" + name.replace("_", "-")
            allowed = "--framework sb3" if args.framework == "rllib" else "--framework rllib"
            raise ValueError(
                f"train --framework {args.framework}: {flag} = {value!r} is not read by this framework; "
                f"allowed: {flag} with {allowed}, or leave it out"
            )


def _cmd_train(args: argparse.Namespace) -> int:
    _refuse_other_framework_flags(args)
    if args.framework == "rllib":
        from ainet_gym.agents.rllib_train import train_rllib_main

        return train_rllib_main(args)
    from ainet_gym.agents.train import train_main

    return train_main(args)


def add_convert_rllib(sub: Subparsers) -> None:
    """``ainet-gym convert-rllib DIR``: plain weights for an RLlib checkpoint written before 0.3."""
    s = sub.add_parser(
        "convert-rllib",
        help="add plain weights to an RLlib checkpoint written before 0.3, so rllib:DIR loads it (rllib extra)",
        epilog="Converting unpickles the folder's RLlib module, which can run code: only for folders you trust.",
    )
    s.add_argument("checkpoint", type=text_arg("a checkpoint directory"), help="checkpoint directory")
    s.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="required: I trust this folder (converting unpickles RLlib's module, which can run code)",
    )
    s.add_argument("--overwrite", action="store_true", help="write the plain weights again if present")
    s.set_defaults(func=deferred("ainet_gym.agents.rllib_checkpoint", "convert_main"))


def _add_results(s: argparse.ArgumentParser, default: str) -> None:
    """``--out`` (the results directory, ``default`` when not given) and ``--json``, as ``evaluate`` and
    ``leaderboard`` take them."""
    add_output(
        s,
        "a directory",
        f"directory for the table, CSV, JSON and figure (default: a fresh {default})",
        "allow --out to hold earlier results",
    )
    s.add_argument("--json", action="store_true", help="print one JSON object")


def add_evaluate(sub: Subparsers) -> None:
    """``ainet-gym evaluate SCENARIO``: policies on the same seeds, one table."""
    s = sub.add_parser("evaluate", help="compare policies on the same seeds", epilog=TRUST)
    s.add_argument("scenario", type=SCENARIO)
    s.add_argument("--policies", default="ecmp,spray,wcmp,greedy,lp", help="comma list; ppo:PATH for a model")
    s.add_argument("--episodes", type=int_arg(1, 10_000), default=1, help="episodes per seed")
    s.add_argument("--seeds", type=seeds_arg, default="1,2,3", help="e.g. 1,2,3 or 1-10")
    s.add_argument(
        "--steps",
        type=int_arg(1, 10_000_000),
        default=None,
        help="steps per episode (default: the scenario's)",
    )
    _add_results(s, "out/eval/SCENARIO__TIME")
    s.set_defaults(func=deferred("ainet_gym.agents.evaluate", "evaluate_main"))


def add_sweep(sub: Subparsers) -> None:
    """``ainet-gym sweep``: a Ray Tune grid of RLlib PPO runs (extra: rllib)."""
    s = sub.add_parser("sweep", help="Ray Tune grid of RLlib PPO runs, one results table (rllib extra)")
    s.add_argument("--scenarios", default="periodic-interference", help="comma list of scenarios")
    s.add_argument("--seeds", default="0,1", help="comma list of training seeds")
    s.add_argument("--lrs", default="3e-4", help="comma list of learning rates")
    s.add_argument("--timesteps", type=int_arg(1, 10**12), default=10_000, help="env steps per trial")
    s.add_argument(
        "--num-env-runners",
        type=int_arg(0, 100_000),
        default=0,
        help="env runners per trial (0: in-process)",
    )
    s.add_argument("--envs-per-runner", type=int_arg(1, 100_000), default=16)
    s.add_argument(
        "--max-concurrent",
        type=int_arg(1, 100_000),
        default=2,
        help="trials at once (1 + runners CPUs each)",
    )
    s.add_argument("--eval-seeds", type=seeds_arg, default="1,2,3", help="held-out evaluation seeds")
    s.add_argument("--address", default=None, help="join a Ray cluster (auto or HOST:PORT)")
    add_output(
        s,
        "a directory",
        "directory for the table, checkpoints and Tune's files (default: a fresh out/sweep/sweep__TIME)",
        "allow --out to hold an earlier sweep",
    )
    s.set_defaults(func=deferred("ainet_gym.agents.rllib_sweep", "sweep_main"))


def add_demo(sub: Subparsers) -> None:
    """``ainet-gym demo``: the main job (train PPO, compare with its class and static ECMP)."""
    s = sub.add_parser(
        "demo", help="the main job: train PPO on periodic-interference and compare", epilog=TRUST
    )
    s.add_argument("--scenario", type=SCENARIO, default="periodic-interference")
    s.add_argument("--timesteps", type=int_arg(1), default=None)
    add_output(
        s,
        "a directory or a .zip model path",
        "a directory (model.zip, results, logs), or X.zip (the model; results and logs in X/); "
        "default: a fresh out/demo/RUN_NAME",
        "allow --out to hold an earlier model or results",
    )
    s.add_argument("--seed", type=int_arg(0, TRAIN_SEED_MAX), default=0, help="training seed")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument(
        "--quick", action="store_true", help="a smoke run (4,096 steps, 2 seeds): what CI runs, not a result"
    )
    s.set_defaults(func=deferred("ainet_gym.agents.demo", "demo_main"))


def add_leaderboard(sub: Subparsers) -> None:
    """``ainet-gym leaderboard``: every env id x every baseline and shipped policy."""
    s = sub.add_parser("leaderboard", help="every env id x every baseline and shipped policy, one table")
    s.add_argument("--quick", action="store_true", help="2 seeds x 3 intervals (a smoke test)")
    s.add_argument("--seeds", type=seeds_arg, default=None, help="held-out seeds (default 1-10)")
    add_episode_steps_arg(s)
    s.add_argument("--env-ids", default=None, help="comma list of env ids ('none'; default: all registered)")
    s.add_argument("--policies", default=None, help="extra registered agents to rank (comma list)")
    s.add_argument(
        "--scenarios",
        default=None,
        help="scenarios ranked beside the env ids (comma list of names or files; 'none'; default: those "
        "of the shipped checkpoints that no env id covers)",
    )
    _add_results(s, "out/leaderboard/leaderboard__TIME")
    s.set_defaults(func=deferred("ainet_gym.agents.leaderboard", "leaderboard_main"))
