"""Simulation backends: one strategy per backend behind :class:`~ainet_gym.sim.backends.base.SimBackend`,
chosen by name here and nowhere else (:func:`get_backend`).

- ``numba`` (:mod:`ainet_gym.sim.backends.numba`): the whole interval of every instance in one compiled call
  (:mod:`ainet_gym.sim.backends.numba`), the default when numba imports;
- ``numpy`` (:mod:`ainet_gym.sim.backends.numpy_ref`): the readable reference, each event vectorised over the
  batch; the oracle the compiled backend is checked against (``python -m ainet_gym.checks.parity``).

The env side of a step has its own strategy of the same name (:func:`ainet_gym.envs.passes.get_passes`).
To add a backend: a module here with a class that implements :class:`SimBackend`, its entry in
:data:`BACKENDS` and ``_MODULES``, and its env passes in :mod:`ainet_gym.envs.passes` (docs/development.md).
"""

from __future__ import annotations

import importlib
import os
import warnings

from ainet_gym.sim.backends.base import SimBackend
from ainet_gym.sim.backends.numba import jit as _jit

__all__ = [
    "BACKENDS",
    "BACKEND_ENV",
    "SimBackend",
    "get_backend",
    "import_compiled_backend",
    "resolve_backend",
]

#: simulation backends: ``numba`` (compiled interval, the default when numba imports) and ``numpy`` (the
#: reference implementation)
BACKENDS = ("numba", "numpy")
BACKEND_ENV = "AINET_GYM_BACKEND"
#: the module and class of each backend (imported on first use)
_MODULES = {
    "numba": ("ainet_gym.sim.backends.numba.backend", "NumbaBackend"),
    "numpy": ("ainet_gym.sim.backends.numpy_ref", "NumpyBackend"),
}
#: backends whose code needs numba
_NEEDS_NUMBA = frozenset({"numba"})
_DEFAULT, _FALLBACK = "numba", "numpy"
_fallback_warned = False
_instances: dict[str, SimBackend] = {}


def resolve_backend(backend: str | None = None) -> str:
    """The backend to use: the keyword if given, else ``$AINET_GYM_BACKEND``, else ``numba`` when it imports.

    Raises
    ------
    ValueError
        If the keyword or the variable names no backend.
    ImportError
        If ``numba`` is asked for explicitly and cannot be imported.
    """
    global _fallback_warned
    source = "backend"
    if backend is None:
        backend = os.environ.get(BACKEND_ENV) or None
        source = BACKEND_ENV
    if backend is None:
        if _jit.HAVE_NUMBA:
            return _DEFAULT
        if not _fallback_warned:
            _fallback_warned = True
            warnings.warn(
                "numba is not importable: ainet_gym falls back to the numpy backend, about 10x slower "
                "(pip install numba, or set AINET_GYM_BACKEND=numpy to silence this)",
                RuntimeWarning,
                stacklevel=2,
            )
        return _FALLBACK
    if backend not in BACKENDS:
        raise ValueError(f"{source} = {backend!r}: unknown backend; allowed: {', '.join(BACKENDS)}")
    if backend in _NEEDS_NUMBA and not _jit.HAVE_NUMBA:
        raise ImportError(f"{source} = {backend!r}, but numba cannot be imported (pip install numba)")
    return backend


def get_backend(backend: str | None = None) -> SimBackend:
    """The strategy of the backend :func:`resolve_backend` picks for ``backend`` (one shared, stateless
    instance per name)."""
    name = resolve_backend(backend)
    impl = _instances.get(name)
    if impl is None:
        module, cls = _MODULES[name]
        impl = _instances[name] = getattr(importlib.import_module(module), cls)()
    return impl


def import_compiled_backend() -> None:
    """Import the default (numba) backend's modules now, when numba imports, instead of at the first
    :func:`get_backend`: the envs call it at their import, so that the first env built in a process does not
    pay those imports (issue-31zw2: about 18 ms of CPU; ``4ab3d09``'s engine imported its kernels at module
    level). ``import ainet_gym`` does not call it."""
    if _jit.HAVE_NUMBA:
        importlib.import_module(_MODULES[_DEFAULT][0])
