"""The split side of :class:`~ainet_gym.sim.batch.BatchSim` (:class:`BatchSplit`, its base class): the split of
every connection and its merged incidence entries (by the backend's strategy, or a compiled pass fused with the
interval), the carry flows of ``routing.reroute: new_transfers`` and the part flows of ``routing.split_flows:
independent``."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from ainet_gym.fabric.topology import Fabric
from ainet_gym.sim.backends.base import Pending, SimBackend
from ainet_gym.sim.backends.numba import threads as _threads
from ainet_gym.sim.entries import EntryTable
from ainet_gym.sim.ring_window import WINDOW_MAX_SOLVES, RingWindow, WindowSolve, build_ring_window
from ainet_gym.sim.stack import UnitStack
from ainet_gym.sim.state import RUNNING, EngineState, SimState

__all__ = ["SATURATED_TOL", "SPLIT_TOL", "BatchSplit"]


#: routing.split_flows independent: a connection's split row changed when a fraction moved by more than this
SPLIT_TOL = 1e-12
#: routing.reroute_held_parts queued: a link is saturated when its load is within this fraction of its capacity,
#: and a flow is bottlenecked there when its level is within this fraction of the link's largest
SATURATED_TOL = 1e-9


class BatchSplit:
    """The split side of :class:`~ainet_gym.sim.batch.BatchSim`: it holds no state of its own and reads the
    simulation's, the attributes annotated here, which ``BatchSim.__init__`` and
    :meth:`~ainet_gym.sim.batch_units.BatchUnits.set_units` set."""

    # set by BatchSim.__init__, BatchSim._bind (the structure's fields) and BatchUnits
    batch: int
    fabric: Fabric
    n_links: int
    strategy: SimBackend
    backend: str
    table: EntryTable
    _entries: tuple[np.ndarray, ...] | None
    _e_lperm: np.ndarray | None
    _pending: Pending | None
    state: SimState
    engine_state: EngineState
    carry_flows: np.ndarray
    flow_unit: np.ndarray
    flow_bytes: np.ndarray
    flow_bg: np.ndarray
    flow_demand: np.ndarray
    flow_parent: np.ndarray
    flow_gphase: np.ndarray
    member_flow: np.ndarray
    member_conn: np.ndarray
    member_path: np.ndarray
    conn_paths_global: np.ndarray
    conn_npaths: np.ndarray
    conn_unit: np.ndarray
    unit_inst: np.ndarray
    inst_flow: np.ndarray
    n_flows: int
    n_conns: int
    rate_updates: str
    rate_quantum_s: float

    def _bind_parts(self, stack: UnitStack) -> None:
        """The part flows of ``routing.split_flows: independent`` (none otherwise): each part's flow, the flow
        whose bytes it carries a share of, its connection, its path and its group (the parts of one flow on
        one connection). (The bytes each flow starts an iteration with and the split the parts were handed
        their bytes under are engine state, :attr:`EngineState.flow_reset
        <ainet_gym.sim.state.EngineState.flow_reset>` and ``part_split``.)"""
        parts = np.flatnonzero(stack.flow_part_of >= 0)
        P = self.fabric.max_paths
        held = stack.member_path[np.searchsorted(stack.member_flow, parts)] >= P  # a part has one member
        # routing.reroute_held_bytes: the held parts, one per part in the same order (split_parts), and the
        # bytes each may hold
        self.held = parts[held]
        self.parts = parts[~held]
        self.held_cap = stack.unit_held_bytes[stack.flow_unit[self.held]]
        # routing.reroute_held_weight part: the held parts whose coefficient is their part's old fraction
        self.held_part = stack.unit_held_part[stack.flow_unit[self.held]]
        # routing.reroute_held_parts queued: the held parts that hold only where their part was queued (None: none)
        queued = stack.unit_held_queued[stack.flow_unit[self.held]]
        self.held_queued = queued if queued.any() else None
        self._held_ones = np.ones((stack.n_conns, P)) if self.held.size else None
        # routing.part_share per_part: the connections whose part flows weigh 1 (where their path has a share)
        # and carry their fraction of the bytes (None: every part at its fraction, the default)
        one = stack.unit_part_one[stack.conn_unit]
        self._conn_one = one if one.any() else None
        self.part_own_links: tuple[np.ndarray, np.ndarray] | None = None
        self.ring_window: RingWindow | None = None
        if not hasattr(self, "window_unsettled"):
            self.window_unsettled = 0  # routing.ring_window_bytes: events whose fixed point did not settle
            self.window_solves = 0  # and the max-min solves its fixed points took, over the simulation
        if not self.parts.size:
            return
        first = np.searchsorted(stack.member_flow, self.parts)
        self.part_parent = stack.flow_part_of[self.parts]
        self.part_conn = stack.member_conn[first]
        self.part_path = stack.member_path[first]
        self.part_group = np.cumsum(self.part_path == 0) - 1  # a group's parts are its paths 0, 1, ...
        self.part_own_links = self._own_links(stack) if self.held_queued is not None else None
        if self.held.size:
            hf = np.searchsorted(stack.member_flow, self.held)
            if not (
                self.held.size == self.parts.size
                and np.array_equal(stack.flow_part_of[self.held], self.part_parent)
                and np.array_equal(stack.member_conn[hf], self.part_conn)
                and np.array_equal(stack.member_path[hf] - P, self.part_path)
            ):
                raise RuntimeError("_bind_parts: the held parts are not one per part in the parts' order")
        self._bind_window(stack)

    def _bind_window(self, stack: UnitStack) -> None:
        """``routing.ring_window_bytes``: the ring hops of the units with a window and their parts
        (:func:`~ainet_gym.sim.ring_window.build_ring_window`), or None; refused on a backend without it
        (``SimBackend.ring_window``), with held parts, ``rate_updates: phase`` or a rate quantum, each naming the
        field, the value and what is allowed (``part_share: per_part`` runs, issue-27zzy)."""
        if not (stack.unit_ring_window > 0).any():
            return
        w = float(stack.unit_ring_window.max())
        field = f"routing.ring_window_bytes = {w:g}"
        if not self.strategy.ring_window:
            raise ValueError(
                f"{field}: backend {self.backend!r} does not run the ring window; allowed: the numpy backend "
                "(AINET_GYM_BACKEND=numpy, or backend='numpy'), or routing.ring_window_bytes: null"
            )
        bad = [
            (self.rate_updates != "event", f"rate_updates = {self.rate_updates!r}", "rate_updates 'event'"),
            (self.rate_quantum_s > 0, f"a rate quantum of {self.rate_quantum_s:g} s", "rate_quantum_s 0"),
            (bool(stack.unit_held_bytes[stack.unit_ring_window > 0].any()), "held parts "
             "(routing.reroute_held_bytes > 0)", "routing.reroute_held_bytes 0"),
            (any(u.bg_spec is not None and u.bg_spec.upstream == "demand" for u in stack.flat_units),
             "a background source with upstream 'demand'", "workload.background[].upstream 'share'"),
        ]  # fmt: skip
        for is_bad, what, need in bad:
            if is_bad:
                raise ValueError(f"{field} with {what}: allowed: {need}, or routing.ring_window_bytes: null")
        self.ring_window = build_ring_window(
            stack.unit_ring_window, stack.flow_unit, stack.flow_inst, stack.flow_gphase, stack.flow_bytes,
            stack.phase_steps, stack.conn_src, stack.conn_dst, self.parts, self.part_parent, self.part_conn,
            self.part_path, stack.unit_ring_chunk, stack.unit_part_one,
        )  # fmt: skip

    def note_window(self, ws: WindowSolve) -> None:
        """After an interval with a ring window: add its counters to the simulation's (:attr:`window_unsettled`,
        :attr:`window_solves`) and warn when an event's fixed point did not settle."""
        self.window_solves += ws.solves
        if ws.unsettled:
            self.window_unsettled += ws.unsettled
            warnings.warn(
                f"routing.ring_window_bytes: {ws.unsettled} events whose window caps did not settle in "
                f"{WINDOW_MAX_SOLVES} solves (largest relative residual kept {ws.worst:.3g}); "
                f"{self.window_unsettled} in this simulation",
                RuntimeWarning,
                stacklevel=3,
            )

    def _own_links(self, stack: UnitStack) -> tuple[np.ndarray, np.ndarray]:
        """``routing.reroute_held_parts: queued``: (parts, hops) the global links of each part's path in hop
        order (-1 padded), and whether each is the part's own, a link that not every candidate path of its
        connection crosses (a switch link, where a sub-flow's backlog is its own; a connection's NIC links
        carry all its paths)."""
        paths = stack.conn_paths_global[self.part_conn]  # (parts, P, hops)
        hops = paths[np.arange(self.part_conn.shape[0]), self.part_path]  # (parts, hops)
        on_q = (hops[:, None, :, None] == paths[:, :, None, :]).any(axis=-1)  # (parts, P, hops)
        cand = np.arange(paths.shape[1])[None, :] < stack.conn_npaths[self.part_conn][:, None]
        on_all = (on_q | ~cand[:, :, None]).all(axis=1)
        return hops, (hops >= 0) & ~on_all

    def _queued_parts(self, split: np.ndarray) -> np.ndarray | None:
        """``routing.reroute_held_parts: queued``, at a split change (before the new split's entries replace the
        old ones): (parts,) whether each part's first bottleneck along its path, in the max-min allocation at
        the boundary, is a link that not every candidate path of its connection crosses (:meth:`_own_links`):
        where a TCP sub-flow would have its bytes queued (a flow queues at the first link it saturates; the
        links after it receive at that rate; a connection's NIC links carry all its paths, so what waits there
        is not one path's). A part bottlenecked nowhere (not moving, or unconstrained) is not queued. The
        allocation is solved by
        the backend's solver over the old split's merged entries, the flows then moving (a job flow whose phase
        runs with its latency paid and bytes left, a background flow switched on) and the capacities the
        engine holds (the new interval's: the dynamics have advanced). A link is saturated when its load is
        within :data:`SATURATED_TOL` of its capacity; a flow is bottlenecked there when its level (rate /
        share weight) is within it of the largest level on the link. None when no unit asks for it, no split
        has been handed to the parts yet, or ``split`` (the new one) changes no fraction of the old."""
        es = self.engine_state
        if self.held_queued is None or self.part_own_links is None or es.part_split is None:
            return None
        if not (np.abs(np.asarray(split, dtype=np.float64) - es.part_split) > SPLIT_TOL).any():
            return None
        e_flow, e_link, e_coef = self.e_flow, self.e_link, self.e_coef  # the old split's (merge_pending)
        st = self.state
        ready = np.append((st.phase_state == RUNNING) & (st.phase_lat_left <= 0), False)
        moving = np.where(self.flow_bg, st.bg_on[self.flow_unit], ready[self.flow_gphase] & (st.rem > 0))
        sel = moving[e_flow]
        act = np.flatnonzero(moving)
        compact = np.cumsum(moving) - 1
        w = (
            None
            if es.unit_weight is None
            else np.asarray(es.unit_weight, dtype=np.float64)[self.flow_unit[act]]
        )
        cap = np.asarray(es.capacity_bytes_per_s, dtype=np.float64).reshape(-1)
        ef, el, ec = compact[e_flow[sel]], e_link[sel], e_coef[sel]
        rates = np.asarray(
            self.strategy.solve_entries(ef, el, ec, cap, act.shape[0], w, self.flow_demand[act], None),
            dtype=np.float64,
        )
        level = rates if w is None else rates / w
        load = np.bincount(el, weights=ec * rates[ef], minlength=cap.shape[0])
        saturated = np.isfinite(cap) & (load >= cap * (1.0 - SATURATED_TOL))
        top = np.zeros(cap.shape[0])
        np.maximum.at(top, el, level[ef])
        lev = np.zeros(self.n_flows)
        lev[act] = level
        hops, own = self.part_own_links
        lk = np.maximum(hops, 0)
        part_lev = lev[self.parts][:, None]
        at = (hops >= 0) & saturated[lk] & (part_lev > 0) & (part_lev >= top[lk] * (1.0 - SATURATED_TOL))
        first = np.argmax(at, axis=1)  # the first bottleneck hop (0 where none: masked below)
        return at.any(axis=1) & own[np.arange(own.shape[0]), first]

    def _hand_parts(self, split: np.ndarray, queued: np.ndarray | None = None) -> None:
        """Hand each transfer's bytes to its part flows under ``split`` (``routing.split_flows:
        independent``): a flow's own remainder (its bytes at the start) goes to every part whose path has a
        share; on a connection whose split row changed (``reroute: in_flight``), the bytes its parts have
        left (each part's remainder times its old share, summed) are handed out again under the new row,
        as the replay moves a connection's unsent bytes; the other parts keep their remainders. A part whose
        path has no share starts each iteration with nothing (``engine_state.flow_reset``). With
        ``routing.reroute_held_bytes``, a part that loses share keeps some of its bytes on its old path first,
        in its held part (:meth:`_hold`), and only the rest is handed out again.

        ``routing.part_share: per_part``: a part's remainder is its bytes on its path (not its connection's),
        so the bytes a group has left are its parts' remainders summed, and a part of fraction f is handed f of
        the group's bytes (and f of its flow's bytes at each iteration's start).

        ``queued`` (``routing.reroute_held_parts: queued``, :meth:`_queued_parts`): (parts,) the parts that may
        hold bytes in the units that ask for it; None: every part that loses share may."""
        p = self.parts
        if not p.size:
            return
        st, es = self.state, self.engine_state
        c, q, par, g = self.part_conn, self.part_path, self.part_parent, self.part_group
        f_new = np.asarray(split, dtype=np.float64)[c, q]
        rem = st.rem[p]
        n_g = int(g[-1]) + 1
        one = None if self._conn_one is None else self._conn_one[c]  # routing.part_share per_part
        if es.part_split is None:  # no earlier split known: each group's least advanced part
            left = np.zeros(n_g)
            np.maximum.at(left, g, np.where(one, 0.0, rem) if one is not None else rem)
            if one is not None:  # per_part: a part's remainder is its bytes on its path
                left += np.bincount(g, weights=np.where(one, rem, 0.0), minlength=n_g)
            changed = np.ones(n_g, dtype=bool)
        else:
            f_old = es.part_split[c, q]
            on_path = f_old * rem if one is None else np.where(one, rem, f_old * rem)
            left = np.bincount(g, weights=on_path, minlength=n_g)
            changed = np.bincount(g, weights=np.abs(f_new - f_old) > SPLIT_TOL, minlength=n_g) > 0
        own = np.zeros(n_g)
        own[g] = st.rem[par]  # a flow's own remainder, handed to its parts
        if self.held.size and es.part_split is not None:  # routing.reroute_held_bytes
            left = np.maximum(left - self._hold(f_old, f_new, on_path, changed & (own == 0), queued), 0.0)
        changed |= own > 0
        left += own
        if one is None:
            st.rem[p] = np.where(changed[g], np.where(f_new > 0, left[g], 0.0), rem)
            es.flow_reset[p] = np.where(f_new > 0, self.flow_bytes[par], 0.0)
        else:  # per_part: a part of fraction f carries f of the bytes
            scale = np.where(one, f_new, (f_new > 0) * 1.0)
            st.rem[p] = np.where(changed[g], scale * left[g], rem)
            es.flow_reset[p] = scale * self.flow_bytes[par]
        st.rem[par] = 0.0
        es.flow_reset[par] = 0.0
        es.part_split = np.array(split, dtype=np.float64)

    def _hold(
        self,
        f_old: np.ndarray,
        f_new: np.ndarray,
        on_path: np.ndarray,
        changed: np.ndarray,
        queued: np.ndarray | None = None,
    ) -> np.ndarray:
        """``routing.reroute_held_bytes`` at a split change in flight (:meth:`_hand_parts`): each part of a
        ``changed`` group whose path loses share (``f_new < f_old``), in a phase moving its bytes (running,
        latency paid), keeps min(room, its bytes on the path) on that path as its held part's bytes, where its
        bytes on the path (``on_path``) are ``f_old x rem`` (``rem`` under ``routing.part_share: per_part``)
        and room is the held bytes less what its held part still holds
        (a part's held bytes never exceed the setting). Returns (groups,) the bytes each group's parts kept,
        which the re-split does not hand out again. With ``routing.reroute_held_weight: part`` the held parts
        weigh ``engine_state.held_weight`` (:meth:`_reweigh_held`). With ``routing.reroute_held_parts: queued``
        only the parts ``queued`` (:meth:`_queued_parts`) of the units that ask for it hold (the others' bytes
        are all re-split)."""
        st = self.state
        ph = self.flow_gphase[self.part_parent]
        moving = (st.phase_state[ph] == RUNNING) & (st.phase_lat_left[ph] <= 0)
        loses = changed[self.part_group] & moving & (f_new < f_old - SPLIT_TOL)
        if self.held_queued is not None and queued is not None:  # routing.reroute_held_parts queued
            loses &= queued | ~self.held_queued
        hw = self.engine_state.held_weight
        w = None if hw is None else np.where(self.held_part, hw[self.part_conn, self.part_path], 1.0)
        held_now = st.rem[self.held] if w is None else st.rem[self.held] * w  # bytes on the path
        room = np.maximum(self.held_cap - held_now, 0.0)
        keep = np.where(loses, np.minimum(room, on_path), 0.0)
        if w is None:
            st.rem[self.held] += keep
        else:
            self._reweigh_held(w, held_now, keep, f_old)
        return np.bincount(self.part_group, weights=keep, minlength=int(self.part_group[-1]) + 1)

    def _reweigh_held(self, w: np.ndarray, held_now: np.ndarray, keep: np.ndarray, f_old: np.ndarray) -> None:
        """``routing.reroute_held_weight: part`` (:meth:`_hold`): every (connection, path) on which a held part
        of a ``part`` unit is handed bytes (``keep`` > 0) now weighs ``f_old``, the fraction its path had
        before this change (> 0, as the path lost share), and the held parts of those (connection, path)s
        store their bytes (``held_now`` + ``keep``, bytes on the path) as bytes / that weight: a held part
        still carries exactly its held bytes, at the rate a part of that fraction gets. Elsewhere nothing
        changes (``w``: each held part's weight before)."""
        es, st = self.engine_state, self.state
        c, q = self.part_conn, self.part_path
        hw = np.array(es.held_weight, dtype=np.float64)
        new = self.held_part & (keep > 0)
        hw[c[new], q[new]] = f_old[new]  # parts of one (connection, path) share its old fraction
        es.held_weight = hw
        w_new = np.where(self.held_part, hw[c, q], 1.0)
        moved = (keep > 0) | (w_new != w)
        st.rem[self.held] = np.where(moved, (held_now + keep) / w_new, st.rem[self.held])

    def member_share(self) -> np.ndarray | None:
        """(members,) the share of its flow's moved bytes each member carries on its connection: the part
        flows' path fractions under the current split (``routing.split_flows: independent``), 1 elsewhere;
        None without part flows (every member carries all of its flow's)."""
        if not self.parts.size:
            return None
        out = np.ones(self.member_flow.shape[0])  # a held part carries its bytes at coefficient 1 ...
        first = np.searchsorted(self.member_flow, self.parts)
        out[first] = np.asarray(self._coefficients(self.engine_state.split), dtype=np.float64)[
            self.part_conn, self.part_path
        ]  # routing.part_share per_part: 1 where the path has a share (the part's bytes are its path's)
        hw = self.engine_state.held_weight
        if (
            hw is not None
        ):  # ... or, routing.reroute_held_weight part, at its (connection, path)'s held weight
            hm = np.searchsorted(self.member_flow, self.held)
            out[hm] = np.where(self.held_part, hw[self.part_conn, self.part_path], 1.0)
        return out

    # ------------------------------------------------------------------ routing
    def _build_entry_table(self) -> None:
        member_paths = self.conn_paths_global[self.member_conn]  # (members, paths, hops)
        P = self.fabric.max_paths
        mp = self.member_path
        held = mp >= P  # routing.reroute_held_bytes: a held part takes path mp - P, at coefficient 1
        if (mp != -1).any():  # routing.split_flows independent: a part takes its one path, its flow none
            q = np.where(held, mp - P, mp)
            take = (q[:, None] == -1) | (q[:, None] == np.arange(P)[None, :])
            member_paths = np.where(take[:, :, None], member_paths, -1)
        if held.any():  # the split rows are [split | ones] (2 P columns), a held member's are P..2P-1
            wide = np.full((member_paths.shape[0], 2 * P, member_paths.shape[2]), -1, dtype=np.int64)
            wide[~held, :P] = member_paths[~held]
            wide[held, P:] = member_paths[held]
            member_paths, P = wide, 2 * P
        elif self.engine_state.pinned is not None:
            # carry flows take their connection's pinned split: the engine's split rows are [split | pinned]
            # (2 P columns), a carry member's candidates are columns P..2P-1, every other member's 0..P-1
            carry = self.flow_parent[self.member_flow] >= 0
            wide = np.full((member_paths.shape[0], 2 * P, member_paths.shape[2]), -1, dtype=np.int64)
            wide[~carry, :P] = member_paths[~carry]
            wide[carry, P:] = member_paths[carry]
            member_paths, P = wide, 2 * P
        self.table = EntryTable.build(
            member_paths, self.member_flow, self.member_conn, self.inst_flow,
            P, self.batch, self.n_links, self.conn_npaths,
            np.searchsorted(self.unit_inst[self.conn_unit], np.arange(self.batch + 1)),
        )  # fmt: skip

    def carry_over(self) -> None:
        """A decision boundary under ``routing.reroute: new_transfers`` (call it before the next interval's
        :meth:`set_split`): every transfer in flight keeps the split it started with. A job flow whose
        phase has started and that has bytes left hands them to its carry flow, which carries them on its
        connections' current split rows, pinned until it has delivered them; the flow itself is free for
        its next transfer, which takes the split of the interval in which it starts. A carry flow already
        in flight keeps its pinned rows. (Compiled jobs have carry flows only under ``new_transfers``; a
        stage pipeline, whose concurrent phases may share a connection, is refused by the loader.)"""
        es = self.engine_state
        if es.pinned is None:
            return
        st = self.state
        g = self.carry_flows
        f = self.flow_parent[g]
        moving = (st.rem[f] > 0) & (st.phase_state[self.flow_gphase[f]] == RUNNING)
        carrying = st.rem[g] > 0  # carried since an earlier boundary: keep their pins
        member_carry = self.flow_parent[self.member_flow] >= 0
        pin_of = np.full(self.n_flows, -1, dtype=np.int64)  # (flows,) 1: keep the pin, 2: pin the split
        pin_of[g[carrying]] = 1
        pin_of[g[moving]] = 2
        m = np.flatnonzero(member_carry)
        how = pin_of[self.member_flow[m]]
        keep_c = np.unique(self.member_conn[m[how == 1]])
        new_c = np.unique(self.member_conn[m[how == 2]])
        if np.intersect1d(keep_c, new_c).size:  # concurrent phases on one connection (not compiled)
            raise RuntimeError(
                "carry_over: a connection carries transfers that started in different intervals"
            )
        pinned = np.zeros_like(es.pinned)
        pinned[keep_c] = es.pinned[keep_c]
        pinned[new_c] = es.split[new_c]
        es.pinned = pinned
        st.rem[g[moving]] = st.rem[f[moving]]
        st.rem[f[moving]] = 0.0

    def set_split(self, split: np.ndarray | None) -> None:
        """Set the split (connections, max_paths) of every connection; None = first path only.

        Duplicate (flow, link) entries (a NIC link shared by every path of a connection, the hops of a
        ring on one link) are merged: their coefficients add, by the backend's strategy
        (:meth:`~ainet_gym.sim.backends.base.SimBackend.merge_split`). On the numba backend the merge runs when the
        entries are next needed (the next interval, or a read of them: :meth:`merge_pending`), so a split
        that another replaces first (a restack's, before the env sets its own) costs nothing; ``split`` must
        not be changed in place before then.
        """
        if split is None:
            split = np.zeros((self.n_conns, self.fabric.max_paths))
            split[:, 0] = 1.0
        queued = self._queued_parts(split)  # routing.reroute_held_parts queued: on the old split's entries
        self._pending = None
        self.engine_state.split = split
        self._hand_parts(split, queued)
        self._merge_split()

    def _merge_split(self) -> None:
        """The merged entries of the engine state's split (and pinned splits), by the backend's strategy."""
        self._e_lperm = None
        self._entries = None
        es = self.engine_state
        split = self._coefficients(es.split)
        if es.pinned is not None:  # rows [split | pinned] (see _build_entry_table)
            split = np.concatenate([np.asarray(split, dtype=np.float64), es.pinned], axis=1)
        elif self._held_ones is not None:  # rows [split | ones]: held parts (routing.reroute_held_bytes)
            # (routing.reroute_held_weight part: [split | held_weight], each held part at its held weight)
            held = self._held_ones if es.held_weight is None else es.held_weight
            split = np.concatenate([np.asarray(split, dtype=np.float64), held], axis=1)
        # the backend merges now (numpy) or leaves a pass for the interval's kernel threads (numba)
        self._entries, self._pending = self.strategy.merge_split(self.table, split)

    def _coefficients(self, split: np.ndarray) -> np.ndarray:
        """The coefficients the split rows give their members: ``split`` itself, except on the connections of
        ``routing.part_share: per_part`` units, where a path with a share weighs 1 (its part flow carries that
        share of the bytes, :meth:`_hand_parts`) and a path without one 0."""
        if self._conn_one is None:
            return split
        s = np.asarray(split, dtype=np.float64)
        return np.where(self._conn_one[:, None], (s > 0) * 1.0, s)

    def set_split_fused(
        self, kernel: Callable[..., object], args: tuple, out: np.ndarray, defer: bool = False
    ) -> None:
        """Set the split (connections, max_paths) that the compiled ``kernel`` writes into ``out`` (C-contiguous
        float64), instance range by instance range, merging each instance's entries in the same pass (the
        numba backend; the result is that of :meth:`set_split` with the same split).

        ``kernel(lo, hi, *args, out, table, go)`` (``table``: the entry table's compiled merge record,
        :meth:`EntryTable.merge_record`; ``go``: the kernel threads' flags) must call :func:`ainet_gym.sim.backends.numba.crew.announce` on ``go`` first, write the rows of
        ``out`` of the connections of the instances ``lo:hi`` and then call
        :func:`ainet_gym.sim.backends.numba.merge.merge_range` on them (with ``out.reshape(-1)`` as the split); it must
        release the GIL (ranges run on the kernel threads).

        ``defer=True`` leaves the pass to the next :meth:`run_interval`, which runs it for each instance
        range just before that range's interval, on the same thread: one hand-off to the kernel threads
        per interval instead of two (each costs tens of microseconds). Anything that reads the split or
        its entries before then runs the pass first (:meth:`merge_pending`).
        """
        if not self.strategy.fused_split:
            raise ValueError(
                f"set_split_fused: backend {self.backend!r}; needs one with fused splits ('numba')"
            )
        if self.engine_state.pinned is not None:
            raise ValueError(
                "set_split_fused: the units have carry flows (routing.reroute new_transfers); use set_split"
            )
        if self.parts.size:
            raise ValueError(
                "set_split_fused: the units have part flows (routing.split_flows independent); use set_split"
            )
        if out.shape != (self.n_conns, self.fabric.max_paths) or not out.flags.c_contiguous:
            raise ValueError(
                f"out: shape {out.shape}, expected C-contiguous {(self.n_conns, self.fabric.max_paths)}"
            )
        self.engine_state.split = out
        self._e_lperm = None
        self._entries = None
        table, go = self.table.merge_record(), _threads.go_flags()

        def args_of(lo: int, hi: int) -> tuple:
            return (lo, hi, *args, out, table, go)

        self._pending = (kernel, args_of)
        if not defer:
            self.merge_pending()

    def merge_pending(self) -> None:
        """Run the pass of a deferred :meth:`set_split_fused` now (nothing if none is pending)."""
        if self._pending is None:
            return
        kernel, args_of = self._pending
        self._pending = None
        _threads.run_ranges(kernel, self.table.ranges, args_of)

    def _entry_table(self) -> tuple[np.ndarray, ...]:
        """(e_flow, e_link, e_coef, keep): the nonzero merged entries of the split, sorted by flow, and the
        mask of the segments they come from."""
        self.merge_pending()
        if self._entries is None:
            t = self.table
            keep = t.seg_coef > 0
            self._entries = (t.seg_flow[keep], t.seg_link[keep], t.seg_coef[keep], keep)
        return self._entries

    @property
    def e_flow(self) -> np.ndarray:
        """(entries,) flow of each incidence entry of the split (sorted by flow, so by instance)."""
        return self._entry_table()[0]

    @property
    def e_link(self) -> np.ndarray:
        """(entries,) global link id (``instance * links + link``) of each incidence entry."""
        return self._entry_table()[1]

    @property
    def e_coef(self) -> np.ndarray:
        """(entries,) > 0, bytes on the link per byte of the flow (split ratios summed over paths)."""
        return self._entry_table()[2]

    @property
    def inst_entry(self) -> np.ndarray:
        """(batch+1,) the entries of each instance (entries are sorted by flow, flows by instance)."""
        return np.searchsorted(self.e_flow, self.inst_flow).astype(np.int64)

    @property
    def e_lperm(self) -> np.ndarray:
        """(entries,) the incidence entries in link order (for the numpy allocator)."""
        if self._e_lperm is not None:
            return self._e_lperm
        keep = self._entry_table()[3]
        new_index = np.cumsum(keep) - 1
        perm = self.table.seg_lperm
        self._e_lperm = new_index[perm[keep[perm]]]
        return self._e_lperm
