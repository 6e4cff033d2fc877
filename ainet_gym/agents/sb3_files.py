"""The model file of :mod:`ainet_gym.agents.sb3_agents`: SB3's ``.zip`` with the member ``ainet_gym.json``
(:data:`META_MEMBER`), written by :func:`save_model`, its metadata read by :func:`read_metadata`, and the model
loaded by :func:`load_model` (a full model, or a policy-only checkpoint without :data:`OPTIMIZER_MEMBER`); with
the spaces' signature a model is checked against (:func:`space_signature`, :func:`check_fit`).

Trust: a model file holds pickled Python objects; unless told the file is trusted, :func:`load_model` unpickles
its entries with the allowlist of :mod:`ainet_gym.agents.sb3_safety` first. Load only model files you trust."""

from __future__ import annotations

import json
import os
import pickle
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ainet_gym.agents.model_files import (
    MODEL_LIMITS,
    ModelFileError,
    ModelNotFoundError,
    check_size,
)
from ainet_gym.agents.sb3_algos import ALGO_MODES, algo_class
from ainet_gym.agents.sb3_safety import safe_objects
from ainet_gym.errors import check_choice

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm


__all__ = [
    "META_MEMBER",
    "OPTIMIZER_MEMBER",
    "check_fit",
    "check_model_fabric",
    "load_model",
    "read_metadata",
    "save_model",
    "space_signature",
]


META_MEMBER = "ainet_gym.json"


def space_signature(space: Any) -> dict[str, Any]:
    """A JSON-able description of a Gymnasium space (kind and shape; nvec for MultiDiscrete)."""
    from gymnasium import spaces

    if isinstance(space, spaces.MultiDiscrete):
        return {"kind": "MultiDiscrete", "shape": list(space.shape), "nvec_max": int(space.nvec.max())}
    if isinstance(space, spaces.Dict):
        return {"kind": "Dict", "keys": {k: space_signature(v) for k, v in space.spaces.items()}}
    return {"kind": type(space).__name__, "shape": list(space.shape)}


def check_fit(
    what: str,
    path: str | os.PathLike,
    meta: dict[str, Any],
    scenario: str,
    want: tuple,
    got: tuple,
    noun: str = "",
) -> None:
    """Raise ``ValueError`` if a saved policy's (observation, action) signature ``want`` differs from the
    env's ``got``, naming the file, the scenario it was trained on and both signatures."""
    if want != got:
        raise ValueError(
            f"{what} {str(path)!r} does not fit scenario {scenario!r}: it was trained on "
            f"{meta.get('scenario', '?')!r} with {noun}observations {want[0]} and actions {want[1]}; "
            f"this scenario gives {noun}observations {got[0]} and actions {got[1]}"
        )


#: how a model of another fabric is made again on the played one, by default (``ainet-gym train`` models)
_TRAINED_BY = "ainet-gym train, or imitate clone of labels made on it"


def check_model_fabric(what: str, meta: dict[str, Any], fabric: Any, trained_by: str = _TRAINED_BY) -> None:
    """Refuse to play the model ``what`` (e.g. ``ppo:PATH``, ``marl:PATH``, ``rllib:DIR``) on ``fabric`` if its
    metadata ``meta`` (the JSON ``ainet_gym.json`` of a zip or a checkpoint folder) records another fabric
    fingerprint (``fabric``, :func:`~ainet_gym.agents.model_files.check_played_fabric`); nothing is checked for a
    model without one (saved before it). ``trained_by`` names the commands that train one on this fabric.

    Raises
    ------
    ValueError
        One line naming the file, both fingerprints and what to do; :class:`ModelFileError` if the recorded
        value is not a non-empty string.
    """
    from ainet_gym.agents.model_files import check_played_fabric, checked_fabric

    check_played_fabric(
        what, checked_fabric(meta.get("fabric"), f"{what}: metadata {META_MEMBER}"), fabric,
        "the fabric it was trained on", "the scenario it was trained on (the same links and capacities), or "
        f"train a model on this fabric ({trained_by})",
    )  # fmt: skip


def save_model(model: BaseAlgorithm, path: str | os.PathLike, meta: dict[str, Any]) -> Path:
    """Save ``model`` to ``path`` (.zip appended if missing) with ``meta`` as ``ainet_gym.json``."""
    p = Path(path)
    if p.suffix != ".zip":
        p = p.with_name(p.name + ".zip")
    p.parent.mkdir(parents=True, exist_ok=True)
    model.save(p)
    with zipfile.ZipFile(p, "a") as z:
        z.writestr(META_MEMBER, json.dumps(meta, indent=1))
    return p


