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
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.registry import register_agent
from ainet_gym.routing.isolate import ISOLATE_PLANS
from ainet_gym.routing.plans import (
    FAVOUR_BASE,
    FAVOUR_BASES,
    FAVOUR_WEIGHT,
    weighted_plan,
    weighted_plan_name,
)

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

#: candidate splits tried at each decision (then perturbations of the incumbent, up to K)
LOOKAHEAD_CANDIDATES: tuple[str, ...] = ("lp+bg", "lp", "greedy+bg", "spray+bg", "solo-lp+bg", "incumbent")
#: policies whose whole episodes the twin also plays (every baseline of the jobs+bg class, lp and ecmp)
PURE_CANDIDATES: tuple[str, ...] = (
    "lp+bg", "lp", "greedy+bg", "spray+bg", "wcmp+bg", "predictive-lp+bg", "predictive-greedy+bg", "ecmp",
    "solo-lp+bg", "burst-lp+bg",
)  # fmt: skip
#: the base policy of the lookahead's intervals after the first
BASE_POLICY = "solo-lp+bg"
#: the lookahead bases ``twin:best`` picks from, per instance (stateless: a predictive router's forecast
#: would not follow the restored copies)
BASE_CHOICES: tuple[str, ...] = (
    "lp+bg", "lp", "greedy+bg", "spray+bg", "wcmp+bg", "ecmp", "solo-lp+bg", "burst-lp+bg",
)  # fmt: skip
#: default candidates per decision and lookahead intervals (docs/learning.md, "The K x H sweep")
DEFAULT_K = 8
DEFAULT_H = 8
DEFAULT_SIGMA = 0.5


def parse_twin_arg(arg: str | None) -> dict[str, Any]:
    """``kK-hH[-sS][-gSIGMA][-best][-iso][-w[W]]...[-on{base}]...[-wbase]`` -> ``{"k", "h", "seed", "sigma",
    "best_base", "isolate", "weights", "weight_bases", "weighted_base"}`` (defaults for what is left out;
    ``weights``: the share weights of the weighted candidates, in the order given, ``w`` alone
    :data:`~ainet_gym.routing.plans.FAVOUR_WEIGHT`; ``weight_bases``: the splits they run,
    :data:`~ainet_gym.routing.plans.FAVOUR_BASE` first, then each ``on{base}``'s; ``weighted_base``: ``wbase``
    given).

    Raises
    ------
    ValueError
        Naming the part that is not ``k<int >= 7>``, ``h<int >= 1>``, ``s<int >= 0>``, ``g<float >= 0>``,
        ``best``, ``iso``, ``w[<number in [1, 1e6]>]``, ``on{base}`` or ``wbase``, or ``wbase`` without ``best``
        and a ``w`` part, or ``on{base}`` without a ``w`` part.
    """
    out: dict[str, Any] = {
        "k": DEFAULT_K,
        "h": DEFAULT_H,
        "seed": 0,
        "sigma": DEFAULT_SIGMA,
        "best_base": False,
        "isolate": False,
        "weights": [],
        "weight_bases": [FAVOUR_BASE],
        "weighted_base": False,
    }
    if not arg:
        return out
    on_names = {b.replace("-", ""): f"{b}+bg" for b in FAVOUR_BASES}
    names = {"k": "k", "h": "h", "s": "seed", "g": "sigma"}
    for part in arg.split("-"):
        if part.strip() == "best":
            out["best_base"] = True
            continue
        if part.strip() == "iso":
            out["isolate"] = True
            continue
        if part.strip() == "wbase":
            out["weighted_base"] = True
            continue
        mo = re.fullmatch(r"on(.*)", part.strip())
        if mo is not None:
            if mo.group(1) not in on_names or on_names[mo.group(1)] in out["weight_bases"]:
                raise ValueError(
                    f"policy 'twin:{arg}': {part!r}: allowed: on{{base}} once per base, base one of "
                    f"{', '.join(on_names)} (the split of weighted candidates beside {FAVOUR_BASE}'s)"
                )
            out["weight_bases"].append(on_names[mo.group(1)])
            continue
        mw = re.fullmatch(r"w(.*)", part.strip())
        if mw is not None:
            val = mw.group(1)
            wp = weighted_plan(f"favour0-w{val}+bg" if val else "favour0+bg")  # the plans' weight check
            assert wp is not None
            if wp.weight in out["weights"]:
                raise ValueError(
                    f"policy 'twin:{arg}': {part!r}: weight {wp.weight:g} given twice; allowed: distinct"
                )
            out["weights"].append(wp.weight)
            continue
        m = re.fullmatch(r"([khsg])(\d+(?:\.\d+)?)", part.strip())
        if m is None:
            raise ValueError(
                f"policy 'twin:{arg}': {part!r} is not one of kK (candidates per decision, >= 7), hH "
                "(lookahead intervals, >= 1), sS (seed), gSIGMA (perturbation scale), best (the best pure "
                "candidate as the lookahead base), iso (the isolating plans as candidates too) or w / wW (the "
                "weighted plans favour{j}+bg at share weight 16 / W as candidates too), joined by '-', e.g. "
                "twin:k8-h4"
            )
        key, val = names[m.group(1)], m.group(2)
        if key == "sigma":
            out[key] = float(val)
        else:
            if "." in val:
                raise ValueError(f"policy 'twin:{arg}': {part!r}: {key} must be an integer")
            out[key] = int(val)
    if out["k"] < len(LOOKAHEAD_CANDIDATES) + 1:
        raise ValueError(
            f"policy 'twin:{arg}': k = {out['k']}: needs >= {len(LOOKAHEAD_CANDIDATES) + 1} (the candidates "
            f"{', '.join(LOOKAHEAD_CANDIDATES)} and at least one perturbation)"
        )
    if out["h"] < 1:
        raise ValueError(f"policy 'twin:{arg}': h = {out['h']}: needs >= 1 lookahead interval")
    if len(out["weight_bases"]) > 1 and not out["weights"]:
        raise ValueError(
            f"policy 'twin:{arg}': on{{base}} gives the split of the weighted candidates; allowed: with a w part, "
            "e.g. twin:best-w-onlp"
        )
    if out["weighted_base"] and not (out["best_base"] and out["weights"]):
        raise ValueError(
            f"policy 'twin:{arg}': wbase picks the lookahead base among the weighted plans too; allowed: with "
            "best and a w part, e.g. twin:best-w-wbase"
        )
    return out


