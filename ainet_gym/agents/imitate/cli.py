"""``python -m ainet_gym.agents.imitate label|clone|knn|qfit``: the command line (:func:`main`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.agents.imitate.clone import behaviour_clone
from ainet_gym.agents.imitate.dagger import label_player
from ainet_gym.agents.imitate.features import DEFAULT_PREVIOUS_PLAN_SCALE, PREVIOUS_PLAN
from ainet_gym.agents.imitate.knn_file import DEFAULT_FALLBACK
from ainet_gym.agents.imitate.knn_fit import DEFAULT_K, KNN_VOTES, fit_knn
from ainet_gym.agents.imitate.label_files import concat_labels, load_label_source, load_labels
from ainet_gym.agents.imitate.labels import (
    DEFAULT_BASE,
    DEFAULT_H,
    DEFAULT_OBJECTIVE,
    DEFAULT_TAIL_SLACK,
    DEFAULT_TAIL_WEIGHT,
    OBJECTIVES,
    lookahead_labels,
    p99_step_ratio,
)


def _add_label_parser(sub: Any) -> None:
    """``label``'s arguments (:func:`lookahead_labels`)."""
    from ainet_gym.agents.arg_types import (  # --batch 0 failed inside range(), -1 saved no labels
        float_arg,
        int_arg,
    )

    s = sub.add_parser("label", help="play episodes along the lookahead over the plans; save the labels")
    s.add_argument("scenario")
    s.add_argument("--seeds", required=True, help="e.g. 2000000-2000039 (never the held-out 1-10)")
    s.add_argument("--h", type=int_arg(1), default=DEFAULT_H, help="lookahead intervals")
    s.add_argument(
        "--base",
        default=DEFAULT_BASE,
        help="the policy of the lookahead's later intervals (e.g. burst-lp+bg)",
    )
    s.add_argument("--action-mode", default="choose_bg")
    s.add_argument(
        "--extra-plans",
        default="",
        help="comma list of plans appended to the mode's (e.g. isolate0+bg,isolate1+bg; the weighted plans "
        "favour0+bg,favour1+bg or favour0-w4+bg make the class jobs+bg+weights)",
    )
    s.add_argument("--obs-features", default="phase", help="comma list; empty for the default observation")
    s.add_argument("--batch", type=int_arg(1), default=10, help="episodes per batched run")
    s.add_argument("--out", required=True, help=".npz file")
    s.add_argument(
        "--objective",
        default=DEFAULT_OBJECTIVE,
        choices=OBJECTIVES,
        help="util: the plan of most ideal work over the lookahead (default); tail: minus a penalty on the "
        "GPU-seconds of step time above the base plan's worst step time / ideal over the lookahead",
    )
    s.add_argument(
        "--tail-slack",
        type=float_arg("a relative slack", zero_ok=True),
        default=DEFAULT_TAIL_SLACK,
        help="tail objective: relative slack on the base plan's worst step time / ideal (default 0)",
    )
    s.add_argument(
        "--tail-weight",
        type=float_arg("a penalty per GPU-second", zero_ok=True, inf_ok=True),
        default=DEFAULT_TAIL_WEIGHT,
        help="tail objective: penalty per GPU-second of step time above the threshold (default inf: a "
        "hard constraint)",
    )
    s.add_argument(
        "--policy",
        default=None,
        help="a knn or qnet policy (.npz) or ppo model (.zip) to play instead of the labels (DAgger)",
    )
    add_redraw_args(s)
    s.add_argument(
        "--hold",
        type=int_arg(1),
        default=1,
        help="intervals each plan is held in its lookahead before the base (default 1; --h: over the whole horizon)",
    )