def _check_file(path: str | os.PathLike, what: str) -> Path:
    p = Path(path)
    if not p.exists() and p.suffix != ".zip" and p.with_name(p.name + ".zip").exists():
        p = p.with_name(p.name + ".zip")
    if not p.exists():
        raise ModelNotFoundError(f"{what}: model file {str(path)!r} not found")
    if not p.is_file():
        raise ModelFileError(
            f"{what}: {str(path)!r} is a folder, not a model file (.zip from ainet-gym train)"
        )
    check_size(p, f"{what}: model file {str(path)!r}")
    if not zipfile.is_zipfile(p):
        raise ModelFileError(f"{what}: {str(p)!r} is not a saved model (.zip from ainet-gym train)")
    return p


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``ainet_gym.json`` of a saved model (empty dict for a plain SB3 zip).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    """
    p = _check_file(path, "model")
    try:
        with zipfile.ZipFile(p) as z:
            if META_MEMBER not in z.namelist():
                return {}
            if z.getinfo(META_MEMBER).file_size > MODEL_LIMITS["json_bytes"]:
                raise ModelFileError(
                    f"model {str(p)!r}: {META_MEMBER} is larger than "
                    f"{MODEL_LIMITS['json_bytes']:,} bytes (MODEL_LIMITS['json_bytes']); not reading it"
                )
            blob = z.read(META_MEMBER)
    # zipfile raises NotImplementedError for a member in a compression method it does not support
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as e:
        raise ModelFileError(f"model {str(p)!r}: not a readable zip ({type(e).__name__}: {e})") from None
    try:
        meta = json.loads(blob.decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ModelFileError(f"model {str(p)!r}: {META_MEMBER} is not JSON ({str(e)[:120]})") from None
    if not isinstance(meta, dict):
        raise ModelFileError(f"model {str(p)!r}: {META_MEMBER} is not a JSON object")
    return meta


def load_model(
    path: str | os.PathLike,
    algo: str | None = None,
    env: Any = None,
    trusted: bool = False,
    label: str | None = None,
) -> tuple[BaseAlgorithm, dict[str, Any]]:
    """Load a model saved by :func:`save_model`; returns ``(model, metadata)``.

    ``algo`` defaults to the metadata's; if both are given they must agree. ``label`` is how errors
    name the file (default ``algo:PATH``; a loader built on this one, e.g. ``marl:PATH``, passes its own).

    Safety: SB3 models hold pickled Python objects, and unpickling can run code. Unless ``trusted``,
    the file must be an SB3 model of ``algo`` (its members and settings are checked first) and its
    pickled entries are unpickled with an allowlist (SB3 policy, buffer and schedule classes, gymnasium
    spaces, numpy arrays, torch optimisers and layers: classes only, no functions); the tensors are read
    with ``torch.load(weights_only=True)``. Still, load only model files you trust.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the algorithm is unknown or differs from the one the model was trained with;
        :class:`UntrustedModelError` if the file is not a model of ``algo`` or holds other objects.
    """
    p = _check_file(path, label or f"{algo or 'model'}:{path}")
    meta = read_metadata(p)
    trained = meta.get("algo")
    if algo is None:
        if trained is None:
            raise ValueError(f"model {str(p)!r}: no ainet_gym.json metadata; name the algorithm (ppo:PATH)")
        algo = trained
    if trained is not None and trained != algo:
        raise ValueError(f"model {str(p)!r} was trained with {trained}, not {algo}; use {trained}:{path}")
    check_choice(f"model {str(p)!r}: algo", algo, ALGO_MODES)
    cls = algo_class(algo)
    objects = None if trusted else safe_objects(p, algo, label)
    try:
        with zipfile.ZipFile(p) as z:
            has_optimizer = OPTIMIZER_MEMBER in z.namelist()
        if has_optimizer:
            model = cls.load(p, env=env, device="cpu", custom_objects=objects)
        else:  # policy weights only (a shipped checkpoint): inference, not further training
            model = _load_policy_weights(p, cls, objects, env)
    except ModelFileError:
        raise
    except (
        AssertionError,
        KeyError,
        RuntimeError,
        EOFError,
        zipfile.BadZipFile,
        pickle.UnpicklingError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        OSError,
        MemoryError,
        OverflowError,
    ) as e:
        first = " ".join(str(e).split(". ")[0].split())[:200]  # torch's weights-only message is a paragraph
        raise ModelFileError(
            f"{label or f'{algo}:{p}'}: cannot be loaded as a {algo} model ({type(e).__name__}: {first})"
        ) from None
    meta = {"algo": algo, **meta}
    return model, meta


#: The zip member of a full SB3 model that a policy-only checkpoint drops (the optimiser state).
OPTIMIZER_MEMBER = "policy.optimizer.pth"


def _load_policy_weights(p: Path, cls: type, objects: dict[str, Any] | None, env: Any) -> BaseAlgorithm:
    """Rebuild a model from ``data`` as SB3's ``load`` does and load only the policy weights (SB3's
    ``load`` insists on the optimiser state, which a policy-only checkpoint leaves out)."""
    from stable_baselines3.common.save_util import load_from_zip_file

    data, params, _ = load_from_zip_file(p, device="cpu", load_data=True, custom_objects=objects)
    if data is None or "policy" not in params:
        raise KeyError("no SB3 data or policy weights")
    model = cls(policy=data["policy_class"], env=None, device="cpu", _init_setup_model=False)
    model.__dict__.update(data)
    model._setup_model()
    model.policy.load_state_dict(params["policy"])
    model.policy.set_training_mode(False)
    if env is not None:
        model.set_env(env)
    return model