def instance_rows(bounds: np.ndarray, instances: np.ndarray) -> np.ndarray:
    """Connection indices of ``instances`` (in that order) under the instance bounds ``bounds``."""
    lo, hi = bounds[instances], bounds[instances + 1]
    n = hi - lo
    return np.repeat(lo, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))


class TwinAgent:
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

    # ------------------------------------------------------------------ planning cores
    def _core(self, core: EnvCore, batch: int) -> EnvCore:
        """A planning core of ``batch`` instances of ``core``'s scenario (made once, reused)."""
        from ainet_gym.envs.env import EnvCore

        key = (id(core.scenario), batch, core.episode_steps, core.backend, core.history)
        if key not in self._cores:
            self._cores[key] = EnvCore(
                core.scenario,
                batch=batch,
                history=core.history,
                episode_steps=core.episode_steps,
                backend=core.backend,
            )
        return self._cores[key]

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

    def _weighted_plans(self, core: EnvCore) -> list[str]:
        """The weighted candidates: ``favour{j}+bg`` (``favour{j}-w{W}+bg``) of every job slot ``j`` of
        ``core``, for each weight of :attr:`weights` in order."""
        slots = core.routing_context.job_unit.shape[1]
        return [
            weighted_plan_name(j, w, base)
            for w in self.weights
            for base in self.weight_bases
            for j in range(slots)
        ]

    def _lookahead(self, core: EnvCore, start: Any) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """The lookahead plan: the split committed at each decision, the instance bounds of its
        connections, and the plan's mean GPU utilisation per instance."""
        B, T, H = core.batch, core.episode_steps, self.h
        slots = core.routing_context.job_unit.shape[1]
        iso = list(ISOLATE_PLANS)[:slots] if self.isolate else []  # one per job slot (isolate0+bg, ...)
        fav = list(self._favour)  # the weighted candidates (twin:...-w), after the isolating ones
        K = self.k + len(iso) + len(fav)
        # each candidate's plan name for its share weights ("" for the unweighted ones: the scenario's)
        cand_names = [""] * (self.k + len(iso)) + fav
        look_names = [cand_names[i % K] for i in range(B * K)]
        look_base_names = [self._bases[i // K] for i in range(B * K)]  # copy b * K + k runs main b's base
        scores_t = np.zeros((T, B, K))
        self._plan_names: list[list[str]] = []
        main = self._core(core, B)
        look = self._core(core, B * K)
        main.restore(start)
        rng = np.random.default_rng(self.seed)
        fixed = [c for c in LOOKAHEAD_CANDIDATES if c != "incumbent"]
        src = np.repeat(np.arange(B), K)
        base_of = {name: np.flatnonzero(np.asarray(self._bases) == name) for name in set(self._bases)}
        bases = {
            name: self._policy(name, look) for name in base_of
        }  # look instance b * K + k <- main instance b
        splits: list[np.ndarray] = []
        bounds: list[np.ndarray] = []
        gpu = np.zeros((B, T))
        incumbent: np.ndarray | None = None
        policies = {name: self._policy(name, main) for name in fixed}
        isolating = {name: self._policy(name, main) for name in iso}
        of_base = {b: self._policy(weighted_plan_name(0, FAVOUR_WEIGHT, b), main) for b in self.weight_bases}
        for t in range(T):
            w = main.routing_context
            sim = w.sim
            assert sim is not None
            if incumbent is None:  # the first decision, or the units changed: ECMP
                incumbent = w.default_split()
            cands = [policies[name](w, main.last_result) for name in fixed]
            cands.append(incumbent)
            cands += self._perturb(main, incumbent, self.k - len(cands), rng)
            cands += [isolating[name](w, main.last_result) for name in iso]
            if fav:  # every weighted plan runs its base's split (burst-lp+bg, on{base}'s): each computed once
                base_split = {b: pol(w, main.last_result) for b, pol in of_base.items()}
                cands += [base_split[self._fav_base[name]] for name in fav]
            stack = np.stack(cands)  # (K, C, P)
            snap = main.snapshot()
            look.restore(snap, src)
            mb, lb = main.connection_bounds(), look.connection_bounds()
            # look's connections, instance by instance: candidate k of main instance b
            k_of = np.repeat(np.arange(B * K) % K, np.diff(lb))
            rows = instance_rows(mb, src)
            before_work = look.job_progress()
            names = [list(x) for x in look.job_names]
            if fav:  # each copy at its candidate's share weights for one interval, then the scenario's
                look.set_plan_weights(look_names)
            look.step_split(stack[k_of, rows])
            # the base's intervals at its weights (a plain base's: the scenario's)
            if fav or self.weighted_base:
                look.set_plan_weights(look_base_names)
            for _ in range(min(H, T - t) - 1):
                look.step_split(self._base_split(look, bases, base_of, K))
            # the ideal work done in the lookahead, of the jobs there at its start and its end (churn
            # does not depend on the routing: every candidate sees the same jobs come and go)
            same = np.array([[a == b for a, b in zip(x, y)] for x, y in zip(names, look.job_names)])
            score = np.where(same, look.job_progress() - before_work, 0.0).sum(axis=1)
            scores_t[t] = score.reshape(B, K)
            best = np.argmax(scores_t[t], axis=1)  # (B,) ties: the first candidate
            conn_inst = sim.unit_inst[sim.conn_unit]
            chosen = stack[best[conn_inst], np.arange(sim.n_conns)]
            splits.append(chosen)
            bounds.append(mb)
            before = main.unit_stack
            if fav:
                picked = [cand_names[int(k)] for k in best]
                self._plan_names.append(picked)
                main.set_plan_weights(picked)
            _, _, _, _, info = main.step_split(chosen)
            gpu[:, t] = info["reward_gpu_utilization"]
            incumbent = chosen if main.unit_stack is before else None  # a restack renumbers the connections
        self._lookahead_scores = scores_t
        return splits, bounds, gpu.mean(axis=1)

    def _base_split(
        self, look: EnvCore, bases: dict[str, Any], base_of: dict[str, np.ndarray], k: int
    ) -> np.ndarray:
        """The split of the lookahead copies in which the copies of main instance ``b`` follow its base."""
        if len(bases) == 1:
            (pol,) = bases.values()
            return pol(look.routing_context, look.last_result)
        sim = look.routing_context.sim
        assert sim is not None
        split = np.empty((sim.n_conns, look.P))
        lb = look.connection_bounds()
        for name, pol in bases.items():
            inst = (base_of[name][:, None] * k + np.arange(k)).reshape(-1)  # the copies of those instances
            rows = instance_rows(lb, inst)
            split[rows] = pol(look.routing_context, look.last_result)[rows]
        return split

    def _policy(self, name: str, core: EnvCore) -> Any:
        """The engine-level policy ``name`` for ``core``: the routers (``POLICIES``) and the extra plans
        (:func:`ainet_gym.routing.plans.plan_policy`), the switching baselines
        (:data:`ainet_gym.agents.baselines.SWITCHED`), except that a predictive router gets its own
        forecaster state and is fitted on episodes as long as ``core``'s (as the ``predictive-*`` agents of
        ``evaluate`` are)."""
        from ainet_gym.agents.baselines import SWITCHED
        from ainet_gym.routing.plans import plan_policy

        if name in SWITCHED:
            return SWITCHED[name][0]
        if not name.startswith("predictive-"):
            return plan_policy(name)  # a router of POLICIES or an extra plan (isolate{j}+bg)
        from ainet_gym.agents.predictive import PredictiveRouter

        router = PredictiveRouter.of_core(
            core, name.removeprefix("predictive-").removesuffix("+bg"), name.endswith("+bg")
        )
        return lambda world, last: router(last)

    def _perturb(
        self, core: EnvCore, split: np.ndarray, n: int, rng: np.random.Generator
    ) -> list[np.ndarray]:
        """``n`` random perturbations of ``split`` over the live paths of every multi-path connection."""
        live = core.routing_context.live_paths()
        multi = live.sum(axis=1) > 1
        out = []
        for _ in range(n):
            x = (split + 0.05) * np.exp(self.sigma * rng.standard_normal(split.shape))
            x = np.where(live, x, 0.0)
            x /= np.maximum(x.sum(axis=1, keepdims=True), 1e-300)
            out.append(np.where(multi[:, None], x, split))
        return out

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

    from ainet_gym.agents.evaluate import parse_seeds
    from ainet_gym.agents.outputs import (  # one-line errors, as ainet-gym's
        OneLineParser,
        add_episode_steps_arg,
        add_out_file_args,
        run_writing_module_cli,
    )

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
