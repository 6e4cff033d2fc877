"""The simulation state container and the agents' read-only API of EnvCore.

References are independent of the code under test: the kernel's own parameter names for the state order,
plain Python loops over connections and paths for the offered load (the greedy router's least-loaded placement
is routing's: tests/routing/test_least_loaded.py).
"""

from __future__ import annotations

import inspect
from dataclasses import fields

import numpy as np
import pytest

from ainet_gym.envs.env import EnvCore
from ainet_gym.routing.loads import offered_load
from ainet_gym.sim.backends.numba import interval, jit, lazy
from ainet_gym.sim.state import SimState


def test_the_interval_kernels_take_records_that_hold_the_simulations_own_arrays() -> None:
    """The interval kernels take three records (structure, state, outputs) and their scalars in plain tuples
    (settings, switch, the lazy kernel's options); the compiled records' constructors take the fields in the
    order the records define them, and the values the numba backend builds them from are the simulation's own
    arrays of each field's name (a field built from the wrong array, or a copy the kernel would write without
    the state seeing it, fails); the tuples' kernels read their fields in the order the records name them."""
    if not jit.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    from ainet_gym.sim import records
    from ainet_gym.sim.backends.numba import records as nb_records
    from ainet_gym.sim.backends.numba.backend import _records

    head = ["b_lo", "b_hi", "settings", "structure", "state", "outputs", "stats", "go", "switch"]
    assert list(inspect.signature(interval.run_interval_numba.py_func).parameters) == head
    lazy_params = list(inspect.signature(lazy.run_interval_lazy.py_func).parameters)
    assert lazy_params == [*head, "fs", "rp", "options"]
    # each kernel unpacks its tuples in the fields' order (names as the records', the switch's with "sw_")
    unpacks = {
        "settings": (interval.run_interval_numba, records.SETTINGS_FIELDS, ""),
        "switch": (interval.run_interval_numba, records.SWITCH_FIELDS, "sw_"),
        "options": (lazy.run_interval_lazy, records.OPTIONS_FIELDS, ""),
    }
    for arg, (fn, fields_, prefix) in unpacks.items():
        line = next(x for x in inspect.getsource(fn.py_func).splitlines() if x.strip().endswith(f"= {arg}"))
        names = [n.strip() for n in line.split("=")[0].split(",")]
        assert len(names) == len(fields_), arg
        assert all(n in ("_", prefix + f) for n, f in zip(names, fields_, strict=True)), (arg, names)
    for kind, names in (
        ("structure", records.STRUCTURE_FIELDS),
        ("state", records.STATE_FIELDS),
        ("outputs", records.OUTPUTS_FIELDS),
    ):
        new = nb_records._NEW[kind].py_func
        assert tuple(inspect.signature(new).parameters) == tuple(names), kind
    core = EnvCore("spine-leaf-2to1", batch=2, backend="numba")
    core.reset([0, 1])
    core.step(np.zeros((2, *core.action_space.shape), dtype=np.float32))
    sim = core.world.sim
    structure, state = _records(sim)
    assert isinstance(structure, nb_records.StructureRecord) and isinstance(state, nb_records.StateRecord)
    assert _records(sim)[1] is state  # built once, kept while the arrays are the same
    values, state_values = records.interval_records(sim)
    assert state_values._fields == records.STATE_FIELDS
    own = {"flow_bytes": sim.engine_state.flow_reset, "capacity": sim.engine_state.capacity_bytes_per_s}
    for name in records.STATE_FIELDS:
        arr = own[name] if name in own else getattr(sim.state, name)
        got = getattr(state_values, name)
        assert got is arr or np.shares_memory(got, arr), name
    t = sim.table
    from_table = {"e_flow": t.e_flow_buf, "e_link": t.e_link_buf, "e_coef": t.e_coef_buf}
    from_table.update({n: getattr(t, n) for n in ("inst_seg", "ent_hi", "ex_lo", "fe_lo", "fe_hi")})
    for name, got in zip(records.STRUCTURE_FIELDS, values, strict=True):
        if name == "unit_alive":
            assert got.dtype == np.bool_ and got.all() and got.shape == (sim.n_units,)
            continue
        arr = from_table[name] if name in from_table else getattr(sim, name)
        assert got is arr or np.shares_memory(got, arr), name
    sim.engine_state.capacity_bytes_per_s = (
        sim.engine_state.capacity_bytes_per_s.copy()
    )  # new capacities: a new state record
    assert _records(sim)[1] is not state
    # the backend's tuples hold each field's value
    seen: dict = {}
    real = interval.run_interval_numba

    def spy(*a: object) -> None:
        seen["args"] = a
        real(*a)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(interval, "run_interval_numba", spy)
        core.step(np.zeros((2, *core.action_space.shape), dtype=np.float32))
    from ainet_gym.sim.engine import EPS_B, EPS_T

    st = records.IntervalSettings(*seen["args"][2])
    assert st.duration.shape == (2,) and st.n_links == sim.n_links and (st.eps_t, st.eps_b) == (EPS_T, EPS_B)
    assert (st.phase_mode, st.quantum) == (sim.rate_updates == "phase", sim.rate_quantum_s)
    assert st.inc_min == sim.incremental_min_flows and st.max_rounds == 4 * int(sim.unit_nphases.max()) + 8
    assert st.flow_w.shape == (0,)  # every share weight 1
    sw = records.LazySwitch(*seen["args"][8])
    assert (sw.on, sw.ratio, sw.handoff) == (sim.lazy_switch, sim.lazy_cost_ratio, sim.lazy_handoff_solves)
    assert sw.cost is sim.engine_state.switch_cost and sw.mode.shape == sw.ev.shape == sw.t.shape == (2,)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_state_is_one_set_of_arrays(backend: str) -> None:
    """``sim.state.rem`` etc. are the same arrays through a run (both backends write in place), and the
    state is read through ``sim.state`` only: ``sim.rem`` raises, and so does binding it (which would
    detach it from what the kernel mutates), each naming ``sim.state.rem``."""
    if backend == "numba" and not jit.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    core = EnvCore("spine-leaf-2to1", batch=2, backend=backend)
    core.reset([0, 1])
    sim = core.world.sim
    before = sim.state.iterations_total.copy()
    arrays = sim.state.arrays()
    for _ in range(3):
        core.step(np.zeros((2, *core.action_space.shape), dtype=np.float32))
    assert (sim.state.iterations_total > before).any()  # the state moved
    for f, arr in zip(fields(SimState), arrays, strict=True):
        assert getattr(sim.state, f.name) is arr, f.name  # mutated in place, never rebound
        assert arr.flags.c_contiguous and arr.flags.writeable, f.name
    with pytest.raises(AttributeError, match=r"BatchSim\.state\.rem"):
        sim.rem  # noqa: B018 - the read must raise
    with pytest.raises(AttributeError, match=r"BatchSim\.state\.rem"):
        sim.rem = sim.state.rem.copy()
    with pytest.raises(AttributeError, match="no attribute 'not_a_field'"):
        sim.not_a_field  # noqa: B018


