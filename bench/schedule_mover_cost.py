"""--mode mover-cost of bench/schedule_lateness.py: mq.actors.mover.move_due timed in this
process on a scratch root, with the same number of due messages and small or large delay/
folders, to show that a pass costs what falls due, not what waits.
"""

import os
import shutil
import tempfile
import time

from harness import loadavg, machine_line, percentile
from schedule_traffic import QUEUE

from mq import store as fmt
from mq.ids import new_id


def mover_cost(args):
    """Time move_due passes on a scratch root: k due, with delay/ holding k or k + big files."""
    from mq.actors.due_heap import DueHeap
    from mq.actors.mover import move_due

    repeats = args.repeats
    print("# mover cost: mq.actors.mover.move_due on a scratch root, in this process")
    print(f"machine: {machine_line()}; load {loadavg()}")
    print(f"median of {repeats} passes; 'not due' files are due in an hour, as a big schedule is")
    print(f"{'not due':>8} {'due/pass':>8} {'pass ms':>8} {'flush ms':>9} {'excl. flush ms':>15} "
          f"{'µs/moved excl.':>15} {'idle tick µs':>13}")
    for waiting in args.waiting:
        for due_count in args.due:
            tmp = tempfile.mkdtemp(prefix="mq-movercost-", dir=args.tmp)
            try:
                store = fmt.Store(os.path.join(tmp, "root"), sync="fs")
                store.init()
                # The passes' clock runs an hour ahead of the files' ctime: the store leaves a
                # message renamed less than SETTLE_SECONDS ago where it is.
                now = time.time() + 3600
                groups = [now - repeats + r for r in range(repeats)]  # one group per pass
                for i in range(waiting + due_count * repeats):
                    message_id = new_id()
                    due = now + 3600 if i < waiting else groups[(i - waiting) % repeats]
                    store.write_new(QUEUE, message_id, b"x", due)
                    store.states.deliver_new(QUEUE, message_id, delayed=True)
                store.flush(set())
                heap = DueHeap()
                for entry in store.states.list_delayed():  # what the mover loads at start
                    heap.add(*entry)
                # A tick with nothing due (what every poll wake-up costs), on the same heap.
                t = time.perf_counter()
                for _ in range(1000):
                    move_due(store, heap, groups[0] - 0.5)
                idle_tick = (time.perf_counter() - t) / 1000 * 1e6
                flush_t = []
                real_flush = store.flush

                def timed_flush(dirs, real_flush=real_flush, flush_t=flush_t):
                    s = time.perf_counter()
                    real_flush(dirs)
                    flush_t.append(time.perf_counter() - s)

                store.flush = timed_flush
                passes = []
                for r in range(repeats):
                    store.disk.syncfs(store.root)
                    flush_t.clear()
                    t = time.perf_counter()
                    moved = move_due(store, heap, groups[r] + 0.5)
                    took = time.perf_counter() - t
                    n = sum(len(v) for v in moved.values())
                    assert n == due_count, (n, due_count)
                    passes.append((took, sum(flush_t)))
                took = percentile([p[0] for p in passes], 50)
                flush = percentile([p[1] for p in passes], 50)
                excl = percentile([p[0] - p[1] for p in passes], 50)
                print(f"{waiting:>8} {due_count:>8} {took * 1000:8.2f} {flush * 1000:9.2f} "
                      f"{excl * 1000:15.2f} {excl / due_count * 1e6:15.1f} {idle_tick:13.1f}")
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
