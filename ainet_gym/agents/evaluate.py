"""``ainet-gym evaluate``: every policy on the same seeds, one table, one CSV/JSON, one figure.

Baselines act at the engine level (``core.step_split(get_policy(name)(core.routing_context, core.last_result))``),
learned agents through their action space (``core.step(model.predict(obs))``); both on
:class:`~ainet_gym.envs.env.EnvCore` with the same scenario, episode seeds and episode length. All episodes of
a policy run as one batch (one instance per (seed, episode)).

Every row says which traffic the policy routes (``controls``: ``none`` for ECMP, ``jobs`` for policies
that route the jobs' connections with background on static ECMP, ``jobs+bg`` for those that move
background too, e.g. ``spray+bg`` or an agent in the ``ecmp_weights`` mode); the header warns when a
table mixes ``jobs`` and ``jobs+bg`` policies, which do not control the same traffic.

Metrics (per episode, then mean and 95% confidence interval over episodes, Student t):

- ``gpu_utilization``: GPU-weighted compute time / elapsed time, the mean over the episode's intervals
  (``info["reward_gpu_utilization"]``);
- ``step_time_ratio``: actual / ideal step time (``step_time_ms / ideal_step_time_ms``), the mean over the
  episode's job-iterations (an interval's mean step time counts once per iteration it completed);
- ``p99_step_time_ratio``: the 99th percentile over all job-iterations of all episodes (pooled);
- ``max_link_utilization``: the most utilised network link of each interval, mean over the episode;
- ``gap_to_lp``: ``(lp - policy) / lp`` of the mean GPU utilisation, against the LP *of the policy's
  class* (``lp_reference``: ``lp+bg`` for a ``jobs+bg`` or ``jobs+bg+weights`` policy, else ``lp``; the
  weighted class has no LP of its own: the share weights do not enter the LP's objective, the peak offered
  link utilisation, so its LP is the path LP ``lp+bg``); negative when a policy
  beats that LP, which minimises the *offered* maximum link utilisation of the interval's peak demand,
  not the GPU utilisation of the bursty, coupled transfers;
- ``gpu_utilization_vs_ecmp``: the paired difference ``policy - ecmp`` of GPU utilisation over the same
  episodes, mean and 95% CI (the margin over the default routing);
- ``twin_gap_share`` (when ``twin``, the clairvoyant planner, is evaluated): the policy's share of the
  ECMP-to-twin gap, ``(policy - ecmp) / (twin - ecmp)`` of the mean GPU utilisations (1: as good as the
  planner that sees the future), with the paired CI of ``policy - ecmp`` over ``twin - ecmp``.

``ecmp`` and ``lp`` are always evaluated (added at the end of the list if missing), and ``lp+bg`` when a
policy of the ``jobs+bg`` or ``jobs+bg+weights`` class is: they are the references of these metrics. Tables group the rows by
class (the classes of learned policies first, the reference ``twin`` last), so that a learned policy is
read first beside the baselines that control the same traffic. Episode ``e`` of seed ``s`` uses env seed ``s + 100_003 * e`` (the
first episode of seed ``s`` is seed ``s`` itself).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ainet_gym.agents.outputs import check_out_dir, fresh_dir, scenario_files
from ainet_gym.agents.registry import Agent, make_agent, parse_policies
from ainet_gym.arrays import safe_divide
from ainet_gym.envs.env import EnvCore
from ainet_gym.scenario.loader import load_scenario
from ainet_gym.scenario.spec import Scenario

__all__ = [
    "EPISODE_SEED_STRIDE",
    "EvalConfig",
    "PolicyRun",
    "episode_seeds",
    "evaluate",
    "evaluate_main",
    "mean_ci95",
    "parse_seeds",
    "run_policy",
    "step_ratios",
]

EPISODE_SEED_STRIDE = 100_003
#: ``ainet-gym evaluate`` without ``--out`` writes to a fresh ``{DEFAULT_OUT}/{scenario}__{unix time}``.
DEFAULT_OUT = "out/eval"
#: Largest evaluation seed: episode seeds ``seed + EPISODE_SEED_STRIDE * episode`` stay below 2**63.
MAX_SEED = 2**62
REFERENCES = ("ecmp", "lp")
#: the LP of each class (the reference of ``gap_to_lp``), and the order of the classes in tables
CLASS_LP = {"none": "lp", "jobs": "lp", "jobs+bg": "lp+bg", "jobs+bg+weights": "lp+bg"}
CLASSES = ("none", "jobs", "jobs+bg", "jobs+bg+weights", "reference")


@dataclass
class EvalConfig:
    """What to evaluate."""

    scenario: Any = "spine-leaf-2to1"
    """Shipped scenario name, YAML path, dict or Scenario."""
    policies: list[str] = field(default_factory=lambda: ["ecmp", "spray", "wcmp", "greedy", "lp"])
    """Policy strings (``ecmp``, ``ppo:PATH``, ``spray@path``, ...)."""
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3])
    """Episode seeds, the same for every policy."""
    episodes: int = 1
    """Episodes per seed."""
    steps: int | None = None
    """Intervals per episode (default: the scenario's ``episode_steps``)."""
    out: str | Path | None = "out/eval"
    """Directory for results.md, results.csv, results.json, episodes.csv and figure.png (None: none).
    A directory that holds earlier results or an input model is refused unless ``overwrite``."""
    overwrite: bool = False
    """Allow ``out`` to hold earlier results (they are replaced)."""


@dataclass
class PolicyRun:
    """Raw per-episode records of one policy (E episodes, T intervals, J job slots)."""

    name: str
    controls: str  # none | jobs | jobs+bg: the traffic the policy routes (reference: the twin)
    gpu: np.ndarray  # (E, T) GPU utilisation per interval
    max_link: np.ndarray  # (E, T) max network link utilisation per interval
    collisions: np.ndarray  # (E, T)
    ratio: np.ndarray  # (E, T, J) actual / ideal step time, 0 where no iteration completed
    iterations: np.ndarray  # (E, T, J) iterations completed
    seconds: float
    learned: bool = False  # a learned (action-level, not a baseline) policy


def parse_seeds(text: str | list[int]) -> list[int]:
    """``"1,2,3"`` or ``"1-5"`` (inclusive) or a list -> list of ints.

    Raises
    ------
    ValueError
        If a seed is not an integer, a part between commas is empty (``1,,2``) or the list is empty.
    """
    if isinstance(text, list | tuple):
        for s in text:
            if isinstance(s, bool) or not isinstance(s, int | np.integer):
                raise ValueError(f"seeds: {s!r} is not an integer seed; allowed: integers in [0, {MAX_SEED}]")
        seeds = [int(s) for s in text]
    else:
        seeds = []
        parts = [p.strip() for p in str(text).split(",")]
        for part in parts:
            if not part:
                if len(parts) == 1:  # blank: "no seed given" below
                    continue
                raise ValueError(  # "1,,2" or "1,2,": a typo, not a shorter list
                    f"seeds {text!r}: an empty part between commas; allowed: integers >= 0 and ranges LO-HI "
                    "with LO <= HI, comma-separated, e.g. 1,2,3 or 1-5"
                )
            m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
            if m is None:
                raise ValueError(
                    f"seeds {text!r}: {part!r} is not a seed or a range of seeds; allowed: integers >= 0 and "
                    "ranges LO-HI with LO <= HI, comma-separated, e.g. 1,2,3 or 1-5"
                )
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if hi < lo:
                raise ValueError(
                    f"seeds {text!r}: the range {part!r} is empty (LO > HI); write e.g. {hi}-{lo}"
                )
            if hi - lo >= 100_000:
                raise ValueError(
                    f"seeds {text!r}: the range {part!r} has {hi - lo + 1} seeds; allowed: <= 100000"
                )
            seeds.extend(range(lo, hi + 1))
    if not seeds:
        raise ValueError(f"seeds {text!r}: no seed given; write e.g. 1,2,3 or 1-5")
    for s in seeds:
        if isinstance(s, bool) or not 0 <= s <= MAX_SEED:
            raise ValueError(f"seeds: {s!r} is out of range; allowed: integers in [0, {MAX_SEED}]")
    return seeds


def episode_seeds(seeds: list[int], episodes: int) -> list[int]:
    """Env seeds of every (seed, episode), seed-major."""
    return [s + EPISODE_SEED_STRIDE * e for s in seeds for e in range(episodes)]


def mean_ci95(x: np.ndarray) -> dict[str, Any]:
    """Mean and Student-t 95% confidence interval of the mean (``ci95`` None with one sample)."""
    from scipy.stats import t

    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"mean": None, "ci95": None}
    m = float(x.mean())
    if x.size < 2:
        return {"mean": m, "ci95": None}
    h = float(t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return {"mean": m, "ci95": [m - h, m + h]}


def step_ratios(info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """An interval's job iterations and their step time over the ideal, (B, J) each, from a step's ``info``
    (0 for both where a job finished no iteration or has no ideal): what :func:`run_policy` records for the
    p99 (each ratio repeated by its iterations)."""
    it = np.asarray(info["iterations"])
    st, ideal = np.asarray(info["step_time_ms"]), np.asarray(info["ideal_step_time_ms"])
    ok = (it > 0) & (ideal > 0)
    return np.where(ok, it, 0), np.where(ok, safe_divide(st, ideal), 0.0)


def run_policy(agent: Agent, core: EnvCore, seeds: list[int]) -> PolicyRun:
    """Run one episode per seed (all at once, ``core.batch == len(seeds)``) and record the metrics."""
    import time

    t0 = time.time()
    obs, _ = core.reset(list(seeds))
    agent.reset(core)
    T, B, J = core.episode_steps, core.batch, core.ideal_step_s.shape[1]
    gpu = np.zeros((B, T))
    mlu = np.zeros((B, T))
    col = np.zeros((B, T))
    ratio = np.zeros((B, T, J))
    iters = np.zeros((B, T, J), dtype=np.int64)
    for t in range(T):
        a = agent.act(core, obs)
        if agent.level == "engine":
            obs, _, _, _, info = core.step_split(a)
        else:
            obs, _, _, _, info = core.step(a)
        gpu[:, t] = info["reward_gpu_utilization"]
        mlu[:, t] = info["max_link_utilization"]
        col[:, t] = info["collisions"]
        iters[:, t], ratio[:, t] = step_ratios(info)
    return PolicyRun(
        agent.name, agent_controls(agent), gpu, mlu, col, ratio, iters, time.time() - t0, is_learned(agent)
    )


def agent_controls(agent: Agent) -> str:
    """The traffic ``agent`` routes: its ``controls`` attribute, else from its action mode
    (``ecmp_weights``, ``split_bg``: ``jobs+bg``; ``split``, ``path``: ``jobs``; ``choose``, ``choose_bg``: their
    plans', ``jobs+bg+weights`` with a weighted extra plan)."""
    c = getattr(agent, "controls", None)
    if c is not None:
        return str(c)
    from ainet_gym.routing.plans import CHOOSE_MODES, plans_class

    mode = agent.env_kwargs.get("action_mode")
    if mode in CHOOSE_MODES:
        return plans_class(tuple(agent.env_kwargs.get("extra_plans", ())), CHOOSE_MODES[mode])
    return "jobs+bg" if mode in ("ecmp_weights", "split_bg") else "jobs"


def is_learned(agent: Agent) -> bool:
    """Whether ``agent`` is a learned policy (not a heuristic, predictive or reference baseline): its
    ``learned`` attribute when it has one."""
    from ainet_gym.agents.baselines import BaselineAgent
    from ainet_gym.agents.predictive import PredictiveAgent

    flag = getattr(agent, "learned", None)
    if flag is not None:
        return bool(flag)
    return not isinstance(agent, BaselineAgent | PredictiveAgent) and agent_controls(agent) != "reference"


def _episode_ratio(run: PolicyRun) -> np.ndarray:
    """(E,) iteration-weighted mean step-time ratio of each episode (nan without iterations)."""
    w = run.iterations.reshape(run.iterations.shape[0], -1).astype(np.float64)
    r = run.ratio.reshape(w.shape)
    n = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return safe_divide((r * w).sum(axis=1), n, np.nan)


def _ratio_samples(run: PolicyRun) -> np.ndarray:
    """Every job-iteration's step-time ratio (its interval's mean), pooled over episodes."""
    w = run.iterations.reshape(-1)
    return np.repeat(run.ratio.reshape(-1), w)


def class_lp(controls: str, available: Any) -> str | None:
    """The LP that a policy of class ``controls`` is compared with (:data:`CLASS_LP`), if it is among
    ``available`` (names); a ``jobs+bg`` (``jobs+bg+weights``) policy falls back to ``lp`` when ``lp+bg`` was not
    run."""
    want = CLASS_LP.get(controls, "lp+bg" if "lp+bg" in available else "lp")
    if want in available:
        return want
    return "lp" if "lp" in available else None


def summarize(runs: dict[str, PolicyRun]) -> dict[str, dict[str, Any]]:
    """The per-policy summary of the JSON (see the module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    ecmp = runs["ecmp"].gpu.mean(axis=1) if "ecmp" in runs else None
    twin = next((r.gpu.mean(axis=1) for r in runs.values() if r.controls == "reference"), None)
    for name, run in runs.items():
        g = run.gpu.mean(axis=1)
        samples = _ratio_samples(run)
        ref = class_lp(run.controls, runs)
        lp = runs[ref].gpu.mean(axis=1) if ref is not None else None
        d: dict[str, Any] = {
            "controls": run.controls,
            "learned": run.learned,
            "gpu_utilization": mean_ci95(g),
            "step_time_ratio": mean_ci95(_episode_ratio(run)),
            "p99_step_time_ratio": float(np.percentile(samples, 99)) if samples.size else None,
            "max_link_utilization": mean_ci95(run.max_link.mean(axis=1)),
            "gap_to_lp": None,
            "lp_reference": ref,
            "gpu_utilization_vs_ecmp": None,
            "twin_gap_share": None,
            "collisions": float(run.collisions.mean()),
            "episodes": int(g.shape[0]),
            "seconds": run.seconds,
        }
        if lp is not None and lp.mean() > 0:
            d["gap_to_lp"] = float((lp.mean() - g.mean()) / lp.mean())
        if ecmp is not None:
            d["gpu_utilization_vs_ecmp"] = mean_ci95(g - ecmp)
            if twin is not None:
                d["twin_gap_share"] = gap_share(g, ecmp, twin)
        out[name] = d
    return out


#: below this ECMP-to-twin gap in GPU utilisation the share of the gap is not reported
MIN_TWIN_GAP = 0.005


def gap_share(g: np.ndarray, ecmp: np.ndarray, twin: np.ndarray) -> dict[str, Any]:
    """``(policy - ecmp) / (twin - ecmp)`` of the mean GPU utilisations over episodes, with the paired
    95% CI of ``policy - ecmp`` divided by the mean gap (its own uncertainty left out); means None when
    the gap is below :data:`MIN_TWIN_GAP`."""
    gap = float(twin.mean() - ecmp.mean())
    if gap < MIN_TWIN_GAP:
        return {"mean": None, "ci95": None}
    d = mean_ci95(g - ecmp)
    ci = d["ci95"]
    return {"mean": d["mean"] / gap, "ci95": None if ci is None else [ci[0] / gap, ci[1] / gap]}


def table_order(policies: dict[str, dict[str, Any]]) -> list[str]:
    """The rows of a table grouped by class: the classes of learned policies first (each learned
    policy at the top of its class), then ``none``, ``jobs``, ``jobs+bg``, ``jobs+bg+weights``, the reference
    last."""
    first = [d["controls"] for d in policies.values() if d.get("learned")]
    order = list(dict.fromkeys([*first, *[c for c in CLASSES if c != "reference"]]))
    order += [c for d in policies.values() if (c := d["controls"]) not in order and c != "reference"]
    order.append("reference")
    rows: list[str] = []
    for c in order:
        names = [n for n, d in policies.items() if d["controls"] == c]
        rows += sorted(names, key=lambda n: not policies[n].get("learned"))  # stable: learned first
    return rows


def _label(spec: str, taken: set[str]) -> str:
    """The row's name: the policy string exactly as given (``ppo:out/a.zip``, ``twin:best``, ``lp+bg``), so
    that every policy of ``--policies`` is a key of the result's ``policies``, spelled as on the command line
    (``parse_policies`` already dropped repeats; ``#2``... only guards a caller that passes a list twice)."""
    name, i = spec, 2
    while name in taken:
        name, i = f"{spec}#{i}", i + 1
    return name


def prepare(cfg: EvalConfig) -> tuple[Scenario, list[tuple[str, Agent, EnvCore]]]:
    """Load the scenario and every agent, build their envs and check that each agent fits; fails
    before anything runs.

    Raises
    ------
    ValueError
        Unknown policy, bad seeds or episodes, or a model that does not fit the scenario.
    FileNotFoundError
        A model file that does not exist.
    """
    if not isinstance(cfg.episodes, int) or cfg.episodes < 1:
        raise ValueError(f"episodes = {cfg.episodes!r}: must be an integer >= 1")
    if cfg.steps is not None and (not isinstance(cfg.steps, int) or cfg.steps < 1):
        raise ValueError(f"steps = {cfg.steps!r}: must be an integer >= 1 or None")
    seeds = parse_seeds(cfg.seeds)
    specs = parse_policies(cfg.policies)
    for ref in REFERENCES:
        if ref not in specs:
            specs.append(ref)
    scenario = load_scenario(cfg.scenario)
    batch = len(seeds) * cfg.episodes
    prepared: list[tuple[str, Agent, EnvCore]] = []
    taken: set[str] = set()
    for spec in specs:
        agent = make_agent(spec)
        bind = getattr(agent, "bind", None)
        if bind is not None:  # agents that depend on the scenario (e.g. "pretrained") load it here
            bind(scenario)
        label = _label(spec, taken)
        taken.add(label)
        agent.name = label
        core = EnvCore(
            scenario, batch=batch, episode_steps=cfg.steps, info_keys=("collisions",), **agent.env_kwargs
        )
        core.reset(episode_seeds(seeds, cfg.episodes))  # builds the world so that check() sees shapes
        agent.check(core)
        prepared.append((label, agent, core))
    if any(CLASS_LP.get(agent_controls(a)) == "lp+bg" for _, a, _ in prepared) and "lp+bg" not in taken:
        agent = make_agent("lp+bg")  # the reference of gap_to_lp for the jobs+bg (and +weights) class
        core = EnvCore(scenario, batch=batch, episode_steps=cfg.steps, info_keys=("collisions",))
        core.reset(episode_seeds(seeds, cfg.episodes))
        agent.check(core)
        prepared.append(("lp+bg", agent, core))
    return scenario, prepared


def evaluate(cfg: EvalConfig) -> dict[str, Any]:
    """Run every policy on the same episodes; write the files (unless ``out`` is None); return the
    JSON object (``files`` lists what was written)."""
    if cfg.out is not None:  # refuse a bad destination before running anything
        inputs = [spec.split(":", 1)[1] for spec in parse_policies(cfg.policies) if ":" in spec]
        check_out_dir(cfg.out, cfg.overwrite, inputs, read=scenario_files(cfg.scenario))
    scenario, prepared = prepare(cfg)
    seeds = parse_seeds(cfg.seeds)
    eseeds = episode_seeds(seeds, cfg.episodes)
    runs = {label: run_policy(agent, core, eseeds) for label, agent, core in prepared}
    result: dict[str, Any] = {
        "scenario": scenario.name,
        "seeds": seeds,
        "episodes": cfg.episodes,
        "steps": prepared[0][2].episode_steps,
        "episode_seeds": eseeds,
        "policies": summarize(runs),
        "files": {},
    }
    if cfg.out is not None:
        result["files"] = write_outputs(result, runs, Path(cfg.out))
    return result


# ---------------------------------------------------------------------------------------------- output
def _fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _fmt_ci(d: dict[str, Any] | None, nd: int = 3, signed: bool = False) -> str:
    if d is None or d.get("mean") is None:
        return "-"
    f = f"{{:+.{nd}f}}" if signed else f"{{:.{nd}f}}"
    s = f.format(d["mean"])
    if d.get("ci95") is not None:
        s += " [" + ", ".join(f.format(v) for v in d["ci95"]) + "]"
    return s


TABLE_COLUMNS = (
    "policy",
    "GPU util",
    "step time / ideal",
    "p99 step / ideal",
    "max link util",
    "gap to LP of its class",
    "GPU util vs ECMP",
    "class (controls)",
)
#: the column added when the clairvoyant ``twin`` was evaluated
TWIN_COLUMN = "share of ECMP-to-twin gap"


def markdown_table(result: dict[str, Any]) -> str:
    """The results as a markdown table (means with [95% CI]), rows grouped by class
    (:func:`table_order`); with a ``twin`` row, a last column gives each policy's share of the
    ECMP-to-twin gap."""
    pols = result["policies"]
    twin = any(d["controls"] == "reference" for d in pols.values())
    cols = (*TABLE_COLUMNS, TWIN_COLUMN) if twin else TABLE_COLUMNS
    lines = [
        "| " + " | ".join(cols) + " |",
        "|"
        + "|".join(["---"] + ["---:"] * (len(TABLE_COLUMNS) - 2) + ["---"] + (["---:"] if twin else []))
        + "|",
    ]
    for name in table_order(pols):
        d = pols[name]
        gap = "-" if d["gap_to_lp"] is None else f"{100 * d['gap_to_lp']:+.1f}%"
        cells = [
            name,
            _fmt_ci(d["gpu_utilization"]),
            _fmt_ci(d["step_time_ratio"]),
            _fmt(d["p99_step_time_ratio"]),
            _fmt_ci(d["max_link_utilization"]),
            gap,
            _fmt_ci(d["gpu_utilization_vs_ecmp"], signed=True),
            d.get("controls", "jobs"),
        ]
        if twin:
            cells.append(_fmt_ci(d.get("twin_gap_share"), nd=2))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_header(result: dict[str, Any]) -> str:
    """The first line of an evaluation report: scenario, seeds, episode length and what each policy controls."""
    n = len(result["episode_seeds"])
    head = (
        f"scenario {result['scenario']}: {n} episodes (seeds {','.join(map(str, result['seeds']))} x "
        f"{result['episodes']}) of {result['steps']} intervals; mean [95% CI] over episodes"
    )
    warn = controls_note(result)
    return head if warn is None else f"{head}\n{warn}"


def controls_note(result: dict[str, Any]) -> str | None:
    """A warning line when the table mixes policies that route only the jobs' traffic with policies
    that also move background (None when every policy controls the same traffic)."""
    by: dict[str, list[str]] = {}
    for name, d in result["policies"].items():
        by.setdefault(d.get("controls", "jobs"), []).append(name)
    notes = []
    if "jobs" in by and "jobs+bg" in by:
        notes.append(
            f"note: {', '.join(by['jobs+bg'])} also route background traffic, which "
            f"{', '.join(by['jobs'])} leave on static ECMP: compare within each class (gap to LP: the LP "
            "of the policy's class)"
        )
    if "jobs+bg+weights" in by and ("jobs" in by or "jobs+bg" in by):
        notes.append(
            f"note: {', '.join(by['jobs+bg+weights'])} also set share weights between jobs (class "
            "jobs+bg+weights), which the path-only policies do not: compare within each class (their LP: lp+bg)"
        )
    if "reference" in by:
        notes.append(
            f"note: {', '.join(by['reference'])} sees the future (a clairvoyant reference, not a "
            "competitor): shown apart, last"
        )
    return "\n".join(notes) or None


def write_outputs(result: dict[str, Any], runs: dict[str, PolicyRun], out: Path) -> dict[str, str]:
    """results.md, results.csv, episodes.csv, results.json and figure.png in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "table": str(out / "results.md"),
        "csv": str(out / "results.csv"),
        "episodes_csv": str(out / "episodes.csv"),
        "json": str(out / "results.json"),
        "figure": str(out / "figure.png"),
    }
    result["files"] = files
    Path(files["table"]).write_text(f"{report_header(result)}\n\n{markdown_table(result)}\n")
    with open(files["csv"], "w", newline="") as fh:
        wr = csv.writer(fh)
        keys = ("gpu_utilization", "step_time_ratio", "max_link_utilization", "gpu_utilization_vs_ecmp")
        head = ["policy", "controls"]
        for k in keys:
            head += [f"{k}_mean", f"{k}_ci95_lo", f"{k}_ci95_hi"]
        head += [
            "p99_step_time_ratio",
            "gap_to_lp",
            "lp_reference",
            "twin_gap_share",
            "collisions",
            "episodes",
        ]
        wr.writerow(head)
        for name, d in result["policies"].items():
            row: list[Any] = [name, d.get("controls", "jobs")]
            for k in keys:
                v = d[k] or {}
                ci = v.get("ci95") or [None, None]
                row += [v.get("mean"), *ci]
            share = (d.get("twin_gap_share") or {}).get("mean")
            row += [d["p99_step_time_ratio"], d["gap_to_lp"], d["lp_reference"], share]
            row += [d["collisions"], d["episodes"]]
            wr.writerow(["" if x is None else x for x in row])
    with open(files["episodes_csv"], "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["policy", "seed", "gpu_utilization", "step_time_ratio", "max_link_utilization"])
        for name, run in runs.items():
            er = _episode_ratio(run)
            for i, s in enumerate(result["episode_seeds"]):
                wr.writerow([name, s, run.gpu[i].mean(), er[i], run.max_link[i].mean()])
    Path(files["json"]).write_text(json.dumps(result, indent=1) + "\n")
    plot(result, runs, Path(files["figure"]))
    return files


def plot(result: dict[str, Any], runs: dict[str, PolicyRun], path: Path) -> None:
    """Three panels: GPU utilisation per policy (mean, 95% CI), CDF of step time / ideal over
    job-iterations, and GPU utilisation per interval (mean over episodes)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    names = list(result["policies"])
    cmap = "tab10" if len(names) <= 10 else "tab20"
    palette = [matplotlib.colormaps[cmap](i % 20) for i in range(len(names))]
    colors = dict(zip(names, palette))
    means, errs = [], [[], []]
    for n in names:
        g = result["policies"][n]["gpu_utilization"]
        means.append(g["mean"])
        lo, hi = g["ci95"] or [g["mean"], g["mean"]]
        errs[0].append(g["mean"] - lo)
        errs[1].append(hi - g["mean"])
    ax1.bar(names, means, yerr=errs, capsize=4, color=[colors[n] for n in names])
    if "lp" in result["policies"]:
        ax1.axhline(result["policies"]["lp"]["gpu_utilization"]["mean"], color="k", ls="--", lw=1, label="LP")
        ax1.legend(loc="lower right")
    ax1.set_ylabel("GPU utilisation (mean, 95% CI)")
    ax1.set_ylim(0, 1)
    ax1.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax1.set_title("GPU utilisation per policy")
    for n in names:
        s = np.sort(_ratio_samples(runs[n]))
        if s.size:
            ax2.step(s, np.arange(1, s.size + 1) / s.size, where="post", label=n, color=colors[n])
    ax2.set_xlabel("step time / ideal (per job-iteration)")
    ax2.set_ylabel("CDF")
    ax2.set_title("Step times")
    if ax2.get_legend_handles_labels()[0]:  # no completed iteration in a very short run: nothing to label
        ax2.legend(fontsize=8)
    else:
        ax2.text(0.5, 0.5, "no completed iteration", ha="center", va="center", transform=ax2.transAxes)
    for n in names:
        ax3.plot(runs[n].gpu.mean(axis=0), label=n, color=colors[n], lw=1.2)
    ax3.set_xlabel("interval")
    ax3.set_ylabel("GPU utilisation (mean over episodes)")
    ax3.set_ylim(0, 1)
    ax3.set_title("GPU utilisation per interval")
    fig.suptitle(report_header(result), fontsize=9)
    fig.savefig(path, dpi=110)


def evaluate_main(args: argparse.Namespace) -> int:
    """Entry point of ``ainet-gym evaluate`` (arguments: see ``ainet_gym.cli``)."""
    out = args.out
    if out is None:  # the default: a fresh run folder per run, so that runs never collide
        stem = Path(str(args.scenario)).name.removesuffix(".yaml").removesuffix(".yml")
        out = fresh_dir(DEFAULT_OUT, f"{stem}__{int(time.time())}", create=False)
    cfg = EvalConfig(
        scenario=args.scenario,
        policies=parse_policies(args.policies),
        seeds=parse_seeds(args.seeds),
        episodes=args.episodes,
        steps=args.steps,
        out=out,
        overwrite=bool(getattr(args, "overwrite", False)),
    )
    result = evaluate(cfg)
    if args.json:
        print(json.dumps(result))
        return 0
    print(report_header(result))
    print()
    print(markdown_table(result))
    print()
    f = result["files"]
    print(f"wrote {f['table']}, {f['csv']}, {f['json']}, {f['episodes_csv']}")
    print(f"figure: {f['figure']}")
    return 0
