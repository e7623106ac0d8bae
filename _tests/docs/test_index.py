"""Index parsing, rendering and the Unfiled append (biopb_mcp/docs/index.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from biopb_mcp.docs.index import (
    IndexFacts,
    IndexFile,
    annotate,
    append_under,
    append_unfiled,
    filed_heading,
    headings_above,
    parse,
    prose,
)
from biopb_mcp.text.index import (
    NEW_TAIL_HEADING,
    NEW_TAIL_SENTENCE,
    STALE_TAIL_HEADING,
    STALE_TAIL_SENTENCE,
    index_text,
)


def render(
    index: IndexFile,
    *,
    exists: Callable[[str], bool],
    shadows: Callable[[str], bool],
    new_docs: Sequence[tuple[str, str]],
    stale_docs: Sequence[tuple[str, str]],
    hide_ignored: bool = False,
) -> str:
    """The index as the agent reads it: the domain's facts, worded by the text layer."""
    body = annotate(index, exists=exists, shadows=shadows, hide_ignored=hide_ignored)
    return index_text(IndexFacts(body, list(new_docs), list(stale_docs)))


SEED = """# biopb docs

Prose with a colon: not an entry.
- don't use X for Y: prose too, its first token is not followed by ':'

## References
- kernel: namespace, jobs
- data/pyramids: laziness, axis order
- designs/: the engine's design docs

```
- fenced: not an entry
```

## Procedures
- flatfield: correct uneven illumination
* stitch-tiles: assemble tiles

ignored: measure-smlm, `ratiometric-fret`
ignored: other
"""


def test_parse_finds_entries_collections_and_ignored() -> None:
    idx = parse(SEED)
    assert [e.doc_id for e in idx.entries] == ["kernel", "data/pyramids", "designs", "flatfield", "stitch-tiles"]
    assert idx.entries[0].hook == "namespace, jobs"
    assert [e.collection for e in idx.entries].count(True) == 1
    assert idx.entry_count == 5
    assert idx.entry_ids == {"kernel", "data/pyramids", "flatfield", "stitch-tiles"}
    assert idx.ignored == ["measure-smlm", "ratiometric-fret", "other"]


def test_render_adds_suffixes_keeps_collections_verbatim_and_omits_empty_tails() -> None:
    idx = parse(SEED)
    out = render(
        idx,
        exists=lambda i: i != "stitch-tiles",
        shadows=lambda i: i == "flatfield",
        new_docs=[],
        stale_docs=[],
    )
    assert "* stitch-tiles: assemble tiles (missing)" in out
    assert "- flatfield: correct uneven illumination (local copy)" in out
    assert "- designs/: the engine's design docs\n" in out
    assert "- kernel: namespace, jobs\n" in out
    assert NEW_TAIL_HEADING not in out and STALE_TAIL_HEADING not in out


def test_tails_open_with_their_instruction_and_stale_lines_end_with_the_diff_call() -> None:
    out = render(
        parse("# i\n- a: x\n"),
        exists=lambda i: True,
        shadows=lambda i: False,
        new_docs=[("new-doc", "what it does")],
        stale_docs=[("a", "shipped hook")],
    )
    new_at = out.index(NEW_TAIL_HEADING)
    assert out[new_at:].startswith(f"{NEW_TAIL_HEADING}\n{NEW_TAIL_SENTENCE}\n\n- new-doc: what it does")
    stale_at = out.index(STALE_TAIL_HEADING)
    assert out[stale_at:].startswith(f"{STALE_TAIL_HEADING}\n{STALE_TAIL_SENTENCE}\n")
    assert '- a: shipped hook — read_doc("a@diff")' in out


def test_append_adds_a_trailing_unfiled_heading_once() -> None:
    once = append_unfiled("# i\n\n## Procedures\n- a: x\n", "- b: y")
    assert once == "# i\n\n## Procedures\n- a: x\n\n## Unfiled\n- b: y\n"
    twice = append_unfiled(once, "- c: w")
    assert twice.count("## Unfiled") == 1
    assert twice.endswith("## Unfiled\n- b: y\n- c: w\n")


def test_append_keeps_a_trailing_ignored_line_last() -> None:
    """Unfiled after `ignored:` would read as if the ignored ids were its entries."""
    once = append_unfiled("# i\n\n## Procedures\n- a: x\n\nignored: z\n\n", "- b: y")
    assert once == "# i\n\n## Procedures\n- a: x\n\n## Unfiled\n- b: y\n\nignored: z\n"
    twice = append_unfiled(once, "- c: w")
    assert twice == "# i\n\n## Procedures\n- a: x\n\n## Unfiled\n- b: y\n- c: w\n\nignored: z\n"
    assert parse(twice).ignored == ["z"] and parse(twice).entry_ids == {"a", "b", "c"}


def test_append_goes_into_an_existing_unfiled_section_that_is_not_last() -> None:
    text = "# i\n\n## Unfiled\n- a: x\n\nA note.\n\n## Procedures\n- p: q\n"
    out = append_unfiled(text, "- b: y")
    assert out == "# i\n\n## Unfiled\n- a: x\n- b: y\n\nA note.\n\n## Procedures\n- p: q\n"
    assert parse(out).entry_count == 3


def test_hide_ignored_shows_a_count_instead_of_the_ids() -> None:
    out = render(
        parse(SEED), exists=lambda i: True, shadows=lambda i: False, new_docs=[], stale_docs=[], hide_ignored=True
    )
    assert "measure-smlm" not in out and "ratiometric-fret" not in out
    assert "ignored: (2 shipped docs, ids not shown here)" in out
    assert "ignored: (1 shipped doc, ids not shown here)" in out


def test_append_under_files_below_a_named_heading_of_any_level_or_case() -> None:
    text = "# i\n\n## Procedures\n- a: x\n\n### lab\n- b: y\nA note.\n### Other\n- c: z\n"
    out = append_under(text, "- d: w", "Lab")
    assert out == "# i\n\n## Procedures\n- a: x\n\n### lab\n- b: y\n- d: w\nA note.\n### Other\n- c: z\n"
    assert filed_heading(out, "Lab") == "### lab"
    assert append_under(text, "- d: w", "## Procedures").startswith("# i\n\n## Procedures\n- a: x\n- d: w\n")


def test_append_under_a_new_heading_goes_before_a_trailing_ignored_line() -> None:
    out = append_under("# i\n\n## References\n- a: x\n\nignored: z\n", "- b: y", "Lab")
    assert out == "# i\n\n## References\n- a: x\n\n## Lab\n- b: y\n\nignored: z\n"
    assert headings_above(parse(out))[out.split("\n").index("- b: y")] == ("i", "Lab")
    assert filed_heading(out, "lab") == "## Lab"


def test_prose_keeps_what_the_agent_wrote_and_drops_entries_ignored_ids_and_bare_headings() -> None:
    text = (
        "# Our docs\n\nRead the lab rules first.\n\n## References\n- kernel: run code\n\n"
        "## Lab rules\nAreas in square microns.\n- lab/scope: our scope\n\nignored: flatfield\n"
    )
    kept = prose(text)
    assert "Read the lab rules first." in kept and "## Lab rules\nAreas in square microns." in kept
    assert "kernel" not in kept and "lab/scope" not in kept and "flatfield" not in kept
    assert "## References" not in kept