def _add_clone_parser(sub: Any) -> None:
    """``clone``'s arguments (:func:`behaviour_clone`)."""
    from ainet_gym.agents.arg_types import TRAIN_SEED_MAX, float_arg, int_arg, unit_interval_arg

    c = sub.add_parser("clone", help="fit a PPO policy to labels; save it as an ainet-gym train model")
    c.add_argument(
        "labels",
        help=".npz of label (comma list: aggregated, e.g. DAgger rounds), or a knn policy file (its labelled "
        "observation block, e.g. the shipped pretrained .npz)",
    )
    c.add_argument("--val", default=None, help=".npz of label on validation seeds (accuracy only)")
    c.add_argument("--out", required=True, help=".zip model path")
    c.add_argument("--epochs", type=int_arg(1), default=60)
    c.add_argument("--gamma", type=unit_interval_arg("a discount factor"), default=None)
    c.add_argument("--seed", type=int_arg(0, TRAIN_SEED_MAX), default=0)
    c.add_argument("--weighting", default="inv_sqrt", help="inv_sqrt | none | regret")
    c.add_argument("--lr", type=float_arg("a learning rate"), default=1e-3, help="Adam learning rate")
    c.add_argument(
        "--drop-obs-features", action="store_true", help="fit from the default observation blocks only"
    )
    c.add_argument(
        "--obs-blocks",
        default="",
        help="the observation blocks the networks read, comma list (e.g. job_phase; default: every input)",
    )


def _add_knn_parser(sub: Any) -> None:
    """``knn``'s arguments (:func:`fit_knn`)."""
    from ainet_gym.agents.arg_types import float_arg, int_arg

    n = sub.add_parser("knn", help="save the k-nearest-neighbour policy of labels (evaluate knn:OUT)")
    n.add_argument("labels", help=".npz of label (comma list: aggregated)")
    n.add_argument("--k", type=int_arg(1), default=DEFAULT_K)
    n.add_argument("--out", required=True, help=".npz policy file")
    n.add_argument(
        "--blocks",
        default="job_phase",
        help="observation blocks the distance reads, comma list (e.g. job_phase,background); default job_phase; "
        f"{PREVIOUS_PLAN}: also the plan played at the previous decision (one-hot)",
    )
    n.add_argument(
        "--standardize",
        action="store_true",
        help="divide each column of the blocks by its standard deviation over the labels (field scale); "
        "default: raw columns",
    )
    n.add_argument(
        "--vote",
        default="label",
        choices=KNN_VOTES,
        help="label: the majority label of the k neighbours (default); value: the plan of the best mean "
        "lookahead value over them",
    )
    n.add_argument(
        "--value-weight",
        type=float_arg("a penalty per GPU-second", zero_ok=True),
        default=None,
        help="vote value: penalty per GPU-second of excess step time in the values (default: the labels' "
        "tail weight; required for labels of weight inf)",
    )
    n.add_argument(
        "--margin",
        type=float_arg("a difference of values", zero_ok=True),
        default=None,
        help="vote value: play --fallback where the best mean neighbour value exceeds the fallback's by "
        "less than this (default: none, always the best)",
    )
    n.add_argument(
        "--fallback",
        default=DEFAULT_FALLBACK,
        help=f"vote value with --margin: the plan played below the margin (default {DEFAULT_FALLBACK})",
    )
    n.add_argument(
        "--cooldown",
        type=int_arg(0),
        default=0,
        help="after a step playing a plan other than the fallback (--fallback with --margin, else "
        f"{DEFAULT_FALLBACK}), play the fallback for this many steps (default 0: none)",
    )
    n.add_argument(
        "--tail-cap",
        type=float_arg("a step time / ideal"),
        default=None,
        help="vote value: subtract --tail-penalty times how far each plan's lookahead worst step time / ideal "
        "exceeds max(this, the base plan's) from its values (default: none)",
    )
    n.add_argument(
        "--tail-penalty",
        type=float_arg("a value per unit of step time / ideal", zero_ok=True),
        default=0.0,
        help="vote value with --tail-cap: the penalty per unit of step time / ideal above the cap (default 0)",
    )
    n.add_argument(
        "--previous-plan-scale",
        type=float_arg("a scale"),
        default=None,
        help=f"with {PREVIOUS_PLAN} in --blocks: the scale of the previous plan's one-hot (default "
        f"{DEFAULT_PREVIOUS_PLAN_SCALE})",
    )
    n.add_argument(
        "--vote-plans",
        default=None,
        help="vote value: the plans the vote may pick, comma list (default: every plan), e.g. "
        "spray+bg,wcmp+bg,greedy+bg",
    )


