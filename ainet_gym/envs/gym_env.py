"""The Gymnasium environment: route the transfers of AI training jobs over a fabric
(:class:`FabricRoutingEnv`, the ``entry_point`` of every registered id, a single env over an
:class:`~ainet_gym.envs.core.EnvCore` of ``batch = 1``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np

from ainet_gym.envs.actions import (
    RESIDUAL_SCALE,
)
from ainet_gym.envs.core import EnvCore
from ainet_gym.envs.render import RENDER_MODES, check_render_mode
from ainet_gym.envs.reset_options import check_reset_options
from ainet_gym.envs.rewards import RewardFn
from ainet_gym.envs.state import (
    EnvSnapshot,
    GeneratorState,
    SingleWrapperState,
)
from ainet_gym.scenario.spec import Scenario

__all__ = ["FabricRoutingEnv"]


class FabricRoutingEnv(gym.Env):
    """Route the collectives of AI training jobs over a data-centre fabric.

    ## Description
    A flow-level, max-min fair fluid model of a fabric (spine-leaf, fat-tree or rail-optimised) runs
    data-parallel jobs that compute and communicate on their own clocks. Each step is one decision
    interval of simulated time (``dynamics.decision_interval_ms``, by default the ideal step time of
    the slowest job). The agent routes each job's connections over their equal-cost candidate paths.
    Background storage traffic follows static ECMP, except in the ``ecmp_weights`` and ``split_bg``
    modes, which route it too (the class ``jobs+bg`` of the baselines ``lp+bg``, ``greedy+bg``, ...).

    ## Action Space
    Fixed size, one *slot* per connection of every job slot (``S`` slots, ``P = routing.max_paths``):

    - ``"path"``: ``MultiDiscrete([P] * S)``, a candidate-path index per slot. An index at or past the
      slot's number of candidate paths ``n`` wraps to ``index mod n`` (use :meth:`action_masks` with
      MaskablePPO to avoid them).
    - ``"split"`` (default): ``Box(-1, 1, (S * P,))``; slot ``s`` gets weights ``(a + 1) / 2`` over its
      paths, normalised to split ratios (all zero: even split).
    - ``"ecmp_weights"``: ``Box(-1, 1, (W,))``, one WCMP weight ``(a + 1) / 2`` per switch next-hop
      link that is an equal-cost choice; a path's share is the product of its hops' normalised weights.
      Applies to all traffic, background included.
    - ``"split_bg"``: ``split`` over every connection: the ``S`` slots of ``split`` first, then one slot
      per connection of every background source (``G_c`` more, ``S' = S + G_c``), so ``Box(-1, 1,
      (S' * P,))`` routes background too, per connection (the class of ``lp+bg``; finer than
      ``ecmp_weights``, whose switch weights apply to every connection through a switch alike).
    - ``"choose"``: ``Discrete(K)``, one of K routing plans for the whole interval: the engine-level
      baselines of the ``jobs`` class (background on static ECMP), in this order: 0 ``ecmp``,
      1 ``spray``, 2 ``wcmp``, 3 ``greedy``, 4 ``lp`` (:data:`ainet_gym.routing.plans.PLANS`). A plan
      computes its split exactly as that baseline does, so always choosing ``k`` reproduces the
      baseline's rollout. ``info["plan_class"]`` names the class, ``info["plan"]`` the plan that ran.
    - ``"choose_bg"``: the same over the ``jobs+bg`` class (background routed too): 0 ``ecmp``,
      1 ``spray+bg``, 2 ``wcmp+bg``, 3 ``greedy+bg``, 4 ``lp+bg``, 5 ``solo-lp+bg``; with ``extra_plans``
      (e.g. ``("isolate0+bg", "isolate1+bg")``, :data:`ainet_gym.routing.plans.EXTRA_PLANS`) those plans
      follow, 6 on, in the order given. A weighted extra plan (``favour{j}+bg``, ``favour{j}-w{W}+bg``)
      makes the env's class ``jobs+bg+weights``: each step then also sets the share weights of the plan
      each instance picked (:meth:`EnvCore.set_plan_weights`; docs/learning.md, "issue-26zi").

    Slots whose connection does not exist or has one path are masked: ``info["action_mask"]`` (S,)
    and :meth:`action_masks` (S * P,) for sb3-contrib's MaskablePPO. Their actions are ignored.

    ## Observation Space
    ``Box(0, 1, (D,), float32)`` (``observation="flat"``), concatenated in this order:

    | index block                        | name               | min | max | meaning                                 |
    |------------------------------------|--------------------|-----|-----|-----------------------------------------|
    | ``H * N``                          | link_utilization   | 0   | 1   | bytes / (capacity * interval) of the N network links over the last H intervals, newest first |
    | ``N``                              | link_capacity      | 0   | 1   | current / nominal capacity (0 = failed) |
    | ``J * 5``                          | jobs               | 0   | 1   | per job slot: alive, efficiency (ideal/actual step), GPU utilisation, communicating now, iteration progress t/(t+ideal) |
    | ``S * 3``                          | slots              | 0   | 1   | per slot: controllable, offered demand next interval d/(1+d) in NIC-intervals (a background slot: its nominal demand), paths / P |
    | ``G * 2``                          | background         | 0   | 1   | per background source: active last interval, scheduled next interval |
    | ``1``                              | episode_progress   | 0   | 1   | step / episode_steps                    |
    | ``J * 3`` (``obs_features=("phase",)`` only) | job_phase | 0 | 1 | per job slot, in ideal iterations: time to its next communication phase, share of the iteration's communication bytes left, that share times its ideal communication time (:meth:`EnvCore.job_phase_features`) |

    ``env.unwrapped.core.obs_layout`` gives the slices. ``observation="graph"`` returns a Dict with
    this ``flat`` vector plus ``node_features`` (one-hot kind), ``edge_index`` (2, links) and
    ``edge_features`` (utilisation history, capacity fraction) for GNN policies. Every block is
    float32, ``edge_index`` too (node ids, exact below 2**24 nodes; cast to int64 for a GNN library),
    so ``gymnasium.wrappers.FlattenObservation`` gives a float32 vector.

    ## Rewards
    ``reward="gpu_utilization"`` (GPU-weighted mean of compute time / elapsed time in the interval) or
    ``"step_time"`` (mean over jobs of ideal / actual step time), or any :class:`RewardFn` object. Both
    lie in [0, 1]. Both components are in ``info`` every step.

    ## Starting State
    Jobs placed by the scenario's placement (random placement and failures drawn from the seed); all
    jobs at the start of an iteration (or waiting ``start_ms``, plus a per-episode draw within
    ``start_jitter_ms``); periodic background from its offset (plus a draw within
    ``offset_jitter_steps``); ECMP hash seed drawn from the seed. The default scenarios of the registered
    ids draw each job's start over at least one iteration, so every seed is another episode.

    ## Episode End
    Never terminated (a continuing task); truncated after ``episode_steps`` intervals.

    ## Arguments
    ``scenario`` (name, path, dict or Scenario), ``action_mode``, ``history`` (H, default 4),
    ``observation`` (``"flat"`` | ``"graph"``), ``reward``, ``episode_steps`` (overrides the scenario),
    ``render_mode`` (``"ansi"`` | ``"rgb_array"``), ``backend`` (``"numba"`` | ``"numpy"``; None: the
    ``AINET_GYM_BACKEND`` variable, else numba when it imports; both give the same results to round-off),
    ``info_keys`` (optional extra ``info``, computed only when asked: ``"links"`` adds
    ``link_capacity_gbps``, ``link_bytes``, ``link_utilization`` per link id; ``"flows"`` adds
    ``flow_bytes`` and ``flow_rate_gbps`` per action slot, i.e. per job connection; ``"collisions"`` the
    hot links shared by two or more routed connections), ``residual`` (None, or the name of an
    engine-level routing of class ``none`` or ``jobs+bg``, e.g. ``"lp+bg"`` or ``"solo-lp+bg"``, in the
    ``ecmp_weights`` and ``split_bg`` modes: the action then *adjusts* that policy's split each step
    instead of setting one, each path's share times ``exp(residual_scale * x)``, ``x`` the sum of the
    actions of the path's knob links (``ecmp_weights``) or the slot's path action (``split_bg``);
    actions of 0 give the base routing exactly), ``residual_scale`` (default ``log 4``) and
    ``obs_features`` (optional observation blocks, none by default: ``("phase",)`` appends ``job_phase``,
    each job's position in its iteration read from the simulator's state, after ``episode_progress``;
    the blocks before it keep their offsets) and ``extra_plans`` (``choose`` modes: plans appended to the
    mode's own, see the action space).

    ## Vectorized environment
    :class:`~ainet_gym.envs.vector_env.FabricRoutingVectorEnv` steps B copies with one batched engine call
    (``gymnasium.make_vec(id, num_envs=B, vectorization_mode="vector_entry_point")``).

    ## Version History
    - v0: initial release.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(
        self,
        scenario: str | os.PathLike | dict | Scenario = "spine-leaf-2to1",
        action_mode: str = "split",
        history: int = 4,
        observation: str = "flat",
        reward: str | RewardFn | None = None,
        episode_steps: int | None = None,
        render_mode: str | None = None,
        backend: str | None = None,
        info_keys: Sequence[str] = (),
        residual: str | None = None,
        residual_scale: float = RESIDUAL_SCALE,
        obs_features: Sequence[str] = (),
        extra_plans: Sequence[str] = (),
    ) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        self.core = EnvCore(
            scenario, 1, action_mode, history, observation, reward, episode_steps, backend, info_keys,
            residual, residual_scale, obs_features, extra_plans,
        )  # fmt: skip
        self.action_space = self.core.action_space
        self.observation_space = self.core.observation_space
        self.render_mode = render_mode

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict[str, Any]]:
        check_reset_options(options)
        super().reset(seed=seed)
        if seed is None and not hasattr(self, "_seeded"):
            seed = int(self.np_random.integers(2**31))
        self._seeded = True
        obs, info = self.core.reset([seed])
        return self._one(obs), self._one_info(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, r, term, trunc, info = self.core.step(action)  # validated (and converted) by the core
        return self._one(obs), float(r[0]), bool(term[0]), bool(trunc[0]), self._one_info(info)

    def snapshot(self) -> EnvSnapshot:
        """The env's state (:meth:`EnvCore.snapshot`, with the env's own, :class:`SingleWrapperState`):
        :meth:`restore` puts it back, and the same actions from there give the same rollout, bit for bit
        (planning, tree search)."""
        rng = self._np_random
        own = SingleWrapperState(
            np_random=None if rng is None else GeneratorState.of(rng), seeded=hasattr(self, "_seeded")
        )
        return replace(self.core.snapshot(), wrapper=own)

    def restore(self, snap: EnvSnapshot) -> None:
        """Put the state of ``snap`` (:meth:`snapshot`) back. A snapshot without the single env's own
        (:meth:`EnvCore.snapshot`, a vector env's of one copy) restores the core; the env then counts as
        not reset (its next ``reset()`` without a seed draws the core's seed) and keeps its generator.

        Raises
        ------
        ValueError
            If ``snap`` is not a snapshot of an env of this scenario with one instance.
        """
        self.core.restore(snap)
        own = snap.wrapper if isinstance(snap.wrapper, SingleWrapperState) else None
        if own is not None and own.np_random is not None:
            self._np_random = own.np_random.generator()
        if own is not None and own.seeded:
            self._seeded = True
        elif hasattr(self, "_seeded"):
            del self._seeded

    def action_masks(self) -> np.ndarray:
        """Valid path indices per slot, flat (S * P,) bool, for MaskablePPO."""
        return self.core.action_masks()[0]

    @staticmethod
    def _one(obs: Any) -> Any:
        if isinstance(obs, dict):
            return {k: v[0] for k, v in obs.items()}
        return obs[0]

    @staticmethod
    def _one_info(info: dict[str, Any]) -> dict[str, Any]:
        """The single env's info: each batched value's row 0, a numpy scalar as a Python one."""
        out = {}
        for k, v in info.items():
            if type(v) is np.ndarray and v.ndim == 1:  # v.item() is v[0].item(), one call instead of two
                out[k] = v.item(0)
                continue
            x = v[0]
            out[k] = x.item() if isinstance(x, np.generic) else x
        return out

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            return None
        from ainet_gym.envs.render import render_ansi, render_rgb

        if self.render_mode == "ansi":
            return render_ansi(self.core, 0)
        return render_rgb(self.core, 0)
