"""Learning agents from stable-baselines3 (and sb3-contrib): algorithms, defaults, saving and loading.

=================  =====================================  ==============================================
algorithm          action modes                           default mode
=================  =====================================  ==============================================
``ppo``            split, path, ecmp_weights, split_bg    split
``a2c``            split, path, ecmp_weights, split_bg    split
``sac``            split, ecmp_weights, split_bg          split (continuous actions only)
``maskable_ppo``   path                                   path (invalid path indices masked)
=================  =====================================  ==============================================

A saved model is SB3's ``.zip`` with one extra member, ``ainet_gym.json``: the algorithm, the env
arguments it was trained with (action mode, history, observation, reward), the scenario and the
observation and action shapes. SB3 ignores the member; :func:`load_model` reads it to rebuild the env
the model acts in and to reject a scenario that does not fit the model.

Trust: a model file holds pickled Python objects, and unpickling a crafted file can run code.
:func:`load_model` checks that the file is an SB3 model of the expected algorithm and unpickles its
entries with an allowlist of classes before SB3 sees it, but load only model files you trust.
"""

from __future__ import annotations

import json
import os
import pickle
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.model_files import (
    MODEL_LIMITS,
    ModelFileError,
    ModelNotFoundError,
    UntrustedModelError,
    check_size,
    meta_int,
)
from ainet_gym.agents.registry import register_agent
from ainet_gym.errors import check_choice, names_message

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

    from ainet_gym.envs.env import EnvCore

__all__ = [
    "ALGO_MODES",
    "META_MEMBER",
    "SB3Agent",
    "UntrustedModelError",
    "algo_class",
    "default_hyperparameters",
    "load_model",
    "meta_extra_plans",
    "meta_history",
    "meta_obs_features",
    "meta_residual",
    "read_metadata",
    "resolve_action_mode",
    "save_model",
    "space_signature",
]

#: allowed action modes per algorithm; the first is the default.
ALGO_MODES: dict[str, tuple[str, ...]] = {
    "ppo": ("split", "path", "ecmp_weights", "split_bg", "choose", "choose_bg"),
    "a2c": ("split", "path", "ecmp_weights", "split_bg", "choose", "choose_bg"),
    "sac": ("split", "ecmp_weights", "split_bg"),
    "maskable_ppo": ("path",),
}
META_MEMBER = "ainet_gym.json"


def algo_class(algo: str) -> type[BaseAlgorithm]:
    """The SB3 class of ``algo`` (imported lazily).

    Raises
    ------
    ValueError
        If ``algo`` is unknown.
    ImportError
        If stable-baselines3 (or sb3-contrib for ``maskable_ppo``) is not installed.
    """
    check_choice("algo", algo, ALGO_MODES)
    try:
        if algo == "maskable_ppo":
            from sb3_contrib import MaskablePPO

            return MaskablePPO
        import stable_baselines3 as sb3
    except ImportError as e:
        raise ImportError(f"the {algo} agent needs the rl extra: pip install 'ainet-gym[rl]' ({e})") from e
    return {"ppo": sb3.PPO, "a2c": sb3.A2C, "sac": sb3.SAC}[algo]


def resolve_action_mode(algo: str, action_mode: str | None) -> str:
    """``action_mode`` checked against ``algo`` (its default when None).

    Raises
    ------
    ValueError
        If the algorithm cannot act in that mode.
    """
    check_choice("algo", algo, ALGO_MODES)
    modes = ALGO_MODES[algo]
    if action_mode is None:
        return modes[0]
    if action_mode not in modes:
        raise ValueError(f"action_mode = {action_mode!r}: {algo} supports {', '.join(modes)}")
    return action_mode


def default_hyperparameters(algo: str, episode_steps: int, n_envs: int) -> dict[str, Any]:
    """Constructor arguments of ``algo`` tuned for the fabric envs (small MLPs, short rollouts).

    On-policy algorithms collect one episode per env per update (``n_steps = episode_steps``), so a
    rollout sees the whole periodic pattern of a scenario and updates are frequent. ``gamma`` is short
    (0.9): routing pays off within a few intervals. PPO's learning rate decays linearly from 3e-4 to
    3e-5: with hundreds of action dimensions, late updates otherwise make the deterministic policy
    drift (measured: spine-leaf-2to1 0.510 -> 0.524 GPU utilisation, periodic-interference 0.650 ->
    0.656, 40-60k steps).
    """
    from stable_baselines3.common.utils import LinearSchedule

    net = [128, 128]
    if algo in ("ppo", "maskable_ppo"):
        n_steps = max(episode_steps, 16)
        rollout = n_steps * n_envs
        batch = max(d for d in range(1, min(256, rollout) + 1) if rollout % d == 0)
        return {
            "n_steps": n_steps,
            "batch_size": batch,
            "n_epochs": 10,
            "learning_rate": LinearSchedule(3e-4, 3e-5, 1.0),
            "gamma": 0.9,
            "gae_lambda": 0.9,
            "clip_range": 0.2,
            "ent_coef": 0.0,
            "policy_kwargs": {"net_arch": {"pi": net, "vf": net}}
            | ({"log_std_init": -1.0} if algo == "ppo" else {}),
        }
    if algo == "a2c":
        return {
            "n_steps": 8,
            "learning_rate": 7e-4,
            "gamma": 0.9,
            "policy_kwargs": {"net_arch": {"pi": net, "vf": net}, "log_std_init": -1.0},
        }
    return {  # sac
        "learning_rate": 3e-4,
        "buffer_size": 50_000,
        "learning_starts": 1_000,
        "batch_size": 256,
        "gamma": 0.9,
        "train_freq": 1,
        "gradient_steps": 1,
        "policy_kwargs": {"net_arch": net},
    }


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


