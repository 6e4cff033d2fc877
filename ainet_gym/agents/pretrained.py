"""Shipped checkpoints: export a trained model without its optimiser state, load it, evaluate it.

``pretrained`` is a registry agent: ``ainet-gym evaluate SCENARIO --policies ecmp,pretrained`` evaluates
the checkpoint shipped for that scenario (``ainet_gym/pretrained/<scenario>.zip``; a clear error names
the shipped ones when there is none). A checkpoint is made from a model that ``ainet-gym train`` saved::

    python -m ainet_gym.agents.pretrained export runs/model.zip --scenario periodic-interference \\
        --command "ainet-gym train periodic-interference --algo ppo --action-mode ecmp_weights ..."

which keeps SB3's ``data`` (spaces, hyperparameters) and ``policy.pth`` (the weights), drops
``policy.optimizer.pth`` (Adam moments, twice the weights) and ``pytorch_variables.pth``, and records
the command in ``ainet_gym.json``. A k-nearest-neighbour policy (``python -m ainet_gym.agents.imitate
knn``, a .npz of plain arrays) is shipped the same way, with every command that labelled and fitted it::

    python -m ainet_gym.agents.pretrained export runs26/knn/knn-s0-dagger1.npz \
        --scenario spine-leaf-2to1-jitter --training-seed 0 --command "python -m ... label ..." \
        --command "python -m ainet_gym.agents.imitate knn ..."

and played through :class:`ainet_gym.agents.imitate.KnnAgent` (read with ``allow_pickle=False``, every
field checked). ``python -m ainet_gym.agents.pretrained list`` prints what is shipped.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ainet_gym.agents.registry import register_agent
from ainet_gym.agents.sb3_agents import (
    META_MEMBER,
    OPTIMIZER_MEMBER,
    SB3Agent,
    load_model,
    meta_history,
    meta_obs_features,
    meta_residual,
    read_metadata,
)
from ainet_gym.pretrained import PRETRAINED_DIR, list_pretrained, pretrained_path

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

    from ainet_gym.scenario.spec import Scenario

__all__ = [
    "DROPPED_MEMBERS",
    "KNN_ALGORITHM",
    "PretrainedAgent",
    "export_checkpoint",
    "export_knn",
    "load_policy_only",
    "pretrained_fabric",
]

#: members of an SB3 zip that a shipped checkpoint leaves out (optimiser state, extra tensors).
DROPPED_MEMBERS = (OPTIMIZER_MEMBER, "pytorch_variables.pth")


def export_checkpoint(src: str | Path, scenario: str, command: str, dst: str | Path | None = None) -> Path:
    """Write the policy-only checkpoint of the model ``src`` for ``scenario`` (default destination:
    ``ainet_gym/pretrained/<scenario>.zip``), with ``command`` (how ``src`` was trained) recorded.

    Raises
    ------
    FileNotFoundError
        If ``src`` does not exist.
    ValueError
        If ``src`` is not a model saved by ``ainet-gym train`` or ``command`` is empty.
    """
    src = Path(src)
    if not src.is_file():
        raise FileNotFoundError(f"model {str(src)!r} not found")
    if not command.strip():
        raise ValueError("command: empty; give the exact command that trained the model")
    meta = read_metadata(src)
    if not meta.get("algo"):
        raise ValueError(f"model {str(src)!r}: no ainet_gym.json metadata (save it with ainet-gym train)")
    dst = Path(dst) if dst is not None else PRETRAINED_DIR / f"{scenario}.zip"
    meta = {
        **meta,
        "scenario": scenario,
        "command": command,
        "export_command": "python -m ainet_gym.agents.pretrained "
        + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "dropped": list(DROPPED_MEMBERS),
    }
    dst.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if info.filename in DROPPED_MEMBERS or info.filename == META_MEMBER:
                continue
            zout.writestr(info.filename, zin.read(info.filename))
        zout.writestr(META_MEMBER, json.dumps(meta, indent=1))
    return dst


#: the ``algorithm`` of a shipped k-NN policy's metadata (its ``algo``: ``knn``)
KNN_ALGORITHM = "knn-imitation"


def export_knn(
    src: str | Path,
    scenario: str,
    commands: list[str],
    training_seed: int,
    dst: str | Path | None = None,
    note: str = "",
) -> Path:
    """Write the k-NN policy ``src`` (:func:`ainet_gym.agents.imitate.fit_knn`) for ``scenario`` (default
    destination: ``ainet_gym/pretrained/<scenario>.npz``) with its metadata record: ``algo`` ``knn``,
    ``algorithm`` :data:`KNN_ALGORITHM`, the class (``controls``) of its action mode's plans, the env
    arguments, ``training_seed``, ``commands`` (every command that labelled and fitted it, in order;
    ``command``: the last, the fit) and ``note`` (e.g. how the training seed was picked).

    Raises
    ------
    FileNotFoundError
        If ``src`` does not exist.
    ValueError
        If ``src`` is not a valid k-NN policy of ``scenario`` or ``commands`` is empty.
    """
    import numpy as np

    from ainet_gym.agents.imitate import KNN_FIELDS, KNN_META, load_knn
    from ainet_gym.routing.plans import CHOOSE_MODES, plans_class

    z = load_knn(src)
    if z["meta"][0] != scenario:
        raise ValueError(f"knn policy {str(src)!r}: labelled on scenario {z['meta'][0]!r}, not {scenario!r}")
    if not commands or not all(c.strip() for c in commands):
        raise ValueError("commands: empty; give every command that labelled and fitted the policy")
    name, mode, feats, history, steps = z["meta"][:5]
    meta = {
        "algo": "knn",
        "algorithm": KNN_ALGORITHM,
        "controls": plans_class(z["plans"], CHOOSE_MODES.get(mode, "jobs")),  # weighted plans: their class
        "scenario": scenario,
        "action_mode": mode,
        "obs_features": [f for f in feats.split(",") if f],
        "history": int(history),
        "episode_steps": int(steps),
        "k": z["k"],
        "block": z["block"],
        **({} if z["scale"] is None else {"standardized": True}),
        **({} if z["previous_plan"] is None else {"previous_plan_scale": z["previous_plan"]}),
        "vote": "label" if z["q"] is None else "value",
        **({} if z["margin"] is None else {"margin": z["margin"], "fallback": z["plans"][z["fallback"]]}),
        **({} if not z["cooldown"][0] else {"cooldown": z["cooldown"][0]}),
        **(
            {}
            if z["vote_plans"] is None
            else {"vote_plans": [p for p, m in zip(z["plans"], z["vote_plans"]) if m]}
        ),
        "plans": z["plans"],
        "labelled_decisions": int(z["y"].shape[0]),
        "training_seed": int(training_seed),
        "commands": list(commands),
        "command": commands[-1],
        "export_command": "python -m ainet_gym.agents.pretrained "
        + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "note": note,
    }
    dst = Path(dst) if dst is not None else PRETRAINED_DIR / f"{scenario}.npz"
    dst.parent.mkdir(parents=True, exist_ok=True)
    with np.load(src, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files if k != KNN_META}
    assert set(KNN_FIELDS) <= set(arrays)
    np.savez_compressed(dst, **arrays, **{KNN_META: np.array(json.dumps(meta, indent=1))})
    return dst


def load_policy_only(path: str | Path) -> tuple[BaseAlgorithm, dict[str, Any]]:
    """Load a policy-only checkpoint (or a full model) for inference: ``(model, metadata)``.

    :func:`ainet_gym.agents.sb3_agents.load_model` with the metadata required: a policy-only file is
    rebuilt from its ``data`` with the policy weights (the optimiser state is not shipped), through the
    same checks and allowlist (tensors: ``torch.load(weights_only=True)``), so ``ppo:PATH`` loads it too.

    Raises
    ------
    ValueError
        If the file has no metadata, no policy weights, or (:class:`UntrustedModelError`) holds
        objects outside the allowlist.
    """
    meta = read_metadata(path)
    if meta.get("algo") is None:
        raise ValueError(f"checkpoint {str(path)!r}: no ainet_gym.json metadata")
    return load_model(path)


def pretrained_fabric(path: str | Path) -> str | None:
    """The fabric fingerprint a shipped policy records (``fabric``: a .zip's metadata key, a .npz's field),
    checked as playing it checks it; None for a policy saved before the field (played on any fabric).

    Raises
    ------
    ModelFileError
        If the recorded value is not a non-empty string, or (.npz) a field of the file is malformed.
    """
    from ainet_gym.agents.model_files import checked_fabric

    p = Path(path)
    if p.suffix == ".npz":
        from ainet_gym.agents.imitate import load_knn

        return load_knn(p)["fabric"]
    return checked_fabric(read_metadata(p).get("fabric"), f"pretrained:{p}: metadata {META_MEMBER}")


class PretrainedAgent(SB3Agent):
    """The checkpoint shipped for the scenario being evaluated (bound by the evaluator)."""

    level = "action"

    def __init__(self) -> None:  # the model is loaded by bind(), once the scenario is known
        self.name = "pretrained"
        self.env_kwargs: dict[str, Any] = {}
        self.path: Path | None = None
        self._knn: Any = None  # the KnnAgent of a shipped .npz
        self.learned = True

    def bind(self, scenario: Scenario) -> None:
        """Load the checkpoint of ``scenario``.

        Raises
        ------
        ValueError
            If no checkpoint is shipped for the scenario (the message lists the shipped ones).
        """
        p = pretrained_path(scenario.name)
        if p is None:
            shipped = ", ".join(list_pretrained()) or "none"
            raise ValueError(
                f"policy 'pretrained': no checkpoint is shipped for scenario {scenario.name!r}; "
                f"shipped: {shipped} (ainet_gym/pretrained/<scenario>.zip or .npz)"
            )
        self.path = p
        if p.suffix == ".npz":  # a k-NN imitation (imitate.fit_knn): arrays only, played by KnnAgent
            from ainet_gym.agents.imitate import KnnAgent

            self._knn = KnnAgent(str(p))
            self._knn.spec_name = f"pretrained:{p}"
            self.meta = self._knn.meta
            self.algo = str(self.meta.get("algo", "knn"))
            self.env_kwargs = dict(self._knn.env_kwargs)
            from ainet_gym.agents.evaluate import agent_controls

            self.controls = agent_controls(self._knn)  # the k-NN's own class: its plans' (weighted or not)
            return
        self.model, self.meta = load_policy_only(p)
        self.algo = self.meta["algo"]
        mode = self.meta.get("action_mode", "split")
        self.env_kwargs = {
            "action_mode": mode,
            "history": meta_history(self.meta, f"pretrained:{p}"),
            "observation": self.meta.get("observation", "flat"),
            **meta_residual(self.meta, f"pretrained:{p}"),
            **meta_obs_features(self.meta, f"pretrained:{p}"),
        }
        from ainet_gym.routing.plans import CHOOSE_MODES

        self.controls = CHOOSE_MODES.get(mode, "jobs+bg" if mode in ("ecmp_weights", "split_bg") else "jobs")

    def spec_name(self) -> str:
        """How errors name the checkpoint: ``pretrained:PATH``."""
        return f"pretrained:{self.path}"

    def check(self, core: Any) -> None:
        if self.path is None:
            self.bind(core.scenario)
        if self._knn is not None:
            self._knn.check(core)
            return
        super().check(core)

    def reset(self, core: Any) -> None:
        if self._knn is not None:
            self._knn.reset(core)  # a knn file with a cooldown keeps state per episode
            return
        super().reset(core)

    def act(self, core: Any, obs: Any) -> Any:
        if self._knn is not None:
            return self._knn.act(core, obs)
        return super().act(core, obs)


register_agent(
    "pretrained",
    lambda arg: PretrainedAgent(),
    description="the policy shipped for the scenario (ainet_gym/pretrained/<scenario>.zip or .npz)",
    overwrite=True,
)


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.pretrained export|list``."""
    from ainet_gym.agents.arg_types import TRAIN_SEED_MAX, int_arg
    from ainet_gym.agents.module_cli import OneLineParser  # one-line errors, as ainet-gym's

    p = OneLineParser(prog="python -m ainet_gym.agents.pretrained", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="write a policy-only checkpoint into the package")
    e.add_argument("model", help="a model saved by ainet-gym train (.zip) or a knn policy (.npz)")
    e.add_argument("--scenario", required=True)
    e.add_argument(
        "--command",
        required=True,
        action="append",
        help="the exact command that trained the model (a .npz: repeat it, every command in order)",
    )
    e.add_argument(
        "--training-seed",
        type=int_arg(0, TRAIN_SEED_MAX),
        default=None,
        help="a .npz: the training seed (required)",
    )
    e.add_argument("--note", default="", help="a .npz: e.g. how the training seed was picked")
    e.add_argument("--out", default=None, help="default: ainet_gym/pretrained/<scenario>.zip (.npz)")
    sub.add_parser("list", help="the shipped checkpoints")
    a = p.parse_args(argv)
    from ainet_gym.agents.module_cli import run_module_cli

    return run_module_cli(f"python -m ainet_gym.agents.pretrained {a.cmd}", lambda: _run(a, p))


def _run(a: argparse.Namespace, p: argparse.ArgumentParser) -> int:
    """The parsed ``export`` or ``list`` of :func:`main`."""
    if a.cmd == "export" and str(a.model).endswith(".npz"):
        if a.training_seed is None:
            p.error("export of a .npz: --training-seed is required")
        dst = export_knn(a.model, a.scenario, a.command, a.training_seed, a.out, a.note)
        print(f"wrote {dst} ({dst.stat().st_size / 1e6:.2f} MB)")
        return 0
    if a.cmd == "export":
        if len(a.command) != 1:
            p.error("export of a .zip: give --command once (the command that trained the model)")
        dst = export_checkpoint(a.model, a.scenario, a.command[0], a.out)
        print(f"wrote {dst} ({dst.stat().st_size / 1e6:.2f} MB)")
        return 0
    for name, m in list_pretrained().items():
        print(
            f"{name}: {m.get('algo')} {m.get('action_mode')}, {m['size_bytes'] / 1e6:.2f} MB; {m.get('command')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
