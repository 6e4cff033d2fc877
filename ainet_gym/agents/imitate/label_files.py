"""Label files (.npz of ``label``): read without pickle (:func:`load_labels`) and joined
(:func:`concat_labels`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: The fields every label file of ``label`` holds (:func:`lookahead_labels`); ``clone``, ``knn`` and
#: ``qfit`` read them.
LABEL_FIELDS = ("obs", "label", "plans", "meta")


def load_labels(path: str | Path) -> dict[str, Any]:
    """The arrays of the label file ``path`` (.npz of ``label``), read without pickle; a ``ValueError``
    naming the file and what is allowed if it is missing, not an .npz archive, holds an object array or
    lacks a field of :data:`LABEL_FIELDS`."""
    import zipfile

    allowed = f"allowed: an .npz of labels from 'python -m ainet_gym.agents.imitate label' ({', '.join(LABEL_FIELDS)})"
    if not Path(path).is_file():
        what = "is a directory" if Path(path).is_dir() else "not found"
        raise ValueError(f"labels {str(path)!r}: {what}; {allowed}")
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files"):  # a .npy: one array, not an archive
                raise ValueError("one array, not an archive")
            out = {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        text = " ".join(str(e).split())[:120] or type(e).__name__
        raise ValueError(f"labels {str(path)!r}: not a readable label file ({text}); {allowed}") from None
    missing = [f for f in LABEL_FIELDS if f not in out]
    if missing:
        raise ValueError(f"labels {str(path)!r}: no field {', '.join(missing)}; {allowed}")
    return out


def concat_labels(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Label sets of one env (the same ``meta``) joined one after the other."""
    keys = (
        "obs",
        "label",
        "scores",
        "reward",
        "seed",
        "t",
        "gpu_utilization",
        "played",
        "tail",
        "excess",
        "step_ratio",
        "step_iters",
    )
    out = {k: np.concatenate([q[k] for q in parts]) for k in keys if all(k in q for q in parts)}
    out["plans"], out["meta"] = parts[0]["plans"], parts[0]["meta"]
    out.update({k: parts[0][k] for k in ("redraw",) if k in parts[0]})
    return out
