"""The jobs on a real Spark cluster manager: a standalone master and worker on 127.0.0.1.

"Nothing changed but --master": the same mq-pipeline command lines as on local[*], run as
separate driver processes, with executors the worker launches in JVMs of their own.
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from spark_support import FAST_START
from support import command, free_port, poll_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def spark_home() -> str:
    """The Spark distribution inside the installed pyspark package."""
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


#: The cluster's settings (its conf folder's spark-defaults.conf, read by the master, the worker
#: and every driver): the smallest that runs the jobs, and JVMs that start fast (short jobs).
JVM_OPTIONS = FAST_START
DEFAULTS = {
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.driver.defaultJavaOptions": JVM_OPTIONS,
    "spark.executor.defaultJavaOptions": JVM_OPTIONS,
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    # A few rows: interpreted plans cost less than compiling generated code (tests/spark_support.py).
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def spark_env(conf_dir) -> dict:
    """Environment of the cluster's processes and drivers: this Python, loopback only."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": spark_home(), "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and one worker (1 core, 512 MiB); yields (master URL, worker folder, env)."""
    work = tmp_path_factory.mktemp("spark-cluster")
    conf_dir = work / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in DEFAULTS.items()))
    env = spark_env(conf_dir)
    port, ui = free_port(), free_port()
    spark_class = os.path.join(spark_home(), "bin", "spark-class")
    started = []

    def launch(name: str, *args: str) -> subprocess.Popen:
        log = open(work / f"{name}.log", "wb")
        proc = subprocess.Popen([spark_class, *args], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        started.append(proc)
        return proc

    launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
           "--port", str(port), "--webui-port", str(ui))
    url = f"spark://127.0.0.1:{port}"
    launch("worker", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
           "--webui-port", str(free_port()), "--cores", "1", "--memory", "512m",
           "--work-dir", str(work / "work"))

    def worker_alive():
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as resp:
            state = json.load(resp)
        return any(w.get("state") == "ALIVE" for w in state.get("workers", []))

    try:
        poll_for(worker_alive, 90, interval=0.5, what="the Spark worker to register with the master",
                 ignore=(OSError,))
        yield url, work / "work", env
    finally:
        for proc in started:
            # The worker's executors run in its session: the whole group goes.
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in started:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def pipeline(master: str, env: dict, *argv: str) -> str:
    """Run one mq-pipeline command line as its own driver on the cluster; return its output."""
    result = subprocess.run([command("mq-pipeline"), *argv, "--master", master], env=env,
                            capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


@pytest.mark.timeout(300)  # A master, a worker and two drivers start, each a JVM.
def test_load_and_export_run_on_a_standalone_cluster_with_the_daemon_serving(cluster, start_mq, tmp_path):
    master, worker_dir, env = cluster
    daemon = start_mq(workers=2, timeout=60)
    daemon.add("cl", b"added over HTTP")
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"line {i}\n" for i in range(50)))

    printed = pipeline(master, env, "load", "--root", str(daemon.root), "--queue", "cl",
                       "--input", str(lines), "--partitions", "2")
    assert "wrote 50 messages" in printed, printed
    output = tmp_path / "export"
    printed = pipeline(master, env, "export", "--root", str(daemon.root), "--queues", "cl",
                       "--output", str(output))
    assert "read 51 messages" in printed and "nothing consumed" in printed, printed
    assert os.listdir(output / "queue=cl")
    # Both jobs ran as applications of the cluster, their tasks in the worker's executors.
    assert len([name for name in os.listdir(worker_dir) if name.startswith("app-")]) == 2

    # The daemon serves what the executors wrote, the HTTP add first (it is the oldest).
    bodies = []
    while (resp := daemon.fetch("cl")).status == 200:
        bodies.append(resp.body)
        daemon.delete("cl", resp.header("X-Message-Id"))
    assert bodies[0] == b"added over HTTP"
    assert sorted(bodies[1:]) == sorted(f"line {i}".encode() for i in range(50))
