"""The shared SparkSession after a test was cut off inside a py4j call (as pytest-timeout does):
the next Spark test gets a working session, not the stale replies of the old one."""

import os
import signal
import threading

import pytest

from mq import store as fmt
from spark_support import answers
from test_pipeline_batch import add_directly

pytestmark = pytest.mark.spark


class CutOff(BaseException):
    """Raised in the main thread while it waits for the JVM's answer: a BaseException, as
    pytest-timeout's is, so py4j does not catch it and close the connection."""


def test_a_session_cut_off_mid_call_is_replaced_by_a_working_one(spark_sessions, tmp_path):
    spark = spark_sessions.get()
    assert answers(spark)

    def cut(signum, frame):
        raise CutOff()

    sleep = spark._jvm.java.lang.Thread.sleep  # Looked up first: the cut lands in the sleep.
    previous = signal.signal(signal.SIGUSR1, cut)
    timer = threading.Timer(1, os.kill, (os.getpid(), signal.SIGUSR1))
    timer.start()
    try:
        # Kept, as pytest keeps a failed test's traceback (sys.last_traceback): its frames hold
        # the cut-off connection, so py4j sends this thread's next call on it.
        with pytest.raises(CutOff) as cut_off:
            sleep(8000)  # Answered after the cut, to the next call.
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    assert not answers(spark), "the connection is out of step: a call reads the one before's reply"
    assert cut_off.traceback

    fresh = spark_sessions.get()
    assert fresh is not spark and answers(fresh)
    # The new session has the mq data source registered, as the old one had.
    store = fmt.Store(str(tmp_path / "root"))
    store.init()
    added = {add_directly(store, "q", b"m%d" % i) for i in range(3)}
    rows = fresh.read.format("mq").option("root", store.root).option("queue", "q").load().collect()
    assert {r["id"] for r in rows} == added
