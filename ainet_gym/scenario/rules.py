"""The scenario loader's vocabulary: :class:`ScenarioError`, the value rules every section applies (numbers,
integers, names, strings, ranges), the mapping helpers, and the documented ceilings :data:`LIMITS`.

A rule is a function ``(ctx, value, path) -> parsed value`` that raises :class:`ScenarioError` naming the
field path, the value and what is allowed. :mod:`ainet_gym.scenario.sections` composes them into the schema;
:mod:`ainet_gym.scenario.loader` is the entry point (``load_scenario``). ``LIMITS`` is one dict that every
module reads, so the documented override ``ainet_gym.scenario.loader.LIMITS[...] = x`` changes it everywhere.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# --------------------------------------------------------------------------- errors


class ScenarioError(ValueError):
    """A scenario that does not validate.

    ``str(err)`` is ``"<file>: <field.path>: <problem>; allowed: <allowed>"``, with ``(did you mean
    ...?)`` appended when there is a close match. Attributes: ``source`` (file, or ``"<dict>"``),
    ``field`` (dotted path with list indices, e.g. ``workload.jobs[2].collectives[0].bytes``; ``""``
    for file-level problems), ``value`` (the offending value), ``problem``, ``allowed``, ``hint``.
    """

    def __init__(
        self,
        source: str,
        field: str,
        problem: str,
        allowed: str = "",
        value: Any = None,
        hint: str | None = None,
    ) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        self.allowed = allowed
        self.value = value
        self.hint = hint
        msg = ": ".join([p for p in (source, field) if p] + [problem])
        if allowed:
            msg += f"; allowed: {allowed}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)

    def __reduce__(self):  # picklable across processes (vector envs)
        return (type(self), (self.source, self.field, self.problem, self.allowed, self.value, self.hint))


def did_you_mean(value: Any, choices: Iterable[Any]) -> str | None:
    if not isinstance(value, str):
        return None
    choices = [str(c) for c in choices]
    norm = value.strip().lower().replace("-", "_").replace(" ", "_")
    match = difflib.get_close_matches(norm, choices, n=1, cutoff=0.6)
    if not match and norm != value:
        match = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    if not match and len(norm) >= 3:  # a prefix of a longer name: 'rate' -> 'rate_per_step'
        match = [c for c in choices if c.startswith(norm) or norm.startswith(c)][:1]
    return f"did you mean {match[0]!r}?" if match else None


class Context:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str, allowed: str = "", value: Any = None, choices=None):
        hint = did_you_mean(value, choices) if choices is not None else None
        raise ScenarioError(self.source, path, problem, allowed, value, hint)


def join_path(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def describe(v: Any) -> str:
    """Human description of a value's type and value, for 'got ...' messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {v}"
    if isinstance(v, str):  # a long one (a whole file given as the scenario) is not echoed
        return f"string {v!r}" if len(v) <= 80 else f"string {v[:60]!r}... ({len(v):,} characters)"
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, list | tuple):
        return "a list"
    if isinstance(v, numbers.Integral) and abs(int(v)) >= 10**30:
        return _digits(v)
    if isinstance(v, LongNumber):
        return repr(v)
    if isinstance(v, numbers.Number):
        return f"{v!r}"
    return f"{type(v).__name__} {v!r}"[:200]


def _digits(v: int) -> str:
    """``"an integer of N digits"`` (for integers too long to print; Python refuses above 4,300 digits)."""
    return f"an integer of about {max(1, int(abs(int(v)).bit_length() * 0.30103) + 1):,} digits"


def _fmt(x: float) -> str:
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        if abs(x) < 10**30:
            return str(int(x))
        if abs(x) >= 10**300:
            return _digits(x)
    x = float(x)
    if abs(x) >= 1e16 or (x != 0 and abs(x) < 1e-4):
        return f"{x:.6g}"
    return str(int(x)) if x.is_integer() else repr(x)


# --------------------------------------------------------------------------- scalar rules

Rule = Callable[[Context, Any, str], Any]


def _range_text(noun: str, ge=None, gt=None, le=None, lt=None) -> str:
    lo, lo_open = (gt, True) if gt is not None else (ge, False)
    hi, hi_open = (lt, True) if lt is not None else (le, False)
    if lo is not None and hi is not None:
        return f"{noun} in {'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{noun} {'>' if lo_open else '>='} {_fmt(lo)}"
    if hi is not None:
        return f"{noun} {'<' if hi_open else '<='} {_fmt(hi)}"
    return noun


