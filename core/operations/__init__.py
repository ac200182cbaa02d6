"""Every operation between the front and the actors, declared once (docs/PROTOCOL.md).

Each op is a request dataclass: its fields with their wire types, defaults and limits. The
front builds one and sends it (`link.call(Add(queue=..., body=...))`); the actor's loop
decodes the payload into it, checked, before the handler runs (actors/base.py), so an op's
handler takes the typed request. `OPS` maps each op name to its class.
"""

from mq.operations.admin import (
                                 MAX_PEEK,
                                 Move,
                                 Moved,
                                 Peek,
                                 PropsDelete,
                                 PropsGet,
                                 PropsPatch,
                                 PropsPut,
                                 Purge,
                                 QueueDelete,
                                 QueueGet,
                                 QueuePut,
                                 Redrive,
                                 RulesDelete,
                                 RulesGet,
                                 RulesPut,
)
from mq.operations.fetch import (
                                 MAX_FETCH,
                                 MAX_QUEUES,
                                 MAX_WAIT_SECONDS,
                                 Ack,
                                 AckBatch,
                                 Acked,
                                 Delete,
                                 Extend,
                                 Fetch,
                                 FetchAny,
                                 FetchBatch,
                                 Fetched,
                                 Nack,
                                 Watch,
                                 check_wait,
)
from mq.operations.fields import OPS, OnQueue, Operation
from mq.operations.notes import (
                                 Cancel,
                                 Delayed,
                                 EndWaits,
                                 Ready,
                                 Relay,
                                 Relist,
                                 Rescan,
                                 Settled,
                                 Stats,
                                 Taken,
                                 Window,
)
from mq.operations.patterns import MAX_PATTERN, FanOut, PullAny
from mq.operations.save import (
    MAX_BATCH_MESSAGES,
    MAX_FANOUT_QUEUES,
    Add,
    AddBatch,
    Added,
    AddFanout,
    FannedOut,
    accumulated_of,
    add_of,
)

__all__ = [
    "OPS", "Operation", "OnQueue", "MAX_BATCH_MESSAGES", "MAX_FANOUT_QUEUES", "MAX_FETCH", "MAX_PEEK",
    "MAX_QUEUES", "MAX_WAIT_SECONDS", "check_wait",
    "MAX_PATTERN", "FanOut", "PullAny",
    "Add", "AddBatch", "AddFanout", "Added", "FannedOut", "accumulated_of", "add_of",
    "Fetch", "FetchBatch", "FetchAny", "Watch", "Fetched", "Ack", "AckBatch", "Acked", "Nack",
    "Extend", "Delete",
    "QueueGet", "QueuePut", "QueueDelete", "Redrive", "Move", "Moved", "Peek", "Purge", "PropsGet",
    "PropsPut",
    "PropsPatch", "PropsDelete", "RulesGet", "RulesPut", "RulesDelete",
    "Stats", "Ready", "Relist", "Cancel", "EndWaits", "Delayed", "Rescan", "Relay", "Settled", "Taken",
    "Window",
]
