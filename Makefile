# The two set-up commands: `make run` and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ROOT ?= /tmp/mq
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: run test install install-test check-java check-fuse clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet ".[test]"
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

# The code is installed as a package (not editable), so reinstall it on every run.
run: install
	$(BIN)/pip install --quiet --no-deps --force-reinstall .
	$(BIN)/mq --root=$(ROOT) --host=$(HOST) --port=$(PORT)

check-java:
	@command -v java >/dev/null 2>&1 || { echo "make test: Java 17 is needed for the Spark tests: install it with 'apt-get install openjdk-17-jre-headless' (Debian/Ubuntu) or your system's JDK 17 package"; exit 1; }

# The power-cut test mounts a FUSE file system (tests/powercut/): it needs /dev/fuse and libfuse 3
# with fusermount3. As root on Debian/Ubuntu they are installed here; elsewhere the test is skipped.
check-fuse:
	@command -v fusermount3 >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && apt-get install -y -qq fuse3 >/dev/null; } || echo "make test: the power-cut test is skipped without FUSE: install it with 'apt-get install fuse3' (Debian/Ubuntu, as root) or your system's libfuse 3 package"

test: install-test check-java check-fuse
	$(BIN)/pip install --quiet --no-deps --force-reinstall .
	$(BIN)/python -m pytest -n 2 --dist loadgroup

clean:
	rm -rf $(VENV) build *.egg-info
