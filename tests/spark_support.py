"""The local SparkSession the Spark tests share: local[2], offline, UI off, quiet; replaced when broken."""

import os
import sys
import uuid

from mq.pipeline import session

#: Options of every JVM the tests start (drivers, and the standalone cluster's master, worker and
#: executors): a short-lived JVM spends most of its CPU loading Spark's classes. A JIT that stops
#: at its first tier, one GC thread, and no bytecode verification of the classes on the class
#: path: Spark's own jars, the same in every run (verifying them cost about 2 CPU s of each JVM,
#: a tenth of the standalone cluster test's CPU). Tests only: the product's JVMs keep the JVM's
#: defaults (pipeline/session.py).
FAST_START = ("-XX:+UseSerialGC -XX:TieredStopAtLevel=1 "
              "-XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote")


def spark_conf() -> dict:
    """Settings that start Spark fast and keep it on this machine (docs/PIPELINE.md)."""
    return {
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.adaptive.enabled": "false",
        # The tests' data are a few rows: compiling generated code for each new plan (Janino)
        # costs more than running it interpreted (about a sixth of a session's CPU).
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.ui.showConsoleProgress": "false",
        # A faster start for short jobs; the benchmark leaves the JIT alone.
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{session.log4j_file()} "
                                         f"{FAST_START}",
    }


class SharedSpark:
    """One session for the tests of a process, started again when a test left it broken.

    A test cut off by pytest-timeout inside a py4j call leaves that thread's connection waiting
    for the cut-off answer: every later call reads a stale reply ("... does not exist in the
    JVM") and the job may still hold the session's cores. Such a session is dropped whole (its
    JVM killed) and the next test gets a new one.
    """

    def __init__(self):
        self.spark = None

    def get(self):
        """The session, new when there is none or the last one no longer answers right."""
        if self.spark is not None and not answers(self.spark):
            self.drop()
        if self.spark is None:
            self.spark = start()
        return self.spark

    def drop(self) -> None:
        """Forget the session and kill its JVM (its Python daemons exit with it)."""
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        gateway, context, self.spark = SparkContext._gateway, SparkContext._active_spark_context, None
        if context is not None and context._accumulatorServer is not None:
            context._accumulatorServer.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            proc.kill()
            proc.wait()
        if gateway is not None:
            gateway.close()
        # pyspark keeps the gateway and sessions in class attributes: the next build starts anew.
        SparkContext._gateway = SparkContext._jvm = SparkContext._active_spark_context = None
        SparkSession._instantiatedSession = SparkSession._activeSession = None

    def stop(self) -> None:
        """Stop the session at the end of the run."""
        if self.spark is not None:
            self.spark.stop()
            self.spark = None


def start():
    """A new session (fails, never skips, with one line when Java is missing)."""
    import pytest

    if session.java_command() is None:
        pytest.fail(session.JAVA_HINT, pytrace=False)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    return session.build("mq-tests", "local[2]", progress=False, conf=spark_conf())


def answers(spark) -> bool:
    """Whether the session's JVM echoes a fresh token on this thread and its context runs: a stale
    reply, a closed connection or a stopped context is a broken session."""
    token = uuid.uuid4().int >> 65
    try:
        return (spark._jvm.java.lang.Long.parseLong(str(token)) == token
                and not spark.sparkContext._jsc.sc().isStopped())
    except Exception:
        return False


def timed_out(report) -> bool:
    """Whether a test's report is pytest-timeout's: its call was cut off wherever it was."""
    return report is not None and report.failed and "Timeout (>" in str(report.longrepr)
