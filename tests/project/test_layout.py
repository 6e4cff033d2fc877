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


#: 0.1's module paths, deprecated in 0.2 and removed in 0.3 (CHANGELOG), and the compiled modules issue 31
#: moved into ``ainet_gym.sim.backends.numba``: each must fail to import, so that no shim (an import hook or a
#: ``sys.modules`` alias) brings them back
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
    # moved into the compiled backend's package ``ainet_gym.sim.backends.numba`` by issue 31 (no shim)
    "ainet_gym.sim.kernels",
    "ainet_gym.envs.kernels",
    "ainet_gym.sim.crew",
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


#: the fabric room's modules of one concern (issue 31 item 3, issue-31zk); ``topology`` is the public API
#: (the documented import path ``ainet_gym.fabric.topology``) that re-exports their public names
FABRIC_MODULES = (
    "record",  # the Fabric record, TIERS, ROLES
    "paths",  # shortest paths, ECMP groups, the cap of an equal-cost set
    "builder",  # a fabric under construction
    "flatten",  # builder -> Fabric
    "builtin",  # the built-in topologies
    "build",  # build_fabric
    "nonblocking",  # the non-blocking reference fabric
    "graph_size",  # a graph counted and refused above the limits
    "graph_input",  # a fabric from a networkx graph
    "graph_io",  # graph <-> fabric, graph files
    "fingerprint",  # a short stable hash of a built fabric (issue-26zf2)
)


