"""Fixtures: a real mq daemon per test, on its own temporary root and free port."""

import sys

import pytest

from support import Daemon, become_subreaper, reap_orphans


@pytest.hookimpl(tryfirst=True)  # Before xdist's, which reads the groups into the test ids.
def pytest_collection_modifyitems(items):
    """Run every test of the shared Spark session on one xdist worker, so a parallel run starts
    one session. The other Spark tests (drivers and a cluster of their own, or no Spark at all)
    run on any worker: kept on that one, they made the longest chain of the run.

    xdist names a test's group after all its xdist_group marks, so a module's group (the doc
    examples') goes onto that module's other tests: its Spark test is in "spark" alone."""
    shared = {item for item in items if item.get_closest_marker("spark")
              and {"spark", "spark_sessions"} & set(item.fixturenames)}
    for module in {item.getparent(pytest.Module) for item in shared} - {None}:
        groups = [mark for mark in module.own_markers if mark.name == "xdist_group"]
        module.own_markers[:] = [mark for mark in module.own_markers if mark not in groups]
        for item in items:
            if item.getparent(pytest.Module) is module and item not in shared:
                for mark in groups:
                    item.add_marker(pytest.mark.xdist_group(*mark.args, **mark.kwargs))
    for item in shared:
        item.add_marker(pytest.mark.xdist_group("spark"))
    # A test that takes spark_sessions itself replaces the session (its JVM killed): run last, the
    # others keep the warm one (its Python daemons started, its JVM's code compiled).
    replacing = [item for item in items if item in shared and "spark_sessions" in item.fixturenames
                 and "spark" not in item.fixturenames]
    items[:] = [item for item in items if item not in replacing] + replacing
    items.sort(key=start_order)


def start_order(item) -> tuple[bool, bool]:
    """xdist hands out its groups first (the largest first), then the other tests in this order
    (the sort is stable: a group's tests keep theirs): the slow ones first, those starting JVMs
    of their own (the longest) before them, so that none starts near the end of a run and ends
    it alone."""
    single = item.get_closest_marker("xdist_group") is None
    slow = single and item.get_closest_marker("slow") is not None
    return not slow, not (slow and item.get_closest_marker("spark") is not None)


#: What failed in this run, one line each (the test, the phase, the first line of the error).
FAULTS: list[str] = []


def pytest_runtest_logreport(report):
    """Keep one line for each failed phase of a test (in a parallel run: the controller's copy)."""
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        why = crash.message if crash is not None else str(report.longrepr).strip()
        why = " ".join(why.split())
        FAULTS.append(f"{report.nodeid} ({report.when}): {why[:400]}")


def pytest_unconfigure(config):
    """Name what failed once more, after pytest's summary line: a log cut to its last lines
    (a CI page) still says which test failed and why."""
    if FAULTS and not hasattr(config, "workerinput"):
        sys.__stdout__.write("".join(f"failed: {line}\n" for line in FAULTS[-5:]))
        sys.__stdout__.flush()


@pytest.fixture(scope="session", autouse=True)
def adopt_orphans():
    """Orphans of killed trees become this process's children and are reaped after each test."""
    become_subreaper()
    yield
    reap_orphans()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test, for fixtures that clean up after a failure."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def spark_sessions():
    """The SparkSession the Spark tests of this process share (tests/spark_support.py)."""
    from spark_support import SharedSpark

    shared = SharedSpark()
    yield shared
    shared.stop()


@pytest.fixture
def spark(spark_sessions, request):
    """The shared local SparkSession; a new one after a test that a timeout cut off."""
    from spark_support import timed_out

    try:
        spark = spark_sessions.get()
    except BaseException:
        spark_sessions.drop()  # Cut off while starting: whatever was started is half made.
        raise
    yield spark
    # Cut off inside a py4j call: the next answer on this thread would be that call's.
    if timed_out(getattr(request.node, "report_call", None)):
        spark_sessions.drop()


@pytest.fixture
def start_mq(tmp_path):
    """Start real daemons on tmp_path/root (or a root given); every one is stopped at the end."""
    daemons = []

    def start(root=None, ready: bool = True, **kwargs) -> Daemon:
        daemon = Daemon(root or tmp_path / "root", tmp_path, **kwargs)
        daemons.append(daemon)
        daemon.start()
        if ready:
            daemon.wait_ready()
        return daemon

    yield start
    for daemon in daemons:
        daemon.cleanup()


@pytest.fixture
def mq(start_mq):
    """A ready daemon with two worker pairs and a one-second redelivery timer."""
    return start_mq(workers=2, timeout=1)
