"""The merge of a split takes the engine's entry table as one compiled record.

References are independent of the code under test: the kernels' own parameter names, and the entry table's
arrays by their attribute names (a record field built from another array fails).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from ainet_gym.sim.backends.numba import jit, merge, threads

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="numba is not installed")


def test_the_merge_takes_the_split_and_one_record_of_the_entry_tables_own_arrays() -> None:
    from ainet_gym.scenario.loader import load_scenario
    from ainet_gym.sim import records
    from ainet_gym.sim.backends.numba import env_passes
    from ainet_gym.sim.backends.numba import records as nb_records
    from ainet_gym.sim.world import FabricWorld

    params = list(inspect.signature(merge.merge_range.py_func).parameters)
    assert params == ["b_lo", "b_hi", "split_flat", "table", "go"]
    params = list(inspect.signature(env_passes.decode_merge_range.py_func).parameters)
    assert params[-3:] == ["out", "table", "go"]
    assert tuple(inspect.signature(nb_records._NEW["merge"].py_func).parameters) == records.MERGE_FIELDS

    w = FabricWorld(load_scenario("spine-leaf-2to1"), 2, backend="numba")
    w.reset(seeds=[0, 1])
    t = w.sim.table
    renamed = {"e_flow": "e_flow_buf", "e_link": "e_link_buf", "e_coef": "e_coef_buf", "rowsum": "rowsum_buf"}
    values = records.merge_table(t)
    assert values._fields == records.MERGE_FIELDS
    for name, got in zip(records.MERGE_FIELDS, values, strict=True):
        assert got is getattr(t, renamed.get(name, name)), name
    rec = t.merge_record()
    assert isinstance(rec, nb_records.MergeRecord)
    assert t.merge_record() is rec  # built once per table
    # the compiled record holds the same arrays: a merge through it writes the table's buffers
    t.seg_coef[:] = -1.0
    split = np.ascontiguousarray(w.sim.engine_state.split, dtype=np.float64)
    merge.merge_range(0, w.sim.batch, split.reshape(-1), rec, threads.go_flags())
    assert (t.seg_coef >= 0).all()


def test_optional_unit_arrays_stack_with_their_fill_where_a_unit_has_none() -> None:
    from types import SimpleNamespace

    from ainet_gym.sim.stack import _optional_ids

    counts = np.array([2, 3, 1])
    none = [SimpleNamespace(x=None) for _ in counts]
    got = _optional_ids(none, "x", counts, -1)
    assert got.dtype == np.int64 and got.tolist() == [-1] * 6
    some = [
        SimpleNamespace(x=None),
        SimpleNamespace(x=np.array([4, 5, 6], dtype=np.int32)),
        SimpleNamespace(x=None),
    ]
    got = _optional_ids(some, "x", counts, 1)
    assert got.dtype == np.int64 and got.tolist() == [1, 1, 4, 5, 6, 1]
    assert _optional_ids([], "x", np.zeros(0, dtype=np.int64), -1).shape == (0,)
