"""Which docs the index lists as procedures, and the inputs each one asks for.

A procedure is a doc a person can start by name with its inputs (the server offers each as an MCP
prompt). The index decides which docs those are, the way it decides what search covers: only
docs it surfaces count (its entries that resolve, docs under a listed folder, the New-shipped
tail); ignored, banked and unlisted docs never do. Of those, a doc is a procedure when

* a heading it sits under names procedures or protocols (`## Procedures`, `### Lab protocols`),
  whatever the doc holds; or else
* it has an `## Inputs` section and no heading it sits under names references.

So a local procedure the lab wrote is one as soon as the index lists it (under `## Lab`, or
`## Unfiled` after its first write), and the bench's docs-off arm, which withholds every `##
Procedures` entry (the store serves them as not shipped), has none.

The inputs come from the doc's `## Inputs` list, read tolerantly: each top-level item that opens
with a name (`` `image` ``, `**image**`, or a plain lower-case `image`; several as `` `ch1`,
`ch2` ``), then optional marks in parentheses, then `:` or a dash, is an input; other items
(prose such as "The save helpers of [[outputs]]: …") are not. An input is required only where the
doc says so: a `(required)` mark, or a description that opens with "Required".
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs.frontmatter import one_line, parse
from biopb_mcp.docs.search.sections import split_sections
from biopb_mcp.errors import DocError
from biopb_mcp.fs.stamps import FileCache

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore

__all__ = [
    "Input",
    "Procedure",
    "Read",
    "is_procedure_heading",
    "is_reference_heading",
    "new_cache",
    "parse_inputs",
    "procedures",
    "takes_file",
]

logger = logging.getLogger(__name__)

INPUT_DESCRIPTION_MAX_CHARS = 160
"""An input's description is one line; a longer item is cut here (the doc holds the rest)."""

MAX_INPUTS = 32
"""Most inputs a procedure carries as prompt arguments: a host shows each as a field to fill,
and a doc listing thousands (a hostile or runaway `## Inputs`) must not make every prompt list
huge and slow. The doc keeps the rest; :attr:`Procedure.inputs_left_out` says there were more."""

MAX_NAME_CHARS = 64
"""Longest input name taken as an argument; a longer one is no identifier anybody types."""

TITLE_MAX_CHARS = 200
"""A procedure's title and hook are one line each, cut here (a prompt list shows them)."""


@dataclass(frozen=True)
class Input:
    """One input of a procedure, from its doc's `## Inputs` list."""

    name: str
    description: str
    required: bool = False
    file: bool = False
    """The input names a file or folder (a path, an image on disk): a client may offer files."""


@dataclass(frozen=True)
class Procedure:
    """A doc the index lists as a procedure: its id, its index hook, its title, its inputs."""

    doc_id: str
    hook: str
    title: str | None
    inputs: tuple[Input, ...]
    inputs_left_out: bool = False
    """The doc lists more inputs than :data:`MAX_INPUTS` (only the first are carried)."""


_PROCEDURE_WORDS = re.compile(r"\b(procedures?|protocols?)\b", re.IGNORECASE)
_REFERENCE_WORDS = re.compile(r"\breferences?\b", re.IGNORECASE)


def is_procedure_heading(title: str) -> bool:
    """Whether a heading names procedures or protocols."""
    return bool(_PROCEDURE_WORDS.search(title))


def is_reference_heading(title: str) -> bool:
    """Whether a heading names references."""
    return bool(_REFERENCE_WORDS.search(title))


def procedures(store: DocStore) -> list[Procedure]:
    """The procedures the index lists right now, in index order (then the New-shipped tail).

    Never raises for a doc: one that cannot be read is left out, with a warning in the log.
    """
    seen = store.visibility()
    index = seen.index
    above = index_mod.headings_above(index)
    candidates: dict[str, tuple[tuple[str, ...], str]] = {}  # id -> (headings above, hook)
    folders: list[tuple[str, tuple[str, ...], str]] = []
    for entry in index.entries:
        headings = above[entry.line]
        if entry.collection:
            if any(is_procedure_heading(h) for h in headings):
                folders.append((entry.doc_id + "/", headings, entry.hook))
            continue
        candidates.setdefault(entry.doc_id, (headings, entry.hook))
    for doc_id in seen.new:
        candidates.setdefault(doc_id, ((), ""))  # the rendered tail: under no heading of the file
    if folders:  # only when a folder line sits under a procedures heading
        for doc_id in sorted(seen.surfaced):
            for prefix, headings, hook in folders:
                if doc_id.startswith(prefix):
                    candidates.setdefault(doc_id, (headings, hook))
                    break
    wanted = [
        doc_id
        for doc_id, (headings, _) in candidates.items()
        if any(is_procedure_heading(h) for h in headings) or not any(is_reference_heading(h) for h in headings)
    ]
    found: list[Procedure] = []
    for doc_id, read in store.shelf.derived(wanted, _read, store.procedure_reads).items():
        if isinstance(read, DocError):
            logger.warning("Docs: %s is left out of the procedures: %s", doc_id, read)
            continue
        headings, hook = candidates[doc_id]
        inputs, more, title, description = read
        if inputs is None and not any(is_procedure_heading(h) for h in headings):
            continue
        hook = one_line(hook or description or title or doc_id, TITLE_MAX_CHARS)
        found.append(Procedure(doc_id, hook, title, inputs or (), more))
    order = {doc_id: n for n, doc_id in enumerate(wanted)}
    return sorted(found, key=lambda p: order[p.doc_id])


