"""What an RLlib training run (:mod:`ainet_gym.agents.rllib_train`) logs: the fabric metrics per finished episode
(:func:`make_fabric_callback`, means over :data:`METRICS_WINDOW` episodes), the TensorBoard scalars of one
iteration named as SB3 names its curves (:func:`iteration_scalars`), the iterations until the target step count
(:func:`train_loop`) and ``progress.csv`` (:func:`write_progress_csv`)."""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path
from typing import Any

from ainet_gym.agents.train_report import format_final

__all__ = [
    "METRICS_WINDOW",
    "iteration_scalars",
    "make_fabric_callback",
    "train_loop",
    "write_progress_csv",
]


#: finished episodes the fabric/ scalars are averaged over (as RLlib's episode_return_mean).
METRICS_WINDOW = 100


def make_fabric_callback() -> type:
    """The ``RLlibCallback`` class logging the fabric metrics per finished episode (built lazily so
    that importing this module does not import Ray)."""
    from ray.rllib.callbacks.callbacks import RLlibCallback

    from ainet_gym.agents.callbacks import FABRIC_SCALARS, step_metrics

    class FabricMetricsRLlibCallback(RLlibCallback):
        """Per-episode means of :func:`ainet_gym.agents.callbacks.step_metrics`, logged as ``fabric/<name>``."""

        def on_episode_step(self, *, episode: Any, **kwargs: Any) -> None:
            info = episode.get_infos(-1)
            m = step_metrics([info])
            acc = episode.custom_data.setdefault("fabric", {"steps": 0.0})
            for k, v in m.items():
                acc[k] = acc.get(k, 0.0) + float(v[0])
            acc["steps"] += 1.0

        def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
            acc = episode.custom_data.get("fabric")
            if not acc or metrics_logger is None:
                return
            n = max(acc["steps"], 1.0)
            ep = {
                "gpu_utilization": acc["gpu_utilization"] / n,
                "max_link_utilization": acc["max_link_utilization"] / n,
                "collisions": acc["collisions"] / n,
                "efficiency": acc["efficiency"] / n,
                "step_time_ratio": acc["step_time_ratio_sum"] / max(acc["step_time_ratio_n"], 1.0),
            }
            for k in FABRIC_SCALARS:
                metrics_logger.log_value(f"fabric/{k}", float(ep[k]), reduce="mean", window=METRICS_WINDOW)
            metrics_logger.log_value("fabric/episodes", 1, reduce="lifetime_sum")

    return FabricMetricsRLlibCallback


def _scalar(d: dict[str, Any], *keys: str) -> float | None:
    x: Any = d
    for k in keys:
        if not isinstance(x, dict) or k not in x:
            return None
        x = x[k]
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def iteration_scalars(result: dict[str, Any]) -> dict[str, float]:
    """TensorBoard scalars of one ``Algorithm.train()`` result, named as SB3 names its curves."""
    from ainet_gym.agents.callbacks import FABRIC_SCALARS

    er = result.get("env_runners", {})
    out: dict[str, float | None] = {
        "rollout/ep_rew_mean": _scalar(er, "episode_return_mean"),
        "rollout/ep_len_mean": _scalar(er, "episode_len_mean"),
        "time/iterations": _scalar(result, "training_iteration"),
        "time/time_this_iter_s": _scalar(result, "time_this_iter_s"),
    }
    for k in (*FABRIC_SCALARS, "episodes"):
        out[f"fabric/{k}"] = _scalar(er, f"fabric/{k}")
    pol = result.get("learners", {}).get("default_policy", {})
    for src, dst in (
        ("policy_loss", "train/policy_gradient_loss"),
        ("vf_loss", "train/value_loss"),
        ("entropy", "train/entropy"),
        ("mean_kl_loss", "train/approx_kl"),
        ("vf_explained_var", "train/explained_variance"),
    ):
        out[dst] = _scalar(pol, src)
    return {k: v for k, v in out.items() if v is not None}


def train_loop(
    algo: Any, writer: Any, start: int, target: int, progress: bool
) -> tuple[int, list[dict[str, float]], dict[str, float], bool]:
    """``algo.train()`` until ``target`` env steps (from ``start``), every iteration's scalars to TensorBoard
    (``writer``, closed at the end) and to the returned rows; returns (steps, rows, the last fabric
    figures, interrupted). Ctrl-C ends the loop early (``interrupted``), keeping what was trained."""
    rows: list[dict[str, float]] = []
    steps = start
    t0 = time.time()
    final: dict[str, float] = {}
    try:
        while steps < target:
            result = algo.train()
            # the per-iteration count (the lifetime counter may or may not survive a restore)
            steps += int(_scalar(result, "env_runners", "num_env_steps_sampled") or 0)
            sc = iteration_scalars(result)
            elapsed = time.time() - t0
            sc["time/fps"] = (steps - start) / max(elapsed, 1e-9)
            for k, v in sc.items():
                writer.add_scalar(k, v, steps)
            writer.flush()
            rows.append({"timesteps": steps, "seconds": elapsed, **sc})
            final = {k.removeprefix("fabric/"): v for k, v in sc.items() if k.startswith("fabric/")}
            if progress:
                it = int(sc.get("time/iterations", len(rows)))
                ret = sc.get("rollout/ep_rew_mean")
                print(
                    f"iter {it:4d}  steps {steps:>8d}/{target}  {sc['time/fps']:6.0f} steps/s  "
                    f"return {ret if ret is None else f'{ret:.3f}'}  {format_final(final)}",
                    flush=True,
                )
    except KeyboardInterrupt:
        return steps, rows, final, True
    finally:
        writer.close()
    return steps, rows, final, False


def write_progress_csv(path: Path, rows: list[dict[str, float]]) -> None:
    """The training rows as CSV (``timesteps`` first, then the other columns sorted); nothing without rows."""
    if not rows:
        return
    with open(path, "w", newline="") as f:
        keys = sorted({k for r in rows for k in r}, key=lambda k: (k != "timesteps", k))
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
