"""Policies shipped with the package: ``<scenario>.zip``, one per scenario, looked up by name.

Each file is a stable-baselines3 model zip with the policy weights only (no optimiser state, no
rollout buffers) and an ``ainet_gym.json`` member that records the algorithm, the env arguments it
was trained with, the scenario and the exact command that trained it (``command``) and exported it
(``export_command``). ``ainet-gym evaluate SCENARIO --policies ...,pretrained`` evaluates the one of
that scenario; ``agents/pretrained.py`` loads and exports them.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["PRETRAINED_DIR", "list_pretrained", "pretrained_metadata", "pretrained_path"]

PRETRAINED_DIR = Path(__file__).resolve().parent


def pretrained_path(scenario: str) -> Path | None:
    """The shipped checkpoint of scenario ``scenario`` (its ``name``), or None if none is shipped (also for a
    name that is not a plain file name: a scenario named ``../x`` never reaches outside the folder)."""
    if not scenario or scenario != Path(scenario).name or scenario.startswith("."):
        return None
    p = PRETRAINED_DIR / f"{scenario}.zip"
    return p if p.is_file() else None


def pretrained_metadata(path: str | Path) -> dict[str, Any]:
    """The ``ainet_gym.json`` member of a checkpoint (empty dict if it has none, or if it is not a JSON
    object below 1 MiB)."""
    with zipfile.ZipFile(path) as z:
        if "ainet_gym.json" not in z.namelist() or z.getinfo("ainet_gym.json").file_size > 2**20:
            return {}
        try:
            meta = json.loads(z.read("ainet_gym.json").decode())
        except (UnicodeDecodeError, ValueError, RecursionError):
            return {}
    return meta if isinstance(meta, dict) else {}


def list_pretrained() -> dict[str, dict[str, Any]]:
    """Scenario name -> metadata of every shipped checkpoint (plus ``size_bytes``)."""
    out = {}
    for p in sorted(PRETRAINED_DIR.glob("*.zip")):
        out[p.stem] = {**pretrained_metadata(p), "size_bytes": p.stat().st_size}
    return out
