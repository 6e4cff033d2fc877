"""The planning side of the clairvoyant ``twin`` (:class:`~ainet_gym.agents.twin.TwinAgent`, whose base class
:class:`TwinPlanning` is): the planning cores (copies of the true state in one batched
:class:`~ainet_gym.envs.env.EnvCore`), the weighted candidates, the receding-horizon lookahead of the module
docstring of :mod:`ainet_gym.agents.twin` (step 1) with its base policies and perturbations, and the connection
rows of a set of instances (:func:`instance_rows`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.twin_args import LOOKAHEAD_CANDIDATES
from ainet_gym.routing.isolate import ISOLATE_PLANS
from ainet_gym.routing.plans import FAVOUR_WEIGHT, weighted_plan_name

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = ["TwinPlanning", "instance_rows"]


def instance_rows(bounds: np.ndarray, instances: np.ndarray) -> np.ndarray:
    """Connection indices of ``instances`` (in that order) under the instance bounds ``bounds``."""
    lo, hi = bounds[instances], bounds[instances + 1]
    n = hi - lo
    return np.repeat(lo, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))


class TwinPlanning:
    """The planning side of :class:`~ainet_gym.agents.twin.TwinAgent` (its base class; one class over two
    modules, as :class:`~ainet_gym.envs.env.EnvCore` is): it holds no state of its own and reads the members
    that ``TwinAgent.__init__`` and ``TwinAgent.reset`` set."""

    k: int
    h: int
    seed: int
    sigma: float
    isolate: bool
    weights: list[float]
    weighted_base: bool
    weight_bases: list[str]
    _cores: dict[tuple, EnvCore]
    _favour: list[str]
    _fav_base: dict[str, str]
    _bases: list[str]
    _plan_names: list[list[str]]
    _lookahead_scores: np.ndarray

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
            stack = self._candidates(main, w, incumbent, rng, policies, isolating, of_base, fav)  # (K, C, P)
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

    def _candidates(
        self,
        main: EnvCore,
        w: Any,
        incumbent: np.ndarray,
        rng: np.random.Generator,
        policies: dict[str, Any],
        isolating: dict[str, Any],
        of_base: dict[str, Any],
        fav: list[str],
    ) -> np.ndarray:
        """(K, C, P) the splits one decision of :meth:`_lookahead` weighs: the fixed candidates' (``policies``, in
        their order), the incumbent, its perturbations up to ``k``, the isolating plans' and the weighted plans'
        (each its base's split); ``w`` is ``main``'s routing context."""
        cands = [pol(w, main.last_result) for pol in policies.values()]
        cands.append(incumbent)
        cands += self._perturb(main, incumbent, self.k - len(cands), rng)
        cands += [pol(w, main.last_result) for pol in isolating.values()]
        if fav:  # every weighted plan runs its base's split (burst-lp+bg, on{base}'s): each computed once
            base_split = {b: pol(w, main.last_result) for b, pol in of_base.items()}
            cands += [base_split[self._fav_base[name]] for name in fav]
        return np.stack(cands)

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
        from ainet_gym.agents.predictive_router import PredictiveRouter

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
