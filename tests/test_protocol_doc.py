"""docs/PROTOCOL.md is the contract of the frames: its op tables name exactly what each actor's
command table serves."""

import re
from pathlib import Path

import pytest

from mq.actors.fetch import FetchActor
from mq.actors.mover import MoverActor
from mq.actors.save import SaveActor

PROTOCOL = Path(__file__).resolve().parent.parent / "docs" / "PROTOCOL.md"


def documented_ops(heading: str) -> set[str]:
    """The ops in the first column of the table under a '### heading' of PROTOCOL.md."""
    text = PROTOCOL.read_text()
    section = text.split(f"### {heading}", 1)[1].split("\n#", 1)[0]
    ops = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            ops.update(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return ops


@pytest.mark.parametrize("heading, actor", [("Save actor", SaveActor), ("Fetch actor", FetchActor),
                                            ("Mover", MoverActor)])
def test_each_actors_command_table_is_the_one_documented(heading, actor):
    assert set(actor.COMMANDS) == documented_ops(heading)
