"""The local SparkSession the Spark tests share: local[2], offline, UI off, quiet."""

import os
import sys

from mq.pipeline import session


def spark_conf() -> dict:
    """Settings that start Spark fast and keep it on this machine (docs/PIPELINE.md)."""
    return {
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.adaptive.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # A faster start for short jobs; the benchmark leaves the JIT alone.
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{session.log4j_file()} "
                                         "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    }


def shared_session():
    """The session (fails, never skips, with one line when Java is missing); stopped at the end."""
    import pytest

    if session.java_command() is None:
        pytest.fail(session.JAVA_HINT, pytrace=False)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    spark = session.build("mq-tests", "local[2]", progress=False, conf=spark_conf())
    yield spark
    spark.stop()
