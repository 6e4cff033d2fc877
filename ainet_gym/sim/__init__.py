"""The simulation: collectives decomposed into transfers (:mod:`.workload`), the weighted max-min fair
allocator (:mod:`.allocator`, pure-Python reference in :mod:`.reference`), the batched fluid event loop
(:mod:`.engine`, compiled in :mod:`.kernels`), a scenario's world of jobs, background and dynamics
(:mod:`.world`) and :func:`ainet_gym.simulate` (:mod:`.simulate`). Nothing here imports gymnasium."""