def test_fabric_topology_re_exports_the_modules_of_one_concern() -> None:
    """``ainet_gym.fabric.topology`` defines nothing itself: every name of its ``__all__`` is the very object
    of one of :data:`FABRIC_MODULES`, nothing private is re-exported, and the room has no other module."""
    import importlib

    import ainet_gym.fabric.topology as topology

    assert {p.stem for p in (PKG / "fabric").glob("*.py")} == {*FABRIC_MODULES, "topology", "__init__"}
    body = ast.parse(Path(topology.__file__).read_text()).body
    assert not [n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    modules = [importlib.import_module(f"ainet_gym.fabric.{m}") for m in FABRIC_MODULES]
    public = {n for n in vars(topology) if not n.startswith("_") and n != "annotations"}
    assert public == set(topology.__all__)
    for name in topology.__all__:
        assert any(getattr(m, name, None) is getattr(topology, name) for m in modules), name


#: the env room's modules of one concern that ``ainet_gym.envs.env`` re-exports (issue 31 item 3, issue-31zn):
#: ``ainet_gym.envs.env`` stays the documented import path of ``EnvCore`` and ``FabricRoutingEnv`` and the
#: ``entry_point`` of every registered id, and defines nothing itself
ENV_MODULES = (
    "core",  # EnvCore: construction, reset, snapshots, the step (its bases: the modules below and, since
    # issue-31zr, agent_api.py (the read-only API for agents) and share_weights.py)
    "gym_env",  # FabricRoutingEnv, the single Gymnasium env
    "functional",  # step, step_split, reset, step_state: the step as a function of the episode state
    "state",  # EnvSnapshot beside the episode state's containers
    "reset_options",  # the reset options the envs refuse
    "actions",  # EnvActions: action modes, checking and decoding
    "obs_layout",  # the observation's block layout (issue-31zz: out of observation.py, EnvObservation's module)
    "info",  # EnvInfo: the info dict
)


def test_env_re_exports_the_modules_of_one_concern() -> None:
    """``ainet_gym.envs.env`` holds only imports and ``__all__``: every name of its ``__all__`` is the very
    object of one of :data:`ENV_MODULES`, it exposes no other public name, and ``EnvCore`` and
    ``FabricRoutingEnv`` keep the signatures that outside checks rely on."""
    import importlib
    import inspect

    import ainet_gym.envs.env as env

    body = ast.parse(Path(env.__file__).read_text()).body
    kinds = {type(n).__name__ for n in body[1:]}  # (body[0]: the docstring)
    assert kinds <= {"ImportFrom", "Assign"}, kinds
    assert [ast.unparse(n.targets[0]) for n in body if isinstance(n, ast.Assign)] == ["__all__"]
    modules = [importlib.import_module(f"ainet_gym.envs.{m}") for m in ENV_MODULES]
    public = {n for n in vars(env) if not n.startswith("_") and n != "annotations"}
    assert public == set(env.__all__)
    for name in env.__all__:
        assert any(getattr(m, name, None) is getattr(env, name) for m in modules), name
    core = list(inspect.signature(env.EnvCore).parameters)
    assert core[:4] == ["scenario", "batch", "action_mode", "history"], core
    single = list(inspect.signature(env.FabricRoutingEnv).parameters)
    assert single[:4] == ["scenario", "action_mode", "history", "observation"], single


#: the imitation package's modules of one concern (issue 31 item 3, issue-31zm); the package
#: ``ainet_gym.agents.imitate`` (its ``__init__``) re-exports their public names, ``__main__`` runs ``cli.main``
IMITATE_MODULES = (
    "labels",  # the lookahead's labels
    "clone",  # behaviour cloning into a PPO model
    "features",  # the observation columns a plan model reads, the previous-plan block
    "knn_file",  # the knn policy file, written and read back checked
    "knn_fit",  # the k-NN policy fitted to labels, the value vote's values
    "agent",  # knn:PATH, registered on import
    "dagger",  # a saved policy as the label player
    "label_files",  # label files read and joined
    "cli",  # python -m ainet_gym.agents.imitate
)


def test_imitate_re_exports_the_modules_of_one_concern() -> None:
    """``ainet_gym.agents.imitate`` defines nothing itself: every name of its ``__all__`` is the very object of
    one of :data:`IMITATE_MODULES`, it exposes no other public name but those modules, and the package has no
    other module."""
    import importlib
    import types

    import ainet_gym.agents.imitate as imitate

    folder = PKG / "agents" / "imitate"
    assert {p.stem for p in folder.glob("*.py")} == {*IMITATE_MODULES, "__init__", "__main__"}
    body = ast.parse((folder / "__init__.py").read_text()).body
    assert not [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    modules = [importlib.import_module(f"ainet_gym.agents.imitate.{m}") for m in IMITATE_MODULES]
    public = {
        n
        for n, v in vars(imitate).items()
        if not n.startswith("_") and n != "annotations" and not isinstance(v, types.ModuleType)
    }
    assert public == set(imitate.__all__)
    for name in imitate.__all__:
        assert any(getattr(m, name, None) is getattr(imitate, name) for m in modules), name


#: the bench's modules of one concern that ``ainet_gym.bench.sections`` re-exports (issue 31 item 3,
#: issue-31zq): ``sections`` stays the import path of the measured sections and defines nothing itself
BENCH_SECTION_MODULES = (
    "machine",  # machine_info, calibrate: the report's header
    "timing",  # timeit, rel_err, last_metrics: the measuring helpers the sections share
    "progress",  # Progress, n_tasks: the progress bar and the tasks it counts
    "allocator",  # sections 1-2: the allocator single and batched
    "env_rows",  # section 3: the environments' steps per second
    "startup",  # sections 4-5: construction and start-up in a fresh process
    "scaling",  # section 6: an interval's cost as the instances grow
    "moe",  # section 7: the MoE family
    "switch",  # the switch section: lazy kernel, full re-solve, the switch
)


def test_bench_sections_re_exports_the_modules_of_one_concern() -> None:
    """``ainet_gym.bench.sections`` holds only imports and ``__all__``: every name of its ``__all__`` is the
    very object of one of :data:`BENCH_SECTION_MODULES`, it exposes no other public name, and every section
    that ``ainet_gym.bench`` runs is among them."""
    import importlib

    import ainet_gym.bench as bench
    import ainet_gym.bench.sections as sections

    body = ast.parse(Path(sections.__file__).read_text()).body
    kinds = {type(n).__name__ for n in body[1:]}  # (body[0]: the docstring)
    assert kinds <= {"ImportFrom", "Assign"}, kinds
    assert [ast.unparse(n.targets[0]) for n in body if isinstance(n, ast.Assign)] == ["__all__"]
    modules = [importlib.import_module(f"ainet_gym.bench.{m}") for m in BENCH_SECTION_MODULES]
    public = {n for n in vars(sections) if not n.startswith("_") and n != "annotations"}
    assert public == set(sections.__all__)
    for name in sections.__all__:
        assert any(getattr(m, name, None) is getattr(sections, name) for m in modules), name
    for name in bench.SECTIONS:
        assert getattr(bench, f"bench_{name}") is getattr(sections, f"bench_{name}"), name


#: the scenario sections' modules of one concern (issue 31 item 3, issue-31zs): one per section of a scenario
#: file; the package ``ainet_gym.scenario.sections`` (its ``__init__``, the loader's and the tests' import path)
#: re-exports their public names and defines nothing itself
SCENARIO_SECTION_MODULES = (
    "fabric",  # fabric: built-in topologies' keys, structure, storage leaves, a graph fabric
    "jobs",  # workload.jobs and their collectives (also the churn templates)
    "background",  # workload.background
    "dynamics",  # dynamics: link failures (random, scheduled), job churn
    "top",  # the top-level and workload keys, the rules of routing and reward
)


def test_scenario_sections_re_export_the_modules_of_one_concern() -> None:
    """``ainet_gym.scenario.sections`` holds only imports and ``__all__``: every name of its ``__all__`` is the
    very object of one of :data:`SCENARIO_SECTION_MODULES`, it exposes no other public name but those modules,
    the package has no other module, and every name the package or a test imports from it is in its
    ``__all__``."""
    import importlib
    import types

    import ainet_gym.scenario.sections as sections

    folder = PKG / "scenario" / "sections"
    assert {p.stem for p in folder.glob("*.py")} == {*SCENARIO_SECTION_MODULES, "__init__"}
    body = ast.parse((folder / "__init__.py").read_text()).body
    kinds = {type(n).__name__ for n in body[1:]}  # (body[0]: the docstring)
    assert kinds <= {"ImportFrom", "Assign"}, kinds
    assert [ast.unparse(n.targets[0]) for n in body if isinstance(n, ast.Assign)] == ["__all__"]
    modules = [importlib.import_module(f"ainet_gym.scenario.sections.{m}") for m in SCENARIO_SECTION_MODULES]
    public = {
        n
        for n, v in vars(sections).items()
        if not n.startswith("_") and n != "annotations" and not isinstance(v, types.ModuleType)
    }
    assert public == set(sections.__all__)
    for name in sections.__all__:
        assert any(getattr(m, name, None) is getattr(sections, name) for m in modules), name
    assert _imports_from("ainet_gym.scenario.sections") <= set(sections.__all__)


#: ``FabricWorld``'s base classes, one module per concern (issue 31 item 3, issue-31zs); ``sim/world.py`` keeps
#: its construction, reset, step and dynamics, and stays the import path of ``FabricWorld``, ``StepResult``,
#: ``ConnectionTable`` and ``WorldSnapshot``
WORLD_BASES = {
    "WorldUnits": "world_units",  # the compiled units of the job slots, stacked and restacked
    "WorldRouting": "world_routing",  # static ECMP, WCMP, dead paths withdrawn
    "WorldRestore": "world_snapshot",  # snapshot, restore, bind_state (beside the record WorldSnapshot)
}


def test_fabric_world_is_its_bases_one_module_per_concern() -> None:
    """``FabricWorld``'s bases are :data:`WORLD_BASES`, each defined in its own module; the bases define no
    ``__init__`` (the world sets every attribute) and no member twice; every name the package or a test imports
    from ``ainet_gym.sim.world`` is in its ``__all__``, each the very object of the module that defines it."""
    import ainet_gym.sim.world as world
    from ainet_gym.sim.metrics import ConnectionTable, StepResult
    from ainet_gym.sim.world_snapshot import WorldSnapshot

    bases = world.FabricWorld.__bases__
    assert [b.__name__ for b in bases] == list(WORLD_BASES)
    for b in bases:
        assert b.__module__ == f"ainet_gym.sim.{WORLD_BASES[b.__name__]}", b
        assert "__init__" not in vars(b), b
    seen: dict[str, str] = {}
    for cls in (world.FabricWorld, *bases):
        for name, v in vars(cls).items():
            if callable(v) or isinstance(v, property):
                assert name.startswith("__") or name not in seen, (
                    f"{name}: {cls.__name__} and {seen.get(name)}"
                )
                seen[name] = cls.__name__
    assert set(world.__all__) == {"ConnectionTable", "FabricWorld", "StepResult", "WorldSnapshot"}
    assert (world.ConnectionTable, world.StepResult) == (ConnectionTable, StepResult)
    assert world.WorldSnapshot is WorldSnapshot
    assert _imports_from("ainet_gym.sim.world") <= set(world.__all__)


#: the routing policies' modules of one concern (issue 31 item 3, issue-31zt); ``ainet_gym.routing.policies``
#: keeps the registry (``Policy``, ``POLICIES``, ``PREDICTIVE``, ``CONTROLS``, ``get_policy``) and stays the
#: import path of every name it had, each the very object of the module that defines it
ROUTING_POLICY_MODULES = (
    "loads",  # the connections a class routes, their demands, offered loads, the base load
    "oblivious",  # ecmp, spray, wcmp (+bg): no load read; dead paths withdrawn
    "greedy",  # greedy (+bg), place_least_loaded
    "lp",  # lp (+bg), min_max_split and its memo, solo-lp+bg, burst-lp+bg
    "isolate",  # the isolating plans isolate0+bg ... isolate7+bg
    "predictive_policy",  # predictive-* and the hook their router registers through
)
_ROUTING_REGISTRY = {"Policy", "POLICIES", "PREDICTIVE", "CONTROLS", "get_policy"}

#: the graph policy's modules of one concern (issue 31 item 3, issue-31zt); ``ainet_gym.agents.graph_policy``
#: keeps the agent ``GraphPolicyAgent``, its registration and the command line (``python -m
#: ainet_gym.agents.graph_policy train``), and stays the import path of every name it had
GRAPH_POLICY_MODULES = (
    "graph_net",  # GraphPolicyConfig, GraphActorCritic: the network
    "graph_inputs",  # observation -> tensors, knob positions
    "graph_files",  # the checkpoint: save_graph_policy, load_graph_policy
    "graph_train",  # PPO: TrainConfig, train
)


#: the evaluation's modules of one concern (issue 31 item 3, issue-31zu); ``ainet_gym.agents.evaluate`` keeps what to
#: evaluate (``EvalConfig``), running every policy (``prepare``, ``evaluate``) and ``ainet-gym evaluate``'s handler,
#: and stays the import path of every name it had
EVALUATE_MODULES = (
    "eval_episodes",  # seeds, one batched rollout per policy, its raw records; what a row says of its agent
    "eval_stats",  # confidence intervals, paired differences, the LP of a class, the summary of the JSON
    "eval_report",  # the table, its header and notes
    "eval_files",  # results.md, .csv, .json, episodes.csv, figure.png
)
_EVALUATE_OWN = {"DEFAULT_OUT", "REFERENCES", "EvalConfig", "_label", "prepare", "evaluate", "evaluate_main"}

#: the SB3 agents' modules of one concern (issue-31zu); ``ainet_gym.agents.sb3_agents`` (an outside contract) keeps
#: the agent ``SB3Agent`` and its registration (the factories' module orders the registry), and stays the import
#: path of every name it had
SB3_MODULES = (
    "sb3_algos",  # ALGO_MODES, algo_class, resolve_action_mode, default_hyperparameters
    "sb3_files",  # save_model, read_metadata, load_model, space_signature, check_fit
    "sb3_safety",  # the allowlist unpickler, safe_objects
    "sb3_meta",  # a model's metadata as env keywords: meta_history, meta_residual, meta_obs_features
)

#: the multi-agent env's modules of one concern (issue-31zu); ``ainet_gym.envs.multiagent`` keeps the PettingZoo
#: side (``parallel_env``, ``aec_env``, the class with PettingZoo's base) and stays the import path of every name
#: it had
MULTIAGENT_MODULES = (
    "switch_agents",  # SwitchAgents: the per-switch view of an EnvCore in ecmp_weights mode
    "switch_env",  # FabricParallelEnv without PettingZoo, its rewards and reset options
)
_MULTIAGENT_OWN = {"_require_pettingzoo", "_env_class", "parallel_env", "aec_env"}

#: the max-min allocator's modules of one concern (issue-31zw); ``ainet_gym.sim.allocator`` (an outside contract:
#: ``ainet_gym.max_min_fair``, the allocator API of the design notes) keeps the public functions and the backend
#: choice, and stays the import path of every name it had (``solve_coo``, ``FloatArray``: the same objects)
ALLOCATOR_MODULES = (
    "water_filling",  # solve_coo: the numpy parallel rule over COO entries, the numpy backend's reference
    "allocator_checks",  # the input checks: values, shapes, a dense or sparse incidence as COO entries
)
_ALLOCATOR_OWN = {
    "max_min_fair",
    "_solve",
    "max_min_fair_batched",
    "_batched_vectors",
    "_batched_stacked",
    "_per_instance",
    "_batched_list",
}

#: the direct policy search's modules of one concern (issue-31zw); ``ainet_gym.agents.search`` keeps the agent
#: ``SearchAgent`` (``dps:PATH``; its module orders the registry), its registration and the command line
#: (``python -m ainet_gym.agents.search``), and stays the import path of every name it had
SEARCH_MODULES = (
    "search_score",  # SearchConfig, the linear plan scorer, the pooled tail and the closed-loop scores
    "search_rollout",  # the env side: the batched env, a gate's base, the plans' actions, one episode per row
    "search_cem",  # cem_search: the cross-entropy method
    "search_files",  # the .npz file: save_search_policy, load_search_policy
)

#: the twin's modules of one concern (issue-31zw); ``ainet_gym.agents.twin`` keeps the planner ``TwinAgent``, its
#: registration and the K x H sweep, and stays the import path of every name it had (the policy names and
#: arguments unchanged)
TWIN_MODULES = (
    "twin_args",  # the candidates, the defaults, parse_twin_arg
    "twin_plan",  # TwinPlanning, TwinAgent's base class: the planning cores, the lookahead; instance_rows
)


def _defined(path: Path) -> set[str]:
    """The names a module's top level defines (functions, classes, assignments)."""
    out = set()
    for n in ast.parse(path.read_text()).body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.Assign):
            out |= {ast.unparse(t) for t in n.targets}
        elif isinstance(n, ast.AnnAssign):
            out.add(ast.unparse(n.target))
    return out


@pytest.mark.parametrize(
    ("module", "home", "parts", "own", "others"),
    [
        ("ainet_gym.routing.policies", "ainet_gym.routing", ROUTING_POLICY_MODULES, _ROUTING_REGISTRY, {}),
        (
            "ainet_gym.agents.graph_policy",
            "ainet_gym.agents",
            GRAPH_POLICY_MODULES,
            {"GraphPolicyAgent", "main"},
            {},
        ),
        ("ainet_gym.agents.evaluate", "ainet_gym.agents", EVALUATE_MODULES, _EVALUATE_OWN, {}),
        (
            "ainet_gym.agents.sb3_agents",
            "ainet_gym.agents",
            SB3_MODULES,
            {"SB3Agent", "_signature_of_model"},
            {  # the errors load_model raises, as before the split
                "UntrustedModelError": "ainet_gym.agents.model_files",
                "ModelFileError": "ainet_gym.agents.model_files",
                "ModelNotFoundError": "ainet_gym.agents.model_files",
            },
        ),
        ("ainet_gym.envs.multiagent", "ainet_gym.envs", MULTIAGENT_MODULES, _MULTIAGENT_OWN, {}),
        ("ainet_gym.sim.allocator", "ainet_gym.sim", ALLOCATOR_MODULES, _ALLOCATOR_OWN, {}),
        (
            "ainet_gym.agents.search",
            "ainet_gym.agents",
            SEARCH_MODULES,
            {"SearchAgent", "_register", "_tuple", "build_parser", "main"},
            {},
        ),
        (
            "ainet_gym.agents.twin",
            "ainet_gym.agents",
            TWIN_MODULES,
            {"TwinAgent", "sweep", "main", "_int_list"},
            {},
        ),
    ],
)
def test_a_split_module_keeps_one_concern_and_its_old_names(
    module: str, home: str, parts: tuple[str, ...], own: set[str], others: dict[str, str]
) -> None:
    """``module`` defines only ``own`` (and ``__all__``); every other name of its ``__all__``, and every name it
    re-exports, is imported from one of ``parts`` and is the very object defined in exactly one of them, or is one
    of ``others``, the very object of the module named beside it; every name the package or a test imports from
    ``module`` is one of these."""
    import importlib

    mod = importlib.import_module(module)
    tree = ast.parse(Path(mod.__file__).read_text())
    assert _defined(Path(mod.__file__)) == own | {"__all__"}
    full = {f"{home}.{m}": m for m in parts}
    imported = {
        a.asname or a.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module in full
        for a in n.names
    }
    for name, source in others.items():
        assert getattr(mod, name) is getattr(importlib.import_module(source), name), name
    assert set(mod.__all__) <= own | imported | set(others)
    defined = {m: _defined((PKG.parent / Path(*f.split("."))).with_suffix(".py")) for f, m in full.items()}
    for name in imported:
        homes = [m for m in parts if name in defined[m]]
        assert len(homes) == 1, (name, homes)
        assert getattr(importlib.import_module(f"{home}.{homes[0]}"), name) is getattr(mod, name), name
    assert _imports_from(module) <= own | imported | set(others)


#: the SB3 training run's modules of one concern (issue-31zx); ``ainet_gym.agents.train`` keeps the run (``train``),
#: ``ainet-gym train``'s handler and ``python -m ainet_gym.agents.train select``, and re-exports nothing: the package,
#: the tests and the examples import each name from the module that defines it
TRAIN_MODULES = (
    "train_config",  # TrainConfig, TrainResult
    "train_model",  # the run's settings (from its config or a source model), its env and its model
    "train_meta",  # the metadata saved with the model, the checkpoints every N steps, the choice of one
    "train_report",  # both frameworks': the run name, the shared arguments, the lines a run ends with
)
#: the RLlib training run's modules of one concern (issue-31zx); ``ainet_gym.agents.rllib_train`` keeps the run
#: (``RLlibTrainConfig``, ``train_rllib``, ``RLlibTrainResult``) and ``ainet-gym train --framework rllib``'s handler
RLLIB_TRAIN_MODULES = (
    "rllib_checkpoint",  # the checkpoint folder: its metadata, writing it, convert-rllib
    "rllib_logging",  # the fabric callback, an iteration's scalars, the loop, progress.csv
)
#: the cluster check's modules of one concern (issue-31zx); ``ainet_gym.checks.cluster`` keeps the check
#: (``run_check``, the PPO it builds, the verdicts) and ``python -m ainet_gym.checks.cluster``
CLUSTER_MODULES = (
    "ray_cluster",  # the loopback Ray cluster: its nodes, start, kill, stop
    "cluster_checkpoints",  # atomic checkpoints with the weights' SHA-256
    "cluster_faults",  # the training with faults: the kill schedule, the iterations, the stop line
)

#: the bench's output modules of one concern (issue-31zx); ``ainet_gym.bench.report`` keeps the files (the scaling
#: plot, the JSON-ready results)
BENCH_REPORT_MODULES = (
    "targets",  # the targets: PASS/MISS and the ratio
    "tables",  # the terminal tables: header, a block per section, the targets
)

#: the output rule's modules of one concern (issue-31zz); ``ainet_gym.agents.outputs`` keeps the rule (and the rule
#: on a module's command line)
OUTPUTS_MODULES = (
    "module_cli",  # a module's command line with one-line errors: OneLineParser, run_module_cli
    "arg_types",  # the checked argument types, the bounds, the shared --seed/--steps flags
)
#: the predictive baselines' modules of one concern (issue-31zz); ``ainet_gym.agents.predictive`` keeps the agent,
#: its registered names and ``python -m ainet_gym.agents.predictive``
PREDICTIVE_MODULES = (
    "predictive_model",  # the link forecaster: features, training data, fit, error, the per-scenario cache
    "predictive_router",  # the engine-level router, registered behind routing's predictive-* policies
)
#: the observation's modules of one concern (issue-31zz); ``ainet_gym.envs.observation`` keeps ``EnvObservation``
#: (the numpy path, the history, the choice of path), over the compiled path and the shared blocks
OBSERVATION_MODULES = (
    "obs_layout",  # the block layout (a contract): feature names, optional blocks, slices, squash
    "spaces",  # EnvSpaces: the action and observation spaces (a base of EnvCore)
    "obs_blocks",  # ObservationBlocks: slots, background, optional blocks, the graph view
    "obs_compiled",  # EarlyBlocks, CompiledObservation: the compiled env passes' observation
)


@pytest.mark.parametrize(
    ("module", "home", "parts", "own"),
    [
        (
            "ainet_gym.agents.train",
            "ainet_gym.agents",
            TRAIN_MODULES,
            {"_check_config", "train", "_learn", "_fresh_run_dir", "train_main", "main"},
        ),
        (
            "ainet_gym.agents.rllib_train",
            "ainet_gym.agents",
            RLLIB_TRAIN_MODULES,
            {
                "RLLIB_ALGOS",
                "RLlibTrainConfig",
                "RLlibTrainResult",
                "_check",
                "_built_algo",
                "_run_metadata",
                "train_rllib",
                "_resume_metadata",
                "_ppo_config",
                "train_rllib_main",
            },
        ),
        (
            "ainet_gym.checks.cluster",
            "ainet_gym.checks",
            CLUSTER_MODULES,
            {"run_check", "_build_ppo", "_verdicts", "main"},
        ),
        ("ainet_gym.bench.report", "ainet_gym.bench", BENCH_REPORT_MODULES, {"plot_scaling", "jsonable"}),
        (
            "ainet_gym.agents.outputs",
            "ainet_gym.agents",
            OUTPUTS_MODULES,
            {
                "MODEL_FILE",
                "RESULT_FILES",
                "_out_text",
                "model_path",
                "_same",
                "scenario_files",
                "check_model_out",
                "_out_dir_path",
                "_refuse_replacing",
                "_refuse_held",
                "check_out_dir",
                "_is_input",
                "check_out_file",
                "check_out_files",
                "run_stamp",
                "fresh_dir",
                "cli_out_file_refused",
                "run_writing_module_cli",
                "add_out_file_args",
            },
        ),
        (
            "ainet_gym.agents.predictive",
            "ainet_gym.agents",
            PREDICTIVE_MODULES,
            {"PredictiveAgent", "main", "_run"},
        ),
        ("ainet_gym.envs.observation", "ainet_gym.envs", OBSERVATION_MODULES, {"EnvObservation"}),
    ],
)
def test_a_split_module_without_re_exports_gives_only_its_own_names(
    module: str, home: str, parts: tuple[str, ...], own: set[str]
) -> None:
    """``module`` defines only ``own`` (and ``__all__`` if it has one), its ``__all__`` lists only public names of ``own``, every
    name it imports from ``parts`` it uses, no part imports ``module`` (edges one way), every name of a part is
    defined in one part only, and the package, the tests and the examples import from ``module`` only names of
    ``own``: the rest from the module that defines them (no re-export shim)."""
    import importlib

    mod = importlib.import_module(module)
    path = Path(mod.__file__)
    tree = ast.parse(path.read_text())
    assert _defined(path) - {"__all__"} == own  # (bench/report.py has no __all__, as before the split)
    assert set(getattr(mod, "__all__", ())) <= {n for n in own if not n.startswith("_")}
    full = {f"{home}.{m}" for m in parts}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in full:
            assert not {a.asname or a.name for a in node.names} - used, node.module
    seen: dict[str, str] = {}
    for m in parts:
        part = (PKG.parent / Path(*home.split("."))) / f"{m}.py"
        for n in ast.walk(ast.parse(part.read_text())):
            if isinstance(n, ast.ImportFrom):
                assert n.module != module, f"{m} imports {module}"
        for name in _defined(part) - {"__all__"}:
            assert name not in seen, (name, m, seen.get(name))
            seen[name] = m
    names = set()
    for p in [*PKG.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == module:
                names |= {a.name for a in node.names}
    assert names <= own, sorted(names - own)


def test_the_package_and_tests_import_routing_names_where_they_are_defined() -> None:
    """Inside the project, ``ainet_gym.routing.policies`` gives only its registry's own names (issue-31zu); a
    policy, a load function or a constant is imported from the module of one concern that defines it (the
    re-exports stay for outside users)."""
    assert _imports_from("ainet_gym.routing.policies") <= _ROUTING_REGISTRY


def test_routing_policies_are_the_objects_of_their_modules() -> None:
    """Every entry of ``POLICIES`` and ``ISOLATE_PLANS`` is defined in one of :data:`ROUTING_POLICY_MODULES`
    (a ``PredictivePolicy``: its class; an isolating plan: the partial's function), and the folder holds no other
    module than these, the registry and the older ``context``, ``plans`` and ``split``."""
    from ainet_gym.routing.isolate import ISOLATE_PLANS
    from ainet_gym.routing.policies import POLICIES

    homes = {f"ainet_gym.routing.{m}" for m in ROUTING_POLICY_MODULES}
    for name, pol in {**POLICIES, **ISOLATE_PLANS}.items():
        f = getattr(pol, "func", pol)
        assert (
            f.__module__ if callable(f) and hasattr(f, "__qualname__") else type(f).__module__
        ) in homes, name
    stems = {p.stem for p in (PKG / "routing").glob("*.py")}
    assert stems == {*ROUTING_POLICY_MODULES, "policies", "context", "plans", "split", "__init__"}


#: the simulation engine's modules of one concern (issue 31 item 3, issue-31zo); ``ainet_gym.sim.engine`` (the
#: import path of the package, the tests and the docs) re-exports their public names, and those it imported
#: before the split from ``ainet_gym.sim.backends`` and ``ainet_gym.sim.state``
ENGINE_MODULES = (
    "unit",  # CompiledUnit: a job or background source as arrays
    "compile_unit",  # compile_job, compile_background
    "job_tables",  # a job's collectives as phases, flows, members, connections
    "conn_tables",  # the connections' candidate paths, cached per fabric
    "split_parts",  # the part flows of routing.split_flows independent
    "entries",  # EntryTable: the merged incidence entries
    "interval",  # IntervalMetrics, TooManyEvents, the event loop's tolerances
    "batch",  # BatchSim: its __init__, attribute guards and run_interval
    "batch_units",  # BatchUnits (BatchSim's base): stacking, restacks, snapshots, share weights; UnitSnapshot
    "batch_split",  # BatchSplit (BatchSim's base): the split, part and carry flows, the merged entries
)


def _imports_from(module: str) -> set[str]:
    """The names the package and the tests import from ``module`` (``from module import name``)."""
    names = set()
    for path in [*PKG.rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == module:
                names |= {a.name for a in node.names}
    return names


def test_sim_engine_re_exports_the_modules_of_one_concern() -> None:
    """``ainet_gym.sim.engine`` defines nothing itself: every name of its ``__all__`` is the very object of one
    of :data:`ENGINE_MODULES` (or of the backends' factory or the state, as before), it exposes no other public
    name, and every name the package or a test imports from it is in its ``__all__``."""
    import importlib
    import types

    import ainet_gym.sim.engine as engine

    body = ast.parse(Path(engine.__file__).read_text()).body
    assert all(isinstance(n, (ast.Expr, ast.ImportFrom, ast.Assign)) for n in body)
    assert [ast.unparse(n.targets[0]) for n in body if isinstance(n, ast.Assign)] == ["__all__"]
    sources = [importlib.import_module(f"ainet_gym.sim.{m}") for m in (*ENGINE_MODULES, "backends", "state")]
    public = {
        n
        for n, v in vars(engine).items()
        if not n.startswith("_") and n != "annotations" and not isinstance(v, types.ModuleType)
    }
    assert public == set(engine.__all__)
    for name in engine.__all__:
        assert any(getattr(m, name, None) is getattr(engine, name) for m in sources), name
    assert _imports_from("ainet_gym.sim.engine") <= set(engine.__all__)


_NO_RL = ("gymnasium", "stable_baselines3", "torch", "ray", "pettingzoo")


@pytest.mark.parametrize("room", ["sim", "fabric", "routing", "scenario"])
def test_engine_rooms_import_no_rl_library(room: str) -> None:
    """Nor the env side of the package: the env builds on the simulation (its action slots, observation and
    reward are its own), not the other way round."""
    for path in (PKG / room).rglob("*.py"):  # sub-packages too (sim/backends/numba/)
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


#: upward edges left in routing: none since issue-31zp (the ``predictive-*`` policies call the router that
#: ``ainet_gym.agents.predictive`` registers, :func:`ainet_gym.routing.policies.register_predictive_router`)
_ROUTING_UP_EDGES: set[tuple[str, str]] = set()


def test_routing_types_against_its_own_context_not_the_simulation() -> None:
    """Routing sits below the simulation: no import of ``sim``, ``envs`` or ``agents`` (type-only imports
    included), other than the listed ones (none)."""
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


#: one class written over several modules (issue 31 item 3): ``EnvCore`` is ``EnvAgentAPI`` + ``EnvShareWeights``
#: (issue-31zr) + ``EnvActions`` + ``EnvSpaces`` + ``EnvObservation`` (over ``CompiledObservation`` over
#: ``ObservationBlocks``, issue-31zz) + ``EnvInfo``, one module per concern; their private members are the class's own, so ``self._x`` in one of
#: these modules may name a member another of them defines (``core.py`` calls ``self._validate`` of
#: ``actions.py``). Nothing else reads a private member defined in another module.
_ONE_CLASS = (
    "envs/core.py",
    "envs/agent_api.py",
    "envs/share_weights.py",
    "envs/actions.py",
    "envs/spaces.py",
    "envs/observation.py",
    "envs/obs_compiled.py",
    "envs/obs_blocks.py",
    "envs/info.py",
)
#: likewise ``BatchSim`` is ``BatchUnits`` + ``BatchSplit`` (issue-31zo): the structure side and the split side;
#: and ``FabricWorld`` is ``WorldUnits`` + ``WorldRouting`` + ``WorldRestore`` (issue-31zs, :data:`WORLD_BASES`)
#: and ``TwinAgent`` is ``TwinPlanning`` (the planning cores and the lookahead) + its own acting (issue-31zw)
_ONE_CLASSES = (
    _ONE_CLASS,
    ("sim/batch.py", "sim/batch_units.py", "sim/batch_split.py"),
    ("sim/world.py", "sim/world_units.py", "sim/world_routing.py", "sim/world_snapshot.py"),
    ("agents/twin.py", "agents/twin_plan.py"),
)
_ATTR_CALLS = ("getattr", "setattr", "hasattr", "delattr")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_defs(source: str) -> set[str]:
    """The private member names a module defines: its classes' methods and class attributes, and every
    ``self._x`` / ``cls._x`` it binds."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.add(item.name)
                elif isinstance(item, ast.Assign):
                    out |= {t.id for t in item.targets if isinstance(t, ast.Name)}
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out.add(item.target.id)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for t in ast.walk(target):
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id in ("self", "cls")
                    ):
                        out.add(t.attr)
    return {n for n in out if _is_private(n)}


def _private_reads(source: str, rel: str, defs: dict[str, set[str]]) -> list[str]:
    """The places in ``source`` (the module ``rel`` of the package) that read a private member of another
    object or module: ``x._name`` (or ``getattr(x, "_name")``) on anything but ``self`` / ``cls``, unless
    listed in :data:`_FOREIGN_PRIVATE`; and ``self._name`` where ``_name`` is defined by another module of
    the package (``defs``: module -> the private names it defines, :func:`_private_defs`) and not by this
    one, unless both modules are parts of one class (:data:`_ONE_CLASSES`). A member that no module of the
    package defines on ``self`` is a base class's from another library (gymnasium's ``_np_random``)."""
    own = defs.get(rel, set())
    friends = next((group for group in _ONE_CLASSES if rel in group), (rel,))
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            obj, name, text = node.value, node.attr, ast.unparse(node)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _ATTR_CALLS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_private(node.args[1].value)
        ):
            obj, name, text = node.args[0], node.args[1].value, ast.unparse(node)
        else:
            continue
        if isinstance(obj, ast.Name) and obj.id in ("self", "cls"):
            elsewhere = [m for m, names in defs.items() if name in names and m not in friends]
            if name not in own and elsewhere:
                found.append(f"{rel}:{node.lineno}: {text} (defined in {', '.join(sorted(elsewhere))})")
        elif text not in _FOREIGN_PRIVATE:
            found.append(f"{rel}:{node.lineno}: {text}")
    return found


def _package_private_defs() -> dict[str, set[str]]:
    return {p.relative_to(PKG).as_posix(): _private_defs(p.read_text()) for p in sorted(PKG.rglob("*.py"))}


def test_no_object_reads_another_objects_private_members() -> None:
    """``x._name`` only on ``self`` / ``cls`` and of a member the module defines: a class that needs
    another's internals gets a public method or is handed the callable (e.g. ``EarlyBlocks``), so an
    internal can change in one place."""
    defs = _package_private_defs()
    found = []
    for path in sorted(PKG.rglob("*.py")):
        found += _private_reads(path.read_text(), path.relative_to(PKG).as_posix(), defs)
    assert not found, "private members read across objects or modules:\n" + "\n".join(found)


_PLANTED_DEFS = {
    "envs/core.py": {"_validate", "_rest_args"},
    "envs/actions.py": {"_validate"},
    "envs/observation.py": {"_rest_args", "_slot_features"},
    "sim/world.py": {"_units_of", "_capacity_set"},
    "agents/twin.py": {"_cores"},
    "sim/batch_split.py": {"_bind_parts"},
    "envs/agent_api.py": {"_sim"},
    "sim/world_units.py": {"_rebuild"},
}


@pytest.mark.parametrize(
    ("source", "rel", "read"),
    [
        ("x = core._slot_features()", "envs/core.py", True),  # another object's private method
        ("x = self.core._rest_args", "envs/observation.py", True),  # a private of an attribute of self
        ("x = getattr(core, '_rest_args')", "envs/core.py", True),  # through getattr
        ("ok = hasattr(w, '_capacity_set')", "envs/render.py", True),
        ("w = self\nx = w._units_of(0)", "sim/world.py", True),  # self by another name
        ("x = self._units_of(0)", "agents/twin.py", True),  # a mixin reading what another module defines
        ("x = cls._capacity_set", "envs/slots.py", True),
        ("x = self._cores", "agents/twin.py", False),  # its own member
        ("x = self._validate(a)", "envs/core.py", False),  # one class over several modules (_ONE_CLASS)
        ("x = self._sim()", "envs/share_weights.py", False),  # EnvCore's bases (issue-31zr)
        ("x = self._sim()", "envs/vector_env.py", True),  # not a part of that class
        ("x = self._slot_features()", "envs/actions.py", False),
        ("self._bind_parts(stack)", "sim/batch_units.py", False),  # BatchSim over three modules
        ("self._bind_parts(stack)", "sim/world.py", True),  # not a part of that class
        ("self._rebuild()", "sim/world_snapshot.py", False),  # FabricWorld over four modules (issue-31zs)
        ("self._rebuild()", "sim/batch.py", True),  # not a part of that class
        ("x = self._np_random", "envs/env.py", False),  # a base class's, from gymnasium
        ("model._setup_model()", "agents/sb3_agents.py", False),  # a listed foreign private
        ("x = core.__class__", "envs/core.py", False),  # dunder
        ("x = core.last_result", "agents/twin.py", False),
    ],
)
def test_private_read_check_finds_the_reads_it_must(source: str, rel: str, read: bool) -> None:
    assert bool(_private_reads(source, rel, _PLANTED_DEFS)) is read


def _world_reads(source: str, rel: str) -> list[str]:
    """The places in ``source`` (the module ``rel``) that read the ``world`` of an object other than ``self``
    (issue 31: agents use the public ``EnvCore`` API: ``routing_context`` for a routing policy, ``fabric``,
    ``job_names``, ``job_progress()``, ``connection_bounds()``, ``unit_stack``, ``backend``, ...; no
    exception)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "world":
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                continue
            found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_agents_read_the_simulation_through_the_env_core_api() -> None:
    found = []
    for path in sorted((PKG / "agents").rglob("*.py")):
        found += _world_reads(path.read_text(), path.relative_to(PKG).as_posix())
    assert not found, "agents reading an env's world:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "rel", "read"),
    [
        ("split = pol(core.world, core.last_result)", "agents/twin.py", True),
        ("names = look.world.names", "agents/imitate/labels.py", True),
        ("sim = self.core.world.sim", "agents/graph_policy.py", True),  # the world of an attribute of self
        ("w = core.world", "agents/baselines.py", True),
        ("w = core.world", "agents/predictive.py", True),  # the exception the predictive router had
        ("split = pol(core.routing_context, core.last_result)", "agents/twin.py", False),
        ("w = self.world", "agents/predictive.py", False),  # the router's own world
    ],
)
def test_world_read_check_finds_the_reads_it_must(source: str, rel: str, read: bool) -> None:
    assert bool(_world_reads(source, rel)) is read


#: the modules that choose a backend by its name (issue 31): the simulation's factory and the env's
_BACKEND_FACTORIES = ("sim/backends/__init__.py", "envs/passes.py")
#: comparisons of a backend *column* of result rows, which is data, not dispatch, each for a stated reason:
#: a whole module, or one comparison of a module
_BACKEND_DATA = {
    "bench/targets.py": "groups the benchmark's result rows by their backend column",
    "bench/tables.py": "groups the benchmark's result rows by their backend column (the x_numpy cell)",
    "checks/rate_groups.py": "a diagnostic of the numpy reference's own solves: it wraps that backend's solver, so it "
    "needs that backend (it dispatches nothing)",
    "bench/env_rows.py: q['backend'] == 'numpy'": "the x_numpy column: the numpy row of the same env and batch",
}
#: the rooms that run a step, where any comparison with a backend's name is dispatch
_STEP_ROOMS = ("sim/", "envs/")
_BACKEND_NAMES = ("numba", "numpy")
_BACKEND_CLASSES = ("NumbaBackend", "NumpyBackend", "NumbaPasses", "NumpyPasses")
#: the modules of the backends' strategies (the compiled kernels of ``ainet_gym.sim.backends.numba`` are
#: imported by the engine and the env's passes; the strategy classes only by the factories)
_BACKEND_MODULES = ("ainet_gym.sim.backends.numba.backend", "ainet_gym.sim.backends.numpy_ref")


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
            if any(m in _BACKEND_MODULES for m in mods):
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
        ("from ainet_gym.sim.backends.numba.backend import run_interval", "envs/env.py", True),
        ("from ainet_gym.sim.backends.numba import backend", "sim/world.py", True),
        ("from ainet_gym.sim.backends.numba.threads import run_ranges", "sim/engine.py", False),  # a kernel
        ("from ainet_gym.sim.backends import numpy_ref", "sim/world.py", True),
        ("if sim.strategy.fused_split:\n    pass", "sim/engine.py", False),  # a capability, not a name
        ("if mode == 'path':\n    pass", "envs/actions.py", False),
        ("if roots == 'numpy':\n    pass", "agents/sb3_agents.py", False),  # a module root, outside the step
        ("from ainet_gym.sim.backends.base import run_windows", "sim/backends/numba/backend.py", False),
    ],
)
def test_backend_branch_check_finds_the_branches_it_must(source: str, rel: str, branch: bool) -> None:
    assert bool(_backend_branches(source, rel)) is branch


