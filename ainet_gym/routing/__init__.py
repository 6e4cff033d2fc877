"""Routing: how a connection's traffic is split over its candidate paths (:mod:`.split`: ECMP hashing,
WCMP weights, decoding an agent's action into a split) and the engine-level routing policies (ECMP,
spraying, WCMP, greedy) that :func:`ainet_gym.simulate` and the baseline agents use (:mod:`.policies`)."""

from ainet_gym.routing.split import *  # noqa: F403  (0.1's ``ainet_gym.routing`` module names)
from ainet_gym.routing.split import __all__  # noqa: F401