def _check_range(ctx: Context, x: float, path: str, allowed: str, ge=None, gt=None, le=None, lt=None) -> None:
    if (
        (ge is not None and x < ge)
        or (gt is not None and x <= gt)
        or (le is not None and x > le)
        or (lt is not None and x >= lt)
    ):
        ctx.fail(path, f"{_fmt(x)} is out of range", allowed, value=x)


def num_rule(
    what: str = "a number", *, ge=None, gt=None, le=None, lt=None, null: bool = False, note: str = ""
) -> Rule:
    allowed = _range_text("a number", ge=ge, gt=gt, le=le, lt=lt) + (" or null" if null else "") + note

    def rule(ctx: Context, v: Any, path: str) -> float | None:
        if v is None and null:
            return None
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            ctx.fail(path, f"expected {what}, got {describe(v)}", allowed, value=v)
        try:
            x = float(v)
        except OverflowError:  # an integer beyond the float range
            ctx.fail(path, f"expected a finite number, got {describe(v)}", allowed, value=None)
        if not math.isfinite(x):
            ctx.fail(path, f"expected a finite number, got {v!r}", allowed, value=v)
        _check_range(ctx, x, path, allowed, ge=ge, gt=gt, le=le, lt=lt)
        return x

    return rule


def int_rule(what: str = "an integer", *, ge=None, gt=None, le=None, null: bool = False) -> Rule:
    allowed = _range_text("an integer", ge=ge, gt=gt, le=le) + (" or null" if null else "")

    def rule(ctx: Context, v: Any, path: str) -> int | None:
        if v is None and null:
            return None
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            ctx.fail(path, f"expected {what}, got {describe(v)}", allowed, value=v)
        if isinstance(v, numbers.Integral):
            n = int(v)
        else:
            x = float(v)
            if not (math.isfinite(x) and x.is_integer()):
                ctx.fail(path, f"expected {what}, got non-integral {v!r}", allowed, value=v)
            n = int(x)
        _check_range(ctx, n, path, allowed, ge=ge, gt=gt, le=le)
        return n

    return rule


def enum_rule(choices: tuple[str, ...], what: str) -> Rule:
    allowed = ", ".join(choices)

    def rule(ctx: Context, v: Any, path: str) -> str:
        if not isinstance(v, str):
            ctx.fail(path, f"expected a {what} name, got {describe(v)}", allowed, value=v)
        if v not in choices:
            ctx.fail(path, f"{v!r} is not a known {what}", allowed, value=v, choices=choices)
        return v

    return rule


def text_rule(what: str = "a string", *, nonempty: bool = False, null: bool = False) -> Rule:
    allowed = ("a non-empty string" if nonempty else "a string") + (" or null" if null else "")

    def rule(ctx: Context, v: Any, path: str) -> str | None:
        if v is None and null:
            return None
        if not isinstance(v, str):
            ctx.fail(path, f"expected {what}, got {describe(v)}", allowed, value=v)
        if nonempty and not v.strip():
            ctx.fail(path, f"expected {what}, got an empty string", allowed, value=v)
        return v

    return rule


