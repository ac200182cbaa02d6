"""The reference model of mq's queues: what every front end must answer (docs/DELIVERY.md).

Plain Python, no I/O and no clock of its own. Operations that depend on time take `now`, and a
timer moves only when the caller says it ran out (`expire`, `fall_due`, `close_window`,
`retain_after`) once it has seen the daemon do it; so the model never guesses the outcome of a
race with the mover. Messages are named by their body (`key`, unique in a run) until their id
is known: an RPC push answers "ok" without one.
"""

from dataclasses import dataclass, field

READY, DELAYED, IN_FLIGHT, PART, GONE = "ready", "delayed", "in_flight", "part", "gone"
#: Reply outcomes, whatever the front end calls them.
OK, DEAD, CONFLICT, NOT_FOUND = "ok", "dead", "conflict", "not_found"
#: Seconds around a de-duplication key's end of window inside which both answers are right.
KEY_MARGIN = 0.3


@dataclass
class Msg:
    """One message as the model knows it."""

    key: str
    seq: int  # add order: ids are time-ordered, so this is the order of a queue's messages
    queue: str
    state: str
    id: str | None = None
    deliveries: int = 0  # delivery count of the in-flight delivery, or of the last one
    due: float = 0.0  # a delayed or in-flight message's due time
    group: str = ""
    added: float = 0.0  # when the add was answered: retention counts from the id's time
    window: float = 0.0  # a part's window close time
    parts: list = field(default_factory=list)  # a compound's part keys, in add order


@dataclass
class Props:
    """The properties the model acts on (docs/DELIVERY.md, "Properties")."""

    timeout: float = 30.0
    retry: int = 2
    dead_letter_queue: str = ""
    dedup_window: float = 300.0
    fifo: bool = False
    accum: float = 0.0
    retention: float = 0.0
    max_body_bytes: int = 0  # checked by the front; kept so that props pass through


@dataclass
class Queue:
    """A queue: its properties and its de-duplication keys (key -> (message, recorded at))."""

    name: str
    props: Props
    keys: dict = field(default_factory=dict)


