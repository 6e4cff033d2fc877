"""The per-job and per-link figures of an interval, compiled (the same operations as the numpy reference's)."""

from __future__ import annotations

import numpy as np

from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit
from ainet_gym.sim.backends.numba.sums import gathered_row_sum

__all__ = ["interval_figures"]


@njit(nogil=True, error_model="numpy", **COMPILED_ONLY)
def _gathered_sums(x, lo, hi, idx, buf, out):  # pragma: no cover - compiled
    """``out[i] = x[:, idx].sum(axis=1)[lo + i]`` for the rows ``lo:hi`` (see :func:`gathered_row_sum`):
    left-to-right sums run across the rows, one link at a time (independent chains)."""
    n = hi - lo
    if x.shape[0] == 1:
        for i in range(n):
            out[i] = gathered_row_sum(x, lo + i, idx, buf)
        return
    for i in range(n):
        out[i] = 0.0
    for k in range(idx.shape[0]):
        lk = idx[k]
        for i in range(n):
            out[i] += x[lo + i, lk]


@njit(nogil=True, error_model="numpy", **COMPILED_ONLY)
def _nan_max(a, b):  # pragma: no cover - compiled
    """``np.maximum(a, b)``: NaN if either is NaN."""
    if a != a or b != b:
        return a + b
    return a if a >= b else b


@njit(cache=True, nogil=True, error_model="numpy")
def interval_figures(
    link_bytes, cap, dur, net_links, net_mask, gpu_uplinks, tier_off, tier_idx, to_gbps,
    job_unit, unit_ngpus, iterations, step_sum, comm_sum, active_t, compute_t, time_s, iter_start,
    unit_compute, ideal_step_s,
    lu, maxu, tier_bytes, failed, thr, cap_copy,
    alive, ngpu, iters, step_t, comm_t, util, eff, ideal, compute_s, lo, hi,
):  # pragma: no cover - compiled  # fmt: skip
    """The per-link and per-job figures of an interval in one pass, the same floating-point operations
    as the numpy code of :meth:`IntervalMeter.result` and :meth:`IntervalMeter.measure` (bit for bit).

    Inputs: ``link_bytes``, ``cap`` (B, L); ``dur`` (B,) s; ``net_links`` (N,) and ``net_mask`` (L,) the
    network links; ``gpu_uplinks`` (G,); the links of tier ``t`` are ``tier_idx[tier_off[t]:tier_off[t
    + 1]]``; ``to_gbps`` bytes/s to Gbit/s; the unit tables and ``job_unit``, ``ideal_step_s`` (B, J).
    Outputs (written): ``lu``, ``cap_copy`` (B, L); ``maxu``, ``failed``, ``thr`` (B,); ``tier_bytes``
    (B, T); ``alive`` ... ``compute_s`` (B, J). Only the instances ``lo:hi`` are read and written.

    Three steps: each link's figures (:func:`_link_figures`), the figures over sets of links
    (:func:`_link_set_figures`), each job's (:func:`_job_figures`). Only this kernel calls them: they are
    compiled without the Python-callable wrappers (whose compile a cold start would pay), and the two that
    allocate nothing without reference counting (a call then passes its arrays for free), as the interval
    kernels' steps are (:mod:`ainet_gym.sim.backends.numba`)."""
    _link_figures(link_bytes, cap, dur, net_mask, lu, failed, cap_copy, lo, hi)
    _link_set_figures(
        link_bytes,
        lu,
        dur,
        net_links,
        gpu_uplinks,
        tier_off,
        tier_idx,
        to_gbps,
        maxu,
        tier_bytes,
        thr,
        lo,
        hi,
    )
    _job_figures(
        dur, job_unit, unit_ngpus, iterations, step_sum, comm_sum, active_t, compute_t, time_s, iter_start,
        unit_compute, ideal_step_s, alive, ngpu, iters, step_t, comm_t, util, eff, ideal, compute_s, lo, hi,
    )  # fmt: skip