def meta_residual(meta: dict[str, Any], what: str) -> dict[str, Any]:
    """The env keywords of a residual policy's metadata (``residual``, ``residual_scale``; empty for
    others), checked: the base must be a known routing and the scale a number in (0, 10].

    Raises
    ------
    ValueError
        Naming the file and the bad value.
    """
    from ainet_gym.routing.policies import POLICIES

    base = meta.get("residual")
    if base is None:
        return {}
    if not isinstance(base, str) or base not in POLICIES:
        raise ValueError(f"{what}: metadata residual = {base!r}: not a routing policy of this version")
    scale = meta.get("residual_scale")
    out: dict[str, Any] = {"residual": base}
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not 0 < scale <= 10:
            raise ValueError(f"{what}: metadata residual_scale = {scale!r}: allowed: a number in (0, 10]")
        out["residual_scale"] = float(scale)
    return out


def meta_obs_features(meta: dict[str, Any], what: str) -> dict[str, Any]:
    """The env keyword ``obs_features`` of a model's metadata (empty for a model trained without optional
    observation blocks), checked against :data:`ainet_gym.envs.env.OBS_FEATURE_BLOCKS`.

    Raises
    ------
    ValueError
        Naming the file and the bad value.
    """
    from ainet_gym.envs.env import OBS_FEATURE_BLOCKS

    feats = meta.get("obs_features")
    if not feats:
        return {}
    if not isinstance(feats, list | tuple):
        raise ValueError(
            f"{what}: metadata obs_features = {feats!r}: allowed: a list of {', '.join(OBS_FEATURE_BLOCKS)}"
        )
    if any(f not in OBS_FEATURE_BLOCKS for f in feats):
        raise ValueError(names_message(f"{what}: metadata obs_features", feats, OBS_FEATURE_BLOCKS))
    return {"obs_features": tuple(feats)}


def meta_extra_plans(meta: dict[str, Any], what: str) -> dict[str, Any]:
    """The env keyword ``extra_plans`` of a model's metadata (a ``choose`` mode's plans past its own, e.g. the
    isolating plans; empty without them), checked: a list of plans of
    :data:`ainet_gym.routing.plans.EXTRA_PLANS` or weighted plans.

    Raises
    ------
    ValueError
        Naming the file and the bad value.
    """
    from ainet_gym.routing.plans import is_extra_plan

    extra = meta.get("extra_plans")
    if not extra:
        return {}
    try:
        ok = isinstance(extra, list | tuple) and all(isinstance(p, str) and is_extra_plan(p) for p in extra)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{what}: metadata extra_plans = {extra!r}: allowed: a list of extra plans")
    return {"extra_plans": tuple(extra)}


def meta_history(meta: dict[str, Any], what: str) -> int:
    """The ``history`` a model's metadata asks the env for (default 4), range-checked against
    ``LIMITS["history_max"]`` (:data:`ainet_gym.scenario.loader.LIMITS`, the env's own ceiling).

    Raises
    ------
    ModelFileError
        If it is not an integer in ``[1, LIMITS["history_max"]]``.
    """
    from ainet_gym.scenario.loader import LIMITS

    return meta_int(meta, "history", what, 1, int(LIMITS["history_max"]), default=4)


def _signature_of_model(model: BaseAlgorithm) -> tuple[dict, dict]:
    return space_signature(model.observation_space), space_signature(model.action_space)


class SB3Agent:
    """A trained SB3 model acting through the env's action space (deterministic actions).

    The env it needs (action mode, history, observation) comes from the model's metadata; without
    metadata the action mode is inferred from the action space (MultiDiscrete: path, else split).
    """

    level = "action"

    def __init__(self, path: str | os.PathLike, algo: str | None = None) -> None:
        self.path = Path(path)
        self.model, self.meta = load_model(path, algo)
        self.algo = self.meta["algo"]
        self.name = self.algo
        from gymnasium import spaces

        mode = self.meta.get("action_mode")
        if mode is None:
            mode = "path" if isinstance(self.model.action_space, spaces.MultiDiscrete) else "split"
        self.env_kwargs: dict[str, Any] = {
            "action_mode": mode,
            "history": meta_history(self.meta, f"{self.algo}:{path}"),
            "observation": self.meta.get("observation", "flat"),
            **meta_residual(self.meta, f"{self.algo}:{path}"),
            **meta_obs_features(self.meta, f"{self.algo}:{path}"),
            **meta_extra_plans(self.meta, f"{self.algo}:{path}"),
        }

    def check(self, core: EnvCore) -> None:
        got = (space_signature(core.observation_space), space_signature(core.action_space))
        check_fit("model", self.path, self.meta, core.scenario.name, _signature_of_model(self.model), got)

    def reset(self, core: EnvCore) -> None:
        return None

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        kw: dict[str, Any] = {"deterministic": True}
        if self.algo == "maskable_ppo":
            kw["action_masks"] = core.action_masks()
        actions, _ = self.model.predict(obs, **kw)
        return np.asarray(actions)


for _algo in ALGO_MODES:
    register_agent(
        _algo,
        (lambda a: lambda path: SB3Agent(path, a))(_algo),
        needs_arg=True,
        arg_help="PATH",
        description=f"a trained {_algo} model (ainet-gym train --algo {_algo})",
        overwrite=True,
    )
