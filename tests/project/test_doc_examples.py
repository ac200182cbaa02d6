"""Every code example of README.md and docs/*.md runs as written, with the install line it gives.

tests/doc_blocks.py finds the fenced blocks and the marks before them. Here each block is run
in document order against one real daemon of this module (Spark ones in the shared local
session): a `python` block as a script, a `console` session command by command with its
output compared, an `sh` block as one script; `toml`, `yaml`, `json` and `ini` blocks are
parsed, and an sh block of `pip install` lines is checked against pyproject.toml's extras.
A command that is one of mq's programs alone (`mqctl ...`, `mq --help`) and a `python` block
run in a child forked from this process (cli_support.run_forked), which has their imports
already: a new interpreter for each would pay them again at every line.
A block marked `not run` has its reason; one marked `run by` is run by the module it
names. Commands and code reach the test daemon instead of 127.0.0.1:8080 (and localhost:8080)
through its port put in their place; `$MQ` and `$MQ_URL` name it too, and a session's
`/tmp/mq` its root (not in the output of a `--help` command: there they are the defaults).
A `python` block's output, compared as a session's is, is the lines doc_blocks.printed()
reads from its comments. A `setup:` mark names a function of SETUPS below that prepares what the
block shows (a fresh state, a daemon of its own with tokens or a killed save actor).

In a session's expected output, what differs from run to run is matched by kind, as the
documents say (only `Date` and `Server` trimmed): a message id or a multipart boundary matches
any of its form and is then that one wherever it comes again (also in later commands), a
Unix time or a duration any number, `Content-Length` any length, `...` anything, and
`(N bytes: 00 01 ...)` those raw bytes (docs/DEVELOPING.md, "Tests", has the table).
"""

import ast
import atexit
import configparser
import functools
import importlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from access_support import AccessDaemon, entry
from cli_support import run_forked
from doc_blocks import DOCUMENTS, Block, blocks, pattern, printed, session
from repo_support import REPO
from support import PROBE_QUEUE, Daemon, poll_for, unreachable

#: One worker runs the module, so that its examples share one daemon (the Spark one goes with
#: the other Spark tests: tests/conftest.py).
pytestmark = pytest.mark.xdist_group("doc_examples")

LANGS = {"python", "console", "sh", "json", "toml", "ini", "yaml", "text"}
MARK_KEYS = {"not run", "run by", "setup", "output"}
#: Blocks that cannot run here are few, and each says why.
MOST_NOT_RUN = 11
BIN = Path(sys.executable).parent


def all_blocks() -> list[Block]:
    """Every block of every document, in order."""
    return [b for doc in DOCUMENTS for b in blocks(doc)]


def is_spark(block: Block) -> bool:
    """A Python block that starts Spark (run in the shared session, marked spark)."""
    return block.lang == "python" and ("mq.pipeline" in block.text or "pyspark" in block.text)


def to_run(block: Block) -> bool:
    """A block this module runs (rather than parses, reads past, or leaves to another module)."""
    return (block.lang in ("python", "console", "sh") and "not run" not in block.marks
            and "run by" not in block.marks and not installs_only(block))


def installs_only(block: Block) -> bool:
    """An sh block of `pip install` lines alone: checked against pyproject.toml's extras
    (test_every_install_line_names_extras_that_exist), not run."""
    commands = [line for line in block.text.split("\n") if line.strip()]
    return block.lang == "sh" and all(line.startswith("pip install ") for line in commands)


# -- the marks ----------------------------------------------------------------------------------


