"""`biopb-mcp docs check`'s lines, written from each lint finding's kind and facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from biopb_mcp.docs.lint import Finding, Lint
from biopb_mcp.errors import DocProblem, DocUnreadable, InvalidDocId, Unreadable
from biopb_mcp.text.lint import finding_text

DOC = {"tier": "local", "doc_id": "fm", "path": Path("/lab/docs/fm.md")}

SAID = [
    (
        Finding(Lint.BAD_NAME, {"tier": "local", "path": Path("/lab/docs/Bad Name.md")}),
        "local: /lab/docs/Bad Name.md has a name outside the id grammar, so no id reaches it; rename it.",
    ),
    (
        Finding(Lint.UNREADABLE, {"tier": "local", "doc_id": "b", "error": DocUnreadable("/lab/docs/b.md is odd.")}),
        "local: b: /lab/docs/b.md is odd.",
    ),
    (
        Finding(
            Lint.UNREADABLE,
            {
                "tier": "local",
                "doc_id": "b",
                "error": DocUnreadable(
                    "/lab/docs/b.md contains NUL bytes: it is a binary file, not markdown", why=Unreadable.BINARY
                ),
            },
        ),
        "local: b: /lab/docs/b.md contains NUL bytes: it is a binary file, not markdown; move it out of the docs "
        "folder.",
    ),
    (
        Finding(Lint.UNREADABLE, {"tier": "shipped", "doc_id": "c", "error": PermissionError(13, "denied")}),
        "shipped: c: [Errno 13] denied",
    ),
    (
        Finding(Lint.FRONTMATTER_UNCLOSED, {**DOC, "line": 1, "limit": 100}),
        "local: fm: /lab/docs/fm.md: line 1: the frontmatter block opened by '---' is never closed (no '---' line "
        "within 100 lines), so it is read as body text; add the closing '---'.",
    ),
    (
        Finding(Lint.FRONTMATTER_NOT_KEY, {"line": 4, "text": "not a key"}),
        "line 4: 'not a key' is not 'key: value', so it is ignored; fix or remove it.",
    ),
    (
        Finding(Lint.FRONTMATTER_OPEN_LIST, {**DOC, "line": 2, "key": "description"}),
        "local: fm: /lab/docs/fm.md: line 2: description: opens a '[' list that is not closed on the same line, so "
        "the value is read as plain text; close it with ']'.",
    ),
    (
        Finding(Lint.FRONTMATTER_OPEN_QUOTE, {**DOC, "line": 3, "key": "title", "quote": '"'}),
        'local: fm: /lab/docs/fm.md: line 3: title: opens a " quote that is not closed, so the quote is kept in the '
        'value; close it with ".',
    ),
    (
        Finding(Lint.TOO_LONG, {"tier": "local", "doc_id": "long", "count": 401, "limit": 300}),
        "local: long has 401 lines; the cap is 300.",
    ),
    (
        Finding(Lint.SHIPPED_LINK, {"doc_id": "authoring", "target": "really-missing"}),
        "shipped: authoring links [[really-missing]], which is not a shipped doc.",
    ),
    (
        Finding(Lint.INDEX_UNREADABLE, {"error": DocUnreadable("Cannot read /lab/docs/index.md: a link.")}),
        "local: index: Cannot read /lab/docs/index.md: a link.",
    ),
    (
        Finding(
            Lint.INDEX_UNREADABLE,
            {
                "error": DocUnreadable(
                    "/lab/docs/index.md is not UTF-8 text (byte 0xe9 at offset 5)", why=Unreadable.NOT_UTF8
                )
            },
        ),
        "local: index: /lab/docs/index.md is not UTF-8 text (byte 0xe9 at offset 5); re-save it as UTF-8.",
    ),
    (Finding(Lint.INDEX_CAP, {"count": 201, "limit": 200}), "index: 201 entries; the cap is 200."),
    (
        Finding(Lint.INDEX_SELF, {"line": 32}),
        "index line 32: 'index' is the index itself, not a doc; remove the line.",
    ),
    (
        Finding(Lint.INDEX_MISSING, {"line": 33, "doc_id": "nowhere"}),
        "index line 33: 'nowhere' resolves to no doc (missing).",
    ),
    (
        Finding(
            Lint.INDEX_ESCAPES,
            {"line": 35, "error": InvalidDocId("Doc id 'escape' leaves.", kind=DocProblem.ESCAPES_TIER)},
        ),
        "index line 35: Doc id 'escape' leaves.",
    ),
    (
        Finding(Lint.INDEX_BAD_ID, {"line": 34, "token": "a//b"}),
        "index line 34: 'a//b' is not a valid id, so the line is not read as an entry.",
    ),
    (
        Finding(Lint.IGNORED_BAD_ID, {"name": "bad//name"}),
        "index: ignored: names 'bad//name', which is not a valid id.",
    ),
    (
        Finding(Lint.UNSURFACED, {"doc_id": "hand", "entry": "- hand: no entry", "index_path": "/lab/docs/index.md"}),
        "local: hand is in no index entry, so the agent is never shown it; add the line '- hand: no entry' to "
        "/lab/docs/index.md, or its id to the ignored: line to hide it on purpose.",
    ),
    (
        Finding(Lint.DANGLING_LINK, {"doc_id": "lab/scope", "target": "camera-offset"}),
        "local: lab/scope links [[camera-offset]], which is no doc in either tier; write camera-offset, or fix the "
        "link (a dangling link is allowed).",
    ),
    (
        Finding(
            Lint.STALE_HOOK,
            {"line": 31, "doc_id": "lab/camera", "hook": "offset", "title": "Pixel size", "description": "0.16 um"},
        ),
        "index line 31: the hook of lab/camera ('offset') shares no word with the doc's title and description "
        "('Pixel size': '0.16 um'); if the doc was rewritten, update the line to say when to use it now.",
    ),
]


def test_every_kind_is_worded() -> None:
    assert {finding.kind for finding, _ in SAID} == set(Lint)


@pytest.mark.parametrize(("finding", "says"), SAID)
def test_a_finding_reads_as_its_line(finding: Finding, says: str) -> None:
    assert finding_text(finding) == says
