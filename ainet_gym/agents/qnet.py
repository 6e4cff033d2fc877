"""A value-regression imitation of the lookahead: a small MLP from the observation to every plan's value.

The k-NN value vote (:class:`ainet_gym.agents.imitate.KnnAgent`, ``--vote value``) averages the lookahead
values (:func:`~ainet_gym.agents.imitate.knn_values`) of the ``k`` labelled decisions nearest in an observation
block. :func:`fit_qnet` instead fits a multilayer perceptron (ReLU hidden layers, torch) regressing those
values, centred per decision (each row minus its mean over the plans: only the differences between plans
decide), from the standardised columns of the chosen blocks; :class:`QnetAgent` (``qnet:PATH`` in
``evaluate``; ``imitate label --policy PATH`` for DAgger) plays the plan of the highest predicted value, a
forward pass in numpy (no torch needed to play). Command line::

    python -m ainet_gym.agents.imitate qfit train.npz,dagger1.npz --value-weight 10 --hidden 64,64 --out q.npz

The file is a plain .npz read with ``np.load(allow_pickle=False)``, every field checked (:func:`load_qnet`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "QNET_FIELDS",
    "QNET_MAX_LAYERS",
    "QNET_OPTIONAL",
    "QnetAgent",
    "fit_qnet",
    "load_qnet",
    "qnet_forward",
]

#: the fixed arrays of a qnet policy file (:func:`fit_qnet`): name -> (dimensions, dtype kinds allowed);
#: beside them ``w0``, ``b0``, ..., ``w{L-1}``, ``b{L-1}`` for the ``layers`` = L affine layers
QNET_FIELDS: dict[str, tuple[int, str]] = {
    "layers": (0, "iu"),  # affine layers (hidden layers + 1)
    "mean": (1, "f"),  # (D,) each input column's mean over the labels
    "scale": (1, "f"),  # (D,) its standard deviation (1 where 0)
    "target_scale": (0, "f"),  # the network's outputs times this are the centred values
    "value_weight": (0, "f"),  # the W of knn_values the targets were made with
    "block": (0, "U"),  # the observation blocks the inputs are taken from (comma list)
    "meta": (1, "U"),  # scenario, action mode, obs features, history, steps, ... (lookahead_labels)
    "plans": (1, "U"),  # the plans of the action mode, in index order (the outputs)
}
#: the optional field of a qnet policy file: ``fabric``, the fingerprint of the fabric its labels were made on
#: (the labels' own field, :data:`~ainet_gym.agents.model_files.FABRIC_FIELD`; issue-26zh2): ``qnet:PATH`` and
#: DAgger's ``--policy`` refuse to play it on a scenario of another fabric. A file without it (every older file,
#: or one fitted on labels without it) is played on any fabric, unchecked
QNET_OPTIONAL: dict[str, tuple[int, str]] = {"fabric": (0, "U")}
#: at most this many affine layers in a file
QNET_MAX_LAYERS = 8
#: the optional member with the metadata record (a JSON object), as a knn file's
QNET_META = "ainet_gym.json"


def _parse_hidden(hidden: str | tuple[int, ...] | list[int]) -> tuple[int, ...]:
    if isinstance(hidden, str):
        try:
            sizes = tuple(int(h) for h in hidden.split(",") if h.strip())
        except ValueError:
            sizes = ()
            hidden_bad = True
        else:
            hidden_bad = False
    else:
        sizes, hidden_bad = tuple(int(h) for h in hidden), False
    if hidden_bad or not sizes or len(sizes) >= QNET_MAX_LAYERS or any(h < 1 for h in sizes):
        raise ValueError(
            f"hidden = {hidden!r}: allowed: 1 to {QNET_MAX_LAYERS - 1} hidden layer widths >= 1, comma "
            "separated (e.g. 64,64)"
        )
    return sizes


def qnet_forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    """(B, K) the network's outputs for standardised inputs ``x`` (B, D): ReLU after every affine layer but
    the last."""
    h = np.asarray(x, dtype=np.float64)
    for i, (w, b) in enumerate(layers):
        h = h @ w + b
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def _train_mlp(
    xs: np.ndarray, y: np.ndarray, sizes: tuple[int, ...], epochs: int, seed: int, batch_size: int, lr: float
) -> tuple[list[tuple[np.ndarray, np.ndarray]], float]:
    """Fit a ReLU MLP of hidden ``sizes`` from ``xs`` to ``y`` (float64) by mean squared error with Adam,
    ``epochs`` shuffled passes in batches of ``batch_size``, on one torch thread, deterministic given ``seed``;
    the layers as (weight (in, out), bias) pairs and the last epoch's mean loss."""
    import torch

    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        dims = [xs.shape[1], *sizes, y.shape[1]]
        mods: list[Any] = []
        for i in range(len(dims) - 1):
            mods.append(torch.nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2:
                mods.append(torch.nn.ReLU())
        net = torch.nn.Sequential(*mods).double()
        opt = torch.optim.Adam(net.parameters(), lr=lr)
        xt, yt = torch.from_numpy(xs), torch.from_numpy(y)
        gen = torch.Generator().manual_seed(seed)
        n = xt.shape[0]
        loss_v = float("nan")
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen)
            total = 0.0
            for s in range(0, n, batch_size):
                idx = perm[s : s + batch_size]
                loss = torch.nn.functional.mse_loss(net(xt[idx]), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
            loss_v = total / n
        linears = [m for m in net if isinstance(m, torch.nn.Linear)]
        layers = [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy()) for m in linears]
    finally:
        torch.set_num_threads(threads)
    return layers, loss_v


