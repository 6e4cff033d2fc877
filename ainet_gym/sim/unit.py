"""A compiled unit (:class:`CompiledUnit`): one job or background source compiled on a fabric, its phases,
flows, members, connections and candidate paths as arrays ready for stacking
(:func:`~ainet_gym.sim.stack.stack_units`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ainet_gym.scenario.spec import BackgroundSpec

__all__ = ["NO_PATH", "CompiledUnit"]


@dataclass
class CompiledUnit:
    """One job (or background source) compiled on a fabric: arrays ready for stacking."""

    name: str
    is_background: bool
    gpus: np.ndarray  # (gpus,) GPU ids of the ranks, rank order
    compute_s: float
    overlap: float
    start_s: float
    phase_latency_s: np.ndarray  # (phases,) alpha terms of each phase
    phase_npred: np.ndarray  # (phases,) phases each phase waits for (0: it starts with the communication)
    phase_succ_off: np.ndarray  # (phases+1,) CSR offsets into phase_succ
    phase_succ: np.ndarray  # (edges,) phases that wait for each phase (unit-local ids)
    flow_phase: np.ndarray  # (flows,) phase index within the unit
    flow_bytes: np.ndarray  # (flows,) bytes each member moves (inf for background)
    flow_demand_bytes_per_s: np.ndarray  # (flows,) per-flow rate cap (inf for job flows)
    member_flow: np.ndarray  # (members,) flow index, sorted
    member_conn: np.ndarray  # (members,) connection index
    conn_src: np.ndarray  # (conns,) source endpoint
    conn_dst: np.ndarray  # (conns,) destination endpoint
    conn_key: np.ndarray  # (conns,) int64 stable id for ECMP hashing
    conn_paths: np.ndarray  # (conns, max_paths, max_hops) link ids, -1 padded
    conn_npaths: np.ndarray  # (conns,) number of candidate paths
    bg_spec: BackgroundSpec | None = None
    # (flows,) routing.reroute new_transfers: the flow (unit-local) whose transfer in flight a carry flow
    # takes over at a decision boundary, -1 for the flows themselves; None: no carry flows
    flow_parent: np.ndarray | None = None
    # routing.split_flows independent: (members,) the one candidate path a member may take (-1: every
    # candidate path, NO_PATH: none, a flow whose parts carry its bytes); None: every member takes every path
    member_path: np.ndarray | None = None
    # (flows,) routing.split_flows independent: the flow (unit-local) a part flow carries a share of, -1 for
    # the flows themselves; None: no part flows
    flow_part_of: np.ndarray | None = None
    # routing.reroute_held_bytes: the bytes each path part may keep on its old path when it loses share in
    # flight (0: none, and no held parts). With it > 0, each part flow has a *held part* (a part flow too,
    # whose member_path is max_paths + its path: it takes that path at coefficient 1, whatever the split)
    held_bytes: float = 0.0
    # routing.reroute_held_weight: "one", a held part's coefficient is 1; "part", the fraction its part had
    # before the split change that handed it bytes (BatchSplit._hold)
    held_weight: str = "one"
    # routing.part_share: "fraction", a part flow of fraction f has coefficient f and all its flow's bytes;
    # "per_part", coefficient 1 where f > 0 and f of the bytes (BatchSplit._hand_parts)
    part_share: str = "fraction"
    # routing.reroute_held_parts: "all", every part that loses share holds bytes; "queued", only one bottlenecked
    # on a saturated switch link of its old path at the boundary (BatchSplit._queued_parts)
    held_parts: str = "all"
    # (phases,) routing.ring_run_ahead_bytes: the segments of the ring phase a phase is one of (its flows
    # move 1/segments of the ring's bytes per hop), 1 for every other phase; None: no ring was cut
    phase_segments: np.ndarray | None = None
    # the share weight of the unit's flows at its start (JobSpec.share_weight; BatchSim.set_share_weights)
    share_weight: float = 1.0
    # routing.ring_window_bytes (with split_flows independent): the NCCL window of the unit's rings' sub-flows,
    # bytes per hop (sim.ring_window); 0: none
    ring_window_bytes: float = 0.0
    # (phases,) routing.ring_window_bytes: the alpha steps of each phase (a ring step is the phase's bytes per
    # hop / its steps); None without a window
    phase_steps: np.ndarray | None = None
    # routing.ring_window_chunk_bytes: the window's upstream bound in whole chunks of this many bytes (0: not rounded)
    ring_window_chunk_bytes: float = 0.0

    @property
    def n_phases(self) -> int:
        return int(self.phase_latency_s.shape[0])


#: :attr:`CompiledUnit.member_path` of a member that takes no path (a flow whose part flows carry its bytes)
NO_PATH = -2
