"""The whole repository passes `ruff check` with the configuration in pyproject.toml."""

import subprocess
import sys

from conftest import ROOT


def test_ruff_check_passes():
    """`ruff check .` reports nothing."""
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, f"ruff check . failed:\n{proc.stdout}\n{proc.stderr}"
