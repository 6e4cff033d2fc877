"""Imitation of a lookahead over the plans of a ``choose`` mode: labels, then behaviour cloning.

The clairvoyant twin (:mod:`ainet_gym.agents.twin`) finds, on ``spine-leaf-2to1-jitter``, a gain over the
best baseline of the ``jobs+bg`` class that switching plans at the right intervals reaches (docs/learning.md).
This package asks whether a policy can learn *when*:

1. :func:`lookahead_labels` plays each episode along a receding-horizon lookahead restricted to the plans of
   the action mode (``choose_bg``: ``ecmp``, ``spray+bg``, ``wcmp+bg``, ``greedy+bg``, ``lp+bg``,
   ``solo-lp+bg``): at each decision every plan runs one interval on a copy of the true state
   (:meth:`~ainet_gym.envs.env.EnvCore.snapshot`), then ``H - 1`` intervals of a base policy
   (``spray+bg``, the best plan played alone there), all ``B x K`` copies in one batched core; the plan whose
   jobs did the most ideal work (:meth:`ainet_gym.envs.env.EnvCore.job_progress`) is the label of that
   decision and is played. It records the observation the policy would have seen (with the env's
   ``obs_features``), the label, every plan's score and the interval's reward.
2. :func:`behaviour_clone` fits the policy network of a PPO model (the network ``ainet-gym train`` builds)
   to the labels by weighted cross-entropy (weights: inverse square root of each plan's frequency) and
   its value network to the discounted returns of the labelled trajectories, and saves it as a model of
   ``ainet-gym train`` (metadata included): ``evaluate ppo:PATH`` plays it, ``train --resume PATH``
   continues it with PPO.

The lookahead sees the future (it simulates on copies of the true state), so its labels are a target, never
a policy of the class. Command line::

    python -m ainet_gym.agents.imitate label spine-leaf-2to1-jitter --seeds 2000000-2000039 --out train.npz
    python -m ainet_gym.agents.imitate clone train.npz --val val.npz --out bc.zip --epochs 60
    python -m ainet_gym.agents.imitate knn train.npz --k 5 --out knn.npz   # evaluate knn:knn.npz
    python -m ainet_gym.agents.imitate qfit train.npz --hidden 64,64 --out q.npz   # evaluate qnet:q.npz

3. :func:`fit_knn` / :class:`KnnAgent` (``knn:PATH`` in ``evaluate``): the plan the ``k`` labelled decisions
   nearest in the observation's ``job_phase`` block were given, a non-parametric imitation that reads only
   the observation (what the network of 2 does not learn to isolate from the other 2,300 inputs). With
   ``--vote value`` (:data:`KNN_VOTES`) the plan of the best mean lookahead value over the neighbours
   (:func:`knn_values`), a cost-sensitive imitation: the siblings of ``spine-leaf-2to1-jitter`` where the
   majority vote closes under half of the twin's gap and this closes more (docs/learning.md).

One module per concern (issue 31 item 3), ``ainet_gym.agents.imitate.<module>``; this one defines nothing
and re-exports their public names:

- ``labels``: the lookahead's labels (:func:`lookahead_labels`, :func:`pick_label`, :func:`p99_step_ratio`)
- ``clone``: behaviour cloning into a PPO model (:func:`behaviour_clone`)
- ``features``: the observation columns a plan model reads, the env it plays in, the previous-plan block
- ``knn_file``: the knn policy file: its fields, written and read back checked (:func:`load_knn`)
- ``knn_fit``: the k-NN policy fitted to labels, the value vote's values (:func:`fit_knn`, :func:`knn_values`)
- ``agent``: ``knn:PATH``, the agent that plays a knn file (:class:`KnnAgent`), registered on import
- ``dagger``: a saved policy as the label player, DAgger (:func:`label_player`)
- ``label_files``: label files read and joined (:data:`LABEL_FIELDS`), their fabric fingerprint checked
  (:data:`FABRIC_FIELD`)
- ``cli``: ``python -m ainet_gym.agents.imitate label|clone|knn|qfit`` (:func:`main`)
"""

from __future__ import annotations

from ainet_gym.agents.imitate.agent import KnnAgent
from ainet_gym.agents.imitate.cli import main
from ainet_gym.agents.imitate.clone import behaviour_clone
from ainet_gym.agents.imitate.dagger import label_player
from ainet_gym.agents.imitate.features import (
    DEFAULT_PREVIOUS_PLAN_SCALE,
    PREVIOUS_PLAN,
    check_plan_model,
    extra_plans_of,
    knn_columns,
    plan_one_hot,
    previous_plans,
    split_previous_plan,
)
from ainet_gym.agents.imitate.knn_file import DEFAULT_FALLBACK, KNN_FIELDS, KNN_META, KNN_OPTIONAL, load_knn
from ainet_gym.agents.imitate.knn_fit import DEFAULT_K, KNN_VOTES, fit_knn, knn_values
from ainet_gym.agents.imitate.label_files import FABRIC_FIELD, LABEL_FIELDS
from ainet_gym.agents.imitate.labels import (
    DEFAULT_BASE,
    DEFAULT_H,
    DEFAULT_OBJECTIVE,
    DEFAULT_TAIL_SLACK,
    DEFAULT_TAIL_WEIGHT,
    OBJECTIVES,
    TIE_RTOL,
    lookahead_labels,
    p99_step_ratio,
    pick_label,
)

__all__ = [
    "DEFAULT_BASE",
    "DEFAULT_FALLBACK",
    "DEFAULT_H",
    "DEFAULT_K",
    "DEFAULT_OBJECTIVE",
    "DEFAULT_PREVIOUS_PLAN_SCALE",
    "DEFAULT_TAIL_SLACK",
    "DEFAULT_TAIL_WEIGHT",
    "FABRIC_FIELD",
    "KNN_FIELDS",
    "KNN_META",
    "KNN_OPTIONAL",
    "KNN_VOTES",
    "LABEL_FIELDS",
    "OBJECTIVES",
    "PREVIOUS_PLAN",
    "TIE_RTOL",
    "KnnAgent",
    "behaviour_clone",
    "check_plan_model",
    "extra_plans_of",
    "fit_knn",
    "knn_columns",
    "knn_values",
    "label_player",
    "load_knn",
    "lookahead_labels",
    "main",
    "p99_step_ratio",
    "pick_label",
    "plan_one_hot",
    "previous_plans",
    "split_previous_plan",
]
