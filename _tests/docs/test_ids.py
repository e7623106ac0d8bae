"""Id grammar, `@` views and containment of ids in their tier (biopb_mcp/docs/ids.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from biopb_mcp.docs import ID_MAX_CHARS
from biopb_mcp.docs.ids import Ref, check_id, check_write_id, parse_ref
from biopb_mcp.docs.tier import doc_path, walk_tier
from biopb_mcp.errors import DocProblem, InvalidDocId


@pytest.mark.parametrize(
    "doc_id",
    ["flatfield", "my-lab/nuclei_protocol", "_banked", "a/b/c.d", "v1.2", "index", "x" * ID_MAX_CHARS],
)
def test_valid_ids_are_accepted(doc_id: str) -> None:
    assert check_id(doc_id) == doc_id


@pytest.mark.parametrize(
    ("doc_id", "says"),
    [
        ("../x", "'..' segment"),
        ("a/../../x", "'..' segment"),
        ("/abs", "absolute"),
        ("a//b", "empty segment"),
        ("a/./b", "'.' segment"),
        (".hidden", "starting with '.'"),
        ("a/.git/x", "starting with '.'"),
        ("index/", "reserved for collections"),
        ("x@diff", "'@' is never part of an id"),
        ("", "Empty doc id"),
        ("has space", "contains ' '"),
        ("win\\path", "contains '\\\\'"),  # and to use '/' instead: text/'s (test_doc_messages)
        ("x" * (ID_MAX_CHARS + 1), f"{ID_MAX_CHARS + 1} characters; ids are at most {ID_MAX_CHARS}"),
    ],
)
def test_invalid_ids_are_refused_with_the_rule_broken(doc_id: str, says: str) -> None:
    with pytest.raises(InvalidDocId) as exc_info:
        check_id(doc_id)
    assert says in str(exc_info.value)


def test_views_parse_after_the_at_sign() -> None:
    assert parse_ref("flatfield") == Ref("flatfield")
    assert parse_ref("a/b@diff") == Ref("a/b", "diff")
    assert parse_ref("a@history") == Ref("a", "history")
    assert parse_ref("a@v12") == Ref("a", "version", 12)
    assert parse_ref("index@v3").text == "index@v3"


@pytest.mark.parametrize("ref", ["a@v0", "a@v", "a@vx", "a@latest", "a@diff@diff", "../a@diff"])
def test_unknown_views_and_bad_ids_before_the_view_are_refused(ref: str) -> None:
    with pytest.raises(InvalidDocId):
        parse_ref(ref)


def test_a_view_is_refused_as_a_write_target_naming_the_doc() -> None:
    """The doc to write instead is named by the text layer (test_doc_messages), from doc_id."""
    with pytest.raises(InvalidDocId, match=r"read-only view") as caught:
        check_write_id("x@diff")
    assert caught.value.kind is DocProblem.READ_ONLY_VIEW and caught.value.doc_id == "x"


def test_symlink_out_of_the_tier_is_refused_and_inside_is_allowed(tmp_path: Path) -> None:
    tier, outside = tmp_path / "tier", tmp_path / "outside"
    tier.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    (tier / "real.md").write_text("real")
    os.symlink(outside / "secret.md", tier / "evil.md")
    os.symlink(outside, tier / "sub")
    os.symlink(tier / "real.md", tier / "alias.md")
    with pytest.raises(InvalidDocId, match="outside the docs tier"):
        doc_path(tier, "evil")
    with pytest.raises(InvalidDocId, match="outside the docs tier"):
        doc_path(tier, "sub/new")
    assert doc_path(tier, "alias") == tier / "alias.md"
    assert doc_path(tier, "a/b") == tier / "a" / "b.md"
    listed = [doc_id for doc_id, _ in walk_tier(tier)]
    assert listed == ["alias", "real"]


def test_walk_skips_hidden_names_the_index_and_names_outside_the_grammar(tmp_path: Path) -> None:
    (tmp_path / ".history").mkdir()
    (tmp_path / ".history" / "x.md").write_text("x")
    (tmp_path / "index.md").write_text("# i")
    (tmp_path / "bad name.md").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "dir.md").mkdir()
    (tmp_path / "dir.md" / "inner.md").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "index.md").write_text("x")
    assert sorted(i for i, _ in walk_tier(tmp_path) if i) == ["dir.md/inner", "sub/index"]
    with_invalid = [p.name for i, p in walk_tier(tmp_path, include_invalid=True) if i is None]
    assert with_invalid == ["bad name.md"]