def test_every_fence_names_its_language_and_every_mark_is_known():
    found = all_blocks()
    assert len(found) > 50
    unnamed = [b.where for b in found if b.lang not in LANGS]
    assert unnamed == [], f"fences without a language of {sorted(LANGS)}: {unnamed}"
    # A `text` block is no example: no shell prompt, no Python import.
    hidden = [b.where for b in found if b.lang == "text"
              and re.search(r"^(\$ |import |from \S+ import )", b.text, re.M)]
    assert hidden == [], f"code in `text` blocks: {hidden}"
    unknown = [(b.where, k) for b in found for k in b.marks if k not in MARK_KEYS]
    assert unknown == []
    not_run = [b for b in found if "not run" in b.marks]
    assert all(b.marks["not run"] for b in not_run), "every `not run` mark says why"
    assert len(not_run) <= MOST_NOT_RUN, [b.where for b in not_run]
    for block in found:
        if "setup" in block.marks:
            assert block.marks["setup"] in SETUPS, block.where
        if "run by" in block.marks:
            # The module named runs the block: it exists, and reads the block's document.
            module = REPO / block.marks["run by"]
            assert module.is_file(), block.where
            assert block.doc.name in module.read_text(), (block.where, block.marks["run by"])


def test_every_output_shown_is_compared_by_whoever_runs_it():
    """A block that shows what a command or a script prints is run and compared: here, or by
    the module its `run by` mark names, which reads the block's output (a console block's
    lines after each `$ ` command, a Python block's printed() lines)."""
    for block in all_blocks():
        shows = block.lang == "console" or (block.lang == "python" and printed(block.text))
        if not shows or "not run" in block.marks:
            continue
        if "run by" in block.marks:
            module = (REPO / block.marks["run by"]).read_text()
            reads = ("$ " in module or "session(" in module) if block.lang == "console" else (
                "printed(" in module or "# prints:" in module)
            assert reads, f"{block.where}: {block.marks['run by']} does not compare its output"
        else:
            assert to_run(block), block.where
    # A `text` block of what mq writes (log lines, a prompt, a file) is compared by the module
    # its `run by` mark names, which reads it with doc_blocks.shown().
    for block in all_blocks():
        if block.lang == "text" and "output" in block.marks:
            assert "shown(" in (REPO / block.marks.get("run by", "README.md")).read_text(), block.where


def test_the_readme_starts_with_the_set_up_then_a_first_message_and_stays_short():
    readme = REPO / "README.md"
    lines = readme.read_text().split("\n")
    assert len(lines) < 400, "README.md teaches the start; the reference lives in docs/"
    first, *others = blocks(readme)
    assert first.lang == "sh" and [line.split()[:2] for line in first.text.splitlines()] == [
        ["make", "run"], ["make", "test"]]
    python = next(b for b in others if b.lang == "python")
    assert all(f"client.{verb}(" in python.text for verb in ("put", "get", "ack")), python.where
    # Within the first screen after the set-up commands, and run here.
    assert python.line - first.line < 40 and to_run(python), python.where
    assert {"## Contents", "## Why mq, and when not"} <= set(lines)
    unlinked = [d.name for d in DOCUMENTS[1:] if f"](docs/{d.name})" not in readme.read_text()]
    assert unlinked == [], "README.md, Documents, links every document of docs/"


def test_config_blocks_parse():
    parsers = {"toml": tomllib.loads, "yaml": yaml.safe_load, "json": json.loads,
               "ini": lambda text: configparser.ConfigParser(strict=False).read_string(text)}
    for block in all_blocks():
        if block.lang in parsers and "not run" not in block.marks:
            try:
                parsers[block.lang](block.text)
            except Exception as err:  # noqa: BLE001 - any parser's error names the block
                pytest.fail(f"{block.where}: {block.lang} does not parse: {err}")


# -- install lines ------------------------------------------------------------------------------

INSTALL = re.compile(r"pip install ((?:['\"]?[\w.\[\],-]+['\"]?\s*)+)")


def install_lines(block: Block) -> list[list[str]]:
    """What the `pip install` lines of the block's section before it name, nearest last."""
    text = block.doc.read_text()
    start = text.rfind("\n## ", 0, text.find(block.text))
    before = text[max(start, 0):text.find(block.text)]
    return [packages(found.group(1)) for found in INSTALL.finditer(before)]


