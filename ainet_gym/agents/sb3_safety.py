"""The allowlist unpickler of :func:`ainet_gym.agents.sb3_agents.load_model`: :func:`safe_objects` checks that
a file is an SB3 model of the expected algorithm (its members and the plain keys of its settings) and unpickles
the entries of its ``data`` member with only the classes a model saved by ``ainet-gym train`` holds (SB3
policies, buffers and schedules, gymnasium spaces, numpy arrays, torch optimisers and layers: classes, no
functions), so that SB3's own load unpickles nothing. It narrows what a crafted file can do; it is not a reason
to load files you do not trust."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from ainet_gym.agents.model_files import UntrustedModelError

__all__ = [
    "safe_objects",
]


#: Members every SB3 model zip has.
_SB3_MEMBERS = ("data", "policy.pth", "_stable_baselines3_version")
#: Plain (not pickled) keys of the ``data`` member that tell the algorithms apart.
_ALGO_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # (required, absent)
    "ppo": (("n_steps", "n_epochs", "clip_range"), ("buffer_size",)),
    "maskable_ppo": (("n_steps", "n_epochs", "clip_range"), ("buffer_size",)),
    "a2c": (("n_steps",), ("n_epochs", "clip_range", "buffer_size")),
    "sac": (("buffer_size", "tau"), ("n_steps_", "clip_range")),
}
#: Policy base class per algorithm (module, class name); the model's policy_class must subclass it.
_ALGO_POLICY = {
    "ppo": ("stable_baselines3.common.policies", "ActorCriticPolicy"),
    "a2c": ("stable_baselines3.common.policies", "ActorCriticPolicy"),
    "sac": ("stable_baselines3.sac.policies", "SACPolicy"),
    "maskable_ppo": ("sb3_contrib.common.maskable.policies", "MaskableActorCriticPolicy"),
}


def _allowed_global(module: str, name: str) -> Any:
    """The object ``module.name`` if a saved SB3 model may reference it, else None."""
    import importlib
    import inspect

    plain = {
        ("builtins", n)
        for n in ("set", "frozenset", "slice", "complex", "range", "bytearray", "dict", "list", "tuple")
    }
    plain |= {("builtins", n) for n in ("float", "int", "bool", "str", "bytes")}
    plain |= {("collections", "deque"), ("collections", "OrderedDict")}
    numpy = {  # arrays, dtypes, scalars and the random generators of gymnasium spaces
        "_reconstruct",
        "_frombuffer",
        "scalar",
        "ndarray",
        "dtype",
        "__generator_ctor",
        "__bit_generator_ctor",
        "__randomstate_ctor",
        "__pyx_unpickle_SeedSequence",
        "SeedSequence",
        "PCG64",
        "PCG64DXSM",
        "MT19937",
        "Philox",
        "SFC64",
    }
    if (module, name) == _BLOCK_EXTRACTOR:  # ainet_gym's one features extractor (train --obs-blocks)
        from ainet_gym.agents.block_features import BlockFeatures

        return BlockFeatures
    if (module, name) == ("builtins", "getattr"):
        return _enum_member  # how some Python 3.11 releases pickle an Enum member (SB3's TrainFrequencyUnit)
    roots = module.split(".")[0]
    ok = (module, name) in plain
    if roots == "numpy":
        ok = name in numpy or module.startswith("numpy.dtypes")
    try:
        obj = getattr(importlib.import_module(module), name) if (ok or roots in _ALLOWED_ROOTS) else None
    except (ImportError, AttributeError):
        return None
    if ok:
        return obj
    if not inspect.isclass(obj) or getattr(obj, "__module__", "").split(".")[0] != roots:
        return None  # only classes defined in the allowed packages (no functions: os.system, eval, ...)
    if roots == "gymnasium":
        from gymnasium.spaces import Space

        return obj if issubclass(obj, Space) else None
    if roots == "torch":
        import torch

        return obj if issubclass(obj, torch.optim.Optimizer | torch.nn.Module) else None
    # stable_baselines3 / sb3_contrib: policies, buffers, schedules, train frequencies, noise
    from enum import Enum

    from stable_baselines3.common.buffers import BaseBuffer
    from stable_baselines3.common.policies import BasePolicy

    safe = (BasePolicy, BaseBuffer, Enum, tuple)
    if issubclass(obj, safe) or name in ("LinearSchedule", "ConstantSchedule", "FloatSchedule"):
        return obj
    return None


_ALLOWED_ROOTS = ("gymnasium", "torch", "stable_baselines3", "sb3_contrib")
#: the features extractor of a model trained with ``--obs-blocks`` (:data:`ainet_gym.agents.block_features.EXTRACTOR_GLOBAL`)
_BLOCK_EXTRACTOR = ("ainet_gym.agents.block_features", "BlockFeatures")


def _enum_member(cls: Any, name: Any) -> Any:
    """``getattr`` as an unpickled Enum member calls it (``getattr(EnumClass, member_name)``, the form of
    some Python 3.11 releases): only a member of an Enum class the allowlist let through, nothing else."""
    import inspect
    import pickle
    from enum import Enum

    if inspect.isclass(cls) and issubclass(cls, Enum) and isinstance(name, str) and name in cls.__members__:
        return cls.__members__[name]
    raise pickle.UnpicklingError(f"getattr({cls!r}, {name!r}) is not a member of an allowed Enum")


def _restricted_loads(blob: bytes, key: str, path: Path) -> Any:
    import io
    import pickle

    class _RestrictedUnpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            obj = _allowed_global(module, name)
            if obj is None:
                raise UntrustedModelError(
                    f"model {str(path)!r}: its {key!r} entry references {module}.{name}, which a model saved "
                    "by ainet-gym train never holds; refusing to unpickle it (loading could run code). "
                    "Load only model files you trust; to load a trusted one anyway, use "
                    "ainet_gym.agents.sb3_agents.load_model(path, trusted=True)"
                )
            return obj

    return _RestrictedUnpickler(io.BytesIO(blob)).load()


def safe_objects(p: Path, algo: str, label: str | None = None) -> dict[str, Any]:
    """Check that ``p`` is an SB3 model of ``algo`` and unpickle its ``data`` entries with an allowlist
    (``label``: how errors name the file, default ``algo:p``).

    Returns the entries as SB3 ``custom_objects``, so that ``cls.load`` unpickles nothing itself (its
    tensors are read with ``torch.load(weights_only=True)``).
    """
    import base64
    import binascii

    def bad(problem: str) -> UntrustedModelError:
        return UntrustedModelError(
            f"{label or f'{algo}:{p}'}: not a {algo} model saved by ainet-gym train or stable-baselines3 "
            f"({problem})"
        )

    with zipfile.ZipFile(p) as z:
        names = z.namelist()
        missing = [m for m in _SB3_MEMBERS if m not in names]
        if missing:
            raise bad(f"missing {', '.join(missing)}")
        if any(n.startswith("/") or ".." in Path(n).parts for n in names):
            raise bad("a member path leaves the archive")
        if z.getinfo("data").file_size > 64 * 2**20:
            raise bad("its data member is larger than 64 MiB")
        try:
            data = json.loads(z.read("data").decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise bad(f"its data member is not JSON: {e}") from None
    if not isinstance(data, dict) or not {"policy_class", "observation_space", "action_space"} <= set(data):
        raise bad("its data member lacks policy_class, observation_space or action_space")
    need, absent = _ALGO_KEYS[algo]
    if any(k not in data for k in need) or any(k in data for k in absent):
        guess = [
            a
            for a, (n, ab) in _ALGO_KEYS.items()
            if all(k in data for k in n) and not any(k in data for k in ab)
        ]
        raise bad(f"its settings are those of {' or '.join(guess) or 'another algorithm'}")
    objects: dict[str, Any] = {}
    for key, item in data.items():
        if isinstance(item, dict) and ":serialized:" in item:
            try:
                blob = base64.b64decode(str(item[":serialized:"]).encode(), validate=True)
            except (binascii.Error, ValueError):
                raise bad(f"entry {key!r} is not base64") from None
            try:
                objects[key] = _restricted_loads(blob, key, p)
            except UntrustedModelError:
                raise
            except Exception as e:  # a truncated or malformed pickle
                raise bad(f"entry {key!r} cannot be read: {type(e).__name__}: {e}") from None
    import importlib

    mod, cls_name = _ALGO_POLICY[algo]
    base = getattr(importlib.import_module(mod), cls_name)
    pc = objects.get("policy_class")
    if not (isinstance(pc, type) and issubclass(pc, base)):
        raise bad(f"its policy class is {getattr(pc, '__qualname__', pc)!r}, not a {cls_name}")
    if algo != "maskable_ppo":
        from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

        if issubclass(pc, MaskableActorCriticPolicy):
            raise bad("its policy class is a MaskableActorCriticPolicy (a maskable_ppo model)")
    return objects
