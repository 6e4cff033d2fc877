"""The agent registry: every policy that ``ainet-gym evaluate`` and ``ainet-gym demo`` can run.

An *agent* maps the state of an :class:`~ainet_gym.envs.env.EnvCore` (``batch`` instances of one scenario)
to what the core steps with. It acts at one of two levels:

- ``"engine"``: :meth:`Agent.act` returns a split ``(connections, max_paths)`` of every connection and
  the evaluator calls ``core.step_split(split)``. The heuristic baselines act here, so that they are
  evaluated exactly (a fixed-size action cannot express every routing, e.g. spraying in path mode);
- ``"action"``: :meth:`Agent.act` returns a batch of actions ``(batch, *action_space.shape)`` and the
  evaluator calls ``core.step(actions)``. Learned agents act here, through the same action space they
  were trained on.

Both kinds run on the same env class with the same seeds and episode length. A registry entry is a
factory ``factory(arg) -> Agent``; a policy string ``"NAME"`` or ``"NAME:ARG"`` (``ppo:runs/x/model.zip``)
selects the entry ``NAME`` and passes ``ARG`` (``None`` without a colon). Entries that declare
``variants`` also accept ``"NAME@VARIANT"`` (the baselines: ``spray@path`` runs spray through the
``path`` action space instead of at the engine level) and get ``VARIANT`` as the argument.

Adding an agent: write a class with the attributes and methods of :class:`Agent` and register a factory::

    from ainet_gym.agents.registry import register_agent

    class AlwaysFirstPath:
        name = "first"
        level = "engine"
        env_kwargs = {}

        def check(self, core): ...
        def reset(self, core): ...

        def act(self, core, obs):
            split = np.zeros((core.candidate_paths.shape[0], core.P))  # (connections, max paths)
            split[:, 0] = 1.0
            return split

    register_agent("first", lambda arg: AlwaysFirstPath(), description="every connection on path 0")

after which ``evaluate(EvalConfig(policies=["ecmp", "first"]))`` evaluates it. For the command line,
publish the registration as a plug-in: a package declares an entry point in the group
``ainet_gym.agents`` that names a function calling :func:`register_agent`::

    [project.entry-points."ainet_gym.agents"]
    first = "mypkg.agents:register"

and ``ainet-gym evaluate SCENARIO --policies ecmp,first`` finds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ainet_gym.errors import choice_message

if TYPE_CHECKING:
    from ainet_gym.envs.env import EnvCore

__all__ = [
    "AGENTS",
    "ENTRY_POINT_GROUP",
    "Agent",
    "AgentEntry",
    "available_policies",
    "make_agent",
    "parse_policies",
    "register_agent",
]


@runtime_checkable
class Agent(Protocol):
    """What the evaluator needs from a policy.

    Attributes
    ----------
    name
        Label in tables, JSON and figures.
    level
        ``"engine"`` (:meth:`act` returns a split for ``core.step_split``) or ``"action"`` (:meth:`act`
        returns actions for ``core.step``).
    env_kwargs
        Keyword arguments of :class:`~ainet_gym.envs.env.EnvCore` the agent needs (``action_mode``,
        ``history``, ``observation``); empty for engine-level agents.
    """

    name: str
    level: str
    env_kwargs: dict[str, Any]

    def check(self, core: EnvCore) -> None:
        """Raise ``ValueError`` if the agent cannot act on ``core`` (e.g. a model trained on another
        observation or action shape)."""
        ...

    def reset(self, core: EnvCore) -> None:
        """Called after every ``core.reset``."""
        ...

    def act(self, core: EnvCore, obs: Any) -> np.ndarray:
        """A split ``(connections, max_paths)`` (engine level) or actions ``(batch, ...)`` (action level)."""
        ...


@dataclass(frozen=True)
class AgentEntry:
    """A registered agent factory."""

    name: str
    factory: Callable[[str | None], Agent]
    needs_arg: bool  # True: "NAME:ARG" required (e.g. a model path); False: "NAME" only
    arg_help: str  # e.g. "PATH" (shown in the allowed values)
    description: str
    variants: tuple[str, ...] = ()  # allowed "NAME@VARIANT" suffixes (entries without needs_arg)
    optional_arg: bool = False  # "NAME" and "NAME:ARG" both accepted (entries without needs_arg)


AGENTS: dict[str, AgentEntry] = {}
#: functions ``name -> factory or None`` that :func:`make_agent` asks for a name no entry has (families of
#: names with a parameter in the name, e.g. the weighted baselines ``favour{j}-w{W}+bg``); a resolver may raise
#: a one-line ``ValueError`` for a misspelt member of its family
RESOLVERS: list[Callable[[str], Callable[[str | None], Agent] | None]] = []


def register_agent(
    name: str,
    factory: Callable[[str | None], Agent],
    *,
    needs_arg: bool = False,
    arg_help: str = "ARG",
    description: str = "",
    variants: tuple[str, ...] = (),
    overwrite: bool = False,
    optional_arg: bool = False,
) -> None:
    """Register ``factory`` under ``name``.

        ``factory(arg)`` gets the text after ``NAME:`` (with ``needs_arg``, or ``optional_arg``: then
    ``NAME`` alone gives ``None``), or the variant after ``NAME@`` (one of ``variants``), or ``None``.

        Raises
        ------
        ValueError
            If ``name`` is taken (and ``overwrite`` is False) or contains ``:`` or ``,``.
    """
    if not name or any(ch in name for ch in ":,@ "):
        raise ValueError(f"agent name {name!r}: must be non-empty, without ':', ',', '@' or spaces")
    if name in AGENTS and not overwrite:
        raise ValueError(f"agent name {name!r} is already registered (pass overwrite=True to replace it)")
    AGENTS[name] = AgentEntry(name, factory, needs_arg, arg_help, description, tuple(variants), optional_arg)


ENTRY_POINT_GROUP = "ainet_gym.agents"
_plugins_loaded = False


#: The built-in agents' modules: the one list _ensure_builtins imports and the order their agents are
#: listed in (that of an import of ainet_gym.agents.evaluate), whichever module a process imported first.
_BUILTIN_ORDER: tuple[str, ...] = tuple(
    f"ainet_gym.agents.{m}"
    for m in ("baselines", "sb3_agents", "graph_policy", "marl_agents", "predictive", "pretrained",
              "rllib_agent", "twin", "imitate", "qnet", "search")
)  # fmt: skip


def _ensure_builtins() -> None:
    """Import the built-in agents (they register on import) and, once, the plug-ins: every entry
    point of the group ``ainet_gym.agents`` (a function that calls :func:`register_agent`)."""
    global _plugins_loaded
    import importlib

    for module in _BUILTIN_ORDER:
        importlib.import_module(module)

    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            hook = ep.load()
            if callable(hook):
                hook()
        except Exception as e:
            raise RuntimeError(f"agent plug-in {ep.name!r} ({ep.value}) failed to load: {e}") from e


def available_policies() -> list[str]:
    """The allowed policy strings, e.g. ``["ecmp", ..., "ppo:PATH"]``: the built-in agents in a fixed
    order (:data:`_BUILTIN_ORDER`, then registration order within a module), then the others (plug-ins,
    agents registered at run time) in registration order."""
    _ensure_builtins()
    rank = {m: i for i, m in enumerate(_BUILTIN_ORDER)}
    entries = sorted(
        AGENTS.values(), key=lambda e: rank.get(getattr(e.factory, "__module__", ""), len(rank))
    )  # a stable sort: registration order within a module and among the others
    return [
        f"{e.name}:{e.arg_help}"
        if e.needs_arg
        else (f"{e.name}[:{e.arg_help}]" if e.optional_arg else e.name)
        for e in entries
    ]


def make_agent(spec: str) -> Agent:
    """The agent of a policy string ``NAME`` or ``NAME:ARG``.

    Raises
    ------
    ValueError
        If ``NAME`` is not registered, or the argument is missing or unexpected.
    FileNotFoundError
        From a learned agent's factory when its model file does not exist.
    """
    _ensure_builtins()
    spec = spec.strip()
    name, sep, arg = spec.partition(":")
    base, at, variant = name.partition("@")
    if base not in AGENTS:
        for resolve in RESOLVERS:
            factory = resolve(base)
            if factory is not None:
                if sep or at:
                    raise ValueError(
                        f"policy {spec!r}: {base} takes no argument or variant (write just {base!r})"
                    )
                return factory(None)
        raise ValueError(choice_message("policy", spec, available_policies()))
    entry = AGENTS[base]
    if entry.needs_arg:
        if not arg:
            raise ValueError(f"policy {spec!r}: needs an argument, {entry.name}:{entry.arg_help}")
        if at:
            raise ValueError(f"policy {spec!r}: {entry.name} has no '@' variants")
        return entry.factory(arg)
    if sep and entry.optional_arg and not at:
        return entry.factory(arg)
    if sep:
        raise ValueError(f"policy {spec!r}: {entry.name} takes no argument (write just {name!r})")
    if at:
        if variant not in entry.variants:
            allowed = [f"{base}@{v}" for v in entry.variants]
            raise ValueError(choice_message("policy", spec, allowed, problem=f"unknown variant {variant!r}"))
        return entry.factory(variant)
    return entry.factory(None)


def parse_policies(text: str | list[str]) -> list[str]:
    """Split a comma list of policy strings, dropping blanks and duplicates (order kept).

    Raises
    ------
    ValueError
        If the list is empty.
    """
    items = text if isinstance(text, list) else text.split(",")
    out: list[str] = []
    for p in (x.strip() for x in items):
        if p and p not in out:
            out.append(p)
    if not out:
        raise ValueError(f"policies {text!r}: empty; allowed: {', '.join(available_policies())}")
    return out
