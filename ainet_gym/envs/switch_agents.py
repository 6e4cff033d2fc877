"""The per-switch view of the multi-agent env (:mod:`ainet_gym.envs.multiagent`): :class:`SwitchAgents`, one
agent per switch of a tier (:data:`AGENT_TIERS`) with a next-hop choice, batched over an
:class:`~ainet_gym.envs.core.EnvCore` in its ``ecmp_weights`` mode: which next hops are live, the split the agents'
weights give every connection, each agent's local observation (:data:`LOCAL_OBS_BLOCKS`) and its local reward.
The ``marl`` evaluation agent uses it directly, one instance per episode."""

from __future__ import annotations

import re

import numpy as np
from gymnasium import spaces

from ainet_gym.envs.core import EnvCore
from ainet_gym.envs.obs_layout import obs_layout, squash
from ainet_gym.errors import check_choice
from ainet_gym.sim.world import StepResult

__all__ = [
    "AGENT_TIERS",
    "LOCAL_OBS_BLOCKS",
    "SwitchAgents",
]


AGENT_TIERS = ("leaf", "all")
LOCAL_OBS_BLOCKS = (
    "link_utilization",
    "link_capacity",
    "next_hop_mask",
    "jobs",
    "demand",
    "agent_id",
    "episode_progress",
)
_ENDPOINT_KINDS = ("gpu", "storage", "nvswitch")


