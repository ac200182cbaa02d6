"""A store operation's change set names every folder its renames, creates and unlinks touched.

Each operation runs on a real root through a RecordingDisk (tests/crash_model.py), which logs
the system calls the Disk really made. Every entry change the operation left unflushed must
be in a folder its Changes names: the actor's batch and mq.local flush those folders and
nothing else before they answer, so a folder missing here is a reply that may not survive a
power cut (tests/store/test_flush_ordering.py checks whole replies; this checks each operation).
"""

import os
import time

import pytest

from crash_model import ENTRY_KINDS, RecordingDisk
from mq import store as fmt
from mq.ids import new_id
from mq.store import Changes, Store


@pytest.fixture(params=["file", "fs"])
def store(tmp_path, request):
    disk = RecordingDisk(request.param)
    store = Store(os.path.realpath(tmp_path / "root"), request.param, disk=disk)
    store.init()
    return store


def written(store: Store, queue: str, body: bytes = b"body") -> str:
    """A message file written into new/; return its id."""
    message_id = new_id()
    store.write_new(queue, message_id, fmt.encode_message(body, "text/plain", 1, message_id), None)
    return message_id


def ready(store: Store, queue: str, body: bytes = b"body") -> str:
    """A ready message of the queue; return its id."""
    message_id = written(store, queue, body)
    store.states.deliver_new(queue, message_id, delayed=False)
    return message_id


def claimed(store: Store, queue: str) -> str:
    """A message in flight (delivery 1); return its id."""
    message_id = ready(store, queue)
    assert store.states.claim(queue, message_id, time.time() + 60) is not None
    return message_id


def unflushed_folders(store: Store, operation) -> tuple[set, set]:
    """(folders of the entry changes the operation left unflushed, folders its Changes names),
    both relative to the root."""
    store.flush({store.root, *(os.path.join(d, n) for d, ns, _ in os.walk(store.root) for n in ns)})
    changes = Changes()
    recording = store.disk.start_recording(store.root)
    try:
        operation(changes)
    finally:
        store.disk.stop_recording()
    covered, end = recording.covered_at(), len(recording.events)
    left = {folder for i, event in enumerate(recording.events)
            if event.kind in ENTRY_KINDS and covered[i] == end for folder in event.folders()}
    return left, {os.path.relpath(folder, store.root) for folder in changes}


# Each scenario sets its message up, then returns the operation to record, given a Changes.

def deliver_ready(store):
    message_id = written(store, "q")
    return lambda changes: store.states.deliver_new("q", message_id, False, changes)


def deliver_delayed(store):
    message_id = written(store, "q")
    return lambda changes: store.states.deliver_new("q", message_id, True, changes)


def deliver_to_new_queue(store):
    message_id = written(store, "fresh")
    return lambda changes: store.states.deliver_new("fresh", message_id, False, changes)


def undeliver(store):
    message_id = ready(store, "q")
    return lambda changes: store.states.undeliver_new("q", message_id, False, changes)


def discard(store):
    message_id = written(store, "q")
    return lambda changes: store.discard_new("q", message_id, changes)


def claim(store):
    message_id = ready(store, "q")
    return lambda changes: store.states.claim("q", message_id, time.time() + 60, 0, changes)


def ack(store):
    message_id = claimed(store, "q")
    return lambda changes: store.states.ack("q", message_id, 1, changes)


def remove_guessed(store):
    message_id = claimed(store, "q")
    return lambda changes: store.states.remove("q", message_id, 3, ("in_flight", 1), changes)


def remove_probed(store):
    message_id = ready(store, "q")
    return lambda changes: store.states.remove("q", message_id, 3, ("in_flight", 2), changes)


def release(store):
    message_id = claimed(store, "q")
    return lambda changes: store.states.release("q", message_id, time.time(), 1, force=True,
                                         changes=changes)


def release_dead(store):
    message_id = claimed(store, "q")
    return lambda changes: store.states.release("q", message_id, time.time(), 1, "dlq", force=True,
                                         dead_count=1, changes=changes)


def release_removed(store):
    message_id = claimed(store, "gone")
    os.rmdir(store.queue_dir("gone"))  # Deleted meanwhile: the release moves it to remove/.
    return lambda changes: store.states.release("gone", message_id, time.time(), 1, force=True,
                                         changes=changes)


def quarantine(store):
    message_id = claimed(store, "q")
    return lambda changes: store.states.quarantine("q", message_id, 1, changes)


def redrive(store):
    ready(store, "dlq")
    return lambda changes: store.states.redrive("dlq", "q", changes)


def dedup_record(store):
    message_id = ready(store, "q")
    return lambda changes: store.dedup.record("q", "key", message_id, 60, time.time(), changes)


def add_part(store):
    part_id = written(store, "q")
    return lambda changes: store.accumulation.add_part("q", part_id, 5.0, changes)


def remove_part(store):
    part_id = written(store, "q")
    window, _ = store.accumulation.add_part("q", part_id, 5.0)
    return lambda changes: store.accumulation.remove_part("q", window, part_id, changes)


SCENARIOS = [deliver_ready, deliver_delayed, deliver_to_new_queue, undeliver, discard, claim,
             ack, remove_guessed, remove_probed, release, release_dead, release_removed,
             quarantine, redrive, dedup_record, add_part, remove_part]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.__name__)
def test_a_change_set_names_the_folders_the_operation_left_unflushed(store, scenario):
    store.queues.create_queue("q")
    left, named = unflushed_folders(store, scenario(store))
    assert left, "the operation changed no folder: the test looks at nothing"
    assert left <= named, f"changed but not named: {sorted(left - named)}"


def test_an_extend_names_the_folder_of_the_file_it_timed(store):
    store.queues.create_queue("q")
    message_id = claimed(store, "q")
    changes = Changes()
    assert store.states.extend("q", message_id, 1, time.time() + 120, changes)
    assert changes == {store.folder("delay")}


def test_a_key_not_pending_names_the_folders_its_add_entered(store):
    store.queues.create_queue("q")
    message_id, changes = ready(store, "q"), Changes()
    assert not store.dedup.pending("q", message_id, changes)
    assert changes == {store.queue_dir("q"), store.folder("delay"), store.dedup_dir("q")}
    pending, changes = written(store, "q"), Changes()
    assert store.dedup.pending("q", pending, changes)
    assert not changes


# The store's own flushes: crash clean-up and the retention sweep record what they change on a
# Changes of their own and flush it before they return, so they must leave nothing unflushed.

def clean_new_with_key(store):
    message_id = new_id()
    data = fmt.encode_message(b"body", "text/plain", 1, message_id, dedup_key="key", writer="w")
    store.write_new("q", message_id, data, None)
    assert store.dedup.record("q", "key", message_id, 60, time.time()) is None
    return lambda: store.recovery.clean_new(writer="w") == 1


def retention_sweep(store):
    ready(store, "q")
    claimed(store, "q")
    return lambda: store.queues.remove_expired({"q": int(time.time() * 1000) + 60_000})[0] == {"q": 2}


@pytest.mark.parametrize("scenario", [clean_new_with_key, retention_sweep],
                         ids=lambda scenario: scenario.__name__)
def test_an_operation_that_flushes_itself_leaves_no_change_unflushed(store, scenario):
    store.queues.create_queue("q")
    operation = scenario(store)
    done = []
    left, _ = unflushed_folders(store, lambda changes: done.append(operation()))
    assert done == [True], "the operation did not do its work: the test looks at nothing"
    assert not left, f"changed but never flushed: {sorted(left)}"
