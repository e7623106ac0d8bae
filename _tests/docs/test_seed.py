"""The seed gate: the shipped index and docs agree, links land, nothing is over a cap."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from _tests.support import seedlib

INDEX_TEXT = (seedlib.DOCS_DIR / "index.md").read_text(encoding="utf-8")
INDEX = seedlib.parse_index(INDEX_TEXT)
SHIPPED = seedlib.shipped_ids()
ENTRY_IDS = [doc_id for doc_id, _, _ in INDEX.entries]


def test_index_has_title_references_procedures_and_ignored_line() -> None:
    assert INDEX_TEXT.startswith("# biopb docs\n")
    assert "References" in INDEX.headings
    assert "Procedures" in INDEX.headings  # the bench ablation moves this section's entries to ignored:
    assert any(line.startswith("ignored:") for line in INDEX_TEXT.splitlines())


def test_every_shipped_doc_is_listed_or_ignored_unless_banked() -> None:
    unlisted = [d for d in SHIPPED if not seedlib.is_banked(d) and d not in ENTRY_IDS and d not in INDEX.ignored]
    assert not unlisted, f"shipped docs with no index entry and not on ignored: {unlisted}"


def test_every_index_entry_and_ignored_id_names_a_shipped_doc() -> None:
    missing = [d for d in ENTRY_IDS + INDEX.ignored if not d.endswith("/") and d not in SHIPPED]
    assert not missing, f"index names docs that do not ship: {missing}"
    assert len(ENTRY_IDS) == len(set(ENTRY_IDS)), "an id is listed twice"
    assert not set(ENTRY_IDS) & set(INDEX.ignored), "an id is both listed and ignored"


def test_references_and_procedures_sit_under_their_headings() -> None:
    assert INDEX.ids_under("References") == list(seedlib.REFERENCES)
    procedures = INDEX.ids_under("Procedures")
    assert len(procedures) >= 10
    for doc_id in procedures:
        assert seedlib.code_blocks(seedlib.read(doc_id)), f"procedure {doc_id} has no python code"


@pytest.mark.parametrize("doc_id", SHIPPED)
def test_every_shipped_link_lands_on_a_shipped_doc(doc_id: str) -> None:
    dangling = [t for t in seedlib.links(seedlib.read(doc_id)) if t not in SHIPPED]
    assert not dangling, f"{doc_id} links to docs that do not ship: {dangling}"


def test_index_hooks_carry_no_links_and_read_as_requests() -> None:
    for doc_id, hook, _ in INDEX.entries:
        assert hook, f"{doc_id} has an empty hook"
        assert "[[" not in hook and "](" not in hook, f"{doc_id}: hooks carry no links"
        assert len(hook) <= 120, f"{doc_id}: hook over 120 characters"


def test_nothing_is_over_a_cap() -> None:
    assert len(INDEX.entries) <= seedlib.INDEX_MAX_ENTRIES
    for doc_id in SHIPPED:
        lines = len(seedlib.read(doc_id).splitlines())
        assert lines <= seedlib.BODY_MAX_LINES, f"{doc_id}: {lines} lines"
        if doc_id in seedlib.REFERENCES:
            assert lines < seedlib.REFERENCE_MAX_LINES, f"reference {doc_id}: {lines} lines"
    assert len(seedlib.read("authoring").splitlines()) < seedlib.AUTHORING_MAX_LINES


@pytest.mark.parametrize("doc_id", SHIPPED)
def test_every_doc_has_a_title_and_description(doc_id: str) -> None:
    meta, body = seedlib.split_frontmatter(seedlib.read(doc_id))
    assert meta.get("description"), f"{doc_id}: frontmatter description missing"
    assert body.lstrip().startswith("# "), f"{doc_id}: first line of the body is not an H1"


@pytest.mark.parametrize("doc_id", INDEX.ids_under("Procedures"))
def test_procedures_state_inputs_packages_and_checkpoints(doc_id: str) -> None:
    text = seedlib.read(doc_id)
    meta, _ = seedlib.split_frontmatter(text)
    assert meta.get("packages"), f"{doc_id}: procedures pin the packages they quote"
    assert "\n## Inputs\n" in text and "\n## Produces\n" in text
    lowered = text.lower()
    assert "confirm input" in lowered and "validate and gate" in lowered, f"{doc_id}: name the checkpoints"
    assert "visual check" in lowered, f"{doc_id}: name a visual check"


def test_store_check_finds_no_problem_in_the_shipped_tier(tmp_path: Path) -> None:
    from biopb_mcp.docs.store import DocStore

    problems = DocStore(tmp_path / "docs").check()
    assert problems == []


def test_seed_gate_parser_catches_a_broken_index(tmp_path: Path) -> None:
    """The gate's own parser: an unlisted doc, a missing entry and a dangling link are all seen."""
    (tmp_path / "a.md").write_text("# A\n[[nope]]\n")
    (tmp_path / "b.md").write_text("# B\n")
    (tmp_path / "_banked.md").write_text("# banked\n")
    index = seedlib.parse_index("# x\n## Procedures\n- a: do a\n- gone: vanished\nignored: \n")
    ids = seedlib.shipped_ids(tmp_path)
    entry_ids = [d for d, _, _ in index.entries]
    assert [d for d in ids if not seedlib.is_banked(d) and d not in entry_ids] == ["b"]
    assert [d for d in entry_ids if d not in ids] == ["gone"]
    assert seedlib.links(seedlib.read("a", tmp_path)) == ["nope"]


PRELOADED_HELPERS = {"out_path", "save_labels", "save_image", "save_table", "read_table", "show"}


@pytest.mark.parametrize("doc_id", seedlib.shipped_ids())
def test_no_shipped_doc_defines_a_preloaded_helper(doc_id: str) -> None:
    """The kernel preloads the save helpers and show(): a doc calls them, never carries their code
    for an agent to paste (a pasted copy would ignore the lab's [outputs] config)."""
    for block in seedlib.code_blocks(seedlib.read(doc_id)):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.name not in PRELOADED_HELPERS, f"{doc_id} defines {node.name}()"