def _add_qfit_parser(sub: Any) -> None:
    """``qfit``'s arguments (:func:`ainet_gym.agents.qnet.fit_qnet`)."""
    from ainet_gym.agents.arg_types import TRAIN_SEED_MAX, float_arg, int_arg

    q = sub.add_parser("qfit", help="fit an MLP to the plans' lookahead values of labels (evaluate qnet:OUT)")
    q.add_argument("labels", help=".npz of label (comma list: aggregated)")
    q.add_argument("--out", required=True, help=".npz policy file")
    q.add_argument("--blocks", default="job_phase", help="observation blocks of the inputs, comma list")
    q.add_argument(
        "--value-weight",
        type=float_arg("a penalty per GPU-second", zero_ok=True),
        default=None,
        help="penalty per GPU-second of excess step time in the values (default: the labels' tail weight)",
    )
    q.add_argument("--hidden", default="64,64", help="hidden layer widths, comma list (default 64,64)")
    q.add_argument("--epochs", type=int_arg(1), default=40)
    q.add_argument("--batch-size", type=int_arg(1), default=256)
    q.add_argument("--lr", type=float_arg("a learning rate"), default=1e-3, help="Adam learning rate")
    q.add_argument("--seed", type=int_arg(0, TRAIN_SEED_MAX), default=0)


