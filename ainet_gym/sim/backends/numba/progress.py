"""Group clocks: the lazy kernel's progress kept per rate group (issue-28zl; ``settings.PROGRESS_GROUPS``).

The per-flow path (:func:`~ainet_gym.sim.backends.numba.lazy.lazy_write_rates`) brings a flow's bytes left
up to date and moves its completion key in a heap of flows whenever a solve changes its rate: on 8 AllToAll
x 128 GPUs interval 5 that is 105 M writes, while a solve changes the level of about 81 bottleneck groups
(docs/engine-alltoall.md, "issue-28zd"). Here the active flows are partitioned into groups whose members have
the same rate (bitwise). A group ``g`` keeps a clock: ``g_s[g]`` bytes per flow sent by time ``g_t[g]`` at
rate ``g_r[g]`` since it was made, so that ``S_g(t) = g_s + g_r (t - g_t)``. A member ``f`` keeps ``base[f]``,
the clock when it joined; its ``rem`` / ``moved`` hold for that moment, so its bytes sent since are
``S_g(t) - base[f]`` and its finish tag ``rem[f] + base[f]`` does not change while it stays. A solve then
costs, per group whose members all took the same new rate, one clock update and one key in a heap of groups
(keyed by the least completion key of its members, ``g_ktag``); only the flows that leave their group (a
rate unlike the others') are brought up to date and moved to the group of their new rate (found in a hash of
the rates seen by the solve). A completion scans its group's members (a linked list) once per event.
Exact: the same rates, and bytes left and completion times equal to the per-flow path's to round-off
(tests/sim/test_progress_groups.py)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ainet_gym.sim.backends.numba.heaps import heap_set
from ainet_gym.sim.backends.numba.jit import COMPILED_ONLY, njit
from ainet_gym.sim.backends.numba.steps import advance_flow, retire_flow

__all__ = ["GroupClocks", "group_scratch"]


class GroupClocks(NamedTuple):
    """The group clocks' scratch (:func:`group_scratch`): per flow (global id), per group (ids below twice the
    largest instance's flows + 2) and a hash of rates (stamped per solve)."""

    grp: np.ndarray  # (flows,) int64 the flow's group, -1: none
    base: np.ndarray  # (flows,) float64 the group's clock when the flow joined it (rem, moved hold then)
    nxt: np.ndarray  # (flows,) int64 next member of the group's list, -1: the last
    prv: np.ndarray  # (flows,) int64 previous member, -1: the first
    g_s: np.ndarray  # (groups,) float64 clock: bytes per member sent by g_t
    g_t: np.ndarray  # (groups,) float64 s since the interval start
    g_r: np.ndarray  # (groups,) float64 the members' rate, bytes/s
    g_n: np.ndarray  # (groups,) int64 members
    g_job: np.ndarray  # (groups,) int64 members that are job flows (the others background: no completion)
    g_head: np.ndarray  # (groups,) int64 first member
    g_tag: np.ndarray  # (groups,) float64 least finish tag rem + base of a job member (inf: none)
    g_ktag: np.ndarray  # (groups,) float64 least tag less the completion tolerance
    g_min: np.ndarray  # (groups,) int64 the member of the least tag
    g_dirty: np.ndarray  # (groups,) bool the least tags are to be found again (a member left)
    g_hpos: np.ndarray  # (groups,) int64 slot in the heap of groups, -1: not in it
    g_tend: np.ndarray  # (groups,) float64 the least completion time of a member
    g_stamp: np.ndarray  # (groups,) int64 the solve that counted the group's changed members
    g_new: np.ndarray  # (groups,) float64 the new rate of its first changed member
    g_cnt: np.ndarray  # (groups,) int64 its changed members at that rate
    g_kmark: np.ndarray  # (groups,) int64 the solve that listed it for a new key
    g_free: np.ndarray  # (groups,) int64 free ids (a stack)
    g_list: np.ndarray  # (groups,) int64 the groups a solve touched
    g_upd: np.ndarray  # (groups,) int64 the groups a solve gives a new key
    h_key: np.ndarray  # (slots,) float64 the hash of rates: the rate
    h_grp: np.ndarray  # (slots,) int64 its group
    h_stamp: np.ndarray  # (slots,) int64 the solve that wrote the slot (older: empty)
    fbuf: np.ndarray  # (1,) float64 a rate, read as its bits through ibuf
    ibuf: np.ndarray  # (1,) int64 view of fbuf
    n_free: np.ndarray  # (1,) int64 free ids on the stack


