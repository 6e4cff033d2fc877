"""The graph policy's checkpoint file (:mod:`ainet_gym.agents.graph_policy`): a ``torch.save`` dict of the
weights, the configuration and a JSON ``info``, written by :func:`save_graph_policy` and read back, checked,
by :func:`load_graph_policy` (``torch.load(weights_only=True)``: no pickled code)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from ainet_gym.agents.graph_net import GraphActorCritic, GraphPolicyConfig

__all__ = [
    "FORMAT",
    "load_graph_policy",
    "save_graph_policy",
]


FORMAT = "ainet-gym-graph-policy"


def save_graph_policy(
    module: torch.nn.Module, path: str | os.PathLike, info: dict[str, Any] | None = None
) -> Path:
    """Save the weights, the configuration and ``info`` (JSON-able) to ``path`` (``torch.save``)."""
    import torch

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    blob = {
        "format": FORMAT,
        "config": asdict(module.cfg),
        "state_dict": {k: v.detach().cpu() for k, v in module.state_dict().items()},
        "info": json.dumps(info or {}),
    }
    torch.save(blob, p)
    return p


def load_graph_policy(path: str | os.PathLike) -> tuple[torch.nn.Module, dict[str, Any]]:
    """``(module, info)`` of a checkpoint written by :func:`save_graph_policy`.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If it is not a graph-policy checkpoint (any other file, or one with other keys or shapes).
    """
    from ainet_gym.agents.model_files import ModelFileError, existing, load_tensors

    what = f"graph:{path}"
    p = existing(path, what)
    try:
        blob = load_tensors(p, what)
    except ModelFileError as e:
        raise ModelFileError(
            f"{e} (not a graph-policy checkpoint: train one with python -m ainet_gym.agents.graph_policy train)"
        ) from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise ModelFileError(
            f"{what}: not a graph-policy checkpoint (format {FORMAT!r} expected; "
            "train one with python -m ainet_gym.agents.graph_policy train)"
        )
    missing = [k for k in ("config", "state_dict") if k not in blob]
    if missing or not isinstance(blob["config"], dict) or not isinstance(blob["state_dict"], dict):
        raise ModelFileError(f"{what}: malformed graph-policy checkpoint (config and state_dict expected)")
    try:
        cfg = GraphPolicyConfig(**blob["config"])
        cfg.check()
        module = GraphActorCritic(cfg)
        module.load_state_dict(blob["state_dict"])
        info = json.loads(blob.get("info", "{}"))
        if not isinstance(info, dict):
            raise TypeError("info is not a JSON object")
    except (TypeError, KeyError, RuntimeError, ValueError, RecursionError) as e:
        text = " ".join(str(e).split())[:200]
        raise ModelFileError(f"{what}: malformed graph-policy checkpoint: {text}") from None
    module.eval()
    return module, info
