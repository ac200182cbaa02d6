"""Model soak: the state machines of tests/model/ (every front end against the reference model,
on a daemon alone on its root and on one with --peers=1) with many more examples and steps,
round after round, until the time is spent (the last round runs to its end).

    python bench/model_soak.py --minutes 30 [--examples 200] [--steps 60] [--front sqs] [--shrink]

Each round runs pytest on tests/model/test_model_fronts.py and test_model_peers.py (or the
fronts named) with MQ_MODEL_EXAMPLES and MQ_MODEL_STEPS raised; a round stops at the first
failure of a machine and prints its steps (with --shrink, hypothesis shrinks them first, which
replays steps on the live daemon for minutes). Exit status 0 when every round passed.
"""

import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The machines' tests: module, test function (parametrized by front).
TESTS = (("tests/model/test_model_fronts.py", "test_front_answers_as_the_model_says"),
         ("tests/model/test_model_peers.py", "test_front_answers_as_the_model_says_beside_peers"))
FRONTS = ("rest", "rest_batch", "rpc", "sqs", "local")


def one_round(args, left: float) -> int:
    """Run the machines once with the soak's settings; pytest's exit status."""
    env = {**os.environ, "MQ_MODEL_EXAMPLES": str(args.examples), "MQ_MODEL_STEPS": str(args.steps),
           "MQ_MODEL_TIMEOUT": str(max(60, int(left)))}
    if args.shrink:
        env["MQ_MODEL_SHRINK"] = "1"
    tests = [f"{module}::{test}[{front}]" for module, test in TESTS for front in args.front]
    command = [sys.executable, "-m", "pytest", *tests, "-n", "0", "-q", "-x", "-p", "no:cacheprovider"]
    return subprocess.call(command, cwd=ROOT, env=env)


def main() -> int:
    """Parse the options and run rounds until --minutes are spent or one fails."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10, help="how long to soak (default 10)")
    parser.add_argument("--examples", type=int, default=100,
                        help="hypothesis examples per machine and round (default 100)")
    parser.add_argument("--steps", type=int, default=60, help="most steps per example (default 60)")
    parser.add_argument("--front", action="append", choices=FRONTS,
                        help="only this front (again for more); default all")
    parser.add_argument("--shrink", action="store_true", help="shrink a failing example")
    args = parser.parse_args()
    args.front = args.front or list(FRONTS)
    deadline = time.monotonic() + args.minutes * 60
    rounds = 0
    while (left := deadline - time.monotonic()) > 0:
        rounds += 1
        print(f"model soak: round {rounds}, {left / 60:.1f} min left", flush=True)
        status = one_round(args, left)
        if status != 0:
            print(f"model soak: round {rounds} failed (pytest exit {status})", flush=True)
            return 1
    print(f"model soak: {rounds} round(s) passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
