"""Streaming read: claim messages into micro-batches, acknowledge them once the sink committed.

Each micro-batch is a manifest, streams/{consumer}/{seq}.json, listing the (queue, id,
delivery) it claimed. Claiming is the fetch actor's own move (store.states.claim: the message
goes to delay/ as in flight, due after visibilityTimeout), so the daemon and other consumers
never hand it out meanwhile. The offset is {"seq": N}. Spark replays a batch from its manifest
after a restart; a batch is acknowledged (store.states.ack: delay/ -> remove/) when Spark asks
for the offset after it, since by then the batch is in the sink's commit log
(docs/PIPELINE.md). Both record what they change on a Changes, flushed once before anyone
hears of it, as the actors' are.
"""

import os
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from mq import store as fmt
from mq.pipeline import notify
from mq.pipeline.options import SourceOptions
from mq.pipeline.reader import read_entries
from mq.store.listing import Entry
from mq.store.streams import load_manifest


class ClaimedShard(InputPartition):
    """Part of one or more micro-batches: [queue, id, delivery] triples to read from delay/."""

    def __init__(self, claimed: list):
        super().__init__(len(claimed))
        self.claimed = claimed


class ClaimingStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """At-least-once consumption of the matching queues (see the module docstring)."""

    def __init__(self, options: SourceOptions):
        options.require_queues()
        self.options = options
        self.target: set | None = None  # availableNow: the (queue, id) ready when it began

    def store(self) -> fmt.Store:
        """A Store for this call (never kept on self: the reader is pickled to executors)."""
        return self.options.open_store()

    def initialOffset(self) -> dict:
        """Before the first batch of a new checkpoint: just before any manifest left over."""
        seqs = self.store().streams.list_manifests(self.options.consumer)
        # Leftover manifests (a run whose checkpoint was deleted) hold claimed messages:
        # starting before them delivers those first instead of leaving them in flight.
        return {"seq": seqs[0] - 1 if seqs else 0}

    def getDefaultReadLimit(self):
        """maxMessagesPerBatch messages per micro-batch."""
        return ReadMaxRows(self.options.max_messages_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        """Remember what is ready now; an availableNow run claims nothing added later."""
        store = self.store()
        self.target = {(q, i) for q in self.options.matching_queues(store)
                       for i, _ in store.states.list_ready(q)}

    def latestOffset(self, start: dict, limit) -> dict:
        """Acknowledge batches up to start; replay a planned manifest, or claim a new batch."""
        store = self.store()
        done = int(start["seq"])
        self.acknowledge_through(store, done)
        later = [s for s in store.streams.list_manifests(self.options.consumer) if s > done]
        if later:
            return {"seq": later[-1]}  # Claimed before a restart: deliver those first.
        cap = None if isinstance(limit, ReadAllAvailable) else (
            limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_messages_per_batch)
        claimed = self.claim(store, cap)
        if not claimed:
            return {"seq": done}
        store.streams.write_manifest(self.options.consumer, done + 1, claimed)
        return {"seq": done + 1}

    def claim(self, store: fmt.Store, cap: int | None) -> list:
        """Claim up to cap ready messages, oldest first per queue; flush once; tell the mover."""
        due = time.time() + self.options.visibility_timeout
        claimed: list[list] = []
        changes = fmt.Changes()
        for queue in self.options.matching_queues(store):
            for message_id, attempts in sorted(store.states.list_ready(queue)):
                if cap is not None and len(claimed) >= cap:
                    break
                if self.target is not None and (queue, message_id) not in self.target:
                    continue
                if store.states.claim(queue, message_id, due, attempts, changes) is None:
                    continue  # Taken by the daemon or another consumer meanwhile.
                claimed.append([queue, message_id, attempts + 1])
        if claimed:
            store.flush(changes)
            # So that a daemon's mover hands them out again if this query dies for good: the
            # notice reaches daemons on any host, the notification those on this one at once.
            store.notices.post()
            if self.options.notify:
                notify.tell_daemons(store, {}, [(q, i, n, due) for q, i, n in claimed])
        return claimed

    def acknowledge_through(self, store: fmt.Store, seq: int) -> int:
        """Remove every message of the manifests up to seq (their batches are in the sink)."""
        acked, changes, paths = 0, fmt.Changes(), []
        for number in store.streams.list_manifests(self.options.consumer):
            if number > seq:
                break
            path = store.manifest_path(self.options.consumer, number)
            for queue, message_id, delivery in load_manifest(path):
                # False: the delivery is over (timed out and handed out again): a duplicate.
                acked += store.states.ack(queue, message_id, delivery, changes)
            paths.append(number)
        if paths:
            store.flush(changes)
            store.streams.remove_manifests(self.options.consumer, paths)
        return acked

    def partitions(self, start: dict, end: dict):
        """The claimed messages of batches start+1..end, in numPartitions slices."""
        store = self.store()
        claimed = []
        for seq in range(int(start["seq"]) + 1, int(end["seq"]) + 1):
            path = store.manifest_path(self.options.consumer, seq)
            if os.path.exists(path):
                claimed.extend(load_manifest(path))
        count = max(1, min(self.options.partitions, len(claimed)))
        return [ClaimedShard(claimed[i::count]) for i in range(count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read the claimed messages from delay/; one that timed out and moved is skipped."""
        assert isinstance(partition, ClaimedShard), "partitions() plans ClaimedShards only"
        store = self.store()
        entries = (Entry("in_flight", q, i, n, store.delay_path(q, i, n))
                   for q, i, n in partition.claimed)
        yield from read_entries(entries)

    def commit(self, end: dict) -> None:
        """Spark's word that batches up to end are in the sink: acknowledge them."""
        self.acknowledge_through(self.store(), int(end["seq"]))

    def stop(self) -> None:
        """Nothing to release: unacknowledged batches are replayed or acknowledged on restart."""

