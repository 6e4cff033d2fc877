"""The policies that read no load: static ECMP hashing (``ecmp``), even spraying over the live paths
(``spray``, ``spray+bg``) and capacity-weighted ECMP (``wcmp``, ``wcmp+bg``), with :func:`avoid_dead_paths`,
the withdrawal of the paths through a failed link. The jobs-only versions keep background on static ECMP."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.routing.loads import controlled_connections
from ainet_gym.routing.split import spray_split

if TYPE_CHECKING:
    from ainet_gym.routing.context import LastInterval, RoutingContext

__all__ = [
    "avoid_dead_paths",
    "ecmp",
    "spray",
    "spray_all",
    "wcmp",
    "wcmp_all",
]


def ecmp(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    return world.default_split()


def avoid_dead_paths(world: RoutingContext, split: np.ndarray) -> np.ndarray:
    """Zero the share of paths through a failed link and renormalise (``world.withdraw_dead``)."""
    return world.withdraw_dead(split)


def _jobs_only(world: RoutingContext, split: np.ndarray) -> np.ndarray:
    """``split`` on the jobs' connections (action slots), static ECMP on every other connection."""
    out = world.default_split()
    ctrl = controlled_connections(world)
    out[ctrl] = split[ctrl]
    return out


def spray_all(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """Even split of every connection, background included, over its live candidate paths."""
    sim = world.sim
    assert sim is not None
    return avoid_dead_paths(world, spray_split(sim.conn_npaths, world.max_paths))


def wcmp_all(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """Capacity-weighted ECMP of every connection, background included."""
    sim = world.sim
    assert sim is not None
    return world.wcmp(sim.engine_state.capacity_bytes_per_s)  # withdraws paths through failed links itself


def spray(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """Even split of the jobs' connections over their live paths; background on static ECMP."""
    return _jobs_only(world, spray_all(world, last))


def wcmp(world: RoutingContext, last: LastInterval | None) -> np.ndarray:
    """Capacity-weighted ECMP of the jobs' connections; background on static ECMP."""
    return _jobs_only(world, wcmp_all(world, last))
