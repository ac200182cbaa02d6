"""Accumulation under power cuts: acknowledged parts are combined once, never lost or repeated.

The crash model of tests/store/test_flush_ordering.py (tests/crash_model.py): parts are added to a
queue with `accum` > 0 by the in-process save actor, then the mover's close of the window runs,
all through a RecordingDisk. For every point of that recording the root a power cut would
leave gets the recovery a restart runs (new/ cleaned, then the mover's start: every window
settled, whatever its stage), and then:
- every acknowledged part is in exactly one compound message, whole, in the queue;
- no part is in two compounds (a crash between combining and removing the parts, or between
  publishing and removing the window, must not combine them again);
- a compound whose ready notice went out is the one in the queue, with all its parts, and
  once it is fetched and acknowledged it never comes back;
- no window is left behind.
"""

import os
import time
from collections import Counter

import pytest
from test_flush_ordering import SYNC_MODES, Rig, View, assert_sound
from test_flush_ordering import check_every_cut as check_each_cut

from mq.actors.accumulation import close_due_windows, time_windows
from mq.actors.due_heap import DueHeap
from mq.ids import new_id
from mq.store import Disk, Store, encode_message
from mq.store.accumulation import decode_compound

QUEUE = "acc"


class UnflushedDisk(Disk):
    """A disk whose flushes do nothing: the recovery's own durability is not under test here,
    and a syncfs per crash state would only slow the test down."""

    def __init__(self):
        super().__init__("fs")

    def syncfs(self, anchor: str) -> None:
        """No flush."""

    def fsync_dir(self, path: str) -> None:
        """No flush."""


def recovered_and_settled(path: str):
    """A power-cut root after a restart: new/ cleaned, then the mover's start settles every
    window (an open one as if its close time had come). Returns (view, windows left)."""
    store = Store(path, disk=UnflushedDisk())
    store.init()
    store.recovery.clean_new()
    timers = DueHeap()
    time_windows(store, timers)
    close_due_windows(store, timers, float("inf"))
    return View(path), store.accumulation.list_windows()


def parts_in_compounds(view: View) -> Counter:
    """How often each part body occurs across the compound messages of the view."""
    found = Counter()
    for place in view.places:
        if place.message.parts:
            bodies = [body for _, body in decode_compound(place.message.body)]
            assert len(bodies) == place.message.parts, f"{place.path}: header and body disagree"
            found.update(bodies)
    return found


def check_every_cut(rig: Rig, check) -> int:
    """check(view, windows left, acknowledged) on every crash state's recovered root."""
    return check_each_cut(rig, lambda settled, acknowledged: check(*settled, acknowledged),
                          recover=recovered_and_settled)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("sync", SYNC_MODES)
def test_acknowledged_parts_are_combined_exactly_once_at_every_point(tmp_path, sync):
    rig = Rig(tmp_path, sync)
    # A long window, so that all the parts fall into one; the close is run by hand below.
    rig.call("props_put", queue=QUEUE, properties={"accum": 3600})
    rig.record()
    first = rig.add({"queue": QUEUE, "body": b"p1", "content_type": "text/plain"},
                    {"queue": QUEUE, "body": b"p2", "content_type": "application/json"})
    assert [r["accumulated"] for r in first] == ["new", "yes"]
    rig.acked("p1", b"p1")
    rig.acked("p2", b"p2")
    [third] = rig.add({"queue": QUEUE, "body": b"p3"})
    assert third["accumulated"] == "yes" and third["due"] == first[0]["due"]
    rig.acked("p3", b"p3")
    timers = DueHeap()
    time_windows(rig.store, timers)
    ready = close_due_windows(rig.store, timers, float("inf"))
    [[compound_id, _]] = ready[QUEUE]
    rig.acked("closed", compound_id)
    fetched = rig.call("fetch", queue=QUEUE)
    assert fetched["id"] == compound_id and fetched["parts"] == 3
    rig.acked("fetched")
    rig.call("ack", queue=QUEUE, id=compound_id, receipt=fetched["receipt"])
    rig.acked("acked")

    def check(view, windows_left, acknowledged):
        assert_sound(view)
        assert not windows_left, f"windows left after the mover's start: {windows_left}"
        found = parts_in_compounds(view)
        twice = [body for body, n in found.items() if n > 1]
        assert not twice, f"parts combined twice: {twice}"
        if "acked" in acknowledged:
            assert not view.places, f"an acknowledged compound is back: {view.places}"
            return
        if "fetched" in acknowledged and not view.places:
            return  # The ack took effect; its reply had not gone out yet.
        for name in ("p1", "p2", "p3"):
            if name in acknowledged:
                assert found[acknowledged[name]] == 1, f"acknowledged part {name} lost"
        if "closed" in acknowledged:
            [place] = view.live(acknowledged["closed"])
            assert place.message.parts == 3, place.path
            assert decode_compound(place.message.body) == [
                ("text/plain", b"p1"), ("application/json", b"p2"),
                ("application/octet-stream", b"p3")]
        assert len([p for p in view.places if p.message.parts]) <= 1, "more than one compound"

    check_every_cut(rig, check)
    assert not os.listdir(rig.store.accum_dir(QUEUE)), "the live root kept its window"


def test_with_peers_a_window_found_closing_waits_until_it_is_stale(tmp_path):
    # Another daemon's mover may be closing it right now: finishing it at once could unlink the
    # compound it is writing. Alone on the root, such a window is a crash's leftover.
    store = Store(str(tmp_path / "root"))
    store.init()
    part = new_id()
    store.write_new(QUEUE, part, encode_message(b"p", "text/plain", 0, part), None)
    window, opened = store.accumulation.add_part(QUEUE, part, 3600)
    assert opened
    closing = f"{new_id()}.closing"
    store.disk.rename(store.window_dir(QUEUE, window), store.window_dir(QUEUE, closing))
    alone, peers = DueHeap(), DueHeap()
    time_windows(store, alone)
    time_windows(store, peers, peers=True)
    assert alone.due == {(QUEUE, closing, 0): 0.0}
    assert peers.due[(QUEUE, closing, 0)] > time.time() + 50
    assert close_due_windows(store, peers, time.time()) == {}
    [[compound_id, _]] = close_due_windows(store, alone, time.time())[QUEUE]
    assert compound_id == closing.split(".")[0]
