"""Old import paths of the modules that moved into folders in 0.2 (one release, with a DeprecationWarning).

``import ainet_gym.allocator`` gives the module object of :mod:`ainet_gym.sim.allocator` itself (so
attributes and monkeypatching behave as before) and warns once where it was imported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from pathlib import Path

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


class _SourceAgentsFinder(importlib.abc.MetaPathFinder):
    """``ainet_gym.agents`` from a source checkout: the repository's ``agents/`` folder beside the package."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        if fullname != "ainet_gym.agents":
            return None  # submodules are found through the package's __path__
        return importlib.util.spec_from_file_location(
            fullname, self.folder / "__init__.py", submodule_search_locations=[str(self.folder)]
        )


def map_source_agents(package_dir: Path) -> None:
    """Map ``ainet_gym.agents`` to ``<repo>/agents`` when the package runs from a source checkout."""
    folder = package_dir.parent / "agents"
    if (package_dir / "agents").is_dir() or not (folder / "__init__.py").is_file():
        return  # an installed wheel (agents inside the package), or no repository beside it
    if not any(isinstance(f, _SourceAgentsFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceAgentsFinder(folder))
