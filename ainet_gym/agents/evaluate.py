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

What to evaluate (:class:`EvalConfig`), running every policy (:func:`prepare`, :func:`evaluate`) and the command
(:func:`evaluate_main`) are this module; the rest lives in modules of one concern, whose public names it
re-exports (the same objects): :mod:`ainet_gym.agents.eval_episodes` (seeds, rollouts, raw records),
:mod:`ainet_gym.agents.eval_stats` (confidence intervals, paired differences, the summary),
:mod:`ainet_gym.agents.eval_report` (table and header) and :mod:`ainet_gym.agents.eval_files` (the files and the
figure).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ainet_gym.agents.eval_episodes import (
    EPISODE_SEED_STRIDE,
    PolicyRun,
    agent_controls,
    episode_seeds,
    parse_seeds,
    run_policy,
    step_ratios,
)
from ainet_gym.agents.eval_episodes import MAX_SEED as MAX_SEED
from ainet_gym.agents.eval_episodes import is_learned as is_learned
from ainet_gym.agents.eval_files import plot as plot
from ainet_gym.agents.eval_files import write_outputs
from ainet_gym.agents.eval_report import CLASSES as CLASSES
from ainet_gym.agents.eval_report import TABLE_COLUMNS as TABLE_COLUMNS
from ainet_gym.agents.eval_report import TWIN_COLUMN as TWIN_COLUMN
from ainet_gym.agents.eval_report import controls_note as controls_note
from ainet_gym.agents.eval_report import markdown_table, report_header
from ainet_gym.agents.eval_report import table_order as table_order
from ainet_gym.agents.eval_stats import CLASS_LP, mean_ci95, summarize
from ainet_gym.agents.eval_stats import MIN_TWIN_GAP as MIN_TWIN_GAP
from ainet_gym.agents.eval_stats import class_lp as class_lp
from ainet_gym.agents.eval_stats import gap_share as gap_share
from ainet_gym.agents.outputs import check_out_dir, fresh_dir, scenario_files
from ainet_gym.agents.registry import Agent, make_agent, parse_policies
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


#: ``ainet-gym evaluate`` without ``--out`` writes to a fresh ``{DEFAULT_OUT}/{scenario}__{unix time}``.
DEFAULT_OUT = "out/eval"


REFERENCES = ("ecmp", "lp")


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
