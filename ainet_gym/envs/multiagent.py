"""Per-switch agents: a PettingZoo ``ParallelEnv`` where each switch sets the WCMP weights of its next hops.

Real fabrics route hop by hop: a switch splits traffic over its equal-cost next hops from what it sees
locally. Here one agent per switch of the chosen tier sets the weights of its own next hops (WCMP at that
switch); every other switch keeps equal weights. The engine is the one of the single-agent env: the agents'
weights fill the action vector of :class:`~ainet_gym.envs.env.EnvCore` in its ``ecmp_weights`` mode and
:meth:`EnvCore.decode` turns them into a split of every connection (a path's share is the product of its
hops' normalised weights), so both envs route identically given the same weights.

:class:`SwitchAgents` holds the per-switch view, batched over the core's instances (the env uses one
instance, the ``marl`` evaluation agent one per episode); :class:`FabricParallelEnv` is the PettingZoo env
(see its docstring for the spaces, rewards and the life cycle of agents). Build it with
:func:`ainet_gym.parallel_env` (or :func:`ainet_gym.aec_env` for the AEC form).
"""

from __future__ import annotations

import functools
import os
import re
import reprlib
import warnings
from typing import Any

import numpy as np
from gymnasium import spaces

from ainet_gym.envs.core import EnvCore
from ainet_gym.envs.observation import obs_layout, squash
from ainet_gym.envs.render import RENDER_MODES, check_render_mode
from ainet_gym.envs.reset_options import reset_options_problem
from ainet_gym.envs.rewards import RewardFn
from ainet_gym.errors import check_choice, choice_message
from ainet_gym.scenario.spec import Scenario
from ainet_gym.sim.world import StepResult

__all__ = [
    "AGENT_TIERS",
    "LOCAL_OBS_BLOCKS",
    "PETTINGZOO_PROBE_KEY",
    "REWARD_MODES",
    "FabricParallelEnv",
    "SwitchAgents",
    "aec_env",
    "check_parallel_reset_options",
    "parallel_env",
]

AGENT_TIERS = ("leaf", "all")
REWARD_MODES = ("shared", "local")
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
#: The reset options PettingZoo's own API tests pass to check ``reset``'s signature:
#: ``pettingzoo.test.parallel_api_test`` and ``api_test`` (1.27) reset with ``options={"options": 1}``.
#: A mapping of this key alone is ignored with a warning; every other option is refused.
PETTINGZOO_PROBE_KEY = "options"


def check_parallel_reset_options(options: Any) -> None:
    """The ``options`` of :meth:`FabricParallelEnv.reset`: the env takes none, so ``None`` or ``{}``.

    PettingZoo's signature probe (a mapping of :data:`PETTINGZOO_PROBE_KEY` alone) warns with the message of
    the Gymnasium envs' refusal and is ignored, so that PettingZoo's own API tests pass.

    Raises
    ------
    ValueError
        For any other option: naming each key and its value (or the value, if ``options`` is not a mapping)
        and what is allowed.
    """
    problem = reset_options_problem(options)
    if problem is None:
        return
    if isinstance(options, dict):
        refused = sorted((k for k in options if k != PETTINGZOO_PROBE_KEY), key=str)
        if not refused:
            warnings.warn(f"{problem}; ignored by the PettingZoo env", UserWarning, stacklevel=3)
            return
        given = ", ".join(f"{k!r} = {reprlib.repr(options[k])}" for k in refused)
        what = f"reset option{'s' if len(refused) > 1 else ''} {given}"
    else:
        what = f"reset options = {reprlib.repr(options)} (a {type(options).__name__})"
    raise ValueError(
        f"{what}: not supported; allowed: None or {{}} (the env takes no reset options: a scenario, its seed "
        "and the episode length are set at construction and by seed=; PettingZoo's API-test probe "
        f"{{{PETTINGZOO_PROBE_KEY!r}: ...}} alone is ignored, with a warning)"
    )


def _require_pettingzoo() -> Any:
    try:
        import pettingzoo
    except ImportError as e:
        raise ImportError(
            "the multi-agent env needs PettingZoo: pip install 'ainet-gym[pettingzoo]' "
            f"(or pip install pettingzoo) ({e})"
        ) from e
    return pettingzoo


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
            from ainet_gym.routing.policies import avoid_dead_paths

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
        from ainet_gym.routing.policies import connection_demand

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


