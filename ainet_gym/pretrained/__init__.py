"""Policies shipped with the package, one per scenario, looked up by name: ``<scenario>.zip`` or ``<scenario>.npz``.

A ``.zip`` is a stable-baselines3 model zip with the policy weights only (no optimiser state, no rollout
buffers) and an ``ainet_gym.json`` member that records the algorithm, the env arguments it was trained
with, the scenario, the fingerprint of its fabric (``fabric``: ``pretrained`` refuses a scenario of the same name
on another fabric) and the exact command that trained it (``command``) and exported it
(``export_command``). A ``.npz`` is a k-nearest-neighbour imitation of the lookahead
(:func:`ainet_gym.agents.imitate.fit_knn`: plain arrays, read with ``allow_pickle=False``) with the same
record in its ``ainet_gym.json`` member (algorithm ``knn-imitation``, class, training seed, the commands
that labelled and fitted it) and the fabric's fingerprint in its field ``fabric``.
``ainet-gym evaluate SCENARIO --policies ...,pretrained`` evaluates the one of that scenario;
``ainet_gym/agents/pretrained.py`` loads and exports them.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["PRETRAINED_DIR", "SUFFIXES", "list_pretrained", "pretrained_metadata", "pretrained_path"]

PRETRAINED_DIR = Path(__file__).resolve().parent
#: the kinds of shipped policy, looked up in this order: SB3 model zips, k-NN policy arrays
SUFFIXES = (".zip", ".npz")
#: the metadata member (of a .npz: the array ``ainet_gym.json``, stored as ``ainet_gym.json.npy``)
META_MEMBER = "ainet_gym.json"
#: a metadata member larger than this is ignored (bytes; characters x 4 for a .npz's UTF-32 string)
META_MAX_BYTES = 2**20


def pretrained_path(scenario: str) -> Path | None:
    """The shipped policy of scenario ``scenario`` (its ``name``): ``<scenario>.zip`` or ``<scenario>.npz``,
    or None if none is shipped (also for a name that is not a plain file name: a scenario named ``../x``
    never reaches outside the folder).

    Raises
    ------
    ValueError
        If both a .zip and a .npz are shipped for the scenario (one policy per scenario).
    """
    if not scenario or scenario != Path(scenario).name or scenario.startswith("."):
        return None
    found = [p for s in SUFFIXES if (p := PRETRAINED_DIR / f"{scenario}{s}").is_file()]
    if len(found) > 1:
        raise ValueError(
            f"scenario {scenario!r}: {len(found)} shipped policies ({', '.join(p.name for p in found)}); "
            "allowed: one per scenario"
        )
    return found[0] if found else None


def _npz_metadata(path: str | Path) -> dict[str, Any]:
    import numpy as np

    member = META_MEMBER + ".npy"
    with zipfile.ZipFile(path) as z:
        if member not in z.namelist() or z.getinfo(member).file_size > 4 * META_MAX_BYTES:
            return {}
    with np.load(path, allow_pickle=False) as z:
        try:
            a = z[META_MEMBER]
        except ValueError:  # an object array: never unpickled
            return {}
    if a.ndim != 0 or a.dtype.kind != "U":
        return {}
    return json.loads(str(a))


def pretrained_metadata(path: str | Path) -> dict[str, Any]:
    """The ``ainet_gym.json`` member of a shipped policy (empty dict if it has none, or if it is not a JSON
    object below 1 MiB)."""
    try:
        if Path(path).suffix == ".npz":
            meta = _npz_metadata(path)
        else:
            with zipfile.ZipFile(path) as z:
                if META_MEMBER not in z.namelist() or z.getinfo(META_MEMBER).file_size > META_MAX_BYTES:
                    return {}
                meta = json.loads(z.read(META_MEMBER).decode())
    except (UnicodeDecodeError, ValueError, RecursionError, zipfile.BadZipFile):
        return {}
    return meta if isinstance(meta, dict) else {}


def list_pretrained() -> dict[str, dict[str, Any]]:
    """Scenario name -> metadata of every shipped policy (plus ``size_bytes`` and ``file``)."""
    out = {}
    for p in sorted(q for s in SUFFIXES for q in PRETRAINED_DIR.glob(f"*{s}")):
        out[p.stem] = {**pretrained_metadata(p), "size_bytes": p.stat().st_size, "file": p.name}
    return out
