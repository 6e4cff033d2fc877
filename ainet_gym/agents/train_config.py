"""What an SB3 training run (:mod:`ainet_gym.agents.train`, ``ainet-gym train``) takes and gives:
:class:`TrainConfig` (what to train, where, and for how long) and :class:`TrainResult` (where the model and the
logs went)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "TrainConfig",
    "TrainResult",
]


@dataclass
class TrainConfig:
    """What to train, where, and for how long."""

    scenario: Any = "spine-leaf-2to1"
    """Shipped scenario name, YAML path, dict or Scenario."""
    algo: str = "ppo"
    """ppo | a2c | sac | maskable_ppo."""
    action_mode: str | None = None
    """path | split | ecmp_weights | split_bg; None: the algorithm's default (split; path for maskable_ppo)."""
    timesteps: int = 20_000
    """Environment steps to train (summed over the vector env's copies)."""
    seed: int = 0
    """Seed of the model and of the training episodes."""
    n_envs: int = 16
    """Copies in the native vector env (one batched engine call per step). 16 rather than 8: twice
    the samples per PPO update for the same wall time per step (the engine is batched); measured on
    spine-leaf-2to1 and periodic-interference it learns as fast and drifts less."""
    logdir: str | Path = "runs"
    """TensorBoard log directory; the run gets its own sub-directory."""
    out: str | Path | None = None
    """Where to save the model: a path ending in ``.zip`` is the model file, any other path a directory
    that receives ``model.zip``; default ``{logdir}/{run name}/model.zip`` (a fresh run folder)."""
    overwrite: bool = False
    """Allow ``out`` to replace an existing model (never the one ``resume`` reads)."""
    resume: str | Path | None = None
    """A saved model to continue training."""
    progress: bool = True
    """Show a progress bar (tqdm + rich)."""
    history: int = 4
    """Intervals of link-utilisation history in the observation."""
    episode_steps: int | None = None
    """Override the scenario's episode length."""
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    """Overrides of :func:`ainet_gym.agents.sb3_agents.default_hyperparameters`."""
    verbose: int = 0
    """SB3 verbosity (1 also prints the SB3 log table)."""
    torch_threads: int | None = 1
    """torch intra-op threads; small MLPs run fastest on one (None: leave torch's default)."""
    residual: str | None = None
    """A base routing the policy adjusts instead of routing from scratch (``ecmp_weights`` and
    ``split_bg`` modes; :class:`~ainet_gym.envs.env.FabricRoutingEnv`'s ``residual``), e.g. ``lp+bg``."""
    residual_scale: float | None = None
    """``residual_scale`` of the env (None: its default, log 4)."""
    save_every: int | None = None
    """Also save the model every this many steps, as ``{run dir}/checkpoints/model_{steps}.zip`` with
    its metadata, to pick a checkpoint on validation seeds (:func:`select_checkpoint`)."""
    log_std_init: float | None = None
    """Initial log standard deviation of a Gaussian policy's actions (None: the algorithm's default, -1
    for PPO): a residual policy explores close to its base with a smaller one."""
    learning_rate: float | None = None
    """Initial learning rate (None: the algorithm's default). PPO's decays linearly to a tenth of it, as
    its default does (3e-4 to 3e-5); the other algorithms keep it constant. A residual policy over
    hundreds of action dimensions with a small log std needs a smaller one: each Adam step moves every
    mean by about the same amount, and the policy ratio is a product over all dimensions."""
    target_kl: float | None = None
    """PPO only: stop an update's epochs early when the approximate KL divergence to the rollout's policy
    exceeds 1.5 times this (None: no limit, SB3's default)."""
    ent_coef: float | None = None
    """PPO and A2C: weight of the entropy bonus in the loss (None: the default, 0), to keep a discrete
    policy (the ``choose`` modes) from collapsing onto one plan before it has tried the others."""
    gamma: float | None = None
    """Discount factor (None: the default of :func:`~ainet_gym.agents.sb3_agents.default_hyperparameters`,
    0.9); a resumed model keeps its own."""
    obs_features: tuple[str, ...] = ()
    """Optional observation blocks of the env (:class:`~ainet_gym.envs.env.FabricRoutingEnv`'s
    ``obs_features``, e.g. ``("phase",)``), recorded in the model's metadata; a resumed model keeps its
    own."""
    obs_blocks: tuple[str, ...] = ()
    """Observation blocks the policy and value networks read, e.g. ``("job_phase",)`` (a
    :class:`~ainet_gym.agents.block_features.BlockFeatures` extractor; empty: every input, the default),
    recorded in the model's metadata; a resumed or initialised model keeps its own."""
    extra_plans: tuple[str, ...] = ()
    """A ``choose`` mode's plans past its own (the env's ``extra_plans``, e.g. ``isolate0+bg``), recorded in the
    model's metadata; a resumed or initialised model keeps its own."""
    init_from: str | Path | None = None
    """A saved model whose policy (architecture and weights: e.g. a behaviour-cloned one, ``python -m
    ainet_gym.agents.imitate clone``) starts a new run: its env settings, this run's hyperparameters (e.g. a small
    ``learning_rate``), a fresh optimiser and step counter. Not with ``resume``."""
    allow_other_fabric: bool = False
    """Let ``resume`` or ``init_from`` take a model whose metadata records another fabric fingerprint
    (``fabric``) than the scenario's: training it on from another fabric on purpose (e.g. a 4:1 model tuned on
    the 2:1 copy). Without it such a model is refused before any step; the new model records the scenario's
    fabric as ``fabric`` and the source's as ``source_fabric``. A model without a fingerprint is never checked."""


@dataclass
class TrainResult:
    """What a training run produced."""

    model_path: Path
    run_dir: Path
    run_name: str
    total_timesteps: int  # the model's step counter (includes resumed steps)
    seconds: float
    steps_per_second: float
    final: dict[str, float]  # fabric/ means of the last finished episodes
    interrupted: bool
    model: Any = None
