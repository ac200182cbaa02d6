"""The repository around the tests: where it is, and the tools that run on it as a whole.

The test modules sit in folders by area (tests/store/, tests/delivery/, ...) and the shared
helpers at the top of tests/, which pytest puts on sys.path for its conftest.py. A path here
holds wherever a test module sits, and a test file run as a script finds the helpers too.
"""

import os
import subprocess
import sys
from pathlib import Path

#: The top of tests/, where the shared helpers (support.py and the other *_support.py) live.
TESTS = Path(__file__).resolve().parent
#: The repository: README.md, docs/, etc/, pyproject.toml.
REPO = TESTS.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
#: The benchmarks: scripts that import one another by name (ports.py, cluster.py, workload.py).
BENCH = REPO / "bench"


def bench_importable() -> None:
    """Put bench/ on sys.path, so that a test imports the benchmarks' modules as they do."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))


def script_env() -> dict[str, str]:
    """This process's environment with tests/ first on PYTHONPATH, for a test file run as a script.

    pytest puts tests/ on its own sys.path, which a child Python does not inherit; a test file
    started as a worker imports support.py like the tests do.
    """
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *([path] if path else [])])}


def lint_imports(*config: str) -> subprocess.CompletedProcess:
    """Run lint-imports (on pyproject.toml, or on the config files given) from the repository."""
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", *config], cwd=REPO,
                          capture_output=True, text=True, timeout=100)