def _core(batch: int = 2) -> EnvCore:
    core = EnvCore("link-failure", batch=batch)
    core.reset(list(range(batch)))
    core.step(np.zeros((batch, *core.action_space.shape), dtype=np.float32))
    return core


def test_views_are_read_only_and_current() -> None:
    core = _core()
    for name in ("ideal_step_s", "ideal_comm_s", "controllable", "slot_connection", "n_paths", "candidate_paths",
                 "link_capacity_bytes_per_s"):  # fmt: skip
        v = getattr(core, name)
        assert not v.flags.writeable, name
        with pytest.raises(ValueError):
            v.reshape(-1)[:1] = 0
    w = core.world
    np.testing.assert_array_equal(core.link_capacity_bytes_per_s, w.sim.engine_state.capacity_bytes_per_s)
    np.testing.assert_array_equal(core.controllable, core.n_paths[np.maximum(core.slot_connection, 0)] > 1)
    assert core.ideal_step_s.shape == (2, w.n_job_slots)
    assert np.all(core.ideal_step_s[w.job_unit >= 0] > 0)
    assert core.last_result is not None


def test_offered_load_matches_a_loop_over_paths() -> None:
    """Every connection puts ``demand * share`` on each link of each of its paths, once per hop listed."""
    core = _core()
    rng = np.random.default_rng(0)
    n = core.n_paths
    split = rng.uniform(size=(n.shape[0], core.P)) * (np.arange(core.P)[None, :] < n[:, None])
    demand = rng.uniform(1e3, 1e6, size=n.shape[0])
    L = core.world.fabric.n_links
    ref = np.zeros(core.batch * L)
    paths = core.candidate_paths
    for c in range(n.shape[0]):
        for p in range(n[c]):
            for link in paths[c, p]:
                if link >= 0:
                    ref[link] += demand[c] * split[c, p]
    np.testing.assert_allclose(core.offered_load(split, demand), ref.reshape(core.batch, L), rtol=1e-12)
    np.testing.assert_array_equal(core.offered_load(split, demand), offered_load(core.world, split, demand))


