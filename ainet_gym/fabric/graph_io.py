"""Graph fabrics in and out of files and networkx: :func:`fabric_to_graph` (the way back of
:func:`~ainet_gym.fabric.graph_input.fabric_from_graph`), :func:`read_fabric_graph` (GraphML or an edge
list, refused early above the limits) and :func:`write_fabric_graph` (GraphML)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ainet_gym.fabric.graph_input import attribute_number
from ainet_gym.fabric.graph_size import graph_limits
from ainet_gym.fabric.record import TIERS, Fabric

if TYPE_CHECKING:  # networkx is imported where a graph is read or written, not on the env's import path
    import networkx as nx

__all__ = ["fabric_to_graph", "read_fabric_graph", "write_fabric_graph"]


def fabric_to_graph(fabric: Fabric) -> nx.MultiDiGraph:
    """The fabric as a directed multigraph that :func:`~ainet_gym.fabric.graph_input.fabric_from_graph`
    reads back into the same fabric: one edge per directed link (``link`` id, ``gbps``, ``tier``,
    ``latency_us``), nodes in node-id order with their ``role`` (and ``host`` for GPUs, NICs and NVLink
    switches).

    Raises
    ------
    TypeError
        If ``fabric`` is not a :class:`Fabric` (e.g. a scenario: build its fabric first).
    """
    import networkx as nx

    if not isinstance(fabric, Fabric):
        raise TypeError(
            f"fabric_to_graph expects a Fabric (ainet_gym.fabric.topology.build_fabric of a scenario's fabric), "
            f"not {type(fabric).__name__}"
        )
    G = nx.MultiDiGraph()
    role = {"gpu": "gpu", "storage": "storage", "nic": "nic", "nvswitch": "nvswitch"}
    node_host: dict[int, int] = {}
    for g in range(fabric.n_gpus):
        h = int(fabric.gpu_host[g])
        node_host[int(fabric.gpu_node[g])] = h
        node_host[int(fabric.link_dst[fabric.gpu_nvl_up[g]])] = h
        if fabric.endpoint_pcie_up is not None and fabric.endpoint_pcie_up[g] >= 0:
            node_host[int(fabric.link_src[fabric.endpoint_up[g]])] = h
    for i, (name, kind) in enumerate(zip(fabric.node_names, fabric.node_kind)):
        attrs: dict[str, Any] = {"role": role.get(kind, "switch")}
        if i in node_host:
            attrs["host"] = node_host[i]
        G.add_node(name, **attrs)
    lat = fabric.link_latency_s
    for i in range(fabric.n_links):
        G.add_edge(
            fabric.node_names[int(fabric.link_src[i])],
            fabric.node_names[int(fabric.link_dst[i])],
            key=i,
            link=i,
            gbps=float(fabric.link_gbps[i]),
            tier=TIERS[int(fabric.link_tier[i])],
            latency_us=(fabric.hop_latency_s if lat is None else float(lat[i])) * 1e6,
        )
    return G


def read_fabric_graph(path: str | os.PathLike) -> nx.Graph:
    """Read a graph fabric file: GraphML (``.graphml``), or an edge list (any other suffix).

    Edge list: one item per line, ``#`` starts a comment, ``key=value`` attributes::

        node gpu0 role=gpu host=0        # a node (nodes not declared are switches)
        gpu0 leaf0 gbps=400 tier=nic     # a link in each direction (latency_us=... optional)
    """
    import networkx as nx

    from ainet_gym.scenario.files import read_text_capped

    path = Path(path)
    text = read_text_capped(path, str(path))  # refused unread above LIMITS["file_bytes"]
    if path.suffix.lower() == ".graphml":
        try:
            return nx.parse_graphml(text)
        except Exception as e:  # networkx raises several XML error types
            raise ValueError(
                f"{path}: not a readable GraphML file: {' '.join(str(e).split())[:200]}"
            ) from None
    G = nx.MultiGraph()
    # counted while reading, so that a file far above the limits is refused after reading what
    # already exceeds them, not after building the whole graph: every link line adds two directed
    # links, and a connected graph of n nodes has at least 2 (n - 1) of them
    max_links = int(graph_limits()["links"])
    n_links = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        # shlex only where quoting can matter: it costs about 30 times str.split a line
        words = (
            shlex.split(line, comments=True)
            if ('"' in line or "'" in line or "\\" in line)
            else (line.split("#", 1)[0].split())
        )
        if not words:
            continue
        if words[0] != "node":
            n_links += 2
        if n_links > max_links or 2 * (G.number_of_nodes() - 1) > max_links:
            raise ValueError(
                f"{path}:{lineno}: the graph has more than {max_links:,} directed links (a link line is two; "
                "a connected graph of n nodes has at least 2 (n - 1)); allowed: at most "
                f"{max_links:,} (ainet_gym.scenario.loader.LIMITS['links']): fewer links in the graph"
            )
        where = f"{path}:{lineno}"
        head, attrs = words[:2], words[2:]  # "node NAME ..." or "NAME NAME ..."
        kv: dict[str, Any] = {}
        for w in attrs:
            if "=" not in w:
                raise ValueError(f"{where}: {w!r} is not key=value")
            k, v = w.split("=", 1)
            kv[k] = v if k in ("role", "tier") else attribute_number(v, f"{where}: {k}")
        if words[0] == "node":
            if len(words) < 2:
                raise ValueError(f"{where}: 'node' needs a name")
            G.add_node(words[1], **kv)
        else:
            if len(head) < 2:
                raise ValueError(f"{where}: a link needs two node names")
            for n in head:
                if n not in G:
                    G.add_node(n, role="switch")
            G.add_edge(head[0], head[1], **kv)
    return G


def write_fabric_graph(fabric: Fabric, path: str | os.PathLike) -> None:
    """Write ``fabric`` as GraphML (:func:`fabric_to_graph`), to edit and load back with
    ``fabric: {topology: graph, file: ...}``."""
    import networkx as nx

    nx.write_graphml(fabric_to_graph(fabric), Path(path))