Read = tuple[tuple[Input, ...] | None, bool, str | None, str]
"""What a doc says of itself as a procedure: (inputs, more inputs left out, title, description)."""

CACHE_MAX_BYTES = 8 * 1024 * 1024
"""Bound on what the procedures cache keeps per store (measured as the text it holds)."""


def _weight(read: Read) -> int:
    """About the bytes a cached read holds: its strings, and a little per input."""
    inputs, _, title, description = read
    held = sum(len(i.name) + len(i.description) + 64 for i in inputs or ())
    return held + len(title or "") + len(description) + 128


def new_cache() -> FileCache[str, Read]:
    """A store's procedures cache: the set is read at every handshake and list, and a doc rarely
    changes between two; keyed by the doc file and its stamp, bounded by bytes. It belongs to
    one store (withholding shapes the texts it is read from)."""
    return FileCache(max_weight=CACHE_MAX_BYTES, weigh=_weight)


def _read(text: str) -> Read:
    """(inputs, more left out, title, description) of a doc text, each bounded."""
    info = parse(text)
    found = _inputs(text, MAX_INPUTS)
    inputs, more = found if found is not None else (None, False)
    title = one_line(info.title, TITLE_MAX_CHARS) if info.title is not None else None
    return inputs, more, title, info.description


_ITEM = re.compile(r"^(?P<indent>\s{0,3})(?:[-*+]|\d{1,3}[.)])\s+(?P<text>.*)$")
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_PLAIN = r"[a-z_][A-Za-z0-9_.\-]*"
_TOKEN = rf"(?:`{_NAME}`|\*\*`?{_NAME}`?\*\*|{_PLAIN})"
_HEAD = re.compile(
    rf"(?P<names>{_TOKEN}(?:\s*(?:,|/|\band\b|\bor\b)\s*{_TOKEN})*)"
    r"\s*(?P<marks>(?:\([^)\n]{0,40}\)\s*)*)"
    r"(?::|\s+[-–—]\s+|\s*[–—]\s*)"
    r"\s*(?P<rest>.*)\Z",
    re.DOTALL,
)
_NAMES = re.compile(_NAME)
_LINK = re.compile(r"\[\[([^\]\n]+)\]\]")
_REQUIRED = re.compile(r"^\W*required\b", re.IGNORECASE)
_NOT_REQUIRED = re.compile(r"\b(not required|optional)\b", re.IGNORECASE)


def parse_inputs(text: str) -> tuple[Input, ...] | None:
    """The inputs a doc's `## Inputs` section lists; None when the doc has no such section."""
    found = _inputs(text, None)
    return None if found is None else found[0]


def _inputs(text: str, limit: int | None) -> tuple[tuple[Input, ...], bool] | None:
    """The first ``limit`` inputs (all when None), and whether the list holds more; None when
    the doc has no `## Inputs` section. Reading stops at the first input past the limit."""
    section = next(
        (body for heading, body in split_sections("", text) if index_mod.heading_title(heading).startswith("input")),
        None,
    )
    if section is None:
        return None
    found: dict[str, Input] = {}
    for item in _items(section.split("\n")[1:]):
        head = _HEAD.match(item)
        if head is None:
            continue
        marks, rest = head.group("marks"), head.group("rest")
        required = bool(re.search(r"\brequired\b", marks, re.IGNORECASE) and not _NOT_REQUIRED.search(marks))
        required = required or (bool(_REQUIRED.match(rest)) and not _NOT_REQUIRED.match(rest))
        # cut before collapsing: one item may be megabytes on one line
        description = one_line(_LINK.sub(r"\1", rest[: 4 * INPUT_DESCRIPTION_MAX_CHARS]), INPUT_DESCRIPTION_MAX_CHARS)
        for name in _NAMES.findall(head.group("names").replace("**", " ")):
            if name in ("and", "or") or name in found or len(name) > MAX_NAME_CHARS:
                continue
            if limit is not None and len(found) >= limit:
                return tuple(found.values()), True
            found[name] = Input(name, description, required, takes_file(name, description))
    return tuple(found.values()), False


def _items(lines: list[str]) -> list[str]:
    """The top-level items of a markdown list, each with its continuation lines joined."""
    items: list[list[str]] = []
    indent: int | None = None
    for line in lines:
        match = _ITEM.match(line)
        if match and (indent is None or len(match.group("indent")) <= indent):
            indent = len(match.group("indent"))
            items.append([match.group("text")])
        elif items and line.strip():
            items[-1].append(line.strip())
    return [" ".join(parts).strip() for parts in items]


_FILE_NAME_WORDS = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "folder",
        "dir",
        "directory",
        "image",
        "images",
        "img",
        "stack",
        "movie",
        "tiles",
        "labels",
        "mask",
        "blank",
    }
)
_FILE_DESCRIPTION = re.compile(
    r"^(?:(?:a|an|the)\s+)?(?:file|path|folder|directory|tiff?|ome-tiff|zarr)\b", re.IGNORECASE
)


def takes_file(name: str, description: str) -> bool:
    """Whether an input names a file or folder: a word of its name says so (``source_path``,
    ``image``, ``mask``), or its description opens with one ("a TIFF / OME-TIFF file …").

    Only the description's opening counts: a number "measured on the image" or "from the file's
    metadata" is no file.
    """
    words = {w.lower() for w in re.split(r"[_.\-]+|(?<=[a-z])(?=[A-Z])", name) if w}
    return bool(words & _FILE_NAME_WORDS) or bool(_FILE_DESCRIPTION.match(description))
