"""Workload as the engine runs it: the phases of a ring cut into run-ahead segments (:func:`segment_rings`);
a collective's phases come from :mod:`ainet_gym.scenario.collectives` (the one decomposition, which the
scenario's size estimate reads too).

Bounded run-ahead of a ring (``routing.ring_run_ahead_bytes``, with ``routing.split_flows: independent``):
:func:`segment_rings` cuts every phase made of rings into N phases of the same hops, each moving 1/N of
the bytes, one after the other (N = ceil(per-hop bytes / run_ahead)); the first pays the phase's alpha
steps and the others none, so the alpha terms are unchanged. Independent hops then run apart within a
segment and meet at its end: a hop runs ahead of the slowest by at most one segment.

"""

from __future__ import annotations

from typing import Any

from ainet_gym.scenario.collectives import CollectivePhase, Flow
from ainet_gym.scenario.spec import ring_segments

__all__ = ["segment_rings"]


def segment_rings(
    phases: list[CollectivePhase], run_ahead_bytes: float | None, with_counts: bool = False
) -> list[Any]:
    """Cut every phase made of rings (all its flows have two or more members) into N phases run one after
    the other, ``N = ceil(largest per-hop bytes / run_ahead_bytes)``: the same flows with 1/N of their bytes
    each; the first segment pays the phase's steps, the others none (the alpha terms are unchanged).
    ``None``, a collective whose phases are not sequential (a stage pipeline, ``chunks > 1``) or a ring
    whose hops move at most ``run_ahead_bytes`` each: the phases unchanged. ``with_counts``: (phase, N of
    the ring phase it is a segment of, 1 for a phase not cut) pairs instead of phases."""
    if run_ahead_bytes is not None and not run_ahead_bytes > 0:
        raise ValueError(
            f"ring_run_ahead_bytes = {run_ahead_bytes!r}: allowed: a number of bytes > 0, or None"
        )
    if run_ahead_bytes is None or any(ph.after is not None for ph in phases):
        out = [(ph, 1) for ph in phases]
    else:
        out = []
        for ph in phases:
            big = max((f.bytes for f in ph.flows), default=0.0)
            n = ring_segments(big, run_ahead_bytes)
            if n == 1 or any(len(f.members) < 2 for f in ph.flows):
                out.append((ph, 1))
                continue
            flows = tuple(Flow(f.bytes / n, f.members) for f in ph.flows)
            out.append((CollectivePhase(ph.steps, flows), n))
            out.extend((CollectivePhase(0, flows), n) for _ in range(n - 1))
    return out if with_counts else [ph for ph, _ in out]
