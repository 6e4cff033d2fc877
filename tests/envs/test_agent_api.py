"""The members of ``EnvCore`` that agents read instead of the world behind it (issue 31: agents only through
the public ``EnvCore`` API): ``connection_bounds()``, ``unit_stack``, ``job_names``, ``job_progress()``,
``fabric`` and ``backend``.

References are independent of the code under test: a batch-1 core's connection count for the bounds of
copies of its instance, the scenario's job names, the restack a new random placement forces.
"""

from __future__ import annotations

import numpy as np

from ainet_gym.envs.env import EnvCore


def test_connection_bounds_of_copies_of_one_instance_are_multiples_of_its_connections(
    small_spine_leaf_scenario: dict,
) -> None:
    """Three copies of instance 0 (``restore(snap, source=[0, 0, 0])``): instance ``b``'s connections are
    rows ``b * C1`` to ``(b + 1) * C1`` of a split, ``C1`` the connections of the instance alone."""
    one = EnvCore(small_spine_leaf_scenario, batch=1)
    one.reset([5])
    sim = one.routing_context.sim
    assert sim is not None
    c1 = sim.n_conns
    assert c1 > 0
    three = EnvCore(small_spine_leaf_scenario, batch=3)
    three.reset([1, 2, 3])
    three.restore(one.snapshot(), source=[0, 0, 0])
    np.testing.assert_array_equal(three.connection_bounds(), [0, c1, 2 * c1, 3 * c1])
    assert three.connection_bounds().dtype == np.int64


def test_unit_stack_is_replaced_by_a_restack_only(small_spine_leaf_scenario: dict) -> None:
    """A step that restacks nothing keeps the stack (a split made for it still applies); a reset that
    places the random job elsewhere replaces it (the connections are renumbered)."""
    core = EnvCore(small_spine_leaf_scenario, batch=2)
    core.reset([1, 2])
    before = core.unit_stack
    for _ in range(2):
        core.step_split(core.routing_context.default_split())
        assert core.unit_stack is before
    gpus = [list(map(np.ndarray.tolist, g)) for g in core.world.state.gpus]
    core.reset([3, 4])
    assert [list(map(np.ndarray.tolist, g)) for g in core.world.state.gpus] != gpus  # job b moved
    assert core.unit_stack is not before


def test_job_names_are_the_scenarios_jobs_and_a_copy(small_spine_leaf_scenario: dict) -> None:
    core = EnvCore(small_spine_leaf_scenario, batch=2, backend="numpy")
    core.reset([1, 2])
    names = core.job_names
    assert names == [["a", "b"], ["a", "b"]]
    names[0][0] = "x"
    assert core.job_names[0][0] == "a"
    assert core.backend == "numpy"
    assert core.fabric.n_links == core.link_capacity_bytes_per_s.shape[1]


def test_job_progress_grows_with_the_work_done(small_spine_leaf_scenario: dict) -> None:
    """0 right after a reset; after some intervals, positive for each job and at most the GPU-seconds
    that elapsed (ideal work cannot exceed the time its GPUs had: 8 + 4 GPUs of the two jobs)."""
    core = EnvCore(small_spine_leaf_scenario, batch=2)
    core.reset([1, 2])
    np.testing.assert_array_equal(core.job_progress(), 0.0)
    steps = 3
    for _ in range(steps):
        core.step_split(core.routing_context.default_split())
    work = core.job_progress()
    assert work.shape == (2, 2)
    assert (work > 0).all()
    elapsed = steps * core.decision_interval_s
    assert (work <= np.array([8, 4]) * elapsed * (1 + 1e-9)).all()
