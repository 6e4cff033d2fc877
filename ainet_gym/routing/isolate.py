"""The isolating plans ``isolate0+bg`` ... ``isolate7+bg`` (:data:`ISOLATE_PLANS`): the job of one job slot
on one path for an interval, everything else sprayed over the others; plans a ``choose`` mode may add, not
baselines."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.routing.oblivious import spray_all

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext
    from ainet_gym.routing.policies import Policy

__all__ = [
    "ISOLATE_PLANS",
    "isolate_slot_all",
]


def isolate_slot_all(world: RoutingContext, last: LastInterval | None, slot: int) -> np.ndarray:
    """``isolate{slot}+bg``: the connections of the job in job slot ``slot`` each on its first live candidate
    path alone, and every other connection (the other jobs', the background's) sprayed evenly over its live
    paths but its first one (over all of them if it has only one); an instance whose slot is empty, or
    beyond the world's job slots, plays ``spray+bg``. Class ``jobs+bg``.

    On a two-tier spine-leaf fabric the candidate paths of every leaf-to-leaf connection are ordered by
    spine, so the plan partitions the spines: the job alone on the first spine, the rest of the traffic on
    the others. With S spines and a job whose ring hops leave every leaf at NIC rate, its rate falls to
    about 1/S of its sprayed rate when it communicates alone, and every other job runs on S - 1 spines
    without it: a way to hold one job back (or to keep it out of the others' way) for one interval, which the
    lookahead over plans uses to set the jobs' phases apart on ``spine-leaf-4to1-jitter`` (docs/learning.md,
    "issue-26z"). Alone for a whole episode it is a poor policy (the note gives its scores), so it is a plan of
    the ``choose`` modes (``extra_plans``), not a baseline.
    """
    sim = world.sim
    assert sim is not None
    live = world.live_paths()
    J = world.job_unit.shape[1]
    unit = world.job_unit[:, slot] if 0 <= slot < J else np.full(world.batch, -1)
    inst = sim.unit_inst[sim.conn_unit]
    has = (unit >= 0)[inst]  # (connections,) the connection's instance has a job in the slot
    mine = has & (sim.conn_unit == unit[inst])
    P = world.max_paths
    first = np.arange(P)[None, :] == np.argmax(live, axis=1)[:, None]  # the first live path
    others = live & ~first
    rest = np.where(others.any(axis=1)[:, None], others, live)
    out = np.where(mine[:, None], first & live, np.where(has[:, None], rest, live)).astype(np.float64)
    total = out.sum(axis=1, keepdims=True)
    spray = spray_all(world, last)  # rows without a live path: as spray+bg routes them
    return np.where(total > 0, out / np.maximum(total, 1e-300), spray)


#: the isolating plans (:func:`isolate_slot_all`) of job slots 0-7: name -> policy; plans a ``choose`` mode
#: may add (``EnvCore(extra_plans=...)``, :data:`ainet_gym.routing.plans.EXTRA_PLANS`), not baselines
ISOLATE_PLANS: dict[str, Policy] = {f"isolate{j}+bg": partial(isolate_slot_all, slot=j) for j in range(8)}
