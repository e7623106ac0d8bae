"""The index: parsing its two line shapes, rendering it with what the file cannot know, appending.

The index is free markdown owned by the agent. The loader recognises only an entry line
`- <id>: <hook>` (a `- <id>/: …` collection line is kept verbatim and counts as one entry) and the
`ignored: a, b` line. Rendering adds `(missing)` / `(local copy)` suffixes and two tails, each
opening with one sentence saying what to do, so the agent acts on it unprompted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from biopb_mcp.docs.ids import is_valid_id
from biopb_mcp.errors import DocUnreadable

UNFILED_HEADING = "## Unfiled"

IGNORED_NOTE = "shipped docs this index chose not to list; each is still readable by id"
"""Said after an `ignored:` line that names docs: agents read the bare word as "do not use"."""

MISSING = "(missing)"
LOCAL_COPY = "(local copy)"

# The hook is taken greedily and right-stripped in code: a lazy `(.*?)\s*$` backtracks at every
# character and made this one match 10x slower (it runs on every index line at every render).
_ENTRY = re.compile(r"^\s*[-*+]\s+(?P<id>[A-Za-z0-9._/-]+):(?:\s+(?P<hook>.*))?$")
_IGNORED = re.compile(r"^\s*ignored:(?P<rest>.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s")


@dataclass(frozen=True)
class Entry:
    """One entry line of the index."""

    doc_id: str  # without the trailing '/' of a collection
    hook: str
    line: int  # 0-based line number in the file
    collection: bool = False


@dataclass(frozen=True)
class IndexFile:
    """A parsed index: its lines, its entries in file order, and the ignored ids."""

    lines: list[str]
    entries: list[Entry]
    ignored: list[str]
    ignored_lines: list[int]
    bad_entries: list[tuple[int, str]] = field(default_factory=list)
    """(line, token) of entry-shaped lines whose id is outside the grammar: prose to the loader."""

    @property
    def entry_count(self) -> int:
        """Entries counted against the cap (a collection line is one entry)."""
        return len(self.entries)

    @property
    def entry_ids(self) -> set[str]:
        """Ids that have an entry line (collections excluded)."""
        return {e.doc_id for e in self.entries if not e.collection}


@lru_cache(maxsize=4)
def parse(text: str) -> IndexFile:
    """Parse index text (already normalised to `\\n`). Lines inside code fences are prose.

    Memoised on the text: one write parses the index it read (the text the last write left) and
    the text it leaves, and every render parses it again. Callers copy `lines` before changing it.
    """
    lines = text.split("\n")
    entries: list[Entry] = []
    ignored: list[str] = []
    ignored_lines: list[int] = []
    bad_entries: list[tuple[int, str]] = []
    in_fence = False
    for i, line in enumerate(lines):
        # Cheap substring tests first: each regex below needs its marker in the line, and the
        # index is parsed on every render (handshake, read_doc("index"), every index write).
        if ("```" in line or "~~~" in line) and _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or ":" not in line:
            continue
        match = _ENTRY.match(line)
        if match:
            token = match.group("id")
            collection = token.endswith("/")
            doc_id = token[:-1] if collection else token
            if is_valid_id(doc_id):
                entries.append(Entry(doc_id, (match.group("hook") or "").rstrip(), i, collection))
            else:
                bad_entries.append((i, token))
            continue
        match = _IGNORED.match(line)
        if match:
            ignored_lines.append(i)
            for item in match.group("rest").split(","):
                item = item.strip().strip("`").strip()
                if item and item not in ignored:
                    ignored.append(item)
    return IndexFile(
        lines=lines, entries=entries, ignored=ignored, ignored_lines=ignored_lines, bad_entries=bad_entries
    )


@dataclass(frozen=True)
class IndexFacts:
    """What the rendered index shows, as facts: the file with what it cannot know added (each
    entry's `(missing)` / `(local copy)`, each `ignored:` line's note), and the two tails as
    `(id, shipped description)` pairs; ``unreadable`` is why the local file could not be read
    (the shipped index is shown then). ``biopb_mcp.text.index`` words the tails."""

    body: str
    new_docs: list[tuple[str, str]] = field(default_factory=list)
    stale_docs: list[tuple[str, str]] = field(default_factory=list)
    unreadable: DocUnreadable | None = None


def annotate(
    index: IndexFile,
    *,
    exists: Callable[[str], bool],
    shadows: Callable[[str], bool],
    hide_ignored: bool = False,
) -> str:
    """The index file with suffixes: `exists(id)` says whether a doc resolves in either tier,
    `shadows(id)` whether a local copy hides a shipped doc. `hide_ignored` replaces each
    `ignored:` line by a count, for a caller (the handshake under the docs-off bench arm) that
    must never show an ignored id.
    """
    lines = list(index.lines)
    bare: set[int] = set()
    for i in index.ignored_lines:
        count = len([x for x in lines[i].split(":", 1)[1].split(",") if x.strip()])
        if not count:
            bare.add(i)  # an empty `ignored:` line says nothing: show nothing
        elif hide_ignored:
            lines[i] = (
                f"ignored: ({count} shipped doc{'' if count == 1 else 's'}, ids not shown here) — {IGNORED_NOTE}."
            )
        else:
            lines[i] = f"{lines[i].rstrip()} — {IGNORED_NOTE}."
    for entry in index.entries:
        if entry.collection:
            continue  # kept verbatim: a collection line lists a folder whole
        if not exists(entry.doc_id):
            lines[entry.line] = lines[entry.line].rstrip() + " " + MISSING
        elif shadows(entry.doc_id):
            lines[entry.line] = lines[entry.line].rstrip() + " " + LOCAL_COPY
    lines = [line for i, line in enumerate(lines) if i not in bare]
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def entry_line(doc_id: str, hook: str) -> str:
    """An entry line in the shape the loader parses."""
    return f"- {doc_id}: {hook}".rstrip()


def heading_title(heading: str) -> str:
    """The text of a heading as a person names it: `## Lab` and `lab` both give `lab`."""
    return " ".join(heading.strip().lstrip("#").split()).lower()


def headings_above(index: IndexFile) -> list[tuple[str, ...]]:
    """For each line of the index, the titles of the headings it sits under, outermost first.

    A heading closes every heading of its own or a deeper level before it; headings inside code
    fences are prose. The titles are as written (stripped), for a caller that decides what a
    heading means.
    """
    stack: list[tuple[int, str]] = []
    out: list[tuple[str, ...]] = []
    in_fence = False
    for line in index.lines:
        if ("```" in line or "~~~" in line) and _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (heading := _HEADING.match(line)):
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, line[level:].strip().rstrip("#").strip()))
        out.append(tuple(title for _, title in stack))
    return out


def prose(text: str) -> str:
    """The index without its entry and `ignored:` lines, and without the headings left with no
    prose under them: what the agent wrote between the entries (a rule a lab keeps in its index).

    What search reads of the index: the listed docs are found by their own text and hooks, a
    heading alone would outrank them on its one word, and an ignored id must not resurface.
    """
    index = parse(text)
    dropped = {entry.line for entry in index.entries} | set(index.ignored_lines)
    kept = [line for i, line in enumerate(index.lines) if i not in dropped]
    return "\n".join(line for n, line in enumerate(kept) if not _HEADING.match(line) or _prose_follows(kept, n))


def _prose_follows(kept: list[str], at: int) -> bool:
    """Whether a non-blank line that is not a heading follows ``kept[at]`` before the next heading."""
    for line in kept[at + 1 :]:
        if _HEADING.match(line):
            return False
        if line.strip():
            return True
    return False


def append_unfiled(text: str, line: str) -> str:
    """Add `line` under the `## Unfiled` heading, adding the heading at the end if absent."""
    return append_under(text, line, UNFILED_HEADING)


def append_under(text: str, line: str, heading: str) -> str:
    """Add `line` under the first heading titled like `heading` (`## Lab`, or just `Lab`: any
    level, case ignored), adding `## <title>` at the end if there is none.

    Inside the section the line goes after the last entry before the next heading (so prose, a
    sub-heading or an `ignored:` line stays where the agent put it). A new heading goes before a
    trailing `ignored:` line: it closes the index, and a section after it would read as if the
    ignored ids were its entries.
    """
    wanted = heading_title(heading)
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    start = None
    in_fence = False
    for i, current in enumerate(lines):
        if _FENCE.match(current):
            in_fence = not in_fence
            continue
        if not in_fence and _HEADING.match(current) and heading_title(current) == wanted:
            start = i
            break
    if start is None:
        tail: list[str] = []
        if lines and _IGNORED.match(lines[-1]):
            tail = [lines.pop()]
            while lines and not lines[-1].strip():
                lines.pop()
        if lines:
            lines.append("")
        shown = heading.strip() if heading.strip().startswith("#") else f"## {heading.strip()}"
        lines += [shown, line]
        if tail:
            lines += ["", *tail]
        return "\n".join(lines) + "\n"
    end = len(lines)
    for j in range(start + 1, len(lines)):
        if _HEADING.match(lines[j]):
            end = j
            break
    insert_at = start + 1
    for j in range(start + 1, end):
        if _ENTRY.match(lines[j]):
            insert_at = j + 1
    lines.insert(insert_at, line)
    return "\n".join(lines) + "\n"


def filed_heading(text: str, heading: str) -> str:
    """The heading line `append_under(text, …, heading)` files under, as the index writes it."""
    wanted = heading_title(heading)
    index = parse(text)
    for line, above in zip(index.lines, headings_above(index), strict=True):
        if above and heading_title(above[-1]) == wanted and _HEADING.match(line):
            return line.strip()
    return heading.strip() if heading.strip().startswith("#") else f"## {heading.strip()}"
