"""What an SB3 training run (:mod:`ainet_gym.agents.train`) saves and picks: the metadata saved with the model
(:func:`meta_maker`), the checkpoints written every N steps (:class:`SaveEvery`) and the choice of a checkpoint on
validation seeds (:func:`select_checkpoint`, ``python -m ainet_gym.agents.train select``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ainet_gym.agents.sb3_agents import save_model, space_signature
from ainet_gym.agents.train_config import TrainConfig

__all__ = [
    "SaveEvery",
    "meta_maker",
    "select_checkpoint",
]


def _mode_plans(action_mode: str) -> tuple[str, ...]:
    """The plans of a ``choose`` mode without extra plans (``()`` for another mode)."""
    from ainet_gym.routing.plans import CHOOSE_MODES, PLANS

    return tuple(PLANS[CHOOSE_MODES[action_mode]]) if action_mode in CHOOSE_MODES else ()


def meta_maker(
    cfg: TrainConfig, algo: str, action_mode: str, history: int, observation: str, core: Any,
    scenario: str, name: str, env: Any, residual: str | None, source_fabric: str | None = None,
) -> Any:  # fmt: skip
    """A function of the step count giving the metadata saved with the model; with ``fabric``, the fingerprint
    of ``core``'s fabric (:func:`~ainet_gym.fabric.topology.fabric_fingerprint`: ``evaluate ALGO:PATH`` refuses
    to play the model on a scenario of another fabric, :meth:`~ainet_gym.agents.sb3_agents.SB3Agent.check`),
    and ``source_fabric``, the fingerprint the resumed (initialising) model records, when it is another one (a
    model trained on from another fabric with ``allow_other_fabric``)."""
    from ainet_gym.fabric.topology import fabric_fingerprint

    fabric = None if getattr(core, "fabric", None) is None else fabric_fingerprint(core.fabric)

    def meta_of(timesteps: int) -> dict[str, Any]:
        meta = {
            "algo": algo,
            "action_mode": action_mode,
            "history": history,
            "observation": observation,
            "reward": core.reward_fn.name if hasattr(core.reward_fn, "name") else str(core.reward_fn),
            "episode_steps": core.episode_steps,
            "scenario": scenario,
            "seed": cfg.seed,
            "timesteps": int(timesteps),
            "n_envs": cfg.n_envs,
            "run_name": name,
            "resumed_from": None if cfg.resume is None else str(cfg.resume),
            **({} if cfg.init_from is None else {"init_from": str(cfg.init_from)}),
            "observation_space": space_signature(env.observation_space),
            "action_space": space_signature(env.action_space),
        }
        if fabric is not None:
            meta["fabric"] = fabric
        if source_fabric is not None and source_fabric != fabric:
            meta["source_fabric"] = source_fabric
        if residual is not None:
            meta["residual"] = residual
            meta["residual_scale"] = core.residual_scale
        if core.obs_features:  # only when set: the metadata of the default env stays as it was
            meta["obs_features"] = list(core.obs_features)
        if cfg.obs_blocks:
            meta["obs_blocks"] = list(cfg.obs_blocks)
        if core.plans and len(core.plans) > len(_mode_plans(action_mode)):
            meta["extra_plans"] = list(core.plans[len(_mode_plans(action_mode)) :])
        return meta

    return meta_of


class SaveEvery:
    """An SB3 callback (built lazily: SB3 is imported by :func:`train`) saving the model every ``every``
    steps with its metadata."""

    def __new__(cls, every: int, folder: Path, meta_of: Any) -> Any:
        from stable_baselines3.common.callbacks import BaseCallback

        class SaveEvery(BaseCallback):
            def __init__(self) -> None:
                super().__init__()
                self.next = every

            def _on_step(self) -> bool:
                if self.num_timesteps >= self.next:
                    n = int(self.num_timesteps)
                    save_model(self.model, folder / f"model_{n:09d}.zip", meta_of(n))
                    self.next = (n // every + 1) * every
                return True

        return SaveEvery()


def select_checkpoint(
    folder: str | Path, scenario: Any, seeds: list[int], steps: int | None = None
) -> tuple[Path, list[tuple[Path, float]]]:
    """The model of ``folder`` (``*.zip``) with the highest mean GPU utilisation on ``seeds`` (validation
    seeds, e.g. 100-199: never the held-out 1-10), and every model's value, in name order.

    Raises
    ------
    FileNotFoundError
        If ``folder`` holds no model.
    """
    from ainet_gym.agents.evaluate import EvalConfig, evaluate

    paths = sorted(Path(folder).glob("*.zip"))
    if not paths:
        raise FileNotFoundError(f"no model (*.zip) in {str(folder)!r}")
    scores = []
    for p in paths:
        res = evaluate(EvalConfig(scenario, policies=[f"ppo:{p}"], seeds=seeds, steps=steps, out=None))
        scores.append((p, float(res["policies"][f"ppo:{p}"]["gpu_utilization"]["mean"])))
    best = max(scores, key=lambda x: x[1])[0]
    return best, scores
