"""Scenario files: YAML read safely (``1e9`` as a float, duplicate keys refused; file size, nesting depth and
digits capped by :data:`ainet_gym.scenario.rules.LIMITS`), the shipped scenario folder, and names resolved
to files.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ainet_gym.scenario.rules import LIMITS, LongNumber, ScenarioError, did_you_mean
from ainet_gym.scenario.sections.top import TOP_KEYS

# --------------------------------------------------------------------------- YAML and files


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads 1e9 as a float (YAML 1.2 style), rejects duplicate mapping keys (a key a
    merge ``<<: *anchor`` brings in may be overridden: that is what merging is for) and numbers of more
    than ``LIMITS["number_digits"]`` digits."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:  # the keys written in this mapping, before merging
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    dup = key in seen
                except TypeError:  # unhashable key: let SafeLoader report it
                    continue
                if dup:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def _too_long(self, node: yaml.ScalarNode) -> LongNumber | None:
        n = sum(ch.isdigit() for ch in str(node.value))
        return LongNumber(n) if n > LIMITS["number_digits"] else None

    def construct_yaml_int(self, node):
        return self._too_long(node) or super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        return self._too_long(node) or super().construct_yaml_float(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def _yaml_depth_ok(text: str, source: str, path: Path) -> None:
    """Refuse lists and mappings nested deeper than ``LIMITS["yaml_depth"]`` before PyYAML composes them
    (its composer recurses once per level): the event stream is read iteratively."""
    depth = 0
    limit = int(LIMITS["yaml_depth"])
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                mark = ev.start_mark
                where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
                raise ScenarioError(
                    source,
                    "",
                    f"lists and mappings nested more than {limit} deep{where} "
                    "(ainet_gym.scenario.loader.LIMITS['yaml_depth'])",
                    "a scenario mapping (a few levels deep)",
                    str(path),
                )
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


class _TooDeep(Exception):
    """Raised by :class:`_DepthLoader` at the first list or mapping nested deeper than ``LIMITS["yaml_depth"]``."""


class _DepthLoader(_Loader):
    """:class:`_Loader` that counts the lists and mappings open as it composes them and stops
    (:class:`_TooDeep`) at the first one nested deeper than ``LIMITS["yaml_depth"]``: the limit of
    :func:`_yaml_depth_ok` in the same pass as the load (the composer recurses once per level, so it stops
    long before Python's recursion limit). :func:`read_yaml` reads with it first."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._depth_limit = int(LIMITS["yaml_depth"])

    def _open(self) -> None:
        self._depth += 1
        if self._depth > self._depth_limit:
            raise _TooDeep

    def compose_sequence_node(self, anchor):
        self._open()
        node = super().compose_sequence_node(anchor)
        self._depth -= 1
        return node

    def compose_mapping_node(self, anchor):
        self._open()
        node = super().compose_mapping_node(anchor)
        self._depth -= 1
        return node


def _load_yaml(text: str, source: str, path: Path) -> Any:
    """The document of ``text``: one pass of :class:`_DepthLoader` (the YAML parsed once); if that pass
    fails in any way, the two passes of before (:func:`_yaml_depth_ok` over the whole stream, then the load),
    so that every error is the one they raise (a nesting error before a later syntax error, a second
    document's nesting before the single-document error, ...). A pass that succeeds has composed the whole
    stream (a single document, nested at most ``LIMITS["yaml_depth"]``) with the same constructors: the
    same data as the two passes."""
    with contextlib.suppress(Exception):  # any failure: the two passes below name it as before
        return yaml.load(text, Loader=_DepthLoader)  # a SafeLoader subclass
    _yaml_depth_ok(text, source, path)
    return yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader subclass


def read_text_capped(path: Path, what: str, limit: float | None = None) -> str:
    """The UTF-8 text of ``path``, refused unread above ``limit`` bytes (default
    ``LIMITS["file_bytes"]``).

    Raises
    ------
    OSError
        If the file cannot be read.
    UnicodeDecodeError
        If it is not UTF-8.
    ValueError
        If it is larger than the ceiling (the message names ``what``, the size and the key).
    """
    cap = int(LIMITS["file_bytes"] if limit is None else limit)
    with open(path, "rb") as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise ValueError(
            f"{what}: larger than {cap:,} bytes (ainet_gym.scenario.loader.LIMITS['file_bytes']); not reading it"
        )
    return data.decode("utf-8")


def read_yaml(path: Path, source: str) -> Any:
    try:
        text = read_text_capped(path, str(path))
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(
            source, "", f"cannot read the file: {e}", "a readable UTF-8 YAML file", str(path)
        ) from e
    except ValueError as e:
        raise ScenarioError(
            source, "", str(e).split(": ", 1)[-1], "a smaller scenario file", str(path)
        ) from None
    try:
        return _load_yaml(text, source, path)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ScenarioError(
            source,
            "",
            f"YAML syntax error{where}: {problem}",
            f"a YAML mapping with keys {', '.join(TOP_KEYS)}",
            str(path),
        ) from None
    except RecursionError:  # defensive: the depth check above should stop it first
        raise ScenarioError(
            source, "", "nested too deeply", "a scenario mapping (a few levels deep)", str(path)
        ) from None


def scenarios_dir() -> Path:
    """Directory of the shipped scenarios: ``$AINET_GYM_SCENARIOS`` if set, else ``<repo>/scenarios`` if it
    exists, else ``ainet_gym/scenarios`` (the installed package data)."""
    env = os.environ.get("AINET_GYM_SCENARIOS")
    if env:
        return Path(env).expanduser()
    package = Path(__file__).resolve().parents[1]  # ainet_gym/
    repo = package.parent / "scenarios"
    return repo if repo.is_dir() else package / "scenarios"


def _shipped() -> list[Path]:
    d = scenarios_dir()
    return sorted(d.glob("*.yaml"), key=lambda p: p.stem) if d.is_dir() else []


def list_scenarios() -> list[tuple[str, str]]:
    """``(name, one-line description)`` of every shipped scenario (``<scenarios_dir()>/<name>.yaml``),
    sorted by name. The description is the first non-empty line of the YAML ``description``."""
    out = []
    for p in _shipped():
        try:
            data = yaml.load(p.read_text(encoding="utf-8"), Loader=_Loader)
            desc = data.get("description", "") if isinstance(data, Mapping) else ""
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            desc = "(unreadable: YAML error)"
        lines = [ln.strip() for ln in str(desc or "").splitlines() if ln.strip()]
        out.append((p.stem, lines[0] if lines else ""))
    return out


def resolve_scenario_path(arg: str | os.PathLike) -> Path:
    if not os.fspath(arg).strip():
        raise ScenarioError(
            "<empty>",
            "",
            "the scenario name is empty",
            "a path to a YAML file, or a shipped scenario name",
            arg,
        )
    path = Path(arg).expanduser()
    if path.is_file():
        return path
    text = os.fspath(arg)
    if "/" not in text and os.sep not in text:
        d = scenarios_dir()
        for cand in (d / f"{text}.yaml", d / text):
            if cand.is_file():
                return cand
    names = [p.stem for p in _shipped()]
    listing = ", ".join(names) if names else f"(none found in {scenarios_dir()})"
    stem = Path(text).name.removesuffix(".yaml").removesuffix(".yml")
    hint = did_you_mean(stem, names)
    problem = (
        "is a directory, not a scenario file"
        if path.is_dir()
        else "no such scenario file or shipped scenario"
    )
    raise ScenarioError(
        text, "", problem, f"a path to a YAML file, or a shipped scenario name: {listing}", text, hint
    )


def check_dict_depth(top: Mapping) -> None:
    """Refuse a scenario dict whose lists and mappings nest deeper than ``LIMITS["yaml_depth"]`` (checked
    iteratively, before anything recurses into it)."""
    limit = int(LIMITS["yaml_depth"])
    stack: list[tuple[Any, int]] = [(top, 1)]
    seen = 0
    while stack:
        v, d = stack.pop()
        seen += 1
        if d > limit:
            raise ScenarioError(
                "<dict>",
                "",
                f"lists and mappings nested more than {limit} deep "
                "(ainet_gym.scenario.loader.LIMITS['yaml_depth'])",
                "a scenario mapping (a few levels deep)",
            )
        if seen > 10_000_000:
            raise ScenarioError("<dict>", "", "more than 10,000,000 values", "a scenario of a sensible size")
        if isinstance(v, Mapping):
            stack.extend((x, d + 1) for x in v.values() if isinstance(x, Mapping | list | tuple))
        elif isinstance(v, list | tuple):
            stack.extend((x, d + 1) for x in v if isinstance(x, Mapping | list | tuple))
