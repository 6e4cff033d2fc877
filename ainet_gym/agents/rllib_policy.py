"""An RLlib policy network kept as plain weights: exported at save time, rebuilt from this project's code.

RLlib's own checkpoint of a module (``class_and_ctor_args.pkl``, ``module_state.pt``) is pickled, and
loading it runs whatever the pickle names. ``ainet-gym train --framework rllib`` therefore also writes
the policy path of the module (the actor encoder and the action head: every ``Linear`` layer and the
activations between them) as

- ``policy_weights.pt``: the layers' weights and biases, a flat dict of tensors read back with
  ``torch.load(weights_only=True)``;
- ``policy_module`` in ``ainet_gym.json``: the network's constructor arguments as JSON (the layer list,
  the activations, the action kind and sizes), every number range-checked against
  :data:`ainet_gym.agents.model_files.MODEL_LIMITS` before a tensor is allocated.

:class:`PolicyNet` rebuilds the network as a ``torch.nn.Sequential`` and acts as RLlib's module does
deterministically: the mean of the Gaussian for Box actions (then ``unsquash_action``: mapped to the
space's bounds and clipped), the arg-max per slot for MultiDiscrete actions. Loading it needs torch, not
Ray. ``tests/envs/test_rllib.py`` checks that it gives the same actions as RLlib's own module.

Old checkpoints (written before this format) are converted once with ``ainet-gym convert-rllib DIR
--trust-checkpoint``, which loads the pickled module (so the user must trust the folder) and writes the
two files above.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ainet_gym.agents.model_files import MODEL_LIMITS, ModelFileError, load_tensors
from ainet_gym.errors import check_choice

if TYPE_CHECKING:
    import torch

__all__ = [
    "ACTIVATIONS",
    "POLICY_FILE",
    "POLICY_FORMAT",
    "PolicyNet",
    "check_policy_spec",
    "export_policy",
    "load_policy",
    "policy_layers",
]

#: the weights file inside a checkpoint folder.
POLICY_FILE = "policy_weights.pt"
#: ``policy_module["format"]`` of this version.
POLICY_FORMAT = "ainet_gym.rllib-policy/1"
#: activations the rebuilt network knows.
ACTIVATIONS = ("tanh", "relu")


def policy_layers(module: Any) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """The policy path of an RLlib PPO torch module as ``(layers, tensors)``.

    Walks the actor encoder, then the ``pi`` head, in module order, keeping ``Linear`` layers and
    ``Tanh``/``ReLU`` activations (anything else is refused: the rebuilt network would differ).
    ``layers`` is the JSON list (``{"linear": [in, out]}`` or ``{"act": name}``); ``tensors`` maps
    ``"{i}.weight"``/``"{i}.bias"`` (``i``: index in the list) to CPU tensors.

    Raises
    ------
    ValueError
        If the module has another layout (a shared encoder, other layer types).
    """
    import torch

    enc = getattr(module, "encoder", None)
    actor = getattr(enc, "actor_encoder", None)
    pi = getattr(module, "pi", None)
    if actor is None or pi is None:
        raise ValueError("the RLlib module has no separate actor encoder and pi head (vf_share_layers?)")
    layers: list[dict[str, Any]] = []
    tensors: dict[str, torch.Tensor] = {}
    for part in (actor, pi):
        for m in part.modules():
            if isinstance(m, torch.nn.Linear):
                i = len(layers)
                layers.append(
                    {"linear": [int(m.in_features), int(m.out_features)], "bias": m.bias is not None}
                )
                tensors[f"{i}.weight"] = m.weight.detach().cpu().clone()
                if m.bias is not None:
                    tensors[f"{i}.bias"] = m.bias.detach().cpu().clone()
            elif isinstance(m, torch.nn.Tanh):
                layers.append({"act": "tanh"})
            elif isinstance(m, torch.nn.ReLU):
                layers.append({"act": "relu"})
            elif (not list(m.children()) and any(True for _ in m.parameters(recurse=False))) or (
                not list(m.children()) and type(m).__name__ not in ("Identity", "Dropout", "Flatten")
            ):
                raise ValueError(f"the RLlib module has a {type(m).__name__} layer, which cannot be exported")
    return layers, tensors


def export_policy(module: Any, folder: str | os.PathLike) -> dict[str, Any]:
    """Write ``folder/policy_weights.pt`` from an RLlib PPO module; return the ``policy_module`` JSON.

    Raises
    ------
    ValueError
        If the module cannot be exported (:func:`policy_layers`) or its action space is not a Box or a
        MultiDiscrete.
    """
    import torch
    from gymnasium import spaces

    layers, tensors = policy_layers(module)
    space = module.action_space
    if isinstance(space, spaces.MultiDiscrete):
        action = {"kind": "multidiscrete", "nvec": [int(n) for n in np.asarray(space.nvec).ravel()]}
    elif isinstance(space, spaces.Box):
        action = {"kind": "box", "dim": int(np.prod(space.shape))}
    else:
        raise ValueError(f"action space {space}: only Box and MultiDiscrete policies are exported")
    spec = {"format": POLICY_FORMAT, "file": POLICY_FILE, "layers": layers, "action": action}
    check_policy_spec(spec, "export")
    torch.save(tensors, Path(folder) / POLICY_FILE)
    return spec


def _int_in(v: Any, lo: int, hi: int, what: str, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        shown = repr(v) if not isinstance(v, int) or abs(v) < 10**30 else "a very long integer"
        raise ModelFileError(
            f"{what}: policy_module {field} = {shown[:60]}; allowed: an integer in [{lo:,}, {hi:,}]"
        )
    return v


def check_policy_spec(spec: Any, what: str) -> dict[str, Any]:
    """Range-check a ``policy_module`` JSON before anything is built from it; returns it.

    At most ``MODEL_LIMITS["layers_max"]`` hidden layers of at most ``MODEL_LIMITS["width_max"]`` units,
    input and output sizes at most ``MODEL_LIMITS["dim_max"]``, at most ``MODEL_LIMITS["params_max"]``
    parameters, consecutive layers that fit, activations from :data:`ACTIVATIONS`, and an output layer
    that fits the action (``dim`` means of a Box, ``sum(nvec)`` logits of a MultiDiscrete).

    Raises
    ------
    ModelFileError
        Naming ``what`` (the checkpoint), the field and what is allowed.
    """
    if not isinstance(spec, dict):
        raise ModelFileError(f"{what}: policy_module is not a JSON object")
    if spec.get("format") != POLICY_FORMAT:
        raise ModelFileError(
            f"{what}: policy_module format {str(spec.get('format'))[:60]!r}; expected {POLICY_FORMAT!r}"
        )
    layers = spec.get("layers")
    if not isinstance(layers, list) or not layers or len(layers) > 4 * MODEL_LIMITS["layers_max"] + 2:
        raise ModelFileError(
            f"{what}: policy_module layers: expected a non-empty list of at most a few dozen layers"
        )
    linear = [x for x in layers if isinstance(x, dict) and "linear" in x]
    if not 1 <= len(linear) <= MODEL_LIMITS["layers_max"] + 1:
        raise ModelFileError(
            f"{what}: policy_module has {len(linear)} linear layers; allowed: 1 to {MODEL_LIMITS['layers_max'] + 1}"
        )
    dmax, wmax = MODEL_LIMITS["dim_max"], MODEL_LIMITS["width_max"]
    params, prev = 0, None
    for i, x in enumerate(layers):
        if not isinstance(x, dict) or not (set(x) == {"act"} or set(x) <= {"linear", "bias"}):
            raise ModelFileError(
                f"{what}: policy_module layers[{i}]: expected {{linear: [in, out]}} or {{act: name}}"
            )
        if "act" in x:
            check_choice(
                f"{what}: policy_module layers[{i}].act", x["act"], ACTIVATIONS, error=ModelFileError
            )
            continue
        io = x["linear"]
        if not isinstance(io, list) or len(io) != 2:
            raise ModelFileError(f"{what}: policy_module layers[{i}].linear: expected [in, out]")
        first, last = x is linear[0], x is linear[-1]
        n_in = _int_in(io[0], 1, dmax if first else wmax, what, f"layers[{i}].linear[0]")
        n_out = _int_in(io[1], 1, dmax if last else wmax, what, f"layers[{i}].linear[1]")
        if not isinstance(x.get("bias", True), bool):
            raise ModelFileError(f"{what}: policy_module layers[{i}].bias: expected true or false")
        if prev is not None and n_in != prev:
            raise ModelFileError(
                f"{what}: policy_module layers[{i}] takes {n_in} inputs, the layer before gives {prev}"
            )
        prev = n_out
        params += n_in * n_out + n_out
        if params > MODEL_LIMITS["params_max"]:
            raise ModelFileError(
                f"{what}: policy_module has more than {MODEL_LIMITS['params_max']:,} parameters "
                "(ainet_gym.agents.model_files.MODEL_LIMITS['params_max'])"
            )
    action = spec.get("action")
    if not isinstance(action, dict) or action.get("kind") not in ("box", "multidiscrete"):
        raise ModelFileError(
            f"{what}: policy_module action: expected {{kind: box, dim}} or {{kind: multidiscrete, nvec}}"
        )
    if action["kind"] == "box":
        want = _int_in(action.get("dim"), 1, dmax, what, "action.dim")
    else:
        nvec = action.get("nvec")
        if not isinstance(nvec, list) or not 1 <= len(nvec) <= dmax:
            raise ModelFileError(
                f"{what}: policy_module action.nvec: expected a list of 1 to {dmax:,} counts"
            )
        want = sum(_int_in(n, 1, dmax, what, "action.nvec[]") for n in nvec)
    if prev != want:
        raise ModelFileError(
            f"{what}: policy_module's last layer gives {prev} outputs; its action needs {want}"
        )
    return spec


class PolicyNet:
    """The rebuilt policy network of an RLlib checkpoint (``torch.nn.Sequential``) and its deterministic
    action."""

    def __init__(self, spec: dict[str, Any], tensors: dict[str, Any], what: str) -> None:
        import torch

        check_policy_spec(spec, what)
        mods: list[torch.nn.Module] = []
        state: dict[str, torch.Tensor] = {}
        for i, x in enumerate(spec["layers"]):
            if "act" in x:
                mods.append(torch.nn.Tanh() if x["act"] == "tanh" else torch.nn.ReLU())
                continue
            n_in, n_out = x["linear"]
            bias = bool(x.get("bias", True))
            mods.append(torch.nn.Linear(n_in, n_out, bias=bias))
            for name in ("weight", "bias") if bias else ("weight",):
                state[f"{len(mods) - 1}.{name}"] = (
                    tensors.get(f"{i}.{name}") if isinstance(tensors, dict) else None
                )
        self.net = torch.nn.Sequential(*mods)
        want = dict(self.net.state_dict())
        for k, ref in want.items():
            t = state.get(k)
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(ref.shape):
                shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ModelFileError(
                    f"{what}: {POLICY_FILE}: tensor {k} is {shape}, expected {tuple(ref.shape)}"
                )
            state[k] = t.to(torch.float32)
        extra = set(tensors) - {f"{i}.{n}" for i in range(len(spec["layers"])) for n in ("weight", "bias")}
        if extra:
            raise ModelFileError(f"{what}: {POLICY_FILE}: unexpected tensors {sorted(extra)[:3]}")
        self.net.load_state_dict(state)
        self.net.eval()
        self.action = spec["action"]
        self._torch = torch

    @property
    def obs_dim(self) -> int:
        """Inputs of the first layer."""
        return int(next(m for m in self.net if isinstance(m, self._torch.nn.Linear)).in_features)

    def dist_inputs(self, obs: np.ndarray) -> np.ndarray:
        """The network's output for a batch of flat observations ``(batch, obs_dim)``: the Gaussian means
        (Box) or the concatenated logits (MultiDiscrete)."""
        torch = self._torch
        with torch.no_grad():
            return self.net(torch.as_tensor(np.asarray(obs), dtype=torch.float32)).numpy()

    def act(self, obs: np.ndarray, space: Any) -> np.ndarray:
        """Deterministic actions for ``obs`` in ``space`` (the env's action space), as RLlib's env runner
        maps its module's ``to_deterministic()`` sample: Box means mapped from [-1, 1] to the bounds and
        clipped (``unsquash_action``); MultiDiscrete arg-max per slot, shifted by ``space.start``."""
        out = self.dist_inputs(obs)
        if self.action["kind"] == "box":
            low = np.asarray(space.low, dtype=np.float64)
            high = np.asarray(space.high, dtype=np.float64)
            a = out.reshape(out.shape[0], *space.shape).astype(np.float64)
            a = low + (a + 1.0) * (high - low) / 2.0
            return np.clip(a, low, high).astype(space.dtype)
        nvec = self.action["nvec"]
        cuts = np.cumsum(nvec)[:-1]
        idx = np.stack([np.argmax(part, axis=-1) for part in np.split(out, cuts, axis=-1)], axis=-1)
        start = np.asarray(getattr(space, "start", 0)).ravel()
        return (idx + start).reshape(out.shape[0], *space.shape).astype(np.int64)


def load_policy(folder: str | os.PathLike, meta: dict[str, Any], what: str) -> PolicyNet:
    """The :class:`PolicyNet` of a checkpoint folder whose ``ainet_gym.json`` is ``meta``: only JSON and
    tensors are read.

    Raises
    ------
    ModelFileError
        If ``meta`` has no ``policy_module`` (an old checkpoint: the message gives the conversion command),
        or the spec or the weights are refused.
    """
    spec = meta.get("policy_module")
    if spec is None:
        raise ModelFileError(
            f"{what}: written before ainet-gym kept the policy as plain weights; its RLlib files are pickles "
            f"and are not loaded. If you trust the folder, convert it once: ainet-gym convert-rllib "
            f"{folder} --trust-checkpoint"
        )
    check_policy_spec(spec, what)
    tensors = load_tensors(Path(folder) / POLICY_FILE, f"{what}: {POLICY_FILE}")
    if not isinstance(tensors, dict) or not all(isinstance(k, str) for k in tensors):
        raise ModelFileError(f"{what}: {POLICY_FILE} is not a dict of named tensors")
    return PolicyNet(spec, tensors, what)
