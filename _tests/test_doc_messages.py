"""The docs refusals and search hits, worded for an agent (tool calls) or a terminal (commands).

The store's own messages name no tool; the wording is added here from each error's kind and fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _tests.docs.test_store import make_shipped
from biopb_mcp.docs import QUERY_MAX_CHARS
from biopb_mcp.docs.limits import BODY_MAX_LINES, FILE_MAX_BYTES, INDEX_MAX_ENTRIES
from biopb_mcp.docs.lint import Lint
from biopb_mcp.docs.resources import parse_cursor
from biopb_mcp.docs.search.query import Hit, search_docs
from biopb_mcp.docs.store import DocStore
from biopb_mcp.docs.views import Origin
from biopb_mcp.errors import (
    DocError,
    DocNotFound,
    DocProblem,
    DocUnreadable,
    InvalidQuery,
    SearchUnavailable,
    Unreadable,
    WriteRefused,
)
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.docs import FOR_AGENT, FOR_TERMINAL, Calls, format_hits, refusal
from biopb_mcp.text.index import render_index
from biopb_mcp.text.lint import finding_text


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    return DocStore(tmp_path / "local", shipped_dir=make_shipped(tmp_path / "shipped"))


def test_format_hits_shows_id_heading_origin_snippet_and_says_no_matches() -> None:
    hits = [Hit("kernel", "Config", "Set kernel.promote_after …", Origin.SHADOW, 9.5)]
    text = format_hits(hits, "kernel.promote_after", FOR_AGENT)
    for part in ("kernel", "Config", "local (shadows shipped)", "Set kernel.promote_after", "1 match"):
        assert part in text
    assert "No matches for 'zzz'" in format_hits([], "zzz", FOR_AGENT)


def test_answers_quote_a_long_query_cut_short() -> None:
    query = "a" * QUERY_MAX_CHARS
    text = format_hits([], query, FOR_AGENT)
    assert "No matches for 'aaa" in text and "…" in text and len(text) < 300


def _refused(call: Any) -> DocError:
    with pytest.raises(DocError) as caught:
        call()
    return caught.value


AGENT_TEXT = [
    (lambda s: read_doc(s, ""), 'Empty doc id: give the id the index lists, e.g. read_doc("index").'),
    (
        lambda s: read_doc(s, "/abs"),
        "'/abs' is an absolute path; ids are relative to the docs tier (drop the leading '/').",
    ),
    (
        lambda s: read_doc(s, "lab/"),
        "'lab/' ends in '/': ids ending in '/' are reserved for collections; name a doc inside it instead, e.g. "
        "'group/name'.",
    ),
    (
        lambda s: read_doc(s, "win\\path"),
        "Doc id 'win\\\\path' contains '\\\\' (use '/' to separate segments); ids use letters, digits, '.', '_', "
        "'-' and '/' between segments.",
    ),
    (lambda s: read_doc(s, "a//b"), "Doc id 'a//b' has an empty segment ('//'); remove the extra '/'."),
    (
        lambda s: s.write_doc("kernel@diff", body="# x\n"),
        "'kernel@diff' is a read-only view, not a doc; write to the doc id itself ('kernel').",
    ),
    (
        lambda s: s.write_doc("a b@diff", body="# x\n"),
        "'a b@diff' is a read-only view, not a doc; write to the doc id itself.",
    ),
    (
        lambda s: parse_cursor("biopb://docs/a//b"),
        "Invalid cursor 'biopb://docs/a//b': Doc id 'a//b' has an empty segment ('//'); remove the extra '/'. Pass "
        "back the nextCursor you received, or none to start over.",
    ),
    (
        lambda s: parse_cursor("biopb://docs/"),
        "Invalid cursor 'biopb://docs/': Empty doc id: give the id the index lists. Pass back the nextCursor you "
        "received, or none to start over.",
    ),
    (
        lambda s: read_doc(s, "kernell"),
        "No doc 'kernell'. Closest: kernel. read_doc(\"index\") lists the docs; write_doc(id, body=…) creates one.",
    ),
    (
        lambda s: s.write_doc("nope", old="a", new="b"),
        (
            "No doc 'nope' to edit with old/new; create it with body=…. read_doc(\"index\") lists the docs; "
            "write_doc(id, body=…) creates one."
        ),
    ),
    (lambda s: read_doc(s, "kernel@v3"), "No history for 'kernel': versions are kept from its first write_doc on."),
    (
        lambda s: s.write_doc("kernel"),
        "write_doc needs body (the whole new text) or old and new (replace one exact occurrence); got neither.",
    ),
    (
        lambda s: s.write_doc("kernel", body="  \n"),
        (
            "body is empty. There is no delete: retire a doc by removing its index entry "
            '(write_doc("index", old=…, new=…)).'
        ),
    ),
    (
        lambda s: s.write_doc("kernel", old="", new="b"),
        "old is empty: give the exact text to replace (copy it from read_doc).",
    ),
    (
        lambda s: s.write_doc("kernel", old="no such text", new="b"),
        (
            "old was not found in 'kernel' (0 matches); nothing was changed. Re-read it with "
            'read_doc("kernel") and copy the exact text (whitespace included).'
        ),
    ),
]


@pytest.mark.parametrize(("call", "says"), AGENT_TEXT)
def test_the_agent_is_told_the_tool_call_and_the_store_names_none(store: DocStore, call: Any, says: str) -> None:
    exc = _refused(lambda: call(store))
    assert refusal(exc, FOR_AGENT) == says
    assert "read_doc" not in str(exc) and "write_doc" not in str(exc)


def test_a_missing_version_points_at_the_history(store: DocStore) -> None:
    for k in range(3):
        store.write_doc("proc", body=f"# Proc\n\nversion {k}\n")
    exc = _refused(lambda: read_doc(store, "proc@v9"))
    assert (
        refusal(exc, FOR_AGENT)
        == "No version 9 of 'proc': the kept versions are v1–v3 (see read_doc(\"proc@history\"))."
    )
    assert refusal(exc, FOR_TERMINAL).endswith("(see biopb-mcp docs read proc@history).")


def test_a_terminal_is_told_the_command(store: DocStore) -> None:
    exc = _refused(lambda: read_doc(store, "kernell"))
    text = refusal(exc, FOR_TERMINAL)
    assert "biopb-mcp docs index lists the docs" in text and "read_doc(" not in text


@pytest.fixture
def edited(store: DocStore) -> DocStore:
    """A shadowed shipped doc and a local doc with two versions."""
    store.write_doc("kernel", old="One kernel", new="Exactly one kernel")
    store.write_doc("proc", body="# Proc\n\nfirst\n")
    store.write_doc("proc", body="# Proc\n\nsecond\n")
    return store


def _views(store: DocStore, calls: Calls | None) -> list[str]:
    """Every view that suggests a next step: a shadow's header, @diff without a copy, @history, @v<N>."""
    return [
        read_doc(store, ref, calls).split("\n\n", 1)[0]
        for ref in ("kernel", "authoring@diff", "authoring@history", "proc@history", "proc@v1")
    ]