class Model:
    """Every queue of one root, and every message a run added to them."""

    def __init__(self, default_timeout: float = 30.0):
        self.default_timeout = default_timeout
        self.queues: dict[str, Queue] = {}
        self.msgs: dict[str, Msg] = {}
        self.seq = 0

    # -- queues ---------------------------------------------------------------------------

    def create(self, name: str, **props) -> bool:
        """Create a queue (True) or keep the one there (False); props replace the defaults."""
        if name in self.queues:
            return False
        self.queues[name] = Queue(name, Props(**{"timeout": self.default_timeout, **props}))
        return True

    def dead_letter_queue(self, name: str) -> str:
        """Where the queue's dead letters go."""
        return self.queues[name].props.dead_letter_queue or f"{name}.dead"

    def messages(self, queue: str, *states) -> list[Msg]:
        """The queue's messages in these states (any but gone when none given), oldest first."""
        wanted = states or (READY, DELAYED, IN_FLIGHT, PART)
        return sorted((m for m in self.msgs.values() if m.queue == queue and m.state in wanted),
                      key=lambda m: m.seq)

    def purge(self, queue: str, forget_keys: bool = False) -> int:
        """Remove every message of the queue, parts included; the keys stay unless told."""
        gone = self.messages(queue)
        for m in gone:
            m.state = GONE
        if forget_keys:
            self.queues[queue].keys.clear()
        return len(gone)

    def delete_queue(self, queue: str) -> None:
        """Remove the queue with its messages, keys and properties."""
        self.purge(queue)
        del self.queues[queue]

    # -- adds -----------------------------------------------------------------------------

    def key_state(self, queue: str, dedup: str, now: float) -> tuple[str, Msg | None]:
        """("live" | "expired" | "either", the earlier message) of a de-duplication key."""
        q = self.queues[queue]
        if dedup not in q.keys:
            return "expired", None
        earlier, recorded = q.keys[dedup]
        left = recorded + q.props.dedup_window - now
        if left > KEY_MARGIN:
            return "live", earlier
        if left < -KEY_MARGIN:
            return "expired", earlier
        return "either", earlier

    def add(self, queue: str, key: str, now: float, delay: float = 0.0, dedup: str | None = None,
            group: str = "", accumulate: bool = True, duplicate: bool | None = None) -> Msg:
        """Add a message (the queue is created on its first add); return it, or the earlier
        message for a live key. `duplicate` settles a key at the end of its window: the
        front's answer, checked against the model beforehand with key_state."""
        self.create(queue)
        q = self.queues[queue]
        if dedup is not None:
            state, earlier = self.key_state(queue, dedup, now)
            if duplicate is None:
                assert state != "either", "a key at the end of its window needs the front's answer"
                duplicate = state == "live"
            if duplicate:
                return earlier
        self.seq += 1
        msg = Msg(key, self.seq, queue, READY, group=group, added=now)
        if accumulate and q.props.accum > 0:
            msg.state = PART
        elif delay > 0:
            msg.state, msg.due = DELAYED, now + delay
        self.msgs[key] = msg
        if dedup is not None:
            q.keys[dedup] = (msg, now)
        return msg

    def open_windows(self, queue: str) -> dict[float, list[Msg]]:
        """The parts of each open window, by its close time."""
        out: dict[float, list[Msg]] = {}
        for m in self.messages(queue, PART):
            out.setdefault(m.window, []).append(m)
        return out

    def close_window(self, queue: str, window: float, key: str) -> Msg:
        """The mover closed a window: its parts become one ready compound named `key`."""
        parts = self.open_windows(queue).pop(window)
        for m in parts:
            m.state = GONE
        self.seq += 1
        compound = Msg(key, self.seq, queue, READY, added=min(m.added for m in parts),
                       parts=[m.key for m in parts])
        self.msgs[key] = compound
        return compound

    # -- fetches --------------------------------------------------------------------------

    def blocked(self, m: Msg, holder: set, taken: tuple = ()) -> bool:
        """True while an older message of m's group is in flight (or taken by this fetch)
        with another holder (fifo)."""
        if not (self.queues[m.queue].props.fifo and m.group):
            return False
        return any(o.group == m.group and o.seq < m.seq and id(o) not in holder
                   for o in self.messages(m.queue, IN_FLIGHT) + list(taken))

    def expected_fetch(self, queue: str, n: int, holder: bool = False) -> list[Msg]:
        """The messages a fetch of up to n claims, in order, under strict FIFO. holder: one
        request takes more of a group it holds first (SQS ReceiveMessage)."""
        taken: list[Msg] = []
        held: set = set()
        while len(taken) < n:
            ready = [m for m in self.messages(queue, READY) if m not in taken]
            if holder and taken:
                groups = {m.group for m in taken if m.group}
                mine = [m for m in ready if m.group in groups]
                if mine and self.queues[queue].props.fifo:
                    taken.append(mine[0])
                    held.add(id(mine[0]))
                    continue
            free = [m for m in ready if not self.blocked(m, held, tuple(taken))]
            if not free:
                break
            taken.append(free[0])
            if holder:
                held.add(id(free[0]))
        return taken

    def loose_fetch(self, queue: str, ids: list[str], holder: bool = False) -> list[Msg] | None:
        """The messages a fetch under --peers claimed (ids, in any order), or None when no
        order of them has each claim take one of the two oldest messages a strict claim could
        take next (docs/DELIVERY.md, "How FIFO holds"); a group one request holds gives its next."""
        taken: list[Msg] = []
        held: set = set()
        left = set(ids)
        while left:
            ready = [m for m in self.messages(queue, READY) if m not in taken]
            fifo = self.queues[queue].props.fifo
            groups = {m.group for m in taken if m.group}
            mine = [m for m in ready if m.group in groups] if holder and fifo else []
            # A group's younger message is never a candidate: the spread must not pass over it.
            heads = [m for m in ready if not (fifo and m.group and any(
                o.group == m.group and o.seq < m.seq for o in ready))]
            candidates = mine[:1] or [m for m in heads if not self.blocked(m, held, tuple(taken))][:2]
            m = next((m for m in candidates if m.id in left), None)
            if m is None:
                return None
            taken.append(m)
            left.discard(m.id)
            if holder:
                held.add(id(m))
        return taken

    def fetchable(self, queue: str) -> list[Msg]:
        """The ready messages no group holds back, oldest first."""
        return [m for m in self.messages(queue, READY) if not self.blocked(m, set())]

    def claim(self, m: Msg, now: float, timeout: float | None = None) -> None:
        """A fetch handed m out: delivery n+1, hidden until now + the queue's timeout."""
        assert m.state == READY, m
        m.state, m.deliveries = IN_FLIGHT, m.deliveries + 1
        m.due = now + (timeout if timeout is not None else self.queues[m.queue].props.timeout)

    # -- replies --------------------------------------------------------------------------

    def find(self, queue: str, message_id: str) -> Msg | None:
        """The live message of that id in that queue (parts are not messages)."""
        for m in self.msgs.values():
            if m.id == message_id and m.queue == queue and m.state not in (GONE, PART):
                return m
        return None

    def exhausted(self, m: Msg) -> bool:
        """True when delivery m.deliveries was the last its queue's retry allows."""
        retry = self.queues[m.queue].props.retry
        return retry != -1 and m.deliveries > retry

    def reply(self, queue: str, message_id: str, delivery: int | None, op: str,
              now: float = 0.0, seconds: float | None = None) -> str:
        """ack, nack, extend or delete (ack without a receipt) one delivery; the outcome."""
        m = self.find(queue, message_id)
        if m is None:
            return NOT_FOUND
        if op == "delete" or (op == "ack" and delivery is None):
            m.state = GONE
            return OK
        if m.state != IN_FLIGHT or (delivery is not None and delivery != m.deliveries):
            return CONFLICT
        if op == "ack":
            m.state = GONE
            return OK
        if op == "extend":
            m.due = now + (seconds if seconds is not None else self.queues[queue].props.timeout)
            return OK
        return self.give_back(m)

    def give_back(self, m: Msg) -> str:
        """A delivery ended unacked (nack or timer): ready again, or a dead letter."""
        if not self.exhausted(m):
            m.state = READY
            return OK
        dead = self.dead_letter_queue(m.queue)
        self.create(dead)
        # A dead-letter queue that never dead-letters keeps the count (as SQS counts receives
        # across queues); one with retries of its own starts the count again.
        kept = m.deliveries if self.queues[dead].props.retry == -1 else 0
        m.queue, m.state, m.deliveries = dead, READY, kept
        return DEAD

    def expire(self, m: Msg) -> str:
        """m's timer ran out (the daemon was seen returning it)."""
        assert m.state == IN_FLIGHT, m
        return self.give_back(m)

    def fall_due(self, m: Msg) -> None:
        """A delayed message's due time came (seen ready)."""
        assert m.state == DELAYED, m
        m.state = READY

    def redrive(self, queue: str) -> int:
        """Every ready dead letter of the queue moves back, its count at 0."""
        moved = self.messages(self.dead_letter_queue(queue), READY) \
            if self.dead_letter_queue(queue) in self.queues else []
        for m in moved:
            m.queue, m.deliveries = queue, 0
        return len(moved)

    def retain_after(self, queue: str, cutoff: float) -> list[Msg]:
        """Retention removed every message of the queue added before cutoff; those."""
        gone = [m for m in self.messages(queue, READY, DELAYED, IN_FLIGHT) if m.added < cutoff]
        for m in gone:
            m.state = GONE
        return gone

    # -- what the root should hold --------------------------------------------------------

    def files(self, queue: str) -> dict[str, tuple[str, int]]:
        """id -> (state, deliveries in the file name) of every message with a known id."""
        out = {}
        for m in self.messages(queue):
            if m.id is not None:
                out[m.id] = (m.state, m.deliveries if m.state != DELAYED else 0)
        return out
