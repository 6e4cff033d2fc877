"""The model-file rule, written once for every loader (SB3 zips, graph policies, per-switch models, shipped
checkpoints, RLlib checkpoint folders).

1. **Nothing in a model file or folder runs.** Weights are read as tensors only
   (``torch.load(weights_only=True)``: :func:`load_tensors`); configuration is read as JSON
   (:func:`read_json`) and every number in it is range-checked (:func:`meta_int`) before a module is
   built from the project's own code; SB3's pickled settings go through an allowlist of classes
   (:mod:`ainet_gym.agents.sb3_agents`). RLlib's own pickles (``class_and_ctor_args.pkl``,
   ``algorithm_state.pkl``, ...) are never read by ``evaluate``.
2. **What needs more runs only where the user says they trust the folder**, with a flag that says so
   (``--trust-checkpoint``: resuming RLlib training, converting an old RLlib checkpoint); without it the
   command is refused with one line (:func:`require_trust`).
3. **Sizes are bounded before anything is read**: a file above ``MODEL_LIMITS["file_bytes"]`` (a JSON
   member above ``MODEL_LIMITS["json_bytes"]``) is refused unread (:func:`check_size`).
4. **A refused file or folder is one line naming the path given**: :class:`ModelFileError` (a
   ``ValueError``; :class:`ModelNotFoundError` is also a ``FileNotFoundError``). The command line prints
   it as ``ainet-gym COMMAND: error: ...`` and exits with status 2.

A model's metadata asks the env for a ``history`` of at most ``LIMITS["history_max"]`` intervals
(:data:`ainet_gym.scenario.loader.LIMITS`, the env's own ceiling). The ceilings are documented in ``docs/safety-and-limits.md`` and overridable before loading, e.g.
``ainet_gym.agents.model_files.MODEL_LIMITS["file_bytes"] = 8 * 2**30``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "FABRIC_FIELD",
    "MODEL_LIMITS",
    "TRUST_FLAG",
    "ModelFileError",
    "ModelNotFoundError",
    "UntrustedModelError",
    "check_played_fabric",
    "check_size",
    "check_source_fabric",
    "checked_fabric",
    "existing",
    "json_member",
    "load_tensors",
    "meta_int",
    "read_json",
    "read_npz_members",
    "require_trust",
]

#: Ceilings of what a model file may ask for (documented in docs/safety-and-limits.md; overridable).
#:
#: - ``file_bytes``: any model file (SB3 zip, graph policy, RLlib weights), read or not (2 GiB);
#: - ``json_bytes``: a metadata file or member (``ainet_gym.json``), 1 MiB;
#: - ``layers_max``, ``width_max``: hidden layers and units per layer of a network rebuilt from JSON;
#: - ``dim_max``: observation and action dimensions; ``params_max``: parameters of a rebuilt network.
MODEL_LIMITS: dict[str, int] = {
    "file_bytes": 2 * 2**30,
    "json_bytes": 2**20,
    "layers_max": 16,
    "width_max": 8_192,
    "dim_max": 10_000_000,
    "params_max": 200_000_000,
}

#: The flag that marks a folder as trusted (its pickles may be unpickled, which can run code).
TRUST_FLAG = "--trust-checkpoint"


class ModelFileError(ValueError):
    """A model file or folder that is refused: not what the loader expects, too large, or (subclass
    :class:`UntrustedModelError`) one whose loading could run code. The message names the path given."""


class UntrustedModelError(ModelFileError):
    """A model file or folder whose loading would unpickle objects outside the allowlist (it could run
    code), refused unless the user marks it as trusted."""


class ModelNotFoundError(ModelFileError, FileNotFoundError):
    """A model file or folder that does not exist (both a ``ValueError`` and a ``FileNotFoundError``)."""


def existing(path: str | os.PathLike, what: str, *, folder: bool = False) -> Path:
    """``path`` as a :class:`~pathlib.Path`, checked to exist (a folder if ``folder``, else a file).

    Raises
    ------
    ModelNotFoundError
        If it does not exist, or is a file where a folder is expected (or the reverse).
    """
    p = Path(path)
    if folder and not p.is_dir():
        problem = "is a file, not a checkpoint folder" if p.exists() else "not found"
        raise ModelNotFoundError(f"{what}: {problem}")
    if not folder and not p.is_file():
        problem = "is a folder, not a model file" if p.is_dir() else "not found"
        raise ModelNotFoundError(f"{what}: {problem}")
    return p


def check_size(path: str | os.PathLike, what: str, limit_key: str = "file_bytes") -> int:
    """The size of ``path`` in bytes, refused above ``MODEL_LIMITS[limit_key]`` before it is read.

    Raises
    ------
    ModelFileError
        If the file is larger than the ceiling (or cannot be stat'ed).
    """
    try:
        size = os.stat(path).st_size
    except OSError as e:
        raise ModelFileError(f"{what}: cannot read it ({e.strerror or e})") from None
    limit = MODEL_LIMITS[limit_key]
    if size > limit:
        raise ModelFileError(
            f"{what}: {size:,} bytes, above the ceiling of {limit:,} "
            f"(ainet_gym.agents.model_files.MODEL_LIMITS[{limit_key!r}]); not reading it"
        )
    return size


def read_npz_members(
    path: str | os.PathLike, what: str, required: Sequence[str], holds: str, keep: Callable[[str], bool]
) -> dict[str, np.ndarray]:
    """The members of the ``.npz`` archive ``path`` that ``keep`` accepts (by name), read without pickle
    (``np.load(allow_pickle=False)``) after the archive's unpacked size is checked against
    ``MODEL_LIMITS["file_bytes"]`` (nothing is decompressed above it); the policy files of the k-NN, qnet and
    search agents are read through it.

    Raises
    ------
    ModelFileError
        One line naming the file: not an .npz archive, above the ceiling unpacked, a member of ``required``
        missing (with ``holds``: what such a file holds), an object (pickled) array or an unreadable member.
    """
    import zipfile

    import numpy as np

    try:
        with zipfile.ZipFile(path) as z:
            unpacked = sum(i.file_size for i in z.infolist())
    except (zipfile.BadZipFile, OSError) as e:
        raise ModelFileError(f"{what}: not an .npz archive ({e})") from None
    if unpacked > MODEL_LIMITS["file_bytes"]:
        raise ModelFileError(
            f"{what}: {unpacked:,} bytes unpacked, above the ceiling of {MODEL_LIMITS['file_bytes']:,} "
            "(ainet_gym.agents.model_files.MODEL_LIMITS['file_bytes']); not reading it"
        )
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [f for f in required if f not in z.files]
            if missing:
                raise ModelFileError(f"{what}: no field {', '.join(missing)}; {holds}")
            return {f: z[f] for f in z.files if keep(f)}
    except ValueError as e:
        if isinstance(e, ModelFileError):
            raise
        raise ModelFileError(
            f"{what}: refusing an object (pickled) array or unreadable member ({e})"
        ) from None
    except OSError as e:
        raise ModelFileError(f"{what}: not an .npz archive ({e})") from None


def read_json(path: str | os.PathLike, what: str) -> dict[str, Any]:
    """A JSON object read from ``path`` (at most ``MODEL_LIMITS["json_bytes"]``).

    Raises
    ------
    ModelNotFoundError
        If the file does not exist.
    ModelFileError
        If it is too large, not UTF-8 JSON, or not a JSON object.
    """
    p = existing(path, what)
    check_size(p, what, "json_bytes")
    try:
        obj = json.loads(p.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ModelFileError(f"{what}: not JSON ({type(e).__name__}: {str(e)[:120]})") from None
    if not isinstance(obj, dict):
        raise ModelFileError(f"{what}: not a JSON object")
    return obj


def load_tensors(path: str | os.PathLike, what: str) -> Any:
    """``torch.load(path, weights_only=True)`` after the size check: tensors and plain containers only,
    nothing unpickled that could run code.

    Raises
    ------
    ModelFileError
        If the file is too large, not a torch file, or holds anything but tensors and plain data.
    """
    import pickle
    import zipfile

    import torch

    p = existing(path, what)
    check_size(p, what)
    try:
        return torch.load(p, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, zipfile.BadZipFile, ValueError, KeyError) as e:
        first = " ".join(str(e).split(". ")[0].split())[:200]  # torch's weights-only message is a paragraph
        raise ModelFileError(f"{what}: not a torch weights file ({type(e).__name__}: {first})") from None
    except (OSError, MemoryError, OverflowError, IndexError, TypeError, AttributeError) as e:
        raise ModelFileError(f"{what}: cannot be read as torch weights ({type(e).__name__})") from None


def meta_int(meta: dict[str, Any], key: str, what: str, lo: int, hi: int, default: int | None = None) -> int:
    """``meta[key]`` (or ``default`` when absent) as an integer in ``[lo, hi]``.

    Raises
    ------
    ModelFileError
        If it is missing (no default), not an integer, or out of range; the message names the file and
        the key.
    """
    if key not in meta:
        if default is None:
            raise ModelFileError(f"{what}: its metadata has no {key!r}")
        return default
    v = meta[key]
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        shown = (
            repr(v) if not isinstance(v, int) or abs(v) < 10**30 else f"an integer of {len(str(v))} digits"
        )
        raise ModelFileError(
            f"{what}: metadata {key} = {shown[:80]}; allowed: an integer in [{lo:,}, {hi:,}]"
        )
    return v


def require_trust(path: str | os.PathLike, trusted: bool, action: str, what: str = "checkpoint") -> None:
    """Refuse ``action`` on ``path`` unless the user marked the folder as trusted.

    Raises
    ------
    UntrustedModelError
        If not ``trusted``: one line naming the path, what would run and the flag that allows it.
    """
    if not trusted:
        raise UntrustedModelError(
            f"{what} {str(path)!r}: {action} unpickles files from it, which can run code; refused unless "
            f"you trust the folder and say so with {TRUST_FLAG}"
        )


def json_member(extra: np.ndarray | None, member: str, what: str) -> dict[str, Any]:
    """The JSON object of an .npz file's metadata ``member`` (``extra``: its array, ``None`` when the file
    has none: ``{}``), bounded in size (:data:`MODEL_LIMITS` ``json_bytes``).

    Raises
    ------
    ModelFileError
        Naming ``what`` (the file) and the member, if it is not one string of a JSON object within the limit.
    """
    if extra is None:
        return {}
    if extra.ndim != 0 or extra.dtype.kind != "U" or extra.nbytes > MODEL_LIMITS["json_bytes"] * 4:
        raise ModelFileError(
            f"{what}: member {member!r} is a {extra.ndim}-d {extra.dtype} array; allowed: one string "
            f"of at most {MODEL_LIMITS['json_bytes']:,} characters (a JSON object)"
        )
    try:
        metadata = json.loads(str(extra))
    except (ValueError, RecursionError) as e:
        raise ModelFileError(f"{what}: member {member!r} is not JSON ({str(e)[:120]})") from None
    if not isinstance(metadata, dict):
        raise ModelFileError(f"{what}: member {member!r} is not a JSON object")
    return metadata


#: The field of a learned-policy file with the fingerprint of the fabric it was fitted or trained on
#: (:func:`~ainet_gym.fabric.topology.fabric_fingerprint`, a string such as ``"fab1-0123456789abcdef"``): a 0-d
#: string array of a knn or qnet .npz, a key of an SB3 zip's ``ainet_gym.json`` (issue-26zf2, issue-26zh2). A
#: file without it (written before it) is played on any fabric, unchecked.
FABRIC_FIELD = "fabric"


def checked_fabric(value: Any, what: str) -> str | None:
    """The recorded fingerprint :data:`FABRIC_FIELD` of the policy file ``what``, checked: ``value`` is a 0-d
    non-empty string array (an .npz field) or a non-empty string (a JSON metadata value); None without one.

    Raises
    ------
    ModelFileError
        Naming ``what``, the field, what it holds and what is allowed.
    """
    if value is None:
        return None
    allowed = "allowed: a 0-d non-empty string (a fabric fingerprint, e.g. 'fab1-0123456789abcdef')"
    if isinstance(value, str):
        if value:
            return value
        raise ModelFileError(f"{what}: field {FABRIC_FIELD!r} = ''; {allowed}")
    ndim, dtype = getattr(value, "ndim", None), getattr(value, "dtype", None)
    if ndim is None or dtype is None:  # a JSON number, list, object, bool
        raise ModelFileError(f"{what}: field {FABRIC_FIELD!r} = {value!r}; {allowed}")
    if ndim != 0 or dtype.kind != "U" or not str(value):
        raise ModelFileError(f"{what}: field {FABRIC_FIELD!r} is a {ndim}-d {dtype} array; {allowed}")
    return str(value)


def check_played_fabric(
    what: str,
    recorded: str | None,
    fabric: Any,
    made: str,
    remedy: str,
    scenario: str = "the scenario played",
) -> None:
    """Refuse to play the policy ``what`` (e.g. ``qnet:PATH``) whose recorded :data:`FABRIC_FIELD` is not the
    fingerprint of ``fabric`` (the env's :class:`~ainet_gym.fabric.topology.Fabric`, or its fingerprint as a
    string); nothing is checked when either is unknown (None: a file of before the field, or an env without a
    fabric). ``made`` says what the recorded fingerprint is (e.g. "the fabric it was trained on"), ``remedy``
    what to do instead, ``scenario`` what the env is (``train --resume``: "the scenario trained on").

    Raises
    ------
    ValueError
        One line naming ``what``, the field, both fingerprints and ``remedy``.
    """
    if recorded is None or fabric is None:
        return
    from ainet_gym.fabric.topology import fabric_fingerprint

    env = fabric if isinstance(fabric, str) else fabric_fingerprint(fabric)
    if env != recorded:
        raise ValueError(
            f"{what}: field {FABRIC_FIELD!r} = {recorded!r} ({made}), {scenario} has fabric {env!r}; "
            f"allowed: {remedy}"
        )


def check_source_fabric(
    flag: str,
    source: str | os.PathLike,
    meta: dict[str, Any],
    fabric: Any,
    allow: bool,
    member: str = "ainet_gym.json",
) -> str | None:
    """Refuse the model a training run continues from or starts from (``flag``: ``resume`` or ``init-from``,
    the file or folder ``source``) whose metadata ``meta`` (read from its JSON ``member``) records another
    fabric fingerprint than ``fabric`` (the run's env's fabric, or its fingerprint), before any step, unless
    ``allow`` (``--allow-other-fabric``); a model without one (saved before the field) is not checked. Returns
    the recorded fingerprint (None without one), for the new model's ``source_fabric``. Used by ``ainet-gym
    train`` of both frameworks (issue-26zj2, issue-26zk2).

    Raises
    ------
    ValueError
        One line naming the flag, the file, both fingerprints and what is allowed; :class:`ModelFileError` if
        the recorded value is not a non-empty string.
    """
    what = f"--{flag} {str(source)!r}"
    recorded = checked_fabric(meta.get(FABRIC_FIELD), f"{what}: metadata {member}")
    if not allow:
        check_played_fabric(
            what, recorded, fabric, "the fabric it was trained on",
            f"a model trained on this fabric (the same links and capacities), a new run without --{flag}, or "
            f"--allow-other-fabric to train it on from another fabric on purpose (the new model records both)",
            scenario="the scenario trained on",
        )  # fmt: skip
    return recorded
