"""The write path: argument rules, caps, copy-on-write of a shipped doc, history, the index append.

Everything is checked before anything is written; then history first (so a hand edit is never
lost), the atomic replace, and for a new doc its index line under `## Unfiled`. Callers hold
the local tier's lock (`DocStore.write_doc` takes it).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs.frontmatter import decode, normalize, parse
from biopb_mcp.docs.history import SOURCE_HAND_EDIT, SOURCE_SHIPPED, SOURCE_WRITE
from biopb_mcp.docs.ids import INDEX_ID
from biopb_mcp.docs.limits import BODY_MAX_LINES, FILE_MAX_BYTES, INDEX_MAX_BYTES, INDEX_MAX_ENTRIES, INDEX_MAX_LINES
from biopb_mcp.docs.textdiff import line_count, matches, unified_diff
from biopb_mcp.errors import DocError, DocProblem, DocUnreadable, WriteRefused
from biopb_mcp.fs import nofollow
from biopb_mcp.fs.atomic import write_atomic

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore

__all__ = ["SECTION_MAX_CHARS", "WriteResult", "check_args", "check_section", "write_doc", "write_index"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteResult:
    """What a write did, as data: an adapter words it for its reader.

    The diffs are computed when first read, i.e. after the store has released the tier lock: a
    diff of a long text must not hold every other writer out.
    """

    doc_id: str
    created: bool
    changed: bool
    from_shipped: bool = False
    """The text written over was the shipped one: a created local copy, or no change to it."""
    kept_hand_edit: int | None = None
    """The version a hand edit found on disk was kept as before the write."""
    index_entries: int | None = None
    """Entries in the index after an index write."""
    diff_of: tuple[str, str, str, str] | None = field(default=None, repr=False)
    """(before, after, before name, after name) of the doc (of the index, for an index write)."""
    index_diff_of: tuple[str, str] | None = field(default=None, repr=False)
    """(before, after) of the index, when a new doc's line was appended to it."""
    filed_under: str | None = None
    """The heading a new doc's index line went under (as the index writes it)."""

    @functools.cached_property
    def diff(self) -> str:
        """Unified diff of the doc (of the index, for an index write); empty when nothing changed."""
        return "" if self.diff_of is None else unified_diff(*self.diff_of)

    @functools.cached_property
    def index_diff(self) -> str | None:
        """The new doc's index line, appended under its heading, as a diff of the index."""
        if self.index_diff_of is None:
            return None
        return unified_diff(*self.index_diff_of, "index (before)", "index (after)")


def check_args(body: str | None, old: str | None, new: str | None) -> None:
    """Refuse a wrong combination or type of arguments before any disk access.

    Raises:
        WriteRefused: saying which argument is wrong and why.
    """
    if body is not None and (old is not None or new is not None):
        raise WriteRefused(
            "Give either body (the whole new text) or old and new (one exact replace), not both.",
            kind=DocProblem.ARGS_BOTH,
        )
    if body is None and old is None and new is None:
        raise WriteRefused(
            "A write needs body (the whole new text) or old and new (replace one exact occurrence); got neither.",
            kind=DocProblem.ARGS_NEITHER,
        )
    if body is None and (old is None or new is None):
        given = "old" if new is None else "new"
        raise WriteRefused(
            f"old and new go together: got only {given}.",
            kind=DocProblem.ARGS_HALF,
            given=given,
        )
    for name, value in (("body", body), ("old", old), ("new", new)):
        if value is not None and not isinstance(value, str):
            raise WriteRefused(
                f"{name} must be text, got {type(value).__name__}.", kind=DocProblem.ARG_TYPE, argument=name
            )
    if body is not None and not body.strip():
        raise WriteRefused("body is empty", kind=DocProblem.BODY_EMPTY)
    if old is not None and old == "":
        raise WriteRefused("old is empty", kind=DocProblem.OLD_EMPTY)
    for name, value in (("body", body), ("new", new)):
        if value is not None and "\x00" in value:
            raise WriteRefused(
                f"{name} contains NUL characters; a doc is markdown text.",
                kind=DocProblem.NUL_IN_TEXT,
                argument=name,
            )
    if body is not None and len(body.encode("utf-8")) > FILE_MAX_BYTES:
        raise WriteRefused(
            f"body is over the {FILE_MAX_BYTES:,} bytes a doc file may have.",
            kind=DocProblem.BODY_TOO_BIG,
            limit=FILE_MAX_BYTES,
        )


