"""The merge of a split into the incidence entries of each instance, on its kernel thread."""

from __future__ import annotations

from ainet_gym.sim.backends.numba.crew import announce
from ainet_gym.sim.backends.numba.jit import njit

__all__ = ["merge_range"]


@njit(cache=True, nogil=True)
def merge_range(b_lo, b_hi, split_flat, table, go):  # pragma: no cover - compiled
    """Incidence entries of a split for the instances ``b_lo:b_hi``, written into the merge record ``table``
    (:class:`~ainet_gym.sim.records.MergeTable`, compiled: the arrays of the engine's entry table, whose
    fields are named below).

    The candidate (member, path, hop) coefficients ``split_flat[cand_gather[i]]`` of segment ``j`` (a
    merged (flow, link) pair) are ``i`` in ``seg_cand[j]:seg_cand[j + 1]``; their sum, from 0 in candidate
    order (as ``np.bincount`` adds), goes to ``seg_coef[j]``. Instance ``b``'s segments are
    ``inst_seg[b]:inst_seg[b + 1]``; its nonzero ones are written compacted from ``inst_seg[b]`` on in
    ``e_flow`` / ``e_link`` / ``e_coef`` (sorted by flow, as the segments are), and ``ent_hi[b]`` is one
    past the last, except those on a link that no other flow of the instance crosses (``seg_excl``), which
    are written from ``inst_seg[b + 1] - 1`` down to ``ex_lo[b]``; flow ``f``'s other entries are
    ``fe_lo[f]:fe_hi[f]`` (the flows of instance ``b`` are ``inst_flow[b]:inst_flow[b + 1]``). The interval
    folds the exclusive ones into demand caps (:func:`run_interval_numba`), and solves over the rest.
    Instances own disjoint ranges of every output, so threads may merge different ranges at the same time.

    A segment with ``seg_row[j] = c >= 0`` sums the whole row of connection ``c`` (its ``conn_npaths[c]``
    paths, in order, as a NIC link every path crosses does): it takes ``rowsum[c]``, that row summed from 0 in
    path order once per connection (the instance's connections are ``inst_conn[b]:inst_conn[b + 1]``), the
    same additions in the same order. ``go``: the kernel threads' flags (:func:`go_flags`), announced first.
    """
    announce(go)
    t = table
    seg_cand, cand_gather, seg_flow, seg_link = t.seg_cand, t.cand_gather, t.seg_flow, t.seg_link
    inst_seg, seg_coef, ent_hi, seg_row = t.inst_seg, t.seg_coef, t.ent_hi, t.seg_row
    e_flow, e_link, e_coef, rowsum = t.e_flow, t.e_link, t.e_coef, t.rowsum
    inst_conn, conn_npaths, seg_excl, inst_flow = t.inst_conn, t.conn_npaths, t.seg_excl, t.inst_flow
    ex_lo, fe_lo, fe_hi = t.ex_lo, t.fe_lo, t.fe_hi
    P = split_flat.shape[0] // max(conn_npaths.shape[0], 1)  # the split's row length (max_paths)
    for b in range(b_lo, b_hi):
        for k in range(inst_conn[b], inst_conn[b + 1]):  # each connection's row, summed once
            r = 0.0
            o = k * P
            for p in range(conn_npaths[k]):
                r += split_flat[o + p]
            rowsum[k] = r
        for f in range(inst_flow[b], inst_flow[b + 1]):
            fe_lo[f] = 0
            fe_hi[f] = 0
        n = inst_seg[b]  # the next shared entry, from the front
        x = inst_seg[b + 1]  # one past the last exclusive entry, from the back
        prev = -1
        for j in range(inst_seg[b], inst_seg[b + 1]):
            if seg_row[j] >= 0:
                c = rowsum[seg_row[j]]
            else:
                c = 0.0
                for i in range(seg_cand[j], seg_cand[j + 1]):
                    c += split_flat[cand_gather[i]]
            seg_coef[j] = c
            if c > 0:
                f = seg_flow[j]
                if seg_excl[j]:
                    x -= 1
                    e_flow[x] = f
                    e_link[x] = seg_link[j]
                    e_coef[x] = c
                else:
                    if f != prev:
                        fe_lo[f] = n
                        prev = f
                    e_flow[n] = f
                    e_link[n] = seg_link[j]
                    e_coef[n] = c
                    n += 1
                    fe_hi[f] = n
        ent_hi[b] = n
        ex_lo[b] = x