def packages(words: str) -> list[str]:
    """The distributions a pip install line names (its options and their values left out)."""
    return [w.strip("'\"") for w in words.split() if not w.startswith("-") and "=" not in w]


def declared(names: list[str]) -> set[str]:
    """The distributions pyproject.toml and the words of a pip install line declare, with
    what each of them requires in turn (as installed)."""
    project = pyproject()["project"]
    wanted = list(project["dependencies"])
    for word in names:
        found = re.fullmatch(r"(?:mq|\.)\[([\w,]+)\]", word)
        if found:
            for extra in found.group(1).split(","):
                assert extra in project["optional-dependencies"], f"no extra {extra!r} in pyproject.toml"
                wanted += project["optional-dependencies"][extra]
        elif word not in ("mq", "."):
            wanted.append(word)
    seen: set[str] = set()
    while wanted:
        name, wanted_here = required(wanted.pop())
        if name in seen or not wanted_here:
            continue
        seen.add(name)
        wanted += requires(name)
    return seen


@functools.cache
def pyproject() -> dict:
    """pyproject.toml, read once."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())


@functools.cache
def required(line: str) -> tuple[str, bool]:
    """The distribution a requirement names, and whether it is wanted without an extra (its
    marker, if any, holds); parsed once, as every install line's walk meets the same ones."""
    requirement = Requirement(line)
    wanted = not requirement.marker or requirement.marker.evaluate({"extra": ""})
    return requirement.name.lower().replace("_", "-"), wanted


@functools.cache
def requires(name: str) -> tuple[str, ...]:
    """What an installed distribution requires (nothing when it is not installed); each one
    looked up once, as every install line's walk passes the same ones."""
    try:
        return tuple(metadata.requires(name) or [])
    except metadata.PackageNotFoundError:
        return ()


@functools.cache
def top_level() -> dict:
    """Top-level import name -> the installed distributions that provide it."""
    return metadata.packages_distributions()


@functools.cache
def files_of(name: str) -> tuple[str, ...]:
    """The paths an installed distribution holds."""
    return tuple(str(f) for f in metadata.distribution(name).files or [])


@functools.cache
def distribution_of(module: str) -> str | None:
    """The installed distribution whose files hold the module (a namespace package's part
    belongs to the one holding that part), or None for the standard library."""
    top = module.split(".")[0]
    if module == "mq.pipeline" or module.startswith("mq.pipeline."):
        return "pyspark"  # The Spark data source: mq's part that needs an extra.
    if top == "mq" or top in sys.stdlib_module_names:
        return None
    candidates = top_level().get(top, [])
    path = module.replace(".", "/")
    for depth in range(module.count(".") + 1, 0, -1):
        prefix = "/".join(path.split("/")[:depth])
        owners = [name for name in candidates
                  if any(f.startswith((prefix + "/", prefix + ".py")) for f in files_of(name))]
        if owners:
            return owners[0].lower().replace("_", "-")
    return top


def imports(code: str, names: bool = True) -> set[str]:
    """The modules a block of Python imports; with names, each name taken from a module as
    module.name (it may be a module of a namespace package: opentelemetry.trace)."""
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {f"{node.module}.{alias.name}" for alias in node.names} if names else {node.module}
    return found


def test_each_python_example_imports_only_what_its_install_line_provides():
    for block in all_blocks():
        if block.lang != "python" or "not run" in block.marks:
            continue
        lines = install_lines(block)
        provided = declared(lines[-1] if lines else [])
        for module in sorted(imports(block.text)):
            dist = distribution_of(module)
            assert dist is None or dist in provided, (
                f"{block.where} imports {module} ({dist}), which "
                f"{'`pip install ' + ' '.join(lines[-1]) + '`' if lines else 'mq alone'} does not install")