def test_the_read_views_word_their_next_steps_for_their_reader(edited: DocStore) -> None:
    shadow, no_copy, no_history, listing, version = _views(edited, FOR_AGENT)
    assert shadow.endswith('; read_doc("kernel@diff") compares it with the shipped text')
    assert no_copy == 'authoring has no local copy: read_doc("authoring") returns the shipped text itself.\n'
    assert no_history.endswith("Versions are kept from its first write_doc on.\n")
    assert listing.endswith('Read one with read_doc("proc@v<N>"); restore one with write_doc("proc", body=<its text>).')
    assert version.endswith('Restore it with write_doc("proc", body=<the text below>).')
    terminal = _views(edited, FOR_TERMINAL)
    assert terminal[0].endswith("; biopb-mcp docs read kernel@diff compares it with the shipped text")
    assert "biopb-mcp docs read proc@v<N>" in terminal[3]
    assert not any("read_doc(" in text or "write_doc(" in text for text in terminal)


def test_without_a_vocabulary_the_views_name_no_tool(edited: DocStore) -> None:
    plain = _views(edited, None)
    assert plain[1] == "authoring has no local copy: it reads as the shipped text itself.\n"
    # (a version's source label "write_doc" is what made it, stored in the history, not a call)
    assert not any("read_doc" in text or "write_doc(" in text or " write_doc " in text for text in plain), plain


