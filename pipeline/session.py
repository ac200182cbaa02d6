"""Starting a SparkSession for the pipeline jobs and tests: quiet, offline, local by default."""

import os
import shutil
import sys
import tempfile

#: Where Spark runs when --master is not given: every core of this machine.
DEFAULT_MASTER = "local[*]"
#: What to install when there is no Java (Spark's JVM needs 17 or later).
JAVA_HINT = ("Spark needs Java 17: install it with 'apt-get install openjdk-17-jre-headless' "
             "(Debian/Ubuntu) or your system's JDK 17 package, or set JAVA_HOME")

LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


class JavaMissing(RuntimeError):
    """Raised when no Java runtime can be found for Spark."""


def java_command() -> str | None:
    """The java executable Spark will use (JAVA_HOME first, then PATH), or None."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def require_java() -> str:
    """The java executable, or raise JavaMissing with one line saying what to install."""
    found = java_command()
    if not found:
        raise JavaMissing(JAVA_HINT)
    return found


def log4j_file() -> str:
    """A log4j2 configuration that keeps Spark's JVM at level error (written once per process)."""
    path = os.path.join(tempfile.gettempdir(), f"mq-pipeline-log4j2-{os.getuid()}.properties")
    if not os.path.exists(path):
        temp = f"{path}.{os.getpid()}"
        with open(temp, "w") as f:
            f.write(LOG4J)
        os.replace(temp, path)
    return path


def build(app: str, master: str = DEFAULT_MASTER, progress: bool | None = None,
          ui: bool = False, conf: dict | None = None):
    """A SparkSession with the mq data source registered.

    progress: show Spark's console progress bar (default: when stderr is a terminal).
    ui: start the web UI (off by default: nothing listens unless asked).
    """
    require_java()
    # Python workers must run this interpreter, which has pyarrow and mq installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    if progress is None:
        progress = sys.stderr.isatty()
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j_file()} -XX:+UseSerialGC"
    builder = (
        SparkSession.builder.appName(app).master(master)
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.ui.showConsoleProgress", str(progress).lower())
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", java_opts)
    )
    if master.startswith("local"):
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from mq.pipeline import register

    register(spark)
    return spark
