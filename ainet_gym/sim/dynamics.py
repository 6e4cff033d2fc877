"""What changes between decision intervals: link failures and repairs, job churn, the rotation of
skewed AllToAll traffic and background sources switching on and off."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import numpy as np

from ainet_gym.fabric.topology import TIERS, Fabric
from ainet_gym.scenario.spec import BackgroundSpec, JobChurnSpec, JobSpec, LinkFailureSpec
from ainet_gym.sim.placement import place_job

__all__ = ["LinkState", "alltoall_rotation", "background_on", "churn", "episode_jitter", "rotation_due"]


class LinkState:
    """Per-instance capacity factors of the links of ``fabric`` under ``failures`` (random failures of
    eligible network links, repairs, scheduled failures and degradations)."""

    #: what a step writes: the two arrays of the world's state (:class:`~ainet_gym.sim.state.WorldState`'s
    #: ``fail_until`` and ``cap_factor``, shared) and what is derived from them (the capacities' product,
    #: whether it is stale, whether a repair is pending)
    STATE: ClassVar[frozenset[str]] = frozenset({"fail_until", "cap_factor"})
    DERIVED: ClassVar[frozenset[str]] = frozenset({"_capacity", "_stale", "_repair_pending"})

    def __init__(self, fabric: Fabric, failures: LinkFailureSpec, batch: int) -> None:
        self.fabric = fabric
        self.failures = failures
        f = fabric
        # (eligible,) link ids a random failure may hit: network links of the listed tiers, one per duplex pair
        self.eligible = np.flatnonzero(
            f.network_links
            & np.isin(np.asarray(TIERS)[f.link_tier], failures.tiers)
            & (f.link_src < f.link_dst)
        )
        self.fail_until = np.full(
            (batch, f.n_links), -1, dtype=np.int64
        )  # (batch, links) repair step, -1: up
        # (batch, links) share of the nominal capacity; changed only by the methods below, which mark the
        # cached capacities stale
        self.cap_factor = np.ones((batch, f.n_links))
        # whether any link may be down until a repair step (False: repair has nothing to do)
        self._repair_pending = False
        # the capacities of the factors as last computed, and whether a factor changed since
        self._capacity = np.empty((batch, f.n_links))
        self._stale = True

    @property
    def random(self) -> bool:
        """Whether random failures are drawn at all."""
        return self.failures.rate_per_step > 0 and self.eligible.size > 0

    def reset(self, mask: np.ndarray) -> None:
        """Every link up in the instances of ``mask`` ((batch,) bool)."""
        if not mask.any():
            return
        self.fail_until[mask] = -1
        self.cap_factor[mask] = 1.0
        self._stale = True

    def restored(self) -> None:
        """The arrays :attr:`fail_until` and :attr:`cap_factor` were written from outside (a restore of the
        world's state, which shares them): compute the capacities of the factors again (the engine's, a
        restored copy, are those) and look for pending repairs."""
        np.multiply(self.fabric.capacity_bytes_per_s[None, :], self.cap_factor, out=self._capacity)
        self._stale = False
        self._repair_pending = bool((self.fail_until >= 0).any())

    def repair(self, step: np.ndarray, mask: np.ndarray) -> None:
        """Links whose repair step ``step`` (batch,) has come are up again, in the ``mask`` instances
        (no pass over the links while none is down)."""
        if not self._repair_pending:
            return
        repaired = (self.fail_until >= 0) & (self.fail_until <= step[:, None]) & mask[:, None]
        self.cap_factor[repaired] = 1.0
        self._stale = True
        self.fail_until[repaired] = -1
        self._repair_pending = bool((self.fail_until >= 0).any())

    def draw_failure(self, b: int, step: int, rng: np.random.Generator) -> None:
        """With probability ``rate_per_step``, one random eligible link of instance ``b`` fails (both
        directions) until ``step + repair_steps``."""
        lf = self.failures
        if rng.random() < lf.rate_per_step:
            pair = self._duplex_of(int(rng.choice(self.eligible)))
            self.cap_factor[b, pair] = 0.0
            self._stale = True
            self.fail_until[b, pair] = step + lf.repair_steps
            self._repair_pending = True

    def apply_scheduled(self, step: np.ndarray, mask: np.ndarray) -> None:
        """Scheduled failures and degradations due at ``step`` (batch,) in the ``mask`` instances (they
        override random ones)."""
        for sf in self.failures.scheduled:
            hit = mask & (step == sf.at_step)
            if hit.any():
                ids = self.fabric.link_ids(sf.link)
                self.cap_factor[np.ix_(hit, ids)] = sf.factor
                self._stale = True
                self.fail_until[np.ix_(hit, ids)] = sf.until_step if sf.until_step is not None else 2**62
                self._repair_pending = True

    @property
    def changed(self) -> bool:
        """Whether a capacity factor changed since :meth:`capacity_bytes_per_s` last computed the product."""
        return self._stale

    def capacity_bytes_per_s(self) -> np.ndarray:
        """(batch, links) bytes/s: the nominal capacities times the factors (a new array; the product is
        computed again only after a factor changed)."""
        if self._stale:
            np.multiply(self.fabric.capacity_bytes_per_s[None, :], self.cap_factor, out=self._capacity)
            self._stale = False
        return self._capacity.copy()

    def _duplex_of(self, link: int) -> np.ndarray:
        f = self.fabric
        rev = np.flatnonzero((f.link_src == f.link_dst[link]) & (f.link_dst == f.link_src[link]))
        return np.array([link, int(rev[0])]) if rev.size else np.array([link])


def churn(
    jobs: list[JobSpec | None],
    gpus: list[np.ndarray | None],
    first_slot: int,
    templates: tuple[JobSpec, ...],
    spec: JobChurnSpec,
    fabric: Fabric,
    step: int,
    rng: np.random.Generator,
) -> bool:
    """One interval of churn in one instance, in place on its ``jobs`` and ``gpus`` (per job slot):
    each arrived job (slots from ``first_slot`` on) leaves with probability ``1 / mean_steps``, then
    a Poisson number of templates arrive, each in the first free slot, on free GPUs (an arrival that finds
    neither is dropped). Returns whether any job came or went. (The env's action slots of a job slot from
    ``first_slot`` on fit the widest template, :class:`ainet_gym.envs.slots.SlotLayout`.)"""
    changed = False
    for j in range(first_slot, len(jobs)):
        if jobs[j] is not None and rng.random() < 1.0 / spec.mean_steps:
            jobs[j] = None
            gpus[j] = None
            changed = True
    for _ in range(rng.poisson(spec.arrival_rate)):
        k = int(rng.integers(len(templates)))
        tmpl = templates[k]
        free = np.ones(fabric.n_gpus, dtype=bool)
        for g in gpus:
            if g is not None:
                free[g] = False
        slots = [j for j in range(first_slot, len(jobs)) if jobs[j] is None]
        if free.sum() < tmpl.gpus or not slots:
            continue  # dropped
        place = tmpl if isinstance(tmpl.placement, str) else replace(tmpl, placement="contiguous")
        g = place_job(fabric, place, free, rng)
        jobs[slots[0]] = replace(place, name=f"{tmpl.name}@{step}", start_ms=0.0)
        gpus[slots[0]] = g
        changed = True
    return changed


def alltoall_rotation(job: JobSpec, step: int) -> int:
    """Ranks by which the hot experts of the job's skewed, rotating AllToAll have moved at ``step``."""
    rot = 0
    for c in job.collectives:
        if c.op == "alltoall" and c.skew > 0 and c.skew_period_steps:
            rot = step // c.skew_period_steps
    return rot


