"""write_doc(id, body, section=...): a new doc's index line filed under a named heading in one call."""

from __future__ import annotations

from pathlib import Path

import pytest

from _tests.docs.test_store import make_shipped, snapshot
from _tests.support.write_reports import as_agent_reads
from biopb_mcp.docs.index import parse
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import DocProblem, WriteRefused
from biopb_mcp.text.docs import FOR_AGENT, refusal

RULE = "---\ndescription: report areas in square microns\n---\n# Areas\n\nAlways in square microns.\n"


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    return DocStore(tmp_path / "local", shipped_dir=make_shipped(tmp_path / "shipped"), version="1.0")


def test_a_new_doc_lands_under_a_new_lab_heading_before_ignored_in_one_write(store: DocStore) -> None:
    result = as_agent_reads(store.write_doc("lab/areas", body=RULE, section="Lab"))
    index = (store.local_dir / "index.md").read_text()
    assert index.endswith("## Lab\n- lab/areas: report areas in square microns\n\nignored: smlm\n")
    assert "## Unfiled" not in index
    # the answer shows both files: the doc, and the index line under its heading
    assert "+# Areas" in result.text and "+## Lab" in result.text and "+- lab/areas: report areas" in result.text
    assert "Index: filed under ## Lab:" in result.text and "move the line" not in result.text


def test_a_second_doc_joins_the_existing_heading_whatever_its_case(store: DocStore) -> None:
    store.write_doc("lab/areas", body=RULE, section="## Lab")
    store.write_doc("lab/scope", body="# Scope\n\nOur pixel size.\n", section="lab")
    index = parse((store.local_dir / "index.md").read_text())
    lab = index.lines.index("## Lab")
    assert index.lines[lab + 1 : lab + 3] == [
        "- lab/areas: report areas in square microns",
        "- lab/scope: Our pixel size.",
    ]
    assert index.lines.count("## Lab") == 1


def test_an_existing_heading_of_the_seed_takes_the_line(store: DocStore) -> None:
    result = as_agent_reads(
        store.write_doc("deconvolve", body="# Deconvolve\n\nRichardson-Lucy.\n", section="Procedures")
    )
    lines = (store.local_dir / "index.md").read_text().split("\n")
    assert lines[lines.index("- designs/: the engine's design docs") + 1] == "- deconvolve: Richardson-Lucy."
    assert "Index: filed under ## Procedures:" in result.text


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        ({"doc_id": "flatfield", "old": "estimate", "new": "measure", "section": "Lab"}, DocProblem.SECTION_WITH_EDIT),
        ({"doc_id": "index", "body": "# i\n", "section": "Lab"}, DocProblem.SECTION_WITH_EDIT),
        ({"doc_id": "flatfield", "body": "# Mine\n", "section": "Lab"}, DocProblem.SECTION_EXISTING),  # shipped
        ({"doc_id": "smlm", "body": "# Mine\n", "section": "Lab"}, DocProblem.SECTION_EXISTING),  # shipped, ignored
        ({"doc_id": "lab/new", "body": "# New\n", "section": "  "}, DocProblem.BAD_SECTION),
        ({"doc_id": "lab/new", "body": "# New\n", "section": "Lab\nmore"}, DocProblem.BAD_SECTION),
        ({"doc_id": "lab/new", "body": "# New\n", "section": "x" * 81}, DocProblem.BAD_SECTION),
    ],
)
def test_a_section_that_does_not_apply_is_refused_with_the_reason_and_nothing_changes(
    store: DocStore, args: dict[str, str], kind: DocProblem
) -> None:
    store.write_doc("index", old="ignored: smlm", new="ignored: smlm")  # seed the local tier first
    before = snapshot(store.local_dir)
    with pytest.raises(WriteRefused) as exc_info:
        store.write_doc(**args)
    assert exc_info.value.kind is kind
    assert snapshot(store.local_dir) == before
    text = refusal(exc_info.value, FOR_AGENT)
    assert "section" in text and "Nothing was changed" in text


def test_section_on_a_local_doc_that_exists_is_refused_and_says_how_to_move_its_line(store: DocStore) -> None:
    store.write_doc("lab/areas", body=RULE)
    before = snapshot(store.local_dir)
    with pytest.raises(WriteRefused) as exc_info:
        store.write_doc("lab/areas", body=RULE + "More.\n", section="Lab")
    assert exc_info.value.kind is DocProblem.SECTION_EXISTING and "exists already (a local doc)" in str(exc_info.value)
    assert 'write_doc("index", old=…, new=…)' in refusal(exc_info.value, FOR_AGENT)
    assert snapshot(store.local_dir) == before


def test_section_for_an_id_the_index_lists_already_is_refused(store: DocStore) -> None:
    store.write_doc("index", old="## Procedures\n", new="## Procedures\n- planned: a doc to write\n")
    before = snapshot(store.local_dir)
    with pytest.raises(WriteRefused) as exc_info:
        store.write_doc("planned", body="# Planned\n", section="Lab")
    assert exc_info.value.kind is DocProblem.SECTION_EXISTING and "lists 'planned' already" in str(exc_info.value)
    assert snapshot(store.local_dir) == before
    assert store.write_doc("planned", body="# Planned\n").created  # without section it is written, line kept


def test_section_with_a_withheld_id_writes_a_new_doc_and_reveals_no_shipped_one(tmp_path: Path) -> None:
    """In the docs-off arm a withheld doc is not shipped to any reader, this refusal included:
    an answer "exists already (a shipped doc)" would tell the agent it is there."""
    shipped = make_shipped(tmp_path / "shipped")
    store = DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0", withhold=["flatfield"])
    result = as_agent_reads(store.write_doc("flatfield", body="# Mine\n\nMy own notes.\n", section="Lab"))
    assert result.created and "shipped" not in result.text
    assert "## Lab\n- flatfield:" in (store.local_dir / "index.md").read_text()
