"""An actor's notes to the mover: gathered over LINGER_SECONDS, in order, urgent ones at once."""

import time

import pytest

from mq.actors import mover_notes
from mq.actors.mover_notes import LINGER_SECONDS, MoverNotes
from mq.operations import Delayed, Settled
from support import poll_for


def later(seconds: float = 30.0) -> float:
    """A due time that many seconds from now."""
    return time.time() + seconds


@pytest.fixture
def sent():
    return []


@pytest.fixture
def notes(sent):
    return MoverNotes(sent.append)


@pytest.mark.timeout(10)
def test_the_notes_of_several_batches_leave_as_one_message_of_each_kind_in_their_order(
        notes, sent, monkeypatch):
    monkeypatch.setattr(mover_notes, "LINGER_SECONDS", 60.0)  # None is old enough yet.
    due = later(600)
    notes.add([("q", "a", 1, due)], [])
    notes.add([("q", "b", 1, due)], [("q", "a", 1)])
    notes.add([], [("q", "b", 1)])
    notes.add([("q", "c", 1, due)], [])
    notes.send_due()
    assert sent == [], "sent before the oldest note was LINGER_SECONDS old"
    monkeypatch.setattr(mover_notes, "LINGER_SECONDS", 0.0)
    notes.send_due()
    assert sent == [Delayed(entries=[["q", "a", 1, due], ["q", "b", 1, due]]),
                    Settled(entries=[["q", "a", 1], ["q", "b", 1]]),
                    Delayed(entries=[["q", "c", 1, due]])]
    notes.send_due()
    assert len(sent) == 3, "sent twice"


@pytest.mark.timeout(10)
def test_notes_leave_once_the_oldest_is_linger_seconds_old(notes, sent):
    notes.add([("q", "a", 1, later())], [])
    poll_for(lambda: notes.send_due() or sent, timeout=5, what="the note sent")
    assert sent == [Delayed(entries=[sent[0].entries[0]])]


@pytest.mark.timeout(10)
def test_a_timer_due_within_twice_the_linger_goes_at_once_with_what_waited(notes, sent):
    notes.add([], [("q", "a", 1)])
    far, soon = later(), time.time() + LINGER_SECONDS
    notes.add([("q", "b", 0, far), ("q", "c", 0, soon)], [])
    assert sent == [Settled(entries=[["q", "a", 1]]),
                    Delayed(entries=[["q", "b", 0, far], ["q", "c", 0, soon]])]
    assert notes.wait_ms(500) == 500, "nothing should wait any more"


@pytest.mark.timeout(10)
def test_the_actor_s_wait_for_requests_ends_when_the_oldest_note_is_due(notes, monkeypatch):
    assert notes.wait_ms(500) == 500
    notes.add([], [("q", "a", 1)])
    assert 0 <= notes.wait_ms(500) <= LINGER_SECONDS * 1000 + 1
    assert notes.wait_ms(3) <= 3
    monkeypatch.setattr(mover_notes, "LINGER_SECONDS", 0.0)
    assert notes.wait_ms(500) == 0