def rotation_due(jobs: tuple[JobSpec, ...], steps: np.ndarray) -> bool:
    """Whether a rotating AllToAll of ``jobs`` moves at one of ``steps`` (the jobs must be recompiled)."""
    for c in (c for jb in jobs for c in jb.collectives):
        periodic = c.op == "alltoall" and c.skew > 0 and c.skew_period_steps
        if periodic and ((steps > 0) & (steps % max(c.skew_period_steps, 1) == 0)).any():
            return True
    return False


def background_on(background: tuple[BackgroundSpec, ...], step: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """(batch, sources) bool: background sources active in the interval of ``step`` (batch,), periodic
    ones from their episode's ``offset`` (batch, sources) steps on."""
    on = np.empty((step.shape[0], len(background)), dtype=bool)  # (empty + fill: quicker than np.ones)
    on.fill(True)
    for i, bg in enumerate(background):  # loop over background sources, not flows
        if bg.pattern != "constant":
            phase = step - offset[:, i]
            on[:, i] = (phase >= 0) & (phase % bg.period_steps < bg.duration_steps)
    return on


def episode_jitter(
    jobs: tuple[JobSpec, ...], background: tuple[BackgroundSpec, ...], rng: np.random.Generator
) -> tuple[list[JobSpec], np.ndarray]:
    """Per-episode variation drawn at a reset: the initial ``jobs``, each with its start moved by
    ``start_jitter_ms`` (uniform on a 0.1 ms grid), and the step offsets (sources,) of the ``background``
    sources (``offset_steps`` plus uniform 0..``offset_jitter_steps``). Only fields > 0 draw, jobs before
    sources, so a scenario without jitter draws nothing and its episodes are those without the fields."""
    out = []
    for job in jobs:
        if job.start_jitter_ms > 0:
            start = round(job.start_ms + rng.integers(int(job.start_jitter_ms * 10) + 1) / 10, 1)
            job = replace(job, start_ms=start)
        out.append(job)
    offset = np.array(
        [
            bg.offset_steps
            + (int(rng.integers(bg.offset_jitter_steps + 1)) if bg.offset_jitter_steps > 0 else 0)
            for bg in background
        ],
        dtype=np.int64,
    )
    return out, offset
