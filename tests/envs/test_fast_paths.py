"""The env-side fast paths: the same results as the straightforward code they replace.

References are independent: networkx for shortest paths and connectivity (the library the topology code
used before), and the plain numpy formulas of the decode / info code for the compiled decode.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

import networkx as nx
import numpy as np
import pytest

from ainet_gym.fabric.paths import all_shortest_paths
from ainet_gym.fabric.topology import build_fabric
from ainet_gym.scenario.loader import load_scenario
from ainet_gym.sim.state import EngineState, SimState


@pytest.mark.parametrize(
    "name",
    ["spine-leaf-2to1", "fat-tree-k8-data-parallel", "rail-optimized-flat-ring", "dual-plane", "clos3-2pods"],
)
def test_switch_paths_match_networkx(name: str) -> None:
    """Every leaf pair: the equal-cost switch paths equal networkx's all_shortest_paths (a wrong BFS that
    stops a layer early or keeps one predecessor per node gives fewer paths)."""
    sc = load_scenario(name)
    f = build_fabric(sc.fabric, max_paths=sc.routing.max_paths)
    f._leaf_paths(0, f.n_leaves - 1)  # builds the adjacency
    adj = f._switch_adj
    assert adj is not None
    g = nx.DiGraph()
    g.add_nodes_from(adj)
    g.add_edges_from((u, v) for u, vs in adj.items() for v in vs)
    for a in range(f.n_leaves):
        for b in range(f.n_leaves):
            src, dst = int(f.leaf_node[a]), int(f.leaf_node[b])
            ref = sorted(nx.all_shortest_paths(g, src, dst)) if nx.has_path(g, src, dst) else []
            assert sorted(all_shortest_paths(adj, src, dst)) == ref


def test_fabric_graph_is_built_on_demand() -> None:
    """``Fabric.graph`` is the same multigraph as before (one edge per link, with gbps and tier)."""
    sc = load_scenario("spine-leaf-2to1")
    f = build_fabric(sc.fabric)
    g = f.graph
    assert g is f.graph
    assert g.number_of_nodes() == len(f.node_names) and g.number_of_edges() == f.n_links
    assert nx.is_weakly_connected(g)
    for i in (0, f.n_links // 2, f.n_links - 1):
        d = g.get_edge_data(int(f.link_src[i]), int(f.link_dst[i]))[i]
        assert d["gbps"] == f.link_gbps[i]


def test_env_import_and_step_load_neither_networkx_nor_scipy_sparse() -> None:
    """The cached start pays only for what a step needs: no networkx, no scipy.sparse."""
    code = (
        "import sys, numpy as np, gymnasium as gym, ainet_gym\n"
        "e = gym.make('ainet_gym/SpineLeaf-v0'); e.reset(seed=0)\n"
        "e.step(np.zeros(e.action_space.shape, dtype=np.float32))\n"
        "print(sorted(m for m in ('networkx', 'scipy.sparse', 'matplotlib') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _scenario_with_paths(name: str, max_paths: int) -> dict:
    from ainet_gym.scenario.files import read_yaml, scenarios_dir

    path = scenarios_dir() / f"{name}.yaml"
    d = read_yaml(path, str(path))
    d.setdefault("routing", {})["max_paths"] = max_paths
    if "file" in d.get("fabric", {}):  # relative to the scenario file
        d["fabric"]["file"] = str(scenarios_dir() / d["fabric"]["file"])
    return d


@pytest.mark.parametrize(
    ("scenario", "max_paths"),
    [("fat-tree-k8-stride", 3), ("spine-leaf-2to1", 8), ("fat-tree-k8-stride", 12), ("dual-plane", 16),
     ("clos3-2pods", 64)],
)  # fmt: skip
def test_compiled_decode_equals_numpy_decode_bit_for_bit(scenario: str, max_paths: int) -> None:
    """The compiled split decode against the numpy one, bit for bit, at path counts below, at and above
    numpy's 8-way pairwise-summation threshold (a left-to-right sum differs there in the last bits), with
    rows of all -1 (the even split) and rows at the bounds."""
    from ainet_gym.envs.env import EnvCore
    from ainet_gym.sim.backends.numba import jit as _jit

    if not _jit.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    core = EnvCore(_scenario_with_paths(scenario, max_paths), batch=3, backend="numba")
    core.reset([0, 1, 2])
    assert core.controllable.any()
    rng = np.random.default_rng(0)
    for trial in range(4):
        a = rng.uniform(-1.0, 1.0, size=(3, *core.action_space.shape)).astype(np.float32)
        if trial == 1:
            a[:, : core.P * 3] = -1.0  # three slots with all-zero weights
            a[0, core.P * 3 : core.P * 4] = 1.0
        v = core.validate(a)
        got = core.decode(v)
        core.world.backend = "numpy"
        try:
            ref = core.decode(v)
        finally:
            core.world.backend = "numba"
        assert got.dtype == ref.dtype and got.shape == ref.shape
        assert np.array_equal(got.view(np.int64), ref.view(np.int64))  # bit for bit
        ctrl = core.slot_connection[core.controllable]
        assert np.allclose(got[ctrl].sum(axis=1), 1.0)  # normalised


def test_nan_to_zero_is_nan_to_num() -> None:
    from ainet_gym.envs.info import nan_to_zero as _nan_to_zero

    for v in (np.array([1.0, np.nan, -2.0]), np.array([np.inf, np.nan, -np.inf, 0.5]), np.arange(3.0),
              np.array([np.nan], dtype=np.float32)):  # fmt: skip
        got, ref = _nan_to_zero(v), np.nan_to_num(v, nan=0.0)
        assert got is not v and got.dtype == ref.dtype and np.array_equal(got, ref)


@pytest.mark.parametrize("mask", [(False, True, False), (True, False, True), (True, True, True)])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_reset_in_place_equals_full_restack(backend: str, mask: tuple[bool, ...], monkeypatch) -> None:
    """Resetting copies of three (one, two, all) restarts their units in place (the placement is deterministic, so the
    units are the same), twice; every engine state array and the next intervals' results equal those of the full
    restack it replaces (a restart that forgot a timer, a flow's bytes or the split would differ)."""
    from ainet_gym.sim.backends.numba import jit as _jit
    from ainet_gym.sim.world import FabricWorld

    if backend == "numba" and not _jit.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    sc = load_scenario("spine-leaf-2to1")
    taken: list[bool] = []
    worlds = []
    for fast in (True, False):
        w = FabricWorld(sc, batch=3, backend=backend)
        if fast:
            orig = w._restart_in_place

            def spy(*args, _orig=orig):
                taken.append(_orig(*args))
                return taken[-1]

            monkeypatch.setattr(w, "_restart_in_place", spy)
        else:
            monkeypatch.setattr(w, "_restart_in_place", lambda *args: False)
        w.reset(seeds=[0, 1, 2])
        rng = np.random.default_rng(0)
        # twice: the second restart in place starts from the initial state the first one kept
        for seeds in ([None, 9, None], [4, None, 5]):
            for _ in range(3):
                w.step(w.default_split() * rng.uniform(0.5, 1.0, size=(w.sim.n_conns, 1)))
            w.reset(seeds=seeds, mask=np.array(mask))
        worlds.append(w)
    assert taken[-2:] == [True, True]  # the in-place path ran (the first reset builds the engine)
    a, b = worlds
    arrays = [k for k, v in vars(b.sim).items() if isinstance(v, np.ndarray)]
    assert "conn_npaths" in arrays
    for f in fields(EngineState):  # the engine's state beside the units': split, capacities, ...
        x, y = getattr(a.sim.engine_state, f.name), getattr(b.sim.engine_state, f.name)
        assert (x is None) == (y is None), f.name
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=f.name)
    # every array of the engine: structure, the split's entries (compacted on demand) and the state
    for k in [*arrays, "e_flow", "e_link", "e_coef", "inst_entry"]:
        np.testing.assert_array_equal(getattr(a.sim, k), getattr(b.sim, k), err_msg=k)
    for f in fields(SimState):
        np.testing.assert_array_equal(
            getattr(a.sim.state, f.name), getattr(b.sim.state, f.name), err_msg=f.name
        )
    # the table's arrays but its scratch buffers (stale past each instance's ent_hi; e_* above are what counts)
    table = [k for k, v in vars(b.sim.table).items() if isinstance(v, np.ndarray) and not k.endswith("_buf")]
    assert {"seg_coef", "cand_gather", "inst_seg"} <= set(table)
    for k in table:
        np.testing.assert_array_equal(getattr(a.sim.table, k), getattr(b.sim.table, k), err_msg=f"table.{k}")
    np.testing.assert_array_equal(a._ideal, b._ideal)
    np.testing.assert_array_equal(a.job_unit, b.job_unit)
    for _ in range(3):
        ra, rb = (w.step(w.default_split()) for w in (a, b))
        for k in ("iterations", "step_time_s", "efficiency", "gpu_utilization", "link_bytes", "conn_bytes"):
            np.testing.assert_array_equal(getattr(ra, k), getattr(rb, k), err_msg=k)
    if not all(mask):  # a kept copy is further on than a restarted one
        r, k = mask.index(True), mask.index(False)
        assert (
            a.sim.state.iterations_total[a.sim.inst_unit[k]]
            > a.sim.state.iterations_total[a.sim.inst_unit[r]]
        )


