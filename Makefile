# The two set-up commands: `make run` and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ROOT ?= /tmp/mq
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: run test install install-test check-java chromium clean

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

# tests/test_dashboard.py drives Debian's chromium (never a browser downloaded by playwright).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update && apt-get install -y chromium chromium-driver; \
	  else \
	    echo "make test: the dashboard test needs Chromium: install it with 'sudo apt-get install chromium chromium-driver' (Debian/Ubuntu); without it that test is skipped"; \
	  fi; }

test: install-test check-java chromium
	$(BIN)/pip install --quiet --no-deps --force-reinstall .
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build *.egg-info