FROM_FIELDS = [
    (
        DocNotFound("x", kind=DocProblem.NO_DOC, doc_id="kernell", suggestions=["kernel"]),
        "No doc 'kernell'. Closest: kernel. read_doc(\"index\") lists the docs; write_doc(id, body=…) creates one.",
    ),
    (
        DocNotFound("x", kind=DocProblem.NO_VERSION, doc_id="proc", version=9, first=1, last=3),
        "No version 9 of 'proc': the kept versions are v1–v3 (see read_doc(\"proc@history\")).",
    ),
    (
        WriteRefused("x", kind=DocProblem.BODY_EMPTY),
        'body is empty. There is no delete: retire a doc by removing its index entry (write_doc("index", old=…, new=…)).',
    ),
    (
        WriteRefused("x", kind=DocProblem.OLD_NOT_FOUND, doc_id="kernel", count=0),
        "old was not found in 'kernel' (0 matches); nothing was changed. Re-read it with "
        'read_doc("kernel") and copy the exact text (whitespace included).',
    ),
    (
        WriteRefused("x", kind=DocProblem.SECTION_EXISTING, doc_id="planned", listed=True),
        "The index lists 'planned' already: section only files the line of a doc the index does not list, and a "
        "listed doc keeps the line it has. Nothing was changed. To move an index line under another heading, edit "
        'the index: write_doc("index", old=…, new=…).',
    ),
    (
        WriteRefused("x", kind=DocProblem.ARGS_HALF, given="new"),
        "old and new go together: got only new. Pass both, or body for the whole text.",
    ),
    (
        WriteRefused("x", kind=DocProblem.OLD_AMBIGUOUS, doc_id="p", count=1, overlapping=True),
        "old matches 2 times or more (its matches overlap) in 'p'; nothing was changed. Include more of the "
        "surrounding text so it matches exactly once.",
    ),
    (
        WriteRefused("x", kind=DocProblem.BODY_CAP, doc_id="lab/count", count=401, limit=300),
        "'lab/count' would be 401 lines; a doc may have at most 300. Split it into docs that link each other "
        "with [[id]], or tighten it.",
    ),
    (
        WriteRefused("x", kind=DocProblem.INDEX_CAP, doc_id="index", count=201, limit=200),
        "The index would have 201 entries; the cap is 200. Nothing was changed. Retire entries first: remove "
        "lines of local docs you no longer need, or move shipped ids to the `ignored:` line.",
    ),
    (
        InvalidQuery("x", kind=DocProblem.EMPTY_QUERY),
        "Search query is empty: give words or a literal to look for, e.g. an exception message, a config key or "
        "a function name.",
    ),
    (
        InvalidQuery("x", kind=DocProblem.QUERY_TOO_COSTLY, limit=1.5, shown="'pixel size'"),
        "Search query 'pixel size' was stopped after 1.5 s: it matches too much of the docs to rank in time. "
        "Search for its most distinctive part instead: a name, one line of an error, two or three uncommon words.",
    ),
    (
        SearchUnavailable("x", kind=DocProblem.INDEX_LOCKED, path="/s/search.sqlite3", changed=1200, limit=500),
        "The search index /s/search.sqlite3 is locked by another process, and 1,200 docs changed since it was "
        "written (at most 500 are searched without it); search again in a moment.",
    ),
    (
        SearchUnavailable("x", kind=DocProblem.NO_FTS5, sqlite_version="3.31.1", error="no such module: fts5"),
        "Search needs SQLite's FTS5 extension, which this Python's sqlite3 module (SQLite 3.31.1) was built "
        "without (no such module: fts5). Docs can still be read and written; run the server with a Python whose "
        "sqlite3 has FTS5 (python.org, conda and most Linux builds do) to search them.",
    ),
]


@pytest.mark.parametrize(("exc", "says"), FROM_FIELDS)
def test_the_sentence_is_written_from_the_kind_and_fields_not_cut_from_the_message(exc: DocError, says: str) -> None:
    assert refusal(exc, FOR_AGENT) == says