SECTION_MAX_CHARS = 80
"""Longest heading a new doc may be filed under: a heading, not a paragraph."""


def check_section(doc_id: str, section: str | None, body: str | None) -> str | None:
    """The heading title a new doc's index line goes under (None: `## Unfiled`), checked before
    any disk access.

    Raises:
        WriteRefused: `section` comes with old/new or names the index itself, is not one line of
            text, or is empty or too long.
    """
    if section is None:
        return None
    if not isinstance(section, str):
        raise WriteRefused(
            f"section must be text, got {type(section).__name__}.", kind=DocProblem.ARG_TYPE, argument="section"
        )
    if body is None or doc_id == INDEX_ID:
        what = "the index itself" if doc_id == INDEX_ID else "an old/new edit"
        raise WriteRefused(
            f"section files a new doc's index line; it does not apply to {what}. Nothing was changed.",
            kind=DocProblem.SECTION_WITH_EDIT,
            doc_id=doc_id,
        )
    title = " ".join(section.strip().lstrip("#").split())
    if not title or "\n" in section.strip() or len(title) > SECTION_MAX_CHARS:
        raise WriteRefused(
            f'section must be the title of one heading of the index (e.g. "Lab"), at most '
            f"{SECTION_MAX_CHARS} characters on one line; got {section[: SECTION_MAX_CHARS + 1]!r}. Nothing was changed.",
            kind=DocProblem.BAD_SECTION,
            doc_id=doc_id,
            limit=SECTION_MAX_CHARS,
        )
    return title


def _apply(doc_id: str, base: str | None, body: str | None, old: str | None, new: str | None) -> str:
    """The text after the write; refuses an old that matches 0 or 2+ times."""
    if body is not None:
        text = normalize(body)
        return text if text.endswith("\n") else text + "\n"
    assert old is not None and new is not None and base is not None
    old_n, new_n = normalize(old), normalize(new)
    count, overlapping = matches(base, old_n)
    if count == 0:
        raise WriteRefused(
            f"old was not found in {doc_id!r} (0 matches); nothing was changed.",
            kind=DocProblem.OLD_NOT_FOUND,
            doc_id=doc_id,
            count=0,
        )
    if count > 1 or overlapping:
        times = f"{count} times" if count > 1 else "2 times or more (its matches overlap)"
        raise WriteRefused(
            f"old matches {times} in {doc_id!r}; nothing was changed.",
            kind=DocProblem.OLD_AMBIGUOUS,
            doc_id=doc_id,
            count=count,
            overlapping=overlapping,
        )
    return base.replace(old_n, new_n, 1)


