"""Routing: how a connection's traffic is split over its candidate paths (:mod:`.split`: ECMP hashing,
WCMP weights, decoding an agent's action into a split), the engine-level routing policies (ECMP,
spraying, WCMP, LPs, greedy) that :func:`ainet_gym.simulate` and the baseline agents use (:mod:`.policies`),
the fixed plans of the ``choose`` modes (:mod:`.plans`) and what a policy reads (:mod:`.context`).

Import from the modules; this package re-exports nothing.
"""