def _run_label(a: Any) -> int:
    """``label``: the lookahead's labels of ``a.seeds`` in batches of ``a.batch`` episodes, saved to ``a.out``."""
    from ainet_gym.agents.evaluate import parse_seeds
    from ainet_gym.routing.plans import CHOOSE_MODES, plans_of_mode
    from ainet_gym.scenario.loader import load_scenario

    seeds = parse_seeds(a.seeds)
    feats = tuple(f for f in a.obs_features.split(",") if f)
    extra = tuple(f.strip() for f in a.extra_plans.split(",") if f.strip())
    plans = plans_of_mode(a.action_mode, extra)[1] if a.action_mode in CHOOSE_MODES else None
    # read once: every batch labels the same fabric, even if the YAML or its edges file changes meanwhile
    # (issue-26ze2: one batch of a run was labelled on an edited edges file)
    scenario = load_scenario(a.scenario)
    play = None
    if a.policy is not None:
        play = label_player(a.policy, scenario, a.action_mode, feats, plans)
    from ainet_gym.sim.redraw import FutureRedraw

    if a.redraw_starts and not a.redraw_future:
        raise SystemExit(
            "imitate label: --redraw-starts needs --redraw-future M >= 1 (the copies to re-draw in)"
        )
    redraw = (
        None
        if not a.redraw_future
        else FutureRedraw(a.redraw_future, a.redraw_seed, a.redraw_window, starts=a.redraw_starts)
    )
    parts = []
    for i in range(0, len(seeds), a.batch):
        part = lookahead_labels(
            scenario, seeds[i : i + a.batch], a.h, a.base, a.action_mode, feats, policy=play,
            objective=a.objective, tail_slack=a.tail_slack, tail_weight=a.tail_weight, extra_plans=extra,
            redraw=redraw, hold=a.hold,
        )  # fmt: skip
        parts.append(part)
        print(
            f"seeds {seeds[i]}..{seeds[min(i + a.batch, len(seeds)) - 1]}: GPU util played "
            f"{part['gpu_utilization'].mean():.4f}, p99 step/ideal {p99_step_ratio(part) or 0.0:.3f}, "
            f"{part['seconds']:.0f} s",
            flush=True,
        )
    out = concat_labels(parts)
    np.savez_compressed(a.out, **out)
    counts = np.bincount(out["label"], minlength=len(out["plans"]))
    print(
        f"{len(out['label'])} labels: "
        + ", ".join(f"{n} {int(c)}" for n, c in zip(out["plans"], counts))
        + f"; GPU util of the played episodes {out['gpu_utilization'].mean():.4f} over {len(seeds)}, "
        f"p99 step/ideal {p99_step_ratio(out):.3f}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.imitate label|clone ...``: lookahead labels, then behaviour cloning."""

    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's

    p = OneLineParser(prog="python -m ainet_gym.agents.imitate", description=main.__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    _add_label_parser(sub)
    _add_clone_parser(sub)
    _add_knn_parser(sub)
    _add_qfit_parser(sub)
    for name in ("clone", "knn", "qfit"):
        sub.choices[name].add_argument(
            "--scenario",
            default=None,
            help="the labels' scenario when it is not a shipped one (a name or YAML path; default: the name "
            "the labels record)",
        )
    for s in sub.choices.values():  # the output rule of the ainet-gym commands: never replace a file unasked
        s.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    a = p.parse_args(argv)
    try:
        return _dispatch(a, argv)
    except (ValueError, OSError, ImportError, RuntimeError) as e:
        text = " ".join(str(e).split()) or type(e).__name__
        print(f"python -m ainet_gym.agents.imitate {a.cmd}: error: {text}", file=sys.stderr)
        return 2


def _out_path(a: Any) -> Path:
    """``a.out`` as the file the command writes (numpy adds ``.npz``, SB3 ``.zip``), checked by the output rule:
    not one of the label files read, not an existing file unless ``--overwrite``."""
    from ainet_gym.agents.outputs import check_out_file

    suffix = ".zip" if a.cmd == "clone" else ".npz"
    out = str(a.out) if str(a.out).endswith(suffix) else f"{a.out}{suffix}"
    inputs = [] if a.cmd == "label" else [x for x in a.labels.split(",") if x]
    if getattr(a, "val", None):
        inputs.append(a.val)
    return check_out_file(out, a.overwrite, inputs)


def _joined(files: str, load: Any) -> dict[str, Any]:
    """The label files of the comma list ``files``, each read by ``load``, joined (:func:`concat_labels`: files
    labelled on different fabrics are refused, naming both files and fingerprints)."""
    paths = files.split(",")
    return concat_labels([load(x) for x in paths], sources=paths)


def _dispatch(a: Any, argv: list[str] | None) -> int:
    """Run the parsed subcommand ``a.cmd`` after checking its output path."""
    a.out = str(_out_path(a))
    if a.cmd == "qfit":
        from ainet_gym.agents.qnet import fit_qnet

        res = fit_qnet(
            _joined(a.labels, load_labels), a.out, a.blocks, a.value_weight, a.hidden,
            a.epochs, a.seed, a.batch_size, a.lr, scenario=a.scenario,
            metadata={"algorithm": "qnet-imitation", "command": "python -m ainet_gym.agents.imitate "
                      + " ".join(argv if argv is not None else sys.argv[1:])},
        )  # fmt: skip
        print(json.dumps(res, indent=1))
        return 0
    if a.cmd == "knn":
        labels = _joined(a.labels, load_labels)
        path = fit_knn(
            labels, a.out, a.k, a.blocks, vote=a.vote, value_weight=a.value_weight, margin=a.margin,
            fallback=a.fallback, standardize=a.standardize, scenario=a.scenario,
            vote_plans=None if a.vote_plans is None else a.vote_plans.split(","), cooldown=a.cooldown,
            tail_cap=a.tail_cap, tail_penalty=a.tail_penalty, previous_plan_scale=a.previous_plan_scale,
        )  # fmt: skip
        print(f"knn policy: {path}")
        return 0
    if a.cmd == "label":
        return _run_label(a)
    res = behaviour_clone(
        _joined(a.labels, load_label_source), a.out,
        None if a.val is None else load_label_source(a.val), a.epochs, learning_rate=a.lr, gamma=a.gamma, seed=a.seed,
        weighting=a.weighting, obs_features=() if a.drop_obs_features else None, scenario=a.scenario,
        obs_blocks=tuple(b for b in a.obs_blocks.split(",") if b),
    )  # fmt: skip
    print(json.dumps(res, indent=1))
    return 0


def add_redraw_args(parser: Any) -> None:
    """``--redraw-future M`` (0: off, the default), ``--redraw-seed S``, ``--redraw-window W`` and
    ``--redraw-starts``: an argparse parser's options of a :class:`FutureRedraw` (``imitate label``)."""
    from ainet_gym.agents.arg_types import int_arg

    parser.add_argument(
        "--redraw-future",
        type=int_arg(0, 1000),
        default=0,
        help="score each plan on M lookahead copies whose unobserved background phases are re-drawn (0: off, the "
        "true future)",
    )
    parser.add_argument("--redraw-seed", type=int_arg(0, 2**32 - 1), default=0, help="seed of the re-draws")
    parser.add_argument(
        "--redraw-window",
        type=int_arg(0, 1000),
        default=1,
        help="past intervals taken as observed besides the next (1: the observation's last and next; large: all)",
    )
    parser.add_argument(
        "--redraw-starts",
        action="store_true",
        help="with --redraw-future: re-draw too the job starts the observation hides (start_jitter_ms beyond the "
        "job_phase block's clip at one ideal iteration; off: the true starts)",
    )
