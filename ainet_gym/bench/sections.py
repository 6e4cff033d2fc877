"""The measured sections of the bench, by their import path: this module defines nothing, it re-exports by
name the bench's modules of one concern (issue 31):

- :mod:`ainet_gym.bench.machine`: the machine information and the calibration;
- :mod:`ainet_gym.bench.timing`: the measuring helpers the sections share (:func:`rel_err`, ...);
- :mod:`ainet_gym.bench.progress`: the progress bar and the tasks it counts;
- :mod:`ainet_gym.bench.allocator`: sections 1 and 2, the allocator single and batched;
- :mod:`ainet_gym.bench.env_rows`: section 3, the environments' steps per second;
- :mod:`ainet_gym.bench.startup`: sections 4 and 5, construction and start-up in a fresh process;
- :mod:`ainet_gym.bench.scaling`: section 6, the cost of an interval as the instances grow;
- :mod:`ainet_gym.bench.moe`: section 7, the MoE family;
- :mod:`ainet_gym.bench.switch`: the switch section (lazy kernel, full re-solve, the switch).
"""

from __future__ import annotations

from ainet_gym.bench.allocator import bench_allocator, bench_batching
from ainet_gym.bench.env_rows import INTERLEAVE_MAX_GPUS, bench_env
from ainet_gym.bench.machine import calibrate, machine_info
from ainet_gym.bench.moe import bench_moe
from ainet_gym.bench.progress import Progress, n_tasks
from ainet_gym.bench.scaling import bench_scaling
from ainet_gym.bench.startup import bench_construction, bench_startup
from ainet_gym.bench.switch import SWITCH_MODES, bench_switch
from ainet_gym.bench.timing import rel_err

__all__ = [
    "INTERLEAVE_MAX_GPUS",
    "SWITCH_MODES",
    "Progress",
    "bench_allocator",
    "bench_batching",
    "bench_construction",
    "bench_env",
    "bench_moe",
    "bench_scaling",
    "bench_startup",
    "bench_switch",
    "calibrate",
    "machine_info",
    "n_tasks",
    "rel_err",
]
