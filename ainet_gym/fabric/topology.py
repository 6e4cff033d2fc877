"""Fabric topologies: built and checked, then flattened into a dense link table.

Every link is directed, with a capacity per direction and a tier label. Endpoints are GPUs (ids
``0..gpus-1``, host-major: leaf by leaf, host by host, local rank last) followed by storage hosts
(ids ``gpus..gpus+storage-1``). Each GPU has a NIC link to its leaf (edge / rail leaf) and a pair of
NVLink links to its host's NVLink switch, so an intra-host transfer crosses two NVLink links.
With ``gpus_per_nic: k > 1`` the k GPUs of a NIC reach it over PCIe links (tier ``pcie``) and the NIC
has the link to the leaf (tier ``nic``), shared by the k GPUs.

Besides the four built-in topologies, a fabric can be any graph (:func:`fabric_from_graph`, or
``fabric: {topology: graph, file: ...}`` in a scenario): nodes with a ``role`` (``gpu``, ``switch``,
``storage``, and optionally ``nic`` and ``nvswitch``) and GPUs with a ``host``; edges with ``gbps`` and
optional ``tier`` and ``latency_us``. :func:`fabric_to_graph` gives the way back. Every fabric, built-in
or not, is flattened by the same code (:func:`ainet_gym.fabric.flatten.flatten`), so paths, hop counts and
the non-blocking reference of ideal step times (:func:`nonblocking_fabric`) come from the links, not from
the topology name.

networkx is touched at construction only: the hot path reads the numpy arrays of :class:`Fabric`.

This module is the fabric's public API; each part lives in a module of its own concern (issue 31):

=========================  ==========================================================================
:mod:`.record`             :class:`Fabric` (the link table, its candidate paths), :data:`TIERS`, :data:`ROLES`
:mod:`.paths`              shortest paths, ECMP groups, the cap of an equal-cost set (no networkx)
:mod:`.builder`            a fabric under construction (nodes and directed links)
:mod:`.flatten`            builder -> :class:`Fabric`: endpoint attachments, NVLink, levels, hop bound
:mod:`.builtin`            the built-in topologies (spine-leaf, fat-tree, rail-optimised, one switch)
:mod:`.build`              :func:`build_fabric`: a spec, built-in or graph, to its :class:`Fabric`
:mod:`.nonblocking`        the non-blocking reference fabric of ideal step times
:mod:`.graph_size`         a graph fabric counted before it is built, refused above the limits
:mod:`.graph_input`        a fabric from a networkx graph: roles, hosts and links checked
:mod:`.graph_io`           a fabric to a graph, graph files read (GraphML, edge lists) and written
:mod:`.fingerprint`        :func:`fabric_fingerprint`: a short stable hash of a built fabric's network
=========================  ==========================================================================
"""

from __future__ import annotations

from ainet_gym.fabric.build import build_fabric
from ainet_gym.fabric.fingerprint import FINGERPRINT_SCHEME, fabric_fingerprint
from ainet_gym.fabric.graph_input import fabric_from_graph, graph_spec
from ainet_gym.fabric.graph_io import fabric_to_graph, read_fabric_graph, write_fabric_graph
from ainet_gym.fabric.graph_size import check_graph_size, graph_size
from ainet_gym.fabric.nonblocking import nonblocking_fabric, nonblocking_spec
from ainet_gym.fabric.record import ROLES, TIERS, Fabric

__all__ = [
    "FINGERPRINT_SCHEME",
    "ROLES",
    "TIERS",
    "Fabric",
    "build_fabric",
    "check_graph_size",
    "fabric_fingerprint",
    "fabric_from_graph",
    "fabric_to_graph",
    "graph_size",
    "graph_spec",
    "nonblocking_fabric",
    "nonblocking_spec",
    "read_fabric_graph",
    "write_fabric_graph",
]
