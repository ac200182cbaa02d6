"""mypy, with the settings of pyproject.toml ([tool.mypy]), finds nothing in the installed
package: `mypy -p mq` checks it as installed, where the folders form the one package mq."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from repo_support import REPO

MYPY = Path(sys.executable).with_name("mypy")

# A whole-package check takes a core for 5 to 30 s with an empty cache (under a second with
# the cache of an earlier run): one worker runs both, one after the other, with room for a
# loaded machine.
pytestmark = [pytest.mark.xdist_group("mypy"), pytest.mark.timeout(300)]
#: mypy's own default cache folder, shared with `make check` and a `mypy -p mq` by hand: mypy
#: checks each cached module against its source (a reinstall with the same text keeps it) and
#: writes each cache file whole (a temporary file renamed), so two runs at once only redo work.
CACHE = REPO / ".mypy_cache"


def mypy(*args: str) -> subprocess.CompletedProcess:
    """Run mypy from the repository root, where pyproject.toml is."""
    return subprocess.run([str(MYPY), "--cache-dir", str(CACHE), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=280)


def test_the_package_has_no_mypy_finding():
    result = mypy("-p", "mq")
    assert result.returncode == 0, result.stdout + result.stderr
    # It checked the package, not an empty set of files.
    checked = re.search(r"no issues found in (\d+) source files", result.stdout)
    assert checked and int(checked.group(1)) > 100, result.stdout


def test_mypy_reports_a_finding_where_there_is_one():
    # The settings and the package's own types (py.typed) reach mypy: a call that breaks a
    # signature of mq is reported.
    probe = "from mq.errors import from_os_error\n\nfrom_os_error('not an OSError', 1)\n"
    result = mypy("-c", probe)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.count("[arg-type]") == 2, result.stdout


def test_no_setting_hides_findings_of_the_package():
    # An override that ignores errors (or skips modules) would let the check above pass over
    # findings: none may cover a module of mq.
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    for override in settings.get("overrides", []):
        modules = override["module"]
        for pattern in [modules] if isinstance(modules, str) else modules:
            hides = override.get("ignore_errors") or override.get("follow_imports") == "skip"
            assert not (hides and pattern.split(".")[0] in ("mq", "mq*", "*")), override


#: The actors as the Protocols their command functions take (actors/commands.py): a FetchActor
#: is a FetchCommandActor and a SaveActor a SaveCommandActor; the last one must be refused
#: (its ignore would be unused, which warn_unused_ignores reports).
ACTORS_AS_PROTOCOLS = '''
from mq.actors.commands import FetchCommandActor, SaveCommandActor
from mq.actors.fetch import FetchActor
from mq.actors.save import SaveActor


def fetch(actor: FetchActor) -> FetchCommandActor:
    return actor


def save(actor: SaveActor) -> SaveCommandActor:
    return actor


def not_fetch(actor: SaveActor) -> FetchCommandActor:
    return actor  # type: ignore[return-value]
'''


def test_the_actors_are_what_their_command_functions_take():
    result = mypy("-c", ACTORS_AS_PROTOCOLS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_bodies_of_unannotated_functions_are_checked():
    # Without it mypy passes over the body of every function whose signature has no
    # annotation at all.
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert settings.get("check_untyped_defs") is True


def test_the_checkers_are_pinned_below_and_above():
    # A newer checker may bring findings of its own: each is pinned to the versions checked.
    test_extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["test"]
    for checker in ("ruff", "mypy", "import-linter"):
        [requirement] = [r for r in test_extra if re.match(rf"{checker}\b[=<>!~]", r)]
        pinned = "==" in requirement or ("<" in requirement and ">=" in requirement)
        assert pinned, requirement
