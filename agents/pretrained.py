"""Shipped checkpoints: export a trained model without its optimiser state, load it, evaluate it.

``pretrained`` is a registry agent: ``ainet-gym evaluate SCENARIO --policies ecmp,pretrained`` evaluates
the checkpoint shipped for that scenario (``ainet_gym/pretrained/<scenario>.zip``; a clear error names
the shipped ones when there is none). A checkpoint is made from a model that ``ainet-gym train`` saved::

    python -m ainet_gym.agents.pretrained export runs/model.zip --scenario periodic-interference \\
        --command "ainet-gym train periodic-interference --algo ppo --action-mode ecmp_weights ..."

which keeps SB3's ``data`` (spaces, hyperparameters) and ``policy.pth`` (the weights), drops
``policy.optimizer.pth`` (Adam moments, twice the weights) and ``pytorch_variables.pth``, and records
the command in ``ainet_gym.json``. ``python -m ainet_gym.agents.pretrained list`` prints what is shipped.
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

__all__ = ["DROPPED_MEMBERS", "PretrainedAgent", "export_checkpoint", "load_policy_only"]

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


class PretrainedAgent(SB3Agent):
    """The checkpoint shipped for the scenario being evaluated (bound by the evaluator)."""

    level = "action"

    def __init__(self) -> None:  # the model is loaded by bind(), once the scenario is known
        self.name = "pretrained"
        self.env_kwargs: dict[str, Any] = {}
        self.path: Path | None = None

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
                f"shipped: {shipped} (ainet_gym/pretrained/<scenario>.zip)"
            )
        self.path = p
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

    def check(self, core: Any) -> None:
        if self.path is None:
            self.bind(core.scenario)
        super().check(core)


register_agent(
    "pretrained",
    lambda arg: PretrainedAgent(),
    description="the checkpoint shipped for the scenario (ainet_gym/pretrained/<scenario>.zip)",
    overwrite=True,
)


def main(argv: list[str] | None = None) -> int:
    """``python -m ainet_gym.agents.pretrained export|list``."""
    p = argparse.ArgumentParser(
        prog="python -m ainet_gym.agents.pretrained", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="write a policy-only checkpoint into the package")
    e.add_argument("model", help="a model saved by ainet-gym train")
    e.add_argument("--scenario", required=True)
    e.add_argument("--command", required=True, help="the exact command that trained the model")
    e.add_argument("--out", default=None, help="default: ainet_gym/pretrained/<scenario>.zip")
    sub.add_parser("list", help="the shipped checkpoints")
    a = p.parse_args(argv)
    if a.cmd == "export":
        dst = export_checkpoint(a.model, a.scenario, a.command, a.out)
        print(f"wrote {dst} ({dst.stat().st_size / 1e6:.2f} MB)")
        return 0
    for name, m in list_pretrained().items():
        print(
            f"{name}: {m.get('algo')} {m.get('action_mode')}, {m['size_bytes'] / 1e6:.2f} MB; {m.get('command')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
