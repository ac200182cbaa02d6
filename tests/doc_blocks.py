"""The fenced code blocks of README.md and docs/*.md, with the marks written just before them.

Every fence names its language: `python`, `console` (a shell session: `$ ` commands and their
output), `sh` (commands alone), `json`, `toml`, `ini`, `yaml`, or `text` (a diagram, a layout,
log lines: no code). An HTML comment on the line before a fence says how the block is run:

    <!-- not run: why -->                 it cannot run here (a real cluster, systemd, ...)
    <!-- run by tests/x/test_y.py -->     that module runs it (it needs a daemon of its own)
    <!-- setup: name -->                  tests/project/test_doc_examples.py prepares `name` first
    <!-- output: trimmed -->              the output shows some of the lines, in order
    <!-- output: numbers vary -->         any number stands for any other (pids, sizes, times)
    <!-- output: as shown -->             the output is the whole block (with the usual rules)

A `text` block of what mq writes (log lines, a prompt, a file) has a `run by` mark and an
`output:` one (two values with a comma: `trimmed, numbers vary`); its module reads it with
shown() and compares what mq wrote with assert_shows().

A `python` block says what it prints in comments: either a `# prints:` line with the output
after it, one `# ` line each, or a comment on each `print(...)` line, its output on one line
(printed() reads them; whoever runs the block compares them with what it printed).

Several keys share one comment, separated by `;`. tests/project/test_doc_examples.py runs
every block but those marked `run by`, which the module named runs against a daemon set up its
own way (and compares what the block says it prints).
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

from repo_support import REPO

#: The documents whose examples are run.
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)\s*$")
MARK = re.compile(r"^<!--(.*)-->\s*$")


@dataclass
class Block:
    """One fenced block: where it is, its language, its text and the marks before it."""

    doc: Path
    line: int
    lang: str
    text: str
    section: str
    marks: dict = field(default_factory=dict)

    @property
    def where(self) -> str:
        """doc:line, as a failure names it."""
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def parse_marks(line: str) -> dict:
    """The keys of one `<!-- key: value; key -->` comment (a key with no value maps to "")."""
    found = MARK.match(line)
    if not found:
        return {}
    marks = {}
    for part in found.group(1).split(";"):
        part = part.strip()
        if part.startswith("run by "):
            marks["run by"] = part[len("run by "):].strip()
        elif part:
            key, _, value = part.partition(":")
            marks[key.strip()] = value.strip()
    return marks


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of one document, in order."""
    lines = doc.read_text().split("\n")
    found, section, i = [], "", 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i][3:].strip()
        opening = FENCE.match(lines[i])
        if opening:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            marks = parse_marks(lines[i - 1]) if i else {}
            found.append(Block(doc, i + 1, opening.group(1), "\n".join(lines[i + 1:end]) + "\n",
                               section, marks))
            i = end
        i += 1
    return found


