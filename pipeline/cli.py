"""mq-pipeline: the Spark jobs (export, load, logstats) as one command with sub-commands."""

import argparse
import sys

from mq.errors import MqError
from mq.pipeline import session
from mq.store import Root


def common(parser: argparse.ArgumentParser) -> None:
    """Options every job takes."""
    parser.add_argument("--master", default=session.DEFAULT_MASTER,
                        help="Spark master URL, e.g. spark://host:7077, yarn, k8s://... "
                             f"(default {session.DEFAULT_MASTER})")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark setting, repeatable (e.g. spark.executor.memory=4g)")
    parser.add_argument("--ui", action="store_true", help="start Spark's web UI (default off)")


def queues(parser: argparse.ArgumentParser) -> None:
    """--root and the choice of queues."""
    parser.add_argument("--root", required=True, help="the mq root folder (shared by every node)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--queue", help="one queue name")
    which.add_argument("--queues", help="a regular expression that whole queue names match")


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(prog="mq-pipeline", description=__doc__)
    sub = parser.add_subparsers(dest="job", required=True)

    export = sub.add_parser("export", help="queues to Parquet, partitioned by queue and date")
    common(export)
    queues(export)
    export.add_argument("--output", required=True, help="Parquet folder to write")
    export.add_argument("--drain", action="store_true",
                        help="consume the messages: each is removed once its batch is in the output")
    export.add_argument("--checkpoint", help="--drain's Spark checkpoint folder (default OUTPUT/_checkpoint)")
    export.add_argument("--mode", default="errorifexists", choices=("errorifexists", "append", "overwrite"),
                        help="what a snapshot export does when OUTPUT exists (default errorifexists)")
    export.add_argument("--partitions", type=int, default=4, help="read partitions (default 4)")
    export.add_argument("--max-per-batch", type=int, default=100_000,
                        help="--drain: messages per micro-batch at most (default 100000)")

    load = sub.add_parser("load", help="Parquet, JSON lines, text lines or a folder of files into a queue")
    common(load)
    load.add_argument("--root", required=True, help="the mq root folder (shared by every node)")
    load.add_argument("--queue", required=True,
                      help="the queue every message goes to (a queue column in the input is ignored)")
    load.add_argument("--input", required=True, help="file or folder to read")
    load.add_argument("--format", default="auto", choices=("auto", "parquet", "json", "text", "files"),
                      help="input format (default auto: by file ending; a folder of files otherwise)")
    load.add_argument("--content-type", help="content type of every message (default: by format)")
    load.add_argument("--sync", default="fs", choices=("fs", "file"),
                      help="fs: one syncfs per task; file: fsync each file (default fs)")
    load.add_argument("--partitions", type=int, help="repartition the input into N write tasks")

    stats = sub.add_parser("logstats", help="mq's JSON logs to per-queue, per-minute counts and latency")
    common(stats)
    lines = stats.add_mutually_exclusive_group(required=True)
    lines.add_argument("--input", nargs="+", help="log files or folders")
    lines.add_argument("--queue", help="a queue of log lines, one a message (needs --root)")
    stats.add_argument("--root", help="the mq root folder of --queue")
    stats.add_argument("--output", required=True, help="Parquet folder to write (replaced)")
    stats.add_argument("--chart", help="PNG chart of rates over time (default OUTPUT.png)")
    return parser


def spark_conf(pairs: list[str]) -> dict:
    """--conf KEY=VALUE pairs as a dict."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"mq-pipeline: --conf {pair!r}: expected KEY=VALUE")
        conf[key] = value
    return conf


def rate(count: int, seconds: float) -> str:
    """Messages per second, for the closing line."""
    return f"{count / seconds:,.0f} msg/s" if seconds > 0 else "-"


def run(args, spark=None) -> dict:
    """Run the chosen job (on a new SparkSession unless one is given); print what it read and wrote."""
    if args.job == "logstats" and args.queue:
        Root(args.root or "").require_format()
    if args.job in ("export", "load"):
        # Before Spark starts: the root must exist, a job never makes one (mq --create-root).
        Root(args.root).require_format()
    own = spark is None
    if own:
        spark = session.build(f"mq-pipeline {args.job}", args.master, ui=args.ui, conf=spark_conf(args.conf))
    try:
        if args.job == "export":
            from mq.pipeline import export

            where = args.queue or f"/{args.queues}/"
            if args.drain:
                out = export.drain(spark, args.root, args.queue, args.queues, args.output, args.checkpoint,
                                   args.partitions, args.max_per_batch)
                print(f"export: drained {out['read']} messages of {where} in {args.root} "
                      f"({out['batches']} batches; each removed after its batch was in the output)")
            else:
                out = export.snapshot(spark, args.root, args.queue, args.queues, args.output,
                                      args.partitions, args.mode)
                print(f"export: read {out['read']} messages ({out['bytes']} body bytes) of {where} "
                      f"in {args.root}; nothing consumed")
            print(f"export: wrote {out['written']} rows to {args.output} (Parquet, partitioned by "
                  f"queue and date) in {out['seconds']:.1f} s, {rate(out['written'], out['seconds'])}")
        elif args.job == "load":
            from mq.pipeline import load

            out = load.run(spark, args.root, args.queue, args.input, args.format, args.content_type,
                           args.sync, args.partitions)
            print(f"load: read {args.input} as {out['format']}")
            print(f"load: wrote {out['messages']} messages to {args.root} "
                  f"({', '.join(f'{q}: {n}' for q, n in out['queues'].items()) or 'no queue'}; "
                  f"{out['delayed']} delayed, {out['duplicates']} dropped as duplicates), durable "
                  f"before commit, in {out['seconds']:.1f} s, {rate(out['messages'], out['seconds'])}")
        else:
            from mq.pipeline import logstats

            out = logstats.run(spark, args.input, args.output, args.chart, args.root, args.queue)
            where = ", ".join(args.input) if args.input else f"queue {args.queue} in {args.root}"
            print(f"logstats: read {out['read']} request lines from {where}")
            print(out["table"])
            print(f"logstats: wrote {out['written']} queue-minute rows to {args.output} (Parquet)"
                  + (f" and the chart {out['chart']}" if out["chart"] else " (no requests: no chart)"))
        return out
    finally:
        if own:
            spark.stop()


def main(argv: list[str] | None = None) -> int:
    """Entry point of mq-pipeline; exit status 0 on success, 1 on a failed job, 2 on bad input."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.job == "logstats" and args.queue and not args.root:
        parser.error("logstats --queue needs --root")
    try:
        run(args)
    except session.JavaMissing as err:
        print(f"mq-pipeline: {err}", file=sys.stderr)
        return 2
    except MqError as err:
        print(f"mq-pipeline: {err.message}", file=sys.stderr)
        return 2
    except Exception as err:  # A failed Spark job: one line, not the JVM's stack trace.
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"mq-pipeline: {args.job} failed: {first_line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