class SwitchAgents:
    """The per-switch view of an :class:`EnvCore` in ``ecmp_weights`` mode, batched over its instances.

    Agent ``i`` is switch ``nodes[i]``; its *next hops* are its links that are an equal-cost choice
    (``fabric.link_group >= 0``: its up-links, and parallel down-links to one neighbour), padded to ``K``,
    in link-id order. Its *own links* are the network links into and out of it, next hops first, padded
    to ``n_links``. All arrays have fixed shapes for the scenario, so a policy's spaces never change.

    Parameters
    ----------
    core
        The core the agents act on (``action_mode="ecmp_weights"``).
    agents
        ``"leaf"``: every leaf (edge) switch with a next-hop choice; ``"all"``: every switch with one.
    withdraw_dead
        True (default): a switch drops a failed next hop from its group (weight 0) and traffic avoids
        paths through a failed link further on (as a routing protocol withdraws the route), like the
        ``spray`` and ``wcmp`` baselines; False: the weights apply as given, exactly as the single-agent
        ``ecmp_weights`` mode (whose WCMP, :meth:`FabricWorld.wcmp`, still moves the share of a path
        through a failed link to the connection's live paths).

    Raises
    ------
    ValueError
        If ``agents`` is unknown, the core is not in ``ecmp_weights`` mode, or no switch of the tier has
        a next-hop choice (e.g. a single-switch fabric).
    """

    def __init__(self, core: EnvCore, agents: str = "leaf", withdraw_dead: bool = True) -> None:
        check_choice("agents", agents, AGENT_TIERS)
        if core.action_mode != "ecmp_weights":
            raise ValueError(
                f"core.action_mode = {core.action_mode!r}: the switch agents need 'ecmp_weights'"
            )
        self.core = core
        self.tier = agents
        self.withdraw_dead = bool(withdraw_dead)
        f = core.world.fabric
        knob = core.wcmp_links  # (W,) link ids, the order of the ecmp_weights action vector
        owner_node = f.link_src[knob]
        if agents == "leaf":
            cand = [int(n) for n in f.leaf_node]
        else:
            cand = [n for n, k in enumerate(f.node_kind) if k not in _ENDPOINT_KINDS]
        nodes = [n for n in cand if (owner_node == n).any()]
        if not nodes:
            raise ValueError(
                f"scenario {core.scenario.name!r}: no switch of tier {agents!r} has an equal-cost next-hop "
                f"choice ({f.spec.topology} fabric); per-switch agents have nothing to route"
            )
        self.nodes = np.asarray(nodes, dtype=np.int64)  # (agents,) node id
        # agent names: the switch names in PettingZoo's <descriptor>_<number> form (leaf3 -> leaf_3)
        self.names = [re.sub(r"(\d+)$", r"_\1", f.node_names[n]) for n in nodes]
        A = self.n_agents = len(nodes)
        # next hops: positions in the ecmp_weights vector, padded with -1
        per = [np.flatnonzero(owner_node == n) for n in nodes]
        self.K = max(p.size for p in per)
        self.hop_pos = np.full((A, self.K), -1, dtype=np.int64)  # (agents, K) index into knob
        for i, p in enumerate(per):
            self.hop_pos[i, : p.size] = p
        self.hop_valid = self.hop_pos >= 0  # (agents, K)
        self.hop_link = np.where(self.hop_valid, knob[np.maximum(self.hop_pos, 0)], -1)  # (agents, K)
        # own links: positions in core.net_links (the links of the utilisation history), next hops first
        net = core.net_links
        pos_of_link = np.full(f.n_links, -1, dtype=np.int64)
        pos_of_link[net] = np.arange(net.size)
        own = []
        for i, n in enumerate(nodes):
            hops = self.hop_link[i][self.hop_valid[i]]
            rest = net[((f.link_src[net] == n) | (f.link_dst[net] == n)) & ~np.isin(net, hops)]
            own.append(pos_of_link[np.concatenate([hops, rest])])
        self.n_links = max(o.size for o in own)
        self.own_pos = np.full((A, self.n_links), -1, dtype=np.int64)  # (agents, own links) into net_links
        for i, o in enumerate(own):
            self.own_pos[i, : o.size] = o
        self.own_valid = self.own_pos >= 0
        self.own_link = np.where(self.own_valid, net[np.maximum(self.own_pos, 0)], -1)  # (agents, own)
        # ECMP groups of each agent (for "has a choice")
        grp = f.link_group[self.hop_link.clip(0)]
        self.hop_group = np.where(self.hop_valid, grp, -1)  # (agents, K)
        cap = np.where(self.hop_valid, f.capacity_bytes_per_s[self.hop_link.clip(0)], 0.0)
        self.hop_capacity_bytes_per_s = cap  # (agents, K) nominal bytes/s
        self.J = core.world.n_job_slots
        self.G = core.n_bg
        H = core.history
        sizes = {
            "link_utilization": H * self.n_links,
            "link_capacity": self.n_links,
            "next_hop_mask": self.K,
            "jobs": self.J * 6,
            "demand": self.J + self.G,
            "agent_id": A,
            "episode_progress": 1,
        }
        self.obs_layout, o = obs_layout(sizes)
        self.obs_dim = o
        self.observation_space = spaces.Box(0.0, 1.0, shape=(o,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(self.K,), dtype=np.float32)
        self._share_key: np.ndarray | None = None
        self._share_cache = np.zeros((0, A))

    # ------------------------------------------------------------------ liveness
    def hop_live(self) -> np.ndarray:
        """(batch, agents, K) bool: next hops that exist and have capacity > 0 in the coming interval."""
        sim = self.core.world.sim
        assert sim is not None
        return self.hop_valid[None] & (sim.engine_state.capacity_bytes_per_s[:, self.hop_link.clip(0)] > 0)

    def has_choice(self) -> np.ndarray:
        """(batch, agents) bool: the switch has at least two live next hops in one ECMP group, so its
        weights change something. An agent without a choice is not in ``env.agents``."""
        live = self.hop_live()
        same = (self.hop_group[:, :, None] == self.hop_group[:, None, :]) & (self.hop_group[:, :, None] >= 0)
        count = (live[:, :, None, :] & same[None]).sum(axis=3)  # (batch, agents, K) live peers per hop
        return ((count >= 2) & live).any(axis=2)

    # ------------------------------------------------------------------ actions
    def split(self, actions: np.ndarray, acting: np.ndarray) -> np.ndarray:
        """The split (connections, max_paths) of every connection when the agents marked in ``acting``
        (batch, agents) play ``actions`` (batch, agents, K) in [-1, 1] (weight ``(a + 1) / 2`` per next
        hop, padding ignored); the other switches keep equal weights."""
        core = self.core
        B = core.batch
        a = np.asarray(actions, dtype=np.float64)
        full = np.ones((B, core.wcmp_links.size))  # weight 1 everywhere: equal weights
        ok = acting[:, :, None] & self.hop_valid[None]
        bi, ai, ki = np.nonzero(ok)
        full[bi, self.hop_pos[ai, ki]] = a[bi, ai, ki]
        if self.withdraw_dead:
            dead = self.hop_valid[None] & ~self.hop_live()
            bi, ai, ki = np.nonzero(dead)
            full[bi, self.hop_pos[ai, ki]] = -1.0  # weight 0: the switch drops the dead next hop
        split = core.decode(full)
        sim = core.world.sim
        assert sim is not None
        if self.withdraw_dead and (sim.engine_state.capacity_bytes_per_s <= 0).any():
            from ainet_gym.routing.oblivious import avoid_dead_paths

            split = avoid_dead_paths(
                core.routing_context, split
            )  # drop paths through a failed link, renormalise
        return split

    # ------------------------------------------------------------------ observation
    def _share(self) -> np.ndarray:
        """(connections, agents): the fraction of each connection's candidate paths that leave the
        agent's switch through one of its next hops (cached until the connections change)."""
        w = self.core.world
        sim = w.sim
        assert sim is not None
        if self._share_key is sim.conn_paths:  # the array itself: an id could be reused after a rebuild
            return self._share_cache
        f = w.fabric
        A = self.n_agents
        owner = np.full(f.n_links + 1, -1, dtype=np.int64)  # index -1 (padding) -> no agent
        owner[self.hop_link[self.hop_valid]] = np.nonzero(self.hop_valid)[0]
        paths = sim.conn_paths  # (conns, P, hops) local link ids, -1 padded
        valid = np.arange(paths.shape[1])[None, :] < sim.conn_npaths[:, None]
        who = np.where(valid[:, :, None], owner[paths], -1)
        c = np.broadcast_to(np.arange(paths.shape[0])[:, None, None], who.shape)[who >= 0]
        cnt = np.bincount(c * A + who[who >= 0], minlength=paths.shape[0] * A).reshape(-1, A)
        self._share_cache = cnt / np.maximum(sim.conn_npaths, 1)[:, None]
        self._share_key = sim.conn_paths
        return self._share_cache

    def _entering(self) -> tuple[np.ndarray, np.ndarray]:
        """Offered bytes in the coming interval entering each switch to be routed over its next hops,
        per job slot (batch, agents, J) and per background source (batch, agents, G): each connection's
        demand (:func:`~ainet_gym.routing.policies.connection_demand`) times its share of candidate paths through
        the switch; and a (batch, agents, J) flag of the jobs whose connections can enter it."""
        from ainet_gym.routing.loads import connection_demand

        w = self.core.world
        sim = w.sim
        assert sim is not None
        B, A, J, G = w.batch, self.n_agents, self.J, self.G
        share = self._share()  # (conns, agents)
        d = connection_demand(w)  # (conns,)
        slot_of_unit = np.full(sim.n_units, -1, dtype=np.int64)  # job slot j, or J + background index
        alive = w.job_unit >= 0
        slot_of_unit[w.job_unit[alive]] = np.nonzero(alive)[1]
        if G:
            slot_of_unit[w.bg_unit.reshape(-1)] = J + np.tile(np.arange(G), B)
        slot = slot_of_unit[sim.conn_unit]  # (conns,)
        inst = sim.unit_inst[sim.conn_unit]
        keep = slot >= 0
        key = ((inst[keep] * A)[:, None] + np.arange(A)[None, :]) * (J + G) + slot[keep][:, None]
        n = B * A * (J + G)
        load = np.bincount(key.reshape(-1), (share[keep] * d[keep, None]).reshape(-1), minlength=n)
        carried = np.bincount(key.reshape(-1), (share[keep] > 0).reshape(-1), minlength=n) > 0
        load = load.reshape(B, A, J + G)
        carried = carried.reshape(B, A, J + G)
        return load[..., :J], load[..., J:], carried[..., :J]

    def observe(self, flat_obs: np.ndarray) -> np.ndarray:
        """(batch, agents, obs_dim) float32 local observations; ``flat_obs`` is the core's flat
        observation (batch, D) of the same moment (its job features are reused for the carried jobs)."""
        core = self.core
        w = core.world
        sim = w.sim
        assert sim is not None
        B, A, H, L = core.batch, self.n_agents, core.history, self.n_links
        out = np.zeros((B, A, self.obs_dim))
        lay = self.obs_layout
        u = np.minimum(core.state.util_hist, 1.0)[:, :, np.maximum(self.own_pos, 0)]  # (B, H, A, L)
        u = np.where(self.own_valid[None, None], u, 0.0)
        out[:, :, lay["link_utilization"]] = u.transpose(0, 2, 1, 3).reshape(B, A, H * L)
        capf = (
            sim.engine_state.capacity_bytes_per_s[:, self.own_link.clip(0)]
            / w.fabric.capacity_bytes_per_s[self.own_link.clip(0)]
        )
        out[:, :, lay["link_capacity"]] = np.where(self.own_valid[None], capf, 0.0)
        out[:, :, lay["next_hop_mask"]] = self.hop_live()
        job_load, bg_load, carried = self._entering()
        scale = (
            self.hop_capacity_bytes_per_s.sum(axis=1) * w.decision_interval_s
        )  # (agents,) bytes per interval
        jf = np.asarray(flat_obs)[:, core.obs_layout["jobs"]].reshape(B, 1, self.J, -1)
        jobs = np.concatenate([carried[..., None], np.where(carried[..., None], jf, 0.0)], axis=3)
        out[:, :, lay["jobs"]] = jobs.reshape(B, A, -1)
        out[:, :, lay["demand"]] = squash(np.concatenate([job_load, bg_load], axis=2) / scale[None, :, None])
        out[:, :, lay["agent_id"]] = np.eye(A)[None]
        progress = np.minimum(w.state.step_count / core.episode_steps, 1.0)
        out[:, :, lay["episode_progress"]] = progress[:, None, None]
        return out.astype(np.float32)

    # ------------------------------------------------------------------ reward
    def local_reward(self, res: StepResult) -> np.ndarray:
        """(batch, agents): 1 - the peak utilisation of the switch's live next hops in the interval
        (1 with none live): the maximum-link-utilisation objective of traffic engineering, seen from
        one switch."""
        u = res.link_utilization[:, self.hop_link.clip(0)]  # (B, A, K)
        live = self.hop_valid[None] & (
            self.core.world.sim.engine_state.capacity_bytes_per_s[:, self.hop_link.clip(0)] > 0
        )
        peak = np.where(live, u, 0.0).max(axis=2)
        return 1.0 - np.minimum(peak, 1.0)
