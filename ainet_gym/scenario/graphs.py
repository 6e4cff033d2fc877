"""A graph fabric (``topology: graph``) as the loader checks it: what the scenario room needs to ask, and the
fabric room's answer, registered here.

A graph is read, counted against the limits and built by the fabric room alone (its roles, link tiers and
paths are fabric knowledge), and the fabric comes after the scenario in the pipeline. So the scenario room
names the four questions it asks (:class:`GraphFabrics`) and the fabric room registers its answers when it
is imported (``ainet_gym/fabric/__init__.py``; importing ``ainet_gym``, or any module of the fabric room,
does it): the loader checks a graph fabric at load time without importing up the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ainet_gym.scenario.spec import FabricSpec

__all__ = ["GraphFabrics", "graph_fabrics", "register_graph_fabrics"]


@dataclass(frozen=True)
class GraphFabrics:
    """The fabric room's readers of a graph fabric, as the loader calls them.

    ``read(path)``: the networkx graph of a GraphML or edge-list file (``ValueError``, ``OSError`` or
    ``UnicodeDecodeError`` when it cannot be read); ``spec(graph, **fabric_keys)``: its :class:`FabricSpec`;
    ``check_size(graph, what)``: its counts (``gpus``, ``links``, ``leaves``, ``ecmp_set``), ``ValueError``
    above the limits; ``build(spec)``: the built fabric (its ``max_hops``, and ``link_ids(name)`` raising
    ``KeyError`` for a name that is not a link), ``ValueError`` if the graph is not a valid fabric.
    """

    read: Callable[[Path], Any]
    spec: Callable[..., FabricSpec]
    check_size: Callable[[Any, str], dict[str, int]]
    build: Callable[[FabricSpec], Any]


_REGISTERED: list[GraphFabrics] = []


def register_graph_fabrics(readers: GraphFabrics) -> None:
    """Make ``readers`` the ones the loader calls for a graph fabric (the fabric room does, on import)."""
    _REGISTERED[:] = [readers]


def graph_fabrics() -> GraphFabrics:
    """The registered readers of a graph fabric.

    Raises
    ------
    RuntimeError
        If none is registered (the fabric room was never imported; importing ``ainet_gym`` imports it).
    """
    if not _REGISTERED:
        raise RuntimeError(
            "a graph fabric (topology: graph) is read by the fabric room, which registers its readers when "
            "imported: import ainet_gym (or ainet_gym.fabric) before loading the scenario"
        )
    return _REGISTERED[0]
