"""mkdocs hook: the pages generated at build time from the code (as Gymnasium's docs/_scripts/gen_mds.py).

- ``environments/<Name>.md``: one page per id of the gymnasium registry under ``ainet_gym/`` (the ids are read
  from the registry, so every id registered by ``import ainet_gym`` gets its page, the per-mode ids
  included), with the spaces of an env made from that id and the spec in its entry point's docstring;
  the table of ids on ``environments/index.md`` (the marker ``<!-- generated: env-ids -->``) and the
  spec itself (``<!-- generated: env-spec -->``).
- ``scenarios/gallery.md``: every ``scenarios/*.yaml`` (and ``scenarios/crosscheck/*.yaml``) with its
  description, the header comment that documents it, its size and the file itself.
- ``api/index.md`` and ``api/<name>.md``: one mkdocstrings page per name of ``ainet_gym.__all__``, plus the
  classes a user meets next (the env classes, the SB3 adapter, the reward interface, the agent registry).
- ``reference/cli.md``: ``ainet-gym --help`` and the help of every subcommand, from the CLI's own parser.

The nav entries of the generated pages are appended to the nav sections titled "Environments" and
"API reference" of mkdocs.yml. Anything that fails here fails the build: a page that cannot be made from the
code is a documentation bug.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from pathlib import Path
from typing import Any

ENV_SECTION = "Environments"
API_SECTION = "API reference"
#: names beyond ``ainet_gym.__all__`` that get an API page: what a user of the envs and agents meets next
MORE_API = {
    "FabricRoutingEnv": "ainet_gym.envs.gym_env.FabricRoutingEnv",
    "FabricRoutingVectorEnv": "ainet_gym.envs.vector_env.FabricRoutingVectorEnv",
    "EnvCore": "ainet_gym.envs.core.EnvCore",
    "SB3VecEnv": "ainet_gym.envs.sb3_vec_env.SB3VecEnv",
    "RewardFn": "ainet_gym.envs.rewards.RewardFn",
    "RoutingContext": "ainet_gym.routing.context.RoutingContext",
    # the keys of crosscheck(..., details=...): the contract of what its result leaves out
    "CrosscheckDetails": "ainet_gym.checks.crosscheck.compare.CrosscheckDetails",
}

_pages: dict[str, str] = {}  # generated path (under docs/) -> Markdown
_nav: dict[str, list[dict[str, Any]]] = {}  # nav section title -> entries to append
_fills: dict[str, dict[str, str]] = {}  # page path -> {marker: Markdown}


# ----------------------------------------------------------------------------------------------- helpers


def _rst_to_md(text: str) -> str:
    """Docstring text to Markdown: Sphinx roles (``:class:`~a.b.C```) become code spans of the name."""

    def role(m: re.Match) -> str:
        target = m.group(1)
        if target.startswith("~"):
            target = target[1:].rsplit(".", 1)[-1]
        return f"`{target}`"

    return re.sub(r":(?:class|func|meth|attr|data|mod|obj|exc):`([^`]+)`", role, text)


def _demote(md: str, levels: int = 1) -> str:
    """Headings of ``md`` moved ``levels`` deeper (a docstring's ``## Description`` under a page section)."""
    out, fence = [], False
    for line in md.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        if not fence and re.match(r"#{1,5} ", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


def _docstring_sections(doc: str) -> dict[str, str]:
    """``## Title`` sections of a Markdown docstring: title -> body ("" holds the text before the first)."""
    sections: dict[str, list[str]] = {"": []}
    cur = ""
    for line in doc.splitlines():
        m = re.match(r"##\s+(.+?)\s*$", line)
        if m:
            cur = m.group(1)
            sections[cur] = []
        else:
            sections[cur].append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


def _mode_bullet(action_section: str, mode: str) -> str | None:
    """The bullet of ``action_section`` that describes ``mode`` (``- ``"mode"``: ...`` and its indented
    continuation lines), or None."""
    lines = action_section.splitlines()
    for i, line in enumerate(lines):
        if re.match(rf'-\s+``"{re.escape(mode)}"``', line):
            out = [line]
            for cont in lines[i + 1 :]:
                if cont.startswith("  ") and cont.strip():
                    out.append(cont)
                else:
                    break
            return "\n".join(out)
    return None


def _header_comment(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """The header comment of a scenario file: its first line and its paragraphs as (label, text): a
    labelled paragraph (``What it models: ...`` -> ("What it models", "...")), a list item ("-", text) or
    plain text ("", text)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].rstrip()[1:] if line[1:].startswith(" ") else line[1:].rstrip())
    if not lines:
        return "", []
    first, body = lines[0].strip(), lines[1:]
    paras: list[tuple[str, str]] = []
    label_re = re.compile(r"^([A-Z][A-Za-z ,'/-]{1,40}?(?: \([^)]*\))?):\s+(.*)$")
    for raw in body:
        line = raw.strip()
        if not line:
            paras.append(("", ""))
            continue
        m = label_re.match(line)
        if line.startswith("- "):
            paras.append(("-", line[2:]))
        elif m and not raw.startswith(" "):
            paras.append((m.group(1), m.group(2)))
        elif paras and paras[-1][1]:
            label, text = paras[-1]
            paras[-1] = (label, f"{text} {line}")
        else:
            paras.append(("", line))
    return first, [p for p in paras if p[1]]


def _paragraphs_md(paras: list[tuple[str, str]]) -> list[str]:
    """Markdown of :func:`_header_comment`'s paragraphs: bold labels, list items as a list."""
    md: list[str] = []
    for k, (label, text) in enumerate(paras):
        if label == "-":
            if k == 0 or paras[k - 1][0] != "-":
                md.append("")
            md.append(f"- {text}")
            if k + 1 == len(paras) or paras[k + 1][0] != "-":
                md.append("")
        else:
            md += [f"**{label}:** {text}" if label else text, ""]
    return md


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")


# ------------------------------------------------------------------------------------------ environments


def _plan_rows(mode: str) -> list[str]:
    """Table rows naming the routing plans of a discrete ``choose`` mode, from the code (none otherwise)."""
    try:
        from ainet_gym.routing.plans import CHOOSE_MODES, plans_of_mode
    except ImportError:
        return []
    if mode not in CHOOSE_MODES:
        return []
    cls, plans = plans_of_mode(mode)
    listed = ", ".join(f"{k} `{name}`" for k, name in enumerate(plans))
    return [f"| Plans (action -> baseline) | {listed} (class `{cls}`, `ainet_gym.routing.plans.PLANS`) |"]


def _env_pages() -> None:
    import gymnasium as gym

    import ainet_gym  # noqa: F401  (registers the ids)
    from ainet_gym.scenario.loader import fabric_size, load_scenario, scenarios_dir

    ids = [i for i in gym.registry if i.startswith("ainet_gym/")]
    if not ids:
        raise RuntimeError("no ainet_gym/ id in the gymnasium registry: `import ainet_gym` registered none")
    rows = []
    spec_doc = None
    nav: list[dict[str, list[dict[str, str]]]] = []  # one sub-section per family (SpineLeaf, ...)
    for env_id in ids:
        spec = gym.registry[env_id]
        kwargs = dict(spec.kwargs)
        scenario = kwargs.get("scenario", "spine-leaf-2to1")
        mode = kwargs.get("action_mode", "split")
        env = gym.make(env_id, backend="numpy", disable_env_checker=True)
        try:
            core = env.unwrapped.core
            _, info = env.reset(seed=0)
            sc = load_scenario(scenario)
            size = fabric_size(sc.fabric)
            layout = core.obs_layout
            action_space, obs_space = env.action_space, env.observation_space
            episode_steps = core.episode_steps
        finally:
            env.close()
        module, _, cls = str(spec.entry_point).partition(":")
        doc = _rst_to_md(inspect.getdoc(getattr(importlib.import_module(module), cls)) or "")
        spec_doc = spec_doc or (str(spec.entry_point), doc)
        sections = _docstring_sections(doc)
        bullet = _mode_bullet(sections.get("Action Space", ""), mode)
        name = env_id.split("/", 1)[1]
        page = f"environments/{name}.md"
        scen_path = scenarios_dir() / f"{scenario}.yaml"
        tagline, paras = _header_comment(scen_path) if scen_path.is_file() else ("", [])
        desc = sc.description.strip().splitlines()[0] if sc.description.strip() else ""
        jobs = ", ".join(f"`{j.name}` ({j.gpus} GPUs)" for j in sc.jobs) or "none at the start"
        vec = spec.vector_entry_point or "-"
        md = [
            f"# {env_id}",
            "",
            f"{desc}.",
            "",
            "| field | value |",
            "|---|---|",
            f'| Make | `gymnasium.make("{env_id}")` |',
            f'| Vector env | `gymnasium.make_vec("{env_id}", num_envs=B, vectorization_mode="vector_entry_point")` |',
            f"| Entry point | `{spec.entry_point}` |",
            f"| Vector entry point | `{vec}` |",
            f"| Keyword arguments | `{kwargs}` |",
            f"| Default scenario | [`{scenario}`](../scenarios/gallery.md#{_slug(scenario)}) |",
            f"| Action mode | `{mode}` |",
            f"| Action space | `{action_space!r}` |",
            f"| Observation space | `{obs_space!r}` |",
            f"| `spec.max_episode_steps` | {spec.max_episode_steps} |",
            f"| Episode length (truncation) | {episode_steps} decision intervals |",
            f"| Fabric | `{sc.fabric.topology}`, {size['gpus']:,} GPUs, {size['links']:,} directed links |",
            f"| Jobs at reset | {jobs} |",
            f"| Reward | `{sc.reward.kind}` |",
            *_plan_rows(mode),
            "",
            f"## Action space (`{mode}` mode)",
            "",
            bullet if bullet else sections.get("Action Space", ""),
            "",
            "## Observation blocks",
            "",
            "The flat observation's blocks for this id (`env.unwrapped.core.obs_layout`); what each block holds is in",
            "the [specification](index.md#specification).",
            "",
            "| block | indices | size |",
            "|---|---|---:|",
        ]
        for k, sl in layout.items():
            md.append(
                f"| `{k}` | {sl.start}..{sl.stop - 1 if sl.stop > sl.start else sl.start} | {sl.stop - sl.start} |"
            )
        md += [
            "",
            "## Info keys",
            "",
            "The `info` dict of `reset` (and of every `step`) holds: "
            + ", ".join(f"`{k}`" for k in sorted(info))
            + ".",
            "",
            f"## The scenario: `{scenario}`",
            "",
        ]
        if tagline:
            md += [f"*{tagline}*", ""]
        md += _paragraphs_md(paras)
        md += [f"The file is [in the gallery](../scenarios/gallery.md#{_slug(scenario)}).", ""]
        _pages[page] = "\n".join(md)
        family = name.split("-", 1)[0]
        group = next((g for g in nav if family in g), None)
        if group is None:
            group = {family: []}
            nav.append(group)
        group[family].append({name: page})
        rows.append(
            f"| [`{env_id}`]({name}.md) | [`{scenario}`](../scenarios/gallery.md#{_slug(scenario)}) | "
            f"`{mode}` | `{action_space!r}` | {obs_space.shape} | {episode_steps} |"
        )
    _nav[ENV_SECTION] = nav
    table = [
        "| id | default scenario | action mode | action space | observation shape | episode length |",
        "|---|---|---|---|---|---:|",
        *rows,
    ]
    entry, doc = spec_doc
    spec_md = [f"From the docstring of `{entry.replace(':', '.')}`:", "", _demote(doc, 1)]
    _fills["environments/index.md"] = {
        "<!-- generated: env-ids -->": "\n".join(table),
        "<!-- generated: env-spec -->": "\n".join(spec_md),
    }


# -------------------------------------------------------------------------------------------- scenarios


def _scenario_entry(path: Path, env_of: dict[str, list[str]], rel: str) -> tuple[list[str], str]:
    from ainet_gym.scenario.loader import fabric_size, load_scenario

    sc = load_scenario(path)
    size = fabric_size(sc.fabric)
    name = path.stem
    tagline, paras = _header_comment(path)
    desc = " ".join(sc.description.split())
    all_ids = env_of.get(name, [])
    base = [i for i in all_ids if re.fullmatch(r"ainet_gym/[A-Za-z0-9]+-v\d+", i)] or all_ids[:1]
    ids = ", ".join(f"[`{i}`](../environments/{i.split('/', 1)[1]}.md)" for i in base)
    if len(all_ids) > len(base):
        ids += f" and {len(all_ids) - len(base)} per-mode ids"
    bg = f", {len(sc.background)} background sources" if sc.background else ""
    row = (
        f"| [`{name}`](#{_slug(name)}) | `{sc.fabric.topology}` | {size['gpus']:,} | "
        f"{len(sc.jobs)}{bg} | {sc.dynamics.episode_steps} | {ids or '-'} |"
    )
    md = [f"## {name}", "", desc, ""]
    if tagline:
        md += [f"*{tagline}*", ""]
    md += _paragraphs_md(paras)
    facts = f"`{sc.fabric.topology}`, {size['gpus']:,} GPUs, {size['links']:,} directed links"
    md += [f"Fabric: {facts}; episode: {sc.dynamics.episode_steps} decision intervals."]
    if ids:
        md += [f"Default scenario of {ids}."]
    text = path.read_text(encoding="utf-8")
    md += [
        "",
        f'??? note "{rel}"',
        "",
        "    ```yaml",
        *[f"    {ln}" if ln else "" for ln in text.splitlines()],
    ]
    md += ["    ```", ""]
    return md, row


def _gallery() -> None:
    import gymnasium as gym

    from ainet_gym.scenario.loader import scenarios_dir

    env_of: dict[str, list[str]] = {}
    for i in gym.registry:
        if i.startswith("ainet_gym/"):
            env_of.setdefault(gym.registry[i].kwargs.get("scenario", ""), []).append(i)
    d = scenarios_dir()
    body, rows = [], []
    for path in sorted(d.glob("*.yaml")):
        md, row = _scenario_entry(path, env_of, f"scenarios/{path.name}")
        body += md
        rows.append(row)
    xc_body, xc_rows = [], []
    for path in sorted((d / "crosscheck").glob("*.yaml")):
        md, row = _scenario_entry(path, env_of, f"scenarios/crosscheck/{path.name}")
        xc_body += md
        xc_rows.append(row)
    head = "| scenario | topology | GPUs | jobs | episode | env ids |\n|---|---|---:|---|---:|---|"
    md = [
        "# Scenario gallery",
        "",
        "Every scenario shipped in `scenarios/` (installed as `ainet_gym.scenarios`), generated from the files",
        "at build time: the `description`, the header comment that documents the experiment (what it models, what",
        "static ECMP does, what a good policy does, where the numbers come from), the size and the file itself.",
        "Any name below works wherever a scenario is expected (`ainet-gym simulate NAME`,",
        '`gymnasium.make(id, scenario="NAME")`). The schema is in [The model](../model.md#scenario-schema).',
        "",
        head,
        *rows,
        "",
        "The ns-3 cross-check cases (`scenarios/crosscheck/`, see [Fidelity](../fidelity.md)) resolve by name too:",
        "",
        head,
        *xc_rows,
        "",
        *body,
        *xc_body,
    ]
    _pages["scenarios/gallery.md"] = "\n".join(md)


# ---------------------------------------------------------------------------------------------------- API


def _static_summary(path: str) -> str:
    """First docstring line of the function or class ``module.name``, read from its source without
    importing it (a module of an optional extra, e.g. the SB3 adapter, needs no extra to be documented)."""
    import ast
    import importlib.util

    module, _, name = path.rpartition(".")
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
            doc = ast.get_docstring(node)
            return _rst_to_md(doc.strip().splitlines()[0]) if doc else ""
    return ""


def _summary(obj: Any) -> str:
    doc = inspect.getdoc(obj) if (inspect.isclass(obj) or callable(obj) or inspect.ismodule(obj)) else None
    return _rst_to_md(doc.strip().splitlines()[0]) if doc else ""


#: API pages that list the public members of the class's own base classes
INHERITED_MEMBERS = ("EnvCore",)


def _api_pages() -> None:
    import ainet_gym

    lazy = getattr(ainet_gym, "_LAZY", {})
    rows, nav = [], []
    entries: list[tuple[str, str, str]] = []  # (name, griffe path, summary)
    for name in ainet_gym.__all__:
        if name in lazy:  # imported on first use (an optional extra): documented from its source
            path = f"{lazy[name]}.{name}"
            entries.append((name, path, _static_summary(path)))
            continue
        obj = getattr(ainet_gym, name)
        if name == "__version__":
            summary = f"the package version, `{obj}`"
        elif name == "ENV_IDS":
            summary = "env id -> default scenario of the ids registered by `import ainet_gym`"
        else:
            summary = _summary(obj)
        entries.append((name, f"ainet_gym.{name}", summary))
    n_all = len(entries)
    for name, path in MORE_API.items():
        entries.append((name, path, _static_summary(path)))
    for k, (name, path, summary) in enumerate(entries):
        slug = name  # the page of `__version__` is api/__version__/, as every other name
        page = f"api/{slug}.md"
        lead = (
            f"{summary[0].upper()}{summary[1:]}.\n\n"
            if summary and name in ("ENV_IDS", "__version__")
            else ""
        )
        # EnvCore's read-only API for agents, share weights, actions, spaces, observation and info live in its
        # base classes (envs/agent_api.py, share_weights.py, actions.py, spaces.py, observation.py over
        # obs_compiled.py and obs_blocks.py, info.py): its page shows their public members too
        opts = "\n    options:\n      inherited_members: true\n" if name in INHERITED_MEMBERS else "\n"
        _pages[page] = f"# `{name}`\n\n{lead}::: {path}{opts}"
        nav.append({name: page})
        if k == n_all:
            rows += ["", "Beyond `ainet_gym.__all__`: the classes a user of the environments meets next.", ""]
            rows += ["| name | summary |", "|---|---|"]
        rows.append(f"| [`{name}`]({slug}.md) | {summary} |")
    _nav[API_SECTION] = nav
    _pages["api/index.md"] = "\n".join(
        [
            "# API reference",
            "",
            "One page per name of `ainet_gym.__all__` (the public surface; the contracts are in",
            "[The model and its contracts](../model.md#contracts)), generated from the docstrings by mkdocstrings.",
            "",
            "| name | summary |",
            "|---|---|",
            *rows,
            "",
        ]
    )


# ---------------------------------------------------------------------------------------------------- CLI


def _cli_page() -> None:
    import argparse

    from ainet_gym import cli

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "110"
    try:
        parser = cli.build_parser()
        md = [
            "# Command-line reference",
            "",
            "Generated at build time from the parser of `ainet-gym` (`ainet_gym.cli.build_parser`): the help that",
            "`ainet-gym COMMAND --help` prints. The [Command line](../cli.md) page shows the commands at work.",
            "",
            "## ainet-gym",
            "",
            "```text",
            parser.format_help().rstrip(),
            "```",
            "",
        ]
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in subs:
            for name, sub in action.choices.items():
                md += [f"## {name}", "", "```text", sub.format_help().rstrip(), "```", ""]
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    _pages["reference/cli.md"] = "\n".join(md)


# ------------------------------------------------------------------------------------------- mkdocs hooks


def _generate() -> None:
    _pages.clear()
    _nav.clear()
    _fills.clear()
    _env_pages()
    _gallery()
    _api_pages()
    _cli_page()


def _append_to_section(nav: list, title: str, entries: list[dict[str, Any]]) -> bool:
    for item in nav:
        if isinstance(item, dict):
            for key, value in item.items():
                if key == title and isinstance(value, list):
                    value.extend(entries)
                    return True
                if isinstance(value, list) and _append_to_section(value, title, entries):
                    return True
    return False


def on_config(config: Any) -> Any:
    """Make the pages and append their nav entries to their sections."""
    _generate()
    for title, entries in _nav.items():
        if not _append_to_section(config["nav"], title, entries):
            raise RuntimeError(f"mkdocs.yml: no nav section titled {title!r} for the generated pages")
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the build (none of them is a file under docs/)."""
    from mkdocs.structure.files import File

    for path, content in _pages.items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(f"docs/{path} exists, but the docs hook generates that page: remove the file")
        files.append(File.generated(config, path, content=content))
    return files


_ROLE_HTML = re.compile(r":(?:class|func|meth|attr|data|mod|obj|exc):<code>(~?)([^<]+)</code>")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Sphinx roles of docstrings (``:class:`~a.b.C```), which mkdocstrings keeps as text, as code spans."""
    return _ROLE_HTML.sub(
        lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html
    )


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill the ``<!-- generated: ... -->`` markers of hand-written pages."""
    for marker, content in _fills.get(page.file.src_uri, {}).items():
        if marker not in markdown:
            raise RuntimeError(f"docs/{page.file.src_uri}: the marker {marker} is missing")
        markdown = markdown.replace(marker, content)
    return markdown
