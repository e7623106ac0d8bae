"""Tolerant reading of doc files and their frontmatter (biopb_mcp/docs/frontmatter.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from biopb_mcp.docs import FILE_MAX_BYTES
from biopb_mcp.docs.frontmatter import parse, read_text
from biopb_mcp.errors import DocUnreadable, Unreadable


def test_scalars_inline_lists_and_unknown_keys() -> None:
    parsed = parse(
        "---\ndescription: 'Correct uneven illumination'\npackages: [numpy~=2.0, scipy~=1.11]\n"
        "updated: 2026-01-02\nkind: procedure\n---\n# Flatfield\n\nBody.\n"
    )
    assert parsed.description == "Correct uneven illumination"
    assert parsed.packages == ["numpy~=2.0", "scipy~=1.11"]
    assert parsed.updated == "2026-01-02"
    assert parsed.title == "Flatfield"
    assert parsed.body == "# Flatfield\n\nBody.\n"


def test_packages_as_a_comma_separated_scalar_and_a_yaml_list() -> None:
    assert parse("---\npackages: numpy~=2.0, tifffile~=2024.1\n---\n").packages == ["numpy~=2.0", "tifffile~=2024.1"]
    assert parse("---\npackages:\n  - numpy~=2.0\n  - scipy~=1.11\n---\n").packages == ["numpy~=2.0", "scipy~=1.11"]


def test_garbage_frontmatter_is_never_fatal() -> None:
    text = "---\n: : [unclosed\n\tfoo: {bar\n- just a list item\ndescription: [half\n---\n# T\n\nFirst para.\n"
    parsed = parse(text)
    assert parsed.title == "T"
    assert parsed.description == "[half"


def test_unclosed_frontmatter_is_plain_body() -> None:
    parsed = parse("---\ndescription: x\n# Title\n\nPara one.\n")
    assert parsed.meta == {}
    assert parsed.title == "Title"


def test_description_falls_back_to_first_paragraph_as_one_line() -> None:
    body = "# Title\n\n```python\ncode()\n```\n\nFirst line of the para\ncontinues here.\n\nSecond.\n"
    parsed = parse(body)
    assert parsed.description == "First line of the para continues here."
    long = parse("word " * 100)
    assert len(long.description) <= 200 and long.description.endswith("…")


def test_title_is_none_without_h1_and_ignores_fenced_hash_lines() -> None:
    assert parse("```\n# not a title\n```\n## Sub\n").title is None


def test_bom_and_crlf_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "x.md"
    path.write_bytes(b"\xef\xbb\xbf---\r\ndescription: win\r\n---\r\n# Win\r\n\r\nText.\r\n")
    text = read_text(path)
    assert text == "---\ndescription: win\n---\n# Win\n\nText.\n"
    assert parse(text).description == "win"


@pytest.mark.parametrize(
    ("content", "says", "why", "facts"),
    [
        (
            b"caf\xe9 au lait\n",
            "not UTF-8 text (byte 0xe9 at offset 3)",
            Unreadable.NOT_UTF8,
            {"byte": 0xE9, "offset": 3},
        ),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "NUL bytes", Unreadable.BINARY, {}),
    ],
)
def test_non_text_files_are_unreadable_naming_the_file(
    tmp_path: Path, content: bytes, says: str, why: Unreadable, facts: dict[str, int]
) -> None:
    """The error states what is wrong and says which case it is; text.unreadable adds the step."""
    path = tmp_path / "bad.md"
    path.write_bytes(content)
    with pytest.raises(DocUnreadable) as exc_info:
        read_text(path)
    assert str(path) in str(exc_info.value) and says in str(exc_info.value)
    assert exc_info.value.why is why and exc_info.value.details == {"path": str(path), **facts}


def test_oversized_file_and_directory_are_unreadable(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_bytes(b"a" * (FILE_MAX_BYTES + 1))
    with pytest.raises(DocUnreadable, match="over the") as too_big:
        read_text(big)
    assert too_big.value.why is Unreadable.TOO_BIG
    assert too_big.value.details == {"path": str(big), "size": FILE_MAX_BYTES + 1, "limit": FILE_MAX_BYTES}
    (tmp_path / "dir.md").mkdir()
    with pytest.raises(DocUnreadable, match="is a directory") as directory:
        read_text(tmp_path / "dir.md")
    assert directory.value.why is Unreadable.DIRECTORY
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "absent.md")
