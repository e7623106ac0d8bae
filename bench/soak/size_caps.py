"""Writes that try to leave a doc or the index past its caps.

The size cap was checked on the argument, before the replace and the trailing newline: a body of
exactly 5,000,000 bytes became an unreadable 5,000,001-byte file, and old/new grew a doc to
6,000,008 bytes, after which it could not be read, written or its history viewed; the index had
no byte or line cap at all. ``size_writes`` sends writes of every such shape (at the cap, one
past it, grown by old/new, CRLF and multi-byte text, the index grown line by line) and then
checks that every doc reads, every history lists, and the index is within its caps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from random import Random

from biopb_mcp.docs.limits import FILE_MAX_BYTES, INDEX_MAX_BYTES, INDEX_MAX_LINES
from biopb_mcp.docs.store import DocStore
from biopb_mcp.docs.textdiff import line_count
from biopb_mcp.errors import DocError, WriteRefused
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index

__all__ = ["size_writes"]

Write = Callable[[DocStore, Random, int], None]

DOCS_PER_SHAPE = 8
"""Doc ids each shape writes in turn: the index's entry cap stays far, and so does the disk."""


def _exact(store: DocStore, rng: Random, n: int) -> None:
    """A body of the cap, or one byte either side of it, with or without its newline."""
    size = FILE_MAX_BYTES + rng.choice([-2, -1, 0, 1])
    store.write_doc(f"cap/exact{n % DOCS_PER_SHAPE}", body="a" * size + rng.choice(["", "\n"]))


def _grown(store: DocStore, rng: Random, n: int) -> None:
    """A doc grown past the cap by one old/new."""
    doc_id = f"cap/grown{n % DOCS_PER_SHAPE}"
    half = "b" * (FILE_MAX_BYTES // 2)
    store.write_doc(doc_id, body=f"# Grown\n\nMARK\n{half}\n")
    store.write_doc(doc_id, old="MARK", new=half + "c" * rng.randint(0, 4096))


def _doubled(store: DocStore, rng: Random, n: int) -> None:
    """A doc doubled by old/new until a write is refused."""
    doc_id = f"cap/doubled{n % DOCS_PER_SHAPE}"
    store.write_doc(doc_id, body="# Doubled\n\nX" + "y" * rng.randint(1_000, 100_000) + "\n")
    text = store.doc_text(doc_id)[0]
    for _ in range(40):
        body = text.split("\n", 2)[2].rstrip("\n")
        store.write_doc(doc_id, old=body, new=body + body)
        text = store.doc_text(doc_id)[0]


def _wide(store: DocStore, rng: Random, n: int) -> None:
    """Multi-byte text and CRLF line ends around the cap (normalised before it is written)."""
    unit = rng.choice(["é", "€", "𝔸", "ab\r\n"])
    count = FILE_MAX_BYTES // len(unit.encode()) + rng.choice([-1, 0, 1])
    store.write_doc(f"cap/wide{n % DOCS_PER_SHAPE}", body=unit * count)


def _index_lines(store: DocStore, rng: Random, n: int) -> None:
    """The index grown by old/new, a few hundred lines at a time, until refused; then put back,
    so the other shapes' new docs are refused for their own size, not for the index's."""
    index = store.local_file("index")  # the file itself: what the writes left on disk
    before = index.read_text(encoding="utf-8")
    try:
        for _ in range(20):
            text = index.read_text(encoding="utf-8")
            last = text.rstrip("\n").rsplit("\n", 1)[-1]
            extra = "".join(f"note {n}.{k} {'z' * rng.randint(0, 400)}\n" for k in range(rng.randint(50, 400)))
            store.write_doc("index", old=last + "\n", new=last + "\n" + extra)
    finally:
        store.write_doc("index", body=before)


SHAPES: list[Write] = [_exact, _grown, _doubled, _wide, _index_lines]


def size_writes(store: DocStore, writes: int, seed: int) -> tuple[Counter[str], list[str]]:
    """``writes`` writes of the shapes above (refusals expected); the counts, and what the checks
    found (a doc or the index past a cap, or unreadable: none expected)."""
    rng = Random(seed)
    counts: Counter[str] = Counter()
    render_index(store)
    for n in range(writes):
        shape = SHAPES[n % len(SHAPES)]
        try:
            shape(store, rng, n)
        except WriteRefused:
            counts["size caps: writes refused at a cap"] += 1
        counts["size caps: writes tried"] += 1
    return counts, _problems(store)


def _problems(store: DocStore) -> list[str]:
    problems = []
    for path in store.local_dir.rglob("*.md"):
        size = path.stat().st_size
        doc_id = str(path.relative_to(store.local_dir))[: -len(".md")]
        if doc_id == "index":
            text = path.read_text(encoding="utf-8")
            if line_count(text) > INDEX_MAX_LINES or size > INDEX_MAX_BYTES:
                problems.append(f"the index is {line_count(text)} lines, {size} bytes")
            continue
        if size > FILE_MAX_BYTES:
            problems.append(f"{doc_id} is {size} bytes")
        try:
            read_doc(store, doc_id)
            read_doc(store, f"{doc_id}@history")
        except DocError as exc:
            problems.append(f"{doc_id}: {exc}")
    return problems
