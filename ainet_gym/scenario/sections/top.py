"""The scenario's top level: its keys and the workload's, and the rules of the two short sections that the
loader reads itself, ``routing`` (checked against the jobs in :mod:`ainet_gym.scenario.loader`) and ``reward``."""

from __future__ import annotations

from ainet_gym.scenario.rules import LIMITS, Rule, enum_rule, int_rule, num_rule
from ainet_gym.scenario.spec import (
    PART_SHARES,
    REROUTE_HELD_PARTS,
    REROUTE_HELD_WEIGHTS,
    REROUTE_MODES,
    REWARD_KINDS,
    RING_WINDOW_SIDES,
    SPLIT_FLOWS_MODES,
)

__all__ = ["REWARD_RULES", "ROUTING_RULES", "TOP_KEYS", "WORKLOAD_KEYS"]

TOP_KEYS = ("name", "description", "seed", "fabric", "workload", "dynamics", "routing", "reward")
WORKLOAD_KEYS = ("jobs", "background")

ROUTING_RULES: dict[str, Rule | None] = {
    "max_paths": int_rule("a number of paths", ge=1, le=LIMITS["max_paths_max"]),
    "qps_per_connection": int_rule("a number of QPs", ge=1, le=LIMITS["count_max"]),
    "reroute": enum_rule(REROUTE_MODES, "reroute mode"),
    "split_flows": enum_rule(SPLIT_FLOWS_MODES, "split flows mode"),
    "ring_run_ahead_bytes": num_rule(
        "a number of bytes per ring hop", ge=1, le=LIMITS["bytes_max"], null=True
    ),
    "reroute_held_bytes": num_rule(
        "a number of bytes per path part", ge=0, le=LIMITS["bytes_max"], note=" (0: none held)"
    ),
    "reroute_held_weight": enum_rule(REROUTE_HELD_WEIGHTS, "held part weight"),
    "part_share": enum_rule(PART_SHARES, "part share rule"),
    "reroute_held_parts": enum_rule(REROUTE_HELD_PARTS, "held parts rule"),
    "ring_window_bytes": num_rule("a number of bytes per ring hop", gt=0, le=LIMITS["bytes_max"], null=True),
    "ring_window_side": enum_rule(RING_WINDOW_SIDES, "ring window side"),
    "ring_window_chunk_bytes": num_rule(
        "a number of bytes per chunk", gt=0, le=LIMITS["bytes_max"], null=True
    ),
}
REWARD_RULES: dict[str, Rule | None] = {"kind": enum_rule(REWARD_KINDS, "reward kind")}
