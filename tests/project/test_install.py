"""What a new user's two commands need, checked from inside the installed environment (issue: the README's
commands failed on a fresh machine because `rich`, needed by SB3's progress bar, was not declared)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_progress_bar_of_train_and_demo_can_be_built() -> None:
    # `ainet-gym train` and `demo` turn SB3's progress bar on by default; it raises ImportError without
    # tqdm and rich. In CI's fresh venv this fails unless pyproject.toml declares both.
    from stable_baselines3.common.callbacks import ProgressBarCallback

    ProgressBarCallback()


def test_makefile_calls_every_tool_through_the_interpreter() -> None:
    # `make check PYTHON=venv/bin/python` must not depend on the venv's bin/ being on PATH.
    recipes = [ln for ln in (ROOT / "Makefile").read_text().splitlines() if ln.startswith("\t")]
    for tool in ("pytest", "ruff"):
        for ln in recipes:
            words = re.findall(rf"(?:-m )?\b{tool}\b", ln)
            assert all(w.startswith("-m ") for w in words), f"Makefile calls {tool} from PATH: {ln.strip()}"
    assert re.search(r"^PIP := \$\(PYTHON\) -m pip$", (ROOT / "Makefile").read_text(), re.M)


def test_rich_and_tqdm_are_declared() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = " ".join(meta["dependencies"] + meta["optional-dependencies"]["rl"])
    assert "rich" in declared and "tqdm" in declared


def test_every_package_folder_is_in_the_wheel() -> None:
    # setuptools installs only the packages pyproject.toml lists: a new folder left out of the list imports from
    # a checkout (editable install) and is missing from the wheel, which the editable test venv cannot see
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "ainet_gym").rglob("__init__.py")}
    assert found <= listed, (
        f"package folders missing from [tool.setuptools] packages: {sorted(found - listed)}"
    )


def test_every_shipped_policy_file_is_package_data() -> None:
    # a shipped policy of a new kind (.npz beside the .zip models) must be declared, or the wheel leaves it out
    import fnmatch

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "ainet_gym.pretrained"
    ]
    files = [p.name for p in (ROOT / "ainet_gym" / "pretrained").iterdir() if p.suffix not in (".py", ".pyc")]
    files = [f for f in files if f != "__pycache__"]
    assert files, "no shipped policy found"
    missing = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert not missing, f"shipped files not in package-data: {missing}"