# ---------------------------------------------------------------- the engine's state beside SimState

BACKENDS = ["numpy", "numba"] if jit.HAVE_NUMBA else ["numpy"]
#: what the engine keeps from interval to interval beside SimState (docs/development.md, "State as data")
ENGINE_FIELDS = ("split", "pinned", "part_split", "flow_reset", "capacity_bytes_per_s", "switch_cost",
                 "unit_weight", "held_weight")  # fmt: skip
#: the routing modes that give the engine state its optional fields: pinned splits, part flows, held parts at
#: their part's weight
ROUTINGS = {
    "carry": {"reroute": "new_transfers"},
    "parts": {"split_flows": "independent"},
    "held": {"split_flows": "independent", "reroute_held_bytes": 1e5, "reroute_held_weight": "part"},
}
#: the optional fields each routing leaves None
ABSENT = {"carry": {"part_split", "held_weight"}, "parts": {"pinned", "held_weight"}, "held": {"pinned"}}


def _engine_core(routing: str, backend: str, batch: int = 2) -> EnvCore:
    from _scenarios import small_spine_leaf

    sc = small_spine_leaf(12, name="engine", link_failures={"rate_per_step": 0.5, "repair_steps": 2})
    sc["routing"].update(ROUTINGS[routing])
    return EnvCore(sc, batch=batch, action_mode="split", backend=backend)


