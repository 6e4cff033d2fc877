"""Compiled (numba) pieces of the env side of a step, for the ``"numba"`` backend.

:meth:`ainet_gym.envs.env.EnvCore.decode` with the numpy backend is the reference; the kernel here does the
same floating-point operations in the same order, so the two agree bit for bit
(``tests/envs/test_fast_paths.py`` checks it). In particular the sum of a slot's path weights follows numpy's
pairwise summation of a contiguous row (:func:`ainet_gym.sim.backends.numba.sums.block_sum`), which is not a left-to-right sum from 8
elements on.
"""

from __future__ import annotations

import numpy as np

from ainet_gym.sim.backends.numba.crew import announce
from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit
from ainet_gym.sim.backends.numba.merge import merge_range
from ainet_gym.sim.backends.numba.sums import block_sum

__all__ = [
    "PW_BLOCKSIZE",
    "decode_merge_range",
    "decode_split",
    "info_jobs",
    "observe_history",
    "observe_rest",
]

PW_BLOCKSIZE = 128  # rows up to this long only; numpy's pairwise-summation block (numpy/_core/src/umath/loops_utils.h.src)


@njit(cache=True, nogil=True, error_model="numpy")
def decode_split(actions, ctrl, conns, npaths, default, fixed, out):  # pragma: no cover - compiled
    """Split ratios of ``split``-mode actions, written into ``out`` (connections, P).

    ``actions`` (rows, P) float32 or float64 in [-1, 1] (read as float64, exactly), one row per action slot of the batch, ``P <= PW_BLOCKSIZE``; ``ctrl`` (k,) the rows
    of the controllable slots, ``conns`` (k,) their connections, ``npaths`` (k,) their numbers of candidate
    paths; every other connection (``fixed``, the rows not in ``conns``) gets its ``default`` row. A controllable slot's weights are
    ``(a + 1) / 2`` over its valid paths, normalised by their sum (all zero: the even split).
    """
    _decode_rows(0, ctrl.shape[0], 0, fixed.shape[0], actions, ctrl, conns, npaths, default, fixed, out,
                 np.empty(actions.shape[1]))  # fmt: skip
    return out


@njit(nogil=True, error_model="numpy", **COMPILED_ONLY)
def _decode_rows(
    k_lo, k_hi, i_lo, i_hi, actions, ctrl, conns, npaths, default, fixed, out, r
):  # pragma: no cover
    """The rows of :func:`decode_split` for the controllable slots ``k_lo:k_hi`` and the fixed connections
    ``i_lo:i_hi``; ``r`` (P,) scratch."""
    for i in range(i_lo, i_hi):
        c = fixed[i]
        for p in range(out.shape[1]):
            out[c, p] = default[c, p]
    P = actions.shape[1]
    # two-index access, not row views: a view takes and drops a reference to its array, atomically, and
    # this loop runs once per slot
    for k in range(k_lo, k_hi):
        a, c = ctrl[k], conns[k]
        n = npaths[k]
        for p in range(P):
            r[p] = (actions[a, p] + 1.0) / 2.0 if p < n else 0.0
        tot = block_sum(r, np.int64(0), P)
        if tot > 0:
            for p in range(P):
                out[c, p] = r[p] / tot
        else:
            for p in range(P):
                out[c, p] = (1.0 if p < n else 0.0) / n


