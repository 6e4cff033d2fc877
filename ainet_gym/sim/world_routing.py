"""The routing of :class:`~ainet_gym.sim.world.FabricWorld` itself (:class:`WorldRouting`, its base class): the
static ECMP split of every connection from each instance's hash seed, WCMP from link weights, and the share of
paths through a failed link withdrawn to the live ones, as switches drop a failed port from their groups."""

from __future__ import annotations

import numpy as np

from ainet_gym.arrays import safe_divide
from ainet_gym.fabric.topology import Fabric
from ainet_gym.routing.split import ecmp_split, wcmp_split
from ainet_gym.scenario.spec import Scenario
from ainet_gym.sim.engine import BatchSim
from ainet_gym.sim.state import WorldState

__all__ = ["WorldRouting"]


class WorldRouting:
    """The routing side of :class:`~ainet_gym.sim.world.FabricWorld`: it holds no state of its own but a cache
    of the last ECMP split, and reads the world's, the attributes annotated here, which ``FabricWorld.__init__``
    sets."""

    scenario: Scenario
    batch: int
    fabric: Fabric
    max_paths: int
    state: WorldState
    sim: BatchSim | None
    # (conn_key, capacity array, hash seeds, dead links, ECMP split)
    _default_cache: tuple | None

    def default_split(self, copy: bool = True) -> np.ndarray:
        """Static ECMP split of every connection (connections, max_paths); ``copy=False`` returns the
        cached array itself, read-only.

        The hash seed of an instance is drawn from its generator at reset: the same episode seed gives
        the same hashing, different seeds sample the ECMP lottery. Like a switch that drops a dead next
        hop from its ECMP group, a connection with a failed link on some candidate paths hashes over its
        live paths only (all dead: unchanged, it stalls).
        """
        sim = self.sim
        assert sim is not None
        cached = self._default_cache
        seeds = self.state.hash_seed.tobytes()
        # valid while the connections (the same conn_key array), the hash seeds and the dead links are;
        # the capacity array is the engine's own while no capacity factor changes (see _advance_dynamics),
        # so the dead links are compared only when it is a new one
        cap = sim.engine_state.capacity_bytes_per_s
        if cached is not None and cached[0] is sim.conn_key and cached[1] is cap and cached[2] == seeds:
            return cached[4].copy() if copy else cached[4]
        dead = cap <= 0
        key = dead.tobytes() if dead.any() else b""
        if cached is not None and cached[0] is sim.conn_key and cached[2] == seeds and cached[3] == key:
            self._default_cache = (sim.conn_key, cap, seeds, key, cached[4])
            return cached[4].copy() if copy else cached[4]
        seed = self.state.hash_seed[sim.unit_inst[sim.conn_unit]] if sim.n_conns else 0
        qps = self.scenario.routing.qps_per_connection
        live = self.live_paths()
        n_live = live.sum(axis=1)
        split = ecmp_split(sim.conn_npaths, sim.conn_key, self.max_paths, qps, seed)
        hit = (n_live < sim.conn_npaths) & (n_live > 0)
        if hit.any():
            # hash onto the k-th live path: pick index among live ones, then map back
            pick = ecmp_split(
                n_live[hit], sim.conn_key[hit], self.max_paths, qps, seed if np.ndim(seed) == 0 else seed[hit]
            )
            rank = np.cumsum(live[hit], axis=1) - 1  # rank of each live path among live ones
            remap = np.zeros_like(pick)
            for k in range(self.max_paths):  # loop over path slots (max_paths), not over flows
                remap += np.where(live[hit] & (rank == k), pick[:, k : k + 1], 0.0)
            split[hit] = remap
        split.flags.writeable = False
        self._default_cache = (sim.conn_key, cap, seeds, key, split)
        return split.copy() if copy else split

    def wcmp(self, link_weight: np.ndarray) -> np.ndarray:
        """WCMP split of every connection (connections, max_paths) from per-instance link weights
        (batch, links): one call over the batch, with ECMP groups and link ids offset per instance."""
        sim = self.sim
        assert sim is not None
        g = self.fabric.link_group
        n_groups = int(g.max()) + 1 if g.size else 0
        offset = (np.arange(self.batch) * n_groups)[:, None]
        groups = np.where(g[None, :] >= 0, g[None, :] + offset, -1).reshape(-1)
        split = wcmp_split(
            sim.conn_paths_global, sim.conn_npaths, np.asarray(link_weight).reshape(-1), groups
        )
        return self.withdraw_dead(split)

    def withdraw_dead(self, split: np.ndarray) -> np.ndarray:
        """``split`` with the share of paths through a failed link (capacity 0) moved, pro rata, to the
        connection's live paths, as switches drop a failed port from their ECMP/WCMP groups (unchanged for
        a connection whose every path is dead, and when no link is down)."""
        sim = self.sim
        assert sim is not None
        if not (sim.engine_state.capacity_bytes_per_s <= 0).any():
            return split
        kept = np.where(self.live_paths(), split, 0.0)
        tot = kept.sum(axis=1, keepdims=True)
        return safe_divide(kept, tot, split)

    def live_paths(self) -> np.ndarray:
        """(connections, max_paths) bool: candidate paths whose links all have capacity > 0."""
        sim = self.sim
        assert sim is not None
        valid = np.arange(self.max_paths)[None, :] < sim.conn_npaths[:, None]
        dead = sim.engine_state.capacity_bytes_per_s.reshape(-1) <= 0
        if not dead.any():
            return valid
        dead = np.concatenate([dead, [False]])
        return valid & ~dead[sim.conn_paths_global].any(axis=2)