def test_every_install_line_names_extras_that_exist():
    for doc in DOCUMENTS:
        for found in INSTALL.finditer(doc.read_text()):
            declared(packages(found.group(1)))


# -- running ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs_mq(tmp_path_factory):
    """The daemon every example of this module talks to: one save and one fetch actor, as
    the documents' outputs show them (a daemon with two is made by the setup that shows it)."""
    workdir = tmp_path_factory.mktemp("docs")
    daemon = Daemon(workdir / "root", workdir, workers=1)
    daemon.start()
    daemon.wait_ready()
    yield daemon
    daemon.cleanup()


class Context:
    """Where a document's examples run: the daemon, the environment, the ids seen so far."""

    def __init__(self, daemon: Daemon, workdir: Path):
        self.workdir = workdir
        self.bindings: dict[str, str] = {}
        self.started: list[Daemon] = []
        #: What to do once the block that a setup prepared has run.
        self.after: list = []
        self.use(daemon)

    def use(self, daemon: Daemon) -> None:
        """Aim the examples from here on at this daemon."""
        self.daemon = daemon
        self.url = f"http://127.0.0.1:{daemon.port}"
        self.env = {**os.environ, "MQ": self.url, "MQ_URL": self.url, "PYTHONUNBUFFERED": "1",
                    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "80"}

    def own_daemon(self, **options) -> Daemon:
        """A new daemon for the examples from here on (one whose counters start at zero)."""
        daemon = Daemon(self.workdir / f"own{len(self.started)}" / "root", self.workdir, **options)
        self.started.append(daemon)
        daemon.start()
        self.use(daemon.wait_ready())
        return daemon

    def addressed(self, text: str) -> str:
        """The text with this daemon's address for the documents' default one."""
        for address in ("http://127.0.0.1:8080", "http://localhost:8080"):
            text = text.replace(address, self.url)
        return text

    def substituted(self, text: str) -> str:
        """The example's text aimed at this daemon, with the ids seen so far put in."""
        text = self.addressed(text)
        for seen, actual in self.bindings.items():
            text = text.replace(seen, actual)
        return text.replace(".venv/bin/", f"{BIN}/")


def setup_fresh(ctx: Context) -> None:
    """No queue of the examples is there yet."""
    for queue in ctx.daemon.request("GET", "/_mq/stats").json()["queues"]:
        ctx.daemon.request("DELETE", f"/{queue}")


def setup_orders_stats(ctx: Context) -> None:
    """A daemon of its own with only the queue orders, four messages added (one delayed) and
    one of them fetched."""
    ctx.own_daemon(workers=2)
    for body in (b"one", b"two", b"three"):
        ctx.daemon.add("orders", body)
    assert ctx.daemon.request("POST", "/orders/messages?delay=3600", b"later").status == 201
    assert ctx.daemon.fetch("orders").status == 200
    poll_for(lambda: ctx.daemon.request("GET", "/_mq/stats").json()["queues"]["orders"]["in_flight"] == 1,
             10, what="the mover to count the message in flight")


def setup_tokens(ctx: Context) -> None:
    """A daemon of its own with a token file: an admin token, and a read token "reader" whose
    secret is in $READ_TOKEN."""
    workdir = ctx.workdir / f"own{len(ctx.started)}"
    workdir.mkdir()
    daemon = AccessDaemon(workdir, entry("admin", "admin-secret", ["admin"])
                          + entry("reader", "read-secret", ["read"]), ["AKIDDOCS"], "admin-secret")
    ctx.started.append(daemon)
    ctx.use(daemon.ready())
    ctx.env["READ_TOKEN"] = "read-secret"


