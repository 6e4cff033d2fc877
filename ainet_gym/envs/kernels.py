"""Compiled (numba) pieces of the env side of a step, for the ``"numba"`` backend.

:meth:`ainet_gym.envs.env.EnvCore.decode` with the numpy backend is the reference; the kernel here does the
same floating-point operations in the same order, so the two agree bit for bit
(``tests/test_envspeed.py`` checks it). In particular the sum of a slot's path weights follows numpy's
pairwise summation of a contiguous row (:func:`_row_sum`), which is not a left-to-right sum from 8
elements on.
"""

from __future__ import annotations

import numpy as np

from ainet_gym.sim.kernels import njit

__all__ = ["PW_BLOCKSIZE", "decode_split"]

PW_BLOCKSIZE = 128  # rows up to this long only; numpy's pairwise-summation block (numpy/_core/src/umath/loops_utils.h.src)


@njit(cache=True, nogil=True)
def _row_sum(x, lo, n):  # pragma: no cover - compiled
    """``x[lo:lo + n].sum()`` as numpy computes it for a contiguous float64 row of at most
    :data:`PW_BLOCKSIZE` elements: a left-to-right sum below 8 elements, else eight interleaved partial
    sums combined as a tree, then the tail, added to the identity 0. (Longer rows are split in halves by
    numpy; a recursive kernel cannot be cached, so callers use numpy there.)"""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += x[lo + i]
        return res
    r0, r1, r2, r3 = x[lo], x[lo + 1], x[lo + 2], x[lo + 3]
    r4, r5, r6, r7 = x[lo + 4], x[lo + 5], x[lo + 6], x[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += x[lo + i]
        r1 += x[lo + i + 1]
        r2 += x[lo + i + 2]
        r3 += x[lo + i + 3]
        r4 += x[lo + i + 4]
        r5 += x[lo + i + 5]
        r6 += x[lo + i + 6]
        r7 += x[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += x[lo + i]
        i += 1
    return res


@njit(cache=True, nogil=True)
def decode_split(actions, ctrl, conns, npaths, default, out):  # pragma: no cover - compiled
    """Split ratios of ``split``-mode actions, written into ``out`` (connections, P).

    ``actions`` (rows, P) float64 in [-1, 1], one row per action slot of the batch, ``P <= PW_BLOCKSIZE``; ``ctrl`` (k,) the rows
    of the controllable slots, ``conns`` (k,) their connections, ``npaths`` (k,) their numbers of candidate
    paths; every other connection gets its ``default`` row. A controllable slot's weights are
    ``(a + 1) / 2`` over its valid paths, normalised by their sum (all zero: the even split).
    """
    out[:] = default
    P = actions.shape[1]
    r = np.empty(P)
    for k in range(ctrl.shape[0]):
        row = ctrl[k]
        n = npaths[k]
        for p in range(P):
            r[p] = (actions[row, p] + 1.0) / 2.0 if p < n else 0.0
        tot = _row_sum(r, 0, P)
        c = conns[k]
        if tot > 0:
            for p in range(P):
                out[c, p] = r[p] / tot
        else:
            for p in range(P):
                out[c, p] = (1.0 if p < n else 0.0) / n
    return out
