"""Which docs the index lists as procedures, and their inputs (biopb_mcp/docs/procedures.py)."""

from __future__ import annotations

import gc
import os
import time
import tracemalloc
from pathlib import Path

import pytest

from _tests.support.prepared_trees import prepare_tree
from biopb_mcp.docs.procedures import Input, parse_inputs, procedures, takes_file
from biopb_mcp.docs.store import DocStore
from biopb_mcp.fs.stamps import RACY_NS

PROCEDURE = "# Count cells\n\nCount cells.\n\n## Inputs\n- `image`: a 2-D plane.\n\n## Steps\n1. count\n"
REFERENCE_WITH_INPUTS = "# Scope\n\nOur scope.\n\n## Inputs\n- `channel`: which channel.\n"
NOTE = "# A note\n\nNo inputs here.\n"


def _store(tmp_path: Path, index: str, docs: dict[str, str], shipped: dict[str, str] | None = None) -> DocStore:
    local, shipped_dir = tmp_path / "local", tmp_path / "shipped"
    for root, files in ((local, docs), (shipped_dir, shipped or {})):
        root.mkdir(parents=True, exist_ok=True)
        for doc_id, text in files.items():
            path = root / f"{doc_id}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    (shipped_dir / "index.md").write_text("# i\n")
    (local / "index.md").write_text(index)
    return DocStore(local, shipped_dir=shipped_dir, version="1.0")


def test_the_seeded_tree_lists_every_shipped_procedure_and_no_reference(tmp_path: Path) -> None:
    found = procedures(DocStore(tmp_path / "docs"))
    ids = [p.doc_id for p in found]
    assert ids[:3] == ["flatfield", "background-subtraction", "segment-nuclei"] and "large-image" in ids
    assert not {"kernel", "data", "outputs", "authoring"} & set(ids)
    nuclei = next(p for p in found if p.doc_id == "segment-nuclei")
    assert nuclei.hook.startswith("count and outline nuclei") and nuclei.title == "Segment nuclei"
    assert [i.name for i in nuclei.inputs] == ["image", "nucleus_diameter_px", "exclude_edge"]
    assert [i.file for i in nuclei.inputs] == [True, False, False]
    assert not any(i.required for p in found for i in p.inputs)  # no shipped doc marks one required
    # the save-helpers item of every shipped Inputs list is prose, not an input
    assert not any(i.name.lower() in ("the", "save") for p in found for i in p.inputs)


def test_the_cell_and_3d_procedures_take_the_input_names_other_procedures_hand_them(tmp_path: Path) -> None:
    """segment-cells takes segment-nuclei's labels as `nuclei`; segment-nuclei-3d takes the voxel size
    open_image reads from the file: the names a prompt asks for and a hand-off passes."""
    found = {p.doc_id: p for p in procedures(DocStore(tmp_path / "docs"))}
    cells, nuclei_3d = found["segment-cells"], found["segment-nuclei-3d"]
    assert [i.name for i in cells.inputs] == ["nuclei", "cells_image", "stain"]
    assert [i.name for i in nuclei_3d.inputs] == ["stack", "voxel_size_um", "nucleus_diameter_um"]
    assert "open_image(path).pixel_size_um" in nuclei_3d.inputs[1].description


@pytest.mark.parametrize("bench_docs", [True, False])
def test_the_bench_docs_off_arm_has_no_procedure_and_the_docs_arm_has_them(tmp_path: Path, bench_docs: bool) -> None:
    tree = prepare_tree(tmp_path / "tree", bench_docs=bench_docs)
    found = [p.doc_id for p in procedures(DocStore(tree.docs_dir, withhold=tree.withheld))]  # as its server reads it
    if bench_docs:
        assert "segment-nuclei" in found and not any(i.startswith("lab/") for i in found)  # lab docs have no Inputs
    else:
        assert found == [] and tree.withheld


def test_which_listed_docs_are_procedures(tmp_path: Path) -> None:
    index = (
        "# i\n\n## References\n- scope: our scope\n\n## Procedures\n- note: a procedure without inputs\n"
        "### Microscopy\n- deep: under a sub-heading of Procedures\n\n## Lab\n- lab/count: count cells\n- lab/note: a note\n"
        "\n## Lab protocols\n- lab/proto: a protocol\n- lab/missing: not written yet\n\n## Unfiled\n- mine: mine\n"
        "\nignored: skipped\n"
    )
    docs = {
        "scope": REFERENCE_WITH_INPUTS,
        "note": NOTE,
        "deep": NOTE,
        "lab/count": PROCEDURE,
        "lab/note": NOTE,
        "lab/proto": NOTE,
        "mine": PROCEDURE,
        "unlisted": PROCEDURE,
    }
    shipped = {"skipped": PROCEDURE, "new-proc": PROCEDURE, "new-ref": NOTE, "_banked": PROCEDURE}
    found = procedures(_store(tmp_path, index, docs, shipped))
    assert [p.doc_id for p in found] == ["note", "deep", "lab/count", "lab/proto", "mine", "new-proc"]
    assert [p.hook for p in found][:3] == [
        "a procedure without inputs",
        "under a sub-heading of Procedures",
        "count cells",
    ]
    assert found[-1].hook == "Count cells."  # the New-shipped tail: the doc's own description


