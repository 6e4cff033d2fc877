"""The package layout (issue 16): rooms that follow the pipeline, no old import paths (gone in 0.3), the
agents under the project's namespace, and engine modules that need no RL library and no env module."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import ainet_gym

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "ainet_gym"


#: 0.1's module paths, deprecated in 0.2 and removed in 0.3 (CHANGELOG): each must fail to import, so
#: that no shim (an import hook or a ``sys.modules`` alias) brings them back
OLD_MODULE_PATHS = (
    "ainet_gym.spec",
    "ainet_gym.topology",
    "ainet_gym.policies",
    "ainet_gym.workload",
    "ainet_gym.allocator",
    "ainet_gym._reference",
    "ainet_gym.engine",
    "ainet_gym._kernels",
    "ainet_gym.world",
    "ainet_gym.env",
    "ainet_gym.vector_env",
    "ainet_gym.sb3_vec_env",
    "ainet_gym.rewards",
    "ainet_gym.render",
    "ainet_gym.registration",
    "ainet_gym._envkernels",
    "ainet_gym.multiagent",
    "ainet_gym.rllib",
    "ainet_gym.parity",
    "ainet_gym.soak",
    "ainet_gym.simulate",
    "ainet_gym.crosscheck",
)


@pytest.mark.parametrize("old", OLD_MODULE_PATHS)
def test_old_module_paths_are_gone(old: str) -> None:
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_packages_re_export_no_star() -> None:
    """A package's names are spelled out (``__all__`` of what it imports), never ``import *``."""
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert all(a.name != "*" for a in node.names), (
                    f"{path.relative_to(ROOT)}: from {node.module} import *"
                )


def test_contract_names_stay_at_the_top_level() -> None:
    for name in (
        "max_min_fair",
        "max_min_fair_batched",
        "load_scenario",
        "ScenarioError",
        "simulate",
        "crosscheck",
    ):
        assert callable(getattr(ainet_gym, name))
    from ainet_gym.scenario import ScenarioError, load_scenario  # the scenario room's public API

    assert load_scenario is ainet_gym.load_scenario and ScenarioError is ainet_gym.ScenarioError


def test_agents_live_inside_the_package() -> None:
    """One tree for a source checkout and a wheel: no package-dir mapping, no import finder."""
    import ainet_gym.agents.registry as registry

    assert Path(registry.__file__).resolve().parent == ROOT / "ainet_gym" / "agents"
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "ainet_gym.agents" in cfg["packages"] and "ainet_gym.agents" not in cfg.get("package-dir", {})
    assert not list((ROOT / "agents").glob("*.py"))  # the top-level folder is a pointer README


_NO_RL = ("gymnasium", "stable_baselines3", "torch", "ray", "pettingzoo")


@pytest.mark.parametrize("room", ["sim", "fabric", "routing", "scenario"])
def test_engine_rooms_import_no_rl_library(room: str) -> None:
    """Nor the env side of the package: the env builds on the simulation (its action slots, observation and
    reward are its own), not the other way round."""
    for path in (PKG / room).glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for n in names:
                assert n.split(".")[0] not in _NO_RL, f"{path.relative_to(ROOT)} imports {n}"
                assert not n.startswith("ainet_gym.envs"), f"{path.relative_to(ROOT)} imports {n}"


#: the one upward edge left in routing: the ``predictive-*`` policies are made by the agents' predictive router
#: on first use (a lazy import inside the call; the policy table lists them so ``simulate`` can run them)
_ROUTING_UP_EDGES = {("policies.py", "ainet_gym.agents.predictive")}


def test_routing_types_against_its_own_context_not_the_simulation() -> None:
    """Routing sits below the simulation: no import of ``sim``, ``envs`` or ``agents`` (type-only imports
    included), other than the listed lazy one."""
    for path in (PKG / "routing").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                up = node.module.startswith(("ainet_gym.sim", "ainet_gym.envs", "ainet_gym.agents"))
                assert not up or (path.name, node.module) in _ROUTING_UP_EDGES, (
                    f"routing/{path.name}: {node.module}"
                )