UNREADABLE_TEXT = [
    ("dir", "{path} is a directory, not a doc file; rename it or remove it."),
    (
        "big",
        f"{{path}} is {FILE_MAX_BYTES + 1:,} bytes, over the {FILE_MAX_BYTES:,} a doc file may have; it is probably "
        "not markdown — move it out of the docs folder.",
    ),
    (
        "binary",
        "{path} contains NUL bytes: it is a binary file, not markdown; move it out of the docs folder.",
    ),
    ("latin1", "{path} is not UTF-8 text (byte 0xe9 at offset 5); re-save it as UTF-8."),
]


def _make_unreadable(path: Path, case: str) -> None:
    if case == "dir":
        path.mkdir()
    elif case == "big":
        path.write_bytes(b"a" * (FILE_MAX_BYTES + 1))
    elif case == "binary":
        path.write_bytes(b"# x\n\x00\x01")
    else:
        path.write_bytes(b"# Caf\xe9\n")


@pytest.mark.parametrize(("case", "says"), UNREADABLE_TEXT)
def test_a_doc_file_that_cannot_be_read_is_told_with_what_to_do_about_it(store: DocStore, case: str, says: str) -> None:
    """The store states what is wrong with the file (its ``why``); every reader is told the same step,
    the file being fixed by hand: the agent (read_doc, the index's note), a terminal (docs read,
    docs check)."""
    render_index(store)
    path = store.local_dir / f"{case}.md"
    _make_unreadable(path, case)
    exc = _refused(lambda: read_doc(store, case))
    sentence = says.format(path=path)
    assert refusal(exc, FOR_AGENT) == sentence and refusal(exc, FOR_TERMINAL) == sentence
    assert str(exc) + ";" in sentence
    found = [finding_text(f) for f in store.check() if f.kind is Lint.UNREADABLE]
    assert found == ([] if case == "dir" else [f"local: {case}: {sentence}"])  # a folder is walked, not read
    index = store.local_dir / "index.md"
    index.unlink()
    _make_unreadable(index, case)
    note = says.format(path=index)
    assert render_index(store).startswith(f"> The local index could not be read ({note}) Showing the shipped index")
    assert [finding_text(f) for f in store.check() if f.kind is Lint.INDEX_UNREADABLE] == [f"local: index: {note}"]


def test_an_unreadable_case_with_no_step_reads_as_the_statement() -> None:
    """A permission refusal gets its step; the OS's own reason (a link, an I/O error) is said as it is."""
    denied = DocUnreadable("Cannot read /lab/docs/a.md: permission denied", why=Unreadable.PERMISSION)
    fifo = DocUnreadable("/lab/docs/a.md is not a regular file", why=Unreadable.NOT_REGULAR)
    other = DocUnreadable("Cannot read /lab/docs/a.md: Too many levels of symbolic links.")
    assert refusal(denied, FOR_AGENT) == "Cannot read /lab/docs/a.md: permission denied; fix its permissions."
    assert refusal(fifo, FOR_TERMINAL) == "/lab/docs/a.md is not a regular file; replace it with a markdown file."
    assert refusal(other, FOR_AGENT) == str(other)


FACTS_QUOTED = [
    lambda s: s.write_doc("kernel", body="x", old="a", new="b"),
    lambda s: s.write_doc("kernel", old="a"),
    lambda s: s.write_doc("kernel", old="", new="b"),
    lambda s: s.write_doc("kernel", body="  \n"),
    lambda s: s.write_doc("kernel", old="n", new="b"),
    lambda s: s.write_doc("big", body="# Big\n" + "l\n" * BODY_MAX_LINES),
    lambda s: s.write_doc("index", body="# Index\n" + "".join(f"- d{i}: hook\n" for i in range(INDEX_MAX_ENTRIES + 1))),
    lambda s: search_docs(s, "  "),
    lambda s: search_docs(s, "word " * QUERY_MAX_CHARS),
    lambda s: parse_cursor("nope"),
    lambda s: parse_cursor("biopb://docs/a//b"),
]


@pytest.mark.parametrize("call", FACTS_QUOTED)
def test_every_reader_sentence_quotes_the_stores_facts_whole(store: DocStore, call: Any) -> None:
    """What the store states stays readable in what each reader is told (a client shown the store's
    message, or a log of it, finds it in the answer), and only the next step differs by reader."""
    exc = _refused(lambda: call(store))
    assert str(exc) in refusal(exc, FOR_AGENT) and str(exc) in refusal(exc, FOR_TERMINAL)