def setup_save_actor_killed(ctx: Context) -> None:
    """The daemon's only save actor killed with kill -9, its supervisor held (SIGSTOP) until
    the block has run, so that the restart cannot come first; then the supervisor goes on,
    and the examples once the actor it restarts answers."""
    daemon = ctx.daemon
    assert daemon.workers == 1, "the daemon of the examples has one save actor"
    os.kill(daemon.pid, signal.SIGSTOP)
    try:
        daemon.kill_child("save-0")
        poll_for(lambda: unreachable(daemon.request("POST", "/probe/messages", b"x")), 10,
                 what="the front to see the save actor gone")
    except BaseException:
        os.kill(daemon.pid, signal.SIGCONT)
        raise

    def resume() -> None:
        os.kill(daemon.pid, signal.SIGCONT)
        daemon.wait_ready()
        # The probes (one stored before the front saw the actor gone, wait_ready's own) are
        # deleted and gone from the statistics that the next examples list (`mqctl ls`).
        probes = {"probe", PROBE_QUEUE}

        def probes_gone() -> bool:
            for queue in probes:
                assert daemon.request("DELETE", f"/{queue}").status in (204, 404, 503)
            return not probes & set(daemon.request("GET", "/_mq/stats").json()["queues"])

        poll_for(probes_gone, 30, what="the probe queues to be gone from the statistics")

    ctx.after.append(resume)


#: What a `setup:` mark asks to be prepared before its block runs.
SETUPS = {"fresh": setup_fresh, "orders-stats": setup_orders_stats, "tokens": setup_tokens,
          "save-actor-killed": setup_save_actor_killed}


def normalized(output: bytes) -> str:
    """A command's output as the documents show it: LF line ends, no Date or Server header."""
    text = output.replace(b"\r\n", b"\n").decode("latin-1")
    text = re.sub(r"^(Date|Server): .*\n", "", text, flags=re.M)
    return text.strip("\n")


#: The default root, as sessions name it: the test daemon's root in its place.
ROOT = re.compile(r"/tmp/mq(?![\w-])")
#: A command that is one of mq's programs and its arguments alone (quoted words, no shell
#: syntax): its main() runs in a child forked from this process (cli_support.run_forked),
#: which pays its imports once for the module instead of at every line. `mq` only with an
#: option that makes it print and exit: anything else would start a daemon inside the fork.
PROGRAM = re.compile(r"(?:\S*/)?(mqctl|mq-mover|mq-reaper|mq)((?: +(?:[^\s'\"$`\\;&|<>()*?]+|'[^']*'))*)")
#: Each program's module (its main()), and what it imports as it runs: imported here at its
#: first command (not at collection, which every worker of a parallel run does), for its forks.
MAINS = {"mqctl": ("mq.ctl.main", "mq.client"), "mq-mover": ("mq.actors.mover",),
         "mq-reaper": ("mq.actors.reaper",), "mq": ("mq.supervisor.main",)}
PRINTS_AND_EXITS = {"--help", "--version", "--print-config"}


