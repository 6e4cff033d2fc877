"""Label files (.npz of ``label``): read without pickle (:func:`load_labels`) and joined
(:func:`concat_labels`); a knn policy file read as labels of its observation block (:func:`knn_labels`,
:func:`load_label_source`), and such labels given the env's full observations (:func:`with_full_obs`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: The fields every label file of ``label`` holds (:func:`lookahead_labels`); ``clone``, ``knn`` and
#: ``qfit`` read them.
LABEL_FIELDS = ("obs", "label", "plans", "meta")
#: The optional field of a label file, and of a knn policy file, with the fingerprint of the fabric the labels
#: were made on (:func:`~ainet_gym.fabric.topology.fabric_fingerprint`, a 0-d string such as
#: ``"fab1-0123456789abcdef"``; issue-26zf2). Files written before it have none: they are read as before, and
#: nothing is checked against them (:func:`same_fabric`, :func:`check_fabric`).
FABRIC_FIELD = "fabric"


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


def same_fabric(parts: list[dict[str, Any]], sources: list[str] | None = None) -> str | None:
    """The fabric fingerprint (:data:`FABRIC_FIELD`) the label sets ``parts`` share: None if one of them has
    none (a file of before the field: not checked, and the join then claims no fabric).

    Raises
    ------
    ValueError
        If two of them hold different fingerprints, naming both fingerprints and both ``sources`` (file names;
        default ``labels #1``, ``labels #2``, ...): they were labelled on different fabrics.
    """
    names = sources if sources is not None else [f"labels #{i + 1}" for i in range(len(parts))]
    seen: tuple[str, str] | None = None
    for name, q in zip(names, parts):
        if FABRIC_FIELD not in q:
            continue
        fp = str(q[FABRIC_FIELD])
        if seen is None:
            seen = (name, fp)
        elif fp != seen[1]:
            raise ValueError(
                f"labels {seen[0]!r} and {name!r}: field {FABRIC_FIELD!r} = {seen[1]!r} and {fp!r}: labelled on "
                "different fabrics (e.g. an edited edges file or capacity); allowed: label files of one fabric: "
                "label them again on one scenario, or leave one out"
            )
    if seen is None or any(FABRIC_FIELD not in q for q in parts):
        return None
    return seen[1]


def check_fabric(what: str, recorded: str | None, fabric: Any) -> None:
    """Refuse to play a policy file (``what``, e.g. ``knn:PATH``) whose :data:`FABRIC_FIELD` ``recorded`` is not
    the fingerprint of ``fabric`` (the env's :class:`~ainet_gym.fabric.topology.Fabric`); nothing is checked
    when either is unknown (None: a file of before the field, or an env without a fabric).

    Raises
    ------
    ValueError
        Naming the field, both fingerprints and what to do.
    """
    from ainet_gym.agents.model_files import check_played_fabric

    check_played_fabric(
        what, recorded, fabric, "the fabric its labels were made on",
        "the scenario it was labelled on (the same links and capacities), or fit the policy again from labels "
        "made on this fabric",
    )  # fmt: skip


def concat_labels(parts: list[dict[str, Any]], sources: list[str] | None = None) -> dict[str, Any]:
    """Label sets of one env (the same ``meta``) joined one after the other; their fabric fingerprint
    (:data:`FABRIC_FIELD`) is kept if every part has the same one, and parts of different fabrics are refused
    (:func:`same_fabric`; ``sources``: the parts' file names for its error)."""
    fabric = same_fabric(parts, sources)
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
        "block_obs",
    )
    out = {k: np.concatenate([q[k] for q in parts]) for k in keys if all(k in q for q in parts)}
    out["plans"], out["meta"] = parts[0]["plans"], parts[0]["meta"]
    out.update({k: parts[0][k] for k in ("redraw", "redraw_starts", "block", "hold") if k in parts[0]})
    if fabric is not None:
        out[FABRIC_FIELD] = np.array(fabric)
    return out


def knn_labels(path: str | Path) -> dict[str, Any]:
    """The labelled decisions a knn policy file (``imitate knn``, a shipped ``pretrained`` .npz) holds, as labels:
    ``block_obs`` (N, D) the observation block it was fitted on (``block``), ``label``, ``plans``, ``meta``, its
    fabric fingerprint if it has one (:data:`FABRIC_FIELD`) and, with a value vote, ``scores`` (each plan's
    lookahead value minus the best's); no ``obs`` (the other blocks were not kept: :func:`with_full_obs` fills
    them with zeros) and no ``reward``.

    Raises
    ------
    ValueError
        If the file is not a readable knn file, or its block holds the previous plan (not an observation block).
    """
    from ainet_gym.agents.imitate.features import PREVIOUS_PLAN
    from ainet_gym.agents.imitate.knn_file import load_knn

    knn = load_knn(path)
    if PREVIOUS_PLAN in str(knn["block"]).split(","):
        raise ValueError(
            f"knn policy {str(path)!r}: its block {knn['block']!r} is not an observation block alone"
        )
    x = (
        knn["x"] if knn["scale"] is None else knn["x"] * knn["scale"]
    )  # standardised files: back to raw columns
    out: dict[str, Any] = {
        "block_obs": x.astype(np.float32),
        "block": np.array(str(knn["block"])),
        "label": knn["y"],
        "plans": np.array(knn["plans"]),
        "meta": np.array(knn["meta"]),
    }
    if knn["q"] is not None:
        out["scores"] = knn["q"]
    if knn["fabric"] is not None:
        out[FABRIC_FIELD] = np.array(knn["fabric"])
    return out


def load_label_source(path: str | Path) -> dict[str, Any]:
    """A label file (:func:`load_labels`), or a knn policy file read as labels (:func:`knn_labels`): the file's
    fields tell which."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
    except (OSError, zipfile.BadZipFile):
        names = set()
    if {"x.npy", "y.npy", "block.npy"} <= names and "obs.npy" not in names:
        return knn_labels(path)
    return load_labels(path)


def with_full_obs(labels: dict[str, Any], layout: dict[str, slice], dim: int) -> dict[str, Any]:
    """``labels`` with ``obs`` (N, ``dim``) float32: their own, or, for labels of one observation block
    (:func:`knn_labels`), zeros with the block's columns of ``layout`` (an env's ``obs_layout``) filled in: what a
    policy that reads only that block (:class:`~ainet_gym.agents.block_features.BlockFeatures`) sees alike.

    Raises
    ------
    ValueError
        If the labels hold neither, or the block's width differs from the env's.
    """
    from ainet_gym.agents.imitate.features import knn_columns

    if "obs" in labels:
        return labels
    if "block_obs" not in labels:
        raise ValueError("labels: neither observations (obs) nor an observation block (block_obs)")
    cols = knn_columns(layout, str(labels["block"]))
    x = np.asarray(labels["block_obs"], dtype=np.float32)
    obs = np.zeros((x.shape[0], dim), dtype=np.float32)
    try:
        obs[:, cols] = x
    except ValueError:
        raise ValueError(
            f"labels: block {str(labels['block'])!r} of {x.shape[1]} columns; the env's differs"
        ) from None
    return {**labels, "obs": obs}