def fit_qnet(
    labels: dict[str, Any],
    out: str | Path,
    block: str = "job_phase",
    value_weight: float | None = None,
    hidden: str | tuple[int, ...] = (64, 64),
    epochs: int = 40,
    seed: int = 0,
    batch_size: int = 256,
    lr: float = 1e-3,
    scenario: Any = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit the MLP of ``labels`` (:func:`~ainet_gym.agents.imitate.lookahead_labels`) and save it to ``out``
    (.npz). Targets: :func:`~ainet_gym.agents.imitate.knn_values` (``value_weight`` ``W``: ``scores - W *
    excess``), each row minus its mean over the plans, divided by their overall standard deviation (field
    ``target_scale``); inputs: the columns of ``block`` (a comma list of observation blocks,
    :func:`~ainet_gym.agents.imitate.knn_columns`), standardised by their mean and standard deviation over the
    labels (fields ``mean``, ``scale``). Mean squared error, Adam (``lr``), ``epochs`` passes in shuffled
    batches of ``batch_size``; deterministic given ``seed`` (one torch thread). Returns a summary: the file,
    the final training loss, the share of decisions whose predicted best plan is the best by value and the mean
    regret (value of the best plan minus that of the predicted one, in the values' units). Labels with a fabric
    fingerprint (``fabric``) must have been made on the fabric of the scenario the layout is read from, and the
    file carries it (:data:`QNET_OPTIONAL`).

    Raises
    ------
    ValueError
        If ``hidden``, ``epochs``, ``batch_size`` or ``lr`` is out of range, the block is not one of the env's,
        the labels' fabric fingerprint is not the scenario's fabric's, or the value weight is refused by
        :func:`~ainet_gym.agents.imitate.knn_values`.
    """
    sizes = _parse_hidden(hidden)
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs = {epochs!r}: allowed: an integer >= 1")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size = {batch_size!r}: allowed: an integer >= 1")
    if not np.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr = {lr!r}: allowed: a finite number > 0")
    x, mean, scale = _qnet_inputs(labels, block, scenario)  # the block checked before the value weight
    values, y, t_scale, w = _qnet_targets(labels, value_weight)
    xs = (x - mean) / scale
    layers, loss_v = _train_mlp(xs, y / t_scale, sizes, epochs, seed, batch_size, lr)
    arrays: dict[str, Any] = {}
    for i, (wi, bi) in enumerate(layers):
        arrays[f"w{i}"], arrays[f"b{i}"] = wi, bi
    p = Path(out)
    np.savez_compressed(
        p,
        layers=np.int64(len(layers)),
        mean=mean,
        scale=scale,
        target_scale=np.float64(t_scale),
        value_weight=np.float64(w),
        block=np.array(block),
        meta=labels["meta"],
        plans=labels["plans"],
        seeds=np.unique(labels["seed"]) if "seed" in labels else np.zeros(0, dtype=np.int64),
        **({"fabric": np.array(str(labels["fabric"]))} if "fabric" in labels else {}),
        **arrays,
        **({} if metadata is None else {QNET_META: np.array(json.dumps(metadata, indent=1))}),
    )
    pred = np.argmax(qnet_forward(layers, xs), axis=1)
    rows = np.arange(len(pred))
    return {
        "file": str(p if p.suffix == ".npz" else p.with_name(p.name + ".npz")),
        "decisions": len(pred),
        "inputs": int(x.shape[1]),
        "loss": loss_v,
        "best_by_value": float((values[rows, pred] >= -1e-12).mean()),
        "regret": float(-values[rows, pred].mean()),
        "plays": {str(k): int(c) for k, c in zip(labels["plans"], np.bincount(pred, minlength=y.shape[1]))},
    }


def _qnet_targets(
    labels: dict[str, Any], value_weight: float | None
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """:func:`fit_qnet`'s targets: the plans' values (:func:`~ainet_gym.agents.imitate.knn_values` with the
    value weight, by default the labels' tail weight under the "tail" objective, else 0), each row minus its
    mean, and their standard deviation (1 when 0); (values, centred values, scale, value weight)."""
    from ainet_gym.agents.imitate import knn_values

    meta = [str(v) for v in labels["meta"]]
    w = value_weight
    if w is None:  # knn_values's default: the labels' tail weight under the "tail" objective, else 0
        w = float(meta[9]) if len(meta) > 9 and meta[7] == "tail" else 0.0
    values = knn_values(labels, float(w)).astype(np.float64)  # (N, K) <= 0
    y = values - values.mean(axis=1, keepdims=True)
    return values, y, float(y.std()) or 1.0, float(w)


def _qnet_inputs(
    labels: dict[str, Any], block: str, scenario: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`fit_qnet`'s inputs: the columns of ``block`` in the labels' observations (the layout of the env
    the labels name, or of ``scenario``), their means and standard deviations (1 where 0); (x, mean, scale).
    Labels with a fabric fingerprint must have been made on that env's fabric (a ValueError otherwise, at the
    fit rather than at the first play, as ``imitate knn``)."""
    from ainet_gym.agents.imitate import knn_columns
    from ainet_gym.agents.imitate.label_files import FABRIC_FIELD, check_fabric
    from ainet_gym.envs.env import EnvCore

    name, mode, feats, history, steps = (str(x) for x in labels["meta"][:5])
    core = EnvCore(
        name if scenario is None else scenario, action_mode=mode, history=int(history),
        episode_steps=int(steps), obs_features=tuple(f for f in feats.split(",") if f),
    )  # fmt: skip
    recorded = str(labels[FABRIC_FIELD]) if FABRIC_FIELD in labels else None
    check_fabric(f"labels of scenario {name!r} fitted on {scenario or name!r}", recorded, core.fabric)
    cols = knn_columns(core.obs_layout, block)
    x = np.asarray(labels["obs"], dtype=np.float64)[:, cols]
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[~(scale > 0)] = 1.0
    return x, mean, scale


def _bad(what: str, msg: str) -> Exception:
    from ainet_gym.agents.model_files import ModelFileError

    return ModelFileError(f"{what}: {msg}")


def _read(p: Path, what: str) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The qnet fields, the layers (``w0``, ``b0``, ...) and the optional :data:`QNET_META` member of ``p``
    (:func:`~ainet_gym.agents.model_files.read_npz_members`)."""
    from ainet_gym.agents.model_files import read_npz_members

    holds = f"a qnet policy holds {', '.join(QNET_FIELDS)} and w0, b0, ... (python -m ainet_gym.agents.imitate qfit)"
    arrays = read_npz_members(
        p, what, QNET_FIELDS, holds,
        lambda f: f in QNET_FIELDS or f in QNET_OPTIONAL or f == QNET_META or (f[:1] in "wb" and f[1:].isdigit()),
    )  # fmt: skip
    return arrays, arrays.pop(QNET_META, None)


def _checked_layers(arrays: dict[str, np.ndarray], width: int, plans: int, what: str) -> list[tuple]:
    n = int(arrays["layers"])
    if not 1 <= n <= QNET_MAX_LAYERS:
        raise _bad(what, f"field 'layers' = {n}; allowed: 1..{QNET_MAX_LAYERS} (affine layers)")
    layers, d_in = [], width
    for i in range(n):
        w, b = arrays.get(f"w{i}"), arrays.get(f"b{i}")
        if w is None or b is None:
            raise _bad(what, f"no field {'w' if w is None else 'b'}{i}; allowed: w0, b0, ... for {n} layers")
        d_out = plans if i == n - 1 else (w.shape[1] if w.ndim == 2 else -1)
        if w.ndim != 2 or w.dtype.kind != "f" or w.shape[0] != d_in or w.shape[1] != d_out or d_out < 1:
            raise _bad(
                what,
                f"field 'w{i}' is a {w.ndim}-d {w.dtype} array of shape {w.shape}; allowed: float of shape "
                f"({d_in}, {'K = ' + str(plans) if i == n - 1 else 'H >= 1'})",
            )
        if b.ndim != 1 or b.dtype.kind != "f" or b.shape[0] != d_out:
            raise _bad(
                what,
                f"field 'b{i}' is a {b.ndim}-d {b.dtype} array of shape {b.shape}; allowed: float of shape "
                f"({d_out},)",
            )
        if not (np.isfinite(w).all() and np.isfinite(b).all()):
            raise _bad(what, f"field 'w{i}' or 'b{i}' holds non-finite values; allowed: finite")
        layers.append((w.astype(np.float64), b.astype(np.float64)))
        d_in = d_out
    return layers


def load_qnet(path: str | Path) -> dict[str, Any]:
    """The checked arrays of a qnet policy file (:func:`fit_qnet`): ``layers`` (list of (weights, bias)
    float64), ``mean``, ``scale``, ``target_scale``, ``value_weight``, ``block``, ``meta`` and ``plans``
    (lists of str), ``metadata`` (the JSON member, ``{}`` without one), ``fabric`` (the fingerprint of the fabric
    its labels were made on, None without one: :data:`QNET_OPTIONAL`).

    Raises
    ------
    ModelNotFoundError
        If ``path`` does not exist.
    ModelFileError
        Naming the file, the field, what it holds and what is allowed.
    """
    from ainet_gym.agents.model_files import check_size, existing, json_member

    what = f"qnet policy {str(path)!r}"
    p = existing(path, what)
    check_size(p, what)
    arrays, extra = _read(p, what)
    for f, (ndim, kinds) in QNET_FIELDS.items():
        a = arrays[f]
        if a.ndim != ndim or a.dtype.kind not in kinds:
            raise _bad(
                what,
                f"field {f!r} is a {a.ndim}-d {a.dtype} array; allowed: {ndim}-d of dtype kind {' or '.join(kinds)}",
            )
    plans, meta = [str(v) for v in arrays["plans"]], [str(v) for v in arrays["meta"]]
    if not plans:
        raise _bad(what, "field 'plans' is empty; allowed: the plans of a choose mode")
    if len(meta) < 5 or not meta[3].isdigit() or not meta[4].isdigit():
        raise _bad(
            what,
            f"field 'meta' = {meta[:5]}; allowed: [scenario, action mode, obs features, history, steps, ...] "
            "with integer history and steps",
        )
    mean, scale = arrays["mean"], arrays["scale"]
    if mean.shape != scale.shape or mean.shape[0] < 1:
        raise _bad(
            what,
            f"fields 'mean' {mean.shape} and 'scale' {scale.shape}; allowed: the same shape (D,), D >= 1",
        )
    if not np.isfinite(mean).all():
        raise _bad(what, "field 'mean' holds non-finite values; allowed: finite")
    if not np.isfinite(scale).all() or (scale <= 0).any():
        raise _bad(what, "field 'scale' holds non-finite or non-positive values; allowed: finite, > 0")
    for f in ("target_scale", "value_weight"):
        v = float(arrays[f])
        if not np.isfinite(v) or v < 0 or (f == "target_scale" and v == 0):
            allowed = "a finite number > 0" if f == "target_scale" else "a finite number >= 0"
            raise _bad(what, f"field {f!r} = {v!r}; allowed: {allowed}")
    layers = _checked_layers(arrays, mean.shape[0], len(plans), what)
    from ainet_gym.agents.model_files import checked_fabric

    return {
        "layers": layers,
        "mean": mean.astype(np.float64),
        "scale": scale.astype(np.float64),
        "target_scale": float(arrays["target_scale"]),
        "value_weight": float(arrays["value_weight"]),
        "block": str(arrays["block"]),
        "meta": meta,
        "plans": plans,
        "metadata": json_member(extra, QNET_META, what),
        "fabric": checked_fabric(arrays.get("fabric"), what),
    }


class QnetAgent:
    """``qnet:PATH``: the value-regression imitation of the lookahead saved by :func:`fit_qnet`, acting in the
    ``choose`` mode of its labels with their ``obs_features`` (class of the mode's plans): the plan of the
    highest predicted value. A learned policy: it reads only the observation."""

    level = "action"
    learned = True

    def __init__(self, path: str) -> None:
        z = load_qnet(path)
        self.layers, self.mean, self.scale = z["layers"], z["mean"], z["scale"]
        self.target_scale, self.block, self.plans = z["target_scale"], z["block"], z["plans"]
        self.meta = z["metadata"]
        self.fabric = z["fabric"]  # the labels' fabric fingerprint; None: not known, not checked
        self.path = path
        self.scenario = z["meta"][0]
        self.name = "qnet"
        feats = tuple(f for f in z["meta"][2].split(",") if f)
        self.env_kwargs: dict[str, Any] = {"action_mode": z["meta"][1], "history": int(z["meta"][3])}
        if feats:
            self.env_kwargs["obs_features"] = feats
        from ainet_gym.agents.imitate import extra_plans_of

        extra = extra_plans_of(z["meta"][1], list(self.plans))
        if extra:
            self.env_kwargs["extra_plans"] = extra

    def check(self, core: Any) -> None:
        from ainet_gym.agents.imitate import check_plan_model
        from ainet_gym.agents.imitate.label_files import check_fabric

        label = f"qnet:{self.path}"
        check_plan_model(core, label, "fitted", self.scenario, self.plans, self.block, "mean", self.mean)
        check_fabric(label, self.fabric, getattr(core, "fabric", None))

    def reset(self, core: Any) -> None:
        return None

    def values(self, core: Any, obs: Any) -> np.ndarray:
        """(batch, K) the predicted centred value of every plan (in the units of the labels' values)."""
        from ainet_gym.agents.imitate import knn_columns

        x = np.asarray(obs, dtype=np.float64)[:, knn_columns(core.obs_layout, self.block)]
        return qnet_forward(self.layers, (x - self.mean) / self.scale) * self.target_scale

    def act(self, core: Any, obs: Any) -> np.ndarray:
        """(batch,) the plan of the highest predicted value (ties: the lower plan index)."""
        return np.argmax(self.values(core, obs), axis=1).astype(np.int64)


def is_qnet_file(path: str | Path) -> bool:
    """Whether the .npz ``path`` is a qnet policy file (it holds a ``layers`` member), not a knn one."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            return "layers.npy" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def _register() -> None:
    from ainet_gym.agents.registry import register_agent

    register_agent(
        "qnet",
        QnetAgent,
        needs_arg=True,
        arg_help="PATH",
        description="value-regression MLP imitation of the lookahead over the choose_bg plans (imitate qfit)",
        overwrite=True,
    )


_register()
