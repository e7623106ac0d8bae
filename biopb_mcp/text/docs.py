"""What the docs store's refusals and search hits say to their reader: an agent or a person.

The store's errors state facts and carry fields (kind, id, counts); the next step depends on who
reads it. An agent is told the tool call to make (`read_doc("index")`), a person at a terminal
the command to type (`biopb-mcp docs index`). Both wordings are built here from one vocabulary
each, so the sentences are written once. Imports nothing from mcp: the CLI uses it too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from biopb_mcp.docs.ids import ID_CHARS_HELP, INDEX_ID, is_valid_id
from biopb_mcp.docs.index import UNFILED_HEADING
from biopb_mcp.docs.limits import INDEX_MAX_ENTRIES
from biopb_mcp.docs.search.query import shown_query
from biopb_mcp.docs.writes import WriteResult
from biopb_mcp.errors import DocError, DocNotFound, DocProblem, DocUnreadable
from biopb_mcp.text.doc_views import ORIGIN_WORDS
from biopb_mcp.text.unreadable import unreadable_text

if TYPE_CHECKING:
    from biopb_mcp.docs.search.query import Hit

__all__ = ["FOR_AGENT", "FOR_TERMINAL", "Calls", "format_hits", "refusal", "write_report"]


@dataclass(frozen=True)
class Calls:
    """How a reader names the actions a message suggests."""

    read: Callable[[str], str]
    """The way to read a doc reference (`index`, `<id>`, `<id>@history`)."""
    write: Callable[[str, str], str]
    """The way to write: (quoted id or a placeholder, arguments) -> the call."""
    writer: str
    """What writes docs, named in a sentence ("its first write_doc")."""
    reader: str
    """What reads docs, named in a sentence ("copy it from read_doc")."""
    restore: Callable[[str, int | None], str]
    """The way to put a kept version back: (id, its number, None for any) -> the call."""


FOR_AGENT = Calls(
    read=lambda ref: f'read_doc("{ref}")',
    write=lambda doc_id, args: f"write_doc({doc_id}, {args})",
    writer="write_doc",
    reader="read_doc",
    restore=lambda doc_id, n: f'write_doc("{doc_id}", body=<{"its text" if n is None else "the text below"}>)',
)
"""Tool calls, for the agent."""

FOR_TERMINAL = Calls(
    read=lambda ref: "biopb-mcp docs index" if ref == "index" else f"biopb-mcp docs read {ref}",
    write=lambda doc_id, args: "the agent's write_doc",
    writer="write_doc (the agent's tool)",
    reader="biopb-mcp docs read",
    restore=lambda doc_id, n: f"biopb-mcp docs restore {doc_id} v{'<N>' if n is None else n}",
)
"""Commands, for a person at a terminal (who writes docs only by restoring a kept version)."""


def refusal(exc: DocError, calls: Calls) -> str:
    """The message for a docs refusal, written from its kind and fields with the next step named
    in `calls`' words; a kind that suggests no step reads as the store's own message."""
    kind, doc_id, facts = exc.kind, exc.doc_id or "", exc.details
    if kind is DocProblem.EMPTY_ID:
        return f"{exc}: give the id the index lists, e.g. {calls.read('index')}."
    said = _id_refusal(exc)
    if said is not None:
        return said
    if kind in (DocProblem.NO_DOC, DocProblem.NO_DOC_TO_EDIT):
        what = " to edit with old/new; create it with body=…" if kind is DocProblem.NO_DOC_TO_EDIT else ""
        close = exc.suggestions if isinstance(exc, DocNotFound) else []
        hint = f" Closest: {', '.join(close)}." if close else ""
        return (
            f"No doc {doc_id!r}{what}.{hint} {calls.read('index')} lists the docs; "
            f"{calls.write('id', 'body=…')} creates one."
        )
    if kind is DocProblem.NO_HISTORY:
        return f"No history for {doc_id!r}: versions are kept from its first {calls.writer} on."
    if kind is DocProblem.NO_VERSION:
        return (
            f"No version {facts['version']} of {doc_id!r}: the kept versions are v{facts['first']}–v{facts['last']} "
            f"(see {calls.read(doc_id + '@history')})."
        )
    if kind is DocProblem.ARGS_NEITHER:
        return (
            f"{calls.writer} needs body (the whole new text) or old and new (replace one exact "
            "occurrence); got neither."
        )
    if kind is DocProblem.BODY_EMPTY:
        retire = calls.write('"index"', "old=…, new=…")
        return f"body is empty. There is no delete: retire a doc by removing its index entry ({retire})."
    if kind is DocProblem.OLD_EMPTY:
        return f"old is empty: give the exact text to replace (copy it from {calls.reader})."
    if kind in (DocProblem.SECTION_EXISTING, DocProblem.SECTION_WITH_EDIT):
        move = calls.write('"index"', "old=…, new=…")
        return f"{_section_refused(exc)} To move an index line under another heading, edit the index: {move}."
    if kind is DocProblem.ARGS_BOTH:
        return "Give either body (the whole new text) or old and new (one exact replace), not both."
    if kind is DocProblem.ARGS_HALF:
        return f"old and new go together: got only {facts['given']}. Pass both, or body for the whole text."
    if kind is DocProblem.OLD_AMBIGUOUS:
        overlap = "2 times or more (its matches overlap)"
        times = overlap if facts.get("overlapping") and facts.get("count") == 1 else f"{facts['count']} times"
        return (
            f"old matches {times} in {doc_id!r}; nothing was changed. Include more of the surrounding text so "
            "it matches exactly once."
        )
    if kind in (DocProblem.BODY_TOO_BIG, DocProblem.BODY_CAP) and "count" in facts:
        unit, most = (
            ("bytes", "a doc file may have at most")
            if kind is DocProblem.BODY_TOO_BIG
            else ("lines", "a doc may have at most")
        )
        changed = " Nothing was changed." if kind is DocProblem.BODY_TOO_BIG else ""
        return (
            f"{doc_id!r} would be {facts['count']:,} {unit}; {most} {facts['limit']:,}.{changed} Split it into "
            "docs that link each other with [[id]], or tighten it."
        )
    if kind is DocProblem.INDEX_CAP:
        return _index_cap(exc)
    if kind is DocProblem.EMPTY_QUERY:
        return (
            "Search query is empty: give words or a literal to look for, e.g. an exception message, a config "
            "key or a function name."
        )
    if kind is DocProblem.QUERY_TOO_LONG:
        return (
            f"Search query is {facts['count']:,} characters; the most is {facts['limit']:,}. Search for its "
            f"distinctive part instead: one line of an error, a name, a few words (it began {facts['began']})."
        )
    if kind is DocProblem.QUERY_TOO_COSTLY:
        return (
            f"Search query {facts['shown']} was stopped after {facts['limit']:g} s: it matches too much of the "
            "docs to rank in time. Search for its most distinctive part instead: a name, one line of an error, "
            "two or three uncommon words."
        )
    if kind is DocProblem.BAD_CURSOR:
        return _bad_cursor(exc)
    if kind is DocProblem.NO_FTS5:
        return (
            f"Search needs SQLite's FTS5 extension, which this Python's sqlite3 module (SQLite "
            f"{facts['sqlite_version']}) was built without ({facts['error']}). Docs can still be read and "
            "written; run the server with a Python whose sqlite3 has FTS5 (python.org, conda and most Linux "
            "builds do) to search them."
        )
    if kind is DocProblem.INDEX_LOCKED:
        return (
            f"The search index {facts['path']} is locked by another process, and {facts['changed']:,} docs "
            f"changed since it was written (at most {facts['limit']} are searched without it); search again "
            "in a moment."
        )
    if kind is DocProblem.OLD_NOT_FOUND:
        return (
            f"old was not found in {doc_id!r} ({facts.get('count', 0)} matches); nothing was changed. Re-read it "
            f"with {calls.read(doc_id)} and copy the exact text (whitespace included)."
        )
    if isinstance(exc, DocUnreadable):
        return unreadable_text(exc)
    return str(exc)


def _index_cap(exc: DocError) -> str:
    """An index write over a cap: entries (retire some) or lines and bytes (move prose out)."""
    facts = exc.details
    measure = facts.get("measure")
    if measure is None:
        return (
            f"The index would have {facts['count']} entries; the cap is {facts['limit']}. Nothing was changed. "
            "Retire entries first: remove lines of local docs you no longer need, or move shipped ids to the "
            "`ignored:` line."
        )
    return (
        f"The index would be {facts['count']:,} {measure}; the index may have at most {facts['limit']:,} "
        f"{measure}. Nothing was changed. Keep it to entry lines and short headings: move prose into a doc of "
        "its own and link it from an entry."
    )


def _id_refusal(exc: DocError) -> str | None:
    """An id the grammar refuses, with what to write instead, in words any reader follows; None
    for a kind that has no next step here."""
    kind = exc.kind
    if kind is DocProblem.EMPTY_ID:
        return f"{exc}: give the id the index lists."
    if kind is DocProblem.ABSOLUTE_ID:
        return f"{exc} (drop the leading '/')."
    if kind is DocProblem.COLLECTION_ID:
        return f"{exc}; name a doc inside it instead, e.g. 'group/name'."
    if kind is DocProblem.BAD_CHAR and exc.details.get("char") == "\\":
        shown, char = exc.details["shown"], exc.details["char"]
        return f"Doc id {shown!r} contains {char!r} (use '/' to separate segments); {ID_CHARS_HELP}."
    if kind is DocProblem.EMPTY_SEGMENT:
        return f"{exc}; remove the extra '/'."
    if kind is DocProblem.READ_ONLY_VIEW:
        base = exc.doc_id or ""
        return f"{exc}; write to the doc id itself" + (f" ({base!r})." if is_valid_id(base) else ".")
    return None


def _bad_cursor(exc: DocError) -> str:
    """A resources/list cursor refused, and that the client should pass back the one it was given."""
    cursor, problem = exc.details.get("cursor"), exc.details.get("problem")
    if isinstance(problem, DocError):
        said = _id_refusal(problem) or str(problem)
        return f"Invalid cursor {cursor!r}: {said} Pass back the nextCursor you received, or none to start over."
    return (
        f"Invalid cursor {cursor!r}: a cursor is the URI of the last resource of a page (starting "
        f"{exc.details.get('prefix')!r}); pass back the nextCursor you received, or none to start over."
    )


def _section_refused(exc: DocError) -> str:
    """Why a write's ``section`` was refused: it files only a new doc's line, never an edit's."""
    doc_id = exc.doc_id or ""
    if exc.kind is DocProblem.SECTION_WITH_EDIT:
        what = "the index itself" if doc_id == INDEX_ID else "an old/new edit"
        return f"section files a new doc's index line; it does not apply to {what}. Nothing was changed."
    if exc.details.get("listed"):
        return (
            f"The index lists {doc_id!r} already: section only files the line of a doc the index does not "
            "list, and a listed doc keeps the line it has. Nothing was changed."
        )
    return (
        f"{doc_id!r} exists already (a {exc.details.get('origin')} doc): section only files the index line "
        "of a new doc, and an existing doc keeps the line it has. Nothing was changed."
    )