def session(block: Block) -> list[tuple[str, str]]:
    """(command, expected output) of each `$ ` line of a console block; a command may go on over
    lines that end in a backslash."""
    steps: list[tuple[str, list[str]]] = []
    lines = block.text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = [line[2:]]
            while command[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                command.append(lines[i])
            steps.append(("\n".join(command), []))
        elif steps:
            steps[-1][1].append(line)
        i += 1
    return [(command, "\n".join(output).strip("\n")) for command, output in steps]


#: A line of Python that is one print() call and a comment: the line it prints.
PRINT_COMMENT = re.compile(r"^\s*print\(.*\)\s+# (.*)$")


def printed(code: str) -> list[str] | None:
    """The lines a Python block says it prints (`# prints:` and the comment lines after it, or
    the comment of each print() line, in order), or None when it says nothing."""
    if "\n# prints:\n" in "\n" + code:
        after = ("\n" + code).split("\n# prints:\n", 1)[1]
        return [line[2:] if line.startswith("# ") else line[1:] for line in after.rstrip("\n").split("\n")]
    found = [m.group(1) for m in map(PRINT_COMMENT.match, code.split("\n")) if m]
    return found or None


TOKENS = re.compile(
    r"(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"|(?P<boundary>mq-[0-9a-f]{24}|\b[0-9a-f]{32}\b)"
    r"|(?P<time>\b\d{9,10}\.\d+|\b\d{13}\b)"
    r"|(?P<duration>\b\d+\.\d{4,}\b)"
    r"|(?P<bytes>\(\d+ bytes: [0-9a-f ]+\))"
    r"|(?P<ellipsis>\.\.\.)"
    r"|(?P<length>(?<=Content-Length: )\d+)")


#: What a documented id or boundary may be in this run's output.
FORMS = {"uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
         "boundary": r"mq-[0-9a-f]{24}|[0-9a-f]{32}"}


def literal(text: str, numbers_vary: bool) -> str:
    """Text that must come as it is; with numbers_vary, any number for a number and any run of
    spaces for one of two or more (a table's columns follow the widths of its numbers)."""
    if not numbers_vary:
        return re.escape(text)
    parts = re.split(r"(\d+(?:\.\d+)?| {2,})", text)
    return "".join(re.escape(p) if i % 2 == 0 else (" +" if p.startswith(" ") else r"\d+(?:\.\d+)?")
                   for i, p in enumerate(parts))


def pattern(expected: str, bindings: dict, mode: str) -> tuple[str, dict]:
    """A regular expression that the output of a command must match whole, and the names of
    its groups that bind a documented id to the one this run gave."""
    groups: dict[str, str] = {}
    lines = []
    for line in expected.split("\n"):
        out, end = [], 0
        for token in TOKENS.finditer(line):
            out.append(literal(line[end:token.start()], "numbers vary" in mode))
            end = token.end()
            kind, text = token.lastgroup, token.group()
            if kind in ("uuid", "boundary"):
                if text in bindings:
                    out.append(re.escape(bindings[text]))
                elif text in groups.values():
                    out.append(f"(?P={next(g for g, t in groups.items() if t == text)})")
                else:
                    name = f"g{len(groups)}"
                    groups[name] = text
                    out.append(f"(?P<{name}>{FORMS[kind]})")
            elif kind in ("time", "duration"):
                out.append(r"\d+(?:\.\d+)?")
            elif kind == "bytes":
                out.append(re.escape(bytes.fromhex(text.split(":", 1)[1].rstrip(")")).decode("latin-1")))
            elif kind == "ellipsis":
                out.append(r"[\s\S]*?")
            else:
                out.append(r"\d+")
        out.append(literal(line[end:], "numbers vary" in mode))
        lines.append("".join(out))
    if "trimmed" in mode:
        return r"(?:.*\n)*?" + r"\n(?:.*\n)*?".join(lines) + r"(?:\n.*)*", groups
    return r"\n".join(lines), groups


def shown(doc: str, module: str, first_line: str) -> Block:
    """The `text` block of `doc` (README.md or a docs/ file name) that `module` runs (its `run
    by` mark) and whose first line starts with first_line."""
    path = REPO / doc if doc == "README.md" else REPO / "docs" / doc
    found = [b for b in blocks(path) if b.lang == "text" and b.marks.get("run by") == module
             and b.text.startswith(first_line)]
    assert len(found) == 1, f"{doc}: {len(found)} text blocks run by {module} start {first_line!r}"
    return found[0]


def assert_shows(block: Block, output: str) -> None:
    """Fail unless output is what block shows, by the rules a console session's output is
    compared with (its `output:` mark may say `trimmed, numbers vary`)."""
    regex, _ = pattern(block.text.rstrip("\n"), {}, block.marks.get("output", ""))
    assert re.fullmatch(regex, output.strip("\n")), (
        f"{block.where} shows:\n{block.text}\nbut mq wrote:\n{output}")
