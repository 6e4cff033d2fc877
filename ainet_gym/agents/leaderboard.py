"""``ainet-gym leaderboard``: every registered env id x every baseline x the shipped checkpoints.

For each env id of :data:`ainet_gym.envs.registration.ENV_IDS` (its default scenario) it evaluates every
baseline (:data:`ainet_gym.agents.baselines.BASELINES`), the predict-then-route baselines and, where one is
shipped, the ``pretrained`` checkpoint, on the same held-out seeds (:data:`LEADERBOARD_SEEDS`, 1-10;
training uses seeds >= 1,000,000), through :func:`ainet_gym.agents.evaluate.evaluate`. It prints and writes a
table of mean GPU utilisation with its 95% confidence interval, the class of each row (the traffic the
policy controls: ``none``, ``jobs`` or ``jobs+bg``; ``jobs+bg+weights`` for the weighted plans
``favour{j}+bg`` and ``favour{j}-w1e6+bg``, two per job slot, which set the jobs' share weights too), and the
LP-normalised score

    score = (policy - ECMP) / (LP of its class - ECMP)

of the mean GPU utilisations: 0 is static ECMP, 1 the LP of the policy's class (``lp`` for ``jobs``,
which routes only the jobs' traffic; ``lp+bg`` for ``jobs+bg`` and ``jobs+bg+weights``, which route the
background too), above 1 beats it. Its interval is the paired CI of ``policy - ECMP`` over the episodes divided by
``LP - ECMP`` (the uncertainty of the denominator is left out; ``-`` when ``LP - ECMP`` is below
0.005, where the score means nothing). Rows are grouped by class, the class of the shipped checkpoint
first, best first within a class. Files: ``leaderboard.md``, ``leaderboard.csv``,
``leaderboard.json`` and ``leaderboard.png`` (score per env id and policy).

Beside the env ids it ranks the same policies on every scenario a checkpoint is shipped for that no env
id has as its default (``periodic-interference-jitter``, ``ingest-bursts``, ``storage-checkpoint``: the
scenarios where learning is measured against the LP), so every shipped checkpoint has its row; their
rows carry the scenario name in the ``env_id`` column. ``--scenarios`` chooses them (names or files;
``none`` for the env ids only). A file whose scenario ``name`` is that of another scenario of the run (a copy
of a shipped scenario on other links, beside the original) is labelled ``NAME (FILE)`` in that column, the
table and ``env_ids`` (:func:`run_labels`, issue-26zo2: both shared one label, and the second run's timing
replaced the first's); the same env id or scenario given twice is refused.

``--policies`` (``extra``) adds policies to every row group. Before any scenario is played, every extra policy
is checked on every scenario with the check playing it makes (:meth:`Agent.check
<ainet_gym.agents.registry.Agent.check>`: a model file's spaces and recorded ``fabric`` fingerprint;
:func:`check_extra_policies`); one that does not fit a scenario refuses the whole run at once, naming the policy,
the scenarios and the ``--env-ids``/``--scenarios`` it fits (issue-26zn2; it stopped with exit 2 at the first such
scenario, after playing the ones before it). Refusing, not skipping: every row of the JSON and CSV stays a
played policy with its figures.

``--quick`` (for tests): 2 seeds and 3 intervals per episode.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path
from typing import Any

from ainet_gym.agents.evaluate import EvalConfig, evaluate, parse_seeds
from ainet_gym.agents.outputs import check_out_files, fresh_dir, run_stamp, scenario_files
from ainet_gym.agents.registry import parse_policies
from ainet_gym.errors import check_choice

__all__ = [
    "LEADERBOARD_SEEDS",
    "check_extra_policies",
    "checkpoint_scenarios",
    "leaderboard",
    "leaderboard_main",
    "leaderboard_policies",
    "markdown",
    "run_labels",
]

LEADERBOARD_SEEDS: list[int] = list(range(1, 11))
#: Parent of the default output folders (``out/leaderboard/leaderboard__YYYYmmdd-HHMMSS``).
DEFAULT_OUT = "out/leaderboard"
#: Files ``leaderboard`` writes into its output directory.
LEADERBOARD_FILES = tuple(f"leaderboard.{k}" for k in ("md", "csv", "json", "png"))
PREDICTIVE = ("predictive-greedy", "predictive-lp", "predictive-greedy+bg", "predictive-lp+bg")
#: below this LP - ECMP gap in GPU utilisation the normalised score is not reported
MIN_GAP = 0.005


def leaderboard_policies(scenario: str, extra: list[str] | None = None) -> list[str]:
    """Baselines, predictive baselines, the weighted plans ``favour{j}+bg`` and ``favour{j}-w1e6+bg`` of every
    job slot of ``scenario`` (a name or a file; the static baselines of the class ``jobs+bg+weights``),
    ``pretrained`` if a checkpoint is shipped for ``scenario``'s name and was trained on its fabric (or records
    no fabric: :func:`ainet_gym.agents.pretrained.pretrained_fabric`), then the ``extra`` policy strings
    (registered agents, e.g. a plug-in's). A copy of a shipped scenario under the same name on other links
    (e.g. other uplink speeds) gets no ``pretrained`` row: playing it there is refused (issue-26zl2)."""
    from ainet_gym.agents.baselines import BASELINES, STRICT_WEIGHTED_BASELINES, WEIGHTED_BASELINES
    from ainet_gym.pretrained import pretrained_path
    from ainet_gym.scenario import load_scenario

    sc = load_scenario(scenario)
    n_jobs = len(sc.jobs)
    pols = [*BASELINES, *PREDICTIVE, *WEIGHTED_BASELINES[:n_jobs], *STRICT_WEIGHTED_BASELINES[:n_jobs]]
    shipped = pretrained_path(sc.name)
    if shipped is not None:
        from ainet_gym.agents.pretrained import pretrained_fabric
        from ainet_gym.agents.rllib_checkpoint import scenario_fabric

        recorded = pretrained_fabric(shipped)
        if recorded is None or recorded == scenario_fabric(sc):
            pols.append("pretrained")
    return pols + [e for e in (extra or []) if e not in pols]


def checkpoint_scenarios() -> list[str]:
    """Scenarios with a shipped checkpoint that no registered env id has as its default scenario."""
    from ainet_gym.envs.registration import ENV_IDS
    from ainet_gym.pretrained import list_pretrained

    return [name for name in list_pretrained() if name not in set(ENV_IDS.values())]


def check_extra_policies(
    env_ids: list[str], scenarios: list[str], extra: list[str] | None, steps: int | None = None, seed: int = 1
) -> None:
    """Refuse, before anything is played, an ``extra`` policy (``--policies``) that cannot be played on one of
    the default scenarios of ``env_ids`` or on one of ``scenarios`` (names or files): each is made once, bound
    (``pretrained``) and checked on a one-episode env of every scenario with its own ``check``, the one
    :func:`ainet_gym.agents.evaluate.prepare` makes before playing (a model file's spaces and recorded
    ``fabric`` fingerprint, issue-26zh2/26zk2).

    Raises
    ------
    ValueError
        One line naming each policy that does not fit, the env ids and scenarios it does not fit with the first
        reason, and the ``--env-ids``/``--scenarios`` every extra policy fits (or that none is left).
    """
    from ainet_gym.agents.registry import make_agent
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.envs.registration import ENV_IDS
    from ainet_gym.scenario import load_scenario

    if not extra:
        return
    targets = [("env id", i, ENV_IDS[i]) for i in env_ids] + [("scenario", s, s) for s in scenarios]
    loaded = {given: load_scenario(sc) for _, given, sc in targets}
    bad: dict[str, list[tuple[str, str, str]]] = {}
    for spec in extra:
        agent = make_agent(spec)  # a missing or malformed file is refused here, before any scenario
        for kind, given, _ in targets:
            try:
                bind = getattr(agent, "bind", None)
                if bind is not None:
                    bind(loaded[given])
                core = EnvCore(loaded[given], batch=1, episode_steps=steps, **agent.env_kwargs)
                core.reset([seed])
                agent.check(core)
            except ValueError as e:
                bad.setdefault(spec, []).append((kind, given, str(e).splitlines()[0] if str(e) else repr(e)))
    if not bad:
        return
    misfits = {given for items in bad.values() for _, given, _ in items}
    ok_ids = [i for i in env_ids if i not in misfits]
    ok_sc = [s for s in scenarios if s not in misfits]
    parts = []
    for spec, items in bad.items():
        where = ", ".join(f"{kind} {given!r}" for kind, given, _ in items)
        parts.append(f"--policies {spec!r} cannot be played on {where} ({items[0][2]})")
    if ok_ids or ok_sc:
        allowed = (
            f"allowed for this run: what it fits, --env-ids {','.join(ok_ids) or 'none'} "
            f"--scenarios {','.join(ok_sc) or 'none'}, or leave the policy out"
        )
    else:
        allowed = (
            "allowed for this run: none of these; choose env ids or scenarios of the fabric and spaces it was made on "
            "(--env-ids, --scenarios), or leave the policy out"
        )
    raise ValueError("; ".join(parts) + f"; nothing was played; {allowed}")


def _given_as_file(scenario: str) -> bool:
    """True if ``scenario`` names a file (read as a path first, like :func:`ainet_gym.scenario.load_scenario`),
    False for the name of a shipped scenario."""
    return Path(scenario).expanduser().is_file()


def run_labels(env_ids: list[str], scenarios: list[str]) -> list[str]:
    """The row label of each env id, then of each scenario (a name or a file) of a leaderboard run: the env id,
    or the scenario's ``name``; a scenario given as a file whose name is another label of the run (e.g. a copy
    of ``spine-leaf-2to1.yaml`` on other uplinks, same ``name:``, beside the original) is labelled
    ``NAME (FILE)``, FILE as given, so two scenarios never share a label, a row group, or an ``env_ids`` entry
    (the second run's timing replaced the first's; issue-26zo2). Labels without a collision are unchanged.

    Raises
    ------
    ValueError
        If the same env id or scenario is given twice (its rows would fall into one group), naming it.
    """
    from ainet_gym.scenario import load_scenario

    for flag, items in (("--env-ids", env_ids), ("--scenarios", scenarios)):
        twice = sorted({x for x in items if items.count(x) > 1})
        if twice:
            raise ValueError(
                f"{flag} {','.join(items)!r}: {', '.join(map(repr, twice))} given twice; allowed: each "
                f"{'env id' if flag == '--env-ids' else 'scenario'} once"
            )
    names = [load_scenario(sc).name for sc in scenarios]
    base = list(env_ids) + names
    labels = list(base)
    for k, sc in enumerate(scenarios):
        j = len(env_ids) + k
        if base.count(base[j]) > 1 and _given_as_file(sc):
            labels[j] = f"{base[j]} ({sc})"
    seen: dict[str, str] = {}
    for given, label in zip([*env_ids, *scenarios], labels, strict=True):
        if label in seen:  # e.g. a shipped name equal to an env id: not made by the library
            raise ValueError(
                f"--scenarios {given!r}: its label {label!r} is also that of {seen[label]!r}; allowed: "
                "scenarios whose names differ from the env ids and from each other, or given as files"
            )
        seen[label] = given
    return labels


def _score(d: dict[str, Any], ecmp: float, lp: float) -> dict[str, Any]:
    """The LP-normalised score of a policy's summary ``d`` (see the module docstring)."""
    gap = lp - ecmp
    if gap < MIN_GAP:
        return {"mean": None, "ci95": None}
    m = d["gpu_utilization"]["mean"]
    v = d["gpu_utilization_vs_ecmp"] or {}
    ci = v.get("ci95")
    return {"mean": (m - ecmp) / gap, "ci95": None if ci is None else [ci[0] / gap, ci[1] / gap]}


