"""docs/ARCHITECTURE.md's code map names every module of the package, and only modules that exist.

The code map has one paragraph per folder, opened by a line "`folder/` (`mq...`)"; each module
of that folder (its own .py files, not its sub-folders') is named in it as `name.py`.
"""

import re
import tomllib

from repo_support import REPO

HEADER = re.compile(r"^`([\w/]+/)` \(`mq[\w.]*`\)", re.MULTILINE)
MODULE = re.compile(r"`([\w]+\.py)`")


def code_map_sections(text: str) -> dict[str, str]:
    """Each folder the code map describes, with the text of its paragraph."""
    start = text.index("\n## Code map\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end != -1 else len(text)]
    headers = list(HEADER.finditer(section))
    return {match[1]: section[match.start():(headers[i + 1].start() if i + 1 < len(headers)
                                              else len(section))]
            for i, match in enumerate(headers)}


def package_folders() -> list[str]:
    """The folders pyproject.toml installs as packages, relative to the repository."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    roots = setuptools["package-dir"]
    folders = []
    for package in setuptools["packages"]:
        parent = max((name for name in roots if package == name or package.startswith(name + ".")),
                     key=len)
        folders.append("/".join([roots[parent], *package[len(parent):].split(".")[1:]]) + "/")
    return folders


def missing_and_stale(text: str) -> tuple[list[str], list[str]]:
    """The modules the code map leaves out, and the names it gives that no module has."""
    sections = code_map_sections(text)
    missing, stale = [], []
    for folder in package_folders():
        modules = {path.name for path in (REPO / folder).glob("*.py") if path.name != "__init__.py"}
        named = set(MODULE.findall(sections.get(folder, "")))
        missing += sorted(folder + name for name in modules - named)
        stale += sorted(folder + name for name in named - modules)
    return missing, stale


def test_the_code_map_names_every_module_and_no_other():
    missing, stale = missing_and_stale((REPO / "docs" / "ARCHITECTURE.md").read_text())
    assert missing == [], f"modules not in docs/ARCHITECTURE.md's code map: {missing}"
    assert stale == [], f"the code map names modules that do not exist: {stale}"


def test_a_module_left_out_or_gone_is_reported():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    assert "`run_dirs.py`" in text and "`renames.py`" in text
    missing, stale = missing_and_stale(text.replace("`run_dirs.py`", "`run_folders.py`"))
    assert missing == ["supervisor/run_dirs.py"] and stale == ["supervisor/run_folders.py"]
    missing, _ = missing_and_stale(text.replace("`core/store/` (`mq.store`)", "`core/store/`"))
    assert "core/store/renames.py" in missing