def format_hits(hits: Sequence[Hit], query: str, calls: Calls) -> str:
    """Search hits as a numbered list, best first, each with id, section, origin and snippet; weak
    hits (a few common words shared) are listed under their own line, so none passes for an answer."""
    about = f" for {shown_query(query)}" if query else ""
    retry = f"Try fewer or different words, or {calls.read('index')} to browse the docs."
    if not hits:
        return f"No matches{about}. {retry}"
    strong = [hit for hit in hits if not hit.weak]
    weak = [hit for hit in hits if hit.weak]
    if strong:
        noun = "match" if len(strong) == 1 else "matches"
        blocks = [f"{len(strong)} {noun}{about}, best first (open one with {calls.read('<id>')}):"]
    else:
        blocks = [f"No strong matches{about}. {retry}"]
    blocks += [_hit_line(n, hit) for n, hit in enumerate(strong, 1)]
    if weak:
        noun = "match shares" if len(weak) == 1 else "matches share"
        blocks.append(f"{'Then ' if strong else ''}{len(weak)} weak {noun} only a few common words with the query:")
        blocks += [_hit_line(n, hit) for n, hit in enumerate(weak, len(strong) + 1)]
    return "\n\n".join(blocks)


def _hit_line(n: int, hit: Hit) -> str:
    return f"{n}. {hit.doc_id} — § {hit.heading}  [{ORIGIN_WORDS[hit.origin]}, score {hit.score:g}]\n   {hit.snippet}"