@njit(nogil=True, error_model="numpy", _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _link_figures(
    link_bytes, cap, dur, net_mask, lu, failed, cap_copy, lo, hi
):  # pragma: no cover - compiled
    """:func:`interval_figures`' per-link step: ``cap_copy``, the mean utilisation ``lu`` (0 on a failed link
    or an empty interval) and the count of failed network links ``failed`` of the instances ``lo:hi``."""
    L = link_bytes.shape[1]
    for b in range(lo, hi):
        d = dur[b]
        # two-index access (a row view takes and drops a reference to its array, atomically) and
        # branch-free loop bodies, so that the compiler vectorises them
        dd = d if d > 0 else 1.0
        for k in range(L):
            cap_copy[b, k] = cap[b, k]
        for k in range(L):
            c = cap[b, k]
            q = link_bytes[b, k] / (c * dd)
            lu[b, k] = q if c > 0 and d > 0 else 0.0
        nf = 0
        for k in range(L):
            nf += 1 if cap[b, k] <= 0 and net_mask[k] else 0
        failed[b] = nf


@njit(nogil=True, error_model="numpy", no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _link_set_figures(
    link_bytes, lu, dur, net_links, gpu_uplinks, tier_off, tier_idx, to_gbps, maxu, tier_bytes, thr, lo, hi
):  # pragma: no cover - compiled
    """:func:`interval_figures`' sums and maxima over sets of links, for the instances ``lo:hi``: the largest
    network-link utilisation ``maxu``, the bytes of each tier ``tier_bytes``, the NIC throughput ``thr``."""
    # the link outside, the copies inside, so that the copies' running sums are independent chains (one
    # copy's sum is a chain of dependent additions)
    width = max(gpu_uplinks.shape[0], tier_idx.shape[0])
    buf = np.empty(max(width, 1))
    n = hi - lo
    acc = np.empty(n)
    if net_links.shape[0] > 0:
        for i in range(n):
            acc[i] = lu[lo + i, net_links[0]]
        for k in range(1, net_links.shape[0]):
            lk = net_links[k]
            for i in range(n):
                acc[i] = _nan_max(acc[i], lu[lo + i, lk])
        for i in range(n):
            maxu[lo + i] = acc[i]
    else:
        for i in range(n):
            maxu[lo + i] = 0.0
    for t in range(tier_off.shape[0] - 1):
        _gathered_sums(link_bytes, lo, hi, tier_idx[tier_off[t] : tier_off[t + 1]], buf, acc)
        for i in range(n):
            tier_bytes[lo + i, t] = acc[i]
    _gathered_sums(link_bytes, lo, hi, gpu_uplinks, buf, acc)
    for i in range(n):
        d = dur[lo + i]
        thr[lo + i] = acc[i] / d * to_gbps if d > 0 else 0.0


@njit(nogil=True, error_model="numpy", _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _job_figures(
    dur, job_unit, unit_ngpus, iterations, step_sum, comm_sum, active_t, compute_t, time_s, iter_start,
    unit_compute, ideal_step_s, alive, ngpu, iters, step_t, comm_t, util, eff, ideal, compute_s, lo, hi,
):  # pragma: no cover - compiled  # fmt: skip
    """:func:`interval_figures`' per-job step for the instances ``lo:hi``: each job's unit figures (GPUs,
    iterations, mean step and comm times, utilisation, efficiency against ``ideal_step_s``); NaN (0 for
    counts) where a job has no unit."""
    J = job_unit.shape[1]
    nan = np.nan
    for b in range(lo, hi):
        d = dur[b]
        for j in range(J):
            u = job_unit[b, j]
            a = u >= 0
            i = u if a else 0
            alive[b, j] = a
            ngpu[b, j] = unit_ngpus[i] if a else 0
            it = iterations[i] if a else 0
            iters[b, j] = it
            if a and it > 0:
                st = step_sum[i] / max(it, 1)
                step_t[b, j] = st
                comm_t[b, j] = comm_sum[i] / max(it, 1)
            else:
                st = nan
                step_t[b, j] = nan
                comm_t[b, j] = nan
            act = active_t[i] if a else 0.0
            util[b, j] = compute_t[i] / act if act > 0 else nan
            since = time_s[b] - iter_start[i] if a else nan
            actual = st if it > 0 else _nan_max(since, d)
            if act > 0:
                e = ideal_step_s[b, j] / actual
                eff[b, j] = 1.0 if e > 1.0 else e  # np.minimum(e, 1.0): NaN stays NaN
            else:
                eff[b, j] = nan
            ideal[b, j] = ideal_step_s[b, j] if a else nan
            compute_s[b, j] = unit_compute[i] if a else nan
