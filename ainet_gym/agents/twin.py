"""``twin``: the clairvoyant planner, an upper reference for routing (it sees the future: never a competitor).

The twin plans on copies of the true state (:meth:`~ainet_gym.envs.env.EnvCore.snapshot` /
:meth:`~ainet_gym.envs.env.EnvCore.restore`, exact: the simulation is deterministic given the state, the
random failures and churn included, because each instance's generator is part of the state). At
``reset`` it plans the whole episode of every instance, then replays the plan:

1. **Receding-horizon lookahead.** At each decision it tries ``K`` candidate splits from the state the
   plan has reached: ``lp+bg``, ``lp``, ``greedy+bg``, ``spray+bg``, ``solo-lp+bg`` (the background
   sprayed, each job routed by the LP as if it communicated alone:
   :func:`ainet_gym.routing.policies.solo_lp_all`), the incumbent (the split it committed at the previous
   decision; ECMP at the first) and ``K - 6`` random perturbations of the incumbent (each share times
   ``exp(sigma * N(0, 1))`` on the connection's live paths, from ``share + 0.05``, renormalised).
   Each candidate runs for one interval on a copy of the state, followed by ``H - 1`` intervals of
   ``solo-lp+bg`` (the base policy of a rollout algorithm, Bertsekas' sense), all ``B x K`` copies in one
   batched :class:`~ainet_gym.envs.env.EnvCore`. The candidate whose jobs did the most ideal work in those
   ``H`` intervals (GPU-seconds of compute, plus the share of the current iteration's communication
   moved, :meth:`EnvCore.job_progress <ainet_gym.envs.env.EnvCore.job_progress>`: the GPU utilisation of the lookahead with credit for communication
   that is under way at its end) is committed (ties: the first in the order above).
2. **Whole episodes of the pure candidates.** Every baseline of the ``jobs+bg`` class (``lp+bg``,
   ``greedy+bg``, ``spray+bg``, ``wcmp+bg``, ``solo-lp+bg``, ``burst-lp+bg``, ``predictive-lp+bg``,
   ``predictive-greedy+bg``), ``lp`` and ``ecmp`` also play the whole episode from the reset state.
3. **Keep the best trajectory.** Per instance, the trajectory (1 or one of 2) with the highest mean GPU
   utilisation over the episode, the metric of ``ainet-gym evaluate``, is replayed on the true state. A
   greedy lookahead alone does not guarantee to beat every candidate over a whole episode; with step 3 the
   twin's episode is at least as good as each pure candidate's on every seed, exactly (the replay is the
   same trajectory, bit for bit).

Arguments: ``twin`` or ``twin:kK-hH[-sS][-gSIGMA][-best][-iso][-w[W]]...[-on{base}]...[-wbase]`` (no commas: ``--policies`` splits on
them), e.g.
``twin:k12-h6``; defaults :data:`DEFAULT_K`, :data:`DEFAULT_H` (from the K x H sweep in docs/learning.md:
from H = 8 on the score moves by less than 0.001), seed 0, sigma 0.5. ``best`` (e.g. ``twin:best``) plays
the pure candidates first and makes each instance's lookahead base (the policy of intervals 2..H) its best
stateless pure candidate (:data:`BASE_CHOICES`) instead of ``solo-lp+bg``: a rollout over the best
heuristic of that episode, for scenarios where ``solo-lp+bg`` is a poor base (docs/learning.md, "Headroom
survey"). ``iso`` adds to each decision's candidates the isolating plans ``isolate{j}+bg`` of every job slot
``j`` (:func:`ainet_gym.routing.policies.isolate_slot_all`: one job held on one path for an interval), after
the ``K`` of the default set: the reference with the slowdowns that the plain twin finds only among its
random perturbations (docs/learning.md, "issue-26z"). ``w`` (e.g. ``twin:best-w``, the reference of the class
``jobs+bg+weights``) adds the weighted plans ``favour{j}+bg`` of every job slot ``j``
(:mod:`ainet_gym.routing.plans`, "Weighted plans": ``burst-lp+bg``'s split with job ``j`` and the background at
share weight 16, the other jobs 1) to each decision's candidates (after the isolating ones; the lookahead's
intervals 2..H then run its base unweighted) and to the whole-episode candidates of 2, and replays the
weights of the trajectory it keeps; ``wW`` (``w4``) at weight ``W`` instead, and ``w`` parts repeat
(``twin:best-w2-w4-w16``: every slot at each weight). Without a ``w`` part the twin sets no weights. ``wbase``
(with ``best`` and a ``w`` part, e.g. ``twin:best-w-w1e6-wbase``) lets each instance's lookahead base be a
weighted plan too: the best of :data:`BASE_CHOICES` and the weighted candidates' whole episodes, whose
intervals 2..H then run at that plan's share weights (a rollout over the best static weighted plan, the bar of
the class, instead of over the best path-only plan; docs/learning.md, "issue-26zm"). ``on{base}`` (with a ``w``
part; ``base`` one of :data:`~ainet_gym.routing.plans.FAVOUR_BASES` without its dashes: ``onlp``, ``onsololp``,
``onspray``, ...; repeatable) adds the weighted plans over that base's split too (``favour{j}[-w{W}]-lp+bg``,
at every weight given), beside those over ``burst-lp+bg``. Class
``reference``: tables show it apart, last, and give every policy's share of the ECMP-to-twin gap.

Modules: this one is the planner (:class:`TwinAgent`: its arguments, the plan of an episode at ``reset`` and
the replay), its registration and the K x H sweep (:func:`sweep`, ``python -m ainet_gym.agents.twin sweep``);
the planning side (the planning cores, the lookahead of step 1; ``TwinAgent``'s base class ``TwinPlanning``) is
:mod:`ainet_gym.agents.twin_plan`, the candidates, defaults and the argument grammar are
:mod:`ainet_gym.agents.twin_args`; it re-exports their public names (the same objects).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.registry import register_agent
from ainet_gym.agents.twin_args import (
    BASE_CHOICES,
    BASE_POLICY,
    DEFAULT_H,
    DEFAULT_K,
    LOOKAHEAD_CANDIDATES,
    PURE_CANDIDATES,
    parse_twin_arg,
)
from ainet_gym.agents.twin_args import DEFAULT_SIGMA as DEFAULT_SIGMA
from ainet_gym.agents.twin_plan import TwinPlanning, instance_rows
from ainet_gym.routing.plans import weighted_plan

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = [
    "DEFAULT_H",
    "DEFAULT_K",
    "LOOKAHEAD_CANDIDATES",
    "PURE_CANDIDATES",
    "TwinAgent",
    "instance_rows",
    "parse_twin_arg",
]


class TwinAgent(TwinPlanning):
    """The clairvoyant planner (see the module docstring); an engine-level agent of class ``reference``."""

    level = "engine"
    controls = "reference"
    learned = False

    def __init__(self, arg: str | None = None) -> None:
        cfg = parse_twin_arg(arg)
        self.k: int = cfg["k"]
        self.h: int = cfg["h"]
        self.seed: int = cfg["seed"]
        self.sigma: float = cfg["sigma"]
        self.best_base: bool = cfg["best_base"]
        self.isolate: bool = cfg["isolate"]
        #: the share weights of the weighted candidates (empty: the twin sets no weights)
        self.weights: list[float] = cfg["weights"]
        #: whether a weighted plan may be an instance's lookahead base (``wbase``)
        self.weighted_base: bool = cfg["weighted_base"]
        #: the splits of the weighted candidates (burst-lp+bg first, then each on{base}'s)
        self.weight_bases: list[str] = cfg["weight_bases"]
        self.name = "twin" if arg is None else f"twin:{arg}"
        self.env_kwargs: dict[str, Any] = {}
        self._cores: dict[tuple, EnvCore] = {}
        self.plan_stats: dict[str, Any] = {}

    def check(self, core: EnvCore) -> None:
        if core.routing_context.sim is None:
            raise ValueError(f"{self.name}: the core must be reset before the twin can plan")

    def reset(self, core: EnvCore) -> None:
        """Plan the whole episode of every instance from ``core``'s reset state (module docstring)."""
        import time

        t0 = time.perf_counter()
        B, T = core.batch, core.episode_steps
        start = core.snapshot()
        scores: dict[str, np.ndarray] = {}
        # the pure candidates' whole episodes (2. below; first, since `best` picks its bases from them)
        sim_core = self._core(core, B)
        self._favour = self._weighted_plans(core)
        self._fav_base = {name: weighted_plan(name).base for name in self._favour}  # type: ignore[union-attr]
        self._pure_names = [*PURE_CANDIDATES, *self._favour]
        for name in self._pure_names:
            sim_core.restore(start)
            pol = self._policy(name, sim_core)
            gpu = np.zeros((B, T))  # as run_policy records it, so that the means are the evaluator's
            for t in range(T):
                split = pol(sim_core.routing_context, sim_core.last_result)
                if self.weights:  # (a weighted plan's weights; the scenario's for the others)
                    sim_core.set_plan_weights([name] * B)
                _, _, _, _, info = sim_core.step_split(split)
                gpu[:, t] = info["reward_gpu_utilization"]
            scores[name] = gpu.mean(axis=1)
        if self.best_base:  # per instance, its best stateless pure candidate (ties: the first)
            choices = [*BASE_CHOICES, *self._favour] if self.weighted_base else list(BASE_CHOICES)
            table = np.stack([scores[n] for n in choices])
            self._bases = [choices[i] for i in np.argmax(table, axis=0)]
        else:
            self._bases = [BASE_POLICY] * B
        t1 = time.perf_counter()
        # 1. the receding-horizon lookahead, from the reset state
        self._plan_splits, self._plan_bounds, scores["plan"] = self._lookahead(core, start)
        scores = {"plan": scores.pop("plan"), **scores}  # the plan first: ties keep it
        # 3. per instance, the best trajectory (the plan first: ties keep it)
        names = list(scores)
        table = np.stack([scores[n] for n in names])  # (trajectories, B)
        self._choice = [names[i] for i in np.argmax(table, axis=0)]
        self.plan_stats = {
            "scores": {n: scores[n].tolist() for n in names},
            "chosen": list(self._choice),
            "bases": list(self._bases),
            # (T, B, K) each decision's candidates' lookahead scores (ideal GPU-seconds over H intervals)
            "lookahead_scores": self._lookahead_scores,
            "lookahead_s": time.perf_counter() - t1,
            "seconds": time.perf_counter() - t0,
        }
        used = sorted({c for c in self._choice if c != "plan"}, key=self._pure_names.index)
        self._pure = {name: self._policy(name, core) for name in used}  # on the true core's world
        self._t = 0

    # ------------------------------------------------------------------ acting
    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        """The split of the best trajectory of each instance at this decision."""
        t = self._t
        self._t += 1
        sim = core.routing_context.sim
        assert sim is not None
        pure = {name: pol(core.routing_context, core.last_result) for name, pol in self._pure.items()}
        split = np.empty((sim.n_conns, core.P))
        bounds = core.connection_bounds()
        if self.weights:  # the weights of each instance's trajectory at this decision ("": the scenario's)
            core.set_plan_weights(
                [self._plan_names[t][b] if c == "plan" else c for b, c in enumerate(self._choice)]
            )
        for b, choice in enumerate(self._choice):
            rows = np.arange(bounds[b], bounds[b + 1])
            if choice == "plan":
                pb = self._plan_bounds[t]
                plan_rows = np.arange(pb[b], pb[b + 1])
                if plan_rows.shape != rows.shape:
                    raise RuntimeError(
                        "twin: the replay left the planned trajectory"
                    )  # an internal invariant
                split[rows] = self._plan_splits[t][plan_rows]
            else:
                split[rows] = pure[choice][rows]
        return split