def test_restack_shares_units_only_between_copies_that_are_the_same() -> None:
    """A restack gives a copy the units of the copy before it only when both have the same jobs on the same
    GPUs at the same step. Here the hot expert of a rotating AllToAll moves every 4 steps and copy 1 is a
    step behind the others (reset a step later), so at each move it has other units than copy 0; every
    copy's units must be those built for it alone (the units of copy 0 at copy 1 would be a rotation ahead)."""
    from ainet_gym.sim.world import FabricWorld

    w = FabricWorld(load_scenario("moe-alltoall-skewed"), batch=3, backend="numpy")
    w.reset(seeds=[0, 1, 2])
    w.step(w.default_split())
    w.reset(mask=np.array([False, True, False]))
    differed = 0
    for _ in range(9):  # moves at steps 4 and 8 of copies 0 and 2, at 4 of copy 1
        w.step(w.default_split())
        own = [w._units_of(b)[0] for b in range(3)]
        for b in range(3):
            assert len(w.sim.units[b]) == len(own[b])
            assert all(x is y for x, y in zip(w.sim.units[b], own[b], strict=True)), b
        differed += any(x is not y for x, y in zip(own[0], own[1], strict=True))
    assert (w.state.step_count == [10, 9, 10]).all()
    assert differed > 0  # the copies were at different rotations at some step
