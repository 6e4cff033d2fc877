"""A job slot's figures describe one job: step time, ideal, comm time and utilisation of the job that
ran in the slot during the interval, never of a job that arrived in the slot at the interval's end."""

from __future__ import annotations

import numpy as np
import pytest

from ainet_gym.envs.env import FabricRoutingEnv
from ainet_gym.scenario.spec import JobSpec
from ainet_gym.sim.simulate import simulate

RTOL = 1e-9

# multi-tenant-churn's fabric as its file writes it down: 16 hosts x 8 GPUs (GPU g on host g // 8), one 400G
# NIC per GPU, NVLink 3,600 Gb/s inside a host, the infiniband profile (0.25 us per link, efficiency 1)
GPUS_PER_HOST = 8
NIC_BYTES_PER_S = 400e9 / 8
NVLINK_BYTES_PER_S = 3600e9 / 8
ALPHA_S = 2 * 0.25e-6  # one step's latency: a path of the ideal's fabric is GPU -> switch -> GPU, 2 links


def _rate(gpus: np.ndarray, pairs: list[tuple[int, int]]) -> float:
    """The pace of transfers between the ranks of ``pairs``, each alone on its links: the NIC's rate if one
    crosses hosts, NVLink's if all stay inside one."""
    crosses = any(gpus[a] // GPUS_PER_HOST != gpus[b] // GPUS_PER_HOST for a, b in pairs)
    return NIC_BYTES_PER_S if crosses else NVLINK_BYTES_PER_S


def ideal_step_closed_form_s(job: JobSpec, gpus: np.ndarray) -> float:
    """The ideal step of ``job`` on ``gpus`` (rank r on GPU ``gpus[r]``), alone on a non-blocking fabric with
    the same hosts, by hand (docs/model.md, "Collectives and their step counts"; no overlap): its compute,
    then each AllReduce of S bytes over p ranks:

    - ring: one pipelined flow of 2 (p-1)/p S bytes at the pace of its slowest hop (r -> r+1 mod p), plus
      2 (p-1) steps of latency;
    - halving-doubling (p a power of two): log2 p reduce-scatter phases, phase k sending S / 2^(k+1) to the
      rank at distance p / 2^(k+1), then log2 p all-gather phases sending S 2^k / p to the rank at distance
      2^k; each phase lasts its bytes at the pace of its slowest pair plus one step of latency.
    """
    assert job.overlap == 0.0  # the scenario's jobs compute, then communicate
    p, t = len(gpus), job.compute_ms * 1e-3
    for c in job.collectives:
        assert c.op == "allreduce" and c.algorithm in ("ring", "halving_doubling"), c
        if c.algorithm == "ring":
            hops = [(r, (r + 1) % p) for r in range(p)]
            t += 2 * (p - 1) / p * c.bytes / _rate(gpus, hops) + 2 * (p - 1) * ALPHA_S
            continue
        for k in range(p.bit_length() - 1):
            d = p >> (k + 1)
            t += c.bytes / 2 ** (k + 1) / _rate(gpus, [(r, r ^ d) for r in range(p)]) + ALPHA_S
            d = 1 << k
            t += c.bytes * d / p / _rate(gpus, [(r, r ^ d) for r in range(p)]) + ALPHA_S
    return t


@pytest.mark.parametrize("seed", [2])
def test_churn_step_time_at_least_ideal_of_the_same_job(seed: int) -> None:
    # multi-tenant-churn, split mode, reset(seed=2), random actions seeded 2: at step 45 a job departs
    # from slot 2 and another arrives in it; the info used to pair the old job's step time with the new
    # job's ideal (30.98 ms against 68.77 ms)
    env = FabricRoutingEnv("multi-tenant-churn", action_mode="split", episode_steps=60)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    w = env.core.world
    checked = replaced = 0
    for _ in range(60):
        before = [(job, None if g is None else g.copy()) for job, g in zip(w.state.jobs[0], w.state.gpus[0])]
        _, _, _, _, info = env.step(env.action_space.sample())
        after = w.job_names(0)
        replaced += sum(
            1 for (job, _), name in zip(before, after) if job is not None and name and name != job.name
        )
        assert env.core.last_result.job_names[0] == [None if j is None else j.name for j, _ in before]
        for j, (job, gpus) in enumerate(before):
            assert bool(info["job_alive"][j]) == (job is not None)
            if job is None or info["iterations"][j] == 0:
                continue
            # the ideal of the job that ran in the slot, by hand from that job and its GPUs alone
            ideal_ms = ideal_step_closed_form_s(job, gpus) * 1e3
            assert info["ideal_step_time_ms"][j] == pytest.approx(ideal_ms, rel=RTOL)
            assert info["step_time_ms"][j] >= ideal_ms * (1 - RTOL), (j, job.name)
            checked += 1
    assert checked > 100
    assert replaced >= 1  # the rollout does contain a slot whose job changed at an interval's end


def test_simulate_names_the_job_whose_figures_it_prints() -> None:
    out = simulate("multi-tenant-churn", policy="ecmp", steps=60, seed=2)
    for st in out["steps"]:
        for j in st["jobs"]:
            if j["iterations_completed"]:
                assert j["step_time_ms"] >= j["ideal_step_time_ms"] * (1 - RTOL), j
    names = [{j["name"] for j in st["jobs"]} for st in out["steps"]]
    # a job that arrives at the end of interval t - 1 is named "<template>@t" (the step count then) and is
    # first reported in interval t, never in interval t - 1
    for t, ns in enumerate(names):
        for n in ns:
            if "@" in n:
                assert int(n.rsplit("@", 1)[1]) <= t, (t, n)
    assert any(np.any(["@" in n for n in ns]) for ns in names)


def test_soak_checks_steps_and_finds_a_planted_violation(monkeypatch) -> None:
    from ainet_gym.checks.soak import soak
    from ainet_gym.envs.env import EnvCore

    r = soak("multi-tenant-churn", "path", 64, num_envs=8, seed=1, bad_every=3)
    assert r.steps == 64 and r.violations == 0 and r.bad_actions == 2 and r.job_checks > 0
    # past an episode end (64 steps): the autoreset step, in which every copy resets and no interval runs
    r = soak("multi-tenant-churn", "split", 4 * 70, num_envs=4, seed=2, bad_every=0)
    assert r.steps == 4 * 70 and r.violations == 0, r.examples
    info = EnvCore.info

    def doubled_ideal(self, res):  # a wrong ideal: twice the job's, so step time falls below it
        out = info(self, res)
        out["ideal_step_time_ms"] = out["ideal_step_time_ms"] * 2
        return out

    monkeypatch.setattr(EnvCore, "info", doubled_ideal)
    r = soak("multi-tenant-churn", "split", 16, num_envs=8, seed=1)
    assert r.violations > 0 and "< ideal" in r.examples[0]