def leaderboard(
    env_ids: list[str] | None = None,
    seeds: list[int] | None = None,
    steps: int | None = None,
    progress: bool = True,
    extra: list[str] | None = None,
    scenarios: list[str] | None = None,
) -> dict[str, Any]:
    """Evaluate every env id (default: all registered) and the ``scenarios`` (names or files; default
    :func:`checkpoint_scenarios`) and return the leaderboard JSON; ``extra`` policy strings are
    evaluated beside the baselines everywhere.

    Raises
    ------
    ValueError
        If an env id is not registered, or (before anything is played) an ``extra`` policy cannot be played on
        one of the scenarios (:func:`check_extra_policies`).
    """
    from ainet_gym.envs.registration import ENV_IDS
    from ainet_gym.scenario import load_scenario

    ids = list(ENV_IDS) if env_ids is None else list(env_ids)
    for i in ids:
        check_choice("env id", i, ENV_IDS, problem="not registered")
    extra_sc = checkpoint_scenarios() if scenarios is None else list(scenarios)
    # (row label, scenario): an env id with its default scenario, or a scenario under its own name (plus its
    # file when another scenario of the run has that name: run_labels)
    jobs = list(zip(run_labels(ids, extra_sc), [ENV_IDS[i] for i in ids] + extra_sc, strict=True))
    if not jobs:
        raise ValueError(
            "nothing to evaluate: no env id (--env-ids) and no scenario (--scenarios); give at least one"
        )
    seeds = list(LEADERBOARD_SEEDS if seeds is None else seeds)
    check_extra_policies(
        ids, extra_sc, extra, steps, seeds[0] if seeds else 1
    )  # before any scenario is played
    rows: list[dict[str, Any]] = []
    runs: dict[str, Any] = {}
    for env_id, scenario in jobs:
        t0 = time.time()
        sc_name = load_scenario(scenario).name
        res = evaluate(
            EvalConfig(
                scenario,
                policies=leaderboard_policies(scenario, extra),
                seeds=seeds,
                steps=steps,
                out=None,
            )
        )
        pol = res["policies"]
        ecmp = pol["ecmp"]["gpu_utilization"]["mean"]
        for pol_name, d in pol.items():
            lp_name = d["lp_reference"] or "lp"
            lp = pol[lp_name]["gpu_utilization"]["mean"]
            rows.append(
                {
                    "env_id": env_id,
                    "scenario": sc_name,  # not the policy's name (a shadowed loop variable wrote it before)
                    "policy": pol_name,
                    "controls": d["controls"],
                    "learned": d.get("learned", False),
                    "gpu_utilization": d["gpu_utilization"],
                    "p99_step_time_ratio": d["p99_step_time_ratio"],
                    "lp_reference": lp_name,
                    "lp_normalized_score": _score(d, ecmp, lp),
                }
            )
        runs[env_id] = {"scenario": scenario, "steps": res["steps"], "seconds": time.time() - t0}
        if progress:
            where = "" if env_id.endswith(f"({scenario})") else f" ({scenario})"
            print(f"{env_id}{where}: {len(pol)} policies, {time.time() - t0:.0f} s", flush=True)
    return {"seeds": seeds, "steps": steps, "env_ids": runs, "rows": rows, "files": {}}


