"""The merged incidence entries of a structure (:class:`EntryTable`): every (member, path, hop) candidate merged
by (flow, link) once per restack, so that a new split costs one gather and one bincount (numpy) or one pass per
instance on the kernel threads (numba)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ainet_gym.sim import records as _records
from ainet_gym.sim.backends.numba import records as _nb_records
from ainet_gym.sim.backends.numba import threads as _threads

__all__ = ["EntryTable"]


@dataclass
class EntryTable:
    """The candidate incidence entries of every (member, path, hop), merged by (flow, link) once per structure
    (:meth:`BatchSim.set_units`), so that a new split costs one gather and one bincount (numpy) or one pass
    per instance on the kernel threads (numba), with no sort per step. A *segment* is one merged (flow, link)
    entry; a *candidate* one (member, path, hop) that adds to it."""

    cand_gather: np.ndarray  # (candidates,) index into split.ravel() of each candidate, segment order
    cand_seg: np.ndarray  # (candidates,) the segment it adds to
    seg_flow: np.ndarray  # (segments,) flow of each segment, sorted (so by instance)
    seg_link: np.ndarray  # (segments,) global link id (instance * links + link)
    seg_lperm: np.ndarray  # (segments,) the segments in link order (numpy allocator)
    inst_seg: np.ndarray  # (batch+1,) first segment of each instance
    seg_cand: np.ndarray  # (segments+1,) first candidate of each segment
    seg_coef: np.ndarray  # (segments,) bytes on the link per byte of the flow under the split (numba)
    e_flow_buf: np.ndarray  # (segments,) nonzero entries of each instance, compacted from inst_seg[b] (numba)
    e_link_buf: np.ndarray  # (segments,) their links
    e_coef_buf: np.ndarray  # (segments,) their coefficients
    ent_hi: np.ndarray  # (batch,) one past each instance's last compacted entry on a shared link
    link_excl: np.ndarray  # (batch * links,) bool: a link no two flows of its instance cross (numba solver)
    seg_excl: np.ndarray  # (segments,) bool: the segment's link is exclusive (link_excl of seg_link)
    ex_lo: np.ndarray  # (batch,) first exclusive entry of each instance (they end at inst_seg[b + 1])
    fe_lo: np.ndarray  # (flows,) first shared entry of each flow
    fe_hi: np.ndarray  # (flows,) one past its last
    seg_row: np.ndarray  # (segments,) connection whose whole row the segment sums in path order (-1: none)
    inst_conn: np.ndarray  # (batch+1,) first connection of each instance
    conn_npaths: np.ndarray  # (connections,) candidate paths of each connection
    rowsum_buf: np.ndarray  # (connections,) each connection's split row summed in path order (numba merge)
    inst_flow: np.ndarray  # (batch+1,) first flow of each instance
    ranges: list[tuple[int, int]]  # instance ranges the kernel threads take in turn
    _merge_record: object = field(default=None, init=False, repr=False, compare=False)  # (numba merge)

    @property
    def n_seg(self) -> int:
        return int(self.seg_flow.shape[0])

    def merge_record(self) -> object:
        """The compiled merge record of this table's arrays (:class:`~ainet_gym.sim.records.MergeTable`), the
        argument of :func:`ainet_gym.sim.backends.numba.merge.merge_range` after the split; built once (the arrays are
        fixed until the next restack builds a new table; the merge writes its outputs in place)."""
        if self._merge_record is None:
            self._merge_record = _nb_records.compiled_record("merge", _records.merge_table(self))
        return self._merge_record

    @classmethod
    def build(
        cls, member_paths: np.ndarray, member_flow: np.ndarray, member_conn: np.ndarray, inst_flow: np.ndarray,
        max_paths: int, batch: int, n_links: int, conn_npaths: np.ndarray, inst_conn: np.ndarray,
    ) -> EntryTable:  # fmt: skip
        """From each member's candidate paths (members, paths, hops) of global link ids (-1: padding), the
        candidate paths of each connection and the first connection of each instance."""
        mask = member_paths >= 0
        mi, pi, _ = np.nonzero(mask)
        flow = member_flow[mi]
        link = member_paths[mask]
        gather = member_conn[mi] * max_paths + pi  # index into split.ravel()
        key = flow * (batch * n_links) + link
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.concatenate(([True], key[1:] != key[:-1])) if key.size else np.zeros(0, dtype=bool)
        cand_seg = np.cumsum(first) - 1
        n_seg = int(first.sum())
        seg_flow = flow[order][first]
        seg_link = link[order][first]
        inst_seg = np.searchsorted(seg_flow, inst_flow).astype(np.int64)
        cand_gather = gather[order]
        seg_cand = np.searchsorted(cand_seg, np.arange(n_seg + 1)).astype(np.int64)
        # a segment that sums one connection's whole split row in path order (a NIC link every path of the
        # connection crosses): the numba merge takes the row's sum, computed once per connection
        n_cand = np.diff(seg_cand)
        first = cand_gather[seg_cand[:-1]] if n_seg else np.zeros(0, dtype=np.int64)
        conn = first // max_paths
        steps = (np.diff(cand_gather) == 1) & (cand_seg[1:] == cand_seg[:-1])  # consecutive, same segment
        in_order = np.bincount(cand_seg[1:][steps], minlength=n_seg) == n_cand - 1
        whole = (first == conn * max_paths) & (n_cand == conn_npaths[conn]) if n_seg else in_order
        seg_row = np.where(in_order & whole, conn, -1).astype(np.int64)
        link_excl = np.bincount(seg_link, minlength=batch * n_links) <= 1
        n_flows = int(inst_flow[-1]) if inst_flow.size else 0
        return cls(
            cand_gather=cand_gather,
            cand_seg=cand_seg,
            seg_flow=seg_flow,
            seg_link=seg_link,
            seg_lperm=np.argsort(seg_link, kind="stable"),
            inst_seg=inst_seg,
            seg_cand=seg_cand,
            seg_coef=np.zeros(n_seg),
            e_flow_buf=np.zeros(n_seg, dtype=np.int64),
            e_link_buf=np.zeros(n_seg, dtype=np.int64),
            e_coef_buf=np.zeros(n_seg),
            ent_hi=inst_seg[:-1].copy(),
            link_excl=link_excl,
            seg_excl=link_excl[seg_link],
            ex_lo=inst_seg[1:].copy(),
            fe_lo=np.zeros(n_flows, dtype=np.int64),
            fe_hi=np.zeros(n_flows, dtype=np.int64),
            inst_flow=np.asarray(inst_flow, dtype=np.int64),
            seg_row=seg_row,
            inst_conn=np.asarray(inst_conn, dtype=np.int64),
            conn_npaths=np.asarray(conn_npaths, dtype=np.int64),
            rowsum_buf=np.zeros(conn_npaths.shape[0]),
            # segments per instance: a proxy for the work of its interval
            ranges=_threads.batch_ranges(np.diff(inst_seg) + 1, _threads.kernel_threads()),
        )