#: Ceilings of single values and of the size of a scenario, checked by :func:`load_scenario` so that a
#: scenario that would hang or exhaust memory is refused with the key to change instead of being built.
#: Documented and overridable (``ainet_gym.scenario.loader.LIMITS["memory_gib"] = 64``, before loading):
#:
#: - ``gbps_min``/``gbps_max``: any link speed or offered rate, Gbit/s (1 Mbit/s .. 1 Pbit/s);
#: - ``bytes_max``: a collective's buffer size (1 PB); ``time_ms_max``: compute, start and decision times
#:   (1e7 ms, about 2.8 hours); ``latency_us_max``: per-hop latency (1 s); ``efficiency_min``;
#: - ``packet_bytes_max``: ``fabric.store_and_forward_bytes`` (1 MB, beyond any packet or cell);
#: - ``count_max``: any count of switches, hosts, links per spine, GPUs per host, flows, QPs or job slots;
#: - ``steps_max``: episode length and step counts; ``arrival_rate_max``: mean job arrivals per step;
#: - ``skew_max``: Zipf exponent of a skewed AllToAll; ``max_paths_max``: ``routing.max_paths``;
#: - ``chunks_max``: ``chunks`` of a pipelined collective; ``chunk_flows``: its ``chunks x 2 x gpus``, about
#:   the flows the engine tracks for it (every chunk of every stage is a phase of its own flows);
#: - ``gpus``, ``links``: GPUs and directed links of the fabric (estimated from the spec);
#: - ``ecmp_set``: equal-cost paths between two leaves, enumerated before the ``max_paths`` cap;
#: - ``iterations_per_interval``: iterations of the fastest job in one decision interval: the interval
#:   over an upper bound of the job's ideal step (:mod:`ainet_gym.scenario.estimate`: alpha-beta at the
#:   bottleneck link, within [1, 2] x the ideal twin's step, so the estimate lies in [true / 2, true]);
#:   each iteration costs a few engine events;
#: - ``memory_gib``: the estimated memory of building and running one copy of the scenario, further
#:   capped at 80% of the machine's physical memory;
#: - ``file_bytes``: a scenario, GraphML or edge-list file (read only below it: 64 MiB);
#: - ``yaml_depth``: nesting of lists and mappings in a scenario file or dict;
#: - ``number_digits``: digits of any number written in a scenario or graph file (a seed included);
#: - ``history_max``: the env's ``history`` (intervals of link utilisation in the observation), also the
#:   most a model's metadata may ask for;
#: - ``link_windows_max``: ``simulate --link-windows``; ``records_max``: the per-link and per-connection
#:   records of ``simulate --links/--flows`` over all steps.
LIMITS: dict[str, float] = {
    "gbps_min": 1e-3,
    "gbps_max": 1e6,
    "bytes_max": 1e15,
    "time_ms_max": 1e7,
    "latency_us_max": 1e6,
    "packet_bytes_max": 1e6,
    "efficiency_min": 1e-3,
    "count_max": 100_000,
    "steps_max": 10_000_000,
    "arrival_rate_max": 1_000,
    "skew_max": 16,
    "max_paths_max": 256,
    "chunks_max": 1024,
    "chunk_flows": 1_000_000,
    "gpus": 65_536,
    "links": 1_000_000,
    "ecmp_set": 65_536,
    "iterations_per_interval": 10_000,
    "memory_gib": 16,
    "file_bytes": 64 * 2**20,
    "yaml_depth": 64,
    "number_digits": 100,
    "link_windows_max": 1_000,
    "history_max": 1_000,
    "records_max": 50_000_000,
}

SPEED = num_rule(
    "a link speed in Gbit/s", ge=LIMITS["gbps_min"], le=LIMITS["gbps_max"], note=" (Gbit/s per direction)"
)
COUNT = int_rule("a count", ge=1, le=LIMITS["count_max"])
STEPS = int_rule("a number of decision steps", ge=1, le=LIMITS["steps_max"])
PROBABILITY = num_rule("a probability", ge=0, le=1)
FRACTION = num_rule("a fraction", ge=0, le=1)


# --------------------------------------------------------------------------- structure helpers


def spec_default(cls, name: str) -> Any:
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise KeyError(name)


def as_mapping(ctx: Context, v: Any, path: str, keys: Iterable[str], what: str) -> Mapping:
    keys = tuple(keys)
    if not isinstance(v, Mapping):
        ctx.fail(
            path, f"expected a mapping ({what}), got {describe(v)}", f"a mapping with keys {', '.join(keys)}"
        )
    for k in v:
        if k not in keys:
            ctx.fail(join_path(path, k), f"unknown key {k!r}", ", ".join(keys), value=str(k), choices=keys)
    return v


def optional_mapping(
    ctx: Context, d: Mapping, key: str, path: str, keys: Iterable[str], what: str
) -> Mapping:
    """A sub-mapping that may be absent or null (meaning: all defaults)."""
    v = d.get(key)
    if v is None:
        return {}
    return as_mapping(ctx, v, join_path(path, key), keys, what)


def as_list(ctx: Context, v: Any, path: str, what: str, null_ok: bool = True) -> list:
    if v is None and null_ok:
        return []
    if isinstance(v, str | bytes) or not isinstance(v, list | tuple):
        ctx.fail(path, f"expected a list ({what}), got {describe(v)}", f"a list of {what}")
    return list(v)


def require_keys(ctx: Context, d: Mapping, path: str, keys: Iterable[str], allowed: dict[str, str]) -> None:
    for k in keys:
        if k not in d:
            ctx.fail(join_path(path, k), f"required field {k!r} is missing", allowed[k])


def apply_rules(ctx: Context, d: Mapping, path: str, rules: dict[str, Rule | None]) -> dict[str, Any]:
    """Validate the keys of `d` that have a scalar rule; return the converted values (absent keys left out,
    so the dataclass default applies)."""
    return {
        k: rule(ctx, d[k], join_path(path, k)) for k, rule in rules.items() if rule is not None and k in d
    }


class LongNumber:
    """A number written with more than ``LIMITS["number_digits"]`` digits, left unparsed (Python refuses
    integers above 4,300 digits, and none fits a field): the field's rule refuses it by name."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"a number of {self.digits:,} digits (above LIMITS['number_digits'] = {int(LIMITS['number_digits'])})"
