"""Where every command that writes puts its output: one rule for all of them (``train``, ``evaluate``,
``demo``, ``export-fabric``, ``bench``, ``leaderboard``, ``sweep``).

- Existing files and result folders are never replaced without ``--overwrite``
  (:func:`check_out_file`, :func:`check_out_files`, :func:`check_out_dir`, :func:`check_model_out`).
- Never the command's own input, even with ``--overwrite``: the scenario file an ``export-fabric`` reads,
  the model an ``evaluate`` or ``--resume`` reads (``inputs=``).
- A default output folder gets a fresh run-named subfolder per run (``name``, then ``name-2``, ...:
  :func:`fresh_dir`), so repeating a plain command never collides.
- ``--out PATH`` ending in ``.zip`` is the model file of ``train``/``demo``; any other ``--out`` is a
  directory that receives ``model.zip`` (and the results of ``evaluate``/``demo``).

The rule on a module's command line (``python -m ...``) is here too (:func:`add_out_file_args`,
:func:`cli_out_file_refused`, :func:`run_writing_module_cli`); the one-line-error parser and runner of those command
lines are :mod:`ainet_gym.agents.module_cli`, the checked argument types :mod:`ainet_gym.agents.arg_types`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ainet_gym.agents.module_cli import run_module_cli

__all__ = [
    "MODEL_FILE",
    "RESULT_FILES",
    "add_out_file_args",
    "check_model_out",
    "check_out_dir",
    "check_out_file",
    "check_out_files",
    "cli_out_file_refused",
    "fresh_dir",
    "model_path",
    "run_stamp",
    "run_writing_module_cli",
]


#: The model file inside an output directory.
MODEL_FILE = "model.zip"
#: Files ``evaluate`` writes into its output directory.
RESULT_FILES = ("results.md", "results.csv", "episodes.csv", "results.json", "figure.png")


def _out_text(out: str | os.PathLike, flag: str, expected: str) -> tuple[str, Path]:
    """``out`` (the value of ``flag``) as text and as a path; ValueError naming ``flag`` and the
    ``expected`` kind of path if it is empty."""
    text = os.fspath(out)
    if not text.strip():
        raise ValueError(f"{flag} '': empty; expected {expected}")
    return text, Path(text)


def model_path(out: str | os.PathLike) -> Path:
    """The model file of ``--out``: the path itself if it ends in ``.zip``, else ``out/model.zip``.

    Raises
    ------
    ValueError
        If ``out`` is empty, or names an existing file that does not end in ``.zip``.
    """
    text, p = _out_text(out, "--out", "a directory or a .zip model path")
    if p.suffix == ".zip":
        if p.is_dir():
            raise ValueError(f"--out {text!r}: ends in .zip but is a directory; expected a model file path")
        return p
    if p.exists() and not p.is_dir():
        raise ValueError(f"--out {text!r}: is a file; expected a directory (or a path ending in .zip)")
    return p / MODEL_FILE


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def scenario_files(scenario: Any) -> list[str]:
    """The files a command reads for ``scenario`` (a name, a path or a dict): the scenario file and the
    graph file it names, as the outputs must never replace them; none for a shipped name or a dict (or
    a scenario that does not load: the command itself then says why)."""
    from ainet_gym.scenario.loader import load_scenario

    try:
        sc = load_scenario(scenario)
    except Exception:  # the command's own load reports the error
        return []
    out = [sc.source] if isinstance(sc.source, str) and sc.source and not sc.source.startswith("<") else []
    fab = sc.raw.get("fabric") if isinstance(sc.raw, dict) else None
    if isinstance(fab, dict) and isinstance(fab.get("file"), str):
        out.append(fab["file"])
    return out


def check_model_out(
    model: Path,
    overwrite: bool,
    resume: str | os.PathLike | None = None,
    inputs: Iterable[str | os.PathLike] = (),
) -> None:
    """Refuse to write ``model`` over the model being resumed or one of the other ``inputs`` (always) or
    over an existing file (unless ``overwrite``)."""
    src_in = next((str(i) for i in inputs if _same(model, Path(i))), None)
    if src_in is not None:
        raise ValueError(
            f"--out {str(model)!r}: is this command's input {src_in!r}; it is never overwritten, even with "
            "--overwrite"
        )
    if resume is not None:
        src = Path(resume)
        if not src.exists() and src.suffix != ".zip":
            src = src.with_name(src.name + ".zip")
        if _same(model, src):
            raise ValueError(
                f"--out {str(model)!r}: is the model --resume continues from; --resume never writes over "
                "its source, give another --out (or none: a fresh run folder)"
            )
    if model.exists() and not overwrite:
        raise ValueError(
            f"--out {str(model)!r}: a model is already there; pass --overwrite to replace it, or choose "
            "another --out"
        )


def _out_dir_path(out: str | os.PathLike, flag: str, zip_ok: bool = True) -> tuple[str, Path]:
    """``out`` (the value of ``flag``) as text and as the output directory's path (:func:`_out_text`), not
    an existing file and (unless ``zip_ok``) not ending in ``.zip`` (a model file name); else ValueError."""
    text, d = _out_text(out, flag, "a directory")
    if not zip_ok and d.suffix == ".zip":
        raise ValueError(f"{flag} {text!r}: ends in .zip, but this command writes a directory of results")
    if d.exists() and not d.is_dir():
        raise ValueError(f"{flag} {text!r}: is a file; expected a directory for the results")
    return text, d


def _refuse_replacing(
    text: str,
    d: Path,
    flag: str,
    files: Iterable[str],
    read: Iterable[str | os.PathLike],
    verb: str,
    other: str,
    inside: bool,
) -> None:
    """ValueError (even with ``--overwrite``) if one of ``files`` written into ``d`` (``flag``'s value
    ``text``) is one of the files ``read`` or (``inside``) a folder holding one; the message says the file
    would ``verb`` the input and asks for another ``other``."""
    files = list(files)
    for r in read:
        hit = next((f for f in files if _same(d / f, Path(r)) or (inside and _is_input(d / f, [r]))), None)
        if hit is not None:
            raise ValueError(
                f"{flag} {text!r}: its {hit} would {verb} this command's input {str(r)!r}; it is never "
                f"overwritten, even with --overwrite: choose another {other}"
            )


def _refuse_held(text: str, flag: str, held: list[str], other: str) -> None:
    """ValueError if the output folder (``flag``'s value ``text``) already holds the outputs ``held``;
    the message asks for ``--overwrite`` or another ``other``."""
    if held:
        raise ValueError(
            f"{flag} {text!r}: holds earlier output ({', '.join(held)}); pass --overwrite to replace it, "
            f"or choose another {other} (or none: a fresh run folder)"
        )


def check_out_dir(
    out: str | os.PathLike,
    overwrite: bool,
    inputs: Iterable[str | os.PathLike] = (),
    read: Iterable[str | os.PathLike] = (),
) -> Path:
    """Check an explicit output directory: it must not be a file, none of its result files may be one
    of the ``inputs`` (model files being read) or ``read`` (other files read: the scenario), even with
    ``overwrite``, and (unless ``overwrite``) it must not hold earlier results or a model, nor any of the
    ``inputs``."""
    text, d = _out_dir_path(out, "--out", zip_ok=False)
    inputs = list(inputs)
    _refuse_replacing(text, d, "--out", RESULT_FILES, [*inputs, *read], "be", "--out", inside=False)
    if overwrite or not d.is_dir():
        return d
    held = [f for f in (*RESULT_FILES, MODEL_FILE) if (d / f).exists()]
    for inp in inputs:
        p = Path(inp)
        try:
            inside = p.resolve().is_relative_to(d.resolve())
        except OSError:
            inside = False
        if inside:
            held.append(f"the input {str(p)!r}")
    _refuse_held(text, "--out", held, "--out")
    return d


def _is_input(p: Path, inputs: Iterable[str | os.PathLike]) -> str | None:
    """The input that ``p`` is (or holds, for a directory), if any."""
    for inp in inputs:
        q = Path(inp)
        if _same(p, q):
            return str(inp)
        try:
            if p.is_dir() and q.resolve().is_relative_to(p.resolve()):
                return str(inp)
        except OSError:
            continue
    return None


def check_out_file(
    path: str | os.PathLike, overwrite: bool, inputs: Iterable[str | os.PathLike] = (), flag: str = "--out"
) -> Path:
    """Check one output file: not empty, not a directory, never one of ``inputs`` (even with
    ``overwrite``), and not an existing file unless ``overwrite``.

    Raises
    ------
    ValueError
        Naming ``flag``, the path and what to do.
    """
    text, p = _out_text(path, flag, "a file path")
    if p.is_dir():
        raise ValueError(f"{flag} {text!r}: is a directory; expected a file path")
    src = _is_input(p, inputs)
    if src is not None:
        raise ValueError(f"{flag} {text!r}: is this command's input {src!r}; it is never overwritten")
    if p.exists() and not overwrite:
        raise ValueError(f"{flag} {text!r}: exists; pass --overwrite to replace it, or choose another path")
    return p


def check_out_files(
    out: str | os.PathLike,
    overwrite: bool,
    files: Iterable[str],
    inputs: Iterable[str | os.PathLike] = (),
    flag: str = "--out",
    read: Iterable[str | os.PathLike] = (),
) -> Path:
    """Check an output directory that receives ``files`` (names inside it): not a file, none of the
    ``inputs`` inside it and none of the files ``read`` (a scenario, a model) one of ``files`` or inside
    one (even with ``overwrite``), and none of ``files`` there already unless ``overwrite``.

    Raises
    ------
    ValueError
        Naming ``flag``, the directory, what it holds and what to do.
    """
    text, d = _out_dir_path(out, flag)
    src = _is_input(d, inputs)
    if src is not None:
        raise ValueError(f"{flag} {text!r}: holds this command's input {src!r}; choose another directory")
    files = list(files)
    # a file read is protected where a written file or folder would replace it
    _refuse_replacing(text, d, flag, files, read, "replace", "directory", inside=True)
    if overwrite or not d.is_dir():
        return d
    _refuse_held(text, flag, [f for f in files if (d / f).exists()], "directory")
    return d


def run_stamp() -> str:
    """A run name's time part, ``YYYYmmdd-HHMMSS`` (local time)."""
    import time

    return time.strftime("%Y%m%d-%H%M%S")


def fresh_dir(base: str | os.PathLike, name: str, create: bool = True) -> Path:
    """``base/name`` (``name-2``, ``name-3``, ... if taken): a folder no earlier run wrote to; created
    unless ``create`` is False (then the caller creates it when it writes)."""
    root = Path(base)
    if create:
        root.mkdir(parents=True, exist_ok=True)
    for i in range(1, 10_000):
        d = root / (name if i == 1 else f"{name}-{i}")
        if not create:
            if not d.exists():
                return d
            continue
        try:
            d.mkdir()
        except FileExistsError:
            continue
        return d
    raise ValueError(f"{str(root)!r}: no free run folder named {name!r}")


def cli_out_file_refused(
    prog: str,
    path: str | os.PathLike | None,
    overwrite: bool,
    inputs: Iterable[str | os.PathLike] = (),
    flag: str = "--out",
) -> bool:
    """The output rule for a module's command line (``python -m ...``): ``True``, after printing
    ``PROG: error: ...`` in one line to stderr, if ``path`` is refused by :func:`check_out_file`; ``False``
    (nothing printed) if it may be written or is ``None`` (no output asked)."""
    import sys

    if path is None:
        return False
    try:
        check_out_file(path, overwrite, inputs, flag=flag)
    except ValueError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return True
    return False


def run_writing_module_cli(
    prog: str,
    body: Callable[[], int],
    path: str | os.PathLike | None,
    overwrite: bool,
    flag: str = "--out",
    inputs: Iterable[str | os.PathLike] = (),
) -> int:
    """A module's command line that may write ``path`` (the value of ``flag``; None: it writes nothing):
    2 if the output rule refuses ``path`` (:func:`cli_out_file_refused`, before ``body`` runs), else ``body``
    run by :func:`run_module_cli`."""
    if cli_out_file_refused(prog, path, overwrite, inputs, flag=flag):
        return 2
    return run_module_cli(prog, body)


def add_out_file_args(
    parser: argparse.ArgumentParser, help: str, flag: str = "--out", required: bool = False
) -> None:
    """The output rule's two flags on a module's command line: ``flag``, the file it writes (``help``; default
    None: none), and ``--overwrite`` (replace it if it exists), which :func:`cli_out_file_refused` checks."""
    parser.add_argument(flag, default=None, required=required, help=help)
    parser.add_argument("--overwrite", action="store_true", help=f"replace {flag} if it exists")
