"""Where ``train``, ``evaluate`` and ``demo`` write, one rule for the three.

- ``--out PATH`` ending in ``.zip`` is the model file; any other ``--out`` is a directory that receives
  ``model.zip`` (and the results of ``evaluate``/``demo``).
- A default output folder gets a fresh run-named subfolder per run (``name``, then ``name-2``, ...), so
  repeating a command never collides.
- An explicit ``--out`` that holds an input model or earlier results is refused unless ``overwrite``.
- ``--resume`` never writes over the model it resumes from, ``overwrite`` or not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["MODEL_FILE", "RESULT_FILES", "check_model_out", "check_out_dir", "fresh_dir", "model_path"]

#: The model file inside an output directory.
MODEL_FILE = "model.zip"
#: Files ``evaluate`` writes into its output directory.
RESULT_FILES = ("results.md", "results.csv", "episodes.csv", "results.json", "figure.png")


def model_path(out: str | os.PathLike) -> Path:
    """The model file of ``--out``: the path itself if it ends in ``.zip``, else ``out/model.zip``.

    Raises
    ------
    ValueError
        If ``out`` is empty, or names an existing file that does not end in ``.zip``.
    """
    text = os.fspath(out)
    if not text.strip():
        raise ValueError("--out '': empty; expected a directory or a .zip model path")
    p = Path(text)
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


def check_model_out(model: Path, overwrite: bool, resume: str | os.PathLike | None = None) -> None:
    """Refuse to write ``model`` over the model being resumed (always) or over an existing file (unless
    ``overwrite``)."""
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


def check_out_dir(out: str | os.PathLike, overwrite: bool, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Check an explicit output directory: it must not be a file, and (unless ``overwrite``) must not
    hold earlier results or a model, nor any of the ``inputs`` (model files being read)."""
    text = os.fspath(out)
    if not text.strip():
        raise ValueError("--out '': empty; expected a directory")
    d = Path(text)
    if d.suffix == ".zip":
        raise ValueError(f"--out {text!r}: ends in .zip, but this command writes a directory of results")
    if d.exists() and not d.is_dir():
        raise ValueError(f"--out {text!r}: is a file; expected a directory for the results")
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
            held.append(f"the input model {str(p)!r}")
    if held:
        raise ValueError(
            f"--out {text!r}: holds earlier output ({', '.join(held)}); pass --overwrite to replace it, or "
            "choose another --out (or none: a fresh run folder)"
        )
    return d


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
