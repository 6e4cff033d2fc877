"""The one entry point that builds a fabric from its spec: a built-in topology (:mod:`.builtin`) or a graph
(:mod:`.graph_input`)."""

from __future__ import annotations

from ainet_gym.fabric.builtin import build_builtin_fabric
from ainet_gym.fabric.graph_input import build_graph_fabric
from ainet_gym.fabric.record import Fabric
from ainet_gym.scenario.spec import FabricSpec

__all__ = ["build_fabric"]


def build_fabric(spec: FabricSpec, max_paths: int = 8) -> Fabric:
    """Build the fabric of ``spec``: graph, link table, endpoint attachments.

    Raises
    ------
    ValueError
        If the spec describes a fabric that cannot be built (e.g. zero GPUs, a graph with a GPU
        that reaches no other).
    """
    if spec.topology == "graph":
        return build_graph_fabric(spec, max_paths)
    return build_builtin_fabric(spec, max_paths)
