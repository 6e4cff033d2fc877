"""The graph policy's inputs (:mod:`ainet_gym.agents.graph_policy`): the env's ``graph`` observation and a
few size-free globals as tensors (:func:`graph_inputs`), per-link path features, and the positions of the WCMP
knob links among the network's links (:func:`knob_positions`), which map the per-link outputs to the action."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ainet_gym.arrays import safe_divide

if TYPE_CHECKING:
    import torch

    from ainet_gym.envs.env import EnvCore

__all__ = [
    "N_GLOBAL",
    "N_PATH_FEATURES",
    "global_features",
    "graph_inputs",
    "knob_positions",
    "path_features",
]


#: number of size-free global features (see :func:`global_features`).
N_GLOBAL = 8


def global_features(core: EnvCore, flat: np.ndarray) -> np.ndarray:
    """(batch, N_GLOBAL) size-free globals from the flat observation: the mean over job slots of the 5 job
    features, the mean over background sources of *active last* and *scheduled next* (0 without
    background) and the episode progress."""
    from ainet_gym.envs.env import BG_FEATURES, JOB_FEATURES

    B = flat.shape[0]
    L = core.obs_layout
    jobs = flat[:, L["jobs"]].reshape(B, -1, len(JOB_FEATURES))
    out = np.zeros((B, N_GLOBAL), dtype=np.float32)
    if jobs.shape[1]:
        out[:, :5] = jobs.mean(axis=1)
    bg = flat[:, L["background"]].reshape(B, -1, len(BG_FEATURES))
    if bg.shape[1]:
        out[:, 5:7] = bg.mean(axis=1)
    out[:, 7] = flat[:, L["episode_progress"]][:, 0]
    return out


#: per-link features :func:`path_features` adds to the observation's edge features.
N_PATH_FEATURES = 3


def path_features(core: EnvCore) -> np.ndarray:
    """(batch, links, 3) features of every link from the connections whose candidate paths cross it: one
    fixed round of link -> connection -> link message passing (as RouteNet's path-link updates, without
    learned weights), all from quantities the flat observation also holds (demands, capacities).

    With every connection's offered bytes of the next interval ``d`` (jobs at their ideal rate, scheduled
    background) spread evenly over its ``n`` live candidate paths, for link ``l``:

    - ``offered``: ``x / (1 + x)`` of the offered utilisation ``x = sum d / n / (capacity x interval)``;
    - ``path_capacity``: the offered-weighted mean, over the (connection, path) pairs through ``l``, of the
      path's bottleneck capacity fraction (a knob link whose paths lead through a degraded or failed link
      further on sees it here; 1 where nothing crosses ``l``);
    - ``path_load``: the same mean of the path's largest ``offered`` (squashed like ``offered``).
    """
    sim = core.routing_context.sim
    assert sim is not None
    fabric = core.fabric
    B, L = core.batch, fabric.n_links
    paths = sim.conn_paths_global  # (conns, P, hops), global link ids, -1 padding
    valid_path = np.arange(paths.shape[1])[None, :] < sim.conn_npaths[:, None]
    cap_frac = (sim.engine_state.capacity_bytes_per_s / fabric.capacity_bytes_per_s).reshape(-1)
    share = core.connection_demand() / np.maximum(sim.conn_npaths, 1)  # bytes per path
    per_path = np.where(valid_path, share[:, None], 0.0)  # (conns, P)
    hop = (paths >= 0) & valid_path[:, :, None]
    ids = paths[hop]
    wts = np.broadcast_to(per_path[:, :, None], paths.shape)[hop]
    nominal = np.tile(fabric.capacity_bytes_per_s, B) * core.decision_interval_s
    x = np.bincount(ids, weights=wts, minlength=B * L) / nominal
    offered = x / (1.0 + x)
    pad_cap = np.concatenate([cap_frac, [np.inf]])  # index -1 (padding) -> neutral for min
    pad_load = np.concatenate([offered, [0.0]])  # -> neutral for max
    p_cap = np.where(valid_path, pad_cap[paths].min(axis=2), 1.0)  # (conns, P)
    p_load = np.where(valid_path, pad_load[paths].max(axis=2), 0.0)
    wsum = np.bincount(ids, weights=wts, minlength=B * L)
    cap_num = np.bincount(
        ids, weights=wts * np.broadcast_to(p_cap[:, :, None], paths.shape)[hop], minlength=B * L
    )
    load_num = np.bincount(
        ids, weights=wts * np.broadcast_to(p_load[:, :, None], paths.shape)[hop], minlength=B * L
    )
    path_cap = safe_divide(cap_num, wsum, 1.0)
    path_load = safe_divide(load_num, wsum)
    return np.stack([offered, path_cap, path_load], axis=-1).reshape(B, L, 3).astype(np.float32)


def graph_inputs(core: EnvCore, obs: dict[str, np.ndarray]) -> tuple[torch.Tensor, ...]:
    """``(node_x, edge_index, edge_x, glob)`` tensors of a batched graph observation of ``core``.

    The graph is the fabric's *network* links (``core.net_links``: NIC, switch and storage links, the
    links the flat observation shows) and every node; the NVLink links inside a host carry no routing
    choice and are left out (they are 40% of the links of a DGX-style fabric, and the cost of a
    message-passing round is linear in the links). ``edge_x`` is the observation's ``edge_features`` of
    those links (utilisation history, capacity fraction), the :func:`path_features` of the connections
    crossing them and a 0/1 column marking the WCMP knob links (``core.wcmp_links``).
    :func:`knob_positions` maps the outputs back to the action.
    """
    import torch

    net = core.net_links
    ef = np.asarray(obs["edge_features"], dtype=np.float32)[:, net]
    B, E, _ = ef.shape
    knob = np.zeros((B, E, 1), dtype=np.float32)
    knob[:, knob_positions(core), 0] = 1.0
    pf = path_features(core)[:, net]
    return (
        torch.as_tensor(np.asarray(obs["node_features"], dtype=np.float32)),
        torch.as_tensor(np.asarray(obs["edge_index"])[0][:, net], dtype=torch.int64),
        torch.as_tensor(np.concatenate([ef, pf, knob], axis=-1)),
        torch.as_tensor(global_features(core, np.asarray(obs["flat"]))),
    )


def knob_positions(core: EnvCore) -> np.ndarray:
    """Positions of the WCMP knob links (``core.wcmp_links``, the action's order) among ``core.net_links``
    (the graph's edges in :func:`graph_inputs`).

    Raises
    ------
    ValueError
        If a knob link is not a network link (no fabric built by ainet-gym has one).
    """
    net = core.net_links
    pos = np.searchsorted(net, core.wcmp_links)
    pos = np.minimum(pos, max(net.shape[0] - 1, 0))
    if core.wcmp_links.size and (net.size == 0 or not np.array_equal(net[pos], core.wcmp_links)):
        raise ValueError(f"scenario {core.scenario.name!r}: a WCMP knob link is not a network link")
    return pos
