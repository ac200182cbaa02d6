"""The SQS API through boto3 and the broker-less mq.local on the daemon's root, behind the
interface of fronts.py."""

from botocore.exceptions import ClientError as BotoError

from fronts import Added, Front, Got, compound_parts
from queue_model import CONFLICT, DEAD, NOT_FOUND, OK, READY

#: Credentials boto3 signs with; the daemon checks none without --sqs-credentials.
ACCESS_KEY, SECRET_KEY, REGION = "AKIDMQMODEL000000000", "mq-model-secret-key", "us-east-1"


def boto_client(endpoint: str):
    """A boto3 SQS client of the endpoint that never retries (a retry would hide a 5xx)."""
    import boto3
    from botocore.config import Config
    return boto3.client("sqs", endpoint_url=endpoint, region_name=REGION,
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                        config=Config(retries={"max_attempts": 0}))

#: What SQS calls a stale or unknown receipt handle (docs/SQS.md, "Operations").
EXPIRED_FIFO = "InvalidParameterValue"
NOT_CHANGEABLE = "InvalidParameterValue"


def sqs_code(err: BotoError) -> str:
    """The SQS error code of a refusal; a 5xx fails the run."""
    status = err.response["ResponseMetadata"]["HTTPStatusCode"]
    assert status < 500, err.response
    return err.response["Error"]["Code"]


class Sqs(Front):
    """The SQS API (docs/SQS.md) through boto3: whole seconds, no delete by id, a purge
    forgets the de-duplication ids, dead letters only through a RedrivePolicy."""

    name = "sqs"
    batch = 10
    delete_by_id = False
    purge_forgets_keys = True
    deletes_expired = True
    groups = True
    delay_unit = 1.0
    slow_delays = True  # whole seconds

    def __init__(self, daemon):
        super().__init__(daemon)
        # One client per daemon, made by the first example: every example of every machine
        # makes an Sqs front (the fifo queue's), and a boto3 client costs tens of ms of CPU.
        if getattr(daemon, "sqs_client", None) is None:
            daemon.sqs_client = boto_client(f"http://127.0.0.1:{daemon.port}")
        self.client = daemon.sqs_client
        self.urls: dict[str, str] = {}
        self.fifo: set[str] = set()

    def url(self, queue: str) -> str:
        """The queue's URL (asked for once)."""
        if queue not in self.urls:
            self.urls[queue] = self.client.get_queue_url(QueueName=queue)["QueueUrl"]
        return self.urls[queue]

    def create_queue(self, queue: str, props: dict) -> None:
        """CreateQueue with the attributes the model's properties stand for: a retry as a
        RedrivePolicy to a dead-letter queue it creates first, a fifo queue for `.fifo`."""
        attributes = {"VisibilityTimeout": str(int(props.get("timeout", 60)))}
        if queue.endswith(".fifo"):
            attributes["FifoQueue"] = "true"
            self.fifo.add(queue)
        retry = props.get("retry", -1)
        if retry != -1:
            dead = props["dead_letter_queue"]
            dead_attributes = {"VisibilityTimeout": attributes["VisibilityTimeout"],
                               **({"FifoQueue": "true"} if queue.endswith(".fifo") else {})}
            dead_url = self.client.create_queue(QueueName=dead, Attributes=dead_attributes)["QueueUrl"]
            self.urls[dead] = dead_url
            arn = self.client.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])
            attributes["RedrivePolicy"] = ('{"deadLetterTargetArn": "%s", "maxReceiveCount": %d}'
                                           % (arn["Attributes"]["QueueArn"], retry + 1))
        self.urls[queue] = self.client.create_queue(QueueName=queue, Attributes=attributes)["QueueUrl"]
        rest = {k: v for k, v in props.items()
                if k not in ("timeout", "retry", "dead_letter_queue", "fifo")}
        if rest:
            self.patch(queue, rest)  # retention 0, dedup_window: mq's own properties

    def add(self, queue: str, body: str, delay: float = 0.0, dedup: str | None = None,
            group: str | None = None) -> Added:
        """SendMessage (a group and a de-duplication id on fifo queues)."""
        params = {"QueueUrl": self.url(queue), "MessageBody": body}
        if delay:
            params["DelaySeconds"] = int(delay)
        if queue in self.fifo:
            params["MessageGroupId"] = group or "g0"
            params["MessageDeduplicationId"] = dedup or f"k-{body}"
        reply = self.client.send_message(**params)
        return Added(reply["MessageId"])

    def add_many(self, queue: str, items: list[tuple[str, float, str | None]]) -> list[Added]:
        """SendMessageBatch: each (body, delay, dedup), stored one after the other."""
        entries = []
        for n, (body, delay, dedup) in enumerate(items):
            entry = {"Id": f"e{n}", "MessageBody": body}
            if delay:
                entry["DelaySeconds"] = int(delay)
            entries.append(entry)
        reply = self.client.send_message_batch(QueueUrl=self.url(queue), Entries=entries)
        assert not reply.get("Failed"), reply
        by_entry = {r["Id"]: r["MessageId"] for r in reply["Successful"]}
        return [Added(by_entry[f"e{n}"]) for n in range(len(items))]

    def fetch(self, queue: str, n: int = 1) -> list[Got]:
        """ReceiveMessage, no wait."""
        reply = self.client.receive_message(QueueUrl=self.url(queue), MaxNumberOfMessages=n,
                                            WaitTimeSeconds=0,
                                            MessageSystemAttributeNames=["ApproximateReceiveCount"])
        out = []
        for m in reply.get("Messages", []):
            attempts = int(m["Attributes"]["ApproximateReceiveCount"])
            assert m["ReceiptHandle"] == f"{m['MessageId']}.{attempts}", m
            out.append(Got(m["MessageId"], m["Body"], m["ReceiptHandle"], attempts))
        return out

    def expected(self, op: str, outcome: str, m=None, delivery=None) -> str:
        """DeleteMessage of a stale handle succeeds (a fifo queue refuses one whose timeout
        ran out, a standard queue deletes with it: Machine.answer); a visibility change of one
        fails unless the message is still visible from that very delivery (then it is accepted
        and changes nothing)."""
        expired = m is not None and m[0] == READY and m[1] == delivery
        if op == "ack":
            if outcome == CONFLICT and expired and m[2]:
                return EXPIRED_FIFO
            return OK
        if outcome in (OK, DEAD):
            return OK
        if outcome == CONFLICT and expired:
            return OK
        return NOT_CHANGEABLE

    def reply(self, queue, message_id, receipt, op, seconds=None) -> str:
        """DeleteMessage, ChangeMessageVisibility (0 for a nack)."""
        try:
            if op == "ack":
                self.client.delete_message(QueueUrl=self.url(queue), ReceiptHandle=receipt)
            else:
                timeout = 0 if op == "nack" else max(1, round(seconds or 60))
                self.client.change_message_visibility(QueueUrl=self.url(queue), ReceiptHandle=receipt,
                                                      VisibilityTimeout=timeout)
        except BotoError as err:
            return sqs_code(err)
        return OK

    def purge(self, queue: str) -> int | None:
        """PurgeQueue (it says no count)."""
        self.client.purge_queue(QueueUrl=self.url(queue))
        return None

    def extend_soon(self, queue: str, got: Got, seconds: float) -> str:
        """ChangeMessageVisibility to 1 s, its least."""
        return self.reply(queue, got.id, got.receipt, "extend", 1)


