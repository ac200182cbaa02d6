"""ruff, with the rules of pyproject.toml ([tool.ruff]), finds nothing in the product's code:
lint (pyflakes, pycodestyle, bugbear, pyupgrade) and the order of imports."""

import subprocess
import sys
from pathlib import Path

from repo_support import REPO

RUFF = Path(sys.executable).with_name("ruff")


def ruff(*args: str, source: str | None = None) -> subprocess.CompletedProcess:
    """Run ruff check from the repository root, where pyproject.toml is."""
    return subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", *args],
                          cwd=REPO, input=source, capture_output=True, text=True, timeout=100)


def test_the_code_has_no_ruff_finding():
    result = ruff(".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_sees_a_finding_where_there_is_one():
    # The settings must reach the product's folders: an unsorted import in a module of core/
    # is reported under them.
    result = ruff("--stdin-filename", "core/lint_probe.py", "-", source="import sys\nimport os\n")
    assert result.returncode == 1
    assert "I001" in result.stdout, result.stdout
