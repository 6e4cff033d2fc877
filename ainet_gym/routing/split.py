"""How a connection's traffic is split over its candidate paths: static ECMP hashing, spraying, WCMP
weights, and the decoding of an agent's explicit choice (a path index or split ratios) into a split.

Every function returns a split matrix ``(connections, max_paths)`` whose rows are nonnegative and sum
to 1 over the connection's valid paths (columns ``>= n_paths`` are 0). All are vectorised over
connections.
"""

from __future__ import annotations

import numpy as np

from ainet_gym.arrays import safe_divide

__all__ = [
    "ecmp_split",
    "hash_u64",
    "path_index_split",
    "ratio_split",
    "spray_split",
    "wcmp_split",
]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def hash_u64(*keys: np.ndarray | int) -> np.ndarray:
    """Deterministic 64-bit mix (splitmix64 finaliser) of integer keys, vectorised."""
    h = np.zeros(np.broadcast(*[np.asarray(k) for k in keys]).shape, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in keys:
            h = h ^ (np.asarray(k).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15))
            h = (h ^ (h >> np.uint64(30))) * _M1
            h = (h ^ (h >> np.uint64(27))) * _M2
            h = h ^ (h >> np.uint64(31))
    return h


def ecmp_split(
    n_paths: np.ndarray, conn_key: np.ndarray, max_paths: int, qps: int, seed: int | np.ndarray
) -> np.ndarray:
    """Static ECMP hashing: each of ``qps`` queue pairs of a connection picks one path.

    The path of QP ``q`` is ``hash(conn_key, q, seed) mod n_paths``: deterministic for a connection
    (it keeps its path from iteration to iteration) and uniform over the ECMP set across seeds.
    ``conn_key`` identifies the connection (job, source, destination); ``seed`` is a scalar or one
    seed per connection.
    """
    n = np.asarray(n_paths, dtype=np.int64)
    c = n.shape[0]
    q = np.arange(qps, dtype=np.int64)
    sd = np.broadcast_to(np.asarray(seed, dtype=np.int64), (c,))[:, None]
    h = hash_u64(np.asarray(conn_key, dtype=np.int64)[:, None], q[None, :], sd)
    pick = (h % n[:, None].astype(np.uint64)).astype(np.int64)  # (conn, qps)
    # each QP adds 1 / qps to its path, in QP order from 0 (what np.add.at does, in one bincount)
    cell = (np.arange(c, dtype=np.int64)[:, None] * max_paths + pick).reshape(-1)
    w = np.full(cell.shape[0], 1.0 / qps)
    split = np.bincount(cell, weights=w, minlength=c * max_paths).astype(np.float64, copy=False)
    return split.reshape(c, max_paths)  # (an empty bincount is int64: hence the astype)


def spray_split(n_paths: np.ndarray, max_paths: int) -> np.ndarray:
    """Packet spraying: an even split over every candidate path."""
    n = np.asarray(n_paths, dtype=np.int64)
    valid = np.arange(max_paths)[None, :] < n[:, None]
    return valid / n[:, None]


def path_index_split(
    index: np.ndarray, n_paths: np.ndarray, max_paths: int, wrap: bool = False
) -> np.ndarray:
    """One explicit path per connection (index into its candidate paths).

    ``wrap=True`` maps an index past a connection's paths to ``index mod n_paths`` (the env's discrete
    ``path`` action, whose space is the largest path count); otherwise such an index is an error.

    Raises
    ------
    ValueError
        If an index is outside ``[0, n_paths)`` of its connection.
    """
    idx = np.asarray(index, dtype=np.int64)
    n = np.asarray(n_paths, dtype=np.int64)
    if wrap:
        idx = idx % n
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"path index[{i}] = {idx[i]}: connection has {n[i]} candidate paths (0..{n[i] - 1})")
    split = np.zeros((idx.shape[0], max_paths))
    split[np.arange(idx.shape[0]), idx] = 1.0
    return split


def ratio_split(ratios: np.ndarray, n_paths: np.ndarray) -> np.ndarray:
    """Explicit split ratios (connections, max_paths), renormalised over valid paths.

    A row whose valid entries are all zero falls back to an even split (documented, not silent:
    it is the limit of equal tiny weights).

    Raises
    ------
    ValueError
        If a ratio is negative or not finite.
    """
    r = np.asarray(ratios, dtype=np.float64)
    if not np.all(np.isfinite(r)) or (r < 0).any():
        i = np.argwhere(~np.isfinite(r) | (r < 0))[0]
        raise ValueError(f"split ratio{list(i)} = {r[tuple(i)]}: must be finite and >= 0")
    n = np.asarray(n_paths, dtype=np.int64)
    valid = np.arange(r.shape[1])[None, :] < n[:, None]
    r = np.where(valid, r, 0.0)
    tot = r.sum(axis=1, keepdims=True)
    even = valid / np.maximum(n[:, None], 1)
    return safe_divide(r, tot, even)


def wcmp_split(
    conn_paths: np.ndarray, n_paths: np.ndarray, link_weight: np.ndarray, link_group: np.ndarray
) -> np.ndarray:
    """Weighted ECMP: weights at each switch's equal-cost next hops, multiplied along each path.

    ``link_weight`` (links,) is the weight of a link among its ECMP group ``link_group`` (links,)
    (-1: not a choice, factor 1). A hop's probability is its weight over its group's total weight (a
    group whose weights are all zero falls back to even); a path's share is the product over its hops,
    renormalised over the connection's candidate paths.
    """
    w = np.asarray(link_weight, dtype=np.float64)
    g = np.asarray(link_group)
    n_groups = int(g.max()) + 1 if g.size and g.max() >= 0 else 0
    in_group = g >= 0
    gsum = np.bincount(g[in_group], weights=w[in_group], minlength=n_groups)
    gcount = np.bincount(g[in_group], minlength=n_groups)
    prob = np.ones_like(w)
    gi = g[in_group]
    prob[in_group] = safe_divide(w[in_group], gsum[gi], 1.0 / gcount[gi])
    padded = np.concatenate([prob, [1.0]])  # index -1 (padding) -> factor 1
    score = padded[conn_paths].prod(axis=2)  # (conn, paths)
    valid = np.arange(conn_paths.shape[1])[None, :] < np.asarray(n_paths)[:, None]
    score = np.where(valid, score, 0.0)
    tot = score.sum(axis=1, keepdims=True)
    even = valid / np.maximum(np.asarray(n_paths)[:, None], 1)
    return safe_divide(score, tot, even)
