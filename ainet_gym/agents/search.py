"""Direct policy search over the plans of a ``choose`` mode, scored on the closed-loop episode (issue-26zs).

The imitation students of the lookahead (``knn:PATH``, ``qnet:PATH``) are fitted to labels and never scored on
the objective they are judged by, which on ``ingest-bursts`` includes the tail (p99 step time / ideal). Here a
small parametric policy is fitted to that objective directly:

- **The policy** (:func:`plan_scores`): a linear scorer over a few observation blocks (``job_phase``,
  ``background``, ``episode_progress`` by default: the columns the k-NN students read) and a subset of the
  env's plans; each interval it plays the plan of the highest score. The first plan of the subset is the
  reference, score 0; the others have a weight per column and a bias (``theta``, ``(K - 1, D + 1)``).
- **The score** (:func:`candidate_score`): over a batch of training episodes, the mean GPU utilisation minus
  ``tail_weight`` times the excess of the fraction of job-iterations whose step time / ideal is above a
  threshold over ``tail_target``; the threshold is the pooled p99 of a static plan (``tail_plan``, e.g.
  ``favour0+bg``) on the same episodes, so the score asks for that plan's tail.
- **The search** (:func:`cem_search`): the cross-entropy method (diagonal Gaussian over ``theta``); every
  candidate of a generation plays the same training seeds (common random numbers), all in one batch of one
  :class:`~ainet_gym.envs.env.EnvCore`, beside the static ``tail_plan`` and ``mean_plan`` rows and the current
  mean; each generation draws fresh seeds.
- **A gate over a base policy** (issue-26zt): with ``base`` (a policy string, ``dps:PATH`` or ``knn:PATH``)
  and the reserved first plan :data:`BASE_PLAN`, the reference is the base policy's pick and the scorer only
  decides where another plan (``favour0+bg``) overrides it (score > 0); the search starts at "never override"
  (weights 0, bias ``init_bias`` < 0) and logs the base alone as a static row. ``antithetic`` draws the
  samples in mirrored pairs (mean +- std * eps) on the same episodes.
- **The file and the agent**: :func:`save_search_policy` / :func:`load_search_policy` (a plain .npz, read with
  ``allow_pickle=False``), :class:`SearchAgent` (``dps:PATH`` in ``evaluate``; class of its env's plans,
  ``jobs+bg+weights`` with a weighted plan).

Train::

    python -m ainet_gym.agents.search ingest-bursts --plans favour2+bg,favour0+bg,lp+bg,solo-lp+bg \\
        --episodes 16 --population 24 --elite 6 --generations 20 --seed 0 --out runs/dps-s0
    ainet-gym evaluate ingest-bursts --policies dps:runs/dps-s0/final.npz,favour2+bg,favour0+bg --seeds 100-109

Modules: this one is the agent (:class:`SearchAgent`, ``dps:PATH``) and the command line; the rest lives in
modules of one concern, whose public names it re-exports (the same objects): :mod:`ainet_gym.agents.search_score`
(the configuration, the scorer, the scores), :mod:`ainet_gym.agents.search_rollout` (the env side),
:mod:`ainet_gym.agents.search_cem` (the search) and :mod:`ainet_gym.agents.search_files` (the file).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ainet_gym.agents.search_cem import cem_search
from ainet_gym.agents.search_files import SEARCH_BASE as SEARCH_BASE
from ainet_gym.agents.search_files import SEARCH_FIELDS as SEARCH_FIELDS
from ainet_gym.agents.search_files import SEARCH_META as SEARCH_META
from ainet_gym.agents.search_files import load_search_policy, save_search_policy
from ainet_gym.agents.search_rollout import block_width, make_base, plan_index
from ainet_gym.agents.search_rollout import make_core as make_core
from ainet_gym.agents.search_rollout import rollout as rollout
from ainet_gym.agents.search_score import (
    BASE_PLAN,
    SearchConfig,
    candidate_score,
    floor_score,
    plan_scores,
    pooled_tail,
)
from ainet_gym.agents.search_score import mean_floor as mean_floor

__all__ = [
    "SearchAgent",
    "SearchConfig",
    "candidate_score",
    "cem_search",
    "floor_score",
    "load_search_policy",
    "plan_scores",
    "pooled_tail",
    "save_search_policy",
]


class SearchAgent:
    """``dps:PATH``: a linear plan scorer fitted by direct policy search (:func:`cem_search`), acting in the
    ``choose`` mode of its file with its observation blocks and extra plans (class of the env's plans). A
    learned policy: it reads only the observation. A gate (a file with a ``base``) plays its base agent's
    action where no other plan scores above 0, in the base's env."""

    level = "action"
    learned = True

    def __init__(self, path: str) -> None:
        z = load_search_policy(path)
        self.theta, self.plans, self.block = z["theta"], z["plans"], z["block"]
        self.scenario, self.metadata = z["scenario"], z["metadata"]
        self.fabric = z["fabric"]  # the fabric searched on; None: not known, not checked
        self.path = path
        self.name = "dps"
        self.env_kwargs: dict[str, Any] = {"action_mode": z["action_mode"]}
        if z["obs_features"]:
            self.env_kwargs["obs_features"] = z["obs_features"]
        if z["extra_plans"]:
            self.env_kwargs["extra_plans"] = z["extra_plans"]
        self._actions: np.ndarray | None = None
        self.base = None if z["base"] is None else make_base(z["base"])
        if self.base is not None:
            self.env_kwargs = dict(self.base.env_kwargs)

    def check(self, core: Any) -> None:
        """Refuse an env of another scenario or fabric (the file's ``fabric``, if it has one), without the file's
        plans or with another block width."""
        from ainet_gym.agents.imitate import knn_columns
        from ainet_gym.agents.model_files import check_played_fabric

        label = f"dps:{self.path}"
        if core.scenario.name != self.scenario:
            raise ValueError(
                f"{label}: fitted on scenario {self.scenario!r}, evaluated on {core.scenario.name!r}"
            )
        check_played_fabric(
            label, self.fabric, getattr(core, "fabric", None), "the fabric it was searched on",
            "the scenario it was searched on (the same links and capacities), or search again on this fabric",
        )  # fmt: skip
        try:
            self._actions = plan_index(core, self.plans)
            width = block_width(core, knn_columns(core.obs_layout, self.block))
        except ValueError as e:
            raise ValueError(f"{label}: {e}") from None
        if width != self.theta.shape[1] - 1:
            raise ValueError(
                f"{label}: field 'theta' reads {self.theta.shape[1] - 1} columns; the block has {width}"
            )
        if self.base is not None:
            self.base.check(core)

    def reset(self, core: Any) -> None:
        if self.base is not None:
            self.base.reset(core)

    def act(self, core: Any, obs: Any) -> np.ndarray:
        """(batch,) the env action of the plan of the highest score (ties: the earlier plan of the file)."""
        from ainet_gym.agents.imitate import knn_columns

        if self._actions is None:
            self._actions = plan_index(core, self.plans)
        x = np.asarray(obs, dtype=np.float64)[:, knn_columns(core.obs_layout, self.block)]
        a = self._actions[np.argmax(plan_scores(self.theta, x), axis=1)]
        if self.base is not None:
            a = np.where(a >= 0, a, np.asarray(self.base.act(core, obs), dtype=np.int64))
        return a.astype(np.int64)


def _register() -> None:
    from ainet_gym.agents.registry import register_agent

    register_agent(
        "dps",
        SearchAgent,
        needs_arg=True,
        arg_help="PATH",
        description="linear plan scorer fitted by direct policy search (CEM) on the closed-loop score",
        overwrite=True,
    )


_register()


def _tuple(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def build_parser() -> argparse.ArgumentParser:
    """``python -m ainet_gym.agents.search``'s arguments (:class:`SearchConfig`'s fields)."""
    d = SearchConfig()
    p = argparse.ArgumentParser(prog="python -m ainet_gym.agents.search", description=__doc__.split("\n")[0])
    p.add_argument("scenario")
    p.add_argument("--out", required=True, help="folder: log.jsonl, gen-G.npz, final.npz")
    for name, kind in (("plans", _tuple), ("extra_plans", _tuple), ("obs_features", _tuple), ("block", str),
                       ("tail_plan", str), ("mean_plan", str), ("tail_weight", float), ("tail_target", float),
                       ("first_seed", int), ("episodes", int), ("population", int), ("elite", int),
                       ("generations", int), ("init_std", float), ("min_std", float), ("init_bias", float),
                       ("seed", int), ("episode_steps", int), ("base", str), ("score", str),
                       ("floor_z", float)):  # fmt: skip
        v = getattr(d, name)
        shown = ",".join(v) if isinstance(v, tuple) else v
        p.add_argument("--" + name.replace("_", "-"), type=kind, default=v, help=f"default {shown}")
    p.add_argument("--antithetic", action="store_true", help="mirrored pairs of samples")
    p.add_argument("--checkpoints", type=lambda s: tuple(int(x) for x in s.split(",") if x), default=())
    return p


def main(argv: list[str] | None = None) -> int:
    """Run :func:`cem_search` from the command line; print one line per generation."""
    a = vars(build_parser().parse_args(argv))
    out = a.pop("out")
    cfg = SearchConfig(**a)

    def show(rec: dict) -> None:
        m = rec["mean_policy"]
        print(
            f"gen {rec['generation']:3d} mean util {m['util']:.4f} p99 {m['p99']:.3f} frac {m['frac']:.4f} "
            f"score {m['score']:.4f} gain {m['gain']:+.4f} | best {rec['best_sample']['score']:.4f} "
            f"elite {rec['elite_score']:.4f} | {cfg.tail_plan} p99 {rec['tau']:.3f} floor {rec['floor']:.4f} | std {rec['std']:.3f} "
            f"cpu {rec['cpu_s']:.0f}s"
            + (
                f" | base util {rec[BASE_PLAN]['util']:.4f} score {rec[BASE_PLAN]['score']:.4f}"
                if cfg.base
                else ""
            )
            + f" | picks {m['picks']}",
            flush=True,
        )

    cem_search(cfg, out, show)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
