"""The bench's progress bar (:class:`Progress`) and the number of tasks it counts over the chosen
sections (:func:`n_tasks`).
"""

from __future__ import annotations

import sys

from ainet_gym.bench.config import BenchConfig
from ainet_gym.bench.instances import (
    allocator_instances,
)

__all__ = ["Progress", "n_tasks"]


class Progress:
    """A tqdm bar on stderr (or nothing)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="bench", unit="task", file=sys.stderr, dynamic_ncols=True)

    def start(self, desc: str) -> None:
        if self.bar is not None:
            self.bar.set_description(desc[:48])

    def done(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def n_tasks(cfg: BenchConfig) -> int:
    n = 0
    s = set(cfg.sections)
    if "allocator" in s:
        n += len(allocator_instances(cfg))
    if "batching" in s:
        n += len(cfg.batch_sizes) + 2
    if "env" in s:
        n += sum(1 + len(b) for _, b in cfg.env_sizes) * len(cfg.env_backends)
    if "construction" in s:
        n += len(cfg.construction_gpus)
    if "startup" in s:
        n += 3 if cfg.startup_cold else 2
    if "scaling" in s:
        n += len(cfg.scaling_gpus) + len(cfg.transfers_job_gpus) + len(cfg.scaling_jobs)
        n += 4 if cfg.slowest_intervals else 0
    if "switch" in s and cfg.switch_runs and cfg.switch_intervals:
        n += 1
    if "moe" in s:
        n += len(cfg.moe_episodes) + (1 + len(cfg.moe_env[1])) * len(cfg.env_backends)
    return n
