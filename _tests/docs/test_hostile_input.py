"""Hostile doc text, old/new strings, history logs and queries: each answers in linear time, or is
refused with a clear error, and nothing of it breaks the doc it touches.

The size-based tests carry a generous timeout as a hang guard instead of a wall-clock assertion:
before the fixes each of them ran for minutes to hours.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from biopb_mcp.docs import QUERY_MAX_CHARS
from biopb_mcp.docs.frontmatter import first_h1, heading_text, parse
from biopb_mcp.docs.history import HISTORY_DIR, VERSIONS_FILE
from biopb_mcp.docs.search.query import search_docs, snippet, split_sections
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import InvalidQuery, WriteRefused
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index

HOSTILE_LINE = "# a" + " " * 100_000 + "b"
"""A heading-like line whose trailing run of spaces made the old heading pattern backtrack cubically."""


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "index.md").write_text("# docs\n\n## Procedures\n")
    return DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0")


# ----------------------------------------------------------------- headings


_OLD_HEADING = {1: re.compile(r"^#\s+(.+?)\s*#*\s*$"), 2: re.compile(r"^##\s+(.+?)\s*#*\s*$")}
"""The heading patterns the scanner replaced: a reference on lines too short to backtrack much."""


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="#ab \t\u00a0\x0b.", max_size=14), st.sampled_from([1, 2]))
def test_heading_text_reads_a_line_as_the_heading_pattern_did(line: str, level: int) -> None:
    match = _OLD_HEADING[level].match(line)
    expected = match.group(1).strip() if match else None
    assert heading_text(line, level) == (expected or None)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("line", "level"),
    [(HOSTILE_LINE, 1), ("## a" + " " * 100_000 + "b", 2), ("# " + "# " * 50_000 + "x", 1)],
    ids=["h1-spaces", "h2-spaces", "h1-hashes"],
)
def test_a_100_kb_hostile_heading_line_parses_and_splits(line: str, level: int) -> None:
    text = f"{line}\n\nSome prose.\n\n{line}\n"
    title = parse(text).title
    sections = split_sections("evil", text)
    if level == 1:
        assert title is not None and title == first_h1(text) and title.endswith(("b", "x"))
    else:
        assert title is None and [heading[-1] for heading, _ in sections] == ["b", "b"]
    assert "Some prose." in "".join(body for _, body in sections)


@pytest.mark.timeout(60)
def test_a_hostile_heading_doc_is_written_read_searched_and_listed(store: DocStore) -> None:
    body = f"{HOSTILE_LINE}\n\nEvil but harmless prose.\n\n## a{' ' * 50_000}b\n\nMore.\n"
    assert store.write_doc("evil", body=body).created
    assert "Evil but harmless prose." in read_doc(store, "evil")
    assert store.info("evil").title.startswith("a")
    assert [h.doc_id for h in search_docs(store, "harmless prose")] == ["evil"]
    assert "evil" in render_index(store)


# ----------------------------------------------------------------- old/new


@pytest.mark.timeout(60)
def test_a_10_kb_old_over_a_1_mb_repetitive_doc_is_refused_without_counting_every_match(store: DocStore) -> None:
    store.write_doc("big", body="x" * 1_000_000 + "\n")
    before = read_doc(store, "big")
    with pytest.raises(WriteRefused, match="matches 100 times"):
        store.write_doc("big", old="x" * 10_000, new="y")
    # Overlapping matches only (non-overlapping count 1): still ambiguous, still refused.
    with pytest.raises(WriteRefused, match="overlap"):
        store.write_doc("big", old="x" * 600_000, new="y")
    assert read_doc(store, "big") == before
    unique = "x" * 9_999 + "\n"  # the one place a newline follows: the end
    result = store.write_doc("big", old=unique, new="done\n")
    assert result.changed and store.doc_text("big")[0].endswith("xdone\n")


# ----------------------------------------------------------------- history log


def _bad_lines(good: dict[str, object]) -> list[str]:
    return [
        json.dumps({**good, "n": "zz"}),
        json.dumps({**good, "n": True}),
        json.dumps({**good, "n": 0}),
        json.dumps({**good, "n": 10**12}),
        json.dumps({**good, "size": "big"}),
        json.dumps({**good, "extra": 1}),
        json.dumps({k: v for k, v in good.items() if k != "sha"}),
        json.dumps([1, 2, 3]),
        "not json at all",
        '{"n": 3, "time":',
    ]


def test_bad_lines_in_a_history_log_are_skipped_and_the_doc_keeps_working(
    store: DocStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.write_doc("note", body="# Note\n\nfirst\n")
    store.write_doc("note", body="# Note\n\nsecond\n")
    log = store.local_dir / HISTORY_DIR / "note" / VERSIONS_FILE
    lines = log.read_text().splitlines()
    good = json.loads(lines[-1])
    log.write_text("\n".join([lines[0], *_bad_lines(good), *lines[1:]]) + "\n")
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.docs.history"):
        listing = read_doc(store, "note@history")
    assert "v1" in listing and "v2 (current)" in listing and "zz" not in listing
    assert any("Skipped 10 unusable line" in r.getMessage() for r in caplog.records)
    assert "first" in read_doc(store, "note@v1")
    assert store.write_doc("note", old="second", new="third").changed
    assert "third" in read_doc(store, "note@v3")
    assert "v3 (current)" in read_doc(store, "note@history")


# ----------------------------------------------------------------- search queries


@pytest.mark.timeout(60)
def test_a_2_mb_query_gets_a_short_clear_error(store: DocStore) -> None:
    store.write_doc("note", body="# Note\n\nthreshold otsu\n")
    with pytest.raises(InvalidQuery) as caught:
        search_docs(store, "threshold " * 200_000)
    message = str(caught.value)
    assert f"{QUERY_MAX_CHARS:,}" in message and "2,000,000" in message
    assert len(message) < 400
    assert search_docs(store, ("threshold " * 200)[:QUERY_MAX_CHARS])  # at the cap: searched


@pytest.mark.timeout(60)
def test_snippet_is_linear_on_a_repetitive_section() -> None:
    text = "a " * 300_000  # 600 KB, the query's words match everywhere but never in full
    query = ("a " * 499) + "b"
    assert snippet(text, query).startswith("a a")


def _old_center(text: str, query: str) -> int | None:
    words = query.split()
    if not words:
        return None
    match = re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE).search(text)
    return (match.start() + match.end()) // 2 if match else None


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="aAb \n\t.", max_size=40), st.text(alphabet="aAb \t.", max_size=8))
def test_snippet_centers_on_the_phrase_as_the_regex_did(text: str, query: str) -> None:
    from biopb_mcp.docs.search.query import _phrase_center

    assert _phrase_center(text, query) == _old_center(text, query)


def test_snippet_survives_text_whose_case_folding_changes_length() -> None:
    text = "İİİİ " * 50 + "target phrase here " + "İ " * 50
    assert "target phrase" in snippet(text, "TARGET phrase")


@pytest.mark.timeout(20)
def test_the_link_pattern_stays_linear_on_a_run_of_brackets() -> None:
    from biopb_mcp.docs.lint import _LINK

    assert _LINK.findall("[[" * 40_000 + "[[a]]") == ["a"]
    assert _LINK.findall("see [[a/b]] and [[c]]") == ["a/b", "c"]
