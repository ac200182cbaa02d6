"""The daemon's statistics, merged per queue from every actor's answer: what QueueService.stats
returns to the front ends that show them (http/stats.py's route, /metrics, the StatsD sender).

Nothing here lists a folder: the save actors count adds, the fetch actors hold the ready
indexes and count fetches, acks, nacks, redeliveries and dead letters, and the mover knows
which entries of delay/ are delayed and which are in flight (docs/OPERATIONS.md, "Watching mq").
Each of them also times its own flushes (mq.flush_times), served per actor, and tells how
many queues each of its per-queue tables holds ("tables", mq.store.gone_queues) and how many
memory blocks Python's allocator holds for it ("heap_blocks").
"""

from mq.errors import MqError

#: The events every queue is counted for, in the order the stats show them.
EVENTS = ("adds", "fetches", "acks", "nacks", "redeliveries", "dead_letters")
#: The depths every queue shows, gauges at the time of the request.
DEPTHS = ("ready", "delayed", "in_flight", "dead")
#: The events the dashboard's history gives per second, from the totals' growth between samples.
RATES = ("adds", "fetches", "acks", "nacks", "dead_letters")
#: The figures the queue list and the history add up over every queue.
GAUGES = ("ready", "delayed", "in_flight", "bytes", "waiting", "clients")


def blank_queue() -> dict:
    """One queue's figures before any actor's answer is added in."""
    return {**{depth: 0 for depth in DEPTHS}, "bytes": 0, "waiting": 0, "clients": 0,
            "oldest_ready_age_s": None,
            "dead_letter_queue": None,
            "totals": {event: 0 for event in EVENTS}, "rates": {event: 0.0 for event in EVENTS}}


def merge(names: list[str], answers: list, now: float) -> dict:
    """The per-queue statistics of the daemon from each actor's answer (or failure)."""
    queues: dict[str, dict] = {}
    actors: dict[str, str] = {}
    existing: set[str] = set()
    flush: dict[str, dict] = {}
    tables: dict[str, dict] = {}
    heap_blocks: dict[str, int] = {}
    all_fetchers = True
    for name, answer in zip(names, answers):
        if isinstance(answer, BaseException):
            actors[name] = answer.message if isinstance(answer, MqError) else repr(answer)
            all_fetchers = all_fetchers and not name.startswith("fetch-")
            continue
        actors[name] = "ok"
        if "flush" in answer:
            flush[name] = answer["flush"]
        if "tables" in answer:
            tables[name] = answer["tables"]
        if "heap_blocks" in answer:
            heap_blocks[name] = answer["heap_blocks"]
        for queue, entry in answer["queues"].items():
            merged = queues.setdefault(queue, blank_queue())
            for event, n in entry.get("totals", {}).items():
                merged["totals"][event] = merged["totals"].get(event, 0) + n
            for event, rate in entry.get("rates", {}).items():
                merged["rates"][event] = round(merged["rates"].get(event, 0.0) + rate, 3)
            for depth in ("ready", "delayed", "in_flight"):
                merged[depth] += entry.get(depth, 0)
            if name.startswith("fetch-") and "ready" in entry:  # Its own actor's.
                existing.add(queue)
                merged["bytes"] = entry.get("bytes", 0)
                merged["waiting"] = entry.get("waiting", 0)
                merged["oldest_ready_age_s"] = entry.get("oldest_ready_age_s")
                merged["dead_letter_queue"] = entry.get("dead_letter_queue")
    if all_fetchers:
        # The fetch actors know every queue there is; the others may still count deleted ones.
        queues = {queue: entry for queue, entry in queues.items() if queue in existing}
    for entry in queues.values():
        dead = queues.get(entry["dead_letter_queue"] or "")
        entry["dead"] = dead["ready"] if dead is not None else 0
    return {"time": round(now, 3), "complete": all(state == "ok" for state in actors.values()),
            "actors": actors, "queues": dict(sorted(queues.items())), "flush": flush,
            "tables": tables, "heap_blocks": heap_blocks}


def summed(queues: dict) -> dict:
    """The gauges and the totals of every queue added up, with the number of queues."""
    sums = {gauge: sum(q[gauge] for q in queues.values()) for gauge in GAUGES}
    sums["totals"] = {event: sum(q["totals"].get(event, 0) for q in queues.values())
                      for event in RATES}
    sums["queues"] = len(queues)
    return sums