def run_command(command: str, ctx: Context, cwd: Path, options: str = "-c") -> tuple[int, bytes]:
    """A command (or a script, with bash's options), its exit status and what it wrote to
    stdout and stderr together."""
    program = PROGRAM.fullmatch(command.strip("\n"))
    argv = shlex.split(program.group(2)) if program else []
    if program and (program.group(1) != "mq" or PRINTS_AND_EXITS & set(argv)):
        imported = [importlib.import_module(name) for name in MAINS[program.group(1)]]
        done = run_forked(imported[0].main, argv, ctx.env, timeout=60, cwd=cwd, merged=True)
        return done.returncode, done.stdout.encode()
    done = subprocess.run(["bash", options, command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=ctx.env, cwd=cwd, timeout=60)
    return done.returncode, done.stdout


def run_console(block: Block, ctx: Context) -> None:
    """Each command of a session, its output matched against the one documented."""
    steps = session(block)
    assert steps, f"{block.where}: a console block without a `$ ` command"
    for command, expected in steps:
        if not command.endswith("--help"):
            # The daemon's address and root, 127.0.0.1:8080 and /tmp/mq by default, are the
            # test daemon's (a help text's default is the default).
            expected = ROOT.sub(str(ctx.daemon.root), ctx.addressed(expected))
        command = ROOT.sub(str(ctx.daemon.root), ctx.substituted(command))
        actual = normalized(run_command(command, ctx, ctx.workdir)[1])
        regex, groups = pattern(expected.encode("utf-8").decode("latin-1"), ctx.bindings,
                                block.marks.get("output", ""))
        found = re.fullmatch(regex, actual)
        assert found, f"{block.where}: $ {command}\n--- documented:\n{expected}\n--- got:\n{actual}"
        for name, documented in groups.items():
            ctx.bindings[documented] = found.group(name)


def as_script(code: str, where: str):
    """A main() that runs code as `python -c` would, to its exit: the threads it started
    joined, then the exit functions it registered (none of this process's)."""
    def main(argv: list[str]) -> int:
        sys.argv = ["-c", *argv]
        atexit._clear()
        try:
            exec(compile(code, where, "exec"), {"__name__": "__main__"})  # noqa: S102 - the example
        finally:
            threading._shutdown()
            atexit._run_exitfuncs()
        return 0
    return main


def run_python(block: Block, ctx: Context) -> None:
    """A Python block as a script of its own, in a child forked from this process after what it
    imports was imported here (so two examples of one client import it once); what it says it
    prints, matched as a session's output is."""
    code = ctx.substituted(block.text)
    for module in sorted(imports(code, names=False)):
        importlib.import_module(module)
    done = run_forked(as_script(code, block.where), [], ctx.env, timeout=60, cwd=ctx.workdir)
    assert done.returncode == 0, f"{block.where}:\n{block.text}\n{done.stdout}{done.stderr}"
    shown = printed(block.text)
    if shown is not None:
        expected = ctx.addressed("\n".join(shown))
        regex, groups = pattern(expected, ctx.bindings, block.marks.get("output", ""))
        actual = done.stdout.strip("\n")
        assert re.fullmatch(regex, actual), f"{block.where}: prints\n{actual}\n--- documented:\n{expected}"


def run_sh(block: Block, ctx: Context) -> None:
    """An sh block as one script, from the repository (it names etc/ and .venv/ from there)."""
    status, output = run_command(ctx.substituted(block.text), ctx, REPO, "-ec")
    assert status == 0, f"{block.where}:\n{block.text}\n{output.decode(errors='replace')}"


RUNNERS = {"console": run_console, "python": run_python, "sh": run_sh}


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda doc: doc.name)
def test_the_examples_run_as_written(doc, docs_mq, tmp_path):
    ctx = Context(docs_mq, tmp_path)
    ran, runnable = [], []
    try:
        for block in blocks(doc):
            if not to_run(block) or is_spark(block):
                continue
            runnable.append(block.where)
            if "setup" in block.marks:
                SETUPS[block.marks["setup"]](ctx)
            try:
                RUNNERS[block.lang](block, ctx)
            finally:
                while ctx.after:
                    ctx.after.pop()()
            ran.append(block.where)
    finally:
        for daemon in ctx.started:
            daemon.cleanup()
    assert ran == runnable


@pytest.mark.spark
def test_the_spark_examples_run_as_written(spark, tmp_path):
    from mq.local import LocalClient

    root = tmp_path / "root"
    with LocalClient(str(root), create_root=True) as local:
        local.put("orders", b"ready now")
        local.put("orders.eu", b"in an hour", delay=3600)
    found = [b for b in all_blocks() if to_run(b) and is_spark(b)]
    assert found
    for block in found:
        code = block.text.replace("/srv/mq", str(root))
        exec(compile(code, block.where, "exec"), {})  # noqa: S102 - the documented code, as written
    rows = spark.read.format("mq").option("root", str(root)).option("queues", ".*").load().collect()
    assert sorted((r["queue"], r["body"]) for r in rows if r["queue"] == "replay") == [
        ("replay", b"in an hour"), ("replay", b"ready now")]