#: the rooms in pipeline order (the tools at the top, one level: they may import each other): a module may
#: import its own room or one before it
PIPELINE = ("units", "scenario", "fabric", "routing", "sim", "envs", "agents", ("checks", "cli", "bench"))
RANK = {r: i for i, level in enumerate(PIPELINE) for r in (level if isinstance(level, tuple) else (level,))}

#: imports inside a function that point up the pipeline, each for a reason (the list may only shrink): none
#: since issue-31zp. The four it held became downward: a collective's phases moved to the scenario room
#: (``scenario/collectives.py``); the loader's graph-fabric check and the routing table's predictive router are
#: registered by the room above (:func:`test_the_upper_rooms_register_what_the_lower_rooms_call`)
UPWARD_INSIDE_FUNCTIONS: set[tuple[str, str]] = set()


def test_the_upper_rooms_register_what_the_lower_rooms_call() -> None:
    """The two inverted edges are wired once ``ainet_gym`` is imported: the scenario loader reads a graph
    fabric with the fabric room's functions, and routing's ``predictive-*`` policies make the agents'
    predictive router."""
    from ainet_gym.agents.predictive_router import PredictiveRouter
    from ainet_gym.fabric import topology
    from ainet_gym.routing.predictive_policy import predictive_router_factory
    from ainet_gym.scenario.graphs import graph_fabrics

    g = graph_fabrics()
    assert (g.read, g.spec, g.check_size, g.build) == (
        topology.read_fabric_graph,
        topology.graph_spec,
        topology.check_graph_size,
        topology.build_fabric,
    )
    assert predictive_router_factory() is PredictiveRouter


