"""One import package, mq: the repo's http/ folder never shadows the standard library, and the
wheel builds without a warning."""

import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from repo_support import REPO


def python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run code with the interpreter the project is installed in, from cwd."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_http_client_and_tornado_import_from_the_repo_root():
    result = python("import http.client, tornado.web, http, os; print(os.path.dirname(http.__file__))",
                    cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) != REPO / "http"
    assert Path(result.stdout.strip()).parent == Path(subprocess.__file__).parent


@pytest.mark.parametrize("where", ["repo root", "elsewhere"])
def test_the_mq_package_and_its_parts_import(tmp_path, where):
    cwd = REPO if where == "repo root" else tmp_path
    result = python("import mq, mq.http.front, mq.actors.fetch, mq.supervisor.main, mq.store, "
                    "tornado.web, http.client; print(mq.http.front.__name__)", cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "mq.http.front"


def test_the_folders_are_not_top_level_import_names(tmp_path):
    result = python("import importlib.util as u; "
                    "print([n for n in ('actors', 'core', 'supervisor') if u.find_spec(n)])",
                    cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_there_is_no_mq_folder_at_the_repo_root_to_shadow_the_package():
    assert not (REPO / "mq").exists()
    assert not (REPO / "http" / "__init__.py").exists()


def test_the_three_daemons_are_installed_entry_points():
    scripts = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts")
               if ep.dist and ep.dist.name == "mq"}
    required = {"mq": "mq.supervisor.main:main", "mq-mover": "mq.actors.mover:main",
                "mq-reaper": "mq.actors.reaper:main"}
    assert {name: scripts.get(name) for name in required} == required
    for name in required:
        assert (Path(sys.executable).parent / name).exists()


@pytest.mark.slow
def test_the_wheel_builds_without_a_warning(tmp_path):
    # pip install . (make run, make test) builds this wheel: setuptools warns of a folder that
    # Python could import but `packages` leaves out (core/dashboard/ once did), and of settings
    # it will stop reading. The build runs on a copy, so the repository gets no build/ folder.
    source = tmp_path / "source"
    source.mkdir()
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())
    for name in ("pyproject.toml", settings["project"]["readme"]):
        shutil.copy(REPO / name, source / name)
    for folder in set(settings["tool"]["setuptools"]["package-dir"].values()):
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps",
                             "--wheel-dir", str(tmp_path / "wheel"), str(source)],
                            capture_output=True, text=True, timeout=280)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    # Python's warning classes (BuildBackendWarning, SetuptoolsDeprecationWarning, ...); pip's
    # own "WARNING:" lines about this machine's package indexes are not the build's.
    warned = [line.strip() for line in output.splitlines() if re.search(r"[a-z]Warning\b", line)]
    assert not warned, "\n".join(warned)
    assert len(list((tmp_path / "wheel").glob("mq-*-py3-none-any.whl"))) == 1
