"""Gymnasium registration of the ``ainet_gym/`` environments (one id per shipped scenario family)."""

from __future__ import annotations

import gymnasium as gym

__all__ = ["ENV_IDS", "register_envs"]

#: env id -> default scenario (overridable with ``gymnasium.make(id, scenario=...)``).
ENV_IDS: dict[str, str] = {
    "ainet_gym/SpineLeaf-v0": "spine-leaf-2to1",
    "ainet_gym/PeriodicInterference-v0": "periodic-interference",
    "ainet_gym/FatTree-v0": "fat-tree-k8-data-parallel",
    "ainet_gym/RailOptimized-v0": "rail-optimized-flat-ring",
    "ainet_gym/MultiTenant-v0": "multi-tenant-churn",
}


def register_envs() -> None:
    """Register every id of :data:`ENV_IDS` with ``entry_point`` and ``vector_entry_point``."""
    for env_id, scenario in ENV_IDS.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point="ainet_gym.envs.env:FabricRoutingEnv",
            vector_entry_point="ainet_gym.envs.vector_env:FabricRoutingVectorEnv",
            kwargs={"scenario": scenario},
            disable_env_checker=False,
        )