def _check_body_cap(doc_id: str, text: str) -> None:
    """Refuse a doc text over the caps: checked on the text as it would be written (normalised,
    newline-terminated, replaced), since a file over FILE_MAX_BYTES could never be read again."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > FILE_MAX_BYTES:
        raise WriteRefused(
            f"{doc_id!r} would be {size:,} bytes; a doc file may have at most {FILE_MAX_BYTES:,}. Nothing was changed.",
            kind=DocProblem.BODY_TOO_BIG,
            doc_id=doc_id,
            count=size,
            limit=FILE_MAX_BYTES,
        )
    lines = line_count(text)
    if lines > BODY_MAX_LINES:
        raise WriteRefused(
            f"{doc_id!r} would be {lines} lines; a doc may have at most {BODY_MAX_LINES}.",
            kind=DocProblem.BODY_CAP,
            doc_id=doc_id,
            count=lines,
            limit=BODY_MAX_LINES,
        )


def _check_index_cap(before: str, after: str) -> None:
    """Refuse an index text over a cap (entries, lines, bytes). A write that does not grow an
    over-cap measure (a hand edit made it so) stays allowed, so the index can be fixed."""
    old_count, new_count = index_mod.parse(before).entry_count, index_mod.parse(after).entry_count
    if new_count > INDEX_MAX_ENTRIES and new_count > old_count:
        raise WriteRefused(
            f"The index would have {new_count} entries; the cap is {INDEX_MAX_ENTRIES}. Nothing was changed.",
            kind=DocProblem.INDEX_CAP,
            doc_id=INDEX_ID,
            count=new_count,
            limit=INDEX_MAX_ENTRIES,
        )
    for measure, limit, size_of in (
        ("lines", INDEX_MAX_LINES, line_count),
        ("bytes", INDEX_MAX_BYTES, lambda t: len(t.encode("utf-8", "surrogatepass"))),
    ):
        new_size = size_of(after)
        if new_size > limit and new_size > size_of(before):
            raise WriteRefused(
                f"The index would be {new_size:,} {measure}; the index may have at most {limit:,} "
                f"{measure}. Nothing was changed.",
                kind=DocProblem.INDEX_CAP,
                doc_id=INDEX_ID,
                count=new_size,
                limit=limit,
                measure=measure,
            )


def strip_render_marks(index_text: str) -> str:
    """Drop the `(missing)` / `(local copy)` marks the renderer appends to entry lines.

    They are the loader's knowledge, not the agent's text: an index written back from a read of
    the rendered index must not pile them up.
    """
    if index_mod.MISSING not in index_text and index_mod.LOCAL_COPY not in index_text:
        return index_text
    parsed = index_mod.parse(index_text)
    lines = list(parsed.lines)
    for entry in parsed.entries:
        line = lines[entry.line].rstrip()
        for mark in (index_mod.MISSING, index_mod.LOCAL_COPY):
            while line.endswith(" " + mark):
                line = line[: -len(mark) - 1].rstrip()
        lines[entry.line] = line
    return "\n".join(lines)


def write_doc(
    store: DocStore, doc_id: str, body: str | None, old: str | None, new: str | None, section: str | None = None
) -> WriteResult:
    """Write one local doc (not the index); the caller holds the tier lock.

    `section` (a title from `check_section`) files a new doc's index line under that heading;
    a doc that exists in either tier, or that the index lists already, is refused with it.
    """
    local, shipped_tier = store.shelf.local, store.shelf.shipped
    local_path = local.path(doc_id)
    shipped_path = shipped_tier.path(doc_id)
    current = store.shelf.read_local(doc_id)  # DocUnreadable: never overwrite what we cannot keep
    shipped: str | None = None
    if current is None and (body is None or os.path.isfile(shipped_path)):
        try:
            shipped = store.shelf.read_shipped(doc_id)
        except DocUnreadable:
            if body is None:
                raise
    base = current if current is not None else shipped
    if base is None and body is None:
        raise store.shelf.not_found(
            doc_id, " to edit with old/new; create it with body=…", kind=DocProblem.NO_DOC_TO_EDIT
        )
    # the shelf decides what is shipped: a withheld doc is not, and must not show through here
    if section is not None and (base is not None or store.shelf.has_shipped(doc_id)):
        where = "a local doc" if current is not None else "a shipped doc"
        raise WriteRefused(
            f"{doc_id!r} exists already ({where}): section only files the index line of a new doc, "
            "and an existing doc keeps the line it has. Nothing was changed.",
            kind=DocProblem.SECTION_EXISTING,
            doc_id=doc_id,
            origin="local" if current is not None else "shipped",
        )
    after = _apply(doc_id, base, body, old, new)
    _check_body_cap(doc_id, after)
    if base is not None and after == base:
        return WriteResult(doc_id, created=False, changed=False, from_shipped=current is None)
    created = current is None
    index_before = index_after = None
    heading = index_mod.UNFILED_HEADING if section is None else section
    if created:
        index_before = _index_text_for_write(store)
        parsed_index = index_mod.parse(index_before)
        if doc_id not in parsed_index.entry_ids:
            info = parse(after)
            hook = info.description or info.title or doc_id
            index_after = index_mod.append_under(index_before, index_mod.entry_line(doc_id, hook), heading)
            _check_index_cap(index_before, index_after)
        elif section is not None:
            raise WriteRefused(
                f"The index lists {doc_id!r} already: section only files the line of a doc the index does not "
                "list, and a listed doc keeps the line it has. Nothing was changed.",
                kind=DocProblem.SECTION_EXISTING,
                doc_id=doc_id,
                listed=True,
            )
    # Everything is checked: now write, history first so a hand edit is never lost.
    kept: int | None = None
    if current is not None:
        kept = _keep_hand_edit(store, doc_id, current, local_path)
    elif shipped is not None:
        store.history.record(doc_id, shipped, SOURCE_SHIPPED)
    write_atomic(
        local_path, after, around_replace=_late_edit_guard(store, doc_id, local_path, current), root=local.root
    )
    _record_written(store, doc_id, after)
    before = base if base is not None else ""
    before_name = f"{doc_id} (shipped)" if created and shipped is not None else f"{doc_id} (before)"
    if created and shipped is None:
        before_name = "/dev/null"
    index_diff_of: tuple[str, str] | None = None
    filed_under: str | None = None
    if index_after is not None and index_before is not None:
        _store_index(store, index_before, index_after)
        index_diff_of = (index_before, index_after)
        filed_under = index_mod.filed_heading(index_after, heading)
    return WriteResult(
        doc_id,
        created=created,
        changed=True,
        diff_of=(before, after, before_name, f"{doc_id} (after)"),
        from_shipped=created and shipped is not None,
        kept_hand_edit=kept,
        index_diff_of=index_diff_of,
        filed_under=filed_under,
    )


def write_index(store: DocStore, body: str | None, old: str | None, new: str | None) -> WriteResult:
    """Write the local index; the caller holds the tier lock."""
    try:
        current: str | None = store.listing.index_text_at_disk()
    except FileNotFoundError:
        current = None
    except DocUnreadable:
        if body is None:
            raise
        current = None  # a whole-body write is how an unreadable index gets fixed
    base = current if current is not None else store.listing.shipped_index_text()
    after = strip_render_marks(_apply(INDEX_ID, base, body, old, new))
    if after == base and current is not None:
        return WriteResult(INDEX_ID, created=False, changed=False)
    _check_index_cap(base, after)
    _store_index(store, current, after)
    return WriteResult(
        INDEX_ID,
        created=False,
        changed=True,
        index_entries=index_mod.parse(after).entry_count,
        diff_of=(base, after, "index (before)", "index (after)"),
    )


def _keep_hand_edit(store: DocStore, doc_id: str, current: str, path: Path) -> int | None:
    """Save an on-disk text the server has not seen as its own version; its number if it was a hand edit."""
    try:
        mtime: float | None = os.stat(path).st_mtime
    except OSError:
        mtime = None
    kept = store.history.before_write(doc_id, current, mtime)
    if kept is not None and kept.source == SOURCE_HAND_EDIT:
        return kept.n
    return None


_SETTLE_READS = 8
"""Most re-reads a write makes while an editor keeps saving the file: it never waits longer."""


def _late_edit_guard(
    store: DocStore, doc_id: str, path: Path, seen: str | None
) -> Callable[[nofollow.Replacing], AbstractContextManager[None]]:
    """A write_atomic `around_replace`: a hand edit that landed after `seen` was read is kept in history.

    The lock keeps other servers out, but not an editor; without this, an edit saved while the
    new text was being fsynced would be replaced without a trace. Before the replace the file is
    read through one fd until a read finds what the one before found (keeping a version takes a
    history write, long enough for the editor to save again, or to finish a save it had begun:
    an in-place save truncates, then writes). After it, what the replace displaced is read (an
    editor's save by rename that landed at the last instant), and the fd once more (an editor
    that opened the file before the replace saves into the file it displaced): each text not
    seen yet is kept too.
    """

    @contextlib.contextmanager
    def guard(replacing: nofollow.Replacing) -> Iterator[None]:
        try:
            fd: int | None = nofollow.open_file(replacing.dir_fd, replacing.name, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:  # nothing there (a new doc) or a link: no file an editor saves into
            fd = None
        try:
            last = seen  # the newest text of the doc known to history
            on_fd = seen  # what the fd showed last
            for _ in range(_SETTLE_READS):
                text = None if fd is None else _saved_text(fd, path, last)
                if text is None or text == last:
                    break
                _keep_hand_edit(store, doc_id, text, path)
                last = on_fd = text
            yield
            # Replaced: a failure to keep a text now must not report the write as failed.
            try:
                displaced = _displaced_text(replacing, path, last)
                if displaced is not None and displaced != last:  # a save by rename at the last instant
                    _keep_hand_edit(store, doc_id, displaced, path)
                    last = displaced
                late = None if fd is None else _saved_text(fd, path, on_fd)
                if late is not None and late != on_fd and late != last:  # a save into the old file
                    _keep_hand_edit(store, doc_id, late, path)
            except (OSError, DocError) as exc:
                logger.warning("A hand edit of %s saved during the write could not be kept in history: %s", doc_id, exc)
        finally:
            if fd is not None:
                os.close(fd)

    return guard


def _displaced_text(replacing: nofollow.Replacing, path: Path, last: str | None) -> str | None:
    """The text of the file the replace swapped out, if it swapped one out."""
    if replacing.displaced is None:
        return None
    try:
        fd = nofollow.open_file(replacing.dir_fd, replacing.displaced, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return _saved_text(fd, path, last)
    finally:
        os.close(fd)


_SAVE_WAIT_S = 0.05
"""How long a write waits for an editor that has emptied the file to write its text."""


def _saved_text(fd: int, path: Path, last: str | None) -> str | None:
    """`_text_of`, except that an empty file where text was is read again for up to
    `_SAVE_WAIT_S`: an in-place save truncates first, then writes, and the empty file between
    the two is no edit anybody made (an editor slower than that is left to the next read)."""
    text = _text_of(fd, path)
    deadline = time.monotonic() + _SAVE_WAIT_S
    while text == "" and last and time.monotonic() < deadline:
        time.sleep(0.005)
        text = _text_of(fd, path)
    return text


def _text_of(fd: int, path: Path) -> str | None:
    """The doc text in an open file, or None when it is not readable text (a hand edit of it
    is then no text to keep)."""
    try:
        return decode(nofollow.pread_all(fd, max_bytes=FILE_MAX_BYTES), path)
    except (OSError, DocUnreadable):
        return None


def _index_text_for_write(store: DocStore) -> str:
    try:
        return store.listing.index_text_at_disk()
    except FileNotFoundError:
        return store.listing.shipped_index_text()


def _store_index(store: DocStore, before: str | None, after: str) -> None:
    index_path = store.shelf.index_path
    if before is not None and os.path.exists(index_path):
        _keep_hand_edit(store, INDEX_ID, before, index_path)
    write_atomic(
        index_path,
        after,
        around_replace=_late_edit_guard(store, INDEX_ID, index_path, before),
        root=store.shelf.local.root,
    )
    _record_written(store, INDEX_ID, after)


def _record_written(store: DocStore, doc_id: str, text: str) -> None:
    """Record a text already on disk in history; a failure is logged, not raised: the write is
    done, and the next write keeps the text as found on disk."""
    try:
        store.history.record(doc_id, text, SOURCE_WRITE)
    except (OSError, DocError) as exc:
        logger.warning("The write of %s is done but its history was not updated: %s", doc_id, exc)
