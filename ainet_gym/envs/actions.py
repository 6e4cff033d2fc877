"""The actions of an env: checking, decoding into splits, the masks of the discrete modes.

:class:`EnvActions` is the action side of :class:`~ainet_gym.envs.env.EnvCore` (its base class, beside
:class:`~ainet_gym.envs.observation.EnvObservation` and :class:`~ainet_gym.envs.info.EnvInfo`): it holds no
state of its own and reads the core's, the attributes annotated on it, which ``EnvCore.__init__`` sets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from gymnasium import spaces

from ainet_gym.arrays import safe_divide
from ainet_gym.envs.slots import SlotMaps
from ainet_gym.routing.plans import plan_split
from ainet_gym.sim.world import FabricWorld, StepResult

if TYPE_CHECKING:
    from ainet_gym.envs.passes import EnvPasses

__all__ = [
    "ACTION_MODES",
    "BG_SLOT_MODES",
    "RESIDUAL_MODES",
    "RESIDUAL_SCALE",
    "SPLIT_MODES",
    "EnvActions",
    "check_residual",
]

ACTION_MODES = ("path", "split", "ecmp_weights", "choose", "choose_bg", "split_bg")

#: the action modes whose slots also route the background connections (class ``jobs+bg``)
BG_SLOT_MODES = ("split_bg",)

#: the action modes that decode a (slots x max_paths) box of split weights
SPLIT_MODES = ("split", "split_bg")

#: the action modes that take a ``residual`` base policy
RESIDUAL_MODES = ("ecmp_weights", "split_bg")

#: default ``residual_scale``: an action of +-1 multiplies a path's share by 4 or 1/4 (per knob link
#: of the path in ``ecmp_weights``)
RESIDUAL_SCALE = float(np.log(4.0))


def check_residual(residual: str | None, scale: float, action_mode: str) -> tuple[str | None, float]:
    """``(residual, residual_scale)`` checked (see :class:`FabricRoutingEnv`, Arguments).

    Raises
    ------
    ValueError
        Naming the bad value and what is allowed.
    """
    from ainet_gym.routing.policies import CONTROLS

    if isinstance(scale, bool) or not isinstance(scale, int | float | np.floating) or not 0 < scale <= 10:
        raise ValueError(
            f"residual_scale = {scale!r}: allowed: a number in (0, 10] (log of the largest factor)"
        )
    if residual is None:
        return None, float(scale)
    allowed = [n for n, c in CONTROLS.items() if c in ("none", "jobs+bg")]
    if residual not in allowed:
        raise ValueError(
            f"residual = {residual!r}: not a base policy; allowed: None or a routing of class none or "
            f"jobs+bg ({', '.join(allowed)})"
        )
    if action_mode not in RESIDUAL_MODES:
        raise ValueError(
            f"residual = {residual!r} with action_mode = {action_mode!r}: a residual policy acts in "
            f"{' or '.join(RESIDUAL_MODES)}"
        )
    return residual, float(scale)


class EnvActions:
    """The action side of :class:`~ainet_gym.envs.env.EnvCore`: a bad action is refused before it touches the
    state; a good one becomes a (batch, connections, paths) split."""

    P: int
    _ctrl_cache: tuple | None
    _default: np.ndarray
    _fixed_cache: tuple | None
    _last: StepResult | None
    _passes: EnvPasses
    _slot_maps: Callable[[], SlotMaps]
    action_mode: str
    action_space: spaces.Space
    batch: int
    plans: tuple[str, ...]
    residual: str | None
    residual_scale: float
    wcmp_links: np.ndarray
    world: FabricWorld

    # ------------------------------------------------------------------ actions
    def validate(self, actions: np.ndarray) -> np.ndarray:
        """Check a batch of actions against the action space; never mutates state. Returns them as int64
        (path mode) or float64 (the other modes).

        Raises
        ------
        ValueError
            Naming the bad element, its value and what is allowed.
        """
        return self._validate(actions, float64=True)

    def _validate_plans(self, a: np.ndarray) -> np.ndarray:
        """:meth:`validate` of the ``choose`` modes: (batch,) plan indices as int64."""
        K = len(self.plans)
        allowed = f"a plan index, an integer in 0..{K - 1} ({', '.join(self.plans)})"
        if a.shape != (self.batch,):
            per_env = "a scalar (or shape (1,))" if self.batch == 1 else f"shape ({self.batch},), one per env"
            raise ValueError(f"action shape {a.shape}: expected {per_env}: {allowed}")
        if a.dtype.kind not in "iuf":
            raise ValueError(f"action dtype {a.dtype}: not a number type; expected {allowed}")
        if a.dtype.kind == "f":
            bad = ~np.isfinite(a) | (a != np.round(a))
            if bad.any():
                i = tuple(np.argwhere(bad)[0])
                raise ValueError(f"action{self._where_plan(i)} = {a[i].item()!r}: expected {allowed}")
        bad = (a < 0) | (a >= K)  # on the given values: a huge float or uint64 would wrap in int64
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise ValueError(
                f"action{self._where_plan(i)} = {a[i].item()!r}: out of Discrete({K}); expected {allowed}"
            )
        return a.astype(np.int64)

    def _where_plan(self, i: tuple) -> str:
        """Index text of a plan action: empty for a single env, ``[env]`` for a batch."""
        return "" if self.batch == 1 else f"[{int(i[0])}]"

    def _validate(self, actions: np.ndarray, float64: bool) -> np.ndarray:
        """:meth:`validate`; ``float64=False`` returns valid float32 or float64 actions as given (no
        conversion: the compiled decode reads either and converts each element exactly). The array read
        (:func:`_as_array`), its shape and type checked (:meth:`_shaped`), then its values: plan indices
        (:meth:`_validate_plans`), path indices (:meth:`_validate_paths`) or weights (:meth:`_validate_box`)."""
        if self.plans:
            a = _as_array(actions, "plan indices")
            return self._validate_plans(a.reshape(1) if self.batch == 1 and a.shape in ((), (1,)) else a)
        discrete = isinstance(self.action_space, spaces.MultiDiscrete)
        allowed = f"integers in 0..{self.P - 1}" if discrete else "real numbers in [-1, 1]"
        a = self._shaped(_as_array(actions, allowed), allowed)
        return self._validate_paths(a) if discrete else self._validate_box(a, float64)

    def _shaped(self, a: np.ndarray, allowed: str) -> np.ndarray:
        """``a`` with the batch's shape (one env's action of a single env gets its batch axis), or the error
        that names the shape expected; a type that is not a number is refused (``allowed``: the values)."""
        sp = self.action_space
        want = (self.batch, *sp.shape)
        if a.shape != want and a.shape == sp.shape and self.batch == 1:
            a = a[None]
        if a.shape != want:
            if self.batch > 1 and a.shape == sp.shape:
                raise ValueError(
                    f"action shape {a.shape} is one env's action; the vector env of {self.batch} envs "
                    f"expects {want}, one row per env"
                )
            per_env = f"{sp.shape} for one env" + (
                f", {want} for the {self.batch} envs" if self.batch > 1 else ""
            )
            raise ValueError(f"action shape {a.shape}: expected {per_env}")
        if a.dtype.kind not in "iuf":
            kind = {
                "b": "booleans",
                "c": "complex numbers",
                "U": "strings",
                "S": "bytes",
                "O": "Python objects",
            }
            raise ValueError(
                f"action dtype {a.dtype} ({kind.get(a.dtype.kind, a.dtype.kind)}): not a number type; "
                f"expected {allowed} (an integer or float array)"
            )
        return a

    def _validate_paths(self, a: np.ndarray) -> np.ndarray:
        """:meth:`validate` of the ``path`` mode's values: integers (or integral floats) in 0..P-1, as int64."""
        if not np.issubdtype(a.dtype, np.integer) and (
            not np.issubdtype(a.dtype, np.floating) or not np.all(np.isfinite(a)) or np.any(a != np.round(a))
        ):
            bad = np.argwhere(~np.isfinite(a) | (a != np.round(a)))
            i = tuple(bad[0])
            raise ValueError(
                f"action{self._where(i)} = {a[i].item()!r}: path indices must be integers in 0..{self.P - 1}"
            )
        bad = (a < 0) | (a >= self.P)  # on the given values: 1e20 or 2**64 - 1 would wrap in int64
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise ValueError(
                f"action{self._where(i)} = {a[i].item()!r}: out of MultiDiscrete({self.P}); allowed 0..{self.P - 1}"
            )
        return a.astype(np.int64)

    def _validate_box(self, a: np.ndarray, float64: bool) -> np.ndarray:
        """:meth:`validate` of the weight modes' values: finite, in [-1, 1] (float32 round-off of at most
        1e-6 clipped); ``float64=False``: a valid float32 or float64 array as given."""
        # the common case (float32 from a policy): on a small float array every |a| <= 1, counted without
        # a reduction (numpy's min/max cost about 2 us each there, the single env step's own Python ~100 us);
        # from ~2,048 elements on, the two reductions are quicker than the temporaries. A NaN fails either
        # test; integers always take min and max (|a| of the most negative integer wraps); every number type
        # converts to float64 exactly
        if (
            np.count_nonzero(np.abs(a) <= 1.0) == a.size
            if a.dtype.kind == "f" and a.size <= 2048
            else a.min(initial=0.0) >= -1.0 and a.max(initial=0.0) <= 1.0
        ):
            return a if not float64 and a.dtype in (np.float32, np.float64) else a.astype(np.float64)
        a = a.astype(np.float64)
        bad = ~np.isfinite(a)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise ValueError(f"action{self._where(i)} = {a[i]}: must be finite, in [-1, 1]")
        bad = (a < -1.0 - 1e-6) | (a > 1.0 + 1e-6)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise ValueError(f"action{self._where(i)} = {a[i]:.6g}: out of the action space; allowed [-1, 1]")
        return np.clip(a, -1.0, 1.0)  # only float32 round-off of at most 1e-6 is clipped here

    def _where(self, i: tuple) -> str:
        """Index text of an action element: ``[3]`` for a single env, ``[env, 3]`` for a batch."""
        idx = [int(x) for x in i]
        return str(idx[1:] if self.batch == 1 else idx)

    def decode(self, a: np.ndarray) -> np.ndarray:
        """Split (connections, max_paths) of every connection of the batch from validated actions."""
        w = self.world
        sim = w.sim
        assert sim is not None
        if self.plans:  # each instance runs the plan it chose, computed as that baseline computes it
            return plan_split(w, self.state.last, a, self.plans)
        if self.residual is not None:
            return self._residual_split(a)
        if self.action_mode == "ecmp_weights":
            weights = np.ones((self.batch, w.fabric.n_links))
            weights[:, self.wcmp_links] = (a + 1.0) / 2.0
            return w.wcmp(weights)
        ctrl, conns, npaths = self._controllable()
        # the backend's env passes: numpy, or one compiled pass with the same floating-point operations
        return self._passes.decode_split(
            self.action_mode, a, ctrl, conns, npaths, self._default, self._fixed_conns
        )

    def _residual_split(self, a: np.ndarray) -> np.ndarray:
        """The split of the residual policy (``residual=`` at construction): the base policy's split of
        every connection times a factor per path from the actions, renormalised over the live paths.

        ``ecmp_weights``: a path's factor is ``exp(residual_scale * sum of the actions of its knob
        links)``; ``split_bg``: ``exp(residual_scale * a)`` of the slot's path. Actions of 0 give the base
        split itself; a path the base gives no share keeps none."""
        from ainet_gym.routing.policies import POLICIES

        w = self.world
        sim = w.sim
        assert sim is not None and self.residual is not None
        base = np.asarray(POLICIES[self.residual](w, self.state.last), dtype=np.float64)
        beta = self.residual_scale
        if self.action_mode == "ecmp_weights":
            log_w = np.zeros((self.batch, w.fabric.n_links))
            log_w[:, self.wcmp_links] = beta * a
            ext = np.concatenate([log_w.reshape(-1), [0.0]])  # index -1: the paths' padding
            factor = np.exp(ext[sim.conn_paths_global].sum(axis=2))  # (C, P)
        else:
            factor = np.ones_like(base)
            ctrl, conns, _ = self._controllable()
            factor[conns] = np.exp(beta * a.reshape(-1, self.P)[ctrl])
        split = base * factor
        total = split.sum(axis=1, keepdims=True)
        return w.withdraw_dead(safe_divide(split, total, base))

    def _controllable(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat indices of the controllable slots of the batch and, per such slot, its connection and its
        number of paths; rebuilt when the slot maps are made again (:meth:`_slot_maps`)."""
        maps = self._slot_maps()
        cache = self._ctrl_cache
        if cache is None or cache[0] is not maps.mask:
            ctrl = np.flatnonzero(maps.mask.reshape(-1))
            cache = (maps.mask, ctrl, maps.conn.reshape(-1)[ctrl], maps.npaths.reshape(-1)[ctrl])
            self._ctrl_cache = cache
        return cache[1:]

    def _fixed_conns(self, conns: np.ndarray) -> np.ndarray:
        """The connections of the batch that no controllable slot routes (``conns``: those that one does),
        which keep their default split; cached with the controllable slots."""
        cache = self._fixed_cache
        if cache is None or cache[0] is not conns:
            n = self._default.shape[0]
            fixed = np.ones(n, dtype=bool)
            fixed[conns] = False
            cache = (conns, np.flatnonzero(fixed).astype(np.int64))
            self._fixed_cache = cache
        return cache[1]

    def action_masks(self) -> np.ndarray:
        """(batch, slots * max_paths) bool: valid path indices per slot (for MaskablePPO).

        A slot that is not controllable (no connection, or one candidate path) allows only index 0.
        In the ``choose`` modes: (batch, plans), every plan allowed.
        """
        if self.plans:
            return np.ones((self.batch, len(self.plans)), dtype=bool)
        maps = self._slot_maps()
        n = np.where(maps.mask, maps.npaths, 1)  # (batch, slots)
        return (np.arange(self.P)[None, None, :] < n[:, :, None]).reshape(self.batch, -1)


def _as_array(actions: object, allowed: str) -> np.ndarray:
    """``actions`` as an array, or the error that says what is expected (``allowed``) when it cannot be one
    (ragged nested lists)."""
    try:
        return np.asarray(actions)
    except (ValueError, TypeError) as e:
        raise ValueError(f"action: cannot be read as an array ({e}); expected {allowed}") from None