def write_report(result: WriteResult, calls: Calls) -> str:
    """What a write did: what changed, the diff, and where a new doc's index line went."""
    doc_id = result.doc_id
    if not result.changed:
        if doc_id == "index":
            return "No change: the index already equals this text; nothing was written.\n"
        what = "the shipped text (no local copy was made)" if result.from_shipped else "its local copy"
        return f"No change: {doc_id!r} already equals this text in {what}; nothing was written.\n"
    if result.index_entries is not None:
        n = result.index_entries
        return (
            f"Updated the index ({n} {'entry' if n == 1 else 'entries'} of at most {INDEX_MAX_ENTRIES}).\n\n"
            + result.diff
            + "\n"
        )
    if result.created and result.from_shipped:
        head = (
            f"Created a local copy of shipped doc {doc_id!r}: it now shadows the shipped text, which stays untouched."
        )
    elif result.created:
        head = f"Created local doc {doc_id!r}."
    else:
        head = f"Updated {doc_id!r}."
    parts = [head]
    if result.kept_hand_edit is not None:
        n = result.kept_hand_edit
        parts.append(
            f"The file had been edited outside the server; that text is kept as v{n} ({calls.read(f'{doc_id}@v{n}')})."
        )
    parts += ["", result.diff]
    if result.index_diff is not None:
        heading = result.filed_under or UNFILED_HEADING
        hint = " (move the line where it belongs)" if heading == UNFILED_HEADING else ""
        parts += ["", f"Index: filed under {heading}{hint}:", result.index_diff]
    elif result.created:
        parts += ["", f"Index: {doc_id!r} already has an entry; left as it is."]
    return "\n".join(parts) + "\n"
