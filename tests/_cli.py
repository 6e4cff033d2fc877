"""What the CLI tests share: the one line a refused command prints on stderr."""

from __future__ import annotations

import pytest


def one_line(capsys: pytest.CaptureFixture[str], *must: str) -> str:
    """The single line on stderr since the last read, checked to contain every string of ``must``."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    for m in must:
        assert m in err[0], err[0]
    return err[0]