def test_an_unregistered_reader_is_refused_with_what_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a lower room used before the upper one registers (never, once ``ainet_gym`` is imported), the call
    says what to import instead of failing on a missing name."""
    import ainet_gym.routing.policies as policies
    import ainet_gym.routing.predictive_policy as predictive_policy
    import ainet_gym.scenario.graphs as graphs

    monkeypatch.setattr(graphs, "_REGISTERED", [])
    monkeypatch.setattr(predictive_policy, "_PREDICTIVE_ROUTER", [])
    with pytest.raises(RuntimeError, match=r"import ainet_gym \(or ainet_gym.fabric\)"):
        graphs.graph_fabrics()
    with pytest.raises(RuntimeError, match=r"import ainet_gym \(or ainet_gym.agents.predictive\) first"):
        policies.get_policy("predictive-lp")(type("World", (), {})(), None)


def upward_imports(source: str, room: str, inside_functions: bool = False) -> list[str]:
    """The ``ainet_gym`` modules a module of ``room`` imports from a room after its own: at module level, or
    (``inside_functions``) anywhere."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree) if inside_functions else tree.body:
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "ainet_gym" and len(parts) > 1 and RANK.get(parts[1], -1) > RANK[room]:
                found.append(name)
    return found


def _package_modules() -> list[tuple[str, str, str]]:
    """(path relative to the package, its room, its source) of every module inside a room."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).parts
        if len(rel) > 1 and rel[0] in RANK:
            out.append(("/".join(rel), rel[0], path.read_text()))
    return out


def test_module_level_imports_point_down_the_pipeline() -> None:
    """scenario -> fabric -> routing -> sim -> envs -> agents: no module imports a later room when it is
    imported (a back edge would load the engine, or worse a cycle, with the scenario loader)."""
    bad = [f"{rel} -> {m}" for rel, room, src in _package_modules() for m in upward_imports(src, room)]
    assert not bad, bad


def test_imports_inside_functions_point_down_but_for_the_listed_reasons() -> None:
    """Inside functions too, except the listed edges (each with its reason above); a new one fails, and a
    listed one that is gone must leave the list."""
    found = {
        (rel, m)
        for rel, room, src in _package_modules()
        for m in upward_imports(src, room, inside_functions=True)
    }
    assert found - UPWARD_INSIDE_FUNCTIONS == set(), sorted(found - UPWARD_INSIDE_FUNCTIONS)
    assert UPWARD_INSIDE_FUNCTIONS - found == set(), sorted(UPWARD_INSIDE_FUNCTIONS - found)


@pytest.mark.parametrize(
    ("source", "room", "inside", "up"),
    [
        ("from ainet_gym.sim.workload import decompose", "scenario", False, True),
        ("import ainet_gym.envs.env", "sim", False, True),
        ("from ainet_gym.scenario.spec import Scenario", "sim", False, False),
        ("from ainet_gym.bench.instances import cluster_scenario", "checks", False, False),
        ("def f():\n    from ainet_gym.sim.workload import decompose", "scenario", False, False),
        ("def f():\n    from ainet_gym.sim.workload import decompose", "scenario", True, True),
    ],
)
def test_upward_import_check_finds_the_imports_it_must(
    source: str, room: str, inside: bool, up: bool
) -> None:
    assert bool(upward_imports(source, room, inside_functions=inside)) == up


#: the compiled backend's package: all the package's compiled code (issue 31 item 1)
_COMPILED_HOME = "sim/backends/numba/"
#: numba's compiling decorators and the names they are imported under
_COMPILERS = frozenset({"njit", "jit", "generated_jit", "vectorize", "guvectorize", "cfunc", "intrinsic",
                        "overload", "overload_method", "register_jitable", "stencil"})  # fmt: skip
#: modules outside the package that import numba without compiling anything, each for a stated reason
_NUMBA_OUTSIDE = {"bench/machine.py": "reads numba's version for the benchmark's header"}


def _compiled_code(source: str, rel: str) -> list[str]:
    """The places in ``source`` (the module ``rel``) that hold compiled code or import numba: an import of
    ``numba`` (or of one of its modules), a compiling decorator imported from anywhere (``njit`` of the
    package's ``jit`` module), or a function decorated with one; none in :data:`_COMPILED_HOME`."""
    if rel.startswith(_COMPILED_HOME):
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"{rel}:{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "numba"
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] == "numba":
                found.append(f"{rel}:{node.lineno}: from {node.module} import ...")
            elif node.module != "ainet_gym.sim.backends.numba" and any(
                a.name in _COMPILERS for a in node.names
            ):
                found.append(f"{rel}:{node.lineno}: imports a compiler from {node.module}")
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            for d in node.decorator_list:
                f = d.func if isinstance(d, ast.Call) else d
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in _COMPILERS:
                    found.append(f"{rel}:{node.lineno}: @{name} {node.name}")
    return found