class Local(Front):
    """mq.local.LocalClient on the daemon's root (README.md, "Broker-less library"): no
    accumulation (its adds are normal messages), strict FIFO listing."""

    name = "local"
    accumulates = False
    slow_delays = True  # the daemon hears of its delayed adds at its notice cadence

    def __init__(self, daemon):
        super().__init__(daemon)
        from mq.local import LocalClient
        self.client = LocalClient(daemon.root, strict_fifo=True)

    def create_queue(self, queue: str, props: dict) -> None:
        """create_queue, then set_properties."""
        self.client.create_queue(queue)
        self.client.set_properties(queue, **props)

    def patch(self, queue: str, props: dict) -> None:
        """set_properties."""
        self.client.set_properties(queue, **props)

    def add(self, queue: str, body: str, delay: float = 0.0, dedup: str | None = None) -> Added:
        """put (a duplicate answers the first id, without saying so)."""
        return Added(self.client.put(queue, body, delay=delay or None, dedup_id=dedup))

    def fetch(self, queue: str, n: int = 1) -> list[Got]:
        """get."""
        m = self.client.get(queue)
        if m is None:
            return []
        got = Got(m.id, "", m.receipt, m.attempts)
        if m.content_type == "application/msgpack":
            got.parts = compound_parts(m.body)
        else:
            got.body = m.body.decode()
        return [got]

    def expected(self, op, outcome, m=None, delivery=None):
        """A nack that dead-letters returns like any other."""
        return OK if outcome == DEAD else outcome

    def reply(self, queue, message_id, receipt, op, seconds=None) -> str:
        """ack, nack, extend with a Message of that receipt; revoke for a delete by id."""
        from mq.client.errors import ConflictError, NotFoundError
        from mq.client.message import Message
        message = Message(queue, message_id, b"", "text/plain", receipt, 0, None)
        try:
            if op == "delete":
                self.client.revoke(queue, message_id)
            elif op == "extend":
                self.client.extend(message, seconds)
            else:
                getattr(self.client, op)(message)
        except ConflictError:
            return CONFLICT
        except NotFoundError:
            return NOT_FOUND
        return OK

    def purge(self, queue: str) -> int | None:
        """purge."""
        return self.client.purge(queue)

    def extend_soon(self, queue: str, got: Got, seconds: float) -> str:
        """extend(seconds) by mq.local itself: its `retime-` notice makes a daemon's mover
        read the shorter due time (docs/FORMAT.md)."""
        return self.reply(queue, got.id, got.receipt, "extend", seconds)