def test_optional_extras_load_only_when_used() -> None:
    code = (
        "import sys, ainet_gym, ainet_gym.agents.registry\n"
        "print(sorted(m for m in ('ray', 'pettingzoo', 'ns', 'cppyy', 'stable_baselines3', 'torch') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


_OWN_PRIVATE_MODULES: tuple[str, ...] = ()  # private modules a package may import from another (none)


def test_no_module_reads_private_names_of_another_module() -> None:
    # `from ainet_gym.x import _name` across modules is what a narrow API avoids (tests may; package code not)
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ainet_gym"):
                private = [
                    a.name
                    for a in node.names
                    if a.name.startswith("_")
                    and not a.name.startswith("__")
                    and a.name not in _OWN_PRIVATE_MODULES
                ]
                assert not private, f"{path.relative_to(ROOT)} imports private {private} from {node.module}"


#: private members of other libraries the package calls, each for a stated reason
_FOREIGN_PRIVATE = {
    "model._setup_model": "SB3: rebuilds a loaded model's networks after its hyperparameters changed (resume)",
    "argparse._SubParsersAction": "argparse: the subparsers' type, which argparse exports under no other name",
    "sys._getframe": "the caller's module in a warning (CPython's documented frame access)",
}


def test_no_object_reads_another_objects_private_members() -> None:
    """``x._name`` only on ``self`` / ``cls``: a class that needs another's internals gets a public
    method or is handed the callable (e.g. ``EarlyBlocks``), so an internal can change in one place."""
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")) or node.attr.startswith(
                "__"
            ):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            text = ast.unparse(node)
            assert text in _FOREIGN_PRIVATE, f"{path.relative_to(ROOT)}:{node.lineno} reads {text}"


#: the modules that choose a backend by its name (issue 31): the simulation's factory and the env's
_BACKEND_FACTORIES = ("sim/backends/__init__.py", "envs/passes.py")
#: comparisons of a backend *column* of result rows, which is data, not dispatch, each for a stated reason:
#: a whole module, or one comparison of a module
_BACKEND_DATA = {
    "bench/report.py": "groups the benchmark's result rows by their backend column",
    "bench/sections.py: q['backend'] == 'numpy'": "the x_numpy column: the numpy row of the same env and batch",
}
#: the rooms that run a step, where any comparison with a backend's name is dispatch
_STEP_ROOMS = ("sim/", "envs/")
_BACKEND_NAMES = ("numba", "numpy")
_BACKEND_CLASSES = ("NumbaBackend", "NumpyBackend", "NumbaPasses", "NumpyPasses")


def _backend_branches(source: str, rel: str) -> list[str]:
    """The places in ``source`` (the module ``rel`` of the package) that pick code by a backend's name: a
    comparison involving a ``backend`` expression (``sim.backend == ...``, ``resolve_backend(b) != ...``), a
    comparison with a backend's name in a step room, an ``isinstance`` test against a backend's class, or an
    import of a backend's implementation module from outside its package."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            by_expr = any("backend" in ast.unparse(o).lower() for o in operands)
            by_name = rel.startswith(_STEP_ROOMS) and any(
                isinstance(c, ast.Constant) and c.value in _BACKEND_NAMES
                for o in operands
                for c in ast.walk(o)
            )
            if by_expr or by_name:
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            if any(n in ast.unparse(node) for n in _BACKEND_CLASSES):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.module and not rel.startswith("sim/backends/"):
            mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(m in ("ainet_gym.sim.backends.numba", "ainet_gym.sim.backends.numpy_ref") for m in mods):
                found.append(f"{rel}:{node.lineno}: imports a backend's module")
    return found


def _data_key(found: str) -> str:
    """``module: comparison`` of a place :func:`_backend_branches` found (``module:line: comparison``)."""
    rel, _line, text = found.split(":", 2)
    return f"{rel}:{text}"


def test_the_backend_is_chosen_by_name_in_the_factories_only() -> None:
    """The backend is a strategy for the whole step (``ainet_gym.sim.backends``, ``ainet_gym.envs.passes``):
    no ``if backend == ...`` branch outside the factories; the rest of the package calls the strategy."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel in _BACKEND_FACTORIES or rel in _BACKEND_DATA:
            continue
        found += [f for f in _backend_branches(path.read_text(), rel) if _data_key(f) not in _BACKEND_DATA]
    assert not found, "backend branches outside the factories:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "rel", "branch"),
    [
        ("if sim.backend == 'numba':\n    pass", "sim/engine.py", True),
        ("compiled = self.world.backend != 'numpy'", "envs/env.py", True),
        ("if resolve_backend(backend) == 'numpy':\n    pass", "sim/allocator.py", True),
        (
            "if name in ('numba', 'cuda'):\n    pass",
            "sim/world.py",
            True,
        ),  # a renamed variable, in a step room
        ("ok = isinstance(sim.strategy, NumbaBackend)", "sim/metrics.py", True),
        ("from ainet_gym.sim.backends.numba import run_interval", "envs/env.py", True),
        ("from ainet_gym.sim.backends import numpy_ref", "sim/world.py", True),
        ("if sim.strategy.fused_split:\n    pass", "sim/engine.py", False),  # a capability, not a name
        ("if mode == 'path':\n    pass", "envs/actions.py", False),
        ("if roots == 'numpy':\n    pass", "agents/sb3_agents.py", False),  # a module root, outside the step
        ("from ainet_gym.sim.backends.base import run_windows", "sim/backends/numba.py", False),
    ],
)
def test_backend_branch_check_finds_the_branches_it_must(source: str, rel: str, branch: bool) -> None:
    assert bool(_backend_branches(source, rel)) is branch
