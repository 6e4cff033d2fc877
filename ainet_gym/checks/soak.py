"""``ainet-gym soak``: run the native vector env with random actions in every action mode and check every
invariant at every step.

Per env step (each copy of the vector env counts one step):

- the observation is finite, float32, inside the observation space ([0, 1]);
- the reward is finite and in [0, 1];
- no link carries more than its capacity (utilisation <= 1 + 1e-9, every link, NVLink included);
- every job slot's figures describe one job: the job named in the interval's result is the job that held
  the slot when the interval started, the info's ``job_alive`` says the same, and where an iteration
  completed, ``step_time_ms >= ideal_step_time_ms > 0`` (relative tolerance 1e-9);
- GPU utilisation is in [0, 1] and efficiency in (0, 1] where defined; every info array is finite.

Every ``bad_every`` steps it also sends a malformed action (a string, complex or out-of-range array,
cycled) and requires a ``ValueError`` that leaves the env steppable. A violation is counted (and the
first few printed), never raised, so that a run reports how many steps it checked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ainet_gym.envs.env import ACTION_MODES
from ainet_gym.envs.vector_env import FabricRoutingVectorEnv
from ainet_gym.errors import check_choice

__all__ = ["DYNAMIC_SCENARIOS", "SoakResult", "soak"]

#: Shipped scenarios whose state changes within an episode (failures, churn, background, moving skew).
DYNAMIC_SCENARIOS = (
    "multi-tenant-churn",
    "link-failure",
    "degraded-link",
    "periodic-interference",
    "storage-checkpoint",
    "moe-alltoall-skewed",
)
RTOL = 1e-9


@dataclass
class SoakResult:
    """What one soak run (one scenario, one action mode) checked."""

    scenario: str
    action_mode: str
    steps: int  # env steps checked (vector steps x copies)
    bad_actions: int  # malformed actions sent (each refused with ValueError)
    job_checks: int  # job-slot intervals with a completed iteration whose step time was checked
    violations: int
    seconds: float
    examples: list[str] = field(default_factory=list)


def _bad_action(kind: int, venv: FabricRoutingVectorEnv) -> np.ndarray:
    shape = venv.action_space.shape
    if kind == 0:
        return np.full(shape, "0.5")
    if kind == 1:
        return np.zeros(shape, dtype=complex)
    return np.full(shape, 99, dtype=np.int64)  # out of range in every mode


def _step_violations(
    space: Any, obs: Any, rew: np.ndarray, res: Any, info: dict[str, Any], before: list, live: np.ndarray
) -> tuple[list[str], int]:
    """What one vector step broke: bounds of the observation, reward, link and GPU utilisation and efficiency;
    the interval's jobs against those that ran (``before``); step times against ideal ones; finite info.
    ``live``: the copies that ran the interval (the others were reset and report their reset info). Returns
    (messages, job slots checked)."""
    bad: list[str] = []
    o = obs["flat"] if isinstance(obs, dict) else obs
    if o.dtype != np.float32 or not np.all(np.isfinite(o)) or o.min() < space_low(space) or o.max() > 1.0:
        bad.append(f"observation outside [0, 1] or not finite (min {o.min()}, max {o.max()})")
    if not np.all(np.isfinite(rew)) or rew.min() < 0 or rew.max() > 1 + RTOL:
        bad.append(f"reward {rew.tolist()} not finite or outside [0, 1]")
    if res is not None and res.link_utilization.max() > 1 + RTOL:
        bad.append(f"link utilisation {res.link_utilization.max()} > 1")
    if res is None and live.any():
        bad.append("a step that ran an interval left no result")
    for b in np.flatnonzero(live) if res is not None else ():
        if res.job_names[b] != before[b]:
            bad.append(f"env {b}: the interval reports jobs {res.job_names[b]} but ran {before[b]}")
    alive = np.array([[n is not None for n in names] for names in before])
    if not np.array_equal(info["job_alive"][live], alive[live]):
        bad.append("info job_alive differs from the jobs that ran in the interval")
    it = info["iterations"]
    done = (it > 0) & live[:, None]
    st, ideal = info["step_time_ms"], info["ideal_step_time_ms"]
    if np.any(done & ~(ideal > 0)):
        bad.append("a job slot with completed iterations has no ideal step time")
    below = done & (st < ideal * (1 - RTOL))
    if below.any():
        b, j = np.argwhere(below)[0]
        bad.append(f"env {b} slot {j} ({before[b][j]}): step time {st[b, j]} ms < ideal {ideal[b, j]} ms")
    if res is not None:
        util, eff = res.gpu_utilization, res.efficiency
        if np.any(util[np.isfinite(util)] < 0) or np.any(util[np.isfinite(util)] > 1 + RTOL):
            bad.append("GPU utilisation outside [0, 1]")
        if np.any(eff[np.isfinite(eff)] <= 0) or np.any(eff[np.isfinite(eff)] > 1 + RTOL):
            bad.append("efficiency outside (0, 1]")
    for k, v in info.items():
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" and not np.all(np.isfinite(v)):
            bad.append(f"info[{k!r}] is not finite")
    return bad, int(done.sum())


def soak(
    scenario: str,
    action_mode: str,
    steps: int,
    num_envs: int = 32,
    seed: int = 0,
    bad_every: int = 50,
    max_seconds: float | None = None,
) -> SoakResult:
    """Run ``steps`` env steps (rounded up to whole vector steps) of ``scenario`` in ``action_mode``,
    or fewer if ``max_seconds`` of wall time run out first (``steps`` of the result says how many)."""
    if max_seconds is not None and not (
        isinstance(max_seconds, int | float) and not isinstance(max_seconds, bool) and 0 < max_seconds < 1e9
    ):
        raise ValueError(f"--max-seconds {max_seconds!r}: must be a number of seconds in (0, 1e9)")
    check_choice("action_mode", action_mode, ACTION_MODES)
    venv = FabricRoutingVectorEnv(num_envs=num_envs, scenario=scenario, action_mode=action_mode)
    core = venv.core
    w = core.world
    space = venv.single_observation_space
    venv.action_space.seed(seed)
    venv.reset(seed=seed)
    out = SoakResult(scenario, action_mode, 0, 0, 0, 0, 0.0)

    def fail(msg: str) -> None:
        out.violations += 1
        if len(out.examples) < 5:
            out.examples.append(f"step {out.steps}: {msg}")

    t0 = time.perf_counter()
    n_vec = -(-steps // num_envs)
    for t in range(n_vec):
        if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
            break
        if bad_every and t % bad_every == bad_every - 1:
            try:
                venv.step(_bad_action(out.bad_actions % 3, venv))
                fail("a malformed action was accepted")
            except ValueError:
                pass  # expected: the env rejects a malformed action and the soak goes on
            except Exception as e:  # any other exception is a violation
                fail(f"a malformed action raised {type(e).__name__}: {e}")
            out.bad_actions += 1
        before = [w.job_names(b) for b in range(num_envs)]
        autoreset = venv.autoreset_pending
        obs, rew, term, trunc, info = venv.step(venv.action_space.sample())
        res = core.last_result  # None after a step in which every copy reset: no interval ran
        out.steps += num_envs
        msgs, checked = _step_violations(space, obs, rew, res, info, before, ~autoreset)
        out.job_checks += checked
        for m in msgs:
            fail(m)
    out.seconds = time.perf_counter() - t0
    venv.close()
    return out


def space_low(space) -> float:
    """Lowest value of a flat Box observation space (0 for ainet-gym's)."""
    box = space["flat"] if hasattr(space, "spaces") else space
    return float(np.min(box.low))
