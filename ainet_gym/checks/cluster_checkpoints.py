"""The cluster check's checkpoints (:mod:`ainet_gym.checks.cluster`): written atomically, to a temporary name then
renamed (:func:`save_atomic`), with the SHA-256 of the policy's weights (:func:`weights_sha`) that the verdicts
compare with the weights each checkpoint loads."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "save_atomic",
    "weights_sha",
]


def weights_sha(state: dict[str, Any]) -> str:
    """SHA-256 of a module's weights (a state dict of tensors or arrays, in key order)."""
    import numpy as np

    h = hashlib.sha256()
    for k in sorted(state):
        v = state[k]
        arr = v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)
        h.update(k.encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def save_atomic(algo: Any, root: Path, iteration: int) -> tuple[Path, str]:
    """Write the checkpoint of ``iteration`` to a temporary name, then rename it: a crash never leaves a
    half-written checkpoint under a final name. Returns (directory, weights SHA-256)."""
    final = root / f"iter-{iteration:03d}"
    tmp = root / f".iter-{iteration:03d}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    algo.save_to_path(str(tmp.resolve()))
    sha = weights_sha(algo.learner_group.get_weights()["default_policy"])  # the learner's full module
    (tmp / "weights.sha256").write_text(sha + "\n")
    os.replace(tmp, final)
    return final, sha
