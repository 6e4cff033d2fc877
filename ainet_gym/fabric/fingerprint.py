"""A short stable hash of a built fabric (:func:`fabric_fingerprint`): what tells two label files made on
different fabrics apart when their scenario names are the same (docs/learning.md, issue-26zf2).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ainet_gym.fabric.record import TIERS, Fabric

__all__ = ["FINGERPRINT_SCHEME", "fabric_fingerprint"]

#: the prefix of every fingerprint: the version of what is hashed. A change of what
#: :func:`fabric_fingerprint` reads must change it, so that a fingerprint of another scheme never looks like
#: a fabric of its own.
FINGERPRINT_SCHEME = "fab1"


def fabric_fingerprint(fabric: Fabric) -> str:
    """``"fab1-"`` and 16 hex digits of the SHA-256 of the built fabric's network, in a canonical order.

    Included: every directed link as (source node name, destination node name, tier, nominal Gbit/s,
    capacity in bytes/s (after ``link_efficiency``), its own latency if the fabric has per-link latencies),
    sorted; every node's name and kind, sorted; the GPUs' node names and hosts in GPU id order (jobs are
    placed by GPU id); the hop latency, the store-and-forward packet size, the number of storage endpoints
    and ``max_paths`` (``routing.max_paths``, which caps the candidate paths the fabric is built with). So an
    edit of one link's capacity (an edges file's ``gbps``, a built-in ``uplink_gbps``), an added or removed
    link or node, or another latency gives another fingerprint.

    Not included: the order of the links or nodes (the same edges file with its lines in another order, or
    with other comments, hashes the same), node ids, the workload (jobs, background, placement), the
    dynamics (episode length, link failures and degradations drawn during an episode, jitter, churn), the
    routing options other than ``max_paths``, the reward, and the scenario's name, seed, description and
    file paths. Floats are hashed exactly (``float.hex``): the same inputs give the same string on every
    machine.

    Examples
    --------
    >>> from ainet_gym.fabric.topology import build_fabric
    >>> from ainet_gym.scenario.spec import FabricSpec
    >>> a = fabric_fingerprint(build_fabric(FabricSpec(leaves=2, spines=2, hosts_per_leaf=1)))
    >>> a == fabric_fingerprint(build_fabric(FabricSpec(leaves=2, spines=2, hosts_per_leaf=1)))
    True
    >>> a == fabric_fingerprint(build_fabric(FabricSpec(leaves=2, spines=2, hosts_per_leaf=1, uplink_gbps=200)))
    False
    >>> a.startswith("fab1-") and len(a) == 21
    True
    """
    names = fabric.node_names
    lat = fabric.link_latency_s
    cols = zip(
        fabric.link_src, fabric.link_dst, fabric.link_tier, fabric.link_gbps, fabric.capacity_bytes_per_s
    )
    links = sorted(
        (
            names[int(s)],
            names[int(d)],
            TIERS[int(t)],
            float(g).hex(),
            float(c).hex(),
            "" if lat is None else float(lat[i]).hex(),
        )
        for i, (s, d, t, g, c) in enumerate(cols)
    )
    body: dict[str, Any] = {
        "links": links,
        "nodes": sorted(zip(names, fabric.node_kind)),
        "gpus": [[names[int(n)], int(h)] for n, h in zip(fabric.gpu_node, fabric.gpu_host)],
        "hop_latency_s": float(fabric.hop_latency_s).hex(),
        "store_and_forward_bytes": float(fabric.spec.store_and_forward_bytes).hex(),
        "storage": int(fabric.n_storage),
        "max_paths": int(fabric.max_paths),
    }
    text = json.dumps(body, separators=(",", ":"))
    return f"{FINGERPRINT_SCHEME}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
