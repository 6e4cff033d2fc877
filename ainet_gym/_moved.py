"""Old import paths of the modules that moved into folders in 0.2 (one release, with a DeprecationWarning).

``import ainet_gym.allocator`` gives the module object of :mod:`ainet_gym.sim.allocator` itself (so
attributes and monkeypatching behave as before) and warns once where it was imported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

#: old module -> new module (``ainet_gym.scenario`` is now a package that re-exports the loader;
#: ``ainet_gym.simulate`` and ``ainet_gym.crosscheck`` are the functions of the same names).
MOVED: dict[str, str] = {
    "ainet_gym.spec": "ainet_gym.scenario.spec",
    "ainet_gym.topology": "ainet_gym.fabric.topology",
    "ainet_gym.routing": "ainet_gym.routing.split",
    "ainet_gym.policies": "ainet_gym.routing.policies",
    "ainet_gym.workload": "ainet_gym.sim.workload",
    "ainet_gym.allocator": "ainet_gym.sim.allocator",
    "ainet_gym._reference": "ainet_gym.sim.reference",
    "ainet_gym.engine": "ainet_gym.sim.engine",
    "ainet_gym._kernels": "ainet_gym.sim.kernels",
    "ainet_gym.world": "ainet_gym.sim.world",
    "ainet_gym.env": "ainet_gym.envs.env",
    "ainet_gym.vector_env": "ainet_gym.envs.vector_env",
    "ainet_gym.sb3_vec_env": "ainet_gym.envs.sb3_vec_env",
    "ainet_gym.rewards": "ainet_gym.envs.rewards",
    "ainet_gym.render": "ainet_gym.envs.render",
    "ainet_gym.registration": "ainet_gym.envs.registration",
    "ainet_gym._envkernels": "ainet_gym.envs.kernels",
    "ainet_gym.multiagent": "ainet_gym.envs.multiagent",
    "ainet_gym.rllib": "ainet_gym.envs.rllib",
    "ainet_gym.parity": "ainet_gym.checks.parity",
    "ainet_gym.soak": "ainet_gym.checks.soak",
}
MOVED.pop("ainet_gym.routing")  # now the routing package itself; its old content is ainet_gym.routing.split


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new} (ainet-gym 0.2); the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: ``create_module`` returned the module executed under its new name."""


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Resolves the old module names of :data:`MOVED` to the moved modules."""

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(new))


def install() -> None:
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
