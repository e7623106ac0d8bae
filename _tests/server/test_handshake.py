"""compose_instructions: the fixed order around the live index, and a clear line when it breaks."""

from __future__ import annotations

from pathlib import Path

from biopb_mcp.docs.index import IGNORED_NOTE, IndexFacts
from biopb_mcp.docs.store import DocStore
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index
from biopb_mcp.text.instructions import (
    ASK_FIRST_LINE,
    GUARDRAILS,
    INDEX_HEADER,
    INDEX_MAX_CHARS,
    READ_FIRST_LINE,
    START_LINE,
    compose_instructions,
)


def test_order_is_start_header_index_read_guardrails_ask(tmp_path: Path) -> None:
    store = DocStore(tmp_path / "docs")
    text = compose_instructions(store)
    parts = [
        START_LINE,
        INDEX_HEADER,
        render_index(store, hide_ignored=True).strip(),
        READ_FIRST_LINE,
        GUARDRAILS,
        ASK_FIRST_LINE,
    ]
    positions = [text.index(part) for part in parts]
    assert positions == sorted(positions)
    assert "not a sandbox" in text and "raw data" in text and "results folder" in text


def test_each_call_reads_the_index_fresh(tmp_path: Path) -> None:
    store = DocStore(tmp_path / "docs")
    before = compose_instructions(store)
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + "\n- fresh-entry: when the user asks for fresh things\n")
    after = compose_instructions(store)
    assert "fresh-entry" not in before and "- fresh-entry: when the user asks for fresh things" in after


class _BrokenStore:
    def index_facts(self, *, hide_ignored: bool = False) -> IndexFacts:
        raise OSError("disk on fire")


def test_a_failing_render_still_gives_instructions_with_a_clear_line() -> None:
    text = compose_instructions(_BrokenStore())
    assert text.startswith(START_LINE)
    assert "could not be rendered" in text and "disk on fire" in text and 'read_doc("index")' in text
    assert text.index(INDEX_HEADER) < text.index("could not be rendered") < text.index(ASK_FIRST_LINE)


def test_the_handshake_never_spells_out_ignored_ids(tmp_path: Path) -> None:
    local = tmp_path / "docs"
    local.mkdir()
    store = DocStore(local)
    store.write_doc(
        "index", body="# idx\n\n## References\n- authoring: write a doc\n\nignored: flatfield, count-spots\n"
    )
    text = compose_instructions(store)
    assert "flatfield" not in text and "count-spots" not in text
    assert "ignored: (2 shipped docs" in text
    assert "flatfield" in read_doc(store, "index")  # still there to edit


def test_a_hand_grown_index_is_cut_with_a_note_not_inlined_whole(tmp_path: Path) -> None:
    local = tmp_path / "docs"
    local.mkdir()
    lines = "".join(
        f"- lab/protocol-{i}: when the user asks about protocol number {i} of the lab\n" for i in range(10_000)
    )
    (local / "index.md").write_text("# idx\n\n## Lab\n" + lines)
    store = DocStore(local)
    text = compose_instructions(store)
    assert len(text) < INDEX_MAX_CHARS + 5_000
    assert "- lab/protocol-0:" in text and "- lab/protocol-9999:" not in text
    assert 'read_doc("index") shows it whole' in text
    assert text.endswith(ASK_FIRST_LINE)  # what follows the index still arrives
    assert "- lab/protocol-9999:" in read_doc(store, "index")


def test_the_ignored_line_says_what_it_means_and_a_bare_one_shows_nothing(tmp_path: Path) -> None:
    """Agents read a bare `ignored:` as "do not use": say these are still readable, or say nothing."""
    store = DocStore(tmp_path / "docs")
    seeded = compose_instructions(store)  # the shipped seed ends with an empty ignored: line
    assert not [line for line in seeded.splitlines() if line.strip().startswith("ignored")]
    assert not [line for line in read_doc(store, "index").splitlines() if line.strip().startswith("ignored")]
    store.write_doc(
        "index", body="# idx\n\n## References\n- authoring: write a doc\n\nignored: flatfield, count-spots\n"
    )
    for text in (compose_instructions(store), read_doc(store, "index")):
        line = next(line for line in text.splitlines() if line.startswith("ignored:"))
        assert IGNORED_NOTE in line, line
    assert read_doc(store, "index").count("flatfield") == 1


def test_a_new_doc_files_under_unfiled_above_the_seeds_trailing_ignored_line(tmp_path: Path) -> None:
    store = DocStore(tmp_path / "docs")
    store.write_doc("deconvolve", body="# Deconvolve\n\nRichardson-Lucy on a widefield stack.\n")
    raw = (tmp_path / "docs" / "index.md").read_text(encoding="utf-8").rstrip("\n").splitlines()
    assert raw[-1] == "ignored:"
    assert raw.index("## Unfiled") < next(i for i, line in enumerate(raw) if line.startswith("- deconvolve:"))