def test_docs_under_a_folder_line_of_a_procedures_heading_are_procedures(tmp_path: Path) -> None:
    index = "# i\n\n## Procedures\n- lab/: our protocols\n\n## References\n- refs/: papers\n"
    docs = {"lab/a": NOTE, "lab/b": PROCEDURE, "lab/_banked": PROCEDURE, "refs/x": PROCEDURE}
    assert [p.doc_id for p in procedures(_store(tmp_path, index, docs))] == ["lab/a", "lab/b"]


def test_an_unreadable_doc_is_left_out_and_the_rest_served(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = _store(tmp_path, "# i\n\n## Procedures\n- bad: bad\n- good: good\n", {"good": PROCEDURE})
    (store.local_dir / "bad.md").write_bytes(b"\xff\xfe not utf-8 \x00")
    assert [p.doc_id for p in procedures(store)] == ["good"]
    assert "bad" in caplog.text


def test_inputs_are_read_tolerantly() -> None:
    text = """# P

## Inputs

- `image`: one 2-D plane. See [[data]].
- `ch1`, `ch2`: the two channels,
  same shape.
- **mask** (required): the cells.
- `threshold` (optional) — a number.
* pixel_size_um - from the metadata
1. `labels` (Required): a label image
- Required: not a name, a capitalised word
- The save helpers of [[outputs]]: run that doc first.
- Note: prose, not an input.
- `image`: a repeated name keeps its first description
  - `nested`: a sub-item belongs to the item above

## Steps
- `step`: not an input
"""
    inputs = parse_inputs(text)
    assert inputs is not None
    assert [(i.name, i.required) for i in inputs] == [
        ("image", False),
        ("ch1", False),
        ("ch2", False),
        ("mask", True),
        ("threshold", False),
        ("pixel_size_um", False),
        ("labels", True),
    ]
    assert inputs[0].description == "one 2-D plane. See data."
    assert inputs[1].description == "the two channels, same shape." == inputs[2].description
    assert inputs[3].description == "the cells."


def test_required_when_the_description_opens_with_it_and_no_inputs_section_is_none() -> None:
    inputs = parse_inputs(
        "# P\n\n## Input\n- `path`: required. The file to read.\n- `n`: optional, required only if x\n"
    )
    assert inputs == (
        Input("path", "required. The file to read.", True, True),
        Input("n", "optional, required only if x"),
    )
    assert parse_inputs(NOTE) is None
    assert parse_inputs("# P\n\n## Inputs\nNone: the procedure reads the open viewer.\n") == ()


@pytest.mark.parametrize(
    ("name", "description", "expected"),
    [
        ("image", "one 2-D plane", True),
        ("source_path", "", True),
        ("outFolder", "", True),
        ("tiles", "array (rows, cols, Y, X)", True),
        ("ch1", "a TIFF file of channel 1", True),
        ("spot_fwhm_px", "spot width, or None to measure it on the image", False),
        ("pixel_size_um", "from the file's metadata", False),
        ("threshold", "a number", False),
    ],
)
def test_an_input_takes_a_file_by_its_name_or_the_opening_of_its_description(
    name: str, description: str, expected: bool
) -> None:
    assert takes_file(name, description) is expected


def _big_procedure(edit: int, lines: int = 100, width: int = 3000) -> str:
    """A procedure of about ``lines * width`` bytes in few lines (inside the write caps)."""
    filler = "\n".join(f"{n} {edit} " + "x" * width for n in range(lines))
    return f"# Big\n\nA big one.\n\n## Inputs\n- `image`: the image file.\n\n## Steps\n{filler}\n"


def test_edits_of_a_listed_procedure_do_not_grow_what_is_kept(tmp_path: Path) -> None:
    """What the prompt set remembers is keyed by the doc's file and stamp, not by its text:
    each edit replaces the entry. (Keyed on the whole text, every version stayed in memory.)"""
    store = _store(tmp_path, "# i\n\n## Procedures\n- big: a big one\n", {"big": _big_procedure(0)})
    path = tmp_path / "local" / "big.md"
    procedures(store)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for edit in range(1, 11):
            store.write_doc("big", _big_procedure(edit))
            assert [p.doc_id for p in procedures(store)] == ["big"]  # just written: read, not kept
            old = time.time_ns() - 10 * RACY_NS
            os.utime(path, ns=(old, old))
            procedures(store)  # settled: kept
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < len(_big_procedure(0)), f"{grown} bytes kept after 10 edits"
