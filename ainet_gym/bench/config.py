"""What the bench runs: :class:`BenchConfig` (the quick and full presets), the section names, the
exactness tolerance and the scenarios the targets name."""

from __future__ import annotations

from dataclasses import dataclass

EXACT_RTOL = 1e-9
SECTIONS = ("allocator", "batching", "env", "construction", "startup", "scaling", "switch", "moe")
#: the scenario of a GPU-count target, where the issue names one (else any measured scenario of that size)
TARGET_SCENARIOS = {1024: "fat-tree-k16-data-parallel"}
TARGET_1024_SCENARIO = TARGET_SCENARIOS[1024]


@dataclass(frozen=True)
class BenchConfig:
    """What the bench runs. :meth:`quick` and :meth:`full` are the two presets of the command line."""

    quick: bool = False
    #: GPU counts of the fabric-shaped allocator instances on a 2:1 spine-leaf.
    spine_leaf_gpus: tuple[int, ...] = (64, 1024, 16384)
    #: k of the fabric-shaped allocator instances on a fat-tree (k=8: 128 GPUs, k=16: 1,024).
    fat_tree_k: tuple[int, ...] = (8, 16)
    #: flow counts of the random tiered allocator instances.
    tiered_flows: tuple[int, ...] = (1_000, 10_000, 100_000)
    #: the pure-Python reference is skipped on larger instances (it needs one pass per bottleneck level).
    reference_max_flows: int = 10_000
    #: the numpy global-min filling is skipped on larger instances (one iteration per bottleneck level).
    gmin_max_flows: int = 50_000
    #: batch sizes of the batching section, and the GPUs of its (fabric-shaped) instances.
    batch_sizes: tuple[int, ...] = (1, 8, 64, 256)
    batch_instance_gpus: int = 64
    #: environments and the batch sizes of the vector env for each: a GPU count (0 = the default scenario;
    #: else a shipped scenario of that size, see :func:`env_scenario`) or a scenario name. The 1,024-GPU
    #: target is measured on the scenario the issue names, :data:`TARGET_1024_SCENARIO`; the shipped
    #: 1,024-GPU spine-leaf follows as an extra row.
    env_sizes: tuple[tuple[int | str, tuple[int, ...]], ...] = (
        (0, (1, 16, 64, 256)),
        (TARGET_1024_SCENARIO, (1, 16, 64, 256)),
        (1024, (1, 16, 64)),
        (4096, (1, 16, 64)),
        (16384, (1, 16)),
    )
    #: simulation backends of the environment section, side by side (the first is the headline one).
    env_backends: tuple[str, ...] = ("numba", "numpy")
    #: the reference backend (numpy, ``SimBackend.reference``) is measured only up to this many GPUs (it is slow).
    numpy_env_max_gpus: int = 128
    #: sizes whose construction time and peak memory are probed in a subprocess (0 = default scenario).
    construction_gpus: tuple[int, ...] = (0, 1024, 4096, 16384)
    #: scenario size (0 = default) of the start-up probe: cold start (empty kernel cache) and cached start.
    startup_gpus: int = 0
    #: include the cold start (kernels compiled into an empty cache: ~10 s of CPU); else only the start
    #: with the machine's own kernel cache.
    startup_cold: bool = True
    #: fabric sizes of the scaling curve (8 ring AllReduce jobs of N/8 GPUs) ...
    scaling_gpus: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
    #: ... the fixed fabric and the AllToAll job sizes of the transfers curve (8 jobs) ...
    transfers_fabric_gpus: int = 1024
    transfers_job_gpus: tuple[int, ...] = (8, 16, 32, 64, 128)
    #: each point of the transfers curve times the same intervals, 2 .. 1 + transfers_intervals from reset
    #: (interval 1 a warm-up), the best of transfers_repeats runs from reset: a fixed set, so the events
    #: timed and the cost exponent do not depend on the load (a time window took in more or fewer of an
    #: AllToAll's intervals, which differ by 100x in events; docs/engine-alltoall.md, item 11)
    transfers_intervals: int = 3
    transfers_repeats: int = 3
    #: ... and the job counts of the jobs curve (ring AllReduce jobs sharing the fixed fabric's GPUs).
    scaling_jobs: tuple[int, ...] = (8, 16, 32, 64, 128)
    #: successive intervals of one episode of 8 AllToAll jobs x 128 GPUs (exact event mode, event mode with
    #: a ``slowest_quantum_us`` rate quantum, then phase rate updates) for the slowest-interval figure, each
    #: capped at ``slowest_max_events`` events, the whole at about ``slowest_budget_s`` per mode (0
    #: intervals: not run).
    slowest_intervals: int = 8
    slowest_quantum_us: float = 100.0
    slowest_max_events: int = 1000
    slowest_budget_s: float = 60.0
    #: the lazy incremental kernel's least flows per instance in the first exact-event run (the second runs
    #: the full re-solve per event, -1)
    slowest_incremental_min_flows: int = 0
    #: the moe section: MoE episodes timed whole (48 intervals from reset, exact event mode; the 1,024-GPU
    #: member of the family must take under a minute) ...
    moe_episodes: tuple[str, ...] = ("moe-3d-1024-spine-leaf",)
    moe_episode_steps: int = 48
    #: ... and the env steps/s of a MoE scenario (the env id's, ``ainet_gym/MoE-v0``): the single env and
    #: the vector env at these batch sizes, timed in turns as the environment section does (``x single``:
    #: the vector env against the single env of the same run)
    moe_env: tuple[str, tuple[int, ...]] = ("moe-3d-256-spine-leaf", (1, 16))
    #: the switch section: intervals 1..switch_intervals from reset of 8 AllToAll x 128 GPUs (exact event mode)
    #: on the lazy kernel only, the full re-solve only and the switch, the median of switch_runs interleaved
    #: runs (0: not run; the issue asks for 5, as this machine moves a ratio by up to 1.6x between runs)
    switch_intervals: int = 4
    switch_runs: int = 5
    #: minimum measured time per figure (seconds); repeats stop after this much or max_repeats.
    min_time_s: float = 0.5
    max_repeats: int = 25
    #: timing windows per env of the environment section (each row is the best window); the envs of a
    #: scenario up to 1,024 GPUs take their windows in turns, ``min_time_s`` each, larger ones one env
    #: after the other, ``2 * min_time_s`` each.
    env_windows: int = 5
    #: sections to run.
    sections: tuple[str, ...] = SECTIONS
    #: the clock every row is timed by: ``wall`` (``time.perf_counter``) or ``cpu`` (the CPU s of the process,
    #: every thread, and of its finished child processes; :mod:`ainet_gym.bench.clock`)
    clock: str = "wall"

    @classmethod
    def full(cls) -> BenchConfig:
        return cls()

    @classmethod
    def quick_preset(cls) -> BenchConfig:
        return cls(
            quick=True,
            spine_leaf_gpus=(64, 1024),
            fat_tree_k=(8,),
            tiered_flows=(1_000,),
            batch_sizes=(1, 8, 64, 256),
            env_sizes=((0, (1, 16, 64)), (TARGET_1024_SCENARIO, (1, 16))),
            construction_gpus=(0, 1024),
            scaling_gpus=(128, 256, 512, 1024),
            transfers_job_gpus=(8, 16, 32, 64),
            transfers_repeats=1,
            scaling_jobs=(8, 16, 32),
            slowest_intervals=0,
            moe_episodes=(),
            switch_runs=0,
            min_time_s=0.25,
            max_repeats=15,
        )
