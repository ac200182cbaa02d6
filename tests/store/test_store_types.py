"""mypy, with the settings of pyproject.toml ([tool.mypy]), finds nothing in the store (mq.store):
its parts are members with typed interfaces, given what they use, and none calls another
through `self` where no type says what is there (docs/ARCHITECTURE.md, "The store's parts")."""

import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

from repo_support import REPO

MYPY = Path(sys.executable).with_name("mypy")


def test_the_store_has_no_mypy_finding():
    # The installed package, as `mypy -p mq` checks it; modules it imports are followed but
    # only the store's findings are this test's.
    result = subprocess.run([str(MYPY), "-p", "mq.store", "--cache-dir", "/dev/null",
                             "--follow-imports", "silent"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    findings = [line for line in result.stdout.splitlines() if "/mq/store/" in line]
    assert result.returncode == 0 and not findings, result.stdout + result.stderr


def test_no_setting_hides_the_store_s_findings():
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    for override in settings.get("overrides", []):
        modules = override["module"]
        for pattern in [modules] if isinstance(modules, str) else modules:
            hides = override.get("ignore_errors") or override.get("follow_imports") == "skip"
            assert not (hides and fnmatch("mq.store.states", pattern.replace(".*", "*"))), override
