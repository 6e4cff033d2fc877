"""Path algorithms of the fabric on plain adjacency dicts and link arrays (no networkx): BFS hop counts,
every shortest path, classes of equivalent nodes, the ECMP next-hop groups of the links, and the cap of
an equal-cost set at ``max_paths``."""

from __future__ import annotations

import zlib
from collections import deque
from typing import Any

import numpy as np

__all__ = ["all_shortest_paths", "capped", "ecmp_groups", "hop_counts", "neighbour_classes"]


def hop_counts(adj: dict[int, list[int]], sources: list[int]) -> dict[int, int]:
    """Hop count from the nearest of ``sources`` (0) to every node that ``adj`` reaches from them (BFS)."""
    hops = dict.fromkeys(sources, 0)
    queue = deque(sources)
    while queue:
        u = queue.popleft()
        for v in adj.get(u, []):
            if v not in hops:
                hops[v] = hops[u] + 1
                queue.append(v)
    return hops


def neighbour_classes(nodes: Any, out_adj: dict, in_adj: dict) -> dict[Any, Any]:
    """Signature -> first node of each class of ``nodes`` with the same out- and in-neighbours (as
    multisets: parallel links counted). Two nodes of a class have the same distance to, and the same
    number of shortest paths to, every node other than the two."""
    from collections import Counter

    classes: dict[Any, Any] = {}
    for n in nodes:
        sig = (frozenset(Counter(out_adj.get(n, ())).items()), frozenset(Counter(in_adj.get(n, ())).items()))
        classes.setdefault(sig, n)
    return classes


def ecmp_groups(
    level: np.ndarray, link_src: np.ndarray, link_dst: np.ndarray, is_switch: np.ndarray
) -> np.ndarray:
    """ECMP next-hop group of every link (dense ids; -1 for no choice): the up-links of a switch form one
    group, parallel down-links to one neighbour another; singleton groups are not a choice."""
    up = level[link_dst] > level[link_src]
    keys = np.where(up, -1, link_dst)  # up: group by source only
    # the pair (source, key) as one integer, ordered as the pairs are (key + 1 in [0, nodes]): the same
    # groups, numbered in the same order, as ``np.unique`` of the (links, 2) rows, at a fraction of its cost
    width = np.int64(level.shape[0] + 1)
    _, group = np.unique(link_src.astype(np.int64) * width + (keys + 1), return_inverse=True)
    group = group.reshape(-1)
    sizes = np.bincount(group)
    link_group = np.where(is_switch[link_src] & (sizes[group] > 1), group, -1)
    valid = link_group >= 0
    if valid.any():
        _, dense = np.unique(link_group[valid], return_inverse=True)
        link_group[valid] = dense
    return link_group


def all_shortest_paths(adj: dict[int, list[int]], src: int, dst: int) -> list[list[int]]:
    """Every shortest node path from ``src`` to ``dst`` in the directed graph ``adj`` (BFS layers, then
    the predecessor DAG walked back from ``dst``); empty when ``dst`` is unreachable. The same set as
    ``networkx.all_shortest_paths`` (callers sort it), without importing networkx."""
    if src not in adj or dst not in adj:
        return []
    if src == dst:
        return [[src]]
    dist = {src: 0}
    preds: dict[int, list[int]] = {}
    frontier = [src]
    while frontier and dst not in dist:
        nxt: list[int] = []
        for u in frontier:
            for v in adj.get(u, ()):
                if v not in dist:
                    dist[v] = dist[u] + 1
                    nxt.append(v)
                if dist[v] == dist[u] + 1:
                    preds.setdefault(v, []).append(u)
        frontier = nxt
    if dst not in dist:
        return []
    out: list[list[int]] = []
    stack: list[tuple[int, list[int]]] = [(dst, [dst])]
    while stack:
        node, tail = stack.pop()
        if node == src:
            out.append(tail[::-1])
            continue
        for p in preds.get(node, ()):
            stack.append((p, [*tail, p]))
    return out


#: sets of more equal-cost paths than this keep the evenly spaced subset (the greedy one costs cap x n)
_GREEDY_MAX_CANDIDATES = 4096


def capped(paths: list[list[int]], cap: int, key: str) -> list[list[int]]:
    """At most ``cap`` of the sorted equal-cost ``paths``: all of them if they fit; otherwise ``cap`` evenly
    spaced from a rotation that depends on ``key`` (so that capped sets of different pairs cover different
    spines), unless a greedy pick covers more distinct links: from the same rotation, each next path is
    the one whose links have been used least (ties: the first in the rotation). The subset keeps the
    sorted order."""
    n = len(paths)
    if n <= cap:
        return paths
    offset = zlib.crc32(key.encode()) % n
    even = sorted(((offset + (np.arange(cap) * n) // cap) % n).tolist())
    chosen = even
    if n <= _GREEDY_MAX_CANDIDATES:
        used: dict[int, int] = {}
        free = [(offset + i) % n for i in range(n)]  # the rotation
        greedy = []
        for _ in range(cap):
            k = min(range(len(free)), key=lambda j: (sum(used.get(link, 0) for link in paths[free[j]]), j))
            pick = free.pop(k)
            greedy.append(pick)
            for link in paths[pick]:
                used[link] = used.get(link, 0) + 1

        def distinct(idx: list[int]) -> int:
            return len({link for i in idx for link in paths[i]})

        if distinct(greedy) > distinct(even):
            chosen = sorted(greedy)
    return [paths[i] for i in chosen]
