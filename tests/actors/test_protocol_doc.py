"""docs/PROTOCOL.md is the contract of the frames: its op tables name exactly what each actor's
command table serves, and each op's fields are exactly those of its request type."""

import re

import pytest

from mq.actors.fetch import FetchActor
from mq.actors.mover import MoverActor
from mq.actors.save import SaveActor
from mq.operations import OPS
from mq.operations.fields import EVERY

from repo_support import REPO

PROTOCOL = REPO / "docs" / "PROTOCOL.md"
ACTORS = [("Save actor", SaveActor), ("Fetch actor", FetchActor), ("Mover", MoverActor)]


def table_rows(heading: str) -> list[tuple[set[str], set[str]]]:
    """(ops, fields) per row of the op table under a '### heading' of PROTOCOL.md: the names
    in backquotes of its first column, and those of its second outside parentheses (which
    describe a field, and may name other things)."""
    text = PROTOCOL.read_text()
    section = text.split(f"### {heading}", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = line.split("|")
            fields = cells[2]
            while re.search(r"\([^()]*\)", fields):
                fields = re.sub(r"\([^()]*\)", "", fields)
            rows.append((set(re.findall(r"`([a-z_]+)`", cells[1])),
                         set(re.findall(r"`([a-z_]+)`", fields))))
    return rows


def documented_ops(heading: str) -> set[str]:
    """The ops in the first column of the table under a '### heading' of PROTOCOL.md."""
    return {op for ops, _ in table_rows(heading) for op in ops}


@pytest.mark.parametrize("heading, actor", ACTORS)
def test_each_actors_command_table_is_the_one_documented(heading, actor):
    assert {kind.op for kind in actor.COMMANDS} == documented_ops(heading)


@pytest.mark.parametrize("heading, actor", ACTORS)
def test_each_actor_serves_the_ops_that_name_it(heading, actor):
    # An op's class says which actor serves it; that actor's table holds it, and no other's
    # (the statistics, served by every actor, aside).
    named = {cls for cls in OPS.values() if cls.actor in (actor.kind, EVERY)}
    assert set(actor.COMMANDS) == named, heading


@pytest.mark.parametrize("heading, actor", ACTORS)
def test_each_op_has_the_fields_documented_and_the_actor_decodes_its_declared_type(heading, actor):
    for ops, fields in table_rows(heading):
        for op in ops:
            [kind] = [kind for kind in actor.COMMANDS if kind.op == op]
            assert kind is OPS[op]
            assert set(kind.names) == fields, f"{heading}, {op}"


def test_the_tables_parse_into_fields():
    """The parser itself: a field described in parentheses is still one field, and what the
    parentheses name is not."""
    rows = dict((frozenset(ops), fields) for ops, fields in table_rows("Save actor"))
    assert rows[frozenset({"add_fanout"})] == {"queues", "body", "content_type", "due", "attributes"}
    assert rows[frozenset({"stats"})] == {"heap"}
