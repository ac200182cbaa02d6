"""What every supervised process runs: run() in a child forked from the supervisor
(supervisor/forking.py), or python -m mq.supervisor.child KIND INDEX RUN_DIR OPTIONS."""

import asyncio
import sys
from typing import Any

import setproctitle

from mq import event_loops, logs
from mq.config import Options
from mq.supervisor import heartbeat


def main() -> None:
    """Run one front or actor process with the options the supervisor passed as JSON."""
    kind, index, run_dir, options_json = sys.argv[1:5]
    run(kind, int(index), run_dir, Options.from_json(options_json))


def run(kind: str, index: int, run_dir: str, options: Options) -> None:
    """Be the front or actor number index until told to stop."""
    if kind == "front":
        title = "front" if options.fronts == 1 else f"front {index}"
    else:
        title = f"{kind} actor {index}"
    setproctitle.setproctitle(f"mq: {title} [{options.root}]")
    logs.configure(f"{kind}-{index}", options.log_level, options.log_file)
    if kind == "front":
        from mq.http.front import serve

        async def serve_beating():
            beating = asyncio.ensure_future(heartbeat.beat_forever())
            try:
                await serve(options, run_dir, index=index)
            finally:
                beating.cancel()

        try:
            # A Runner, as asyncio.run does, with the loop of --event-loop (asyncio.run takes
            # no loop_factory before Python 3.12).
            with asyncio.Runner(loop_factory=event_loops.factory(options.event_loop)) as runner:
                runner.run(serve_beating())
        finally:
            logs.flush()  # Lines of the loop's last turn.
    elif kind == "reaper":
        from mq.actors.reaper import run_actor

        run_actor(options)
    else:
        from mq.actors.base import Actor
        from mq.actors.fetch import FetchActor
        from mq.actors.mover import MoverActor
        from mq.actors.save import SaveActor

        actors: dict[str, type[Actor[Any]]] = {"save": SaveActor, "fetch": FetchActor,
                                               "mover": MoverActor}
        actors[kind](options, index, run_dir).run()


if __name__ == "__main__":
    main()
