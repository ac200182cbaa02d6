"""Consumers of a fifo queue on several daemons sharing a root, checked against the model of
message groups: one receive at a time holds a group, and each group comes in the order sent."""

import random
import threading

from support import Daemon, poll_for


class GroupsInFlight:
    """What the consumers of both daemons hold, per group, as the model of a fifo queue has
    it: at most one receive holds a group's messages, and each group comes in the order sent."""

    def __init__(self, sent: dict[str, list[str]]):
        self.sent = sent
        self.lock = threading.Lock()
        self.holder: dict[str, tuple[object, int]] = {}
        self.received: dict[str, list[str]] = {group: [] for group in sent}
        self.broken: list[str] = []

    def got(self, receive: object, daemon: str, messages: list[dict]) -> None:
        """A receive's messages: each group's must be free or this receive's, and next in order."""
        with self.lock:
            for message in messages:
                group, body = message["Attributes"]["MessageGroupId"], message["Body"]
                held = self.holder.get(group)
                if held is not None and held[0] is not receive:
                    self.broken.append(f"{body} handed out by {daemon} while {group} was in flight")
                self.holder[group] = (receive, (held[1] if held else 0) + 1)
                self.received[group].append(body)
                if self.received[group] != self.sent[group][:len(self.received[group])]:
                    self.broken.append(f"{group} out of order: {self.received[group]}")

    def done(self, message: dict) -> None:
        """One message about to be deleted: its group is free once its receive has none left."""
        with self.lock:
            group = message["Attributes"]["MessageGroupId"]
            receive, left = self.holder[group]
            if left == 1:
                del self.holder[group]
            else:
                self.holder[group] = (receive, left - 1)


def consume(client, url: str, name: str, model: GroupsInFlight, total: int, stop) -> None:
    """Receive 1 to 3 messages at a time, keep them a moment, delete them in order."""
    rng = random.Random(name)
    while not stop.is_set() and sum(map(len, model.received.values())) < total:
        got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=rng.randint(1, 3),
                                     AttributeNames=["MessageGroupId"]).get("Messages", [])
        if not got:
            stop.wait(0.02)
            continue
        receive = object()
        model.got(receive, name, got)
        stop.wait(rng.random() * 0.02)
        for message in got:
            model.done(message)
            client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def consume_groups(endpoints: dict, sent: dict[str, list[str]], per_daemon: int = 2,
                   timeout: float = 60) -> GroupsInFlight:
    """Run `per_daemon` consumers on each daemon ({name: (boto client, queue url)}) until
    every message sent ({group: bodies in order}) was received, or the model broke."""
    model = GroupsInFlight(sent)
    total = sum(map(len, sent.values()))
    stop = threading.Event()
    threads = [threading.Thread(target=consume, args=(client, url, f"{name}{n}", model, total, stop))
               for name, (client, url) in endpoints.items() for n in range(per_daemon)]
    for t in threads:
        t.start()
    try:
        poll_for(lambda: model.broken or model.received == sent, timeout,
                 what="every group to be received")
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    return model


def sqs_of(daemon: Daemon):
    """A boto3 SQS client of the daemon that never retries (a retry would hide a 5xx)."""
    import boto3
    from botocore.config import Config
    return boto3.client("sqs", endpoint_url=f"http://127.0.0.1:{daemon.port}", region_name="us-east-1",
                        aws_access_key_id="AKIDMQGROUPS0000000", aws_secret_access_key="mq-groups",
                        config=Config(retries={"max_attempts": 0}))


def groups_across(daemons: dict[str, Daemon], groups: int = 3, per_group: int = 12,
                  queue: str = "shared.fifo") -> GroupsInFlight:
    """A fifo queue filled through the first daemon with `groups` groups of `per_group`
    messages, interleaved, then consumed through all of them (consume_groups)."""
    clients = {name: sqs_of(daemon) for name, daemon in daemons.items()}
    first = next(iter(clients.values()))
    url = first.create_queue(QueueName=queue, Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "60"})["QueueUrl"]
    sent = {f"g{g}": [f"g{g}-{n}" for n in range(per_group)] for g in range(groups)}
    for n in range(per_group):
        for group, bodies in sent.items():
            first.send_message(QueueUrl=url, MessageBody=bodies[n], MessageGroupId=group)
    return consume_groups({name: (client, client.get_queue_url(QueueName=queue)["QueueUrl"])
                           for name, client in clients.items()}, sent)
