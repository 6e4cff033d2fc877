"""The candidate paths of a unit's connections (:func:`conn_tables`), cached per fabric and connection list,
and the longest candidate path of a fabric (:func:`max_hops`)."""

from __future__ import annotations

import weakref

import numpy as np

from ainet_gym.fabric.topology import Fabric

__all__ = ["conn_tables", "max_hops"]


#: the connection tables of :func:`conn_tables` per fabric, by connection list: a job whose skewed AllToAll
#: moves its hot expert is compiled again for each new rotation, on the same connections
#: (keyed by the fabric's id, dropped when the fabric is collected: a Fabric compares by value, so it is not
#: hashable)
_CONN_TABLES: dict[int, dict[tuple, tuple]] = {}
_CONN_TABLES_PER_FABRIC = 16


def conn_tables(
    fabric: Fabric, src: list[int], dst: list[int], max_hops: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Candidate paths (conns, max_paths, max_hops), their counts, the hops and the latency (s) of the
    first path of each connection (the arrays are shared by the calls with the same connections: read
    only)."""
    key = (tuple(src), tuple(dst), max_hops)
    seen = _CONN_TABLES.get(id(fabric))
    if seen is None:
        seen = _CONN_TABLES[id(fabric)] = {}
        weakref.finalize(fabric, _CONN_TABLES.pop, id(fabric), None)
    if key in seen:
        return seen[key]
    if len(seen) >= _CONN_TABLES_PER_FABRIC:
        seen.clear()
    seen[key] = out = _conn_tables_of(fabric, src, dst, max_hops)
    for a in out:
        a.flags.writeable = False
    return out


def _conn_tables_of(
    fabric: Fabric, src: list[int], dst: list[int], max_hops: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    P = fabric.max_paths
    paths = np.full((len(src), P, max_hops), -1, dtype=np.int64)
    npaths = np.zeros(len(src), dtype=np.int64)
    hops = np.zeros(len(src), dtype=np.int64)
    latency = np.zeros(len(src))
    for c, (s, d) in enumerate(zip(src, dst)):
        ps = fabric.paths(s, d)
        npaths[c] = len(ps)
        hops[c] = len(ps[0])
        latency[c] = fabric.path_latency_s(ps[0])
        for i, pth in enumerate(ps):
            paths[c, i, : len(pth)] = pth
    return paths, npaths, hops, latency


def max_hops(fabric: Fabric) -> int:
    """Longest candidate path (in links) of the fabric, from its links (:attr:`Fabric.max_hops`)."""
    return fabric.max_hops