def _parse_reward(reward: str | float) -> float:
    """Weight of the local reward: ``"shared"`` 0, ``"local"`` 1, a number in [0, 1] a mix."""
    if isinstance(reward, str):
        check_choice(
            "reward", reward, REWARD_MODES, more=" or a number in [0, 1] (the weight of the local reward)"
        )
        return 0.0 if reward == "shared" else 1.0
    if isinstance(reward, bool) or not isinstance(reward, int | float | np.floating | np.integer):
        raise ValueError(f"reward = {reward!r}: must be 'shared', 'local' or a number in [0, 1]")
    if not 0.0 <= float(reward) <= 1.0:
        raise ValueError(f"reward = {reward!r}: the local weight must lie in [0, 1]")
    return float(reward)


class FabricParallelEnv:
    """Per-switch routing agents over one fabric (PettingZoo ``ParallelEnv``).

    :func:`parallel_env` returns an instance of a subclass that also derives from PettingZoo's
    ``ParallelEnv`` (built on first use, so that importing this module does not need PettingZoo).

    ## Description
    The fabric, jobs and dynamics of the single-agent :class:`~ainet_gym.envs.env.FabricRoutingEnv`; one step is
    one decision interval. One agent per switch of the tier (``agents="leaf"``: every leaf or edge switch;
    ``"all"``: every switch with a next-hop choice) sets the WCMP weights of its own next hops; switches
    without an agent keep equal weights. Agents are named after their switches (``leaf_0`` is ``leaf0``).

    ## Action Space (per agent)
    ``Box(-1, 1, (K,), float32)``: weight ``(a + 1) / 2`` of each of the switch's next hops (its links that
    are an equal-cost choice, in link-id order), ``K`` = the most next hops of any agent; entries past the
    switch's own are padding and ignored (``info[agent]["next_hop_mask"]`` marks the live next hops). At each hop the traffic of a
    group splits in proportion to the weights (all zero: even); a path's share is the product over its hops.
    A live agent left out of the actions dict keeps equal weights for that interval.

    ## Observation Space (per agent)
    ``Box(0, 1, (D,), float32)``, never the global state (``SwitchAgents.obs_layout`` gives the slices):

    | block              | size      | meaning                                                               |
    |--------------------|-----------|-----------------------------------------------------------------------|
    | link_utilization   | H * Lmax  | bytes / (capacity * interval) of the switch's own network links (next hops first, then its other in- and out-links), the last H intervals, newest first; 0 padding |
    | link_capacity      | Lmax      | current / nominal capacity of the same links (0: failed or padding)   |
    | next_hop_mask      | K         | 1 where the entry is a live next hop                                  |
    | jobs               | J * 6     | per job slot: carried (a connection of the job can enter the switch), then, if carried, the job's alive, efficiency, GPU utilisation, communicating, iteration progress |
    | demand             | J + G     | bytes each job slot (then each background source) offers in the coming interval through the switch's next hops (demand times the share of candidate paths through it) over the next hops' capacity in one interval, as d / (1 + d) |
    | agent_id           | N         | one-hot of the agent index (for parameter-shared policies)            |
    | episode_progress   | 1         | step / episode_steps                                                  |

    ``state()`` returns the single-agent env's flat observation (global: every link, job and slot), for
    centralised critics; ``state_space`` is its space.

    ## Rewards
    ``reward="shared"``: every agent gets the env reward (``shared_reward``, by default the scenario's
    kind: GPU utilisation); ``"local"``: 1 - the peak utilisation of the agent's own live next hops in the
    interval; a number ``alpha`` in [0, 1]: ``(1 - alpha) * shared + alpha * local``. All lie in [0, 1].

    ## Agents appearing and disappearing
    An agent is in ``env.agents`` while its switch has a choice: at least two live next hops in one ECMP
    group (a failed next hop is masked, its weight forced to 0). A switch that has no choice at the reset
    (e.g. its up-links fail at step 0) joins once enough of them are repaired. A switch that loses its
    last choice during the episode is terminated in that step and leaves; PettingZoo does not revive an
    agent within an episode, so it rejoins at the next reset (its switch keeps equal weights meanwhile,
    over its live next hops). All agents are truncated after ``episode_steps``.

    ## Reset options
    None: ``reset(options=...)`` with anything but ``None`` or ``{}`` raises ``ValueError`` naming each key
    and its value and what is allowed, as the Gymnasium envs do, and the episode goes on as before. One
    exception: PettingZoo's own API tests reset with ``options={"options": 1}`` to check the signature; a
    mapping of the key ``"options"`` alone warns (``UserWarning``) and resets as without it.

    ## Arguments
    ``scenario``, ``agents`` (``"leaf"`` | ``"all"``), ``reward`` (``"shared"`` | ``"local"`` | weight),
    ``shared_reward`` (a name or :class:`~ainet_gym.envs.rewards.RewardFn`), ``history`` (H, default 4),
    ``episode_steps``, ``withdraw_dead`` (True: traffic avoids paths through failed links, as the spray and
    wcmp baselines do; False: exactly the single-agent ``ecmp_weights`` routing), ``render_mode``
    (``"ansi"``: the hottest links, each job's step time and the live agents, as text; ``"rgb_array"``:
    the link-utilisation heat map of the single-agent env, (240, 640, 3) uint8).
    """

    metadata = {
        "name": "ainet_gym_switches_v0",
        "render_modes": list(RENDER_MODES),
        "render_fps": 4,
        "is_parallelizable": True,
    }

    def __init__(
        self,
        scenario: str | os.PathLike | dict | Scenario = "periodic-interference",
        agents: str = "leaf",
        reward: str | float = "shared",
        shared_reward: str | RewardFn | None = None,
        history: int = 4,
        episode_steps: int | None = None,
        withdraw_dead: bool = True,
        render_mode: str | None = None,
    ) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        self.local_weight = _parse_reward(reward)
        self.core = EnvCore(
            scenario,
            batch=1,
            action_mode="ecmp_weights",
            history=history,
            reward=shared_reward,
            episode_steps=episode_steps,
        )
        self.switches = SwitchAgents(self.core, agents, withdraw_dead)
        self.possible_agents: list[str] = list(self.switches.names)
        self.agents: list[str] = []
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self.observation_spaces = dict.fromkeys(self.possible_agents, self.switches.observation_space)
        self.action_spaces = {a: self.switches.action_space for a in self.possible_agents}
        self.state_space = self.core.observation_space
        self.render_mode = render_mode
        self._finished: set[str] = set()
        self._flat: np.ndarray | None = None
        self._rng: np.random.Generator | None = None

    @functools.cache  # noqa: B019 (one space object per agent, as PettingZoo asks)
    def observation_space(self, agent: str) -> spaces.Box:
        return self.observation_spaces[agent]

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Box:
        return self.action_spaces[agent]

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        return len(self.possible_agents)

    # ------------------------------------------------------------------ API
    def reset(
        self, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        check_parallel_reset_options(options)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        elif self._rng is None:
            self._rng = np.random.default_rng()
            seed = int(self._rng.integers(2**31))
        flat, _ = self.core.reset([seed])
        self._flat = flat
        self._finished = set()
        present = self.switches.has_choice()[0]
        self.agents = [a for i, a in enumerate(self.possible_agents) if present[i]]
        obs = self.switches.observe(flat)[0]
        return {a: obs[self._index[a]] for a in self.agents}, self._infos(self.agents, None)

    def step(self, actions: dict[str, np.ndarray]) -> tuple[dict, dict, dict, dict, dict]:
        if self._flat is None:
            raise RuntimeError("step() called before reset()")
        sw = self.switches
        A, K = sw.n_agents, sw.K
        acts = np.zeros((1, A, K))
        acting = np.zeros((1, A), dtype=bool)
        for name, a in actions.items():
            if name not in self._index:  # a dict lookup per agent and step; the message only on failure
                raise ValueError(
                    choice_message("actions key", name, self.possible_agents, problem="no such agent")
                )
            if name not in self.agents:
                raise ValueError(f"actions[{name!r}]: the agent is not live (env.agents: {self.agents})")
            acts[0, self._index[name]] = self._check_action(name, a)
            acting[0, self._index[name]] = True
        before = list(self.agents)
        flat, shared, _, trunc, info = self.core.step_split(sw.split(acts, acting))
        self._flat = flat
        res = self.core.last_result
        assert res is not None
        local = sw.local_reward(res)[0]
        r = (1.0 - self.local_weight) * float(shared[0]) + self.local_weight * local
        truncated = bool(trunc[0])
        present = sw.has_choice()[0]
        obs_all = sw.observe(flat)[0]
        obs, rew, term, tr = {}, {}, {}, {}
        for name in before:
            i = self._index[name]
            obs[name] = obs_all[i]
            rew[name] = float(r[i])
            term[name] = not present[i]
            tr[name] = truncated
        gone = {a for a in before if term[a] or tr[a]}
        self._finished |= gone
        if truncated:
            self.agents = []
        else:
            self.agents = [
                a for i, a in enumerate(self.possible_agents) if present[i] and a not in self._finished
            ]
            for name in self.agents:  # newcomers (repaired switches) get their first observation
                if name not in obs:
                    obs[name] = obs_all[self._index[name]]
        infos = self._infos(list(obs), info)
        return obs, rew, term, tr, infos

    def _check_action(self, name: str, a: Any) -> np.ndarray:
        x = np.asarray(a, dtype=np.float64)
        K = self.switches.K
        if x.shape != (K,):
            raise ValueError(
                f"actions[{name!r}] shape {x.shape}: expected ({K},) next-hop weights in [-1, 1]"
            )
        bad = ~np.isfinite(x) | (x < -1.0 - 1e-6) | (x > 1.0 + 1e-6)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"actions[{name!r}][{k}] = {float(x[k])!r}: out of the action space; allowed [-1, 1]"
            )
        return np.clip(x, -1.0, 1.0)  # only float32 round-off of at most 1e-6 is clipped here

    def _infos(self, names: list[str], info: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        live = self.switches.hop_live()[0]
        common: dict[str, Any] = {}
        if info is not None:
            for k in ("reward_gpu_utilization", "reward_step_time", "max_link_utilization"):
                common[k] = float(info[k][0])
        return {a: {"next_hop_mask": live[self._index[a]].copy(), **common} for a in names}

    def state(self) -> np.ndarray:
        """The global state: the single-agent env's flat observation (for centralised critics)."""
        if self._flat is None:
            raise RuntimeError("state() called before reset()")
        return self._flat[0].copy()

    def render(self) -> str | np.ndarray | None:
        """The fabric as the single-agent env renders it: ``"ansi"`` the hottest links and each job's
        step time, with the live agents; ``"rgb_array"`` the link-utilisation heat map (240, 640, 3)
        uint8; None without a render mode."""
        if self.render_mode is None:
            return None
        if self._flat is None:
            raise RuntimeError("render() called before reset()")
        from ainet_gym.envs.render import render_ansi, render_rgb

        if self.render_mode == "ansi":
            return render_ansi(self.core, 0) + f"agents ({len(self.agents)}): {' '.join(self.agents)}\n"
        return render_rgb(self.core, 0)

    def close(self) -> None:
        return None


@functools.cache
def _env_class() -> type:
    """:class:`FabricParallelEnv` with PettingZoo's ``ParallelEnv`` as a base (built on first use, so that
    importing this module does not need PettingZoo)."""
    base = _require_pettingzoo().ParallelEnv
    return type("FabricParallelEnv", (FabricParallelEnv, base), {"__doc__": FabricParallelEnv.__doc__})


def parallel_env(
    scenario: str | os.PathLike | dict | Scenario = "periodic-interference",
    agents: str = "leaf",
    reward: str | float = "shared",
    **kwargs: Any,
) -> FabricParallelEnv:
    """A PettingZoo ``ParallelEnv`` with one agent per switch (see :class:`FabricParallelEnv`).

    Raises
    ------
    ImportError
        If PettingZoo is not installed (the ``pettingzoo`` extra).
    ValueError
        Bad ``agents``, ``reward`` or scenario arguments, or a fabric without next-hop choices.
    """
    return _env_class()(scenario=scenario, agents=agents, reward=reward, **kwargs)


def aec_env(
    scenario: str | os.PathLike | dict | Scenario = "periodic-interference",
    agents: str = "leaf",
    reward: str | float = "shared",
    **kwargs: Any,
) -> Any:
    """The AEC form of :func:`parallel_env`, through PettingZoo's ``parallel_to_aec`` converter."""
    _require_pettingzoo()
    from pettingzoo.utils.conversions import parallel_to_aec

    return parallel_to_aec(parallel_env(scenario, agents, reward, **kwargs))
