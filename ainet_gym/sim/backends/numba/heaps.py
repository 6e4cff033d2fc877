"""The heaps of the compiled solvers: the fill's link shares, the lazy kernel's flow completions."""

from __future__ import annotations

import numpy as np

from ainet_gym.sim.backends.numba.jit import njit


@njit(nogil=True, inline="always")
def heap_push(key, item, n, k, i):  # pragma: no cover - compiled
    """Push ``(k, i)`` on the binary min-heap ``key[:n]`` / ``item[:n]``; the new size."""
    j = n
    while j > 0:
        p = (j - 1) >> 1
        if key[p] <= k:
            break
        key[j] = key[p]
        item[j] = item[p]
        j = p
    key[j] = k
    item[j] = i
    return n + 1


@njit(nogil=True, inline="always")
def heap_pop(key, item, n):  # pragma: no cover - compiled
    """Remove the root of the heap ``key[:n]`` (read it first); the new size."""
    n -= 1
    k = key[n]
    i = item[n]
    j = 0
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and key[c + 1] < key[c]:
            c += 1
        if key[c] >= k:
            break
        key[j] = key[c]
        item[j] = item[c]
        j = c
    if n > 0:
        key[j] = k
        item[j] = i
    return n


@njit(nogil=True, inline="always")
def _heap_place(hk, hf, pos, i, k, f):  # pragma: no cover - compiled
    """Put flow ``f`` with key ``k`` in slot ``i`` of the indexed min-heap ``hk`` (keys) / ``hf`` (flows) /
    ``pos`` (flow -> slot)."""
    hk[i] = k
    hf[i] = f
    pos[f] = i


@njit(nogil=True, inline="always")
def _sift_up(hk, hf, pos, i):  # pragma: no cover - compiled
    """Move item ``i`` of the indexed min-heap ``hk`` / ``hf`` / ``pos`` (:func:`_heap_place`) up."""
    k = hk[i]
    f = hf[i]
    while i > 0:
        p = (i - 1) >> 1
        if hk[p] <= k:
            break
        _heap_place(hk, hf, pos, i, hk[p], hf[p])
        i = p
    _heap_place(hk, hf, pos, i, k, f)


@njit(nogil=True, inline="always")
def sift_down(hk, hf, pos, n, i):  # pragma: no cover - compiled
    """Move item ``i`` of the indexed min-heap of ``n`` items down."""
    k = hk[i]
    f = hf[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and hk[c + 1] < hk[c]:
            c += 1
        if hk[c] >= k:
            break
        _heap_place(hk, hf, pos, i, hk[c], hf[c])
        i = c
    _heap_place(hk, hf, pos, i, k, f)


@njit(nogil=True, inline="always")
def heap_set(hk, hf, pos, n, f, key):  # pragma: no cover - compiled
    """Give flow ``f`` the key ``key`` in the indexed heap of ``n`` items (inserted, moved, or removed when
    ``key`` is inf); the new size."""
    i = pos[f]
    if key == np.inf:
        if i < 0:
            return n
        n -= 1
        pos[f] = -1
        if i < n:
            _heap_place(hk, hf, pos, i, hk[n], hf[n])  # the last item into the freed slot
            if i > 0 and hk[(i - 1) >> 1] > hk[i]:
                _sift_up(hk, hf, pos, i)
            else:
                sift_down(hk, hf, pos, n, i)
        return n
    if i < 0:
        hk[n] = key
        hf[n] = f
        _sift_up(hk, hf, pos, n)
        return n + 1
    old = hk[i]
    hk[i] = key
    if key < old:
        _sift_up(hk, hf, pos, i)
    else:
        sift_down(hk, hf, pos, n, i)
    return n


# the departure repair's per-link level heaps (issue-28zi): one indexed max-heap of (level, slot) per link in
# the segment ``base : base + n`` of ``hk`` (levels) / ``hx`` (the slot of the link-major index: its flow is
# ``adj_flow[slot]``), ``hpos`` (slot -> absolute position in ``hk``; -1: not in the heap)


@njit(nogil=True, inline="always")
def _lh_place(hk, hx, hpos, p, k, x):  # pragma: no cover - compiled
    """Slot ``x`` with level ``k`` at absolute position ``p`` of a link's level heap."""
    hk[p] = k
    hx[p] = x
    hpos[x] = p


@njit(nogil=True, inline="always")
def lh_up(hk, hx, hpos, b, i):  # pragma: no cover - compiled
    """Item ``i`` (relative to the link's base ``b``) of a level max-heap moved up. The levels read."""
    k = hk[b + i]
    x = hx[b + i]
    steps = 1
    while i > 0:
        p = (i - 1) >> 1
        steps += 1
        if hk[b + p] >= k:
            break
        _lh_place(hk, hx, hpos, b + i, hk[b + p], hx[b + p])
        i = p
    _lh_place(hk, hx, hpos, b + i, k, x)
    return steps


@njit(nogil=True, inline="always")
def lh_down(hk, hx, hpos, b, n, i):  # pragma: no cover - compiled
    """Item ``i`` of the level max-heap of ``n`` items at base ``b`` moved down. The levels read."""
    k = hk[b + i]
    x = hx[b + i]
    steps = 1
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and hk[b + c + 1] > hk[b + c]:
            c += 1
        steps += 2
        if hk[b + c] <= k:
            break
        _lh_place(hk, hx, hpos, b + i, hk[b + c], hx[b + c])
        i = c
    _lh_place(hk, hx, hpos, b + i, k, x)
    return steps


@njit(nogil=True, inline="always")
def lh_set(hk, hx, hpos, b, n, x, key):  # pragma: no cover - compiled
    """Slot ``x`` given the level ``key`` in the level heap of ``n`` items at base ``b`` (inserted when not
    in it). ``(new size, levels read)``."""
    p = hpos[x]
    if p < 0:
        hk[b + n] = key
        hx[b + n] = x
        hpos[x] = b + n
        return n + 1, lh_up(hk, hx, hpos, b, n)
    old = hk[p]
    hk[p] = key
    if key > old:
        return n, lh_up(hk, hx, hpos, b, p - b)
    if key < old:
        return n, lh_down(hk, hx, hpos, b, n, p - b)
    return n, 1


@njit(nogil=True, inline="always")
def lh_remove(hk, hx, hpos, b, n, x):  # pragma: no cover - compiled
    """Slot ``x`` out of the level heap of ``n`` items at base ``b`` (nothing when not in it). ``(new size,
    levels read)``."""
    p = hpos[x]
    if p < 0:
        return n, 0
    hpos[x] = -1
    n -= 1
    i = p - b
    if i == n:
        return n, 1
    _lh_place(hk, hx, hpos, p, hk[b + n], hx[b + n])  # the last item into the freed position
    if i > 0 and hk[b + ((i - 1) >> 1)] < hk[p]:
        return n, lh_up(hk, hx, hpos, b, i)
    return n, lh_down(hk, hx, hpos, b, n, i)
