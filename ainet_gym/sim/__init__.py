"""The simulation: collectives decomposed into transfers (:mod:`ainet_gym.scenario.collectives`, run by
the engine through :mod:`.workload`), the weighted max-min fair
allocator (:mod:`.allocator`, pure-Python reference in :mod:`.reference`), the batched fluid event loop
(:mod:`.engine`, compiled in :mod:`.backends.numba`) on its structure (:mod:`.stack`) and mutable state
(:mod:`.state`), a scenario's world of jobs, background and dynamics (:mod:`.world`: GPU placement in
:mod:`.placement`, ideal step times in :mod:`.ideal`, what changes between intervals in :mod:`.dynamics`,
the metrics of an interval in :mod:`.metrics`) and :func:`ainet_gym.simulate` (:mod:`.simulate`).
Nothing here imports gymnasium."""
