"""The checkpoint folder of ``ainet-gym train --framework rllib`` (:mod:`ainet_gym.agents.rllib_train`): RLlib's
own files, the policy as plain weights and :data:`META_FILE` (``ainet_gym.json``, what the policy was trained on,
with the fingerprint of its scenario's fabric: :func:`scenario_fabric`), written by :func:`save_checkpoint` with
:func:`checkpoint_metadata` and read by :func:`read_checkpoint_metadata`;
:func:`convert_checkpoint` (``ainet-gym convert-rllib``, :func:`convert_main`) adds the plain weights to a folder
written before that format."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ainet_gym.agents.sb3_agents import space_signature

if TYPE_CHECKING:
    import argparse

__all__ = [
    "META_FILE",
    "checkpoint_metadata",
    "convert_checkpoint",
    "convert_main",
    "read_checkpoint_metadata",
    "save_checkpoint",
    "scenario_fabric",
]


META_FILE = "ainet_gym.json"


def read_checkpoint_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``ainet_gym.json`` of a checkpoint directory written by :func:`train_rllib`.

    Raises
    ------
    ModelNotFoundError
        If the directory or its metadata does not exist (also a ``FileNotFoundError``).
    ModelFileError
        If the metadata is too large or not a JSON object.
    """
    from ainet_gym.agents.model_files import ModelNotFoundError, existing, read_json

    p = existing(path, f"RLlib checkpoint directory {str(path)!r}", folder=True)
    meta = p / META_FILE
    if not meta.is_file():
        raise ModelNotFoundError(
            f"{str(path)!r} has no {META_FILE}: not a checkpoint of 'ainet-gym train --framework rllib'"
        )
    return read_json(meta, f"rllib:{path}: {META_FILE}")


def save_checkpoint(algo: Any, out: str | os.PathLike, meta: dict[str, Any]) -> Path:
    """``algo.save_to_path(out)`` (RLlib's own files, for ``--resume --trust-checkpoint``), the policy
    network as plain weights (``policy_weights.pt``, :func:`ainet_gym.agents.rllib_policy.export_policy`) and
    ``out/ainet_gym.json`` (``meta`` plus ``policy_module``, the network's constructor arguments); returns
    ``out``."""
    from ainet_gym.agents.rllib_policy import export_policy

    p = Path(out)
    p.mkdir(parents=True, exist_ok=True)
    algo.save_to_path(str(p.resolve()))
    spec = export_policy(algo.get_module(), p)
    (p / META_FILE).write_text(json.dumps({**meta, "policy_module": spec}, indent=1))
    return p


def scenario_fabric(scenario: Any) -> str:
    """The fingerprint of the fabric ``scenario`` (a shipped name, a YAML path, a dict or a Scenario) builds
    (:func:`~ainet_gym.fabric.topology.fabric_fingerprint`, the fabric its envs are built on: the same
    ``routing.max_paths``)."""
    from ainet_gym.fabric.topology import build_fabric, fabric_fingerprint
    from ainet_gym.scenario.loader import load_scenario

    sc = load_scenario(scenario)
    return fabric_fingerprint(build_fabric(sc.fabric, max_paths=sc.routing.max_paths))


def checkpoint_metadata(
    algorithm: Any, /, fabric: str, source_fabric: str | None = None, **fields: Any
) -> dict[str, Any]:
    """``ainet_gym.json`` of a checkpoint: ``fields`` plus the module's observation and action spaces, ``fabric``
    (the fingerprint of the fabric trained on, :func:`scenario_fabric`: ``rllib:DIR`` refuses to play on
    another one and ``--resume`` to train on one without ``--allow-other-fabric``) and ``source_fabric`` (the
    fingerprint a resumed checkpoint records, written only when it is another one)."""
    import ray

    module = algorithm.get_module()
    other = {} if source_fabric is None or source_fabric == fabric else {"source_fabric": source_fabric}
    return {
        "framework": "rllib",
        **fields,
        "fabric": fabric,
        **other,
        "ray_version": ray.__version__,
        "observation_space": space_signature(module.observation_space),
        "action_space": space_signature(module.action_space),
    }


def convert_checkpoint(path: str | os.PathLike, trusted: bool, overwrite: bool = False) -> Path:
    """Add the plain-weights policy (``policy_weights.pt`` and ``policy_module`` in ``ainet_gym.json``) to a
    checkpoint folder written before this format, so that ``rllib:DIR`` loads it without unpickling.

    This loads RLlib's pickled module from the folder (which can run code), so ``trusted`` must say the
    user trusts it. Nothing else in the folder changes; ``ainet_gym.json`` keeps every field it had.

    Raises
    ------
    UntrustedModelError
        If not ``trusted``.
    ModelFileError
        If the folder is not an RLlib checkpoint of ainet-gym, or is converted already (unless
        ``overwrite``).
    ImportError
        Without the extra ``rllib``.
    """
    from ainet_gym.agents.model_files import ModelFileError, require_trust
    from ainet_gym.agents.rllib_agent import MODULE_SUBDIR
    from ainet_gym.agents.rllib_policy import POLICY_FILE, export_policy

    p = Path(path)
    meta = read_checkpoint_metadata(p)
    if meta.get("framework") != "rllib":
        raise ModelFileError(f"rllib:{path}: {p / META_FILE} is not an RLlib checkpoint's")
    if ("policy_module" in meta or (p / POLICY_FILE).exists()) and not overwrite:
        raise ModelFileError(
            f"rllib:{path}: holds a plain-weights policy already ({POLICY_FILE}); pass --overwrite to write it again"
        )
    mdir = p / MODULE_SUBDIR
    if not mdir.is_dir():
        raise ModelFileError(f"rllib:{path}: no RLlib policy module in {str(mdir)!r}")
    require_trust(p, trusted, "converting")
    try:
        from ray.rllib.core.rl_module.rl_module import RLModule
    except ImportError as e:
        raise ImportError(f"convert-rllib needs the rllib extra: pip install 'ainet-gym[rllib]' ({e})") from e
    module = RLModule.from_checkpoint(str(mdir.resolve()))
    spec = export_policy(module, p)
    meta = {
        **meta,
        "observation_space": meta.get("observation_space", space_signature(module.observation_space)),
        "action_space": meta.get("action_space", space_signature(module.action_space)),
        "policy_module": spec,
    }
    (p / META_FILE).write_text(json.dumps(meta, indent=1))
    return p


def convert_main(args: argparse.Namespace) -> int:
    """``ainet-gym convert-rllib DIR --trust-checkpoint [--overwrite]``."""
    p = convert_checkpoint(args.checkpoint, args.trust_checkpoint, args.overwrite)
    print(
        f"{p}: wrote {p / 'policy_weights.pt'} and policy_module in {p / META_FILE}; evaluate with rllib:{p}"
    )
    return 0
