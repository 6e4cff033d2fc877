"""The sections of a scenario, parsed and checked one by one, one module each: ``fabric`` (built-in topologies
and graphs, :mod:`.fabric`), ``workload.jobs`` with their collectives (:mod:`.jobs`), ``workload.background``
(:mod:`.background`), ``dynamics`` (link failures, job churn, :mod:`.dynamics`), and the top-level keys with the
rules of ``routing`` and ``reward`` (:mod:`.top`). Each parser takes the loader's context and the raw value and
returns the frozen specs of :mod:`ainet_gym.scenario.spec`; whether the whole scenario can run is
:mod:`ainet_gym.scenario.feasibility`'s question. This package defines nothing itself: it re-exports the
modules' public names (``ainet_gym.scenario.sections`` stays their import path).
"""

from __future__ import annotations

from ainet_gym.scenario.sections.background import BACKGROUND_RULES, parse_background
from ainet_gym.scenario.sections.dynamics import (
    DYNAMICS_RULES,
    FAILURE_TIERS,
    JOB_CHURN_RULES,
    LINK_FAILURE_RULES,
    LINK_NAME_RE,
    SCHEDULED_RULES,
    parse_dynamics,
)
from ainet_gym.scenario.sections.fabric import (
    FABRIC_COMMON_KEYS,
    FABRIC_RULES,
    STORAGE_RULES,
    TOPOLOGY_KEYS,
    fabric_leaf_count,
    parse_fabric,
)
from ainet_gym.scenario.sections.jobs import COLLECTIVE_RULES, JOB_RULES, SHARE_WEIGHT_MAX, parse_jobs
from ainet_gym.scenario.sections.top import REWARD_RULES, ROUTING_RULES, TOP_KEYS, WORKLOAD_KEYS

__all__ = [
    "BACKGROUND_RULES",
    "COLLECTIVE_RULES",
    "DYNAMICS_RULES",
    "FABRIC_COMMON_KEYS",
    "FABRIC_RULES",
    "FAILURE_TIERS",
    "JOB_CHURN_RULES",
    "JOB_RULES",
    "LINK_FAILURE_RULES",
    "LINK_NAME_RE",
    "REWARD_RULES",
    "ROUTING_RULES",
    "SCHEDULED_RULES",
    "SHARE_WEIGHT_MAX",
    "STORAGE_RULES",
    "TOPOLOGY_KEYS",
    "TOP_KEYS",
    "WORKLOAD_KEYS",
    "fabric_leaf_count",
    "parse_background",
    "parse_dynamics",
    "parse_fabric",
    "parse_jobs",
]