register_agent(
    "twin",
    TwinAgent,
    optional_arg=True,
    arg_help="kK-hH",
    description="clairvoyant planner on copies of the true state (a reference, not a competitor)",
    overwrite=True,
)


def sweep(
    scenario: Any, ks: list[int], hs: list[int], seeds: list[int], steps: int | None = None
) -> list[dict]:
    """The twin for every ``K`` x ``H`` on the episodes of ``seeds`` (one batch, as ``evaluate`` runs
    them): per pair the mean GPU utilisation of the twin [95% CI], of its lookahead plan alone, and the
    wall seconds."""
    import time

    from ainet_gym.agents.evaluate import mean_ci95, run_policy
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.scenario.loader import load_scenario

    sc = load_scenario(scenario)
    rows = []
    for k in ks:
        for h in hs:
            agent = TwinAgent(f"k{k}-h{h}")
            core = EnvCore(sc, batch=len(seeds), episode_steps=steps, info_keys=("collisions",))
            t0 = time.perf_counter()
            run = run_policy(agent, core, list(seeds))
            g = run.gpu.mean(axis=1)
            plan = np.asarray(agent.plan_stats["scores"]["plan"])
            rows.append(
                {
                    "k": k,
                    "h": h,
                    "gpu_utilization": mean_ci95(g),
                    "plan_gpu_utilization": float(plan.mean()),
                    "plan_chosen": sum(c == "plan" for c in agent.plan_stats["chosen"]),
                    "seconds": time.perf_counter() - t0,
                }
            )
            print(
                f"K={k:<3} H={h:<3} twin {g.mean():.4f}  plan {plan.mean():.4f}  "
                f"plan kept on {rows[-1]['plan_chosen']}/{len(seeds)} seeds  {rows[-1]['seconds']:.0f} s",
                flush=True,
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.twin sweep SCENARIO --k 7,8,12 --h 1,2,4,8 --seeds 1-10``: the K x H
    sweep behind :data:`DEFAULT_K` and :data:`DEFAULT_H`."""
    import json

    from ainet_gym.agents.arg_types import add_episode_steps_arg
    from ainet_gym.agents.evaluate import parse_seeds
    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's
    from ainet_gym.agents.outputs import add_out_file_args, run_writing_module_cli

    p = OneLineParser(prog="python -m ainet_gym.agents.twin", description=main.__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweep", help="the twin for every K x H")
    s.add_argument("scenario")
    s.add_argument("--k", default="7,8,12,16", help="candidates per decision (comma list)")
    s.add_argument("--h", default="1,2,4,8", help="lookahead intervals (comma list)")
    s.add_argument("--seeds", default="1-10")
    add_episode_steps_arg(s)
    add_out_file_args(s, "write the rows as JSON to this file", flag="--json")
    a = p.parse_args(argv)

    def run() -> int:
        rows = sweep(a.scenario, _int_list("--k", a.k), _int_list("--h", a.h), parse_seeds(a.seeds), a.steps)
        if a.json:
            with open(a.json, "w") as fh:
                json.dump({"scenario": a.scenario, "seeds": a.seeds, "rows": rows}, fh, indent=1)
        return 0

    return run_writing_module_cli(
        "python -m ainet_gym.agents.twin sweep", run, a.json, a.overwrite, flag="--json"
    )


def _int_list(flag: str, text: str) -> list[int]:
    """``text``, a comma list of integers >= 1 given to ``flag``; a ``ValueError`` naming the flag otherwise."""
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if not parts or not all(x.isdigit() and int(x) >= 1 for x in parts):
        raise ValueError(f"{flag} {text!r}: allowed: a comma list of integers >= 1, e.g. 1,2,4")
    return [int(x) for x in parts]


if __name__ == "__main__":
    raise SystemExit(main())