def _engine_arrays(sim: object) -> dict[str, np.ndarray | None]:
    es = sim.engine_state  # type: ignore[attr-defined]
    return {
        f.name: None if getattr(es, f.name) is None else np.array(getattr(es, f.name)) for f in fields(es)
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("routing", list(ROUTINGS))
def test_a_step_changes_no_array_of_the_engine_outside_its_containers(backend: str, routing: str) -> None:
    """The engine state is a container of the listed fields (``sim.split`` etc. raise, naming where they
    live), and a step changes no array attribute of the simulation: what it changes is in ``sim.state`` or
    ``sim.engine_state`` (a field left as an attribute of ``BatchSim``, as the split, the pinned splits or
    the cost model were, fails here). Each field but the optional one this routing lacks does change in
    these steps (the lazy kernel on every instance, so that the switch's cost model moves; failures move
    the capacities), so the check sees them all."""
    from ainet_gym.sim.state import EngineState

    assert tuple(f.name for f in fields(EngineState)) == ENGINE_FIELDS
    core = _engine_core(routing, backend)
    core.reset([1, 2])
    sim = core.world.sim
    sim.incremental_min_flows = 0  # numba: every instance in the lazy exact kernel (its switch's cost model)
    for name in ENGINE_FIELDS:
        with pytest.raises(AttributeError, match=rf"BatchSim\.engine_state\.{name}"):
            getattr(sim, name)
        with pytest.raises(AttributeError, match=rf"BatchSim\.engine_state\.{name}"):
            setattr(sim, name, None)
    derived = {"_e_lperm"}  # the split's entries in link order, made again from the structure and the split
    before = {
        k: (v, v.copy()) for k, v in vars(sim).items() if isinstance(v, np.ndarray) and k not in derived
    }
    rng = np.random.default_rng(0)
    moved = dict.fromkeys(ENGINE_FIELDS, False)
    for t in range(6):
        prev = _engine_arrays(sim)
        if t == 5:  # share weights (numba: a weighted interval leaves the lazy kernel, so the last only)
            core.set_share_weights(rng.uniform(0.5, 2.0, size=core.world.job_unit.shape))
        core.step(rng.uniform(-1, 1, size=(2, *core.action_space.shape)).astype(np.float32))
        assert core.world.sim is sim
        for k, v in _engine_arrays(sim).items():
            moved[k] |= v is not None and not np.array_equal(v, prev[k], equal_nan=True)
    for k, (v, was) in before.items():
        now = getattr(sim, k)
        assert now is v and np.array_equal(now, was, equal_nan=True), k
    absent = ABSENT[routing] | ({"flow_reset"} if routing == "carry" else set())  # (bytes: the parts)
    if backend == "numpy":
        absent = absent | {"switch_cost"}  # the lazy kernel is numba's
    assert {k for k, m in moved.items() if not m} == absent


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("routing", list(ROUTINGS))
def test_a_snapshot_copies_the_engine_state_and_a_restore_loads_it_whole(backend: str, routing: str) -> None:
    """Every field of the engine state is copied by a snapshot and put back by a restore, as it was: values
    no step would give (so that a field the restore derives again, restarts or leaves as it was fails), then
    every array of the live state overwritten in place after the snapshot (so that a snapshot that shares
    an array fails); a restore into a core of another batch takes the chosen instances' rows."""
    core = _engine_core(routing, backend)
    core.reset([3, 4])
    for _ in range(2):
        core.step(np.zeros((2, *core.action_space.shape), dtype=np.float32))
    sim = core.world.sim
    core.set_share_weights(np.full(core.world.job_unit.shape, 2.0))  # (unit_weight: None while all 1)
    es = sim.engine_state
    rng = np.random.default_rng(1)
    for name in ENGINE_FIELDS:
        v = getattr(es, name)
        if v is not None:  # (pinned: None without carry flows)
            setattr(es, name, rng.uniform(0.25, 0.75, size=v.shape))
    want = _engine_arrays(sim)
    assert {k for k, v in want.items() if v is None} == ABSENT[routing]
    snap = core.snapshot()
    for v in vars(sim.engine_state).values():
        if v is not None:
            v[...] = 7.0
    for _ in range(2):  # a snapshot serves any number of restores
        core.restore(snap)
        got = _engine_arrays(sim)
        for name in ENGINE_FIELDS:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)  # (None: both None)
        core.step(np.zeros((2, *core.action_space.shape), dtype=np.float32))
    src = np.array([1, 0, 1])
    other = _engine_core(routing, backend, batch=3)
    other.restore(snap, source=src)
    got = _engine_arrays(other.world.sim)
    conn = sim.unit_inst[sim.conn_unit]  # the instance of each connection, flow
    flow = sim.unit_inst[sim.flow_unit]
    unit = sim.unit_inst
    rows = {"conn": np.concatenate([np.flatnonzero(conn == b) for b in src]),
            "flow": np.concatenate([np.flatnonzero(flow == b) for b in src]), "inst": src,
            "unit": np.concatenate([np.flatnonzero(unit == b) for b in src])}  # fmt: skip
    kind = {
        "split": "conn",
        "pinned": "conn",
        "part_split": "conn",
        "held_weight": "conn",
        "flow_reset": "flow",
        "unit_weight": "unit",
    }
    for name in ENGINE_FIELDS:
        if want[name] is None:
            assert got[name] is None, name
            continue
        np.testing.assert_array_equal(got[name], want[name][rows[kind.get(name, "inst")]], err_msg=name)
