"""The numba split-mode step decodes the actions and merges the split in one compiled pass per instance
range (:meth:`BatchSim.set_split_fused` with :func:`ainet_gym.sim.backends.numba.env_passes.decode_merge_range`).

Reference: the two passes it replaces, :meth:`EnvCore.decode` then :meth:`BatchSim.set_split`, on the same
engine state: the split, the merged coefficient of every segment and each instance's compacted entries must
be the same bytes (instances with churned jobs have connections no slot controls, which keep the default)."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.envs.env import EnvCore
from ainet_gym.sim.backends.numba import env_passes as _env_passes
from ainet_gym.sim.backends.numba import jit as _jit

pytestmark = pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")


def _entries(sim) -> list[bytes]:
    t = sim.table
    out = [sim.engine_state.split.tobytes(), t.seg_coef.tobytes(), t.ent_hi.tobytes(), t.ex_lo.tobytes(), t.fe_lo.tobytes(),
           t.fe_hi.tobytes()]  # fmt: skip
    for b in range(sim.batch):  # the shared entries, then the exclusive ones
        for lo, hi in ((t.inst_seg[b], t.ent_hi[b]), (t.ex_lo[b], t.inst_seg[b + 1])):
            out += [
                t.e_flow_buf[lo:hi].tobytes(),
                t.e_link_buf[lo:hi].tobytes(),
                t.e_coef_buf[lo:hi].tobytes(),
            ]
    return out


@pytest.mark.parametrize("name", ["spine-leaf-2to1", "multi-tenant-churn"])
def test_fused_decode_and_merge_equal_the_two_passes(name: str) -> None:
    core = EnvCore(name, batch=5, backend="numba")
    core.reset(seeds=list(range(5)))
    rng = np.random.default_rng(1)
    sim = core.world.sim
    for _ in range(6):
        a = rng.uniform(-1.0, 1.0, (5, *core.action_space.shape)).astype(np.float32)
        a[0, :] = -1.0  # every weight of a slot zero: the even split
        rows = np.ascontiguousarray(core.validate(a), dtype=np.float64).reshape(-1, core.P)
        ctrl, conns, npaths = core._controllable()
        fixed = core._fixed_conns(conns)
        ctrl_lo, fixed_lo = core._instance_bounds(conns, fixed)
        sim.set_split(core.decode(core.validate(a)))
        sim.merge_pending()  # set_split merges when the entries are next needed: now
        ref = _entries(sim)
        sim.set_split_fused(
            _env_passes.decode_merge_range,
            (rows, ctrl, conns, npaths, core._default, fixed, ctrl_lo, fixed_lo),
            np.empty_like(core._default),
        )
        assert _entries(sim) == ref
        # deferred (as env.step sets it): pending until the entries are read, then the same bytes
        sim.set_split(None)
        sim.merge_pending()  # the first-path split's entries in the buffers
        sim.set_split_fused(
            _env_passes.decode_merge_range,
            (rows, ctrl, conns, npaths, core._default, fixed, ctrl_lo, fixed_lo),
            np.empty_like(core._default),
            defer=True,
        )
        assert not np.array_equal(sim.table.seg_coef, np.frombuffer(ref[1]))
        _ = sim.e_flow  # any read of the entries merges the pending split first
        assert _entries(sim) == ref
        core.step(a)


def test_a_deferred_split_runs_with_the_interval_as_an_immediate_one_does() -> None:
    cores = [EnvCore("multi-tenant-churn", batch=4, backend="numba") for _ in range(2)]
    for c in cores:
        c.reset(seeds=[3, 4, 5, 6])
    rng = np.random.default_rng(2)
    for _ in range(8):
        a = rng.uniform(-1.0, 1.0, (4, *cores[0].action_space.shape)).astype(np.float32)
        outs = []
        for defer, core in zip((False, True), cores, strict=True):
            sim = core.world.sim
            ctrl, conns, npaths = core._controllable()
            fixed = core._fixed_conns(conns)
            ctrl_lo, fixed_lo = core._instance_bounds(conns, fixed)
            rows = np.ascontiguousarray(core.validate(a), dtype=np.float64).reshape(-1, core.P)
            sim.set_split_fused(
                _env_passes.decode_merge_range,
                (rows, ctrl, conns, npaths, core._default, fixed, ctrl_lo, fixed_lo),
                np.empty_like(core._default),
                defer=defer,
            )
            outs.append(core._run(sim.engine_state.split, None, split_set=True))
        np.testing.assert_array_equal(outs[0][0], outs[1][0])  # observations
        np.testing.assert_array_equal(outs[0][1], outs[1][1])  # rewards
        assert _entries(cores[0].world.sim) == _entries(cores[1].world.sim)


def test_set_split_fused_needs_the_numba_backend() -> None:
    core = EnvCore("spine-leaf-2to1", batch=2, backend="numpy")
    core.reset([None, None])
    with pytest.raises(ValueError, match="backend 'numpy'"):
        core.world.sim.set_split_fused(_env_passes.decode_merge_range, (), np.empty_like(core._default))
