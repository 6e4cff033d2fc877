"""The native vector env: B copies of one scenario stepped by one batched engine call."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ainet_gym.envs.actions import RESIDUAL_SCALE
from ainet_gym.envs.core import EnvCore
from ainet_gym.envs.render import RENDER_MODES, check_render_mode
from ainet_gym.envs.reset_options import check_reset_options
from ainet_gym.envs.rewards import RewardFn
from ainet_gym.envs.state import EnvSnapshot, GeneratorState, VectorWrapperState
from ainet_gym.scenario.spec import Scenario

__all__ = ["FabricRoutingVectorEnv"]


class FabricRoutingVectorEnv(VectorEnv):
    """``num_envs`` copies of :class:`~ainet_gym.envs.env.FabricRoutingEnv` in one batched engine.

    Same arguments and spaces as the single env. Autoreset is Gymnasium's next-step mode: the step
    after an episode ends resets that copy (its action is ignored, reward 0, not done). ``info`` is a
    dict of arrays with a leading ``num_envs`` axis (and a ``_key`` mask per key, as Gymnasium's
    vector envs do). ``reset(seed=s)`` seeds copy ``i`` with ``s + i``, so copy ``i`` matches a single
    env reset with ``seed = s + i`` step for step.

    ``max_episode_steps`` (what ``gymnasium.make_vec`` passes from a registered id's spec, or yours)
    truncates each copy's episode after that many steps, as :class:`~gymnasium.wrappers.TimeLimit` does
    to a single env made by ``gymnasium.make``: an episode ends at the smaller of it and
    ``episode_steps`` (the scenario's unless given); the observation's ``episode_progress`` stays
    ``step / episode_steps`` in both. None: no limit but ``episode_steps``.
    """

    metadata = {"render_modes": list(RENDER_MODES), "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        num_envs: int = 8,
        scenario: str | os.PathLike | dict | Scenario = "spine-leaf-2to1",
        action_mode: str = "split",
        history: int = 4,
        observation: str = "flat",
        reward: str | RewardFn | None = None,
        episode_steps: int | None = None,
        render_mode: str | None = None,
        backend: str | None = None,
        info_keys: Sequence[str] = (),
        max_episode_steps: int | None = None,
        residual: str | None = None,
        residual_scale: float = RESIDUAL_SCALE,
        obs_features: Sequence[str] = (),
        extra_plans: Sequence[str] = (),
    ) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        if max_episode_steps is not None and (
            isinstance(max_episode_steps, bool)
            or not isinstance(max_episode_steps, int | np.integer)
            or max_episode_steps < 1
        ):
            raise ValueError(f"max_episode_steps = {max_episode_steps!r}: must be an integer >= 1 or None")
        self.max_episode_steps = None if max_episode_steps is None else int(max_episode_steps)
        self.core = EnvCore(
            scenario, num_envs, action_mode, history, observation, reward, episode_steps, backend, info_keys,
            residual, residual_scale, obs_features, extra_plans,
        )  # fmt: skip
        self.num_envs = int(num_envs)
        self.single_action_space = self.core.action_space
        self.single_observation_space = self.core.observation_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.render_mode = render_mode
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._rng = np.random.default_rng()
        # every info key has a value for every env: one read-only all-True mask serves every "_key"
        self._all_envs = np.ones(self.num_envs, dtype=bool)
        self._all_envs.flags.writeable = False

    @property
    def autoreset_pending(self) -> np.ndarray:
        """(num_envs,) bool: envs whose episode ended at the last step, so the next step resets them
        (Gymnasium's next-step autoreset); a copy."""
        return self._autoreset.copy()

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None) -> tuple[Any, dict]:
        check_reset_options(options)
        top = 2**63 - 1
        if seed is None:
            seeds: list[int | None] = [int(self._rng.integers(2**31)) for _ in range(self.num_envs)]
        elif isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            if not 0 <= int(seed) <= top - (self.num_envs - 1):
                raise ValueError(
                    f"seed = {seed!r}: out of range; allowed: an integer in [0, {top - (self.num_envs - 1)}] "
                    f"(copy i gets seed + i), a list of {self.num_envs} such integers, or None"
                )
            self._rng = np.random.default_rng(int(seed))
            seeds = [int(seed) + i for i in range(self.num_envs)]
        elif isinstance(seed, list | tuple | np.ndarray):
            if len(seed) != self.num_envs:
                raise ValueError(
                    f"seed: a list of {len(seed)} seeds for {self.num_envs} envs; allowed: one per env"
                )
            for i, s in enumerate(seed):
                ok = s is None or (
                    isinstance(s, int | np.integer) and not isinstance(s, bool) and 0 <= s <= top
                )
                if not ok:
                    raise ValueError(
                        f"seed[{i}] = {s!r}: not a seed; allowed: an integer in [0, {top}] or None"
                    )
            seeds = [None if s is None else int(s) for s in seed]
        else:
            raise ValueError(
                f"seed = {seed!r} ({type(seed).__name__}): not a seed; allowed: an integer in [0, {top}], "
                f"a list of {self.num_envs} integers (one per env), or None"
            )
        obs, info = self.core.reset(seeds)
        self._autoreset[:] = False
        return obs, self._with_masks(info)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        a = actions  # validated (and converted) by the core
        reset_now = self._autoreset.copy()
        if reset_now.any():
            self.core.validate(a)  # a bad action leaves every copy untouched
            # each copy goes on with its own random stream, as a single env's reset() without a seed does
            # (and Gymnasium's SyncVectorEnv): copy i is the single env seeded seed + i, episode after episode
            obs, info = self.core.reset([None] * self.num_envs, mask=reset_now)
            if reset_now.all():  # every copy stands still: its reset observation and info, reward 0
                self._autoreset[:] = False
                zeros = np.zeros(self.num_envs, dtype=bool)
                return obs, np.zeros(self.num_envs), zeros, zeros.copy(), self._with_masks(info)
        # copies reset this step stand still (zero duration): they report their reset observation,
        # reward 0, not done
        obs, rew, term, trunc, info = self.core.step(a, active=~reset_now)
        if self.max_episode_steps is not None:  # the TimeLimit of gymnasium.make, for the vector env
            trunc = trunc | ((self.core.world.state.step_count >= self.max_episode_steps) & ~reset_now)
        if reset_now.any():
            fresh = self.core.info(None)
            for k, v in fresh.items():
                if k in info and np.ndim(v) >= 1:
                    m = reset_now.reshape((-1,) + (1,) * (np.ndim(v) - 1))
                    info[k] = np.where(m, v, info[k])
        self._autoreset = term | trunc
        return obs, rew, term, trunc, self._with_masks(info)

    def snapshot(self) -> EnvSnapshot:
        """The state of every copy (:meth:`EnvCore.snapshot`, with the vector env's own,
        :class:`~ainet_gym.envs.state.VectorWrapperState`: the pending autoresets and the seed generator):
        :meth:`restore` puts it back, and the same actions from there give the same observations, rewards
        and infos, bit for bit."""
        own = VectorWrapperState(autoreset=self._autoreset, rng=GeneratorState.of(self._rng))
        return replace(self.core.snapshot(), wrapper=own)

    def restore(self, snap: EnvSnapshot) -> None:
        """Put the state of ``snap`` (:meth:`snapshot`) back. A snapshot without the vector env's own
        (:meth:`EnvCore.snapshot`) restores the core with no autoreset pending and keeps the seed generator.

        Raises
        ------
        ValueError
            If ``snap`` is not a snapshot of a vector env of this scenario with as many copies.
        """
        self.core.restore(snap)
        own = snap.wrapper if isinstance(snap.wrapper, VectorWrapperState) else None
        if own is None:
            self._autoreset = np.zeros(self.num_envs, dtype=bool)
            return
        self._autoreset = own.autoreset.copy()
        self._rng = own.rng.generator()

    def _with_masks(self, info: dict) -> dict:
        out = dict(info)
        for k in info:
            out[f"_{k}"] = self._all_envs
        return out

    def action_masks(self) -> np.ndarray:
        """(num_envs, S * P) bool valid path indices (MaskablePPO)."""
        return self.core.action_masks()

    def render(self) -> Any:
        if self.render_mode is None:
            return None
        from ainet_gym.envs.render import render_ansi, render_rgb

        fn = render_ansi if self.render_mode == "ansi" else render_rgb
        return tuple(fn(self.core, b) for b in range(self.num_envs))