@njit(cache=True, nogil=True, error_model="numpy")
def decode_merge_range(
    b_lo, b_hi, actions, ctrl, conns, npaths, default, fixed, ctrl_lo, fixed_lo, out, table, go,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`decode_split` and the engine's merge of the split (:func:`ainet_gym.sim.backends.numba.merge.merge_range`)
    for the instances ``b_lo:b_hi``, one call each over the range (the kernel of
    :meth:`ainet_gym.sim.engine.BatchSim.set_split_fused`). Instance ``b``'s controllable slots are
    ``ctrl_lo[b]:ctrl_lo[b + 1]`` of ``ctrl`` / ``conns`` / ``npaths``, its fixed connections
    ``fixed_lo[b]:fixed_lo[b + 1]`` of ``fixed``; ``table`` (the engine's compiled merge record) and ``go`` are
    :func:`~ainet_gym.sim.backends.numba.merge.merge_range`'s."""
    announce(go)
    _decode_rows(ctrl_lo[b_lo], ctrl_lo[b_hi], fixed_lo[b_lo], fixed_lo[b_hi], actions, ctrl, conns, npaths,
                 default, fixed, out, np.empty(actions.shape[1]))  # fmt: skip
    merge_range(b_lo, b_hi, out.reshape(-1), table, go)


@njit(nogil=True, error_model="numpy", **COMPILED_ONLY)
def _nan_to_zero(x):  # pragma: no cover - compiled
    """``np.nan_to_num(x, nan=0.0)``: NaN to 0, +-inf to the largest finite float64."""
    if x != x:
        return 0.0
    if x == np.inf:
        return 1.7976931348623157e308
    if x == -np.inf:
        return -1.7976931348623157e308
    return x


@njit(cache=True, nogil=True, error_model="numpy")
def observe_history(lo, hi, hist, push, lu, net_links, o_util, obs, top_out):  # pragma: no cover - compiled
    """The link-utilisation block of the flat observation of :meth:`ainet_gym.envs.env.EnvCore.observe`,
    with the numpy code's floating-point operations (bit for bit): push ``lu`` (B, L) at ``net_links`` (N,)
    into the history ``hist`` (B, H, N, newest first) of the ``push`` (B,) instances, write the history into
    ``obs`` (B, D) float32 from ``o_util`` on, and the largest newest utilisation of the instances ``lo:hi``
    into ``top_out[0]`` (NaN if any is NaN; -inf for none), for the capacity check. It reads only the interval's
    figures and the history, so it may run right after the interval, before the dynamics of the next one
    (:meth:`ainet_gym.envs.env.EnvCore.step` runs it on the kernel threads)."""
    H, N = hist.shape[1], hist.shape[2]
    top = -np.inf
    # multi-index access, not row views: a view takes and drops a reference to its array, atomically
    for b in range(lo, hi):
        if push[b]:
            for h in range(H - 1, 0, -1):
                for k in range(N):
                    hist[b, h, k] = hist[b, h - 1, k]
            for k in range(N):
                hist[b, 0, k] = lu[b, net_links[k]]
        m = -np.inf  # branch-free max (NaN never compares greater) and a NaN count beside it
        n_nan = 0
        for k in range(N):
            v = hist[b, 0, k]
            m = v if v > m else m
            n_nan += v != v
        if n_nan or top != top:
            top = np.nan
        elif m > top:
            top = m
        for h in range(H):
            o = o_util + h * N
            for k in range(N):
                v = hist[b, h, k]
                obs[b, o + k] = 1.0 if v > 1.0 else v  # np.minimum(v, 1.0): NaN stays NaN
    top_out[0] = top


@njit(cache=True, nogil=True, error_model="numpy")
def observe_rest(
    lo, hi, net_links, cap, net_capacity, job_unit, has_res, eff, util, phase_cur, unit_nphases, time_s,
    iter_start, job_ideal, slots, step_count, episode_steps, o_cap, o_jobs, o_slots, o_prog, obs,
):  # pragma: no cover - compiled  # fmt: skip
    """Every block of the flat observation but the link utilisation and the background, for the instances
    ``lo:hi``, with the numpy code's floating-point operations (bit for bit): the capacities ``cap`` (B, L)
    bytes/s over the nominal ``net_capacity`` (N,); per job slot (``job_unit`` (B, J), -1: empty) alive,
    efficiency and utilisation (``eff``, ``util`` (B, J), read only when ``has_res``), communicating (the
    unit tables ``phase_cur``, ``unit_nphases``) and the squashed time since its iteration started
    (``time_s`` (B,), ``iter_start`` (U,), ``job_ideal`` (B, J) s); the slot block ``slots`` (B, S * 3)
    float32; the progress ``step_count`` (B,) / ``episode_steps``. ``o_*``: the blocks' offsets in ``obs``."""
    N = net_links.shape[0]
    J = job_unit.shape[1]
    for b in range(lo, hi):
        for k in range(N):
            obs[b, o_cap + k] = cap[b, net_links[k]] / net_capacity[k]
        t = time_s[b]
        for j in range(J):
            o = o_jobs + 5 * j
            u = job_unit[b, j]
            if u < 0:
                for f in range(5):
                    obs[b, o + f] = 0.0
                continue
            obs[b, o] = 1.0
            if has_res:
                obs[b, o + 1] = _nan_to_zero(eff[b, j])
                obs[b, o + 2] = _nan_to_zero(util[b, j])
            else:
                obs[b, o + 1] = 0.0
                obs[b, o + 2] = 0.0
            pc = phase_cur[u]
            obs[b, o + 3] = 1.0 if pc >= 0 and pc < unit_nphases[u] else 0.0
            since = t - iter_start[u]
            if not (since >= 0.0) and since == since:  # np.maximum(since, 0.0): NaN stays NaN
                since = 0.0
            x = since / job_ideal[b, j]
            obs[b, o + 4] = x / (1.0 + x)
        for k in range(slots.shape[1]):
            obs[b, o_slots + k] = slots[b, k]
        p = step_count[b] / episode_steps
        obs[b, o_prog] = 1.0 if p > 1.0 else p


@njit(cache=True, nogil=True, error_model="numpy")
def info_jobs(
    lo, hi, step_t, ideal, util, eff, compute_s, job_gpus, o_step_ms, o_ideal_ms, o_util, o_eff, o_iter_util,
    o_rew_util, o_rew_step, row,
):  # pragma: no cover - compiled  # fmt: skip
    """The per-job info arrays and the two built-in rewards of :meth:`ainet_gym.envs.env.EnvCore.info`
    for the instances ``lo:hi``, with the numpy code's floating-point operations (bit for bit): NaN as 0
    (``np.nan_to_num``), times in ms, the iteration GPU utilisation ``compute_s / step_t``, the
    GPU-weighted mean utilisation of the jobs with a figure (:class:`GpuUtilizationReward`) and the mean
    efficiency of the jobs with one (:class:`StepTimeReward`); sums over a row in numpy's order
    (:func:`ainet_gym.sim.backends.numba.sums.block_sum`, rows of at most 128 jobs). ``row`` (J,) scratch."""
    J = step_t.shape[1]
    row2 = np.empty(J)
    for b in range(lo, hi):
        n_ok = 0
        for j in range(J):
            o_step_ms[b, j] = _nan_to_zero(step_t[b, j] * 1e3)
            o_ideal_ms[b, j] = _nan_to_zero(ideal[b, j] * 1e3)
            o_util[b, j] = _nan_to_zero(util[b, j])
            o_eff[b, j] = _nan_to_zero(eff[b, j])
            o_iter_util[b, j] = _nan_to_zero(compute_s[b, j] / step_t[b, j])
            u = util[b, j]
            ok = u - u == 0.0  # np.isfinite
            w = float(job_gpus[b, j]) if ok else 0.0
            row[j] = w
            row2[j] = (u if ok else 0.0) * w
        tot = block_sum(row, np.int64(0), J)
        num = block_sum(row2, np.int64(0), J)
        o_rew_util[b] = num / tot if tot > 0 else 0.0
        for j in range(J):
            e = eff[b, j]
            ok = e - e == 0.0
            n_ok += 1 if ok else 0
            row[j] = e if ok else 0.0
        s = block_sum(row, np.int64(0), J)
        o_rew_step[b] = s / max(n_ok, 1) if n_ok > 0 else 0.0