def test_compiled_code_lives_in_the_compiled_backend_only() -> None:
    """Every compiled function of the package (and every import of numba) is in ``sim/backends/numba/``: the
    rest of the package calls its kernels and never compiles one (the numpy backend runs without numba)."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel not in _NUMBA_OUTSIDE:
            found += _compiled_code(path.read_text(), rel)
    assert not found, "compiled code outside sim/backends/numba/:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "rel", "compiled"),
    [
        ("@njit(cache=True)\ndef f(x):\n    return x", "sim/metrics.py", True),
        ("@numba.njit\ndef f(x):\n    return x", "envs/observation.py", True),
        ("from ainet_gym.sim.backends.numba.jit import njit", "sim/records.py", True),
        ("from numba.experimental import structref", "sim/records.py", True),
        ("import numba.core.types", "sim/state.py", True),
        ("@intrinsic\ndef f(typingctx, x):\n    pass", "sim/world.py", True),
        ("@njit(cache=True)\ndef f(x):\n    return x", "sim/backends/numba/fill.py", False),  # its home
        ("from ainet_gym.sim.backends.numba.fill import solve_fill", "sim/allocator.py", False),  # a call
        ("from ainet_gym.sim.backends.numba import jit", "sim/backends/__init__.py", False),  # a module
        ("@dataclass\nclass A:\n    x: int", "sim/state.py", False),
    ],
)
def test_compiled_code_check_finds_the_code_it_must(source: str, rel: str, compiled: bool) -> None:
    assert bool(_compiled_code(source, rel)) is compiled
