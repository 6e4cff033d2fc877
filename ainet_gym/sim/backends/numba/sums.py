"""numpy's pairwise summation, compiled: sums bit for bit equal to the numpy backend's."""

from __future__ import annotations

import numpy as np

from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit

__all__ = ["block_sum", "gathered_row_sum", "pairwise_sum"]


@njit(nogil=True, error_model="numpy", **COMPILED_ONLY)
def block_sum(x, lo, n):  # pragma: no cover - compiled
    """``x[lo:lo + n].sum()`` as numpy computes it for a contiguous float64 run of ``n <= 128`` elements
    (numpy's pairwise block): left to right below 8 elements, else eight interleaved partial sums combined
    as a tree, then the tail. The env's decode and the interval figures use it to stay bit for bit equal
    to the numpy backend. Callers pass the start as an ``int64`` (``np.int64(0)``, not ``0``): numba
    compiles a function called with a constant argument for that literal value, so ``block_sum(x, 0, n)``
    beside ``block_sum(x, lo, n)`` compiled it twice at every cold start (docs/development.md, issue-31zj2)."""
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


#: numpy's pairwise-summation block (numpy/_core/src/umath/loops_utils.h.src, ``PW_BLOCKSIZE``)
_PW_BLOCK = 128


@njit(nogil=True, error_model="numpy", **COMPILED_ONLY)
def pairwise_sum(x, n):  # pragma: no cover - compiled
    """``x[:n].sum()`` of a contiguous float64 array, bit for bit as numpy computes it (and a row-wise
    ``sum(axis=-1)`` of a C-contiguous 2-D array): numpy's pairwise summation, blocks of at most 128
    elements split in halves at multiples of 8, with the recursion unrolled onto an explicit stack (a
    recursive kernel cannot be cached); the total is added to the identity 0."""
    if n <= _PW_BLOCK:
        return 0.0 + block_sum(x, np.int64(0), n)  # an int64 start, not the literal 0: see block_sum
    f_lo = np.empty(64, dtype=np.int64)  # frames: start, length, stage (0: new, 1: left done, 2: both)
    f_n = np.empty(64, dtype=np.int64)
    f_st = np.empty(64, dtype=np.int64)
    vals = np.empty(64)
    sp, vp = 1, 0
    f_lo[0], f_n[0], f_st[0] = 0, n, 0
    while sp > 0:
        t = sp - 1
        lo, m = f_lo[t], f_n[t]
        if m <= _PW_BLOCK:
            vals[vp] = block_sum(x, lo, m)
            vp += 1
            sp -= 1
            continue
        h = m // 2
        h -= h % 8
        if f_st[t] == 0:
            f_st[t] = 1
            f_lo[sp], f_n[sp], f_st[sp] = lo, h, 0
            sp += 1
        elif f_st[t] == 1:
            f_st[t] = 2
            f_lo[sp], f_n[sp], f_st[sp] = lo + h, m - h, 0
            sp += 1
        else:
            vals[vp - 2] = vals[vp - 2] + vals[vp - 1]
            vp -= 1
            sp -= 1
    return 0.0 + vals[0]


@njit(nogil=True, error_model="numpy", **COMPILED_ONLY)
def gathered_row_sum(x, b, idx, buf):  # pragma: no cover - compiled
    """Row ``b`` of ``x[:, idx].sum(axis=1)`` for a C-contiguous float64 ``x`` (B, L), bit for bit as numpy
    computes it: numpy lays the gathered (B, n) array out in Fortran order when B > 1, so its row sums are
    left-to-right sums (from 0); with B = 1 the row is contiguous and numpy sums it pairwise. ``buf`` is
    scratch of at least ``len(idx)`` elements."""
    n = idx.shape[0]
    if x.shape[0] == 1:
        for k in range(n):
            buf[k] = x[b, idx[k]]
        return pairwise_sum(buf, n)
    res = 0.0
    for k in range(n):
        res += x[b, idx[k]]
    return res