def _ci(d: dict[str, Any], nd: int = 3) -> str:
    if d.get("mean") is None:
        return "-"
    s = f"{d['mean']:.{nd}f}"
    if d.get("ci95"):
        s += " [" + ", ".join(f"{x:.{nd}f}" for x in d["ci95"]) + "]"
    return s


def markdown(board: dict[str, Any]) -> str:
    """The leaderboard as a markdown table: rows grouped by env id or scenario, then by class (the
    classes of learned policies first, :func:`ainet_gym.agents.evaluate.table_order`), best first within
    a class."""
    from ainet_gym.agents.evaluate import table_order

    head = [
        "env id / scenario",
        "policy",
        "class (controls)",
        "GPU util [95% CI]",
        "LP-normalised score [95% CI]",
        "LP of its class",
        "p99 step / ideal",
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---|---:|---:|---|---:|"]
    by_env: dict[str, list[dict[str, Any]]] = {}
    for r in board["rows"]:
        by_env.setdefault(r["env_id"], []).append(r)
    for env_id, rows in by_env.items():
        rows = sorted(rows, key=lambda r: -(r["gpu_utilization"]["mean"] or 0.0))
        ordered = table_order({r["policy"]: r for r in rows})
        for r in sorted(rows, key=lambda r: ordered.index(r["policy"])):
            p99 = "-" if r["p99_step_time_ratio"] is None else f"{r['p99_step_time_ratio']:.2f}"
            lines.append(
                f"| {env_id} | {r['policy']} | {r['controls']} | {_ci(r['gpu_utilization'])} | "
                f"{_ci(r['lp_normalized_score'], 2)} | {r.get('lp_reference', 'lp')} | {p99} |"
            )
    return "\n".join(lines)


def plot(board: dict[str, Any], path: Path) -> None:
    """Grouped bars: GPU utilisation (mean, 95% CI) per env id and policy."""
    import matplotlib
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    envs = list(dict.fromkeys(r["env_id"] for r in board["rows"]))
    pols = list(dict.fromkeys(r["policy"] for r in board["rows"]))
    fig = Figure(figsize=(max(8, 1.6 * len(envs) * max(1, len(pols) / 6)), 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    width = 0.8 / len(pols)
    cmap = matplotlib.colormaps["tab20"]
    for j, p in enumerate(pols):
        xs, ys, lo, hi = [], [], [], []
        for i, e in enumerate(envs):
            r = next((r for r in board["rows"] if r["env_id"] == e and r["policy"] == p), None)
            if r is None or r["gpu_utilization"]["mean"] is None:
                continue
            g = r["gpu_utilization"]
            xs.append(i + (j - (len(pols) - 1) / 2) * width)
            ys.append(g["mean"])
            c = g["ci95"] or [g["mean"], g["mean"]]
            lo.append(g["mean"] - c[0])
            hi.append(c[1] - g["mean"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=p, color=cmap(j % 20))
    # an env id without its namespace; a scenario's label (``NAME (FILE)`` included: run_labels) as it is
    ax.set_xticks(np.arange(len(envs)), [e if " (" in e else e.split("/")[-1] for e in envs])
    ax.set_ylabel("GPU utilisation (mean, 95% CI)")
    ax.set_ylim(0, 1)
    ax.legend(ncol=min(6, len(pols)), fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    ax.set_title(f"ainet-gym leaderboard: held-out seeds {','.join(map(str, board['seeds']))}", fontsize=9)
    fig.savefig(path, dpi=110)


def write(board: dict[str, Any], out: Path) -> dict[str, str]:
    """leaderboard.md, .csv, .json and .png in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files = {k: str(out / f"leaderboard.{k}") for k in ("md", "csv", "json", "png")}
    board["files"] = files
    Path(files["md"]).write_text(markdown(board) + "\n")
    with open(files["csv"], "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["env_id", "scenario", "policy", "controls", "gpu_utilization_mean", "gpu_ci95_lo",
                     "gpu_ci95_hi", "lp_normalized_score", "lp_reference", "p99_step_time_ratio"])  # fmt: skip
        for r in board["rows"]:
            g = r["gpu_utilization"]
            ci = g["ci95"] or [None, None]
            row = [r["env_id"], r["scenario"], r["policy"], r["controls"], g["mean"], *ci,
                   r["lp_normalized_score"]["mean"], r.get("lp_reference", "lp"), r["p99_step_time_ratio"]]  # fmt: skip
            wr.writerow(["" if x is None else x for x in row])
    Path(files["json"]).write_text(json.dumps(board, indent=1) + "\n")
    plot(board, Path(files["png"]))
    return files


def leaderboard_main(args: argparse.Namespace) -> int:
    """Entry point of ``ainet-gym leaderboard``."""
    seeds = parse_seeds(args.seeds) if args.seeds else ([1, 2] if args.quick else None)
    steps = args.steps if args.steps is not None else (3 if args.quick else None)
    ids = (
        [s.strip() for s in args.env_ids.split(",") if s.strip() not in ("", "none")]
        if args.env_ids
        else None
    )
    extra = parse_policies(args.policies) if args.policies else None
    scen = getattr(args, "scenarios", None)
    scenarios = (
        None if scen is None else [s.strip() for s in scen.split(",") if s.strip() not in ("", "none")]
    )
    for flag, given, items in (("--env-ids", args.env_ids, ids), ("--scenarios", scen, scenarios)):
        if given is not None and not items and given.strip().lower() != "none":  # ',' is not 'none'
            raise ValueError(
                f"{flag} {given!r}: empty; give a comma list, or none to evaluate no "
                f"{'env id' if flag == '--env-ids' else 'scenario'}"
            )
    if ids is not None and scenarios is not None and not ids and not scenarios:
        raise ValueError(
            f"--env-ids {args.env_ids!r} --scenarios {scen!r}: nothing to evaluate; give at least one env id "
            "or scenario"
        )
    if args.out is None:  # a fresh run folder: a second plain run never collides
        out = fresh_dir(DEFAULT_OUT, f"leaderboard__{run_stamp()}", create=False)
    else:
        inputs = [f for sc in scenarios or [] for f in scenario_files(sc)]
        inputs += [spec.split(":", 1)[1] for spec in extra or [] if ":" in spec]  # model files
        out = check_out_files(
            args.out, bool(getattr(args, "overwrite", False)), LEADERBOARD_FILES, read=inputs
        )
    board = leaderboard(ids, seeds, steps, progress=not args.json, extra=extra, scenarios=scenarios)
    write(board, out)
    if args.json:
        print(json.dumps(board))
        return 0
    print()
    print(
        f"held-out seeds {','.join(map(str, board['seeds']))}; "
        "score = (policy - ECMP) / (LP of the policy's class - ECMP)"
    )
    print(markdown(board))
    f = board["files"]
    print(f"wrote {f['md']}, {f['csv']}, {f['json']}; figure: {f['png']}")
    return 0
