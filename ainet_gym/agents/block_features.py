"""An SB3 features extractor that reads only named blocks of the flat observation (:class:`BlockFeatures`).

The flat observation is a concatenation of named blocks (``EnvCore.obs_layout``: ``link_utilization``,
``link_capacity``, ``jobs``, ``slots``, ``background``, ``episode_progress`` and the optional ``job_phase``,
:mod:`ainet_gym.envs.obs_layout`). A policy network over all of them has to find the few inputs that
matter among thousands; on ``spine-leaf-2to1-jitter`` the lookahead's plan is predictable from the 12 numbers
of ``job_phase`` (a k-NN vote over them imitates it), but the default network over 2,337 inputs does not learn
to isolate them (docs/learning.md). :class:`BlockFeatures` hands the policy and value networks the columns of
the named blocks only, in the order named: whatever the other inputs hold, the policy's action does not change.

``ainet-gym train --obs-blocks job_phase`` and ``python -m ainet_gym.agents.imitate clone --obs-blocks
job_phase`` build a PPO model on it (:func:`block_policy_kwargs`); the model file records the class and its
column ranges in its ``policy_kwargs``, and :func:`ainet_gym.agents.sb3_agents.load_model`'s allowlist lets this
one class through (:data:`EXTRACTOR_GLOBAL`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

__all__ = ["EXTRACTOR_GLOBAL", "BlockFeatures", "block_columns", "block_policy_kwargs", "parse_blocks"]

#: (module, class name) of :class:`BlockFeatures`, as a pickled model's ``policy_kwargs`` reference it
EXTRACTOR_GLOBAL = (__name__, "BlockFeatures")


class BlockFeatures(BaseFeaturesExtractor):
    """The columns ``[start, stop)`` of each range of ``columns`` of a flat observation, joined in that order.

    Arguments
    ---------
    observation_space:
        The env's flat ``Box`` observation space.
    columns:
        ``[[start, stop], ...]``: column ranges of the observation (an env's ``obs_layout`` slices,
        :func:`block_columns`), non-empty and inside the space.
    names:
        The block names of the ranges (recorded for the reader; the columns are what is read).

    Raises
    ------
    ValueError
        If the space is not a 1-d Box or a range is empty or outside it.
    """

    def __init__(
        self, observation_space: spaces.Box, columns: Sequence[Sequence[int]], names: Sequence[str] = ()
    ) -> None:
        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(f"BlockFeatures: observation space {observation_space}: allowed: a 1-d Box")
        width = int(observation_space.shape[0])
        ranges = [(int(a), int(b)) for a, b in columns]
        if not ranges or any(not 0 <= a < b <= width for a, b in ranges):
            raise ValueError(
                f"BlockFeatures: columns = {ranges}: allowed: non-empty ranges [start, stop) within 0..{width}"
            )
        index = np.concatenate([np.arange(a, b) for a, b in ranges])
        super().__init__(observation_space, features_dim=int(index.size))
        self.names = tuple(str(n) for n in names)
        self.register_buffer("index", torch.as_tensor(index, dtype=torch.long), persistent=False)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """(batch, features_dim): the named columns of each observation."""
        return observations.index_select(1, self.index)


def parse_blocks(blocks: str | Sequence[str]) -> tuple[str, ...]:
    """``blocks`` (a comma list or a sequence of names) as a tuple of names, empty entries dropped."""
    items = blocks.split(",") if isinstance(blocks, str) else list(blocks)
    return tuple(str(b).strip() for b in items if str(b).strip())


def block_columns(layout: dict[str, slice], blocks: str | Sequence[str]) -> list[list[int]]:
    """``[[start, stop], ...]`` of the named blocks of ``layout`` (an env's ``obs_layout``), in the order named.

    Raises
    ------
    ValueError
        If no block is named, a name repeats or is not a block of ``layout``.
    """
    names = parse_blocks(blocks)
    bad = [b for b in names if b not in layout]
    if not names or bad or len(set(names)) != len(names):
        raise ValueError(
            f"obs_blocks = {blocks!r}: allowed: one or more distinct blocks of the observation "
            f"({', '.join(layout)}; job_phase needs obs_features phase)"
        )
    return [[int(layout[b].start), int(layout[b].stop)] for b in names]


def block_policy_kwargs(layout: dict[str, slice], blocks: str | Sequence[str]) -> dict[str, Any]:
    """SB3 ``policy_kwargs`` entries for a policy whose networks read only ``blocks`` of the observation (one
    :class:`BlockFeatures`, shared by the policy and the value network: it has no weights)."""
    return {
        "features_extractor_class": BlockFeatures,
        "features_extractor_kwargs": {
            "columns": block_columns(layout, blocks),
            "names": list(parse_blocks(blocks)),
        },
    }