@njit(nogil=True, **COMPILED_ONLY)
def group_scratch(n_flows, f_max):  # pragma: no cover - compiled
    """Fresh group clocks for flows below ``n_flows`` and instances of at most ``f_max`` flows (0, 0: an
    empty scratch, the per-flow path)."""
    i64 = np.int64
    n_g = 2 * f_max + 2 if f_max > 0 else 0  # (a solve frees the groups it empties at its end)
    n_h = 64  # (at least the 64 slots a solve's hash starts with, group_write_rates)
    while n_h < 4 * n_g:
        n_h *= 2
    fbuf = np.empty(1)
    return GroupClocks(
        np.full(n_flows, -1, dtype=i64), np.zeros(n_flows), np.empty(n_flows, dtype=i64),
        np.empty(n_flows, dtype=i64), np.zeros(n_g), np.zeros(n_g), np.zeros(n_g), np.zeros(n_g, dtype=i64),
        np.zeros(n_g, dtype=i64), np.full(n_g, -1, dtype=i64), np.zeros(n_g), np.zeros(n_g),
        np.full(n_g, -1, dtype=i64), np.zeros(n_g, dtype=np.bool_), np.full(n_g, -1, dtype=i64), np.zeros(n_g),
        np.full(n_g, -1, dtype=i64), np.zeros(n_g), np.zeros(n_g, dtype=i64), np.full(n_g, -1, dtype=i64),
        np.arange(n_g, dtype=i64)[::-1].copy(), np.empty(n_g, dtype=i64), np.empty(n_g, dtype=i64),
        np.zeros(n_h), np.zeros(n_h, dtype=i64), np.full(n_h, -1, dtype=i64), fbuf, fbuf.view(i64),
        np.full(1, n_g, dtype=i64),
    )  # fmt: skip


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def group_reset(gc, f0, f1):  # pragma: no cover - compiled
    """An instance's flows ``f0:f1`` in no group, every group free (a lazy instance starts)."""
    for f in range(f0, f1):
        gc.grp[f] = -1
    n_g = gc.g_n.shape[0]
    for g in range(n_g):
        gc.g_free[g] = n_g - 1 - g
        gc.g_hpos[g] = -1
        gc.g_n[g] = 0
    gc.n_free[0] = n_g


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_clock(gc, g, now):  # pragma: no cover - compiled
    """Group ``g``'s clock at ``now``."""
    return gc.g_s[g] + gc.g_r[g] * (now - gc.g_t[g])


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_new(gc, r, now):  # pragma: no cover - compiled
    """A new empty group at rate ``r``, its clock 0 at ``now``. Its id."""
    gc.n_free[0] -= 1
    g = gc.g_free[gc.n_free[0]]
    gc.g_s[g], gc.g_t[g], gc.g_r[g], gc.g_n[g], gc.g_job[g], gc.g_head[g] = 0.0, now, r, 0, 0, -1
    gc.g_tag[g], gc.g_ktag[g], gc.g_min[g], gc.g_dirty[g] = np.inf, np.inf, -1, False
    gc.g_stamp[g] = gc.g_kmark[g] = -1
    return g


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_link(gc, g, f, now, job, rem_f, tol):  # pragma: no cover - compiled
    """Flow ``f`` (``rem_f`` bytes left, brought up to ``now``) joins group ``g`` at the group's clock; a
    ``job`` flow (completion tolerance ``tol`` bytes) enters the group's least tags, as :func:`_g_key` finds
    them."""
    s = _g_clock(gc, g, now)
    gc.grp[f] = g
    gc.base[f] = s
    h = gc.g_head[g]
    gc.nxt[f] = h
    gc.prv[f] = -1
    if h >= 0:
        gc.prv[h] = f
    gc.g_head[g] = f
    gc.g_n[g] += 1
    if job:
        gc.g_job[g] += 1
        if not gc.g_dirty[g]:
            t = rem_f + s
            if t - tol < gc.g_ktag[g]:
                gc.g_ktag[g] = t - tol
            if t < gc.g_tag[g]:
                gc.g_tag[g], gc.g_min[g] = t, f


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_unlink(gc, g, f, job):  # pragma: no cover - compiled
    """Flow ``f`` leaves group ``g``'s list (the least tags to be found again when it could have held one)."""
    p, q = gc.prv[f], gc.nxt[f]
    if p >= 0:
        gc.nxt[p] = q
    else:
        gc.g_head[g] = q
    if q >= 0:
        gc.prv[q] = p
    gc.g_n[g] -= 1
    gc.grp[f] = -1
    if job:
        gc.g_job[g] -= 1
        gc.g_dirty[g] = True


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_key(gc, g, hn, hk, hf, rem, eps_b, flow_bg, flow_scale):  # pragma: no cover - compiled
    """Group ``g``'s key in the heap of groups (its least tags found again first if they are stale; the
    group freed when it has no member). The heap's size."""
    if gc.g_n[g] == 0:
        hn = heap_set(hk, hf, gc.g_hpos, hn, g, np.inf)
        gc.g_free[gc.n_free[0]] = g
        gc.n_free[0] += 1
        gc.g_n[g] = -1  # (freed: a later listing of it is skipped)
        return hn
    if gc.g_dirty[g]:
        tag, ktag, fm = np.inf, np.inf, -1
        f = gc.g_head[g]
        while f >= 0:
            if not flow_bg[f]:
                t = rem[f] + gc.base[f]
                kt = t - eps_b * flow_scale[f]
                if t < tag:
                    tag, fm = t, f
                if kt < ktag:
                    ktag = kt
            f = gc.nxt[f]
        gc.g_tag[g], gc.g_ktag[g], gc.g_min[g], gc.g_dirty[g] = tag, ktag, fm, False
    r = gc.g_r[g]
    if r > 0 and gc.g_job[g] > 0:
        gc.g_tend[g] = gc.g_t[g] + (gc.g_tag[g] - gc.g_s[g]) / r
        key = gc.g_t[g] + (gc.g_ktag[g] - gc.g_s[g]) / r
    else:
        gc.g_tend[g] = np.inf
        key = np.inf
    return heap_set(hk, hf, gc.g_hpos, hn, g, key)


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_list_key(gc, g, tick, n_upd):  # pragma: no cover - compiled
    """Group ``g`` listed for a new key at the end of solve ``tick`` (once). The listed groups."""
    if gc.g_kmark[g] != tick:
        gc.g_kmark[g] = tick
        gc.g_upd[n_upd] = g
        n_upd += 1
    return n_upd


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_slot(gc, r, mask, tick):  # pragma: no cover - compiled
    """The slot of rate ``r`` in the hash of solve ``tick`` (``mask + 1`` slots): its own, or the empty one
    where it goes."""
    gc.fbuf[0] = r
    x = gc.ibuf[0] * -7046029254386353131  # (wraps: the bits mixed)
    i = (x ^ (x >> 29)) & mask
    while gc.h_stamp[i] == tick and gc.h_key[i] != r:
        i = (i + 1) & mask
    return i


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_count(n_re, now, tick, fl, rw, gc, cnt):  # pragma: no cover - compiled
    """A solve's re-filled flows whose rate was written (counted as :func:`lazy_write_rates` counts them,
    ``cnt[4]``, ``cnt[5]``): in each group, the members whose new rate is its first changed member's
    (``g_cnt``). The groups touched (``g_list``)."""
    rate, t_upd, grp = fl.rate, fl.t_upd, gc.grp
    n_t = 0
    for k in range(n_re):
        f = rw.refill[k]
        r = rate[f]
        r0 = rw.old_rate[k]
        if r == r0 and t_upd[f] < now:
            continue
        cnt[4] += 1
        if abs(r - r0) > 1e-12 * max(abs(r), abs(r0)):
            cnt[5] += 1
        t_upd[f] = now
        g = grp[f]
        if g < 0 or r == gc.g_r[g]:
            continue
        if gc.g_stamp[g] != tick:
            gc.g_stamp[g], gc.g_new[g], gc.g_cnt[g] = tick, r, 0
            gc.g_list[n_t] = g
            n_t += 1
        if r == gc.g_new[g]:
            gc.g_cnt[g] += 1
    return n_t


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_whole(n_t, now, tick, mask, n_zero, gc):  # pragma: no cover - compiled
    """The touched groups whose members all took the same new rate: the clock brought to ``now`` at the old
    rate, the new rate set, the group in the solve's hash and listed for a new key. ``(n_upd, n_zero)``."""
    n_upd = 0
    for i in range(n_t):
        g = gc.g_list[i]
        if gc.g_cnt[g] != gc.g_n[g]:
            continue
        r0, r = gc.g_r[g], gc.g_new[g]
        gc.g_s[g] = _g_clock(gc, g, now)
        gc.g_t[g] = now
        gc.g_r[g] = r
        n_zero += gc.g_job[g] * ((0 if r > 0 else 1) - (0 if r0 > 0 else 1))
        s = _g_slot(gc, r, mask, tick)
        if gc.h_stamp[s] != tick:
            gc.h_stamp[s], gc.h_key[s], gc.h_grp[s] = tick, r, g
        n_upd = _g_list_key(gc, g, tick, n_upd)
    return n_upd, n_zero


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_move(
    n_re, n_upd, now, tick, mask, n_zero, eps_b, fl, rw, gc, flow_bg, flow_scale, rem
):  # pragma: no cover
    """The re-filled flows whose rate is not their group's (arrivals: no group): brought up to ``now`` and
    moved to the group of their new rate (the solve's hash; a new group where none). ``(n_upd, n_zero)``."""
    rate, grp = fl.rate, gc.grp
    for k in range(n_re):
        f = rw.refill[k]
        r = rate[f]
        g = grp[f]
        if g >= 0 and r == gc.g_r[g]:
            continue
        job = not flow_bg[f]
        if g >= 0:
            advance_flow(f, _g_clock(gc, g, now) - gc.base[f], flow_bg, rem, fl.moved)
            _g_unlink(gc, g, f, job)
            if job and not gc.g_r[g] > 0:
                n_zero -= 1
            n_upd = _g_list_key(gc, g, tick, n_upd)
        s = _g_slot(gc, r, mask, tick)
        if gc.h_stamp[s] == tick:
            h = gc.h_grp[s]
        else:
            h = _g_new(gc, r, now)
            gc.h_stamp[s], gc.h_key[s], gc.h_grp[s] = tick, r, h
        _g_link(gc, h, f, now, job, rem[f], eps_b * flow_scale[f])
        if job and not r > 0:
            n_zero += 1
        n_upd = _g_list_key(gc, h, tick, n_upd)
    return n_upd, n_zero


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def group_write_rates(
    n_re, now, tick, hn, n_zero, eps_b, fl, rw, gc, flow_bg, flow_scale, rem, cnt,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`lazy_write_rates` on group clocks: after solve ``tick`` (unique in the call), the groups whose
    changed members all took one new rate move their clocks (:func:`_g_whole`), the other changed flows move
    group (:func:`_g_move`), and the groups touched get new keys in the heap of groups (``rw.hk`` / ``rw.hf``,
    ``hn`` groups). The same counters. ``(hn, n_zero)``."""
    n_t = _g_count(n_re, now, tick, fl, rw, gc, cnt)
    mask = 63
    while mask + 1 < 2 * (n_re + n_t) and mask + 1 < gc.h_key.shape[0]:
        mask = 2 * mask + 1
    n_upd, n_zero = _g_whole(n_t, now, tick, mask, n_zero, gc)
    n_upd, n_zero = _g_move(n_re, n_upd, now, tick, mask, n_zero, eps_b, fl, rw, gc, flow_bg, flow_scale, rem)
    for i in range(n_upd):
        g = gc.g_upd[i]
        if gc.g_n[g] >= 0:
            hn = _g_key(gc, g, hn, rw.hk, rw.hf, rem, eps_b, flow_bg, flow_scale)
    return hn, n_zero


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def _g_complete_group(
    g, f_min, now, n_act, n_gone, fl, rw, gc, rem, pend, phase_off, flow_unit, flow_phase, flow_bg, eps_b,
    flow_scale,
):  # fmt: skip  # pragma: no cover - compiled
    """The members of group ``g`` whose completion key is ``<= now``, and ``f_min``, complete (as
    :func:`complete_flows` completes a flow); the group's least tags found in the same pass. ``(f_min,
    n_act, n_gone)`` (``f_min`` -1 once completed)."""
    act, apos, act_list = fl.act, fl.apos, rw.act_list
    s_now = _g_clock(gc, g, now)
    gs, gt, r = gc.g_s[g], gc.g_t[g], gc.g_r[g]
    tag, ktag, fm = np.inf, np.inf, -1
    f = gc.g_head[g]
    while f >= 0:
        q = gc.nxt[f]
        if not flow_bg[f]:
            t = rem[f] + gc.base[f]
            kt = t - eps_b * flow_scale[f]
            if f == f_min or gt + (kt - gs) / r <= now:
                slot = phase_off[flow_unit[f]] + flow_phase[f]
                n_act, n_gone = retire_flow(
                    f, s_now - gc.base[f], now, rem, fl.moved, fl.t_upd, act, apos, act_list, n_act, pend, slot,
                    rw.gone, n_gone,
                )  # fmt: skip
                _g_unlink(gc, g, f, True)
                if f == f_min:
                    f_min = -1
            else:
                if t < tag:
                    tag, fm = t, f
                if kt < ktag:
                    ktag = kt
        f = q
    gc.g_tag[g], gc.g_ktag[g], gc.g_min[g], gc.g_dirty[g] = tag, ktag, fm, False
    return f_min, n_act, n_gone


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def group_complete_flows(
    hn, f_min, now, n_act, n_gone, fl, rw, gc, rem, pend, phase_off, flow_unit, flow_phase, flow_bg, eps_b,
    flow_scale,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`complete_flows` on group clocks: the groups whose least completion key is ``<= now``, and the
    group of ``f_min``, complete their members that are due (:func:`_g_complete_group`). ``(hn, n_act,
    n_gone)``."""
    hk, hf = rw.hk, rw.hf
    while hn > 0 and (hk[0] <= now or f_min >= 0):
        g = hf[0] if hk[0] <= now else gc.grp[f_min]
        f_min, n_act, n_gone = _g_complete_group(g, f_min, now, n_act, n_gone, fl, rw, gc, rem, pend, phase_off,
                                                 flow_unit, flow_phase, flow_bg, eps_b, flow_scale)  # fmt: skip
        hn = _g_key(gc, g, hn, hk, hf, rem, eps_b, flow_bg, flow_scale)
    return hn, n_act, n_gone


@njit(nogil=True, _nrt=False, forceinline=True, **COMPILED_ONLY)
def group_end(n_act, now, act_list, fl, gc, flow_bg, rem):  # pragma: no cover - compiled
    """The active flows' bytes left and moved brought up to ``now`` from their groups' clocks (``t_upd``
    ``now``: :func:`lazy_instance_end` then adds nothing), as the instance leaves the kernel."""
    for k in range(n_act):
        f = act_list[k]
        g = gc.grp[f]
        if g >= 0:
            advance_flow(f, _g_clock(gc, g, now) - gc.base[f], flow_bg, rem, fl.moved)
            fl.t_upd[f] = now
