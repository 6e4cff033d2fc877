"""The PettingZoo env of :mod:`ainet_gym.envs.multiagent` without PettingZoo: :class:`FabricParallelEnv`
(spaces, ``reset``, ``step``, the life cycle of agents, ``state``, ``render``) over one
:class:`~ainet_gym.envs.switch_agents.SwitchAgents`, its reward weighting (:data:`REWARD_MODES`) and its reset
options (:func:`check_parallel_reset_options`, with PettingZoo's signature probe :data:`PETTINGZOO_PROBE_KEY`).
:func:`ainet_gym.envs.multiagent.parallel_env` adds PettingZoo's ``ParallelEnv`` as a base on first use."""

from __future__ import annotations

import functools
import os
import reprlib
import warnings
from typing import Any

import numpy as np
from gymnasium import spaces

from ainet_gym.envs.core import EnvCore
from ainet_gym.envs.render import RENDER_MODES, check_render_mode
from ainet_gym.envs.reset_options import reset_options_problem
from ainet_gym.envs.rewards import RewardFn
from ainet_gym.envs.switch_agents import SwitchAgents
from ainet_gym.errors import check_choice, choice_message
from ainet_gym.scenario.spec import Scenario

__all__ = [
    "PETTINGZOO_PROBE_KEY",
    "REWARD_MODES",
    "FabricParallelEnv",
    "check_parallel_reset_options",
]


REWARD_MODES = ("shared", "local")


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
