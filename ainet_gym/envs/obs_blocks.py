"""The observation blocks computed in Python by both paths of the observation (the numpy one,
:mod:`ainet_gym.envs.observation`, and the compiled one, :mod:`ainet_gym.envs.obs_compiled`):
:class:`ObservationBlocks` writes the slot block (rebuilt only when the slot demand changes), the background
block, the optional blocks (``obs_features``: the phase block, :meth:`~ObservationBlocks.job_phase_features`)
and the graph view. Like every base class of :class:`~ainet_gym.envs.core.EnvCore`, it reads the core's state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ainet_gym.arrays import safe_divide
from ainet_gym.envs.obs_layout import SLOT_FEATURES, squash
from ainet_gym.envs.slots import SlotMaps
from ainet_gym.sim.world import FabricWorld, StepResult

__all__ = [
    "ObservationBlocks",
]


class ObservationBlocks:
    """The blocks of the observation both paths compute in Python (see the module doc)."""

    P: int
    _demand_cache: tuple | None
    _sim: Callable[[], Any]
    _slot_maps: Callable[[], SlotMaps]
    _slot_obs_cache: tuple | None
    batch: int
    history: int
    n_bg: int
    n_slots: int
    net_links: np.ndarray
    obs_features: tuple[str, ...]
    obs_layout: dict[str, slice]
    world: FabricWorld

    def _optional_blocks(self, obs: np.ndarray) -> None:
        """Write the optional blocks (``obs_features``) into ``obs`` (batch, obs_dim) in place."""
        blocks = {"phase": self.job_phase_features}
        for name in self.obs_features:
            obs[:, self.obs_layout[f"job_{name}"]] = blocks[name]().reshape(self.batch, -1)

    def job_phase_features(self) -> np.ndarray:
        """(B, J, 3) float64 each job slot's position in its iteration at this decision, from the
        simulator's state, in units of the job's ideal iteration (:attr:`ideal_step_s`), each clipped to
        [0, 1] (0 for an empty slot); the ``phase`` block of ``obs_features``:

        - ``to_comm``: time until the job's next communication starts (0 while it communicates): the
          compute left before it (``(1 - overlap) * compute`` after a job that waits for its start,
          ``start_ms``, starts, or after the current iteration ends);
        - ``comm_left``: bytes left in the current iteration's communication over its total bytes (1
          before it starts, 0 once it is done);
        - ``comm_time_left``: ``comm_left`` times the job's ideal communication time
          (:attr:`ideal_comm_s`): the communication left, at full speed.

        A job that starts computing at time 0 with compute time C and no overlap has, at a decision at
        time t < C, ``to_comm = (C - t) / ideal``, ``comm_left = 1``, ``comm_time_left = ideal_comm / ideal``.
        """
        from ainet_gym.sim.state import PRE_COMM, WAITING

        w = self.world
        sim = self._sim()
        st = sim.state
        ju = w.job_unit
        alive = ju >= 0
        u = np.maximum(ju, 0)
        pc = st.phase_cur[u]
        compute = sim.unit_compute[u]
        first_comm = (1.0 - sim.unit_overlap[u]) * compute  # from an iteration's start to its communication
        to_comm = np.where(
            pc == WAITING,
            st.t_start_left[u] + first_comm,
            np.where(
                pc == PRE_COMM,
                st.t_comm_start_left[u],
                np.where(pc < sim.unit_nphases[u], 0.0, st.t_compute_left[u] + first_comm),
            ),
        )
        jf = sim.job_flows
        left = np.bincount(sim.flow_unit[jf], weights=st.rem[jf], minlength=sim.n_units)
        total = np.bincount(sim.flow_unit[jf], weights=sim.flow_bytes[jf], minlength=sim.n_units)
        frac = safe_divide(left, total, np.zeros_like(left))[u]
        ideal = np.where(alive, w.job_ideal_step_s, 1.0)
        comm = np.where(alive, np.nan_to_num(w.job_ideal_comm_s), 0.0)
        out = np.stack([to_comm / ideal, frac, frac * comm / ideal], axis=-1)
        return np.where(alive[..., None], np.clip(out, 0.0, 1.0), 0.0)

    def _background_features(self, res: StepResult | None) -> np.ndarray:
        """(batch, background sources * 2) the background block of the observation: each source on during
        the interval just run (0 where none ran: after a reset, or a reset copy that stood still in the
        step), and on in the next one."""
        w = self.world
        sim = w.sim
        assert sim is not None
        on = sim.state.bg_on[w.bg_unit]  # (batch, sources)
        bf = np.zeros((self.batch, self.n_bg, 2))
        if res is not None:
            bf[..., 0] = np.where((res.duration_s > 0)[:, None], on, 0.0)
        bf[..., 1] = on
        return bf.reshape(self.batch, -1)

    def _slot_features(self) -> np.ndarray:
        """(batch, slots * 3) float32 slot block of the observation; valid while the slot demand is (the same
        flows and slot layout), so rebuilt only when a reset or churn changes them."""
        maps = self._slot_maps()
        demand = self._slot_demand() if self.n_slots else None
        cache = self._slot_obs_cache
        if cache is not None and cache[0] is demand and cache[1] is maps.mask:
            return cache[2]
        sf = np.zeros((self.batch, self.n_slots, len(SLOT_FEATURES)))
        sf[..., 0] = maps.mask
        if demand is not None:
            sf[..., 1] = squash(demand)
            sf[..., 2] = maps.npaths / self.P
        out = sf.reshape(self.batch, -1).astype(np.float32)
        self._slot_obs_cache = (demand, maps.mask, out)
        return out

    def _slot_demand(self) -> np.ndarray:
        """(batch, slots): offered bytes of each slot's connection in one interval over its NIC's capacity."""
        from ainet_gym.routing.loads import connection_demand

        w = self.world
        sim = w.sim
        assert sim is not None
        # valid while the flows (the same flow_bytes array) and the slot layout are: holding the arrays
        # themselves, not their id(), so a new array at a recycled address cannot match
        slot_conn = self._slot_maps().conn
        cache = self._demand_cache
        if cache is not None and cache[0] is sim.flow_bytes and cache[1] is slot_conn:
            return cache[2]
        d = connection_demand(w, background_on=True)  # background slots (split_bg): their nominal demand
        has = slot_conn >= 0
        if not has.any():
            out = np.zeros(slot_conn.shape)
        else:
            c = np.maximum(slot_conn, 0)
            nic = w.fabric.capacity_bytes_per_s[w.fabric.endpoint_up[sim.conn_src[c]]]
            out = np.where(has, d[c] / (nic * w.decision_interval_s), 0.0)
        self._demand_cache = (sim.flow_bytes, slot_conn, out)
        return out

    def _graph_obs(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        w = self.world
        f = w.fabric
        sim = w.sim
        assert sim is not None
        B = self.batch
        n_nodes = len(f.node_names)
        kinds = ("gpu", "storage", "nvswitch", "switch")
        nf = np.zeros((B, n_nodes, 4), dtype=np.float32)
        for i, k in enumerate(f.node_kind):
            nf[:, i, kinds.index(k) if k in kinds else 3] = 1.0
        ef = np.zeros((B, f.n_links, self.history + 1), dtype=np.float32)
        ef[:, self.net_links, : self.history] = np.minimum(self.state.util_hist, 1.0).transpose(0, 2, 1)
        ef[:, :, self.history] = sim.engine_state.capacity_bytes_per_s / f.capacity_bytes_per_s
        ei = np.broadcast_to(np.stack([f.link_src, f.link_dst]), (B, 2, f.n_links)).astype(np.float32)
        return {"flat": flat, "node_features": nf, "edge_index": ei.copy(), "edge_features": ef}
